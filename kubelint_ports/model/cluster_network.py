"""kube-proxy configuration and the cluster's CIDRs: the network model the rules read (`Cluster.network`).

The inputs are read in `loading` (`loading.cluster.network_readers` picks the reader of each document: kube-proxy,
kubeadm, CNI configurations, component pods; `loading.cluster.network_settings` holds the records), one
`NetworkSettings` per document. Here they are joined, in input order, into the `NetworkConfig`:
a linted object replaces the running one it names, each `kube-proxy --config` is tied to the
ConfigMap mounted at that path, the pod ranges are ranked (`POD_SOURCE_ORDER`: the `--pod-cidr`
option first), the nodes' podCIDRs, container runtimes and the command line's ranges are added,
and kubeadm's defaults are applied. The datapath facts drawn from it are `model.network_facts`'.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field
from typing import Any

from kubelint_ports.loading import Document, held
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.cluster.cidrs import IPNetwork, cidr_text, family_name, parse_cidrs  # noqa: F401 (names the checks use)
from kubelint_ports.loading.cluster.network_readers import NodeCidrs, read_network_settings, read_node_cidrs
from kubelint_ports.loading.cluster.network_settings import (  # noqa: F401 (the records, importable here)
    DEFAULT_DETECT_LOCAL_MODE,
    DEFAULT_PROXY_MODE,
    CidrSource,
    CniConfig,
    ConfigObject,
    Flag,
    InvalidCidr,
    Launcher,
    NetworkSettings,
    NodePortRangeSetting,
    ProxyConfig,
    cidr_source,
    object_identity,
    owner_references,
    parse_port_range,
)
from kubelint_ports.model.datapath.facts import PROXY_MODES, parse_version
from kubelint_ports.records import record
from kubelint_ports.vocabulary import COMMAND_LINE, Diagnostic, Location, ObjectRef


@record(slots=True)
class NetworkConfig:
    """What the inputs say about kube-proxy and the cluster's ranges (`Cluster.network`)."""

    proxies: list[ProxyConfig] = field(default_factory=list)
    service_ranges: list[CidrSource] = field(default_factory=list)
    pod_ranges: list[CidrSource] = field(default_factory=list)
    invalid: list[InvalidCidr] = field(default_factory=list)
    node_port_ranges: list[tuple[tuple[int, int], str]] = field(default_factory=list)  # (range, where)
    # Datapath facts found in the inputs (model.network_facts): (value, where, from --cluster)
    kube_proxy_versions: list[tuple[tuple[int, ...], str, bool]] = field(default_factory=list)
    cni_plugins_versions: list[tuple[tuple[int, ...], str, bool]] = field(default_factory=list)
    cni_configs: list[CniConfig] = field(default_factory=list)
    runtimes: list[tuple[str, tuple[int, ...] | None, str]] = field(default_factory=list)  # (runtime, version, node)
    node_port_range_settings: list[NodePortRangeSetting] = field(default_factory=list)  # with positions

    @property
    def proxy_mode(self) -> str | None:
        """The one mode every kube-proxy configuration found uses; None when none or they differ."""
        modes = {proxy.effective_mode for proxy in self.proxies}
        if len(modes) == 1:
            mode = modes.pop()
            return mode if mode in PROXY_MODES else None
        return None

    @property
    def node_port_range(self) -> tuple[int, int] | None:
        ranges = {found for found, _ in self.node_port_ranges}
        return ranges.pop() if len(ranges) == 1 else None

    def cluster_pod_range(self, version: int) -> CidrSource | None:
        """The cluster-wide pod range of one family, from the most authoritative source."""
        for source in self.pod_ranges:
            if source.cluster_wide and source.of_family(version):
                return source
        return None


# The lists a document's NetworkSettings adds to the NetworkConfig as they are (pod ranges are
# ranked, image tags read as versions on the way): every one, or a document would lose what it says.
LISTED_SETTINGS = ("proxies", "service_ranges", "invalid", "node_port_ranges", "cni_configs",
                   "node_port_range_settings")

# Pod-range sources in the order that decides "the" pod CIDR (the --pod-cidr option first).
POD_SOURCE_ORDER = ("option", "controller-manager", "kubeadm", "cni", "node")


def image_version(image: str, component: str | None = None) -> tuple[str, tuple[int, ...] | None]:
    """("kube-proxy" | "cni-plugins" | "", version) read from an image reference."""
    from kubelint_ports.loading.cluster.component_pods import image_tag

    kind, tag = image_tag(image, component)
    return (kind, parse_version(tag)) if kind else ("", None)


def read_network_piece(document: Document, live: bool) -> NetworkSettings | None:
    """What one document says about kube-proxy and the cluster's ranges (`loading.cluster.network_readers`), read
    while its tree is held; None when it says nothing (an image tag without a version says
    nothing). Pieces are joined by `network_from_pieces`."""
    piece = read_network_settings(document, live)
    if piece is not None:
        piece.image_tags = [entry for entry in piece.image_tags if parse_version(entry[1]) is not None]
        if piece.is_empty():
            return None
    return piece


def network_from_pieces(pieces: Iterable[NetworkSettings], linted: set[tuple[str, str, str]],
                        nodes: dict[str, NodeCidrs] | None = None, facts: Any = None
                        ) -> tuple[NetworkConfig, list[Diagnostic]]:
    """The network model from per-document pieces, in input order. A linted object replaces a
    running one with the same kind, namespace and name (and the pods a linted DaemonSet owns), as
    for workloads: `linted` holds the identities of the linted objects."""
    joined = NetworkJoin()
    for piece in pieces:
        if piece.live and replaced(piece, linted):
            continue
        joined.absorb(piece)
    joined.resolve_launchers()
    if nodes:
        joined.read_nodes(nodes)
    if facts is not None:
        joined.read_facts(facts)
    return joined.finish(), joined.diagnostics


def replaced(piece: NetworkSettings, linted: set[tuple[str, str, str]]) -> bool:
    """A running object that a linted one replaces (same object, or a pod of a linted DaemonSet);
    one whose ownerReferences cannot be read is left out too."""
    if piece.owners is None or piece.identity in linted:
        return True
    namespace = piece.identity[1] if piece.identity else ""
    return any((kind, namespace, name) in linted for kind, name in piece.owners)


def read_network(documents: Iterable[Document], cluster: Any = None, facts: Any = None, *,
                 live: Iterable[Document] = ()) -> tuple[NetworkConfig, list[Diagnostic]]:
    """Read every network setting from `documents` (each composed again from its text); those also
    in `live` came from --cluster. `cluster.node_documents` gives the nodes' pod ranges."""
    live_ids = {id(document) for document in live}
    pieces, linted, diagnostics = [], set(), []
    for document in held(documents):
        is_live = id(document) in live_ids
        piece = read_network_piece(document, is_live)
        if piece is not None:
            if is_live:
                try:
                    piece.owners = owner_references(document.root)
                except yt.FieldTypeError as error:
                    diagnostics.append(Diagnostic(document.node_location(error.node), str(error)))
                    piece.owners = None
            pieces.append(piece)
        if not is_live and live_ids and (identity := object_identity(document.root)) is not None:
            linted.add(identity)
    nodes = {name: read_node_cidrs(document) for name, document in held_items(
        (getattr(cluster, "node_documents", None) or {}))}
    network, more = network_from_pieces(pieces, linted, nodes, facts)
    return network, diagnostics + more


def held_items(documents: dict[str, Document]):
    for name, document in documents.items():
        with document.held():
            yield name, document


class NetworkJoin:
    """The documents' settings joined in input order, then what they leave open decided."""

    def __init__(self) -> None:
        self.network = NetworkConfig()
        self.diagnostics: list[Diagnostic] = []
        self.pod_sources: dict[str, list[CidrSource]] = {order: [] for order in POD_SOURCE_ORDER}
        # (namespace, ConfigMap name, key) -> the kube-proxy configuration embedded there
        self.embedded_proxies: dict[tuple[str, str, str], ProxyConfig] = {}
        self.launchers: list[Launcher] = []
        self.kubeadm_pod_subnets: dict[str, CidrSource | None] = {}  # file -> podSubnet of its ClusterConfiguration
        self.standalone_proxies: list[tuple[ProxyConfig, str]] = []  # (config, file) for kubeadm defaulting

    def absorb(self, piece: NetworkSettings) -> None:
        """Append one document's settings (pieces come in input order)."""
        network = self.network
        for name in LISTED_SETTINGS:
            getattr(network, name).extend(getattr(piece, name))
        for kind, tag, where, live in piece.image_tags:
            version = parse_version(tag)
            if version is not None:
                target = network.kube_proxy_versions if kind == "kube-proxy" else network.cni_plugins_versions
                target.append((version, where, live))
        for order, sources in piece.pod_sources.items():
            self.pod_sources[order] += sources
        self.embedded_proxies.update(piece.embedded_proxies)
        self.launchers += piece.launchers
        for path, subnet in piece.kubeadm_pod_subnets.items():
            self.kubeadm_pod_subnets.setdefault(path, subnet)
        self.standalone_proxies += piece.standalone_proxies
        self.diagnostics += piece.diagnostics

    def resolve_launchers(self) -> None:
        """Tie each `kube-proxy --config` to the ConfigMap mounted at that path, when it is in the input."""
        for launcher in self.launchers:
            owner = launcher.owner
            if launcher.target is None:
                continue
            name, key = launcher.target
            proxy = self.embedded_proxies.get((launcher.namespace, name, key))
            if proxy is None and not launcher.namespace:
                proxy = next((p for (ns, n, k), p in self.embedded_proxies.items() if n == name and k == key), None)
            if proxy is None:
                continue  # the file comes from outside the inputs: its settings are unknown
            if proxy.launcher is None or (proxy.launcher.live and not owner.live):
                proxy.launcher, proxy.launcher_path = owner, launcher.config_path
            proxy.ignored_flags.extend(flag for flag in launcher.ignored if not owner.live)

    def read_nodes(self, nodes: dict[str, NodeCidrs]) -> None:
        for name, entry in sorted(nodes.items()):
            owner = ConfigObject(entry.document, ObjectRef(entry.api_version, "Node", "", name), live=True)
            for text, field_path in entry.cidrs:
                # Nodes are never reported: an invalid podCIDR there is the API server's business.
                source = cidr_source(owner, "pod", f"podCIDR of Node {name}", text, field_path, "", single=True,
                                     cluster_wide=False)
                if isinstance(source, CidrSource):
                    self.pod_sources["node"].append(source)
            if "://" in entry.runtime:
                name_part, _, version_part = entry.runtime.partition("://")
                self.network.runtimes.append((name_part, parse_version(version_part), name))

    def read_facts(self, facts: Any) -> None:
        for role, option, text in (("service", "--service-cidr", getattr(facts, "service_cidr", None)),
                                   ("pod", "--pod-cidr", getattr(facts, "pod_cidr", None))):
            if not text:
                continue
            networks, problem = parse_cidrs(text)
            if problem:
                self.diagnostics.append(Diagnostic(Location(COMMAND_LINE, 0, 0), f"{option} {text!r}: {problem}"))
                continue
            source = CidrSource(role, f"the {option} option", text, networks, None, "")
            if role == "service":
                self.network.service_ranges.insert(0, source)
            else:
                self.pod_sources["option"].append(source)

    def finish(self) -> NetworkConfig:
        self.network.pod_ranges = [source for order in POD_SOURCE_ORDER for source in self.pod_sources[order]]
        for proxy, path in self.standalone_proxies:
            # kubeadm fills an empty clusterCIDR from networking.podSubnet of the same config file.
            pod_subnet = self.kubeadm_pod_subnets.get(path)
            if pod_subnet is not None and proxy.missing_cluster_cidr:
                proxy.derived_from = pod_subnet
                proxy.cluster_cidrs = pod_subnet.networks
        return self.network
