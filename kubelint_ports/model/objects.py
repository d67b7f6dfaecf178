"""The objects the rules reason about, reduced to the fields that decide port allocation."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from kubelint_ports.loading import Document
from kubelint_ports.model.placement import Node, Scheduling
from kubelint_ports.records import record
from kubelint_ports.vocabulary import ObjectRef

DEFAULT_NODE_PORT_RANGE = (30000, 32767)
# Linux's default net.ipv4.ip_local_port_range: where the kernel picks source ports for outgoing
# connections (Documentation/networking/ip-sysctl.rst).
DEFAULT_EPHEMERAL_PORT_RANGE = (32768, 60999)
WILDCARD_HOST_IP = "0.0.0.0"


@record(frozen=True, slots=True)
class ClusterFacts:
    """What the user states about the cluster (options, config); wins over what inputs imply."""

    node_port_range: tuple[int, int] | None = None
    proxy_mode: str | None = None
    service_cidr: str | None = None
    pod_cidr: str | None = None
    ephemeral_port_range: tuple[int, int] | None = None  # the nodes' net.ipv4.ip_local_port_range
    cni_plugins_version: str | None = None
    # Datapath facts the user states (config `facts:`, --cni-plugins-version, --proxy-mode):
    # (name, value, where it is stated); model.network_facts.cluster_datapath_facts reads them.
    stated: tuple[tuple[str, Any, str], ...] = ()
    pod_templates: tuple["PodTemplateKind", ...] = ()  # custom resources that embed a pod template

    def datapath_statements(self) -> tuple[tuple[str, Any, str], ...]:
        """`stated`, plus the options that have their own field (when `stated` does not hold them)."""
        named = {name for name, _, _ in self.stated}
        extra = tuple((name, value, f"--{name}") for name, value in
                      (("proxy-mode", self.proxy_mode), ("cni-plugins-version", self.cni_plugins_version))
                      if value and name not in named)
        return extra + self.stated


@record(frozen=True, slots=True)
class PodTemplateKind:
    """A custom resource kind that embeds a pod template (the config's `pod-templates`)."""

    group: str  # API group, e.g. "argoproj.io"
    kind: str
    template: str  # dotted path of the pod template (its `metadata` and `spec`), e.g. "spec.template"
    replicas: str | int | None = "spec.replicas"  # a dotted path, a fixed count, or None: one pod per node


# A hostPort on a sidecar (an init container with restartPolicy Always) of a pod-network pod: the
# scheduler reserves it, nothing on the node forwards it.
SIDECAR_HOST_PORT = "sidecarHostPort"


@record(frozen=True, slots=True)
class HostClaim:
    """A host port a pod needs on its node: (hostIP, protocol, port) as the scheduler sees it."""

    port: int
    protocol: str
    host_ip: str
    via: str  # "hostPort", "hostNetwork" (the pod's own process binds it) or SIDECAR_HOST_PORT
    container: str
    field_path: str  # the key the user edits: hostPort, or containerPort on a hostNetwork pod
    container_port: int | None = None
    port_name: str = ""

    @property
    def on_the_node(self) -> bool:
        """Whether packets to the node's port meet this claim (a DNAT rule or a socket). A sidecar's
        hostPort is only a reservation: the scheduler counts it (pkg/scheduler/util GetHostPorts),
        the kubelet hands only spec.containers' ports to the runtime (kuberuntime_sandbox.go)."""
        return self.via != SIDECAR_HOST_PORT

    def overlaps(self, other: "HostClaim") -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return WILDCARD_HOST_IP in (self.host_ip, other.host_ip) or self.host_ip == other.host_ip


@record(frozen=True, slots=True)
class ContainerPort:
    """A declared container port, host port or not (what declarative policies see)."""

    container: str
    field_path: str  # the port entry
    name: str
    container_port: int | None
    host_port: int | None
    protocol: str
    host_ip: str


@record(frozen=True, slots=True)
class SilentPort:
    """A port a hostNetwork pod listens on without declaring it (a probe port, a listen flag):
    the scheduler cannot see it, so nothing keeps hostPort pods off its nodes."""

    port: int
    source: str  # "its livenessProbe", "--metrics-bind-address"
    container: str
    field_path: str
    address: str = ""  # the IP it is bound to, when a flag names one; "" = every address


@record(frozen=True, slots=True)
class DeclaredPort:
    """One `ports` entry of any container, plain init containers included, as written: what the API
    server validates, and what Services and probes resolve port names against."""

    container: str
    role: str  # "container", "sidecar" (an init container with restartPolicy Always) or "init"
    field_path: str  # the entry; its keys (`name`, `hostPort`, ...) are reported below it
    name: str
    container_port: int | None
    host_port: int | None  # as written (a hostNetwork template leaves it to the API's defaulting)
    protocol: str
    host_ip: str  # as written, "" when absent: the API server compares it literally


@record(frozen=True, slots=True)
class PortReference:
    """The port a probe or lifecycle hook connects to: a number, or the name of a declared port."""

    container: str
    source: str  # "livenessProbe", "lifecycle.preStop", ...
    field_path: str  # the `port` key
    value: int | str  # ill-typed or out-of-range values are `InvalidPort`s instead


@record(frozen=True, slots=True)
class ServiceAddress:
    """An address kube-proxy accepts a Service's ports on besides its ClusterIP."""

    ip: str
    field_path: str
    label: str  # "externalIP", "loadBalancerIP", "load-balancer ingress IP"


@record(frozen=True, slots=True)
class InvalidPort:
    field_path: str
    message: str


@record(eq=False, slots=True)
class Workload:
    """A pod template and how many pods it makes; DaemonSets have `replicas` None (one per node)."""

    document: Document
    ref: ObjectRef
    pod_spec_path: str
    replicas: int | None
    host_network: bool
    claims: tuple[HostClaim, ...]
    pod_labels: dict[str, str]
    scheduling: Scheduling
    invalid_ports: tuple[InvalidPort, ...] = ()
    live: bool = False  # read from --cluster: already running, never the subject of a finding
    # A Helm hook (`helm.sh/hook`: a pre-install Job): its pods run for a moment around a release,
    # so no Service counts on them (model.selection leaves them out)
    helm_hook: bool = False
    container_ports: tuple[ContainerPort, ...] = ()
    silent_ports: tuple[SilentPort, ...] = ()  # hostNetwork pods only
    # The ports the listen flags of its running containers name (`--port=8080`), any pod's: where
    # the process most likely listens (its own port for a pod, the node's for hostNetwork).
    listen_flags: tuple[SilentPort, ...] = ()
    declared_ports: tuple[DeclaredPort, ...] = ()  # every container's, plain init containers included
    port_references: tuple[PortReference, ...] = ()  # probes and lifecycle hooks

    @property
    def is_daemonset(self) -> bool:
        """One pod per eligible node: a DaemonSet, or a custom kind that behaves like one."""
        return self.replicas is None

    @property
    def pods(self) -> str:
        """How many pods, in words, for messages."""
        if self.replicas is None:
            return "one pod per eligible node"
        return f"{self.replicas} pod{'s' if self.replicas != 1 else ''}"


@record(frozen=True, slots=True)
class NodePortClaim:
    """A port number kube-proxy opens on every node for a Service (nodePort or healthCheckNodePort)."""

    port: int
    protocol: str
    service_port: int | None  # the Service `port` it forwards; None for healthCheckNodePort
    field_path: str
    label: str  # "nodePort" or "healthCheckNodePort"


@record(frozen=True, slots=True)
class ServicePort:
    field_path: str
    name: str
    protocol: str
    port: int | None
    target_port: int | str | None
    node_port: int | None


@record(eq=False, slots=True)
class Service:
    document: Document
    ref: ObjectRef
    type: str
    ports: tuple[ServicePort, ...]
    cluster_ip: str
    selector: dict[str, str]
    health_check_node_port: int | None = None
    allocate_load_balancer_node_ports: bool = True
    external_ips: tuple[str, ...] = ()
    load_balancer_ips: tuple[str, ...] = ()
    invalid_ports: tuple[InvalidPort, ...] = ()
    live: bool = False
    labels: Any = None  # metadata.labels as plain data (declarative policies read them)
    addresses: tuple[ServiceAddress, ...] = ()  # externalIPs and load-balancer IPs
    # `externalTrafficPolicy: Local` / `internalTrafficPolicy: Local`: kube-proxy then sends that
    # traffic to this node's endpoints only (model.datapath reads them)
    external_local: bool = False
    internal_local: bool = False

    @property
    def is_headless(self) -> bool:
        return self.cluster_ip == "None"

    @property
    def has_node_ports(self) -> bool:
        return self.type in ("NodePort", "LoadBalancer")

    @property
    def node_port_claims(self) -> tuple[NodePortClaim, ...]:
        claims = [NodePortClaim(p.node_port, p.protocol, p.port, f"{p.field_path}.nodePort", "nodePort")
                  for p in self.ports if p.node_port]
        if self.health_check_node_port:
            claims.append(NodePortClaim(self.health_check_node_port, "TCP", None,
                                        "spec.healthCheckNodePort", "healthCheckNodePort"))
        return tuple(claims)


@record(slots=True)
class Cluster:
    """Everything the checks may read; built once per run, never changed by a check."""

    workloads: list[Workload] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    node_port_range: tuple[int, int] = DEFAULT_NODE_PORT_RANGE
    # The node inventory (--nodes); None when there is none and nodes are unknown.
    nodes: list[Node] | None = None
    node_documents: dict[str, Document] = field(default_factory=dict)
    # kube-proxy mode when known ("ipvs", "iptables", "nftables"); None when unknown.
    proxy_mode: str | None = None
    network: Any = None  # kube-proxy / CIDR configuration found in the inputs (model.cluster_network)
    datapath: Any = None  # model.datapath.Datapath: who receives a packet on the nodes
    ephemeral_port_range: tuple[int, int] = DEFAULT_EPHEMERAL_PORT_RANGE
    allocation: Any = field(default=None, repr=False)  # model.allocation, built on first use
    _node_ports: dict[int, list[tuple[Service, NodePortClaim]]] | None = field(default=None, repr=False)
    selection: Any = field(default=None, repr=False)  # model.selection, built on first use
    # namespace -> custom resources there whose controllers may make pods ("Prometheus (monitoring.coreos.com)")
    pod_makers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The deployment units (model.units), each its own Cluster, when the inputs hold more than one:
    # cross-object rules compare objects within a unit only. Empty: this cluster is the one unit.
    units: list[tuple[str, "Cluster"]] = field(default_factory=list, repr=False)
    # Views derived from the above and asked for by several checks and the fixes, each worked out
    # once (model.free_ports.held_host_ports); never part of what the cluster is.
    derived: dict = field(default_factory=dict, repr=False, compare=False)
    # port -> node daemon (etcd, the kubelet, ...): the ports the run's node-reserved-port policies
    # list, which a suggested or moved free port avoids. One fact, set by the engine from the run's
    # policies (`policies.node_daemon_ports`); the checks, the fixes and `ports --free` read it here.
    node_daemons: dict[int, str] = field(default_factory=dict, repr=False, compare=False)

    def node_ports_by_number(self) -> dict[int, list[tuple[Service, NodePortClaim]]]:
        """Every nodePort claim indexed by port number (how the allocator counts them)."""
        if self._node_ports is None:
            index: dict[int, list[tuple[Service, NodePortClaim]]] = {}
            for service in self.services:
                if service.has_node_ports:
                    for claim in service.node_port_claims:
                        index.setdefault(claim.port, []).append((service, claim))
            self._node_ports = index
        return self._node_ports

    def host_claims(self):
        """(workload, claim) of every declared host port. A dozen checks ask a run: the pairs are
        listed once (`derived`) rather than the 10,000 workloads walked each time; keyed by the
        workloads' list and its length, which the model never changes once built."""
        key = ("host_claims", id(self.workloads), len(self.workloads))
        pairs = self.derived.get(key)
        if pairs is None:
            pairs = self.derived[key] = [(workload, claim) for workload in self.workloads
                                         for claim in workload.claims]
        return iter(pairs)

    def held_ports(self, via: str | None = None):
        """(workload, claim, source) for every port pods hold on their node (of one `via`, when
        given): declared ones (source "") and the ports hostNetwork pods listen on without
        declaring them (source: the flag or probe), node ports as much as declared ones though
        the scheduler cannot see them."""
        for workload, claim in self.host_claims():
            if via is None or claim.via == via:
                yield workload, claim, ""
        if via not in (None, "hostNetwork"):
            return
        for workload in self.workloads:
            for silent in workload.silent_ports:
                yield workload, HostClaim(silent.port, "TCP", silent.address or WILDCARD_HOST_IP, "hostNetwork",
                                          silent.container, silent.field_path), silent.source

    def in_node_port_range(self, port: int) -> bool:
        low, high = self.node_port_range
        return low <= port <= high

    @property
    def node_port_range_text(self) -> str:
        return "{}-{}".format(*self.node_port_range)

    @property
    def ephemeral_port_range_text(self) -> str:
        return "{}-{}".format(*self.ephemeral_port_range)
