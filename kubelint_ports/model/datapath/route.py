"""What one fully known node (a `World`) does with one packet: the handlers in the order the kernel
runs them, and the receiver. Steps are ids; `phrases.STEP_WORDS` says them in words.

The order of handlers:

1. The dstnat hook (nat PREROUTING for packets from pods and other machines, nat OUTPUT for the
   node's own processes). Up to three tables hook it at the same priority (-100):
   - the iptables `nat` table: kube-proxy's KUBE-SERVICES jump (iptables and IPVS modes, inserted
     at the top when absent) and the hostPort jump (CNI portmap's CNI-HOSTPORT-DNAT, CRI-O's
     KUBE-HOSTPORTS: appended since CNI plugins v0.7.5 / kubelet 1.7; portmap < v0.7.5 inserts it
     at the top when absent, so of the two the one inserted last runs first). Inside one table the
     first rule that DNATs or ACCEPTs ends the table. kube-proxy on iptables-legacy beside portmap
     on iptables-nft makes that two tables.
   - kube-proxy's nftables table (`ip kube-proxy`, nftables mode).
   - a hostPort nftables table (portmap's `cni_hostport` backend, CRI-O >= 1.33 `crio-hostports`).
   Tables at the same priority run in the reverse order of their hook registration: nothing in a
   cluster fixes that order, so the answer is UNDEFINED unless an observed order is given. An
   ACCEPT ends only its own table; the first DNAT binds the connection.
2. Filter REJECTs and DROPs kube-proxy writes for Services without (local) endpoints; they match
   the address after any DNAT, so a DNATed packet passes them.
3. Local delivery: IPVS takes Service traffic at LOCAL_IN (ClusterIPs on `kube-ipvs0`, NodePorts on
   the node's addresses but never 127.0.0.1), then a process's socket, else nothing answers.

externalTrafficPolicy: Local without an endpoint on the node (kube-proxy's `KUBE-EXT-*` /
`external-*` chain, `pkg/proxy/{iptables,nftables}/proxier.go`): pods' packets (`-s <clusterCIDR>`,
written only when kube-proxy tells pods apart: without a clusterCIDR pods are treated as outside
clients) and the node's own (`--src-type LOCAL`) go to the Service's endpoints anywhere; the chain has no
final jump for the rest, so a packet from outside the node passes on to the next handler and, if
none takes it, meets kube-proxy's filter DROP. IPVS serves such NodePorts from local endpoints only,
for every client, and RETURNs them in KUBE-NODE-PORT (ACCEPT before v1.11).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import replace
from typing import Any

from kubelint_ports.records import record
from kubelint_ports.model.datapath.facts import (
    APPENDED,
    CLUSTER_IP,
    DESTINATIONS,
    EXTERNAL_IP,
    FROM_NODE,
    FROM_OUTSIDE,
    FROM_POD,
    HOST_IP,
    HOST_PROCESS,
    HOSTPORT,
    HOSTPORT_FIRST,
    LOCALHOST,
    NFT_ANY,
    NFT_BROKEN,
    NFT_LOCAL,
    NO_HOSTPORT,
    NODE_IP,
    NOTHING,
    PREPENDED,
    REJECTED,
    DROPPED,
    SECONDARY_IP,
    SERVICE,
    UNDEFINED,
    WILDCARD,
    PortUse,
)

# How a world's nodePortAddresses leave NodePorts: every local address, the primary one, CIDRs, or
# (the keyword `localhost` alone) the loopback addresses only.
ALL_ADDRESSES, PRIMARY_ADDRESS, CIDR_ADDRESSES, LOOPBACK_ONLY = "all", "primary", "cidrs", "loopback"


@record(frozen=True, slots=True)
class World:
    proxy: str
    hostport: str
    endpoints: bool = True
    local_endpoints: bool = True  # this node runs an endpoint (matters with a traffic policy Local)
    # kube-proxy >= v1.11: IPVS ACCEPTs KUBE-CLUSTER-IP pairs (kubernetes#62718) and RETURNs
    # externalTrafficPolicy Local NodePorts; before, it ACCEPTed those NodePorts.
    ipvs_accepts: bool = True
    # kube-proxy v1.10 to v1.21: the IPVS proxier counts 127.0.0.1 among the node's addresses and
    # makes a virtual server of 127.0.0.1:nodePort, where connections hang (kubernetes#96879,
    # removed by kubernetes#101023 in v1.22).
    ipvs_localhost: bool = False
    localhost_node_ports: bool = True
    node_port_addresses: str = ""  # ALL_ADDRESSES | PRIMARY_ADDRESS | CIDR_ADDRESSES; "": the mode's default
    secondary_covered: bool = False  # CIDR_ADDRESSES: the CIDRs hold the secondary address asked about
    localhost_covered: bool = False  # CIDR_ADDRESSES: the CIDRs hold 127.0.0.1
    order: str | None = None  # observed order between hostPort and kube-proxy handlers
    split_backends: bool = False  # kube-proxy's and the hostPort's iptables rules in two backends
    # kube-proxy tells pods' packets apart (`localDetector.IsImplemented()`: a clusterCIDR in
    # detectLocalMode ClusterCIDR): only then does its external chain short-circuit pods (KP401).
    pods_detected: bool = True


@record(frozen=True, slots=True)
class Route:
    """What one world does with the packet: the receiver and the steps (ids) that decided it."""

    receiver: str
    steps: tuple[str, ...] = ()
    alternatives: tuple["Route", ...] = ()  # UNDEFINED: what each order does

    @property
    def receivers(self) -> frozenset[str]:
        if self.alternatives:
            return frozenset(route.receiver for route in self.alternatives)
        return frozenset((self.receiver,))


@record(frozen=True, slots=True)
class _Packet:
    world: World
    client: str
    destination: str
    use: PortUse

    @property
    def local(self) -> bool:
        """Is the destination an address of the node (`--dst-type LOCAL`, `fib daddr type local`)?"""
        if self.destination in (NODE_IP, SECONDARY_IP, HOST_IP, LOCALHOST):
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

    @property
    def short_circuited(self) -> bool:
        """kube-proxy's external chain sends the node's own packets (`--src-type LOCAL`, `fib saddr
        type local`) to any endpoint, and pods' only when it tells them apart: the pod rule is written
        under `if proxier.localDetector.IsImplemented()` (before v1.18 `if len(proxier.clusterCIDR) >
        0`), in iptables and nftables mode alike."""
        if self.client == FROM_POD:
            return self.world.pods_detected
        return self.client != FROM_OUTSIDE

    def external_reaches_endpoint(self) -> bool:
        """With externalTrafficPolicy Local, only local endpoints serve other clients."""
        return not self.use.external_local or self.world.local_endpoints

    def internal_reaches_endpoint(self) -> bool:
        return not self.use.internal_local or self.world.local_endpoints


def node_port_address(packet: _Packet, localhost_allowed: bool) -> bool:
    """Does kube-proxy serve NodePorts on the packet's destination (nodePortAddresses)?
    HOST_IP counts as the node's primary address (a hostIP names the node's own address)."""
    world, destination = packet.world, packet.destination
    addresses = world.node_port_addresses or (PRIMARY_ADDRESS if world.proxy == "nftables" else ALL_ADDRESSES)
    if destination == LOCALHOST:
        if addresses == ALL_ADDRESSES:
            return localhost_allowed
        return localhost_allowed and world.localhost_covered
    if destination in (NODE_IP, HOST_IP):
        return addresses != LOOPBACK_ONLY
    if destination == SECONDARY_IP:
        return addresses == ALL_ADDRESSES or addresses == CIDR_ADDRESSES and world.secondary_covered
    return False


def _external(packet: _Packet, dnat: str):
    """kube-proxy's external chain (KUBE-EXT-*, external-*) for NodePorts, external and LB IPs."""
    if packet.external_reaches_endpoint():
        return f"dnat:{SERVICE}", (dnat,)
    if packet.short_circuited:
        return f"dnat:{SERVICE}", ("ext-short-circuit-" + packet.client, dnat)
    if packet.client == FROM_POD:  # no local detector: the pod is an outside client to the chain
        return "pass", ("ext-pod-undetected", "ext-no-local-endpoint")
    return "pass", ("ext-no-local-endpoint",)


def _service_dnat(packet: _Packet, dnat: str):
    """kube-proxy's Service rules in iptables and nftables mode, the same in both: the ClusterIP
    DNATed when an endpoint serves it (internalTrafficPolicy), external and LB IPs through the
    external chain; None when the packet is not to an address of a Service with endpoints."""
    world, use, destination = packet.world, packet.use, packet.destination
    if not (use.service_port and world.endpoints):
        return None
    if destination == CLUSTER_IP and packet.internal_reaches_endpoint():
        return f"dnat:{SERVICE}", (dnat,)
    if destination == EXTERNAL_IP:
        return _external(packet, dnat)
    return None


# Each handler returns (verdict, steps) or None; verdict "dnat:<receiver>", "accept" or "pass".

def _kube_proxy_iptables(packet: _Packet):
    """KUBE-SERVICES: the Service's addresses, then its last rule, the jump to KUBE-NODEPORTS."""
    world, use = packet.world, packet.use
    service = _service_dnat(packet, "kp-iptables-service-dnat")
    if service is None and use.node_port and node_port_address(packet, localhost_allowed=world.localhost_node_ports):
        if world.endpoints:
            return _external(packet, "kp-iptables-nodeport-dnat")
        return "pass", ("kp-iptables-nodeport-none",)
    return service


def _kube_proxy_ipvs(packet: _Packet):
    # External IPs have been ACCEPTed since they came to IPVS mode; ClusterIP pairs since v1.11.
    world, use = packet.world, packet.use
    accepted = packet.destination == EXTERNAL_IP or world.ipvs_accepts
    if packet.destination in (CLUSTER_IP, EXTERNAL_IP) and use.service_port and accepted:
        return "accept", ("kp-ipvs-accept-service",)
    if use.node_port and node_port_address(packet, False):
        if use.external_local:
            if world.ipvs_accepts:
                return "pass", ("kp-ipvs-nodeport-local-return",)
            return "accept", ("kp-ipvs-nodeport-local-accept",)
        return "pass", ("kp-ipvs-nodeport-mark",)
    return None


def _kube_proxy_nftables(packet: _Packet):
    """The `services` chain: the Service's addresses, then its last rule, the NodePort map."""
    world, use = packet.world, packet.use
    service = _service_dnat(packet, "kp-nft-service-dnat")
    if service is None and use.node_port and world.endpoints and node_port_address(packet, localhost_allowed=False):
        return _external(packet, "kp-nft-nodeport-dnat")
    return service


def _hostport_iptables(packet: _Packet):
    if packet.hostport_matches():
        return f"dnat:{HOSTPORT}", ("hp-iptables-dnat",)
    return None


def _hostport_nftables(packet: _Packet):
    any_destination = packet.world.hostport == NFT_ANY and packet.client != FROM_NODE
    if packet.hostport_matches(any_destination=any_destination):
        if any_destination and not packet.local:
            return f"dnat:{HOSTPORT}", ("hp-nft-any-destination",)
        return f"dnat:{HOSTPORT}", ("hp-nft-dnat",)
    return None


_KUBE_PROXY_IPTABLES = {"iptables": _kube_proxy_iptables, "ipvs": _kube_proxy_ipvs}
ORDER_HOOKS = "order-hooks"  # tables at one hook priority: the one registered last runs first
ORDER_INSERTED = "order-inserted"  # rules inserted at the top when absent: the one inserted last runs first


def _tables(world: World) -> list[tuple[str, list]]:
    """The dstnat tables, each an ordered list of (owner, handler), in the order components write
    them; `_orders` says which other orders are possible."""
    tables: list[tuple[str, list]] = []
    iptables_nat: list[tuple[str, Any]] = []
    if world.proxy in _KUBE_PROXY_IPTABLES:
        iptables_nat.append(("kube-proxy", _KUBE_PROXY_IPTABLES[world.proxy]))
    if world.hostport in (APPENDED, PREPENDED):
        if iptables_nat and world.split_backends:
            tables.append(("iptables nat table (hostPort's backend)", [("hostport", _hostport_iptables)]))
        elif world.hostport == PREPENDED:
            iptables_nat.insert(0, ("hostport", _hostport_iptables))
        else:
            iptables_nat.append(("hostport", _hostport_iptables))
    if iptables_nat:
        tables.insert(0, ("iptables nat table", iptables_nat))
    if world.proxy == "nftables":
        tables.append(("kube-proxy's nftables table", [("kube-proxy", _kube_proxy_nftables)]))
    if world.hostport in (NFT_ANY, NFT_LOCAL):
        tables.append(("hostPort nftables table", [("hostport", _hostport_nftables)]))
    return tables


def _orders(world: World) -> tuple[list[list[tuple[str, list]]], str | None]:
    """Every order the handlers may run in, and why there is more than one (None: one order)."""
    tables = _tables(world)
    first = None if world.order is None else ("hostport" if world.order == HOSTPORT_FIRST else "kube-proxy")
    if len(tables) > 1:
        if first is not None:
            return [sorted(tables, key=lambda table: table[1][0][0] != first)], None
        return [list(order) for order in itertools.permutations(tables)], ORDER_HOOKS
    if tables and len(tables[0][1]) == 2:
        name, handlers = tables[0]
        if first is not None:  # what a node's dump shows wins over what the components write
            return [[(name, sorted(handlers, key=lambda handler: handler[0] != first))]], None
        if world.hostport == PREPENDED:
            return [[(name, handlers)], [(name, handlers[::-1])]], ORDER_INSERTED
    return [tables], None


def _run_tables(packet: _Packet, tables: list[tuple[str, list]]) -> Route | None:
    """Tables in the given order; the first DNAT decides (its binding holds for the others)."""
    steps: list[str] = []
    for _, handlers in tables:
        for _, handler in handlers:
            verdict = handler(packet)
            if verdict is None:
                continue
            action, taken = verdict
            steps += taken
            if action == "pass":
                continue
            if action == "accept":
                break  # ends this table only
            return Route(action.split(":", 1)[1], tuple(steps))
    return Route(NOTHING, tuple(steps)) if steps else None


def _filtered(packet: _Packet, steps: tuple[str, ...]) -> Route | None:
    """kube-proxy's filter REJECTs (no endpoints) and DROPs (traffic policy Local, no endpoint on
    this node) for a packet no DNAT took."""
    world, use, destination = packet.world, packet.use, packet.destination
    if world.proxy not in ("iptables", "nftables"):
        return None
    service_address = destination in (CLUSTER_IP, EXTERNAL_IP) and use.service_port
    if service_address and not world.endpoints:
        return Route(REJECTED, steps + ("kp-reject-service",))
    if destination == CLUSTER_IP and service_address and not packet.internal_reaches_endpoint():
        return Route(DROPPED, steps + ("kp-drop-internal",))
    if destination == EXTERNAL_IP and service_address and not packet.external_reaches_endpoint():
        # iptables jumps to KUBE-EXTERNAL-SERVICES from INPUT and FORWARD only (the node's own
        # packets are short-circuited anyway); nftables checks them in filter-output (see route()).
        return Route(DROPPED, steps + ("kp-drop-external",))
    if use.node_port and not (world.endpoints and packet.external_reaches_endpoint()):
        # iptables: `-m addrtype --dst-type LOCAL --dport P` whatever nodePortAddresses say;
        # nftables: `ip daddr != 127.0.0.0/8` or `ip daddr @nodeport-ips`.
        covered = packet.local and destination != EXTERNAL_IP if world.proxy == "iptables" \
            else node_port_address(packet, False)
        if covered:  # the node's own packets meet it too: to a local address they come back through INPUT
            return Route(REJECTED if not world.endpoints else DROPPED,
                         steps + ("kp-reject-nodeport" if not world.endpoints else "kp-drop-nodeport",))
    return None


def _after_nat(packet: _Packet, steps: tuple[str, ...]) -> Route:
    world, use, destination = packet.world, packet.use, packet.destination
    filtered = _filtered(packet, steps)
    if filtered is not None:
        return filtered
    service_address = destination in (CLUSTER_IP, EXTERNAL_IP) and use.service_port
    if world.proxy == "ipvs" and destination == LOCALHOST and use.node_port and world.ipvs_localhost \
            and node_port_address(packet, localhost_allowed=True):
        if not world.endpoints:
            return Route(REJECTED, steps + ("ipvs-no-real-server",))
        return Route(DROPPED, steps + ("ipvs-localhost-hang",))
    if world.proxy == "ipvs" and (service_address or (use.node_port and node_port_address(packet, False))):
        if not world.endpoints:
            return Route(REJECTED, steps + ("ipvs-no-real-server",))
        local_only = use.internal_local if destination == CLUSTER_IP else use.external_local
        if local_only and not world.local_endpoints:
            return Route(REJECTED, steps + ("ipvs-no-local-real-server",))
        return Route(SERVICE, steps + ("ipvs-local-delivery",))
    if packet.local and use.host_process:
        return Route(HOST_PROCESS, steps + ("process",))
    return Route(NOTHING, steps)


def _before_nat(packet: _Packet) -> Route | None:
    """nftables mode: filter-output runs at dstnat-10, before any nat table sees the node's packet,
    and checks `@no-endpoint-services` (REJECT without endpoints, DROP without a local one)."""
    world, use, destination = packet.world, packet.use, packet.destination
    if world.proxy != "nftables" or packet.client != FROM_NODE or destination not in (CLUSTER_IP, EXTERNAL_IP) \
            or not use.service_port:
        return None
    if not world.endpoints:
        return Route(REJECTED, ("kp-reject-service-before-nat",))
    if destination == CLUSTER_IP and not packet.internal_reaches_endpoint() or \
            destination == EXTERNAL_IP and not packet.external_reaches_endpoint():
        return Route(DROPPED, ("kp-drop-before-nat",))
    return None


@functools.lru_cache(maxsize=8192)
def route(world: World, client: str, destination: str, use: PortUse) -> Route:
    """What one fully known world does with one packet (pure: cached, the rules ask alike questions)."""
    if destination not in DESTINATIONS:
        raise ValueError(f"unknown destination class {destination!r}")
    if destination == LOCALHOST and client != FROM_NODE:
        raise ValueError("127.0.0.1 is the node's only for the node's own processes")
    if world.hostport == NFT_BROKEN and use.host_port_ip is not None:
        world = replace(world, hostport=NO_HOSTPORT)  # the plugin's ADD fails: no rule, no pod
    packet = _Packet(world, client, destination, use)
    early = _before_nat(packet)
    if early is not None:
        return early
    orders, reason = _orders(world)
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
    return Route(UNDEFINED, (reason or ORDER_HOOKS,), tuple(unique))
