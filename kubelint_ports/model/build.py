"""Documents -> the `Cluster`: workloads, Services, nodes and the network, in input order.

The model is read while loading holds each document's tree (`ModelReader`, one per kind of
input: linted manifests, running objects, the node inventory), in worker processes for large
inputs; `assemble` then joins the pieces in input order into the `Cluster`. Everything a check or
the engine needs from a document must be read here: after its reader returns, a document keeps
only its place (see `loading`). The per-object readers (`model.object_readers`: `read_workload`,
`read_service`, ...) take the document and read `document.root`, which is held while they run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field

from kubelint_ports.loading import Document, held
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.cluster.network_readers import NodeCidrs, read_node_cidrs
from kubelint_ports.loading.cluster.network_settings import NetworkSettings, object_identity, owner_references
from kubelint_ports.workload_kinds import CORE_GROUPS, CUSTOM_WORKLOAD_KINDS, ONE_PER_NODE, WORKLOAD_KINDS
from kubelint_ports.model import placement, units
from kubelint_ports.model.datapath.answer import Datapath
from kubelint_ports.model.cluster_network import network_from_pieces, read_network_piece
from kubelint_ports.model.network_facts import cluster_datapath_facts
from kubelint_ports.model.object_readers import object_ref, read_service, read_workload
from kubelint_ports.model.objects import (
    DEFAULT_EPHEMERAL_PORT_RANGE,
    DEFAULT_NODE_PORT_RANGE,
    Cluster,
    ClusterFacts,
    PodTemplateKind,
    Workload,
)
from kubelint_ports.records import record
from kubelint_ports.vocabulary import Diagnostic, ObjectRef

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


LINTED, LIVE, INVENTORY = "linted", "live", "inventory"


@record(slots=True)
class NodeEntry:
    """A Node object and what the network model reads from it (its pod CIDRs, with field paths)."""

    node: placement.Node
    cidrs: NodeCidrs


@record(slots=True)
class ModelReader:
    """What one kind of input contributes to the model, read document by document while loading
    holds each tree. Pickled back from worker processes; `absorb` appends a worker's pieces."""

    role: str = LINTED  # LINTED manifests, LIVE objects (--cluster), or the node INVENTORY (--nodes)
    replacing: bool = True  # linted manifests with running objects they may replace: keep identities
    custom_kinds: dict | None = None  # custom resources read as workloads (custom_workload_kinds)
    workloads: list = field(default_factory=list)
    services: list = field(default_factory=list)
    nodes: list[NodeEntry] = field(default_factory=list)
    network: list[NetworkSettings] = field(default_factory=list)  # one piece per document that has any
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
        piece = read_network_piece(document, live)
        if piece is not None:
            piece.owners = owners
            piece.document = document
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
    cluster.datapath = Datapath(cluster_datapath_facts(cluster.network, facts.datapath_statements()))
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
