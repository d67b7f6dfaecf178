"""Rules written in the shapes other components write them, for the handlers the lab cannot run.

No kube-proxy runs here (it needs an API server) and the packaged portmap (v1.1.1) has no
nftables backend, so these functions write what those components write, read from their source:

- kube-proxy iptables mode: kubernetes `pkg/proxy/iptables/proxier.go` (v1.28+: KUBE-SERVICES
  jumps prepended to PREROUTING/OUTPUT, KUBE-SVC-/KUBE-SEP-/KUBE-EXT- chains, the
  `kubernetes service nodeports` tail call with `--dst-type LOCAL`, filter-table REJECTs in
  KUBE-SERVICES and KUBE-EXTERNAL-SERVICES for Services without endpoints).
- kube-proxy IPVS mode: `pkg/proxy/ipvs/proxier.go` (ClusterIPs bound to `kube-ipvs0`, ipsets
  KUBE-CLUSTER-IP and KUBE-NODE-PORT-TCP/UDP, the masquerade rules, KUBE-NODE-PORT that only
  marks, and `acceptIPVSTraffic`: `-m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT` at the
  end of KUBE-SERVICES, added by kubernetes#62718 for v1.11). `accept_cluster_ips=False` writes
  the older shape without that rule. The kernel here has no IPVS module, so `kube-ipvs0` is a
  bridge without ports (its addresses are local addresses all the same) and the lab only
  observes whether the nat table leaves a packet to local delivery, where IPVS would take it.
- kube-proxy nftables mode: `pkg/proxy/nftables/proxier.go` (v1.31+: table `ip kube-proxy`,
  filter chains at priority dstnat-10, nat-prerouting/nat-output at dstnat, the `services`
  chain's vmap on `@service-ips` and the `fib daddr type local` NodePort dispatch, REJECTs for
  Services without endpoints).
- portmap's nftables backend, containernetworking/plugins `plugins/meta/portmap/portmap_nftables.go`:
  v1.6.1-v1.8.x (prerouting jumps to the hostport chains for any destination) and v1.9.0+
  (`fib daddr type local jump hostports_all`).
- the legacy order of portmap < v0.7.5 (`prependUnique`: jumps inserted at the top of
  PREROUTING and OUTPUT), made by moving the real plugin's jumps to the top.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from netlab import CLUSTER_CIDR

MASQ_MARK = "0x4000"


@dataclass(frozen=True)
class Endpoint:
    ip: str
    port: int


@dataclass(frozen=True)
class LabService:
    namespace: str
    name: str
    port_name: str
    protocol: str  # tcp | udp
    cluster_ip: str
    port: int
    node_port: int | None = None
    endpoints: tuple[Endpoint, ...] = ()
    external_ips: tuple[str, ...] = ()

    @property
    def port_label(self) -> str:
        return f"{self.namespace}/{self.name}:{self.port_name}"


def _hash(text: str, length: int = 16) -> str:
    """kube-proxy's chain suffix: base32 of sha256, first 16 characters."""
    return base64.b32encode(hashlib.sha256(text.encode()).digest()).decode()[:length]


def svc_chain(service: LabService, prefix: str = "KUBE-SVC-") -> str:
    return prefix + _hash(service.port_label + service.protocol)


def sep_chain(service: LabService, endpoint: Endpoint) -> str:
    return "KUBE-SEP-" + _hash(service.port_label + service.protocol + f"{endpoint.ip}:{endpoint.port}")


# --- iptables mode -------------------------------------------------------------------------------

def iptables_mode(services: list[LabService], *, localhost_node_ports: bool = True,
                  cluster_cidr: str | None = CLUSTER_CIDR) -> str:
    """`cluster_cidr` None: kube-proxy without clusterCIDR (no `! -s` masquerade rule)."""
    nat_chains = ["KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ"]
    nat: list[str] = [
        f"-A KUBE-MARK-MASQ -j MARK --or-mark {MASQ_MARK}",
        f"-A KUBE-POSTROUTING -m mark ! --mark {MASQ_MARK}/{MASQ_MARK} -j RETURN",
        f"-A KUBE-POSTROUTING -j MARK --xor-mark {MASQ_MARK}",
        '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE',
    ]
    filter_chains = ["KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-FORWARD"]
    filters: list[str] = []
    for service in services:
        label, proto = service.port_label, service.protocol
        if not service.endpoints:
            filters.append(f'-A KUBE-SERVICES -m comment --comment "{label} has no endpoints" -m {proto} -p {proto} '
                           f"-d {service.cluster_ip}/32 --dport {service.port} -j REJECT --reject-with icmp-port-unreachable")
            if service.node_port:
                filters.append(f'-A KUBE-EXTERNAL-SERVICES -m comment --comment "{label} has no endpoints" '
                               f"-m addrtype --dst-type LOCAL -m {proto} -p {proto} --dport {service.node_port} "
                               f"-j REJECT --reject-with icmp-port-unreachable")
            for address in service.external_ips:
                filters.append(f'-A KUBE-EXTERNAL-SERVICES -m comment --comment "{label} has no endpoints" '
                               f"-m {proto} -p {proto} -d {address}/32 --dport {service.port} "
                               f"-j REJECT --reject-with icmp-port-unreachable")
            continue
        svc, ext = svc_chain(service), svc_chain(service, "KUBE-EXT-")
        nat_chains.append(svc)
        nat.append(f'-A KUBE-SERVICES -m comment --comment "{label} cluster IP" -m {proto} -p {proto} '
                   f"-d {service.cluster_ip}/32 --dport {service.port} -j {svc}")
        if cluster_cidr:
            nat.append(f'-A {svc} -m comment --comment "{label} cluster IP" -m {proto} -p {proto} '
                       f"-d {service.cluster_ip}/32 --dport {service.port} ! -s {cluster_cidr} -j KUBE-MARK-MASQ")
        for address in service.external_ips:
            nat.append(f'-A KUBE-SERVICES -m comment --comment "{label} external IP" -m {proto} -p {proto} '
                       f"-d {address}/32 --dport {service.port} -j {ext}")
        if service.node_port:
            nat.append(f'-A KUBE-NODEPORTS -m comment --comment "{label}" -m {proto} -p {proto} '
                       f"--dport {service.node_port} -j {ext}")
        if service.node_port or service.external_ips:
            nat_chains.append(ext)
            nat.append(f'-A {ext} -m comment --comment "masquerade traffic for {label} external destinations" '
                       f"-j KUBE-MARK-MASQ")
            nat.append(f"-A {ext} -j {svc}")
        count = len(service.endpoints)
        for index, endpoint in enumerate(service.endpoints):
            sep = sep_chain(service, endpoint)
            nat_chains.append(sep)
            balance = (f"-m statistic --mode random --probability {1 / (count - index):.11f} "
                       if index < count - 1 else "")
            nat.append(f'-A {svc} -m comment --comment "{label} -> {endpoint.ip}:{endpoint.port}" {balance}-j {sep}')
            nat.append(f'-A {sep} -m comment --comment "{label}" -s {endpoint.ip}/32 -j KUBE-MARK-MASQ')
            nat.append(f'-A {sep} -m comment --comment "{label}" -m {proto} -p {proto} '
                       f"-j DNAT --to-destination {endpoint.ip}:{endpoint.port}")
    local = "-m addrtype --dst-type LOCAL" + ("" if localhost_node_ports else " ! -d 127.0.0.0/8")
    nat.append('-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last '
               f'rule in this chain" {local} -j KUBE-NODEPORTS')
    return _restore({"nat": (nat_chains, nat), "filter": (filter_chains, filters)})


def iptables_jumps(mode: str) -> list[tuple[str, ...]]:
    """kube-proxy's jumps from the built-in chains, each `EnsureRule(Prepend, ...)`: `iptables -I`."""
    service_portals = ("-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")
    jumps = [
        ("-t", "nat", "-I", "PREROUTING", "1", *service_portals),
        ("-t", "nat", "-I", "OUTPUT", "1", *service_portals),
        ("-t", "nat", "-I", "POSTROUTING", "1", "-m", "comment", "--comment", "kubernetes postrouting rules",
         "-j", "KUBE-POSTROUTING"),
    ]
    if mode == "iptables":
        new = ("-m", "conntrack", "--ctstate", "NEW")
        jumps += [
            ("-t", "filter", "-I", "INPUT", "1", *new, "-m", "comment", "--comment",
             "kubernetes externally-visible service portals", "-j", "KUBE-EXTERNAL-SERVICES"),
            ("-t", "filter", "-I", "FORWARD", "1", *new, "-m", "comment", "--comment",
             "kubernetes externally-visible service portals", "-j", "KUBE-EXTERNAL-SERVICES"),
            ("-t", "filter", "-I", "FORWARD", "1", *new, *service_portals),
            ("-t", "filter", "-I", "OUTPUT", "1", *new, *service_portals),
        ]
    return jumps


def _restore(tables: dict[str, tuple[list[str], list[str]]]) -> str:
    lines = []
    for table, (chains, rules) in tables.items():
        lines.append(f"*{table}")
        lines += [f":{chain} - [0:0]" for chain in dict.fromkeys(chains)]
        lines += rules
        lines.append("COMMIT")
    return "\n".join(lines) + "\n"


# --- IPVS mode -----------------------------------------------------------------------------------

def ipvs_ipsets(services: list[LabService]) -> list[tuple[str, ...]]:
    commands = [("create", "KUBE-CLUSTER-IP", "hash:ip,port", "-exist"),
                ("create", "KUBE-NODE-PORT-TCP", "bitmap:port", "range", "0-65535", "-exist"),
                ("create", "KUBE-NODE-PORT-UDP", "bitmap:port", "range", "0-65535", "-exist"),
                ("create", "KUBE-EXTERNAL-IP", "hash:ip,port", "-exist")]
    for service in services:
        commands.append(("add", "KUBE-CLUSTER-IP", f"{service.cluster_ip},{service.protocol}:{service.port}", "-exist"))
        for address in service.external_ips:
            commands.append(("add", "KUBE-EXTERNAL-IP", f"{address},{service.protocol}:{service.port}", "-exist"))
        if service.node_port:
            commands.append(("add", f"KUBE-NODE-PORT-{service.protocol.upper()}", str(service.node_port), "-exist"))
    return commands


def ipvs_mode(*, cluster_cidr: str | None = CLUSTER_CIDR, accept_cluster_ips: bool = True,
              vip_masquerade: bool = True) -> str:
    """`cluster_cidr` None: kube-proxy without clusterCIDR, which masquerades what the node sends
    from a VIP (`src,dst`) since v1.11 and nothing before (`vip_masquerade=False`)."""
    nat_chains = ["KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-NODE-PORT"]
    masquerade_comment = '-m comment --comment "Kubernetes service cluster ip + port for masquerade purpose"'
    if cluster_cidr:
        masquerade = f"-A KUBE-SERVICES {masquerade_comment} -m set --match-set KUBE-CLUSTER-IP dst,dst " \
                     f"! -s {cluster_cidr} -j KUBE-MARK-MASQ"
    elif vip_masquerade:  # no clusterCIDR: masquerade what the node sends from a VIP (kubernetes#63319, v1.11)
        masquerade = f"-A KUBE-SERVICES {masquerade_comment} -m set --match-set KUBE-CLUSTER-IP src,dst " \
                     f"-j KUBE-MARK-MASQ"
    else:
        masquerade = ""
    nat = [
        f"-A KUBE-MARK-MASQ -j MARK --or-mark {MASQ_MARK}",
        f"-A KUBE-POSTROUTING -m mark ! --mark {MASQ_MARK}/{MASQ_MARK} -j RETURN",
        f"-A KUBE-POSTROUTING -j MARK --xor-mark {MASQ_MARK}",
        '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE',
        *([masquerade] if masquerade else []),
        '-A KUBE-SERVICES -m comment --comment "Kubernetes service external ip + port for masquerade and filter '
        'purpose" -m set --match-set KUBE-EXTERNAL-IP dst,dst -j KUBE-MARK-MASQ',
        '-A KUBE-SERVICES -m comment --comment "Kubernetes service external ip + port for masquerade and filter '
        'purpose" -m set --match-set KUBE-EXTERNAL-IP dst,dst -m addrtype --dst-type LOCAL -j ACCEPT',
        "-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT",
        '-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" '
        "-m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ",
        '-A KUBE-NODE-PORT -p udp -m comment --comment "Kubernetes nodeport UDP port for masquerade purpose" '
        "-m set --match-set KUBE-NODE-PORT-UDP dst -j KUBE-MARK-MASQ",
    ]
    if accept_cluster_ips:
        nat.append("-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT")
    return _restore({"nat": (nat_chains, nat)})


# --- nftables mode -------------------------------------------------------------------------------

def nftables_mode(services: list[LabService]) -> str:
    """Table `ip kube-proxy` as kube-proxy v1.31+ writes it (no nodePortAddresses: every local IP)."""
    chains: list[str] = []
    service_ips, node_ports, no_endpoint_services, no_endpoint_node_ports, cluster_ips = [], [], [], [], []
    for service in services:
        proto = service.protocol
        cluster_ips.append(service.cluster_ip)
        base = f"{_hash(service.port_label + proto, 8)}-{service.namespace}/{service.name}/{proto}/{service.port_name}"
        if not service.endpoints:
            for address in (service.cluster_ip, *service.external_ips):
                no_endpoint_services.append(f"{address} . {proto} . {service.port} : goto reject-chain")
            if service.node_port:
                no_endpoint_node_ports.append(f"{proto} . {service.node_port} : goto reject-chain")
            continue
        endpoint_chains = []
        for endpoint in service.endpoints:
            name = f"endpoint-{_hash(base + endpoint.ip, 8)}-{service.namespace}/{service.name}/{proto}/" \
                   f"{service.port_name}__{endpoint.ip}/{endpoint.port}"
            endpoint_chains.append(name)
            chains.append(f"chain {name} {{\n ip saddr {endpoint.ip} jump mark-for-masquerade\n"
                          f" meta l4proto {proto} dnat to {endpoint.ip}:{endpoint.port}\n}}")
        spread = ", ".join(f"{index} : goto {name}" for index, name in enumerate(endpoint_chains))
        chains.append(f"chain service-{base} {{\n ip daddr {service.cluster_ip} {proto} dport {service.port} "
                      f"ip saddr != {CLUSTER_CIDR} jump mark-for-masquerade\n"
                      f" numgen random mod {len(endpoint_chains)} vmap {{ {spread} }}\n}}")
        service_ips.append(f"{service.cluster_ip} . {proto} . {service.port} : goto service-{base}")
        if service.node_port or service.external_ips:
            chains.append(f"chain external-{base} {{\n jump mark-for-masquerade\n goto service-{base}\n}}")
        for address in service.external_ips:
            service_ips.append(f"{address} . {proto} . {service.port} : goto external-{base}")
        if service.node_port:
            node_ports.append(f"{proto} . {service.node_port} : goto external-{base}")

    def elements(items: list[str]) -> str:
        return f" elements = {{ {', '.join(items)} }}" if items else ""

    return f"""table ip kube-proxy {{
 comment "rules for kube-proxy"
 set cluster-ips {{ type ipv4_addr; comment "Active ClusterIPs";{elements(sorted(set(cluster_ips)))} }}
 map service-ips {{ type ipv4_addr . inet_proto . inet_service : verdict; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic";{elements(service_ips)} }}
 map service-nodeports {{ type inet_proto . inet_service : verdict; comment "NodePort traffic";{elements(node_ports)} }}
 map no-endpoint-services {{ type ipv4_addr . inet_proto . inet_service : verdict; comment "vmap to drop or reject packets to services with no endpoints";{elements(no_endpoint_services)} }}
 map no-endpoint-nodeports {{ type inet_proto . inet_service : verdict; comment "vmap to drop or reject packets to service nodeports with no endpoints";{elements(no_endpoint_node_ports)} }}
 chain filter-prerouting {{ type filter hook prerouting priority -110; policy accept; }}
 chain filter-input {{ type filter hook input priority -110; policy accept;
  ct state new jump nodeport-endpoints-check
  ct state new jump service-endpoints-check
 }}
 chain filter-forward {{ type filter hook forward priority -110; policy accept;
  ct state new jump service-endpoints-check
  ct state new jump cluster-ips-check
 }}
 chain filter-output {{ type filter hook output priority -110; policy accept;
  ct state new jump service-endpoints-check
 }}
 chain filter-output-post-dnat {{ type filter hook output priority -90; policy accept;
  ct state new jump cluster-ips-check
 }}
 chain nat-prerouting {{ type nat hook prerouting priority dstnat; policy accept;
  jump services
 }}
 chain nat-output {{ type nat hook output priority -100; policy accept;
  jump services
 }}
 chain nat-postrouting {{ type nat hook postrouting priority srcnat; policy accept;
  jump masquerading
 }}
 chain mark-for-masquerade {{
  mark set mark or {MASQ_MARK}
 }}
 chain masquerading {{
  mark and {MASQ_MARK} == 0 return
  mark set mark xor {MASQ_MARK}
  masquerade fully-random
 }}
 chain reject-chain {{
  comment "helper for @no-endpoint-services / @no-endpoint-nodeports"
  reject
 }}
 chain nodeport-endpoints-check {{
  ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports
 }}
 chain service-endpoints-check {{
  ip daddr . meta l4proto . th dport vmap @no-endpoint-services
 }}
 chain cluster-ips-check {{
  ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
 }}
 chain services {{
  ip daddr . meta l4proto . th dport vmap @service-ips
  fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports
 }}
{chr(10).join(chains)}
}}
"""


# --- portmap's nftables backend ------------------------------------------------------------------

@dataclass(frozen=True)
class HostPortMapping:
    container_id: str
    pod_ip: str
    protocol: str
    host_port: int
    container_port: int
    host_ip: str = ""


def portmap_nftables(mappings: list[HostPortMapping], version: str) -> str:
    """Table `ip cni_hostport` as portmap's nftables backend writes it: "1.6" (v1.6.1-v1.8.x) or
    "1.9" (v1.9.0+). (v1.6.0 hooked its "prerouting" rules to the input hook instead.)"""
    rules = []
    for mapping in mappings:
        address = f"ip daddr {mapping.host_ip} " if mapping.host_ip else ""
        rules.append(f'  {address}{mapping.protocol} dport {mapping.host_port} '
                     f'dnat to {mapping.pod_ip}:{mapping.container_port} comment "{mapping.container_id}"')
    masquerade = []
    for pod_ip, container_id in dict.fromkeys((m.pod_ip, m.container_id) for m in mappings):
        masquerade.append(f'  ip saddr {pod_ip} ip daddr {pod_ip} masquerade comment "{container_id}"')
        masquerade.append(f'  ip saddr 127.0.0.1 ip daddr {pod_ip} masquerade comment "{container_id}"')
    body = "\n".join(rules)
    if version == "1.9":
        hooks = """ chain hostports_all {
  jump hostip_hostports
  jump hostports
 }
 chain prerouting { type nat hook prerouting priority dstnat; policy accept;
  fib daddr type local jump hostports_all
 }
 chain output { type nat hook output priority -100; policy accept;
  fib daddr type local jump hostports_all
 }"""
    else:
        hooks = """ chain prerouting { type nat hook prerouting priority dstnat; policy accept;
  jump hostip_hostports
  jump hostports
 }
 chain output { type nat hook output priority -100; policy accept;
  jump hostip_hostports
  fib daddr type local jump hostports
 }"""
    return f"""table ip cni_hostport {{
 comment "CNI portmap plugin"
 chain hostports {{
{body}
 }}
 chain hostip_hostports {{
 }}
{hooks}
 chain masquerading {{ type nat hook postrouting priority srcnat; policy accept;
{chr(10).join(masquerade)}
 }}
}}
"""


def legacy_order(node) -> None:
    """portmap < v0.7.5 inserted its jumps at the top (`prependUnique`): move the real plugin's there."""
    rule = ("-m", "addrtype", "--dst-type", "LOCAL", "-j", "CNI-HOSTPORT-DNAT")
    for chain in ("PREROUTING", "OUTPUT"):
        node.iptables("-t", "nat", "-D", chain, *rule)
        node.iptables("-t", "nat", "-I", chain, "1", *rule)


def nftables_base_chains() -> str:
    """kube-proxy's nat base chains alone: creating them registers the table's dstnat hooks."""
    return """table ip kube-proxy {
 chain nat-prerouting { type nat hook prerouting priority dstnat; policy accept;
 }
 chain nat-output { type nat hook output priority -100; policy accept;
 }
}
"""
