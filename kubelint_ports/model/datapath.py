"""Who receives a packet on a node: the one place that decides what a packet does.

Every rule that speaks about node traffic asks this module and tells no story of its own. The
answers are proven in the lab (`tests/lab/`, `docs/datapath.md`): real network namespaces, the
real CNI plugins, real iptables and nftables, kube-proxy's rules written in its own shapes.

How a node handles a packet sent to (destination, port, protocol), in the order the kernel runs it:

1. The dstnat hook (nat PREROUTING for packets from pods and other machines, nat OUTPUT for the
   node's own processes). Up to three tables hook it at the same priority (-100):
   - the iptables `nat` table (iptables-nft): kube-proxy's KUBE-SERVICES jump (iptables and IPVS
     modes; always inserted at the top) and the hostPort jump (CNI portmap's CNI-HOSTPORT-DNAT,
     CRI-O's KUBE-HOSTPORTS: appended since CNI plugins v0.7.5 / kubelet 1.7, inserted at the top
     by portmap < v0.7.5). Inside one table the first rule that DNATs or ACCEPTs ends the table.
   - kube-proxy's nftables table (`ip kube-proxy`, nftables mode).
   - a hostPort nftables table (portmap's `cni_hostport` backend, CRI-O >= 1.33 `crio-hostports`).
   Tables at the same priority run in the reverse order of their hook registration (the table
   whose base chain was created last runs first): nothing in a cluster fixes that order, so
   the answer is UNDEFINED unless an observed order is given. An ACCEPT ends only its own table;
   the first DNAT binds the connection and no later table rewrites it.
2. Filter REJECTs that kube-proxy writes for Services without endpoints (they match the address
   after any DNAT, so a DNATed packet passes them).
3. Local delivery: IPVS takes Service traffic at LOCAL_IN (ClusterIPs on `kube-ipvs0` and
   NodePorts), then a process's socket, else nothing answers.

API (what the rules, the `ports` map and node snapshots use):

- `DatapathFacts`: what is known, each `Fact` with its source (`kubelint-ports config` prints them):
  proxy mode and version, `nodePortAddresses`, `localhostNodePorts`, `masqueradeAll`, how hostPorts
  are implemented (portmap iptables/nftables and its version, CRI-O, none), and optionally the
  handler order observed on a live node (`hostport_order`).
- `Datapath(facts)`: `deliver(client, destination, use, port, protocol)` -> `Answer`. `client` is
  FROM_NODE or FROM_POD; `destination` a destination class (NODE_IP, HOST_IP, LOCALHOST,
  CLUSTER_IP, EXTERNAL_IP); `use` a `PortUse`: what occupies that (protocol, port) on the node.
  When facts are unknown the answer holds every plausible outcome with the facts it depends on.
- `Answer`: `receiver` (HOSTPORT, SERVICE, HOST_PROCESS, REJECTED, NOTHING, UNDEFINED or
  DEPENDS), `certain`, `outcomes` (each with its conditions and the handlers that decided it),
  `depends_on`, `summary(parties)` (one sentence naming winner and loser), `data()` (the
  `traffic` property of JSON and SARIF results).
- `masquerade_gap(...)`: which clients kube-proxy leaves unmasqueraded without clusterCIDR.

A node snapshot reader passes the order it observed (`hostport_order="hostport-first"` when the
hostPort jump or table runs before kube-proxy's) and known facts; the answer is then certain.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

# --- vocabulary ------------------------------------------------------------------------------------

HOSTPORT = "hostport"  # the hostPort pod, through a DNAT rule
SERVICE = "service"  # the Service's endpoints: kube-proxy's DNAT, or IPVS at local delivery
HOST_PROCESS = "host-process"  # a process listening on the node (hostNetwork pod, node daemon)
REJECTED = "rejected"  # kube-proxy's REJECT for a Service without endpoints: "connection refused"
NOTHING = "nothing"  # no handler and no listener
UNDEFINED = "undefined"  # handlers in different tables at the same hook priority: no fixed order
DEPENDS = "depends"  # the outcome depends on facts that are unknown
OTHERWISE = "otherwise"  # every other outcome, when an answer is focused on one receiver

FROM_NODE = "node"  # a process on the node itself (nat OUTPUT), 127.0.0.1 included
FROM_POD = "pod"  # a pod, or another machine (nat PREROUTING)

NODE_IP = "node-ip"  # an address of the node (for a hostIP-bound hostPort: any other than its hostIP)
HOST_IP = "host-ip"  # the hostIP a hostPort is bound to
LOCALHOST = "localhost"  # 127.0.0.1, from the node itself
CLUSTER_IP = "cluster-ip"  # a Service's ClusterIP
EXTERNAL_IP = "external-ip"  # a Service's externalIPs and load-balancer IPs
DESTINATIONS = (NODE_IP, HOST_IP, LOCALHOST, CLUSTER_IP, EXTERNAL_IP)

PROXY_MODES = ("iptables", "ipvs", "nftables")
# How hostPorts are implemented (the `hostport` trait of a world):
APPENDED = "iptables-appended"  # CNI portmap >= v0.7.5 (iptables backend), CRI-O < 1.33, kubelet >= 1.7
PREPENDED = "iptables-prepended"  # CNI portmap < v0.7.5: jumps inserted above KUBE-SERVICES
NFT_ANY = "nftables-any-destination"  # portmap nftables backend v1.6.1-v1.8.x (GHSA-jv3w-x3r3-g6rm)
NFT_LOCAL = "nftables-local"  # portmap nftables backend >= v1.9.0, CRI-O >= 1.33
NFT_BROKEN = "nftables-v1.6.0"  # portmap v1.6.0's nftables backend: dnat on the input hook, refused
NO_HOSTPORT = "none"  # nothing implements hostPorts (no portmap in the CNI configuration)
HOSTPORT_TRAITS = (APPENDED, PREPENDED, NFT_ANY, NFT_LOCAL, NFT_BROKEN, NO_HOSTPORT)

HOSTPORT_FIRST, KUBE_PROXY_FIRST = "hostport-first", "kube-proxy-first"
WILDCARD = "0.0.0.0"


# --- facts -----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Fact:
    """One thing known about the cluster and where it comes from."""

    value: Any
    source: str

    def __str__(self) -> str:
        return f"{self.value} ({self.source})"


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """`v1.29.3`, `1.1.1+ds1-3`, `v0.7.4-rc1` -> (1, 29, 3); None when no version is there."""
    if not text:
        return None
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", str(text).strip())
    if not match:
        return None
    return tuple(int(part) for part in match.groups(default="0"))


def version_text(version: tuple[int, ...]) -> str:
    return "v" + ".".join(str(part) for part in version)


@dataclass(frozen=True, slots=True)
class DatapathFacts:
    """What is known about how nodes handle packets; None: unknown."""

    proxy_mode: Fact | None = None  # "iptables" | "ipvs" | "nftables"
    kube_proxy_version: Fact | None = None  # (major, minor, patch)
    hostport: Fact | None = None  # "portmap" | "crio" | "none"
    hostport_backend: Fact | None = None  # "iptables" | "nftables" (portmap's `backend`)
    cni_plugins_version: Fact | None = None  # containernetworking/plugins release, (major, minor, patch)
    crio_version: Fact | None = None
    node_port_addresses: Fact | None = None  # tuple of CIDRs / "primary"; () or None: every address
    localhost_node_ports: Fact | None = None  # bool, iptables mode only (default true)
    masquerade_all: Fact | None = None  # bool
    hostport_order: Fact | None = None  # observed: HOSTPORT_FIRST | KUBE_PROXY_FIRST

    def items(self) -> list[tuple[str, Fact]]:
        return [(name.replace("_", "-"), fact) for name in self.__dataclass_fields__
                if (fact := getattr(self, name)) is not None]

    def shown(self) -> dict[str, dict[str, Any]]:
        """Facts as data: {name: {value, source}} (versions as text)."""
        return {name: {"value": version_text(fact.value) if name.endswith("version") else _plain(fact.value),
                       "source": fact.source} for name, fact in self.items()}


# What the model does when a fact is unknown (`kubelint-ports config` prints it).
WHEN_UNKNOWN = {
    "proxy-mode": "every mode is considered: iptables, ipvs, nftables",
    "kube-proxy-version": "v1.11 or later is assumed (IPVS ACCEPTs KUBE-CLUSTER-IP pairs)",
    "hostport": "CNI portmap is assumed",
    "hostport-backend": "portmap's iptables backend is assumed (nftables is opt-in)",
    "cni-plugins-version": "both rule orders are considered: portmap < v0.7.5 (first) and >= v0.7.5 (appended)",
    "crio-version": "both CRI-O hostport implementations are considered, when CRI-O is the runtime",
    "node-port-addresses": "every node address takes NodePort traffic",
    "localhost-node-ports": "true (kube-proxy's default in iptables mode)",
    "masquerade-all": "false (kube-proxy's default)",
    "hostport-order": "not observed: the order the components write (undefined across tables)",
}


def facts_table(facts: DatapathFacts) -> dict[str, dict[str, Any]]:
    """Every fact: its value and source, or what is assumed while it is unknown."""
    shown = facts.shown()
    return {name: shown.get(name, {"value": None, "unknown": assumed}) for name, assumed in WHEN_UNKNOWN.items()}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


# --- what a port is used for on a node ------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PortUse:
    """What occupies one (protocol, port) on a node, as far as the objects say."""

    host_port_ip: str | None = None  # a hostPort: WILDCARD or its hostIP; None: no hostPort
    host_process: bool = False  # a process listens on every address of the node
    node_port: bool = False  # a Service's nodePort (or healthCheckNodePort)
    service_port: bool = False  # a Service with a ClusterIP (external, LB IPs) serves this port
    endpoints: bool | None = None  # whether that Service has endpoints; None: unknown
    # The Service's external or load-balancer IP is an address of this node: the hostPort (on every
    # address, or bound to that one) and the node's processes see packets to it as local.
    external_ip_on_node: bool = False


# --- worlds: every fact fixed ----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class World:
    proxy: str
    hostport: str
    endpoints: bool = True
    ipvs_accepts: bool = True  # kube-proxy >= v1.11 ACCEPTs KUBE-CLUSTER-IP pairs (kubernetes#62718)
    localhost_node_ports: bool = True
    node_ports_on_node_ip: bool = True  # nodePortAddresses includes the node address asked about
    order: str | None = None  # observed order between hostPort and kube-proxy handlers


@dataclass(frozen=True, slots=True)
class Route:
    """What one world does with the packet: the receiver and the handlers that decided it."""

    receiver: str
    steps: tuple[str, ...] = ()
    alternatives: tuple["Route", ...] = ()  # UNDEFINED: what each hook order does

    @property
    def receivers(self) -> frozenset[str]:
        if self.alternatives:
            return frozenset(route.receiver for route in self.alternatives)
        return frozenset((self.receiver,))


@dataclass(frozen=True, slots=True)
class _Packet:
    world: World
    client: str
    destination: str
    use: PortUse

    @property
    def local(self) -> bool:
        """Is the destination an address of the node (`--dst-type LOCAL`, `fib daddr type local`)?"""
        if self.destination in (NODE_IP, HOST_IP, LOCALHOST):
            return True
        if self.destination == EXTERNAL_IP and self.use.external_ip_on_node:
            return True
        return self.world.proxy == "ipvs"  # IPVS binds ClusterIPs, external and LB IPs to kube-ipvs0

    def hostport_matches(self, any_destination: bool = False) -> bool:
        bound = self.use.host_port_ip
        if bound is None:
            return False
        if bound != WILDCARD:  # the rule carries `-d hostIP` / `ip daddr hostIP`
            return self.destination == HOST_IP or self.destination == EXTERNAL_IP and self.use.external_ip_on_node
        return self.local or any_destination


# Each handler returns (verdict, step) or None; verdict "dnat:<receiver>" or "accept".

def _kube_proxy_iptables(packet: _Packet):
    world, use, destination = packet.world, packet.use, packet.destination
    if destination in (CLUSTER_IP, EXTERNAL_IP) and use.service_port and world.endpoints:
        return f"dnat:{SERVICE}", "kube-proxy's KUBE-SERVICES rule DNATs it to the Service's endpoints"
    if use.node_port and _node_port_address(packet, localhost_allowed=world.localhost_node_ports):
        if world.endpoints:
            return f"dnat:{SERVICE}", "kube-proxy's KUBE-NODEPORTS rule DNATs it to the Service's endpoints"
        return "pass", "kube-proxy writes no NodePort DNAT for a Service without endpoints"
    return None


def _kube_proxy_ipvs(packet: _Packet):
    # External IPs have been ACCEPTed since they came to IPVS mode; ClusterIP pairs since v1.11.
    accepted = packet.destination == EXTERNAL_IP or packet.world.ipvs_accepts
    if packet.destination in (CLUSTER_IP, EXTERNAL_IP) and packet.use.service_port and accepted:
        return "accept", "kube-proxy ACCEPTs the Service's (IP, port) pair in KUBE-SERVICES, which ends the nat table"
    if packet.use.node_port and _node_port_address(packet, False):
        return "pass", "kube-proxy only marks NodePort packets in IPVS mode"
    return None


def _kube_proxy_nftables(packet: _Packet):
    world, use, destination = packet.world, packet.use, packet.destination
    if destination in (CLUSTER_IP, EXTERNAL_IP) and use.service_port and world.endpoints:
        return f"dnat:{SERVICE}", "kube-proxy's nftables `services` chain DNATs it to the Service's endpoints"
    if use.node_port and world.endpoints and _node_port_address(packet, localhost_allowed=False):
        return f"dnat:{SERVICE}", "kube-proxy's nftables NodePort map DNATs it to the Service's endpoints"
    return None


def _node_port_address(packet: _Packet, localhost_allowed: bool) -> bool:
    if packet.destination == LOCALHOST:
        return localhost_allowed
    return packet.destination in (NODE_IP, HOST_IP) and packet.world.node_ports_on_node_ip


def _hostport_iptables(packet: _Packet):
    if packet.hostport_matches():
        return f"dnat:{HOSTPORT}", "the hostPort rule (CNI-HOSTPORT-DNAT) DNATs it to the hostPort pod"
    return None


def _hostport_nftables(packet: _Packet):
    any_destination = packet.world.hostport == NFT_ANY and packet.client == FROM_POD
    if packet.hostport_matches(any_destination=any_destination):
        if any_destination and not packet.local:
            return f"dnat:{HOSTPORT}", "portmap's nftables prerouting chain DNATs that port for any destination"
        return f"dnat:{HOSTPORT}", "the hostPort rule in its nftables table DNATs it to the hostPort pod"
    return None


_KUBE_PROXY_IPTABLES = {"iptables": _kube_proxy_iptables, "ipvs": _kube_proxy_ipvs}


def _tables(world: World) -> list[tuple[str, list]]:
    """The dstnat tables, each an ordered list of (owner, handler)."""
    tables: list[tuple[str, list]] = []
    iptables_nat: list[tuple[str, Any]] = []
    if world.proxy in _KUBE_PROXY_IPTABLES:
        iptables_nat.append(("kube-proxy", _KUBE_PROXY_IPTABLES[world.proxy]))
    if world.hostport in (APPENDED, PREPENDED):
        hostport_first = world.hostport == PREPENDED
        if world.order is not None and iptables_nat:
            hostport_first = world.order == HOSTPORT_FIRST
        if hostport_first:
            iptables_nat.insert(0, ("hostport", _hostport_iptables))
        else:
            iptables_nat.append(("hostport", _hostport_iptables))
    if iptables_nat:
        tables.append(("iptables nat table", iptables_nat))
    if world.proxy == "nftables":
        tables.append(("kube-proxy's nftables table", [("kube-proxy", _kube_proxy_nftables)]))
    if world.hostport in (NFT_ANY, NFT_LOCAL):
        tables.append(("hostPort nftables table", [("hostport", _hostport_nftables)]))
    return tables


def _run_tables(packet: _Packet, tables: list[tuple[str, list]]) -> Route | None:
    """Tables in the given order; the first DNAT decides (its binding holds for the others)."""
    steps: list[str] = []
    for _, handlers in tables:
        for _, handler in handlers:
            verdict = handler(packet)
            if verdict is None:
                continue
            action, step = verdict
            steps.append(step)
            if action == "pass":
                continue
            if action == "accept":
                break  # ends this table only
            return Route(action.split(":", 1)[1], tuple(steps))
    return Route(NOTHING, tuple(steps)) if steps else None


def _after_nat(packet: _Packet, steps: tuple[str, ...]) -> Route:
    world, use, destination = packet.world, packet.use, packet.destination
    service_address = destination in (CLUSTER_IP, EXTERNAL_IP) and use.service_port
    if world.proxy in ("iptables", "nftables"):
        if service_address and not world.endpoints:
            return Route(REJECTED, steps + ("kube-proxy REJECTs the Service's address: it has no endpoints",))
        localhost_rejected = world.proxy == "iptables"  # nftables' check skips 127.0.0.0/8
        if use.node_port and not world.endpoints and _node_port_address(packet, localhost_rejected):
            return Route(REJECTED, steps + ("kube-proxy REJECTs the NodePort: the Service has no endpoints",))
    if world.proxy == "ipvs" and (service_address or (use.node_port and _node_port_address(packet, False))):
        if world.endpoints:
            return Route(SERVICE, steps + ("IPVS takes it at local delivery, before any socket",))
        return Route(REJECTED, steps + ("IPVS has no real server for it and refuses it",))
    if packet.local and use.host_process:
        return Route(HOST_PROCESS, steps + ("delivered to the process listening on the node",))
    return Route(NOTHING, steps)


@functools.lru_cache(maxsize=4096)
def route(world: World, client: str, destination: str, use: PortUse) -> Route:
    """What one fully known world does with one packet (pure: cached, the rules ask alike questions)."""
    if destination not in DESTINATIONS:
        raise ValueError(f"unknown destination class {destination!r}")
    if destination == LOCALHOST and client != FROM_NODE:
        raise ValueError("127.0.0.1 is the node's only for the node's own processes")
    packet = _Packet(world, client, destination, use)
    if world.hostport == NFT_BROKEN and use.host_port_ip is not None:
        world = replace(world, hostport=NO_HOSTPORT)  # the plugin's ADD fails: no rule, no pod
        packet = _Packet(world, client, destination, use)
    if world.proxy == "nftables" and client == FROM_NODE and destination in (CLUSTER_IP, EXTERNAL_IP) \
            and use.service_port and not world.endpoints:
        # filter-output runs at dstnat-10, before any nat table sees the packet
        return Route(REJECTED, ("kube-proxy REJECTs the Service's address before NAT: it has no endpoints",))
    tables = _tables(world)
    orders = [tables]
    if len(tables) > 1:
        if world.order is None:
            orders = [list(order) for order in itertools.permutations(tables)]
        else:
            first = "hostport" if world.order == HOSTPORT_FIRST else "kube-proxy"
            orders = [sorted(tables, key=lambda table: table[1][0][0] != first)]
    routes = []
    for order in orders:
        nat = _run_tables(packet, order)
        if nat is not None and nat.receiver != NOTHING:
            routes.append(nat)
        else:
            routes.append(_after_nat(packet, nat.steps if nat is not None else ()))
    unique = list(dict.fromkeys(routes))
    if len({r.receiver for r in unique}) == 1:
        return unique[0]
    return Route(UNDEFINED, ("the tables hook dstnat at the same priority: the one registered last runs first",),
                 tuple(unique))


# --- from facts to plausible worlds ----------------------------------------------------------------

# Dimensions enumerated when unknown, with the words that name their values in messages.
DIMENSION_WORDS = {
    "proxy-mode": {"iptables": "in iptables mode", "ipvs": "in IPVS mode", "nftables": "in nftables mode"},
    "hostport": {APPENDED: "with CNI portmap >= v0.7.5 (or CRI-O < 1.33)",
                 PREPENDED: "with CNI portmap < v0.7.5",
                 NFT_ANY: "with portmap's nftables backend v1.6.1-v1.8.x",
                 NFT_LOCAL: "with portmap's nftables backend >= v1.9 (or CRI-O >= 1.33)",
                 NFT_BROKEN: "with portmap v1.6.0's nftables backend",
                 NO_HOSTPORT: "without a hostPort implementation"},
    "endpoints": {True: "when the Service has endpoints", False: "when the Service has no endpoints"},
}
FACT_OF_DIMENSION = {"proxy-mode": "proxy-mode", "hostport": "cni-plugins-version", "endpoints": "endpoints"}


@dataclass(frozen=True, slots=True)
class Outcome:
    receiver: str
    when: tuple[tuple[tuple[str, Any], ...], ...]  # OR of ANDs of (dimension, value); () = always
    route: Route

    def condition_text(self) -> str:
        terms = [" ".join(DIMENSION_WORDS[d][v] for d, v in term) for term in self.when if term]
        return _join_or(terms)


@dataclass(frozen=True, slots=True)
class Answer:
    client: str
    destination: str
    port: int
    protocol: str
    outcomes: tuple[Outcome, ...]
    focused: tuple[str, ...]  # (receiver,) when other outcomes were merged into OTHERWISE
    facts: DatapathFacts
    worlds: tuple[tuple[tuple, Route], ...] = ()  # every plausible world's values and route
    dimensions: tuple[str, ...] = ()
    use: PortUse = PortUse()

    def deciding_facts(self) -> list[str]:
        """The known facts without which the answer would differ (the ones a message should cite)."""
        return list(_deciding_facts(self.facts, self.client, self.destination, self.use))



    @property
    def depends_on(self) -> tuple[str, ...]:
        """The unknown facts the outcome depends on (as named in `kubelint-ports config`)."""
        mentioned = {name for outcome in self.outcomes for term in outcome.when for name, _ in term}
        return tuple(FACT_OF_DIMENSION[name] for name in self.dimensions if name in mentioned)

    def focus(self, receiver: str) -> "Answer":
        """The same answer, told as "`receiver` gets it when ...; otherwise ..."."""
        return replace(self, outcomes=_outcomes(self.worlds, self.dimensions, receiver), focused=(receiver,))

    @property
    def receiver(self) -> str:
        return self.outcomes[0].receiver if len(self.outcomes) == 1 else DEPENDS

    @property
    def certain(self) -> bool:
        return self.receiver not in (UNDEFINED, DEPENDS, OTHERWISE)

    def possible(self, receiver: str) -> bool:
        return any(receiver in route.receivers for _, route in self.worlds)

    def always(self, receiver: str) -> bool:
        return all(route.receivers == {receiver} for _, route in self.worlds)

    def data(self, parties: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The `traffic` property of a finding: the model's answer as data."""
        parties = parties or {}
        receiver = self.receiver
        losers = sorted(losers_of(receiver, parties)) if self.certain else []
        return {
            "destination": self.destination,
            "client": self.client,
            "port": self.port,
            "protocol": self.protocol,
            "receiver": receiver,
            "receiverName": parties.get(receiver, ""),
            "loser": [parties[loser] for loser in losers],
            "certain": self.certain,
            "possible": sorted({r for outcome in self.outcomes for r in outcome.route.receivers}),
            "dependsOn": list(self.depends_on),
            "outcomes": [{"receiver": o.receiver,
                          "possible": sorted(o.route.receivers),
                          "when": [{d: v for d, v in term} for term in o.when],
                          "handlers": list(o.route.steps)} for o in self.outcomes],
            "facts": self.facts.shown(),
        }


@functools.lru_cache(maxsize=1024)
def _deciding_facts(facts: DatapathFacts, client: str, destination: str, use: PortUse) -> tuple[str, ...]:
    known = Datapath(facts).deliver(client, destination, use, 0)
    deciding = []
    for name, _ in facts.items():
        attribute = name.replace("-", "_")
        unknown = Datapath(replace(facts, **{attribute: None})).deliver(client, destination, use, 0)
        if {route for _, route in unknown.worlds} != {route for _, route in known.worlds}:
            deciding.append(name)
    return tuple(deciding)


def losers_of(receiver: str, parties: Mapping[str, str]) -> set[str]:
    """Who expected the packet and does not get it."""
    losers = {party for party in parties if party not in (receiver, OTHERWISE)}  # OTHERWISE is a clause, not a party
    if receiver == REJECTED:
        losers.discard(SERVICE)  # a Service without endpoints lost nothing
    return losers


class Datapath:
    """The packet decisions for nodes with these facts."""

    def __init__(self, facts: DatapathFacts = DatapathFacts()):
        self.facts = facts
        self._answers: dict[tuple, Answer] = {}  # the answer does not depend on the port number

    # -- traits from facts

    def proxy_modes(self) -> tuple[str, ...]:
        mode = self.facts.proxy_mode.value if self.facts.proxy_mode else None
        return (mode,) if mode in PROXY_MODES else PROXY_MODES

    def hostport_traits(self) -> tuple[str, ...]:
        """The plausible hostPort implementations. Nothing known: CNI portmap's iptables backend,
        of any version (its nftables backend is opt-in, and "none" needs a CNI config to say so)."""
        facts = self.facts
        kind = facts.hostport.value if facts.hostport else None
        version = facts.cni_plugins_version.value if facts.cni_plugins_version else None
        backend = facts.hostport_backend.value if facts.hostport_backend else None
        if kind == "none":
            return (NO_HOSTPORT,)
        if kind == "crio":
            crio = facts.crio_version.value if facts.crio_version else None
            if crio is None:
                return (APPENDED, NFT_LOCAL)
            return (NFT_LOCAL,) if crio >= (1, 33) else (APPENDED,)
        if backend == "nftables":
            if version is None:
                return (NFT_ANY, NFT_LOCAL)
            if version < (1, 6):
                return (APPENDED,) if version >= (0, 7, 5) else (PREPENDED,)  # no such backend yet
            if version < (1, 6, 1):
                return (NFT_BROKEN,)
            return (NFT_ANY,) if version < (1, 9) else (NFT_LOCAL,)
        if version is None:
            return (APPENDED, PREPENDED)
        return (APPENDED,) if version >= (0, 7, 5) else (PREPENDED,)

    def world_base(self) -> dict[str, Any]:
        facts = self.facts
        version = facts.kube_proxy_version.value if facts.kube_proxy_version else None
        localhost = facts.localhost_node_ports.value if facts.localhost_node_ports else True
        addresses = facts.node_port_addresses.value if facts.node_port_addresses else ()
        order = facts.hostport_order.value if facts.hostport_order else None
        return {"ipvs_accepts": version is None or version >= (1, 11),
                "localhost_node_ports": bool(localhost),
                # "primary" and CIDRs are matched against the node address asked about; 127.0.0.1
                # is a NodePort address only in iptables mode with localhostNodePorts.
                "node_ports_on_node_ip": True if not addresses else any(a != "127.0.0.1/32" for a in addresses),
                "order": order}

    # -- questions

    def deliver(self, client: str, destination: str, use: PortUse, port: int, protocol: str = "TCP") -> Answer:
        """Who receives a packet sent by `client` to `destination`:`port`/`protocol`."""
        key = (client, destination, use)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = self._deliver(client, destination, use)
        return replace(answer, port=port, protocol=protocol)

    def _deliver(self, client: str, destination: str, use: PortUse, port: int = 0, protocol: str = "") -> Answer:
        dimensions: list[tuple[str, tuple]] = [("proxy-mode", self.proxy_modes()), ("hostport", self.hostport_traits())]
        needs_endpoints = use.node_port or use.service_port
        dimensions.append(("endpoints", (use.endpoints,) if use.endpoints is not None or not needs_endpoints
                           else (True, False)))
        base = self.world_base()
        results: dict[tuple, Route] = {}
        for values in itertools.product(*(vals for _, vals in dimensions)):
            assignment = dict(zip((name for name, _ in dimensions), values))
            world = World(proxy=assignment["proxy-mode"], hostport=assignment["hostport"],
                          endpoints=assignment["endpoints"] if assignment["endpoints"] is not None else True, **base)
            results[values] = route(world, client, destination, use)
        names = tuple(name for name, _ in dimensions)
        worlds = tuple(results.items())
        return Answer(client, destination, port, protocol, _outcomes(worlds, names), (), self.facts, worlds, names,
                      use)


def _outcomes(worlds: tuple[tuple[tuple, Route], ...], names: tuple[str, ...], focus: str | None = None):
    """One outcome per receiver (and per set of alternatives); the first route found explains it.
    With `focus`, every world where that receiver cannot win is one OTHERWISE outcome."""
    by_receiver: dict[tuple, list[tuple]] = {}
    explanation: dict[tuple, Route] = {}
    for values, result in worlds:
        key = (result.receiver, tuple(sorted(result.receivers)))
        if focus is not None and focus not in result.receivers:
            key, result = (OTHERWISE, (OTHERWISE,)), Route(OTHERWISE)
        by_receiver.setdefault(key, []).append(values)
        explanation.setdefault(key, result)
    universe = [values for values, _ in worlds]
    varying = [name for index, name in enumerate(names) if len({values[index] for values in universe}) > 1]
    outcomes = []
    for key in sorted(by_receiver, key=_outcome_order):
        when = () if len(by_receiver) == 1 else _cover(set(by_receiver[key]), universe, list(names), varying)
        outcomes.append(Outcome(key[0], when, explanation[key]))
    return tuple(outcomes)


def _outcome_order(key: tuple) -> tuple:
    order = (HOSTPORT, SERVICE, HOST_PROCESS, REJECTED, NOTHING, UNDEFINED, OTHERWISE)
    return (order.index(key[0]) if key[0] in order else len(order), key)


def _cover(worlds: set[tuple], universe: list[tuple], names: list[str], varying: list[str]):
    """A short description of `worlds` among `universe`: terms of at most two (dimension, value)
    pairs, each holding only worlds of the set, chosen greedily."""
    indexes = [names.index(name) for name in varying]
    candidates = []
    for size in (1, 2):
        for chosen in itertools.combinations(indexes, size):
            for values in itertools.product(*(sorted({u[i] for u in universe}, key=repr) for i in chosen)):
                term = tuple(zip(chosen, values))
                matching = {u for u in universe if all(u[i] == v for i, v in term)}
                if matching and matching <= worlds:
                    candidates.append((term, matching))
    uncovered, terms = set(worlds), []
    while uncovered:
        best = max(candidates, key=lambda item: (len(item[1] & uncovered), -len(item[0])), default=None)
        if best is None or not best[1] & uncovered:
            # no short term fits: name each remaining world in full
            for world in sorted(uncovered, key=repr):
                terms.append(tuple((i, world[i]) for i in indexes))
            break
        terms.append(best[0])
        uncovered -= best[1]
    return tuple(tuple((names[i], v) for i, v in term) for term in terms)


def _join_or(parts: list[str]) -> str:
    parts = list(dict.fromkeys(parts))
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " or " + parts[-1]


# --- words for messages ----------------------------------------------------------------------------

RECEIVER_WORDS = {
    HOSTPORT: "the hostPort pod",
    SERVICE: "the Service",
    HOST_PROCESS: "the process on the node",
    REJECTED: "nobody (kube-proxy REJECTs it: connection refused)",
    NOTHING: "nobody",
}


def who(receiver: str, parties: Mapping[str, str]) -> str:
    return parties.get(receiver) or RECEIVER_WORDS.get(receiver, receiver)


def outcome_clause(outcome: Outcome, parties: Mapping[str, str]) -> str:
    """`in IPVS mode nginx takes it` / `in nftables mode the order is undefined (...)`."""
    when = outcome.condition_text()
    if outcome.receiver == UNDEFINED:
        options = " or ".join(who(r, parties) for r in sorted(outcome.route.receivers, key=_receiver_rank))
        what = f"the order is undefined ({options}: whichever table hooked dstnat last runs first)"
    elif outcome.receiver == REJECTED:
        what = "kube-proxy refuses it"
    elif outcome.receiver == NOTHING:
        what = "nothing answers"
    elif outcome.receiver == OTHERWISE:
        return parties.get(OTHERWISE, "otherwise it goes elsewhere")
    else:
        what = f"{who(outcome.receiver, parties)} gets it"
    return f"{what} {when}".strip() if when else what


def _receiver_rank(receiver: str) -> int:
    order = (HOSTPORT, SERVICE, HOST_PROCESS, REJECTED, NOTHING)
    return order.index(receiver) if receiver in order else len(order)


def summary(answer: Answer, parties: Mapping[str, str]) -> str:
    """One sentence: the winner and the loser when certain, else what each outcome depends on."""
    if answer.certain:
        outcome = answer.outcomes[0]
        mechanism = "; ".join(outcome.route.steps)
        losers = sorted(losers_of(outcome.receiver, parties))
        lost = f", and {' and '.join(parties[loser] for loser in losers)} never sees it" if losers else ""
        winner = who(outcome.receiver, parties)
        if outcome.receiver == REJECTED:
            return f"{mechanism}{lost}"
        if not mechanism:  # no handler and no listener: the packet finds nothing on this node
            return f"no rule and no listener on the node takes it{lost}"
        return f"{mechanism}, so {winner} receives it{lost}"
    if len(answer.outcomes) == 1:  # UNDEFINED whatever the unknown facts
        return outcome_clause(answer.outcomes[0], parties)
    return "; ".join(outcome_clause(outcome, parties) for outcome in answer.outcomes)


FACT_WORDS = {"proxy-mode": "proxy mode", "kube-proxy-version": "kube-proxy", "hostport": "hostPorts by",
              "hostport-backend": "portmap backend", "cni-plugins-version": "CNI plugins", "crio-version": "CRI-O",
              "node-port-addresses": "nodePortAddresses", "localhost-node-ports": "localhostNodePorts",
              "masquerade-all": "masqueradeAll", "hostport-order": "observed order"}


def fact_text(name: str, value: Any) -> str:
    """`proxy mode ipvs`, `masqueradeAll false`, `nodePortAddresses 10.0.0.0/8, 127.0.0.1/32`."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, (list, tuple)):
        value = ", ".join(map(str, value))
    return f"{FACT_WORDS.get(name, name)} {value}"


def fact_sources(answer: Answer, names: Iterable[str]) -> str:
    """`(proxy mode ipvs from --proxy-mode; CNI plugins v1.1.1 from kube-system/ConfigMap/...)`"""
    shown = answer.facts.shown()
    parts = [f"{fact_text(name, shown[name]['value'])} from {shown[name]['source']}"
             for name in names if name in shown]
    return f" ({'; '.join(parts)})" if parts else ""


# --- kube-proxy's masquerade for Service traffic (KP401-KP403) ------------------------------------

def first_dnat(entries, later):
    """Of a node's hostPort DNAT entries in rule order (`order`, `backend`, `host_ip`,
    `overlaps()`, as model.node_state keeps them), the earlier one that receives every packet
    `later` would match, or None. DNAT ends the nat table's traversal, so within one backend the
    first matching entry wins (the lab's replay of incident 001: a stale CNI-DN chain ahead of the
    live one took every connection); a wildcard host IP matches every address, a specific one only
    itself. Entries of different backends (portmap's iptables rules against an nftables table)
    are never ordered here: their order is the tables' hook order, decided by `route`."""
    for entry in entries:
        if entry.order >= later.order:
            return None
        if entry.backend == later.backend and entry.overlaps(later) and (
                not entry.host_ip or entry.host_ip == later.host_ip):
            return entry
    return None


def masqueraded(mode: str, client: str, *, cluster_cidr: str | None, version: tuple[int, ...] | None = None,
                masquerade_all: bool = False) -> bool:
    """Does kube-proxy masquerade a client's traffic to a ClusterIP?

    `client`: "pod" (its address is a pod address), "node" (a node process or hostNetwork pod:
    in IPVS mode it sends from the ClusterIP itself, bound to kube-ipvs0, elsewhere from the node's
    address), "off-cluster" (a machine that routes the Service CIDR to a node). `cluster_cidr`:
    None when kube-proxy has none, else "pods" (the pod CIDR), "services" (it holds the Service
    CIDR: KP402) or "elsewhere" (it misses this client's address: KP403).
    """
    if masquerade_all:
        return True
    if cluster_cidr is None:
        # IPVS writes `-m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ` since v1.11
        # (kubernetes#63319); nothing else masquerades without a local-traffic detector.
        return mode == "ipvs" and client == "node" and (version is None or version >= (1, 11))
    source_in_cidr = {"pod": cluster_cidr == "pods",
                      "node": mode == "ipvs" and cluster_cidr == "services",
                      "off-cluster": False}[client]
    return not source_in_cidr  # `! -s <clusterCIDR> ... -j KUBE-MARK-MASQ`


# --- kube-proxy's masquerade without clusterCIDR (KP401-KP403) -----------------------------------

@dataclass(frozen=True, slots=True)
class MasqueradeGap:
    """Which clients' Service traffic kube-proxy leaves unmasqueraded, for one version."""

    versions: str  # "kube-proxy < v1.11"
    node_clients_broken: bool
    text: str


def masquerade_gap(mode: str, version: tuple[int, ...] | None) -> tuple[MasqueradeGap, ...]:
    """kube-proxy without clusterCIDR (detectLocalMode ClusterCIDR, masqueradeAll off): what breaks,
    one entry per plausible version class (`masqueraded` decides; the lab checks it)."""
    off_cluster = ("clients outside the cluster that route the Service CIDR to a node are not masqueraded, "
                   "so a backend on another node answers them directly and the reply never matches their "
                   "connection")
    classes = [(None, f"kube-proxy ({mode} mode)")]
    if mode == "ipvs":
        classes = [((1, 10), "kube-proxy < v1.11"), ((1, 11), "kube-proxy >= v1.11")]
        if version is not None:
            classes = [classes[0] if version < (1, 11) else classes[1]]
    gaps = []
    for sample, label in classes:
        if masqueraded(mode, "node", cluster_cidr=None, version=sample):
            text = (f"node processes still work (the `KUBE-CLUSTER-IP src,dst` rule masquerades what the node "
                    f"sends from a VIP), but {off_cluster}")
            gaps.append(MasqueradeGap(label, False, text))
        elif mode == "ipvs":
            gaps.append(MasqueradeGap(label, True, (
                "node processes and hostNetwork pods reach no Service: the node sends to a ClusterIP (bound to "
                "kube-ipvs0) from that ClusterIP, no rule masquerades it, and the backend's reply goes back to "
                "the VIP on its own node (incident 002)")))
        else:
            gaps.append(MasqueradeGap(label, False, (
                f"node processes still work (they send from the node's address, which replies find), but "
                f"{off_cluster}")))
    return tuple(gaps)
