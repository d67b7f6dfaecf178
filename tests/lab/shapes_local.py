"""More kube-proxy and portmap shapes, for the cells of issue 22 (to be folded into `shapes.py`).

- traffic policies Local (kubernetes `pkg/proxy/iptables/proxier.go` and `nftables/proxier.go`,
  v1.28+): the external chain short-circuits pods (`-s <clusterCIDR>`) and the node (`--src-type
  LOCAL` / `fib saddr type local`) to the Service's endpoints, ends with a jump to the local
  endpoints only when the node has one, and the filter table DROPs what is left ("has no local
  endpoints"); an internalTrafficPolicy Local ClusterIP without a local endpoint is DROPped.
  IPVS (`pkg/proxy/ipvs/proxier.go`): `KUBE-NODE-PORT-LOCAL-TCP` members RETURN from KUBE-NODE-PORT
  (v1.11+) or are ACCEPTed (v1.10, kubernetes#61329).
- kube-proxy without a local detector (no clusterCIDR, detectLocalMode ClusterCIDR: the detector is
  a no-op): `cluster_cidr=None` leaves out the external chain's pod short-circuit, which both
  proxiers write only `if proxier.localDetector.IsImplemented()` (`pkg/proxy/iptables/proxier.go`
  and `pkg/proxy/nftables/proxier.go`, syncProxyRules; before v1.18 `if len(proxier.clusterCIDR) >
  0`); the node's own short-circuit (`--src-type LOCAL`, `fib saddr type local`) stays.
- nftables mode with `nodePortAddresses: primary`, its default (`cmd/kube-proxy/app/server_linux.go`
  platformApplyDefaults): `ip daddr @nodeport-ips` instead of `fib daddr type local` in the
  `services` and `nodeport-endpoints-check` chains (setupNFTables).
- the insertion history of portmap < v0.7.5 (`prependUnique` in chain.go: a rule is inserted at
  position 1 only when it is absent, for the PREROUTING/OUTPUT jumps and for each container's
  CNI-DN jump in CNI-HOSTPORT-DNAT) and of kube-proxy (`EnsureRule(Prepend)`, likewise).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import shapes
from netlab import CLUSTER_CIDR, NODE_IP
from shapes import Endpoint, LabService, sep_chain, svc_chain

MASQ = shapes.MASQ_MARK


@dataclass(frozen=True)
class PolicyService:
    """A Service with traffic policies: `endpoints` anywhere, `local` those on this node."""

    service: LabService
    external_local: bool = False
    internal_local: bool = False
    local: tuple[Endpoint, ...] = ()


# --- iptables mode ------------------------------------------------------------------------------

def iptables_policies(services: list[PolicyService], cluster_cidr: str | None = CLUSTER_CIDR) -> str:
    """`cluster_cidr` None: kube-proxy without a local detector (no pod short-circuit)."""
    nat_chains = ["KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ"]
    nat = [f"-A KUBE-MARK-MASQ -j MARK --or-mark {MASQ}",
           f"-A KUBE-POSTROUTING -m mark ! --mark {MASQ}/{MASQ} -j RETURN",
           f"-A KUBE-POSTROUTING -j MARK --xor-mark {MASQ}",
           '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE']
    filter_chains = ["KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-FORWARD"]
    filters: list[str] = []
    for policy in services:
        service, proto = policy.service, policy.service.protocol
        label = service.port_label
        svc, svl, ext = svc_chain(service), svc_chain(service, "KUBE-SVL-"), svc_chain(service, "KUBE-EXT-")
        nat_chains += [svc, ext] + ([svl] if policy.local else [])
        for chain, endpoints in ((svc, service.endpoints), (svl, policy.local)):
            for index, endpoint in enumerate(endpoints):
                sep = sep_chain(service, endpoint)
                nat_chains.append(sep)
                balance = (f"-m statistic --mode random --probability {1 / (len(endpoints) - index):.11f} "
                           if index < len(endpoints) - 1 else "")
                nat.append(f'-A {chain} -m comment --comment "{label} -> {endpoint.ip}:{endpoint.port}" {balance}'
                           f"-j {sep}")
                if chain == svc:
                    nat.append(f'-A {sep} -m comment --comment "{label}" -s {endpoint.ip}/32 -j KUBE-MARK-MASQ')
                    nat.append(f'-A {sep} -m comment --comment "{label}" -m {proto} -p {proto} '
                               f"-j DNAT --to-destination {endpoint.ip}:{endpoint.port}")
        internal = svl if policy.internal_local else svc
        if not policy.internal_local or policy.local:
            nat.append(f'-A KUBE-SERVICES -m comment --comment "{label} cluster IP" -m {proto} -p {proto} '
                       f"-d {service.cluster_ip}/32 --dport {service.port} -j {internal}")
        else:
            filters.append(f'-A KUBE-SERVICES -m comment --comment "{label} has no local endpoints" -m {proto} '
                           f"-p {proto} -d {service.cluster_ip}/32 --dport {service.port} -j DROP")
        if service.node_port:
            nat.append(f'-A KUBE-NODEPORTS -m comment --comment "{label}" -m {proto} -p {proto} '
                       f"--dport {service.node_port} -j {ext}")
            if policy.external_local:
                # pkg/proxy/iptables/proxier.go, syncProxyRules ("Set up external traffic handling"): the
                # pods' short-circuit is written only `if proxier.localDetector.IsImplemented()`
                if cluster_cidr:
                    nat.append(f'-A {ext} -m comment --comment "pod traffic for {label} external destinations" '
                               f"-s {cluster_cidr} -j {svc}")
                nat += [f'-A {ext} -m comment --comment "masquerade LOCAL traffic for {label} external destinations" '
                        f"-m addrtype --src-type LOCAL -j KUBE-MARK-MASQ",
                        f'-A {ext} -m comment --comment "route LOCAL traffic for {label} external destinations" '
                        f"-m addrtype --src-type LOCAL -j {svc}"]
                if policy.local:  # "Anything else falls thru to the appropriate policy chain."
                    nat.append(f"-A {ext} -j {svl}")
                else:
                    filters.append(f'-A KUBE-EXTERNAL-SERVICES -m comment --comment "{label} has no local endpoints" '
                                   f"-m addrtype --dst-type LOCAL -m {proto} -p {proto} --dport {service.node_port} "
                                   f"-j DROP")
            else:
                nat += [f"-A {ext} -j KUBE-MARK-MASQ", f"-A {ext} -j {svc}"]
    nat.append('-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule '
               'in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS')
    return shapes._restore({"nat": (nat_chains, nat), "filter": (filter_chains, filters)})


# --- IPVS mode ------------------------------------------------------------------------------------

def ipvs_policies(services: list[PolicyService], *, local_accept: bool = False) -> tuple[list[tuple[str, ...]], str]:
    """(ipset commands, iptables-restore text): shapes.ipvs_mode plus KUBE-NODE-PORT-LOCAL-TCP,
    whose members RETURN (v1.11+) or are ACCEPTed (v1.10) ahead of the masquerade mark."""
    plain = [policy.service for policy in services]
    commands = shapes.ipvs_ipsets(plain)
    commands.append(("create", "KUBE-NODE-PORT-LOCAL-TCP", "bitmap:port", "range", "0-65535", "-exist"))
    for policy in services:
        if policy.external_local and policy.service.node_port:
            commands.append(("add", "KUBE-NODE-PORT-LOCAL-TCP", str(policy.service.node_port), "-exist"))
    text = shapes.ipvs_mode(accept_cluster_ips=not local_accept)
    verdict = "ACCEPT" if local_accept else "RETURN"
    local_rule = (f"-A KUBE-NODE-PORT -p tcp -m comment --comment \"Kubernetes nodeport TCP port with "
                  f"externalTrafficPolicy=local\" -m set --match-set KUBE-NODE-PORT-LOCAL-TCP dst -j {verdict}")
    marker = "-A KUBE-NODE-PORT -p tcp"
    head, tail = text.split(marker, 1)
    return commands, head + local_rule + "\n" + marker + tail


# --- nftables mode --------------------------------------------------------------------------------

def nftables_primary(services: list[LabService], primary: str = NODE_IP) -> str:
    """shapes.nftables_mode with `nodePortAddresses: primary` (nftables mode's default)."""
    text = shapes.nftables_mode(services)
    all_addresses = "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports"
    endpoints_check = "ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports"
    assert all_addresses in text and endpoints_check in text, "shapes.nftables_mode changed its NodePort rules"
    text = text.replace(all_addresses, "ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports")
    text = text.replace(endpoints_check, "ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports")
    cluster_ips = ' set cluster-ips {'
    return text.replace(cluster_ips, f' set nodeport-ips {{ type ipv4_addr; comment "IPs that accept NodePort '
                                     f'traffic"; elements = {{ {primary} }} }}\n{cluster_ips}', 1)


def nftables_policies(services: list[PolicyService], cluster_cidr: str | None = CLUSTER_CIDR) -> str:
    """Elements and chains added to shapes.nftables_mode([]) for Services with traffic policies.
    `cluster_cidr` None: kube-proxy without a local detector (no pod short-circuit)."""
    lines = []
    for policy in services:
        service, proto = policy.service, policy.service.protocol
        base = f"{shapes._hash(service.port_label + proto, 8)}-{service.namespace}/{service.name}/{proto}/" \
               f"{service.port_name}"
        chains = {"service": f"service-{base}", "local": f"local-{base}", "external": f"external-{base}"}
        for kind, endpoints in (("service", service.endpoints), ("local", policy.local)):
            if not endpoints:
                continue
            names = []
            for endpoint in endpoints:
                name = f"endpoint-{shapes._hash(base + kind + endpoint.ip, 8)}-{kind}__{endpoint.ip}/{endpoint.port}"
                names.append(name)
                lines += [f"add chain ip kube-proxy {name}",
                          f"add rule ip kube-proxy {name} ip saddr {endpoint.ip} jump mark-for-masquerade",
                          f"add rule ip kube-proxy {name} meta l4proto {proto} dnat to {endpoint.ip}:{endpoint.port}"]
            spread = ", ".join(f"{index} : goto {name}" for index, name in enumerate(names))
            lines += [f"add chain ip kube-proxy {chains[kind]}",
                      f"add rule ip kube-proxy {chains[kind]} numgen random mod {len(names)} vmap {{ {spread} }}"]
        internal = chains["local"] if policy.internal_local else chains["service"]
        if not policy.internal_local or policy.local:
            lines.append(f"add element ip kube-proxy service-ips {{ {service.cluster_ip} . {proto} . {service.port} : "
                         f"goto {internal} }}")
        else:
            lines.append(f"add element ip kube-proxy no-endpoint-services {{ {service.cluster_ip} . {proto} . "
                         f"{service.port} : drop }}")
        if service.node_port:
            external = chains["external"]
            lines.append(f"add chain ip kube-proxy {external}")
            if policy.external_local:
                # pkg/proxy/nftables/proxier.go, syncProxyRules: "short-circuit pod traffic" only
                # `if proxier.localDetector.IsImplemented()`
                if cluster_cidr:
                    lines.append(f"add rule ip kube-proxy {external} ip saddr {cluster_cidr} goto {chains['service']}")
                lines += [f"add rule ip kube-proxy {external} fib saddr type local jump mark-for-masquerade",
                          f"add rule ip kube-proxy {external} fib saddr type local goto {chains['service']}"]
                if policy.local:
                    lines.append(f"add rule ip kube-proxy {external} goto {chains['local']}")
                else:
                    lines.append(f"add element ip kube-proxy no-endpoint-nodeports {{ {proto} . {service.node_port} : "
                                 f"drop }}")
            else:
                lines += [f"add rule ip kube-proxy {external} jump mark-for-masquerade",
                          f"add rule ip kube-proxy {external} goto {chains['service']}"]
            lines.append(f"add element ip kube-proxy service-nodeports {{ {proto} . {service.node_port} : "
                         f"goto {external} }}")
    return "\n".join(lines) + "\n"


# --- insertion history ----------------------------------------------------------------------------

PORTMAP_JUMP = ("-m", "addrtype", "--dst-type", "LOCAL", "-j", "CNI-HOSTPORT-DNAT")


def insert_at_top(node, table: str, chain: str, rule: tuple[str, ...]) -> None:
    """Delete `rule` and insert it at position 1: what an insert-when-absent does after a flush."""
    node.iptables("-t", table, "-D", chain, *rule)
    node.iptables("-t", table, "-I", chain, "1", *rule)


def portmap_inserted_last(node) -> None:
    """portmap < v0.7.5's jumps inserted at the top after kube-proxy's (a hostPort pod added after
    kube-proxy started): made by moving the real plugin's jumps there."""
    for chain in ("PREROUTING", "OUTPUT"):
        insert_at_top(node, "nat", chain, PORTMAP_JUMP)


def kube_proxy_inserted_last(node, mode: str) -> None:
    """kube-proxy's jumps re-created at the top after portmap's (after a flush, or a kube-proxy that
    deleted and re-created them): `EnsureRule(Prepend)` inserts only what is absent."""
    for jump in shapes.iptables_jumps(mode):
        table, chain, rule = jump[1], jump[3], jump[5:]
        if table == "nat" and chain in ("PREROUTING", "OUTPUT"):
            insert_at_top(node, table, chain, rule)


def prepend_container_jumps(node, container_id: str) -> None:
    """portmap < v0.7.5 inserted each container's CNI-DN jump at the top of CNI-HOSTPORT-DNAT: after a
    real ADD, move that container's jumps there (the newest container's entries come first)."""
    rules = node.node_run("iptables-save", "-t", "nat").stdout.splitlines()
    mine = [line for line in rules if line.startswith("-A CNI-HOSTPORT-DNAT ") and container_id in line]
    for line in reversed(mine):
        words = shlex.split(line)[2:]
        node.iptables("-t", "nat", "-D", "CNI-HOSTPORT-DNAT", *words)
        node.iptables("-t", "nat", "-I", "CNI-HOSTPORT-DNAT", "1", *words)
