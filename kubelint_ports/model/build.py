"""Documents -> workloads and Services, typing only the fields the rules read.

The model is read while loading holds each document's tree (`ModelReader`, one per kind of
input: linted manifests, running objects, the node inventory), in worker processes for large
inputs; `assemble` then joins the pieces in input order into the `Cluster`. Everything a check or
the engine needs from a document must be read here: after its reader returns, a document keeps
only its place (see `loading`). The per-field readers below (`read_workload`, `read_service`,
...) take the document and read `document.root`, which is held while they run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from kubelint_ports.findings import Diagnostic, ObjectRef
from kubelint_ports.loading import Document, held
from kubelint_ports.loading import yamltree as yt
from kubelint_ports.model import placement, units
from kubelint_ports.model.datapath import Datapath
from kubelint_ports.model.network import (
    NetworkReader, NodeCidrs, datapath_facts, network_from_pieces, object_identity, owner_references,
    read_network_piece, read_node_cidrs)
from kubelint_ports.model.objects import (
    DEFAULT_NODE_PORT_RANGE,
    SIDECAR_HOST_PORT,
    WILDCARD_HOST_IP,
    Cluster,
    ClusterFacts,
    DEFAULT_EPHEMERAL_PORT_RANGE,
    ContainerPort,
    DeclaredPort,
    SilentPort,
    HostClaim,
    InvalidPort,
    PortReference,
    PodTemplateKind,
    Service,
    ServiceAddress,
    ServicePort,
    Workload,
)

ONE_PER_NODE = "one pod per eligible node"  # a replicas "path" that is no path: the DaemonSet shape
# kind -> (pod spec path, replicas path or None for "one pod", or ONE_PER_NODE)
WORKLOAD_KINDS = {
    "Pod": ("spec", None),
    "Deployment": ("spec.template.spec", "spec.replicas"),
    "ReplicaSet": ("spec.template.spec", "spec.replicas"),
    "StatefulSet": ("spec.template.spec", "spec.replicas"),
    "ReplicationController": ("spec.template.spec", "spec.replicas"),
    "DaemonSet": ("spec.template.spec", ONE_PER_NODE),
    "Job": ("spec.template.spec", "spec.parallelism"),
    "CronJob": ("spec.jobTemplate.spec.template.spec", "spec.jobTemplate.spec.parallelism"),
}
# Only the built-in API groups: a CRD may reuse a kind name (Knative's `Service`).
CORE_GROUPS = frozenset(("", "apps", "extensions", "batch"))
# Custom resources whose controllers make pods from an embedded pod template, by (group, kind).
# The config's `pod-templates` adds kinds (and may reshape these).
CUSTOM_WORKLOAD_KINDS = {
    ("argoproj.io", "Rollout"): ("spec.template.spec", "spec.replicas"),  # Argo Rollouts
    ("apps.kruise.io", "CloneSet"): ("spec.template.spec", "spec.replicas"),  # OpenKruise
    ("apps.kruise.io", "StatefulSet"): ("spec.template.spec", "spec.replicas"),  # Advanced StatefulSet
    ("apps.kruise.io", "DaemonSet"): ("spec.template.spec", ONE_PER_NODE),  # Advanced DaemonSet
}
# Custom resources known to make no pods: configuration read by a controller that runs elsewhere.
# Built-in API groups other than apps and batch make none either (see may_make_pods).
POD_LESS_CUSTOM_KINDS = frozenset({
    ("monitoring.coreos.com", kind) for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule", "Probe",
                                                 "ScrapeConfig", "AlertmanagerConfig")} | {
    ("cert-manager.io", kind) for kind in ("Certificate", "Issuer", "ClusterIssuer", "CertificateRequest")})
BUILT_IN_GROUPS = frozenset(("policy", "autoscaling"))


def may_make_pods(group: str, kind: str) -> bool:
    """Whether a custom resource's controller may make pods (operators' databases, Prometheus)."""
    built_in = group in BUILT_IN_GROUPS or group == "k8s.io" or group.endswith(".k8s.io")
    return bool(group) and not built_in and (group, kind) not in POD_LESS_CUSTOM_KINDS


SCHEDULING_FIELDS = ("nodeName", "nodeSelector", "affinity", "tolerations")
PROTOCOLS = ("TCP", "UDP", "SCTP")


LINTED, LIVE, INVENTORY = "linted", "live", "inventory"


@dataclass(slots=True)
class NodeEntry:
    """A Node object and what the network model reads from it (its pod CIDRs, with field paths)."""

    node: placement.Node
    cidrs: NodeCidrs


@dataclass(slots=True)
class ModelReader:
    """What one kind of input contributes to the model, read document by document while loading
    holds each tree. Pickled back from worker processes; `absorb` appends a worker's pieces."""

    role: str = LINTED  # LINTED manifests, LIVE objects (--cluster), or the node INVENTORY (--nodes)
    replacing: bool = True  # linted manifests with running objects they may replace: keep identities
    custom_kinds: dict | None = None  # custom resources read as workloads (custom_workload_kinds)
    workloads: list = field(default_factory=list)
    services: list = field(default_factory=list)
    nodes: list[NodeEntry] = field(default_factory=list)
    network: list[NetworkReader] = field(default_factory=list)  # one piece per document that has any
    identities: list[tuple[str, str, str]] = field(default_factory=list)  # linted objects: what they replace
    owners: dict = field(default_factory=dict)  # running Workload -> its ownerReferences (kind, name)
    pod_makers: dict[str, set[str]] = field(default_factory=dict)  # namespace -> custom resources there
    gitops_targets: list = field(default_factory=list)  # units.Target: paths GitOps objects deploy where
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def __call__(self, document: Document) -> None:
        if self.role == INVENTORY:
            guarded(add_node, document, self)
            return
        live = self.role == LIVE
        owners = guarded(running_owners, document, self) if live else ()
        found = len(self.workloads), len(self.services)
        guarded(add_object, document, self, live=live, owners=owners)
        for workload in self.workloads[found[0]:]:  # every hostPort is a finding: note where
            for claim in workload.claims:
                document.note(claim.field_path)
        for service in self.services[found[1]:]:
            for claim in service.node_port_claims:
                document.note(claim.field_path)
        piece = read_network_piece(document, live, self.diagnostics)
        if piece is not None:
            piece.owners = owners
            piece.document = document  # which unit its facts belong to (model.units)
            self.network.append(piece)
        if self.replacing and not live:
            identity = object_identity(document.root)
            if identity is not None:
                self.identities.append(identity)

    def fresh(self) -> "ModelReader":
        return ModelReader(self.role, self.replacing, self.custom_kinds)

    def absorb(self, other: "ModelReader") -> None:
        self.workloads += other.workloads
        self.services += other.services
        self.nodes += other.nodes
        self.network += other.network
        self.identities += other.identities
        self.owners.update(other.owners)
        self.gitops_targets += other.gitops_targets
        for namespace, kinds in other.pod_makers.items():
            self.pod_makers.setdefault(namespace, set()).update(kinds)
        self.diagnostics += other.diagnostics


def build_cluster(documents: Iterable[Document], facts: ClusterFacts = ClusterFacts(), *,
                  live_documents: Iterable[Document] = (), node_documents: Iterable[Document] | None = None,
                  ) -> tuple[Cluster, list[Diagnostic]]:
    """Linted manifests, plus what already runs (`live_documents`) and the node inventory, from
    documents already loaded (each is composed again from its text while it is read)."""
    readers = []
    custom_kinds = custom_workload_kinds(facts.pod_templates)
    for role, group in ((LINTED, documents), (LIVE, live_documents), (INVENTORY, node_documents)):
        reader = ModelReader(role, custom_kinds=custom_kinds)
        for document in held(group or ()):
            reader(document)
        readers.append(reader)
    return assemble(readers[0], readers[1], readers[2] if node_documents is not None else None, facts)


def assemble(linted: ModelReader, live: ModelReader | None = None, inventory: ModelReader | None = None,
             facts: ClusterFacts = ClusterFacts()) -> tuple[Cluster, list[Diagnostic]]:
    """The cluster from its pieces: running objects the linted ones replace are dropped, the node
    inventory is keyed by name, and the network model is joined in input order."""
    cluster = Cluster(node_port_range=facts.node_port_range or DEFAULT_NODE_PORT_RANGE,
                      proxy_mode=facts.proxy_mode,
                      ephemeral_port_range=facts.ephemeral_port_range or DEFAULT_EPHEMERAL_PORT_RANGE)
    diagnostics = list(linted.diagnostics)
    cluster.workloads = list(linted.workloads)
    cluster.services = list(linted.services)
    cluster.pod_makers = {namespace: tuple(sorted(kinds)) for namespace, kinds in sorted(linted.pod_makers.items())}
    node_cidrs: dict[str, NodeCidrs] = {}
    if live is not None:
        diagnostics += live.diagnostics
        cluster.workloads += live.workloads
        cluster.services += live.services
        for entry in live.nodes:  # Node objects among the running ones
            add_node_entry(cluster, entry, node_cidrs)
        keep_running_state(cluster, len(linted.workloads), len(linted.services), live.owners)
    if inventory is not None:
        diagnostics += inventory.diagnostics
        cluster.nodes = []
        for entry in inventory.nodes:
            add_node_entry(cluster, entry, node_cidrs)
    pieces = linted.network + (live.network if live is not None else [])
    cluster.network, network_diagnostics = network_from_pieces(
        pieces, set(linted.identities) if live is not None else set(), node_cidrs, facts)
    diagnostics += network_diagnostics
    cluster.proxy_mode = facts.proxy_mode or cluster.network.proxy_mode
    cluster.datapath = Datapath(datapath_facts(cluster.network, facts.datapath_statements()))
    if facts.node_port_range is None and cluster.network.node_port_range is not None:
        cluster.node_port_range = cluster.network.node_port_range
    return cluster, diagnostics


def split_by_unit(reader: ModelReader, rules: units.UnitRules) -> dict[str, ModelReader]:
    """The linted objects by deployment unit (model.units): one reader per unit, each holding its
    workloads, Services and network facts; an object deployed to several units is in each."""
    documents = [w.document for w in reader.workloads] + [s.document for s in reader.services] + \
        [piece.document for piece in reader.network if getattr(piece, "document", None) is not None]
    names = units.unit_names(rules, documents)
    if len(names) <= 1:
        return {names[0] if names else "": reader}
    parts = {name: ModelReader(reader.role, reader.replacing, reader.custom_kinds) for name in names}
    for name, workloads in units.partition(reader.workloads, rules).items():
        parts[name].workloads = workloads
    for name, services in units.partition(reader.services, rules).items():
        parts[name].services = services
    for name, pieces in units.partition(reader.network, rules).items():
        parts[name].network = pieces
    for part in parts.values():
        part.identities = reader.identities
        part.owners = reader.owners
        part.pod_makers = reader.pod_makers  # per namespace: kept for every unit (KP501 stays quiet)
    return parts


def guarded(function, document: Document, reader: ModelReader, **kwargs):
    """A field of the wrong type costs that object, not the run."""
    try:
        return function(document, reader, **kwargs)
    except yt.FieldTypeError as error:
        reader.diagnostics.append(Diagnostic(document.node_location(error.node), str(error)))
        return None
    except Exception as error:  # a bug: name the object's file, keep the others
        from kubelint_ports.loading import internal_error

        reader.diagnostics.append(internal_error(document.path, error))
        return None


def custom_workload_kinds(configured: Iterable[PodTemplateKind]) -> dict[tuple[str, str], tuple[str, str | int | None]]:
    """The custom resources read as workloads: the known ones, then the config's (which win)."""
    kinds = dict(CUSTOM_WORKLOAD_KINDS)
    for entry in configured:
        replicas = ONE_PER_NODE if entry.replicas is None else entry.replicas
        kinds[(entry.group, entry.kind)] = (f"{entry.template}.spec", replicas)
    return kinds


def add_object(document: Document, reader: ModelReader, live: bool = False, owners=()) -> None:
    root = document.root
    api_version = yt.as_str(yt.get(root, "apiVersion"))
    kind = yt.as_str(yt.get(root, "kind"))
    group = api_version.rpartition("/")[0]
    if group not in CORE_GROUPS:
        shape = (reader.custom_kinds or CUSTOM_WORKLOAD_KINDS).get((group, kind))
        configured = shape is not None and CUSTOM_WORKLOAD_KINDS.get((group, kind)) != shape
        if configured and not live and yt.at(root, shape[0]) is None:
            # The user's pod-templates path: a typo would otherwise skip the object without a word.
            raise yt.FieldTypeError(yt.get(root, "kind") or root, (
                f"{kind} ({group}) has no {shape[0].rpartition('.spec')[0]}: the pod template path `pod-templates` "
                f"gives for this kind; fix the path in the configuration"))
        if shape is not None and not live:  # running pods of a custom kind are listed as Pods
            reader.workloads.append(read_workload(document, object_ref(root, api_version, kind, document.namespace), shape))
        elif not live and (targets := units.gitops_targets_of(root, group, kind, document.path)):
            reader.gitops_targets += targets
        elif not live and may_make_pods(group, kind):
            # An operator's resource (Prometheus, Alertmanager, a database cluster): its controller
            # may make pods whose labels no input shows, so a Service may select them.
            namespace = object_ref(root, api_version, kind, document.namespace).namespace or ""
            reader.pod_makers.setdefault(namespace, set()).add(f"{kind} ({group})")
        return
    if kind == "Service":
        service = read_service(document, object_ref(root, api_version, kind, document.namespace))
        service.live = live
        reader.services.append(service)
    elif kind == "Node" and live:
        add_node(document, reader)
    elif kind in WORKLOAD_KINDS and (not live or kind == "Pod"):
        # From a running cluster only Pods count: controllers are listed with their pods.
        workload = read_workload(document, object_ref(root, api_version, kind, document.namespace))
        workload.live = live
        if not live or (workload.scheduling.node_name and running(document)):
            reader.workloads.append(workload)
            if owners:
                reader.owners[workload] = owners


def running(document: Document) -> bool:
    phase = yt.as_str(yt.at(document.root, "status.phase"))
    return phase not in ("Succeeded", "Failed")


def keep_running_state(cluster: Cluster, linted_workloads: int, linted_services: int,
                       owners: dict | None = None) -> None:
    """Drop running objects the linted manifests replace: the same object, or pods they own."""
    services = {identity(s.ref) for s in cluster.services[:linted_services]}
    cluster.services[linted_services:] = [
        s for s in cluster.services[linted_services:] if identity(s.ref) not in services]
    linted = {identity(w.ref) for w in cluster.workloads[:linted_workloads]}
    owners = owners or {}
    cluster.workloads[linted_workloads:] = [
        w for w in cluster.workloads[linted_workloads:]
        if identity(w.ref) not in linted and not owned_by(w, owners.get(w, ()), linted)]


def identity(ref: ObjectRef) -> tuple[str, str, str]:
    return ref.kind, ref.namespace, ref.name


def running_owners(document: Document, reader: ModelReader) -> tuple[tuple[str, str], ...]:
    return owner_references(document.root)


def owned_by(pod: Workload, references: tuple[tuple[str, str], ...], owners: set[tuple[str, str, str]]) -> bool:
    """A running pod whose controller (or the Deployment/CronJob above it) is being linted."""
    namespace = pod.ref.namespace
    for kind, name in references:
        parent = {"ReplicaSet": "Deployment", "Job": "CronJob"}.get(kind)  # <parent>-<hash or time>
        if (kind, namespace, name) in owners or (parent, namespace, name.rpartition("-")[0]) in owners:
            return True
    return False


def add_node(document: Document, reader: ModelReader) -> None:
    root = document.root
    if yt.as_str(yt.get(root, "kind")) != "Node":
        return
    node = placement.node_from_object(node_as_data(root))
    reader.nodes.append(NodeEntry(node, read_node_cidrs(document)))


# What placement.node_from_object reads of a Node (None: the whole part); keep them in step. The
# rest (annotations, managedFields, images, conditions) is most of what `kubectl get nodes -o yaml`
# prints and converting it to plain data was most of reading an inventory.
NODE_FIELDS: dict[str, tuple[str, ...] | None] = {"metadata": ("name", "labels"), "spec": None,
                                                  "status": ("addresses",)}


def node_as_data(root: yt.Node):
    """The parts of a Node placement reads (NODE_FIELDS), as plain data."""
    data = {}
    for part, keys in NODE_FIELDS.items():
        node = yt.get(root, part)
        if keys is None or not isinstance(node, yt.MappingNode):
            data[part] = yt.to_plain(node)
        else:
            data[part] = {key: yt.to_plain(yt.get(node, key)) for key in keys}
    return data


def add_node_entry(cluster: Cluster, entry: NodeEntry, cidrs: dict[str, NodeCidrs]) -> None:
    """The first Node of a name counts (the inventory's own, or one listed as running)."""
    node = entry.node
    if cluster.nodes is None:
        cluster.nodes = []
    if node.name and node.name not in cluster.node_documents:
        cluster.nodes.append(node)
        cluster.node_documents[node.name] = entry.cidrs.document
        cidrs[node.name] = entry.cidrs


def object_ref(root: yt.MappingNode, api_version: str, kind: str, namespace: str = "") -> ObjectRef:
    """`namespace`: where the object lands when its metadata names none (a chart's release namespace)."""
    metadata = yt.mapping(yt.get(root, "metadata"), "metadata")
    name = yt.as_str(yt.get(metadata, "name")) or yt.as_str(yt.get(metadata, "generateName"))
    return ObjectRef(api_version, kind, yt.as_str(yt.get(metadata, "namespace")) or namespace, name)


class PortReader:
    """Types port fields; bad values become `InvalidPort` entries instead of stopping the object."""

    def __init__(self) -> None:
        self.invalid: list[InvalidPort] = []

    def port(self, entry: yt.Node, key: str, path: str, *, zero_means_unset: bool = False) -> int | None:
        node = yt.get(entry, key)
        if node is None:
            return None
        field_path = f"{path}.{key}"
        try:
            value = yt.as_int(node)
        except yt.FieldTypeError:
            if isinstance(node, yt.ScalarNode) and yt.parse_int(node.value) is not None:
                message = (f"{key} {node.value!r} is quoted, so the API server reads a string and rejects it; "
                           f"remove the quotes")
            else:
                message = f"{key} must be an integer from 1 to 65535, not {yt.describe(node)}"
            self.invalid.append(InvalidPort(field_path, message))
            return None
        if value == 0 and zero_means_unset:
            return None
        if not 1 <= value <= 65535:
            self.invalid.append(InvalidPort(field_path, f"{key} {value} is not a port number (1-65535)"))
            return None
        return value

    def flag(self, field_path: str, message: str) -> None:
        self.invalid.append(InvalidPort(field_path, message))

    def protocol(self, entry: yt.Node, path: str) -> str:
        protocol = yt.as_str(yt.get(entry, "protocol"), "TCP") or "TCP"
        if protocol not in PROTOCOLS:
            self.flag(f"{path}.protocol", f"protocol {protocol!r} is not one of TCP, UDP, SCTP (the API is "
                                          f"case-sensitive and rejects it)")
        return protocol


def read_workload(document: Document, ref: ObjectRef,
                  shape: tuple[str, str | int | None] | None = None) -> Workload:
    """`shape`: (pod spec path, replicas path or fixed count or ONE_PER_NODE); default: the kind's."""
    root = document.root
    pod_spec_path, replicas_path = shape or WORKLOAD_KINDS[ref.kind]
    pod_spec = yt.mapping(yt.at(root, pod_spec_path), pod_spec_path)
    replicas: int | None = 1
    if replicas_path == ONE_PER_NODE:
        replicas = None
    elif isinstance(replicas_path, int):
        replicas = replicas_path
    elif replicas_path and (node := yt.at(root, replicas_path)) is not None:
        replicas = yt.as_int(node)
    host_network = yt.as_bool(yt.get(pod_spec, "hostNetwork"))
    reader = PortReader()
    claims: list[HostClaim] = []
    declared: list[ContainerPort] = []
    silent: list[SilentPort] = []
    for containers_key in ("containers", "initContainers"):
        containers = yt.items(yt.get(pod_spec, containers_key), containers_key)
        for index, container in enumerate(containers):
            container = yt.mapping(container, f"{containers_key}[{index}]")
            # Ordinary init containers have exited before the pod's ports matter; sidecars have not.
            if containers_key == "initContainers" and yt.as_str(yt.get(container, "restartPolicy")) != "Always":
                continue
            container_path = f"{pod_spec_path}.{containers_key}[{index}]"
            name = yt.as_str(yt.get(container, "name"))
            claims.extend(read_container_ports(container, container_path, name, host_network, reader, declared,
                                               sidecar=containers_key == "initContainers"))
            if host_network:
                silent.extend(listening_ports(container, container_path, name))
    template_metadata = pod_spec_path.rpartition(".")[0] + ".metadata" if "." in pod_spec_path else "metadata"
    labels = yt.to_plain(yt.mapping(yt.at(root, template_metadata + ".labels"), "labels")) or {}
    scheduling = placement.scheduling_from_pod_spec(
        {key: yt.to_plain(yt.get(pod_spec, key)) for key in SCHEDULING_FIELDS})
    workload = Workload(document, ref, pod_spec_path, replicas, host_network, tuple(claims),
                        {str(k): str(v) for k, v in labels.items()}, scheduling, tuple(reader.invalid),
                        container_ports=tuple(declared), silent_ports=undeclared(silent, declared))
    add_port_details(workload, pod_spec)
    hook = yt.get(yt.at(root, "metadata.annotations"), "helm.sh/hook")
    workload.helm_hook = hook is not None and isinstance(hook, yt.ScalarNode) and bool(hook.value.strip())
    return workload


PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
# Listener flags name what they open: `--port`, `--healthz-port`, `--web.listen-address`,
# `--metrics-bind-address`, `--statsd.listen-tcp`. Flags about a port the process connects to
# (`--kubelet-port`, `--redis-port`) or a UDP listener are not TCP listeners.
_LISTENER_ENDINGS = frozenset(("port", "address", "addr", "listen"))
_CLIENT_WORDS = frozenset(("kubelet", "redis", "db", "database", "remote", "upstream", "target", "backend",
                           "apiserver", "etcd", "master", "peer", "proxy", "dns", "service", "cluster", "api",
                           "server", "endpoint", "url", "connect", "dial", "udp", "report", "support"))
_LISTEN_VALUE = re.compile(r"(?:\[?([0-9a-fA-F.:]*)\]?:)?([0-9]{1,5})")


def listener_flag(flag: str) -> bool:
    words = [w for w in re.split(r"[-._]", flag.lstrip("-").lower()) if w]
    if words and words[-1] == "tcp":
        words = words[:-1]
    return bool(words) and words[-1] in _LISTENER_ENDINGS and not _CLIENT_WORDS.intersection(words)


def listening_ports(container: yt.Node, container_path: str, name: str) -> list[SilentPort]:
    """Ports a hostNetwork container shows it listens on: listen flags first (they name the
    listener), then probe ports."""
    found = []
    for key in ("command", "args"):
        node = yt.get(container, key)
        words = node.value if isinstance(node, yt.SequenceNode) else []
        for index, word in enumerate(words):
            if not isinstance(word, yt.ScalarNode) or not word.value.startswith("-"):
                continue
            flag, equals, value = word.value.partition("=")
            value_index = index
            if not equals and index + 1 < len(words) and isinstance(words[index + 1], yt.ScalarNode):
                value, value_index = words[index + 1].value, index + 1  # `--port 8080`
            if listener_flag(flag) and (match := _LISTEN_VALUE.fullmatch(value.strip())):
                port = int(match.group(2))
                address = match.group(1) or ""
                if 1 <= port <= 65535:
                    found.append(SilentPort(port, flag, name, f"{container_path}.{key}[{value_index}]",
                                            "" if address in ("", "0.0.0.0", "::") else address))
    for probe in PROBES:
        for handler in ("httpGet", "tcpSocket", "grpc"):
            node = yt.at(container, f"{probe}.{handler}.port")
            if node is not None and yt.scalar_type(node) == yt.INT:
                port = yt.parse_int(node.value)
                if port and 1 <= port <= 65535:
                    found.append(SilentPort(port, f"its {probe}", name, f"{container_path}.{probe}.{handler}.port"))
    return found


def undeclared(silent: list[SilentPort], declared: list[ContainerPort]) -> tuple[SilentPort, ...]:
    """Only the ports the scheduler does not see: declared ones are host ports already."""
    seen = {p.container_port for p in declared if p.protocol == "TCP"}
    unique: dict[int, SilentPort] = {}
    for port in silent:
        if port.port not in seen:
            unique.setdefault(port.port, port)
    return tuple(unique.values())


def read_container_ports(container: yt.Node, container_path: str, name: str, host_network: bool,
                         reader: PortReader, declared: list[ContainerPort], sidecar: bool = False) -> list[HostClaim]:
    claims = []
    for index, entry in enumerate(yt.items(yt.get(container, "ports"), f"{container_path}.ports")):
        entry = yt.mapping(entry, "a container port")
        path = f"{container_path}.ports[{index}]"
        container_port = reader.port(entry, "containerPort", path)
        host_port = reader.port(entry, "hostPort", path, zero_means_unset=True)
        protocol = reader.protocol(entry, path)
        port_name = yt.as_str(yt.get(entry, "name"))
        host_ip = yt.as_str(yt.get(entry, "hostIP"), WILDCARD_HOST_IP) or WILDCARD_HOST_IP
        declared.append(ContainerPort(name, path, port_name, container_port,
                                      container_port if host_network else host_port, protocol, host_ip))
        if yt.get(entry, "containerPort") is None:
            what = f"hostPort {host_port} has no containerPort" if host_port else "a container port needs a containerPort"
            reader.flag(f"{path}.hostPort" if host_port else path,
                        f"{what}: the API server rejects the pod; add the port the container listens on")
        if host_network:
            # The API defaults hostPort = containerPort on hostNetwork Pods, not on templates.
            if host_port and container_port and host_port != container_port:
                reader.flag(f"{path}.hostPort", f"hostPort {host_port} must equal containerPort "
                                                f"{container_port} when hostNetwork is true")
            if container_port:
                # An explicit hostPort is the number as the node sees it: point there when written.
                key = "hostPort" if host_port == container_port else "containerPort"
                claims.append(HostClaim(container_port, protocol, host_ip, "hostNetwork", name,
                                        f"{path}.{key}", container_port, port_name))
        elif host_port:
            claims.append(HostClaim(host_port, protocol, host_ip, SIDECAR_HOST_PORT if sidecar else "hostPort",
                                    name, f"{path}.hostPort",
                                    container_port, port_name))
    return claims


def read_service(document: Document, ref: ObjectRef) -> Service:
    spec = yt.mapping(yt.get(document.root, "spec"), "spec")
    service_type = yt.as_str(yt.get(spec, "type"), "ClusterIP") or "ClusterIP"
    reader = PortReader()
    ports = []
    takes_node_ports = service_type in ("NodePort", "LoadBalancer")
    for index, entry in enumerate(yt.items(yt.get(spec, "ports"), "spec.ports")):
        entry = yt.mapping(entry, "a Service port")
        path = f"spec.ports[{index}]"
        port = reader.port(entry, "port", path)
        if port is None and yt.get(entry, "port") is None:
            reader.flag(path, "a Service port needs a port number (the API server rejects the Service)")
        node_port = reader.port(entry, "nodePort", path, zero_means_unset=True)
        if node_port and not takes_node_ports:
            reader.flag(f"{path}.nodePort", f"nodePort {node_port} is set on a Service of type {service_type}; "
                                            "the API server rejects it (only NodePort and LoadBalancer take one)")
            node_port = None
        ports.append(ServicePort(path, yt.as_str(yt.get(entry, "name")), reader.protocol(entry, path), port,
                                 read_target_port(entry, path, reader), node_port))
    health_check = reader.port(spec, "healthCheckNodePort", "spec", zero_means_unset=True)
    local_traffic = yt.as_str(yt.get(spec, "externalTrafficPolicy")) == "Local"
    if health_check and not (service_type == "LoadBalancer" and local_traffic):
        reader.flag("spec.healthCheckNodePort", f"healthCheckNodePort {health_check} is only allowed on a "
                                                "LoadBalancer Service with `externalTrafficPolicy: Local`; the API "
                                                "server rejects it here")
        health_check = None
    selector = yt.to_plain(yt.mapping(yt.get(spec, "selector"), "spec.selector")) or {}
    external_ips = tuple(yt.as_str(ip) for ip in yt.items(yt.get(spec, "externalIPs"), "spec.externalIPs"))
    ingress = yt.at(document.root, "status.loadBalancer.ingress")
    lb_ips = tuple(yt.as_str(yt.get(item, "ip")) for item in yt.items(ingress, "status.loadBalancer.ingress")
                   if yt.get(item, "ip") is not None)
    service = Service(
        document, ref, service_type, tuple(ports),
        cluster_ip=yt.as_str(yt.get(spec, "clusterIP")),
        selector={str(k): str(v) for k, v in selector.items()},
        health_check_node_port=health_check,
        allocate_load_balancer_node_ports=yt.as_bool(yt.get(spec, "allocateLoadBalancerNodePorts"), True),
        external_ips=external_ips,
        load_balancer_ips=lb_ips,
        invalid_ports=tuple(reader.invalid),
        labels=yt.to_plain(yt.get(yt.get(document.root, "metadata"), "labels")) or {},
        # The API accepts externalTrafficPolicy only where there is external traffic (NodePort,
        # LoadBalancer, externalIPs); kube-proxy applies it to nodePorts, external and LB IPs alike.
        external_local=local_traffic,
        internal_local=yt.as_str(yt.get(spec, "internalTrafficPolicy")) == "Local",
    )
    service.addresses = service_addresses(document.root, spec)
    return service


def read_target_port(entry: yt.Node, path: str, reader: PortReader) -> int | str | None:
    node = yt.get(entry, "targetPort")
    if node is None:
        return None
    if isinstance(node, yt.ScalarNode) and yt.scalar_type(node) == yt.STR:
        name = node.value  # a named port (IntOrString): an IANA service name, with at least one letter
        if name.isdigit():
            # A badly formed name is invalid-port-name's (it reads the name kept here).
            reader.flag(f"{path}.targetPort", f"targetPort {name!r} is neither a port number nor a valid port "
                                              f"name (lowercase letters, digits and '-', at most 15); a number "
                                              f"must not be quoted")
            return None
        return name
    return reader.port(entry, "targetPort", path)


# --- what the API-validation and Service-routing rules read ---------------------------------------

LIFECYCLE_HOOKS = ("lifecycle.postStart", "lifecycle.preStop")
PORT_HANDLERS = ("httpGet", "tcpSocket", "grpc")  # grpc takes a number only; hooks have no grpc


def add_port_details(workload: Workload, pod_spec: yt.MappingNode | None) -> None:
    """Every container's port entries as written, plain init containers included, and the ports
    probes and lifecycle hooks connect to. Plain init containers get the port checks the claims
    reader above skips (it reads only what holds a port while the pod runs)."""
    reader = PortReader()
    declared: list[DeclaredPort] = []
    references: list[PortReference] = []
    for containers_key in ("containers", "initContainers"):
        for index, container in enumerate(yt.items(yt.get(pod_spec, containers_key), containers_key)):
            container = yt.mapping(container, f"{containers_key}[{index}]")
            path = f"{workload.pod_spec_path}.{containers_key}[{index}]"
            name = yt.as_str(yt.get(container, "name"))
            role = "container"
            if containers_key == "initContainers":
                role = "sidecar" if yt.as_str(yt.get(container, "restartPolicy")) == "Always" else "init"
            if role == "init":
                read_container_ports(container, path, name, False, reader, [])
            declared.extend(declared_ports(container, path, name, role))
            if role != "init":  # the API server rejects probes and hooks on plain init containers
                references.extend(port_references(container, path, name, reader))
    workload.declared_ports = tuple(declared)
    workload.port_references = tuple(references)
    workload.invalid_ports += tuple(reader.invalid)


def quiet_int(node: yt.Node | None) -> int | None:
    """An integer field already judged elsewhere: its value, or None when it has none."""
    if node is None:
        return None
    try:
        return yt.as_int(node)
    except yt.FieldTypeError:
        return None


def declared_ports(container: yt.MappingNode, container_path: str, name: str, role: str) -> list[DeclaredPort]:
    found = []
    for index, entry in enumerate(yt.items(yt.get(container, "ports"), f"{container_path}.ports")):
        entry = yt.mapping(entry, "a container port")
        host_port = quiet_int(yt.get(entry, "hostPort"))
        found.append(DeclaredPort(
            name, role, f"{container_path}.ports[{index}]", yt.as_str(yt.get(entry, "name")),
            quiet_int(yt.get(entry, "containerPort")), host_port or None,
            yt.as_str(yt.get(entry, "protocol"), "TCP") or "TCP", yt.as_str(yt.get(entry, "hostIP"))))
    return found


def port_references(container: yt.MappingNode, container_path: str, name: str,
                    reader: PortReader) -> list[PortReference]:
    found = []
    lifecycle = yt.get(container, "lifecycle")
    for source in (*PROBES, *LIFECYCLE_HOOKS):
        hook = source in LIFECYCLE_HOOKS
        holder = yt.get(lifecycle, source.partition(".")[2]) if hook else yt.get(container, source)
        if holder is None:
            continue
        for handler in PORT_HANDLERS[:2] if hook else PORT_HANDLERS:
            action = yt.mapping(yt.get(holder, handler), f"{source}.{handler}")
            if action is None:
                continue
            value = reference_value(action, f"{container_path}.{source}.{handler}", f"{source}.{handler}",
                                    handler != "grpc", reader)
            if value is not None:
                found.append(PortReference(name, source, f"{container_path}.{source}.{handler}.port", value))
    return found


def reference_value(action: yt.MappingNode, path: str, label: str, names_allowed: bool,
                    reader: PortReader) -> int | str | None:
    """A probe's or hook's port (IntOrString; grpc an integer), or None after flagging it."""
    node = yt.get(action, "port")
    if node is None:
        reader.flag(path, f"{label} has no port: the API server rejects the pod; add the port number"
                          + (" or name" if names_allowed else ""))
        return None
    kind = yt.scalar_type(node) if isinstance(node, yt.ScalarNode) else ""
    if kind == yt.INT:
        value = yt.parse_int(node.value)
        if value is not None and 1 <= value <= 65535:
            return value
        reader.flag(f"{path}.port", f"{label}.port {node.value} is not a port number (1-65535)")
        return None
    if kind == yt.STR and not node.value.isdigit() and names_allowed:
        return node.value  # a port name; invalid-port-name judges its form
    if kind == yt.STR and node.value.isdigit():
        what = "a port name, which needs a letter," if names_allowed else "a string"
        reader.flag(f"{path}.port", f"{label}.port {node.value!r} is quoted, so the API server reads "
                                    f"{what} and rejects it; remove the quotes")
        return None
    expected = "a port number or a port name" if names_allowed else "a port number"
    reader.flag(f"{path}.port", f"{label}.port must be {expected}, not {yt.describe(node)}")
    return None


def service_addresses(root: yt.MappingNode, spec: yt.MappingNode | None) -> tuple[ServiceAddress, ...]:
    """externalIPs, spec.loadBalancerIP and status ingress IPs, each with where it is written."""
    found = [ServiceAddress(yt.as_str(ip), f"spec.externalIPs[{index}]", "externalIP")
             for index, ip in enumerate(yt.items(yt.get(spec, "externalIPs"), "spec.externalIPs"))]
    if (requested := yt.get(spec, "loadBalancerIP")) is not None:
        found.append(ServiceAddress(yt.as_str(requested), "spec.loadBalancerIP", "loadBalancerIP"))
    ingress = yt.items(yt.at(root, "status.loadBalancer.ingress"), "status.loadBalancer.ingress")
    found += [ServiceAddress(yt.as_str(yt.get(item, "ip")), f"status.loadBalancer.ingress[{index}].ip",
                             "load-balancer ingress IP")
              for index, item in enumerate(ingress) if yt.get(item, "ip") is not None]
    return tuple(address for address in found if address.ip)
