"""A node as its own dumps show it: hostPort DNAT entries in the order the kernel tries them,
kube-proxy's NodePort and masquerade rules, listening sockets, addresses, live sandboxes, IPAM.

Built from `loading.snapshot` records; every fact keeps the `DumpLine` (dump file and line) it was
read from, so a finding opens the dump at the rule. What a packet does with these facts is the
datapath model's decision; this module only says what is there, in which order.

Sources for the rule shapes (read from the code, see DOMAIN.md B, C, D, F):
- portmap iptables (containernetworking/plugins `plugins/meta/portmap/portmap_iptables.go`):
  `CNI-HOSTPORT-DNAT -p P -m comment --comment 'dnat name: "NET" id: "ID"' -m multiport --dports
  ... -j CNI-DN-<sha512(NET+ID)[:21]>`, then in that chain `--dport N [-d HOSTIP] -j DNAT
  --to-destination IP:PORT`. Old versions omit the multiport match.
- portmap nftables (`portmap_nftables.go`): table `cni_hostport`, chains `hostports` and
  `hostip_hostports`, `tcp dport N dnat to IP:PORT comment "ID"`.
- CRI-O: `KUBE-HOSTPORTS` -> `KUBE-HP-*` chains with the DNAT.
- kube-proxy iptables: `KUBE-NODEPORTS` rules with `--dport N` and comment `ns/svc:port`;
  `KUBE-EXTERNAL-SERVICES` / filter `KUBE-NODEPORTS` REJECTs for Services without endpoints;
  per-Service `! -s CLUSTER-CIDR -d CLUSTER-IP -j KUBE-MARK-MASQ` in `KUBE-SVC-*`.
- kube-proxy ipvs: `KUBE-SERVICES ! -s CIDR -m set --match-set KUBE-CLUSTER-IP dst,dst -j
  KUBE-MARK-MASQ`; ipsets `KUBE-CLUSTER-IP`, `KUBE-NODE-PORT-TCP/UDP`; `kube-ipvs0` addresses.
- kube-proxy nftables: table `kube-proxy`, map `service-nodeports` (`tcp . 30081 : goto
  external-HASH-ns/svc/tcp/port`) and `no-endpoint-nodeports`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial

from kubelint_ports.loading.snapshot import DumpLine, Snapshot
from kubelint_ports.loading.snapshot.dump_records import Listener, Rule, Ruleset, SnapshotFile, VirtualServer
from kubelint_ports.loading.snapshot.tables import DumpRecords
from kubelint_ports.vocabulary import Diagnostic, Location

PORTMAP_DNAT_CHAIN = "CNI-HOSTPORT-DNAT"
CRIO_HOSTPORTS_CHAIN = "KUBE-HOSTPORTS"
HOSTPORT_ENTRY_CHAINS = (PORTMAP_DNAT_CHAIN, CRIO_HOSTPORTS_CHAIN)
KUBE_SERVICES = "KUBE-SERVICES"
IPVS_INTERFACE = "kube-ipvs0"
READY = "SANDBOX_READY"
_DNAT_COMMENT = re.compile(r'dnat name: "([^"]*)" id: "([^"]*)"')
_SERVICE_COMMENT = re.compile(r"([a-z0-9][-a-z0-9.]*/[a-z0-9][-a-z0-9.]*)(?::([-a-z0-9]*))?")
_NFT_NODEPORT = re.compile(r"(tcp|udp|sctp) \. (\d+) : (?:goto|jump) \S*?-([a-z0-9][-a-z0-9.]*)/([a-z0-9][-a-z0-9.]*)"
                           r"/(?:tcp|udp|sctp)/(\S*)")


def place(file_path: str, rule_or_record) -> DumpLine:
    return DumpLine(file_path, rule_or_record.line, getattr(rule_or_record, "column", 1), rule_or_record.end_column)


def chain_hash(network: str, container_id: str) -> str:
    """portmap's per-container chain suffix: the first 21 hex digits of sha512(network + ID)."""
    return hashlib.sha512((network + container_id).encode("utf-8")).hexdigest()[:21]


@dataclass(frozen=True, slots=True)
class HostPortEntry:
    """One host port that a DNAT rule sends to a pod, in the order the node's rules try them."""

    order: int
    protocol: str
    port: int
    host_ip: str  # "" = every local address
    pod_ip: str
    pod_port: int
    sandbox_id: str  # "" when the rules do not say (CRI-O names the pod instead)
    network: str
    chain: str
    jump: DumpLine  # the rule that sends the packet towards the DNAT (where the sandbox ID is written)
    dnat: DumpLine
    backend: str  # "portmap-iptables", "portmap-nftables", "cri-o"
    chain_name_matches: bool | None = None  # sha512(network + ID) vs the chain name; None: not portmap
    label: str = ""  # CRI-O's comment (the pod), when there is no sandbox ID
    family: str = ""  # the packets the rule can see: "ipv4", "ipv6", "" both (nft inet tables)

    def overlaps(self, other: "HostPortEntry") -> bool:
        """Same protocol and port, and host IPs that can both match one packet."""
        return (self.protocol == other.protocol and self.port == other.port
                and (not self.host_ip or not other.host_ip or self.host_ip == other.host_ip))

    @property
    def short_id(self) -> str:
        return self.sandbox_id[:12] if self.sandbox_id else (self.label or self.chain)


@dataclass(frozen=True, slots=True)
class EntryJump:
    """A PREROUTING/OUTPUT rule of the nat table that leads to hostPorts or to kube-proxy."""

    hook: str  # PREROUTING, OUTPUT
    index: int  # the rule's position in its chain: comparable only within one `source`
    leads_to: str  # "host-ports" or "kube-proxy"
    chain: str
    place: DumpLine
    table: str = "nat"  # "nat" (iptables-save), "ip nat" / "ip6 nat" (nft)

    @property
    def source(self) -> tuple[str, str]:
        """The dump file and table: one chain of one backend and family. Rules of two sources
        (iptables-legacy and iptables-nft, IPv4 and IPv6) have no order between them."""
        return self.place.path, self.table


@dataclass(frozen=True, slots=True)
class NodePortRule:
    protocol: str
    port: int
    service: str  # "ns/name" when the rule names it, else ""
    port_name: str
    action: str  # "forward" (DNAT to endpoints), "reject" (no endpoints), "mark" (ipvs)
    place: DumpLine
    family: str = ""  # "ipv4", "ipv6", "" both or unknown (ipsets)


@dataclass(frozen=True, slots=True)
class ClusterIpRule:
    protocol: str
    address: str
    port: int
    service: str
    place: DumpLine


@dataclass(frozen=True, slots=True)
class MasqueradeRule:
    """A kube-proxy rule that marks Service traffic for masquerade."""

    form: str  # "ipvs-set" (KUBE-CLUSTER-IP match) or "per-service" (iptables mode)
    negated_source: str  # the CIDR after `! -s`, "" when there is none
    set_flags: str  # "dst,dst", "src,dst" (ipvs form)
    place: DumpLine


@dataclass(frozen=True, slots=True)
class Listening:
    protocol: str
    address: str
    port: int
    processes: tuple[tuple[str, int], ...]
    place: DumpLine

    @property
    def family(self) -> str:
        """What the socket receives: ss prints `*` for a dual-stack socket, `[::]` for an
        IPv6-only one, `0.0.0.0` for IPv4 (IPv4-mapped addresses are unmapped when read)."""
        return address_family(self.address)

    @property
    def process_text(self) -> str:
        if not self.processes:
            return "a process (ss ran without -p)"
        name, pid = self.processes[0]
        return f"'{name}' (pid {pid})"


@dataclass(frozen=True, slots=True)
class NodeAddress:
    interface: str
    address: str
    prefix: int
    place: DumpLine


@dataclass(frozen=True, slots=True)
class LeaseHeld:
    network: str
    address: str
    container_id: str
    place: DumpLine


@dataclass(frozen=True, slots=True)
class LiveSandbox:
    id: str
    name: str
    namespace: str
    state: str
    place: DumpLine


@dataclass(slots=True)
class NodeState:
    """Everything one snapshot says about its node."""

    name: str
    path: str
    kinds: set[str] = field(default_factory=set)  # which dumps were read
    host_ports: list[HostPortEntry] = field(default_factory=list)
    entry_jumps: list[EntryJump] = field(default_factory=list)
    node_ports: list[NodePortRule] = field(default_factory=list)
    # ClusterIPs and listeners may number a million: made from the dumps' tables when read (`on_ports`)
    cluster_ips: DumpRecords = field(default_factory=DumpRecords)
    masquerade: list[MasqueradeRule] = field(default_factory=list)
    proxy_modes: set[str] = field(default_factory=set)
    services_anchor: DumpLine | None = None  # where kube-proxy's KUBE-SERVICES chain is declared
    cluster_ip_service_rules: int = 0  # iptables mode: KUBE-SVC rules matching a ClusterIP
    listeners: DumpRecords = field(default_factory=DumpRecords)
    addresses: list[NodeAddress] = field(default_factory=list)
    leases: list[LeaseHeld] = field(default_factory=list)
    sandboxes: dict[str, LiveSandbox] | None = None  # None: no `crictl pods` in the snapshot
    sysctls: dict[str, tuple[str, DumpLine]] = field(default_factory=dict)

    @property
    def proxy_mode(self) -> str | None:
        """kube-proxy's mode as the rules show it; None when they show none, or several."""
        return next(iter(self.proxy_modes)) if len(self.proxy_modes) == 1 else None

    def lease_of(self, address: str) -> LeaseHeld | None:
        return next((lease for lease in self.leases if lease.address == address), None)


def build_node_state(snapshot: Snapshot) -> NodeState:
    state = NodeState(snapshot.node, snapshot.path)
    # iptables-nft's tables show in `nft list ruleset` too: with an iptables-save dump at hand,
    # read them once, from it.
    has_iptables_save = any(read.kind == "iptables-save" for read in snapshot.files)
    backends_read: set[str] = set()
    for read in snapshot.files:
        state.kinds.add(read.kind)
        if read.kind == "iptables-save" and read.ruleset is not None and read.ruleset.backend:
            if read.ruleset.backend in backends_read:
                continue  # `iptables-save` and `iptables-legacy-save` of one backend: the same tables twice
            backends_read.add(read.ruleset.backend)
        if read.ruleset is not None:
            read_ruleset(state, read.ruleset, xt_tables=not (has_iptables_save and read.kind != "iptables-save"))
        read_records(state, read)
    if any(a.interface == IPVS_INTERFACE for a in state.addresses):
        state.proxy_modes.add("ipvs")
    state.host_ports.sort(key=lambda entry: entry.order)
    return state


def read_records(state: NodeState, read: SnapshotFile) -> None:
    path = read.path
    if read.listeners:
        state.listeners.add(read.listeners, partial(listening, path))
    state.addresses += [NodeAddress(r.interface, r.address, r.prefix, place(path, r)) for r in read.addresses]
    state.leases += [LeaseHeld(r.network, r.address, r.container_id, place(path, r)) for r in read.leases]
    if read.kind == "crictl-pods":
        sandboxes = state.sandboxes if state.sandboxes is not None else {}
        for r in read.sandboxes:
            sandboxes[r.id] = LiveSandbox(r.id, r.name, r.namespace, r.state, place(path, r))
        state.sandboxes = sandboxes
    for name, (value, line) in read.sysctls.items():
        state.sysctls[name] = (value, DumpLine(path, line, 1, len(name) + 1))
    if read.virtual_servers:
        state.proxy_modes.add("ipvs")
        state.cluster_ips.add(read.virtual_servers, partial(virtual_cluster_ip, path))
    for set_name, named in read.sets.items():
        if set_name.startswith("KUBE-NODE-PORT-") and set_name.rsplit("-", 1)[-1] in ("TCP", "UDP", "SCTP"):
            state.proxy_modes.add("ipvs")
            protocol = set_name.rsplit("-", 1)[-1].lower()
            for member, line in named.members:
                if member.isdigit():
                    state.node_ports.append(NodePortRule(protocol, int(member), "", "", "mark",
                                                         DumpLine(path, line, 1, len(member) + 1)))


def listening(path: str, socket: Listener) -> Listening:
    return Listening(socket.protocol, socket.address, socket.port, socket.processes, place(path, socket))


def virtual_cluster_ip(path: str, service: VirtualServer) -> ClusterIpRule:
    return ClusterIpRule(service.protocol, service.address, service.port, "", place(path, service))


def address_family(address: str) -> str:
    """"ipv4", "ipv6", or "" for both (`*`, ss's dual-stack wildcard)."""
    if not address or address == "*":
        return ""
    return "ipv6" if ":" in address else "ipv4"


def same_family(one: str, other: str) -> bool:
    """Can a packet be seen by both? IPv4 rules never see IPv6 packets, and the reverse."""
    return not one or not other or one == other


def table_family(ruleset: Ruleset, table_name: str) -> str:
    family, _, name = table_name.partition(" ")
    if not name:  # iptables-save: the tool's family
        return ruleset.family
    return {"ip": "ipv4", "ip6": "ipv6"}.get(family, "")  # inet (and bridge, netdev): both or neither


def host_ports_text(address: str, port: int) -> str:
    """`10.0.0.1:80`, `[fd00::1]:80`: IPv6 addresses bracketed, as ss and iptables print them."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def read_ruleset(state: NodeState, ruleset: Ruleset, xt_tables: bool = True) -> None:
    for table_name, table in ruleset.tables.items():
        if not xt_tables and table_name.partition(" ")[2] in ("nat", "filter", "mangle", "raw", "security"):
            continue
        read_table(state, ruleset.path, table_name, table, table_family(ruleset, table_name))


def read_table(state: NodeState, path: str, table_name: str, table, family: str) -> None:
    """One table's facts; its hostPort entries and nodePort rules see only `family`'s packets."""
    if table_name in ("nat", "ip nat", "ip6 nat"):
        read_nat(state, path, table, family)
    if table_name in ("filter", "ip filter", "ip6 filter"):
        for chain_name in ("KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS"):
            chain = table.chains.get(chain_name)
            for rule in chain.rules if chain else ():
                if rule.target == "REJECT" and rule.dports:
                    add_node_port(state, path, rule, "reject", family)
    name = table_name.partition(" ")[2]
    if name == "cni_hostport":
        read_portmap_nftables(state, path, table, family)
    elif name == "kube-proxy":
        read_kube_proxy_nftables(state, path, table, family)


def read_nat(state: NodeState, path: str, table, family: str) -> None:
    chains = table.chains
    for hook in ("PREROUTING", "OUTPUT"):
        chain = chains.get(hook)
        for index, rule in enumerate(chain.rules if chain else ()):
            if rule.target in HOSTPORT_ENTRY_CHAINS:
                state.entry_jumps.append(EntryJump(hook, index, "host-ports", rule.target, place(path, rule),
                                                   table.name))
            elif rule.target == KUBE_SERVICES:
                state.entry_jumps.append(EntryJump(hook, index, "kube-proxy", rule.target, place(path, rule),
                                                   table.name))
    services = chains.get(KUBE_SERVICES)
    if services is not None:
        state.services_anchor = DumpLine(path, services.line, 1, len(f":{KUBE_SERVICES}") + 1)
        for rule in services.rules:
            sets = rule.match_sets  # ipvs mode's; none in the 10,000 rules of a large iptables-mode table
            if rule.target == "KUBE-MARK-MASQ" and sets and any(name == "KUBE-CLUSTER-IP" for name, _ in sets):
                state.proxy_modes.add("ipvs")
                flags = next(flags for name, flags in sets if name == "KUBE-CLUSTER-IP")
                state.masquerade.append(MasqueradeRule(
                    "ipvs-set", rule.source if "-s" in rule.negated else "", flags, place(path, rule)))
            elif rule.target == "KUBE-NODE-PORT" or sets and any(name.startswith("KUBE-NODE-PORT-") for name, _ in sets):
                state.proxy_modes.add("ipvs")
    if "KUBE-NODE-PORT" in chains or "KUBE-LOAD-BALANCER" in chains:
        state.proxy_modes.add("ipvs")
    if "ipvs" not in state.proxy_modes and any(name.startswith(("KUBE-SVC-", "KUBE-EXT-", "KUBE-NODEPORTS"))
                                               and name != "KUBE-SVC-" for name in chains):
        state.proxy_modes.add("iptables")
    for rule in services.rules if services is not None else ():
        if rule.destination and rule.dports and rule.target.startswith("KUBE-SVC-"):
            state.cluster_ip_service_rules += 1
            service, port_name = service_of(rule.comment)
            state.cluster_ips.append(ClusterIpRule(rule.protocol, rule.destination.split("/")[0],
                                                   rule.dports[0][0], service, place(path, rule)))
    # iptables mode's per-Service masquerade rules, in the KUBE-SVC chains (most of a large table)
    for chain in chains.values():
        if chain.name.startswith("KUBE-SVC-"):
            for rule in chain.rules:
                if rule.target == "KUBE-MARK-MASQ" and rule.destination:
                    state.masquerade.append(MasqueradeRule(
                        "per-service", rule.source if "-s" in rule.negated else "", "", place(path, rule)))
    nodeports = chains.get("KUBE-NODEPORTS")
    seen: set[tuple[str, int]] = set()
    for rule in nodeports.rules if nodeports else ():
        if rule.dports and (rule.protocol, rule.dports[0][0]) not in seen:
            seen.add((rule.protocol, rule.dports[0][0]))
            add_node_port(state, path, rule, "forward", family)
    entry = read_portmap_iptables(state, path, chains, 0, family)
    read_crio_hostports(state, path, chains, entry, family)


def service_of(comment: str) -> tuple[str, str]:
    match = _SERVICE_COMMENT.match(comment)
    return (match.group(1), match.group(2) or "") if match else ("", "")


def add_node_port(state: NodeState, path: str, rule: Rule, action: str, family: str) -> None:
    service, port_name = service_of(rule.comment)
    low, high = rule.dports[0]
    if low == high:
        state.node_ports.append(NodePortRule(rule.protocol or "tcp", low, service, port_name, action,
                                             place(path, rule), family))


def to_address(text: str) -> tuple[str, int]:
    """`10.4.0.10:80`, `[fd00::1]:80`, `10.4.0.10` -> (address, port or 0)."""
    if text.startswith("["):
        address, _, port = text[1:].partition("]:")
        return address, int(port) if port.isdigit() else 0
    address, colon, port = text.rpartition(":")
    if colon and port.isdigit() and ":" not in address:
        return address, int(port)
    return text, 0


def read_portmap_iptables(state: NodeState, path: str, chains, order: int, family: str) -> int:
    top = chains.get(PORTMAP_DNAT_CHAIN)
    for jump in top.rules if top else ():
        if not jump.target.startswith("CNI-DN-") or jump.target not in chains:
            continue
        named = _DNAT_COMMENT.search(jump.comment)
        network, sandbox = (named.group(1), named.group(2)) if named else ("", "")
        matches = chain_hash(network, sandbox) == jump.target[len("CNI-DN-"):] if named else None
        for dnat in chains[jump.target].rules:
            if dnat.target != "DNAT" or not dnat.dports:
                continue
            port = dnat.dports[0][0]
            if jump.dports and not jump.matches_port(port):
                continue
            if jump.protocol and dnat.protocol and jump.protocol != dnat.protocol:
                continue
            pod_ip, pod_port = to_address(dnat.to_destination)
            order += 1
            state.host_ports.append(HostPortEntry(
                order, dnat.protocol or jump.protocol or "tcp", port,
                dnat.destination.split("/")[0] if dnat.destination and "-d" not in dnat.negated else "",
                pod_ip, pod_port, sandbox, network, jump.target, place(path, jump), place(path, dnat),
                "portmap-iptables", matches, family=family))
    return order


def read_crio_hostports(state: NodeState, path: str, chains, order: int, family: str) -> None:
    top = chains.get(CRIO_HOSTPORTS_CHAIN)
    for jump in top.rules if top else ():
        target = chains.get(jump.target)
        if target is None or not jump.dports:
            continue
        for dnat in target.rules:
            if dnat.target != "DNAT":
                continue
            pod_ip, pod_port = to_address(dnat.to_destination)
            order += 1
            state.host_ports.append(HostPortEntry(
                order, jump.protocol or dnat.protocol or "tcp", jump.dports[0][0],
                jump.destination.split("/")[0] if jump.destination else "", pod_ip, pod_port, "", "", jump.target,
                place(path, jump), place(path, dnat), "cri-o", None, jump.comment.split(" hostport")[0], family))
            break


def read_portmap_nftables(state: NodeState, path: str, table, family: str) -> None:
    order = 10_000 + len(state.host_ports)  # nftables hooks run apart from iptables' chains
    for chain_name in ("hostip_hostports", "hostports"):
        chain = table.chains.get(chain_name)
        for rule in chain.rules if chain else ():
            if rule.target != "DNAT" or not rule.dports:
                continue
            pod_ip, pod_port = to_address(rule.to_destination)
            order += 1
            state.host_ports.append(HostPortEntry(
                order, rule.protocol or "tcp", rule.dports[0][0],
                rule.destination if rule.destination and "-d" not in rule.negated else "", pod_ip, pod_port,
                rule.comment, "", chain_name, place(path, rule), place(path, rule), "portmap-nftables",
                family=family))


def read_kube_proxy_nftables(state: NodeState, path: str, table, family: str) -> None:
    state.proxy_modes.add("nftables")
    for map_name, action in (("service-nodeports", "forward"), ("no-endpoint-nodeports", "reject")):
        named = table.sets.get(map_name)
        for member, line in named.members if named else ():
            match = _NFT_NODEPORT.match(member)
            if match:
                state.node_ports.append(NodePortRule(match.group(1), int(match.group(2)),
                                                     f"{match.group(3)}/{match.group(4)}", match.group(5), action,
                                                     DumpLine(path, line, 1, 0), family))


# --- pods the cluster says run on a node ----------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RunningPod:
    """A pod as `--cluster` lists it: where it runs, its IPs, and its phase (`Succeeded` and
    `Failed` pods hold no IP any more, see `pods_by_ip`)."""

    namespace: str
    name: str
    node: str
    ips: tuple[str, ...]
    phase: str


def pods_by_ip(pods: Iterable[RunningPod], node: str) -> dict[str, RunningPod]:
    return {ip: pod for pod in pods if pod.node == node and pod.phase not in ("Succeeded", "Failed") for ip in pod.ips}


def running_pods_from_documents(documents) -> list[RunningPod]:
    """Pods of `kubectl get pods -A -o yaml` with their node and IPs (status.podIP(s))."""
    from kubelint_ports.loading.yaml_files import yamltree as yt

    pods = []
    for document in documents:
        root = document.root
        if yt.as_str(yt.get(root, "kind")) != "Pod":
            continue
        node = yt.at(root, "spec.nodeName")
        if node is None:
            continue
        ips = [yt.as_str(yt.get(item, "ip")) for item in yt.items(yt.at(root, "status.podIPs"), "status.podIPs")
               if yt.get(item, "ip") is not None]
        single = yt.at(root, "status.podIP")
        if not ips and single is not None:
            ips = [yt.as_str(single)]
        pods.append(RunningPod(yt.as_str(yt.at(root, "metadata.namespace")) or "default",
                               yt.as_str(yt.at(root, "metadata.name")), yt.as_str(node), tuple(ips),
                               yt.as_str(yt.at(root, "status.phase"))))
    return pods


def running_pods_from_rows(rows) -> list[RunningPod]:
    """`kubectl get pods -o wide` rows: a pod is running unless its STATUS says it finished."""
    return [RunningPod(row.namespace, row.name, row.node, (row.ip,) if row.ip not in ("<none>", "") else (),
                       "Succeeded" if row.status == "Completed" else "Failed" if row.status in ("Error", "Failed")
                       else "Running") for row in rows]


@dataclass(slots=True)
class NodeSnapshots:
    """What the `node` command's checks read: every node's state, and what the cluster says."""

    nodes: list[NodeState]
    pods: list[RunningPod] | None = None  # None: no --cluster, so which pods run is unknown
    services: list = field(default_factory=list)  # model.Service from manifests and --cluster
    service_cidrs: tuple = ()  # ipaddress networks, from the inputs or --service-cidr
    pod_cidrs: tuple = ()  # the cluster's pod range(s), from the inputs or --pod-cidr
    node_pod_cidrs: dict[str, tuple[str, ...]] = field(default_factory=dict)  # Node spec.podCIDRs (--nodes)

    def pods_on(self, node: str) -> dict[str, RunningPod] | None:
        """The pods --cluster says run on `node`, by IP; None when unknown: no --cluster, or one
        that lists no pod of any phase on a node of that name. Every node runs some pod, so a node
        --cluster never mentions is another name for it (the engine says so), not an empty node."""
        if self.pods is None or not any(pod.node == node for pod in self.pods):
            return None
        return pods_by_ip(self.pods, node)


def facts_from_dumps(node: NodeState):
    """What the node's own dumps establish for the datapath model: kube-proxy's mode, how hostPorts
    are implemented, and the order of the hostPort and kube-proxy jumps the rules show."""
    from kubelint_ports.model.datapath.facts import DatapathFacts, Fact

    facts: dict[str, Fact] = {}
    if node.proxy_mode is not None:
        facts["proxy_mode"] = Fact(node.proxy_mode, f"{node.name}'s rules")
    backends = {entry.backend for entry in node.host_ports}
    jumps = [jump for jump in node.entry_jumps if jump.hook == "PREROUTING"]
    if backends or any(jump.leads_to == "host-ports" for jump in jumps):
        crio = "cri-o" in backends or any(jump.chain == CRIO_HOSTPORTS_CHAIN for jump in jumps)
        facts["hostport"] = Fact("crio" if crio else "portmap", f"{node.name}'s hostPort chains")
        if not crio:
            facts["hostport_backend"] = Fact("nftables" if backends == {"portmap-nftables"} else "iptables",
                                             f"{node.name}'s hostPort chains")
    observed = jump_orders(jumps)
    if len({order for order, _ in observed}) == 1:  # sources that disagree observe nothing certain
        order, first = observed[0]
        facts["hostport_order"] = Fact(order, f"{first.place.path}:{first.place.line}")
    return DatapathFacts(**facts)


def jump_orders(jumps: list[EntryJump]):
    """(order, the jump that comes first) for each source (dump file and table) holding both a
    hostPort jump and kube-proxy's. Positions are compared within a source only: an
    iptables-legacy table and an iptables-nft one hook the same priority, so which runs first
    is no rule's position (the datapath model answers "undefined" for them)."""
    from kubelint_ports.model.datapath.facts import HOSTPORT_FIRST, KUBE_PROXY_FIRST

    observed = []
    for source in sorted({jump.source for jump in jumps}):
        mine = [jump for jump in jumps if jump.source == source]
        host_ports = next((jump for jump in mine if jump.leads_to == "host-ports"), None)
        kube_proxy = next((jump for jump in mine if jump.leads_to == "kube-proxy"), None)
        if host_ports is not None and kube_proxy is not None:
            first = host_ports if host_ports.index < kube_proxy.index else kube_proxy
            observed.append((HOSTPORT_FIRST if first is host_ports else KUBE_PROXY_FIRST, first))
    return observed


def unmatched_nodes(context: "NodeSnapshots", cluster_file: str) -> list[Diagnostic]:
    """`--cluster` files that say nothing about a snapshot's node: no pod at all (`No resources
    found`, an empty List), or none on a node of the snapshot's name (a directory named
    `node-26.internal` for the Node `node-26`). Every node runs pods (kube-proxy, the CNI agent),
    so the name is wrong: the node's pods count as unknown (`NodeSnapshots.pods_on`), else every
    hostPort there would look stale. When the hostPort DNATs lead to pods that --cluster places
    on one other node, that node's name is the likely one."""
    if context.pods is None:
        return []
    if not context.pods:
        return [Diagnostic(Location(cluster_file, 0, 0), (
            "--cluster lists no pods (`No resources found`, or an empty list): it says nothing about which pods run "
            "on the nodes; the pods running are unknown (use `kubectl get pods -A -o wide`)"))]
    diagnostics = []
    for state in context.nodes:
        if context.pods_on(state.name) is not None:
            continue
        targets = {entry.pod_ip for entry in state.host_ports}
        elsewhere = sorted({pod.node for pod in context.pods if pod.node and targets & set(pod.ips)})
        hint = (f"the pods its hostPort DNATs lead to run on {elsewhere[0]!r} there: if that is this node, use "
                f"`--node {elsewhere[0]}` or name the snapshot directory so" if len(elsewhere) == 1 else
                "name the snapshot directory after the Kubernetes node, or use `--node NAME`")
        diagnostics.append(Diagnostic(Location(state.path, 0, 0), (
            f"--cluster lists no pod on a node named {state.name!r}: {hint}. Until then --cluster says nothing "
            f"about {state.name}'s pods")))
    return diagnostics
