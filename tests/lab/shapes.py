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

Shapes checked against kube-proxy's own tests (`test_shapes_upstream.py`, data and sources in
`kube_proxy_expectations/`), each opt-in: the defaults write what they always wrote.

- Service fields: `external_policy`/`internal_policy` ("Local": KUBE-EXT-* without the final
  jump and KUBE-SVL-* in iptables mode, `external-`/`local-` chains and `drop` verdicts in
  nftables mode, KUBE-NODE-PORT-LOCAL-*/KUBE-LOAD-BALANCER-LOCAL in IPVS mode; `Endpoint.local`
  says which endpoints are on this node), `load_balancer_ips`, `source_ranges`
  (KUBE-FW-*/KUBE-PROXY-FIREWALL, nftables `firewall-` chains), `health_check_node_port`.
- `iptables_mode(node_port_addresses=(...))`: one `-d IP -j KUBE-NODEPORTS` tail rule per node
  IP; `filter_rules=True`: KUBE-FORWARD (with the conntrack INVALID drop), KUBE-PROXY-FIREWALL,
  KUBE-FIREWALL; `iptables_jumps(mode, filter_rules=True)`: kube-proxy's whole jump list.
- `ipvs_mode(services=...)`: the rules kube-proxy writes for the ipsets those Services fill
  (KUBE-LOAD-BALANCER, KUBE-NODE-PORT-LOCAL-* RETURN, KUBE-EXTERNAL-IP-LOCAL, the physdev
  ACCEPT for external IPs); `localhost_return=True`: `-s 127.0.0.0/8 -j RETURN` first in
  KUBE-SERVICES; `filter_rules=True`: KUBE-IPVS-FILTER, KUBE-FORWARD, the health-check ACCEPT,
  KUBE-PROXY-FIREWALL (`services=` and `filter_rules` need `ipvs_ipsets(..., all_sets=True)`:
  KUBE-LOOP-BACK, KUBE-IPVS-IPS and the sets the filter chains name); `version=(1, 10)`: the real
  v1.10 proxier (NodePort jump `-m set --match-set KUBE-NODE-PORT-TCP dst` with no addrtype
  match, KUBE-NODE-PORT-LOCAL-* ACCEPT).
- `nftables_mode(node_port_addresses=(...))`: `set nodeport-ips` and `ip daddr @nodeport-ips`
  instead of `fib daddr type local` (nftables mode's default `nodePortAddresses: primary`).
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
from dataclasses import dataclass

from netlab import CLUSTER_CIDR

MASQ_MARK = "0x4000"
CLUSTER, LOCAL = "Cluster", "Local"  # traffic policies


@dataclass(frozen=True)
class Endpoint:
    ip: str
    port: int
    local: bool = True  # on this node (its EndpointSlice nodeName): what a Local traffic policy uses


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
    load_balancer_ips: tuple[str, ...] = ()  # status.loadBalancer.ingress[].ip
    source_ranges: tuple[str, ...] = ()  # spec.loadBalancerSourceRanges
    external_policy: str = CLUSTER  # spec.externalTrafficPolicy
    internal_policy: str = CLUSTER  # spec.internalTrafficPolicy
    health_check_node_port: int | None = None  # kube-proxy uses it with externalTrafficPolicy Local

    @property
    def port_label(self) -> str:
        return f"{self.namespace}/{self.name}:{self.port_name}"

    # kube-proxy's reading of the Service (pkg/proxy/serviceport.go, pkg/proxy/topology.go)

    @property
    def externally_accessible(self) -> bool:
        return bool(self.node_port or self.external_ips or self.load_balancer_ips)

    @property
    def external_local(self) -> bool:
        return self.external_policy == LOCAL and self.externally_accessible

    @property
    def internal_local(self) -> bool:
        return self.internal_policy == LOCAL

    @property
    def cluster_endpoints(self) -> tuple[Endpoint, ...]:
        """The endpoints of the Cluster policy chain (KUBE-SVC-*), when some policy is Cluster
        or the short-circuits of an external Local policy need them."""
        return self.endpoints if not self.internal_local or self.externally_accessible else ()

    @property
    def local_endpoints(self) -> tuple[Endpoint, ...]:
        """The endpoints of the Local policy chain (KUBE-SVL-*), when some policy is Local."""
        return tuple(e for e in self.endpoints if e.local) if self.internal_local or self.external_local else ()

    @property
    def has_internal_endpoints(self) -> bool:
        return bool(self.endpoints) and (not self.internal_local or bool(self.local_endpoints))

    @property
    def has_external_endpoints(self) -> bool:
        return bool(self.endpoints) and (not self.external_local or bool(self.local_endpoints))


def _hash(text: str, length: int = 16) -> str:
    """kube-proxy's chain suffix: base32 of sha256, first 16 characters."""
    return base64.b32encode(hashlib.sha256(text.encode()).digest()).decode()[:length]


def svc_chain(service: LabService, prefix: str = "KUBE-SVC-") -> str:
    return prefix + _hash(service.port_label + service.protocol)


def sep_chain(service: LabService, endpoint: Endpoint) -> str:
    return "KUBE-SEP-" + _hash(service.port_label + service.protocol + f"{endpoint.ip}:{endpoint.port}")


def _in_ranges(address: str | None, ranges: tuple[str, ...]) -> bool:
    return bool(address) and any(ipaddress.ip_address(address) in ipaddress.ip_network(cidr.strip(), strict=False)
                                 for cidr in ranges)


def _loopback(address: str) -> bool:
    return ipaddress.ip_address(address).is_loopback


# --- iptables mode -------------------------------------------------------------------------------

NODEPORTS_COMMENT = ('-m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in '
                     'this chain"')


def iptables_mode(services: list[LabService], *, localhost_node_ports: bool = True,
                  cluster_cidr: str | None = CLUSTER_CIDR, node_port_addresses: tuple[str, ...] | None = None,
                  filter_rules: bool = False, invalid_drop: bool = True, node_ip: str | None = None) -> str:
    """`cluster_cidr` None: kube-proxy without clusterCIDR (no `! -s` masquerade rule, no pod
    short-circuit in KUBE-EXT-*). `node_port_addresses`: the node IPs `--nodeport-addresses`
    selects (one `-d IP` tail rule each; None: every local address). `filter_rules`: the filter
    chains beside the REJECTs (KUBE-FORWARD with the INVALID drop unless `invalid_drop=False`, as
    with nf_conntrack_tcp_be_liberal; KUBE-PROXY-FIREWALL; KUBE-FIREWALL). `node_ip`: for
    loadBalancerSourceRanges that contain it (the LB IP is then allowed as a source too)."""
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
            for address in (*service.external_ips, *service.load_balancer_ips):
                filters.append(f'-A KUBE-EXTERNAL-SERVICES -m comment --comment "{label} has no endpoints" '
                               f"-m {proto} -p {proto} -d {address}/32 --dport {service.port} "
                               f"-j REJECT --reject-with icmp-port-unreachable")
            continue
        svc, ext = svc_chain(service), svc_chain(service, "KUBE-EXT-")
        svl, fw = svc_chain(service, "KUBE-SVL-"), svc_chain(service, "KUBE-FW-")
        cluster_endpoints, local_endpoints = service.cluster_endpoints, service.local_endpoints
        internal = svl if service.internal_local else svc
        no_local = f'-m comment --comment "{label} has no local endpoints"'
        if cluster_endpoints:
            nat_chains.append(svc)
        if local_endpoints:
            nat_chains.append(svl)
        cluster_ip = f"-m {proto} -p {proto} -d {service.cluster_ip}/32 --dport {service.port}"
        if service.has_internal_endpoints:
            nat.append(f'-A KUBE-SERVICES -m comment --comment "{label} cluster IP" {cluster_ip} -j {internal}')
            if cluster_cidr:
                nat.append(f'-A {internal} -m comment --comment "{label} cluster IP" {cluster_ip} '
                           f"! -s {cluster_cidr} -j KUBE-MARK-MASQ")
        else:  # internalTrafficPolicy Local, no endpoint on this node
            filters.append(f"-A KUBE-SERVICES {no_local} {cluster_ip} -j DROP")
        for address in service.external_ips:
            nat.append(f'-A KUBE-SERVICES -m comment --comment "{label} external IP" -m {proto} -p {proto} '
                       f"-d {address}/32 --dport {service.port} -j {ext}")
            if not service.has_external_endpoints:
                filters.append(f"-A KUBE-EXTERNAL-SERVICES {no_local} -m {proto} -p {proto} -d {address}/32 "
                               f"--dport {service.port} -j DROP")
        uses_firewall = bool(service.load_balancer_ips and service.source_ranges)
        for address in service.load_balancer_ips:
            nat.append(f'-A KUBE-SERVICES -m comment --comment "{label} loadbalancer IP" -m {proto} -p {proto} '
                       f"-d {address}/32 --dport {service.port} -j {fw if uses_firewall else ext}")
            if uses_firewall:
                filters.append(f'-A KUBE-PROXY-FIREWALL -m comment --comment "{label} traffic not accepted by {fw}" '
                               f"-m {proto} -p {proto} -d {address}/32 --dport {service.port} -j DROP")
            if not service.has_external_endpoints:
                filters.append(f"-A KUBE-EXTERNAL-SERVICES {no_local} -m {proto} -p {proto} -d {address}/32 "
                               f"--dport {service.port} -j DROP")
        if service.node_port:
            nat.append(f'-A KUBE-NODEPORTS -m comment --comment "{label}" -m {proto} -p {proto} '
                       f"--dport {service.node_port} -j {ext}")
            if not service.has_external_endpoints:
                filters.append(f"-A KUBE-EXTERNAL-SERVICES {no_local} -m addrtype --dst-type LOCAL "
                               f"-m {proto} -p {proto} --dport {service.node_port} -j DROP")
        if service.health_check_node_port and service.external_local:
            filters.append(f'-A KUBE-NODEPORTS -m comment --comment "{label} health check node port" -m tcp -p tcp '
                           f"--dport {service.health_check_node_port} -j ACCEPT")
        if service.externally_accessible:
            nat_chains.append(ext)
            if not service.external_local:
                nat.append(f'-A {ext} -m comment --comment "masquerade traffic for {label} external destinations" '
                           f"-j KUBE-MARK-MASQ")
            else:  # the short-circuits: pods and the node itself still reach every endpoint
                if cluster_cidr:
                    nat.append(f'-A {ext} -m comment --comment "pod traffic for {label} external destinations" '
                               f"-s {cluster_cidr} -j {svc}")
                nat.append(f'-A {ext} -m comment --comment "masquerade LOCAL traffic for {label} external '
                           f'destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ')
                nat.append(f'-A {ext} -m comment --comment "route LOCAL traffic for {label} external destinations" '
                           f"-m addrtype --src-type LOCAL -j {svc}")
            if service.has_external_endpoints:  # Local without a local endpoint: no final jump
                nat.append(f"-A {ext} -j {svl if service.external_local else svc}")
        if uses_firewall:
            nat_chains.append(fw)
            allowed = [cidr.strip() for cidr in service.source_ranges]
            if _in_ranges(node_ip, service.source_ranges):
                allowed += [f"{address}/32" for address in service.load_balancer_ips]
            for source in allowed:
                nat.append(f'-A {fw} -m comment --comment "{label} loadbalancer IP" -s {source} -j {ext}')
            nat.append(f'-A {fw} -m comment --comment "other traffic to {label} will be dropped by '
                       f'KUBE-PROXY-FIREWALL"')
        written: set[str] = set()
        for chain, endpoints in ((svc, cluster_endpoints), (svl, local_endpoints)):
            count = len(endpoints)
            for index, endpoint in enumerate(endpoints):
                sep = sep_chain(service, endpoint)
                nat_chains.append(sep)
                balance = (f"-m statistic --mode random --probability {1 / (count - index):.11f} "
                           if index < count - 1 else "")
                nat.append(f'-A {chain} -m comment --comment "{label} -> {endpoint.ip}:{endpoint.port}" '
                           f"{balance}-j {sep}")
                if sep in written:
                    continue
                written.add(sep)
                nat.append(f'-A {sep} -m comment --comment "{label}" -s {endpoint.ip}/32 -j KUBE-MARK-MASQ')
                nat.append(f'-A {sep} -m comment --comment "{label}" -m {proto} -p {proto} '
                           f"-j DNAT --to-destination {endpoint.ip}:{endpoint.port}")
    if node_port_addresses is None:
        local = "-m addrtype --dst-type LOCAL" + ("" if localhost_node_ports else " ! -d 127.0.0.0/8")
        nat.append(f"-A KUBE-SERVICES {NODEPORTS_COMMENT} {local} -j KUBE-NODEPORTS")
    else:
        for address in node_port_addresses:
            if _loopback(address) and not localhost_node_ports:
                continue  # "--nodeport-addresses includes localhost but --iptables-localhost-nodeports=false"
            nat.append(f"-A KUBE-SERVICES {NODEPORTS_COMMENT} -d {address}/32 -j KUBE-NODEPORTS")
    if filter_rules:
        filter_chains += ["KUBE-PROXY-FIREWALL", "KUBE-FIREWALL"]
        if localhost_node_ports:
            filters.append('-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" '
                           "-d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP")
        if invalid_drop:
            filters.append("-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP")
        filters += [f'-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" '
                    f"-m mark --mark {MASQ_MARK}/{MASQ_MARK} -j ACCEPT",
                    '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" '
                    "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"]
    elif any(s.endpoints and s.load_balancer_ips and s.source_ranges for s in services):
        filter_chains.append("KUBE-PROXY-FIREWALL")  # its DROPs run only with iptables_jumps(filter_rules=True)
    return _restore({"nat": (nat_chains, nat), "filter": (filter_chains, filters)})


def iptables_jumps(mode: str, *, filter_rules: bool = False) -> list[tuple[str, ...]]:
    """kube-proxy's jumps from the built-in chains, each `EnsureRule(Prepend, ...)`: `iptables -I`.
    `filter_rules`: the whole list, in kube-proxy's order (iptables mode: `iptablesJumpChains` and
    the kubelet's KUBE-FIREWALL jumps; IPVS mode: `iptablesJumpChain`), for the chains written by
    `iptables_mode(filter_rules=True)` / `ipvs_mode(filter_rules=True)`."""
    service_portals = ("-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")
    postrouting = ("-m", "comment", "--comment", "kubernetes postrouting rules", "-j", "KUBE-POSTROUTING")
    new = ("-m", "conntrack", "--ctstate", "NEW")
    external = "kubernetes externally-visible service portals"
    if filter_rules:
        def jump(table: str, chain: str, target: str, comment: str | None, *extra: str) -> tuple[str, ...]:
            commented = ("-m", "comment", "--comment", comment) if comment else ()
            return ("-t", table, "-I", chain, "1", *extra, *commented, "-j", target)
        if mode == "iptables":
            return [
                jump("filter", "INPUT", "KUBE-EXTERNAL-SERVICES", external, *new),
                jump("filter", "FORWARD", "KUBE-EXTERNAL-SERVICES", external, *new),
                jump("filter", "INPUT", "KUBE-NODEPORTS", "kubernetes health check service ports"),
                jump("filter", "FORWARD", "KUBE-SERVICES", "kubernetes service portals", *new),
                jump("filter", "OUTPUT", "KUBE-SERVICES", "kubernetes service portals", *new),
                jump("filter", "FORWARD", "KUBE-FORWARD", "kubernetes forwarding rules"),
                jump("filter", "INPUT", "KUBE-PROXY-FIREWALL", "kubernetes load balancer firewall", *new),
                jump("filter", "OUTPUT", "KUBE-PROXY-FIREWALL", "kubernetes load balancer firewall", *new),
                jump("filter", "FORWARD", "KUBE-PROXY-FIREWALL", "kubernetes load balancer firewall", *new),
                jump("nat", "OUTPUT", "KUBE-SERVICES", "kubernetes service portals"),
                jump("nat", "PREROUTING", "KUBE-SERVICES", "kubernetes service portals"),
                jump("nat", "POSTROUTING", "KUBE-POSTROUTING", "kubernetes postrouting rules"),
                jump("filter", "INPUT", "KUBE-FIREWALL", None),  # the kubelet's, duplicated by kube-proxy
                jump("filter", "OUTPUT", "KUBE-FIREWALL", None),
            ]
        return [
            jump("nat", "OUTPUT", "KUBE-SERVICES", "kubernetes service portals"),
            jump("nat", "PREROUTING", "KUBE-SERVICES", "kubernetes service portals"),
            jump("nat", "POSTROUTING", "KUBE-POSTROUTING", "kubernetes postrouting rules"),
            jump("filter", "FORWARD", "KUBE-FORWARD", "kubernetes forwarding rules"),
            jump("filter", "INPUT", "KUBE-NODE-PORT", "kubernetes health check rules"),
            jump("filter", "INPUT", "KUBE-PROXY-FIREWALL", "kube-proxy firewall rules"),
            jump("filter", "FORWARD", "KUBE-PROXY-FIREWALL", "kube-proxy firewall rules"),
            jump("filter", "INPUT", "KUBE-IPVS-FILTER", "kubernetes ipvs access filter"),
            jump("filter", "OUTPUT", "KUBE-IPVS-OUT-FILTER", "kubernetes ipvs access filter"),
        ]
    jumps = [
        ("-t", "nat", "-I", "PREROUTING", "1", *service_portals),
        ("-t", "nat", "-I", "OUTPUT", "1", *service_portals),
        ("-t", "nat", "-I", "POSTROUTING", "1", *postrouting),
    ]
    if mode == "iptables":
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

# kube-proxy's ipsets (pkg/proxy/ipvs/proxier.go `ipsetInfo`, names and comments in ipset.go)
IPSET_TYPES = {
    "KUBE-LOOP-BACK": ("hash:ip,port,ip",),
    "KUBE-CLUSTER-IP": ("hash:ip,port",),
    "KUBE-EXTERNAL-IP": ("hash:ip,port",),
    "KUBE-EXTERNAL-IP-LOCAL": ("hash:ip,port",),
    "KUBE-LOAD-BALANCER": ("hash:ip,port",),
    "KUBE-LOAD-BALANCER-FW": ("hash:ip,port",),
    "KUBE-LOAD-BALANCER-LOCAL": ("hash:ip,port",),
    "KUBE-LOAD-BALANCER-SOURCE-IP": ("hash:ip,port,ip",),
    "KUBE-LOAD-BALANCER-SOURCE-CIDR": ("hash:ip,port,net",),
    "KUBE-NODE-PORT-TCP": ("bitmap:port", "range", "0-65535"),
    "KUBE-NODE-PORT-LOCAL-TCP": ("bitmap:port", "range", "0-65535"),
    "KUBE-NODE-PORT-UDP": ("bitmap:port", "range", "0-65535"),
    "KUBE-NODE-PORT-LOCAL-UDP": ("bitmap:port", "range", "0-65535"),
    "KUBE-HEALTH-CHECK-NODE-PORT": ("bitmap:port", "range", "0-65535"),
    "KUBE-IPVS-IPS": ("hash:ip",),
}
IPSET_COMMENTS = {
    "KUBE-CLUSTER-IP": "Kubernetes service cluster ip + port for masquerade purpose",
    "KUBE-EXTERNAL-IP": "Kubernetes service external ip + port for masquerade and filter purpose",
    "KUBE-EXTERNAL-IP-LOCAL": "Kubernetes service external ip + port with externalTrafficPolicy=local",
    "KUBE-LOAD-BALANCER": "Kubernetes service lb portal",
    "KUBE-LOAD-BALANCER-LOCAL": "Kubernetes service load balancer ip + port with externalTrafficPolicy=local",
    "KUBE-LOAD-BALANCER-FW": "Kubernetes service load balancer ip + port for load balancer with sourceRange",
    "KUBE-LOAD-BALANCER-SOURCE-IP": "Kubernetes service load balancer ip + port + source IP for packet filter purpose",
    "KUBE-LOAD-BALANCER-SOURCE-CIDR":
        "Kubernetes service load balancer ip + port + source cidr for packet filter purpose",
    "KUBE-NODE-PORT-TCP": "Kubernetes nodeport TCP port for masquerade purpose",
    "KUBE-NODE-PORT-LOCAL-TCP": "Kubernetes nodeport TCP port with externalTrafficPolicy=local",
    "KUBE-NODE-PORT-UDP": "Kubernetes nodeport UDP port for masquerade purpose",
    "KUBE-NODE-PORT-LOCAL-UDP": "Kubernetes nodeport UDP port with externalTrafficPolicy=local",
    "KUBE-HEALTH-CHECK-NODE-PORT": "Kubernetes health check node port",
}
# the sets the lab always created (`ipvs_ipsets` keeps writing them first, as before)
_BASE_IPSETS = ("KUBE-CLUSTER-IP", "KUBE-NODE-PORT-TCP", "KUBE-NODE-PORT-UDP", "KUBE-EXTERNAL-IP")
_ALL_SETS_ONLY = ("KUBE-LOOP-BACK", "KUBE-IPVS-IPS")


def ipvs_entries(services: list[LabService], *, node_addresses: tuple[str, ...] = (), node_ip: str | None = None,
                 version: tuple[int, ...] | None = None) -> dict[str, list[str]]:
    """The ipset entries kube-proxy's IPVS proxier writes for these Services, per set."""
    entries: dict[str, list[str]] = {name: [] for name in IPSET_TYPES}
    old = version is not None and version < (1, 11)
    for service in services:
        proto, port = service.protocol, service.port
        for endpoint in service.endpoints:  # hairpin: v1.10 listed every endpoint, later ones the local ones
            if old or endpoint.local:
                entries["KUBE-LOOP-BACK"].append(f"{endpoint.ip},{proto}:{endpoint.port},{endpoint.ip}")
        entries["KUBE-CLUSTER-IP"].append(f"{service.cluster_ip},{proto}:{port}")
        entries["KUBE-IPVS-IPS"].append(service.cluster_ip)
        for address in service.external_ips:
            external = "KUBE-EXTERNAL-IP-LOCAL" if service.external_local and not old else "KUBE-EXTERNAL-IP"
            entries[external].append(f"{address},{proto}:{port}")
        for address in service.load_balancer_ips:
            entries["KUBE-LOAD-BALANCER"].append(f"{address},{proto}:{port}")
            if service.external_local:
                entries["KUBE-LOAD-BALANCER-LOCAL"].append(f"{address},{proto}:{port}")
            if service.source_ranges:
                entries["KUBE-LOAD-BALANCER-FW"].append(f"{address},{proto}:{port}")
                for cidr in service.source_ranges:
                    entries["KUBE-LOAD-BALANCER-SOURCE-CIDR"].append(f"{address},{proto}:{port},{cidr.strip()}")
                if _in_ranges(node_ip, service.source_ranges):
                    entries["KUBE-LOAD-BALANCER-SOURCE-IP"].append(f"{address},{proto}:{port},{address}")
        for address in (*service.external_ips, *service.load_balancer_ips):
            if address not in node_addresses:  # bound to kube-ipvs0 unless already a node address
                entries["KUBE-IPVS-IPS"].append(address)
        if service.node_port:
            entries[f"KUBE-NODE-PORT-{proto.upper()}"].append(str(service.node_port))
            if service.external_local:
                entries[f"KUBE-NODE-PORT-LOCAL-{proto.upper()}"].append(str(service.node_port))
        if service.health_check_node_port and service.external_local:
            entries["KUBE-HEALTH-CHECK-NODE-PORT"].append(str(service.health_check_node_port))
    return {name: list(dict.fromkeys(values)) for name, values in entries.items()}


def ipvs_ipsets(services: list[LabService], *, all_sets: bool = False, node_addresses: tuple[str, ...] = (),
                node_ip: str | None = None, version: tuple[int, ...] | None = None) -> list[tuple[str, ...]]:
    """`ipset` commands: the sets and entries kube-proxy's IPVS proxier writes. `all_sets`: every
    set kube-proxy creates, empty or not, with KUBE-LOOP-BACK (local endpoints, for hairpin
    masquerade) and KUBE-IPVS-IPS (the kube-ipvs0 addresses: ClusterIPs, external and LB IPs not
    in `node_addresses`): needed by `ipvs_mode(services=...)` and `ipvs_mode(filter_rules=True)`."""
    commands = [("create", "KUBE-CLUSTER-IP", "hash:ip,port", "-exist"),
                ("create", "KUBE-NODE-PORT-TCP", "bitmap:port", "range", "0-65535", "-exist"),
                ("create", "KUBE-NODE-PORT-UDP", "bitmap:port", "range", "0-65535", "-exist"),
                ("create", "KUBE-EXTERNAL-IP", "hash:ip,port", "-exist")]
    entries = ipvs_entries(services, node_addresses=node_addresses, node_ip=node_ip, version=version)
    for name, values in entries.items():
        if name not in _BASE_IPSETS and (all_sets or (values and name not in _ALL_SETS_ONLY)):
            commands.append(("create", name, *IPSET_TYPES[name], "-exist"))
    for service in services:  # the historical order of the four base sets' entries
        commands.append(("add", "KUBE-CLUSTER-IP", f"{service.cluster_ip},{service.protocol}:{service.port}", "-exist"))
        for address in service.external_ips:
            if f"{address},{service.protocol}:{service.port}" in entries["KUBE-EXTERNAL-IP"]:
                commands.append(("add", "KUBE-EXTERNAL-IP", f"{address},{service.protocol}:{service.port}", "-exist"))
        if service.node_port:
            commands.append(("add", f"KUBE-NODE-PORT-{service.protocol.upper()}", str(service.node_port), "-exist"))
    for name, values in entries.items():
        if name in _BASE_IPSETS or (name in _ALL_SETS_ONLY and not all_sets):
            continue
        commands += [("add", name, value, "-exist") for value in values]
    return commands


def ipvs_mode(*, cluster_cidr: str | None = CLUSTER_CIDR, accept_cluster_ips: bool = True,
              vip_masquerade: bool = True, services: list[LabService] | None = None,
              localhost_return: bool = False, filter_rules: bool = False,
              version: tuple[int, ...] | None = None) -> str:
    """`cluster_cidr` None: kube-proxy without clusterCIDR, which masquerades what the node sends
    from a VIP (`src,dst`) since v1.11.1 and nothing before (`vip_masquerade=False`; v1.11.0 had
    the rule but an empty KUBE-CLUSTER-IP set kept it unwritten, kubernetes#65388).

    `services`: write kube-proxy's set-driven rules (`writeIptablesRules`) for the sets these
    Services fill, instead of the lab's fixed layout: KUBE-LOAD-BALANCER, KUBE-NODE-PORT-LOCAL-*
    RETURN, KUBE-EXTERNAL-IP-LOCAL, the physdev ACCEPT for external IPs. `localhost_return`: the
    first KUBE-SERVICES rule `-s 127.0.0.0/8 -j RETURN`. `filter_rules`: the filter chains
    (KUBE-FORWARD, the health-check ACCEPT in KUBE-NODE-PORT, KUBE-PROXY-FIREWALL and
    KUBE-SOURCE-RANGES-FIREWALL, KUBE-IPVS-FILTER; KUBE-IPVS-OUT-FILTER stays empty: its
    `-m ipvs` match needs the IPVS module). `version` below (1, 11): the v1.10 proxier."""
    if version is not None and version < (1, 11):
        return _ipvs_1_10(services, cluster_cidr)
    nat_chains = ["KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-NODE-PORT"]
    comment = {name: f'-m comment --comment "{text}"' for name, text in IPSET_COMMENTS.items()}
    if cluster_cidr:
        masquerade = f"-A KUBE-SERVICES {comment['KUBE-CLUSTER-IP']} -m set --match-set KUBE-CLUSTER-IP dst,dst " \
                     f"! -s {cluster_cidr} -j KUBE-MARK-MASQ"
    elif vip_masquerade:  # no clusterCIDR: masquerade what the node sends from a VIP (kubernetes#63319, #65388: v1.11.1)
        masquerade = f"-A KUBE-SERVICES {comment['KUBE-CLUSTER-IP']} -m set --match-set KUBE-CLUSTER-IP src,dst " \
                     f"-j KUBE-MARK-MASQ"
    else:
        masquerade = ""
    nat = [
        f"-A KUBE-MARK-MASQ -j MARK --or-mark {MASQ_MARK}",
        f"-A KUBE-POSTROUTING -m mark ! --mark {MASQ_MARK}/{MASQ_MARK} -j RETURN",
        f"-A KUBE-POSTROUTING -j MARK --xor-mark {MASQ_MARK}",
        '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE',
    ]
    if localhost_return:
        nat.append("-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN")
    filled = {name for name, values in ipvs_entries(services or []).items() if values}
    if services is None:
        nat += [
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
    else:  # writeIptablesRules, in its order, for the sets the Services fill
        nat_chains.append("KUBE-LOAD-BALANCER")
        if "KUBE-LOOP-BACK" in filled:  # ahead of KUBE-POSTROUTING's mark RETURN
            nat.insert(0, '-A KUBE-POSTROUTING -m comment --comment "Kubernetes endpoints dst ip:port, source ip for '
                          'solving hairpin purpose" -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE')
        if "KUBE-LOAD-BALANCER" in filled:
            nat.append(f"-A KUBE-SERVICES {comment['KUBE-LOAD-BALANCER']} -m set --match-set KUBE-LOAD-BALANCER "
                       f"dst,dst -j KUBE-LOAD-BALANCER")
        if "KUBE-LOAD-BALANCER-LOCAL" in filled:
            nat.append(f"-A KUBE-LOAD-BALANCER {comment['KUBE-LOAD-BALANCER-LOCAL']} -m set --match-set "
                       f"KUBE-LOAD-BALANCER-LOCAL dst,dst -j RETURN")
        for proto in ("tcp", "udp"):
            for name, target in ((f"KUBE-NODE-PORT-LOCAL-{proto.upper()}", "RETURN"),
                                 (f"KUBE-NODE-PORT-{proto.upper()}", "KUBE-MARK-MASQ")):
                if name in filled:
                    nat.append(f"-A KUBE-NODE-PORT -p {proto} {comment[name]} -m set --match-set {name} dst "
                               f"-j {target}")
        if masquerade and "KUBE-CLUSTER-IP" in filled:
            nat.append(masquerade)
        for name in ("KUBE-EXTERNAL-IP", "KUBE-EXTERNAL-IP-LOCAL"):
            if name in filled:
                match = f"-A KUBE-SERVICES {comment[name]} -m set --match-set {name} dst,dst"
                if name == "KUBE-EXTERNAL-IP":
                    nat.append(f"{match} -j KUBE-MARK-MASQ")
                nat.append(f"{match} -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT")
                nat.append(f"{match} -m addrtype --dst-type LOCAL -j ACCEPT")
        nat.append("-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT")
        nat.append("-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ")
        for name in ("KUBE-CLUSTER-IP", "KUBE-LOAD-BALANCER"):  # acceptIPVSTraffic
            if name in filled and (accept_cluster_ips or name != "KUBE-CLUSTER-IP"):
                nat.append(f"-A KUBE-SERVICES -m set --match-set {name} dst,dst -j ACCEPT")
    tables = {"nat": (nat_chains, nat)}
    if filter_rules:
        filter_chains = ["KUBE-FORWARD", "KUBE-NODE-PORT", "KUBE-PROXY-FIREWALL", "KUBE-SOURCE-RANGES-FIREWALL",
                         "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER"]
        filters = []
        if "KUBE-LOAD-BALANCER-FW" in filled:
            filters.append(f"-A KUBE-PROXY-FIREWALL {comment['KUBE-LOAD-BALANCER-FW']} -m set --match-set "
                           f"KUBE-LOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL")
        for name in ("KUBE-LOAD-BALANCER-SOURCE-CIDR", "KUBE-LOAD-BALANCER-SOURCE-IP"):
            if name in filled:
                filters.append(f"-A KUBE-SOURCE-RANGES-FIREWALL {comment[name]} -m set --match-set {name} "
                               f"dst,dst,src -j RETURN")
        filters += [
            "-A KUBE-SOURCE-RANGES-FIREWALL -j DROP",
            '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" '
            f"-m mark --mark {MASQ_MARK}/{MASQ_MARK} -j ACCEPT",
            '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack '
            "--ctstate RELATED,ESTABLISHED -j ACCEPT",
            f"-A KUBE-NODE-PORT {comment['KUBE-HEALTH-CHECK-NODE-PORT']} -m set --match-set "
            f"KUBE-HEALTH-CHECK-NODE-PORT dst -j ACCEPT",
            "-A KUBE-IPVS-FILTER -m set --match-set KUBE-LOAD-BALANCER dst,dst -j RETURN",
            "-A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN",
            "-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP dst,dst -j RETURN",
            "-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP-LOCAL dst,dst -j RETURN",
            "-A KUBE-IPVS-FILTER -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j RETURN",
            "-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT",
        ]
        tables["filter"] = (filter_chains, filters)
    return _restore(tables)


def _ipvs_1_10(services: list[LabService] | None, cluster_cidr: str | None) -> str:
    """The v1.10 IPVS proxier's nat rules (`syncProxyRules`): the NodePort jump matches the
    KUBE-NODE-PORT-TCP/UDP bitmap on any destination (no addrtype match), KUBE-NODE-PORT ACCEPTs
    the externalTrafficPolicy=Local ports and marks the rest, no ClusterIP ACCEPT, nothing for
    ClusterIPs without clusterCIDR, KUBE-POSTROUTING masquerading marked packets with no RETURN.
    `services` None: the four base sets count as filled."""
    if services and any(s.load_balancer_ips for s in services):
        raise NotImplementedError("v1.10 LoadBalancer IPs (KUBE-FIRE-WALL, KUBE-MARK-DROP) are not modelled")
    filled = ({name for name, values in ipvs_entries(services, version=(1, 10)).items() if values}
              if services is not None else {"KUBE-CLUSTER-IP", "KUBE-EXTERNAL-IP", "KUBE-NODE-PORT-TCP",
                                            "KUBE-NODE-PORT-UDP"})
    # (KUBE-FIRE-WALL, the LoadBalancer chain, stays empty)
    nat_chains = ["KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-SERVICES", "KUBE-FIRE-WALL", "KUBE-NODE-PORT"]
    nat = [
        '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" '
        f"-m mark --mark {MASQ_MARK}/{MASQ_MARK} -j MASQUERADE",
        f"-A KUBE-MARK-MASQ -j MARK --set-xmark {MASQ_MARK}/{MASQ_MARK}",
    ]
    if "KUBE-LOOP-BACK" in filled:
        nat.append("-A KUBE-POSTROUTING -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE")
    if "KUBE-CLUSTER-IP" in filled and cluster_cidr:
        nat.append(f"-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst ! -s {cluster_cidr} -j KUBE-MARK-MASQ")
    if "KUBE-EXTERNAL-IP" in filled:
        match = "-A KUBE-SERVICES -m set --match-set KUBE-EXTERNAL-IP dst,dst"
        nat += [f"{match} -j KUBE-MARK-MASQ",
                f"{match} -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT",
                f"{match} -m addrtype --dst-type LOCAL -j ACCEPT"]
    for proto in ("tcp", "udp"):
        if f"KUBE-NODE-PORT-{proto.upper()}" not in filled:
            continue
        nat.append(f"-A KUBE-SERVICES -m {proto} -p {proto} -m set --match-set KUBE-NODE-PORT-{proto.upper()} dst "
                   f"-j KUBE-NODE-PORT")
        if f"KUBE-NODE-PORT-LOCAL-{proto.upper()}" in filled:
            nat.append(f"-A KUBE-NODE-PORT -m set --match-set KUBE-NODE-PORT-LOCAL-{proto.upper()} dst -j ACCEPT")
        nat.append('-A KUBE-NODE-PORT -m comment --comment "mark MASQ for externaltrafficpolicy=cluster" '
                   "-j KUBE-MARK-MASQ")
    return _restore({"nat": (nat_chains, nat)})


# --- nftables mode -------------------------------------------------------------------------------

def nftables_mode(services: list[LabService], *, cluster_cidr: str | None = CLUSTER_CIDR,
                  node_port_addresses: tuple[str, ...] | None = None, node_ip: str | None = None) -> str:
    """Table `ip kube-proxy` as kube-proxy v1.31+ writes it. `node_port_addresses`: the node IPs
    `nodePortAddresses` selects (`set nodeport-ips`; nftables mode's default is `primary`, the
    node's primary IP); None: every local IP (`fib daddr type local`). `cluster_cidr` None: no
    local-traffic detector (no masquerade rule for off-cluster clients, no pod short-circuit).
    `node_ip`: for loadBalancerSourceRanges that contain it (the LB IP is then allowed too)."""
    chains: list[str] = []
    service_ips, node_ports, no_endpoint_services, no_endpoint_node_ports, cluster_ips = [], [], [], [], []
    firewall_ips: list[str] = []
    for service in services:
        proto = service.protocol
        cluster_ips.append(service.cluster_ip)
        base = f"{_hash(service.port_label + proto, 8)}-{service.namespace}/{service.name}/{proto}/{service.port_name}"
        if not service.endpoints:
            for address in (service.cluster_ip, *service.external_ips, *service.load_balancer_ips):
                no_endpoint_services.append(f"{address} . {proto} . {service.port} : goto reject-chain")
            if service.node_port:
                no_endpoint_node_ports.append(f"{proto} . {service.node_port} : goto reject-chain")
            continue
        cluster_endpoints, local_endpoints = service.cluster_endpoints, service.local_endpoints
        endpoint_names = {}
        for endpoint in dict.fromkeys((*cluster_endpoints, *local_endpoints)):
            name = f"endpoint-{_hash(base + endpoint.ip, 8)}-{service.namespace}/{service.name}/{proto}/" \
                   f"{service.port_name}__{endpoint.ip}/{endpoint.port}"
            endpoint_names[endpoint] = name
            chains.append(f"chain {name} {{\n ip saddr {endpoint.ip} jump mark-for-masquerade\n"
                          f" meta l4proto {proto} dnat to {endpoint.ip}:{endpoint.port}\n}}")
        internal = f"local-{base}" if service.internal_local else f"service-{base}"
        masquerade = (f" ip daddr {service.cluster_ip} {proto} dport {service.port} "
                      f"ip saddr != {cluster_cidr} jump mark-for-masquerade\n") if cluster_cidr else ""
        for chain, endpoints in ((f"service-{base}", cluster_endpoints), (f"local-{base}", local_endpoints)):
            if not endpoints:
                continue
            spread = ", ".join(f"{index} : goto {endpoint_names[endpoint]}" for index, endpoint in enumerate(endpoints))
            chains.append(f"chain {chain} {{\n{masquerade if chain == internal else ''}"
                          f" numgen random mod {len(endpoints)} vmap {{ {spread} }}\n}}")
        if service.has_internal_endpoints:
            service_ips.append(f"{service.cluster_ip} . {proto} . {service.port} : goto {internal}")
        else:
            no_endpoint_services.append(f"{service.cluster_ip} . {proto} . {service.port} : drop")
        if service.externally_accessible:
            if not service.external_local:
                rules = [" jump mark-for-masquerade"]
            else:  # the short-circuits: pods and the node itself still reach every endpoint
                rules = [f' ip saddr {cluster_cidr} goto service-{base} comment "short-circuit pod traffic"'] \
                    if cluster_cidr else []
                rules += [' fib saddr type local jump mark-for-masquerade comment "masquerade local traffic"',
                          f' fib saddr type local goto service-{base} comment "short-circuit local traffic"']
            if service.has_external_endpoints:  # Local without a local endpoint: no final goto
                rules.append(f" goto {'local' if service.external_local else 'service'}-{base}")
            chains.append(f"chain external-{base} {{\n" + "\n".join(rules) + "\n}")
        drop = [] if service.has_external_endpoints else ["drop"]
        for address in service.external_ips:
            service_ips.append(f"{address} . {proto} . {service.port} : goto external-{base}")
            no_endpoint_services += [f"{address} . {proto} . {service.port} : {verdict}" for verdict in drop]
        uses_firewall = bool(service.load_balancer_ips and service.source_ranges)
        for address in service.load_balancer_ips:
            service_ips.append(f"{address} . {proto} . {service.port} : goto external-{base}")
            no_endpoint_services += [f"{address} . {proto} . {service.port} : {verdict}" for verdict in drop]
            if uses_firewall:
                firewall_ips.append(f"{address} . {proto} . {service.port} : goto firewall-{base}")
        if uses_firewall:
            allowed = [cidr.strip() for cidr in service.source_ranges]
            if _in_ranges(node_ip, service.source_ranges):
                allowed += list(service.load_balancer_ips)
            chains.append(f"chain firewall-{base} {{\n ip saddr != {{ {', '.join(allowed)} }} drop\n}}")
        if service.node_port:
            node_ports.append(f"{proto} . {service.node_port} : goto external-{base}")
            no_endpoint_node_ports += [f"{proto} . {service.node_port} : {verdict}" for verdict in drop]

    def elements(items: list[str]) -> str:
        return f" elements = {{ {', '.join(items)} }}" if items else ""

    if node_port_addresses is None:
        node_port_ips = ""
        node_port_endpoints = "ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports"
        node_port_dispatch = ("fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap "
                              "@service-nodeports")
    else:
        addresses = [address for address in node_port_addresses if not _loopback(address)]
        node_port_ips = (f'\n set nodeport-ips {{ type ipv4_addr; comment "IPs that accept NodePort traffic";'
                         f'{elements(addresses)} }}')
        node_port_endpoints = "ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports"
        node_port_dispatch = "ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports"
    if firewall_ips:
        firewall_map = (f'\n map firewall-ips {{ type ipv4_addr . inet_proto . inet_service : verdict; comment '
                        f'"destinations that are subject to LoadBalancerSourceRanges";{elements(firewall_ips)} }}')
        filter_prerouting = (" chain filter-prerouting { type filter hook prerouting priority -110; policy accept;\n"
                             "  ct state new jump firewall-check\n }")
        firewall_check = "\n  ct state new jump firewall-check"
        firewall_chain = "\n chain firewall-check {\n  ip daddr . meta l4proto . th dport vmap @firewall-ips\n }"
    else:
        firewall_map = firewall_check = firewall_chain = ""
        filter_prerouting = " chain filter-prerouting { type filter hook prerouting priority -110; policy accept; }"

    return f"""table ip kube-proxy {{
 comment "rules for kube-proxy"
 set cluster-ips {{ type ipv4_addr; comment "Active ClusterIPs";{elements(sorted(set(cluster_ips)))} }}{node_port_ips}
 map service-ips {{ type ipv4_addr . inet_proto . inet_service : verdict; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic";{elements(service_ips)} }}
 map service-nodeports {{ type inet_proto . inet_service : verdict; comment "NodePort traffic";{elements(node_ports)} }}
 map no-endpoint-services {{ type ipv4_addr . inet_proto . inet_service : verdict; comment "vmap to drop or reject packets to services with no endpoints";{elements(no_endpoint_services)} }}
 map no-endpoint-nodeports {{ type inet_proto . inet_service : verdict; comment "vmap to drop or reject packets to service nodeports with no endpoints";{elements(no_endpoint_node_ports)} }}\
{firewall_map}
{filter_prerouting}
 chain filter-input {{ type filter hook input priority -110; policy accept;
  ct state new jump nodeport-endpoints-check
  ct state new jump service-endpoints-check
 }}
 chain filter-forward {{ type filter hook forward priority -110; policy accept;
  ct state new jump service-endpoints-check
  ct state new jump cluster-ips-check
 }}
 chain filter-output {{ type filter hook output priority -110; policy accept;
  ct state new jump service-endpoints-check{firewall_check}
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
  {node_port_endpoints}
 }}
 chain service-endpoints-check {{
  ip daddr . meta l4proto . th dport vmap @no-endpoint-services
 }}
 chain cluster-ips-check {{
  ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
 }}{firewall_chain}
 chain services {{
  ip daddr . meta l4proto . th dport vmap @service-ips
  {node_port_dispatch}
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
