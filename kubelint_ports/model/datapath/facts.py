"""The model's vocabulary (receivers, clients, destinations, hostPort implementations), the facts
it rests on with their sources, and what occupies a port on a node (`PortUse`)."""

from __future__ import annotations

import re
from typing import Any

from kubelint_ports.records import record

# --- vocabulary ------------------------------------------------------------------------------------

HOSTPORT = "hostport"  # the hostPort pod, through a DNAT rule
SERVICE = "service"  # the Service's endpoints: kube-proxy's DNAT, or IPVS at local delivery
HOST_PROCESS = "host-process"  # a process listening on the node (hostNetwork pod, node daemon)
REJECTED = "rejected"  # kube-proxy's REJECT (or IPVS without a real server): "connection refused"
DROPPED = "dropped"  # kube-proxy's DROP (a traffic policy Local without a local endpoint): a timeout
NOTHING = "nothing"  # no handler and no listener
UNDEFINED = "undefined"  # handlers with no fixed order (tables at one hook priority, insertion history)
DEPENDS = "depends"  # the outcome depends on facts that are unknown
OTHERWISE = "otherwise"  # every other outcome, when an answer is focused on one receiver

# Clients: kube-proxy tells them apart when a traffic policy is Local (`-s <clusterCIDR>` and
# `--src-type LOCAL` short-circuits in the KUBE-EXT chain), everything else treats the first two alike.
FROM_OUTSIDE = "outside"  # another machine (a load balancer, a client on another node): nat PREROUTING
FROM_POD = "pod"  # a pod whose address is a pod address (on this node, or routed without SNAT): PREROUTING
FROM_NODE = "node"  # a process on the node itself (nat OUTPUT), 127.0.0.1 included
CLIENTS = (FROM_OUTSIDE, FROM_POD, FROM_NODE)

NODE_IP = "node-ip"  # the node's primary address (for a hostIP-bound hostPort: any but its hostIP)
SECONDARY_IP = "secondary-ip"  # another address of the node: a second interface, the CNI bridge's gateway
HOST_IP = "host-ip"  # the hostIP a hostPort is bound to
LOCALHOST = "localhost"  # 127.0.0.1, from the node itself
CLUSTER_IP = "cluster-ip"  # a Service's ClusterIP
EXTERNAL_IP = "external-ip"  # a Service's externalIPs and load-balancer IPs
DESTINATIONS = (NODE_IP, SECONDARY_IP, HOST_IP, LOCALHOST, CLUSTER_IP, EXTERNAL_IP)
NODE_ADDRESSES = (NODE_IP, SECONDARY_IP, HOST_IP, LOCALHOST)

PROXY_MODES = ("iptables", "ipvs", "nftables")
# How hostPorts are implemented (the `hostport` trait of a world):
APPENDED = "iptables-appended"  # CNI portmap >= v0.7.5 (iptables backend), CRI-O < 1.33, kubelet >= 1.7
PREPENDED = "iptables-prepended"  # CNI portmap < v0.7.5: jumps inserted at the top when absent
NFT_ANY = "nftables-any-destination"  # portmap nftables backend v1.6.1-v1.8.x (GHSA-jv3w-x3r3-g6rm)
NFT_LOCAL = "nftables-local"  # portmap nftables backend >= v1.9.0, CRI-O >= 1.33
NFT_BROKEN = "nftables-v1.6.0"  # portmap v1.6.0's nftables backend: dnat on the input hook, refused
NO_HOSTPORT = "none"  # nothing implements hostPorts (no portmap in the CNI configuration)
HOSTPORT_TRAITS = (APPENDED, PREPENDED, NFT_ANY, NFT_LOCAL, NFT_BROKEN, NO_HOSTPORT)

HOSTPORT_FIRST, KUBE_PROXY_FIRST = "hostport-first", "kube-proxy-first"
WILDCARD = "0.0.0.0"
# Two iptables backends on one node (kube-proxy on iptables-legacy, portmap on iptables-nft): two
# nat tables hooked at the same priority, so their order is the hooks', not the rules'.
SAME_BACKEND, SPLIT_BACKENDS = "same", "split"


# --- facts -----------------------------------------------------------------------------------------

@record(frozen=True, slots=True)
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


@record(frozen=True, slots=True)
class DatapathFacts:
    """What is known about how nodes handle packets; None: unknown."""

    proxy_mode: Fact | None = None  # "iptables" | "ipvs" | "nftables"
    kube_proxy_version: Fact | None = None  # (major, minor, patch)
    hostport: Fact | None = None  # "portmap" | "crio" | "none"
    hostport_backend: Fact | None = None  # "iptables" | "nftables" (portmap's `backend`)
    cni_plugins_version: Fact | None = None  # containernetworking/plugins release, (major, minor, patch)
    crio_version: Fact | None = None
    node_port_addresses: Fact | None = None  # tuple of CIDRs / "primary"; () or None: kube-proxy's default
    localhost_node_ports: Fact | None = None  # bool, iptables mode only (default true)
    masquerade_all: Fact | None = None  # bool
    hostport_order: Fact | None = None  # observed: HOSTPORT_FIRST | KUBE_PROXY_FIRST
    iptables_backends: Fact | None = None  # observed: SAME_BACKEND | SPLIT_BACKENDS
    # bool: kube-proxy tells pods' packets apart (`localDetector.IsImplemented()`): a clusterCIDR in
    # detectLocalMode ClusterCIDR; False without one (KP401)
    local_detector: Fact | None = None

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
    "kube-proxy-version": "v1.11 or later is assumed (IPVS ACCEPTs KUBE-CLUSTER-IP pairs, RETURNs Local NodePorts)",
    "hostport": "CNI portmap is assumed",
    "hostport-backend": "portmap's iptables backend is assumed (nftables is opt-in)",
    "cni-plugins-version": "both portmap rule orders are considered: < v0.7.5 (inserted at the top when absent, "
                           "so the order is the insertion history) and >= v0.7.5 (appended)",
    "crio-version": "both CRI-O hostport implementations are considered, when CRI-O is the runtime",
    "node-port-addresses": "kube-proxy's default: every local address in iptables and IPVS mode, the node's primary "
                           "address in nftables mode",
    "localhost-node-ports": "true (kube-proxy's default in iptables mode)",
    "masquerade-all": "false (kube-proxy's default)",
    "hostport-order": "not observed: the order the components write (undefined across tables)",
    "iptables-backends": "one iptables backend for kube-proxy and the hostPort rules",
    "local-detector": "true: kube-proxy tells pods' packets apart (a clusterCIDR, or another detectLocalMode), so "
                      "it sends pods' packets for an externalTrafficPolicy: Local Service's NodePort, external or "
                      "load-balancer IP to the Service",
}


def facts_table(facts: DatapathFacts) -> dict[str, dict[str, Any]]:
    """Every fact: its value and source, or what is assumed while it is unknown."""
    shown = facts.shown()
    return {name: shown.get(name, {"value": None, "unknown": assumed}) for name, assumed in WHEN_UNKNOWN.items()}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


# --- what a port is used for on a node ------------------------------------------------------------

@record(frozen=True, slots=True)
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
    external_local: bool = False  # externalTrafficPolicy: Local (NodePorts, external and LB IPs)
    internal_local: bool = False  # internalTrafficPolicy: Local (the ClusterIP)
    local_endpoints: bool | None = None  # this node runs an endpoint of the Service; None: unknown

    @property
    def policy_local(self) -> bool:
        return self.external_local or self.internal_local


# Receivers in the order answers list them.
RECEIVER_ORDER = (HOSTPORT, SERVICE, HOST_PROCESS, REJECTED, DROPPED, NOTHING, UNDEFINED, OTHERWISE)


def receiver_rank(receiver: str) -> int:
    order = RECEIVER_ORDER[:6]
    return order.index(receiver) if receiver in order else len(order)


def losers_of(receiver: str, parties) -> set[str]:
    """Who expected the packet and does not get it (`parties`: receiver -> name)."""
    losers = {party for party in parties if party not in (receiver, OTHERWISE)}  # OTHERWISE is a clause, not a party
    if receiver == REJECTED:
        losers.discard(SERVICE)  # a Service without endpoints lost nothing
    return losers
