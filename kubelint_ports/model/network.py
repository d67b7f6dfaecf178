"""kube-proxy configuration and the cluster's CIDRs, read from every input (DOMAIN.md D and E).

Sources, among linted paths and `--cluster` files:
- kube-proxy: `KubeProxyConfiguration` documents; ConfigMaps whose value is an embedded one
  (kubeadm's `kube-system/kube-proxy`, key `config.conf`); kube-proxy containers of DaemonSets and
  static Pods with `--cluster-cidr`, `--proxy-mode`, `--detect-local-mode`, `--masquerade-all` and
  `--config` (which makes kube-proxy replace its whole configuration with the file, so those flags
  are then ignored: cmd/kube-proxy/app/options.go `Complete`; only logging flags and
  `--hostname-override` survive, and none of them matters here).
- Service CIDR: kube-apiserver (and kube-controller-manager) `--service-cluster-ip-range`, kubeadm
  `ClusterConfiguration` (`networking.serviceSubnet`, default 10.96.0.0/12, or `extraArgs`),
  `ServiceCIDR` objects, `--service-cidr`.
- Pod CIDR: kube-controller-manager `--cluster-cidr`, kubeadm `networking.podSubnet`, Node
  `spec.podCIDR(s)`, flannel `net-conf.json` `Network`, Calico `IPPool.spec.cidr` and
  `CALICO_IPV4POOL_CIDR`/`CALICO_IPV6POOL_CIDR`, `--pod-cidr`.
- Node-port range: kube-apiserver `--service-node-port-range` (flag or kubeadm `extraArgs`).

Embedded YAML/JSON (a ConfigMap value) is composed on its own; `EmbeddedDocument` maps its marks
back into the file, so a finding points at `clusterCIDR:` inside a `config.conf: |` block.
CIDRs are parsed like Go's `net.ParseCIDR` (host bits allowed and masked off) and kept per IP
family; a value that is not a CIDR becomes an `InvalidCidr` for the `invalid-cidr` rule.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Union

import yaml

from kubelint_ports.findings import COMMAND_LINE, Diagnostic, Location, ObjectRef
from kubelint_ports.loading import STDIN_NAME, Document, ManifestLoader, budgets, files, held
from kubelint_ports.loading import yamltree as yt
from kubelint_ports.model.datapath import DatapathFacts, Fact, parse_version

IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

PROXY_MODES = ("iptables", "ipvs", "nftables")
DEFAULT_PROXY_MODE = "iptables"  # Linux; kube-proxy's "" means iptables
DEFAULT_DETECT_LOCAL_MODE = "ClusterCIDR"
KUBEADM_DEFAULT_SERVICE_SUBNET = "10.96.0.0/12"
COMPONENTS = ("kube-proxy", "kube-apiserver", "kube-controller-manager")
SHELLS = frozenset(("sh", "bash", "ash", "dash"))
HYPERKUBE_ALIASES = {"proxy": "kube-proxy", "apiserver": "kube-apiserver",
                     "controller-manager": "kube-controller-manager"}
PROXY_FLAGS = ("cluster-cidr", "proxy-mode", "detect-local-mode", "masquerade-all")
BOOLEAN_FLAGS = frozenset(("masquerade-all", "allocate-node-cidrs", "iptables-localhost-nodeports"))
# pflag's strconv.ParseBool
_TRUE_WORDS = frozenset(("1", "t", "T", "TRUE", "true", "True"))
_FALSE_WORDS = frozenset(("0", "f", "F", "FALSE", "false", "False"))
_UNRESOLVED = re.compile(r"\$\(|\$\{|\{\{")  # $(ENV) expansion, shell or template placeholders
_IMAGE_NAME = re.compile(r"(?:.*/)?([^/:@]+)(?::[^/@]*)?(?:@.*)?")
_WORKLOAD_POD_SPECS = {"Pod": "spec", "DaemonSet": "spec.template.spec", "Deployment": "spec.template.spec",
                       "ReplicaSet": "spec.template.spec", "StatefulSet": "spec.template.spec"}
_CORE_GROUPS = frozenset(("", "apps", "extensions"))
# Kinds read_document reads besides workloads (its dispatch checks their API groups).
_NETWORK_KINDS = frozenset(("KubeProxyConfiguration", "ClusterConfiguration", "ConfigMap", "ServiceCIDR", "IPPool"))
MAX_EMBEDDED_CHARS = 1024 * 1024
_DECIMAL = re.compile(r"[0-9]{1,10}")  # ASCII digits, short enough for int() (ParseCIDR's own limit is lower)


# --- CIDRs -------------------------------------------------------------------------------------

def parse_cidrs(text: str, *, single: bool = False) -> tuple[tuple[IPNetwork, ...], str]:
    """`10.244.0.0/16` or a dual-stack pair `10.244.0.0/16,fd00:10:244::/56` -> (networks, problem).

    Host bits are masked off (`10.196.0.0/12` is 10.192.0.0/12), as Go's ParseCIDR does; the
    problem is "" when the text is valid, else why it is not.
    """
    if ";" in text:
        return (), "ranges are separated by ';', but a dual-stack pair is separated by a comma"
    entries = [text.strip()] if single else [entry.strip() for entry in text.split(",")]
    networks: list[IPNetwork] = []
    for entry in entries:
        network, problem = parse_cidr(entry)
        if problem:
            return (), problem if len(entries) == 1 or not entry else f"{entry!r}: {problem}"
        networks.append(network)
    return tuple(networks), family_problem(networks)


def parse_cidr(entry: str) -> tuple[IPNetwork | None, str]:
    if not entry:
        return None, "an entry is empty (a stray comma?)"
    if "/" not in entry:
        return None, f"{entry} is an address, not a range: the prefix length (/N) is missing"
    address, _, prefix = entry.partition("/")
    if ":" not in address and "." in address:
        # ParseCIDRSloppy (k8s.io/utils/net) reads 010.0.0.0 as decimal, Python refuses it
        parts = address.split(".")
        if all(_DECIMAL.fullmatch(part) for part in parts):
            address = ".".join(str(int(part)) for part in parts)
    if not _DECIMAL.fullmatch(prefix):
        return None, f"the prefix length {yt.quoted(prefix)} is not a number"
    try:
        address_object = ipaddress.ip_address(address)
    except ValueError:
        return None, f"{yt.quoted(address)} is not an IP address"
    if int(prefix) > address_object.max_prefixlen:
        return None, f"/{prefix} is longer than an IPv{address_object.version} address (/{address_object.max_prefixlen})"
    return ipaddress.ip_network(f"{address}/{int(prefix)}", strict=False), ""


def family_problem(networks: list[IPNetwork]) -> str:
    if len(networks) > 2:
        return f"{len(networks)} ranges given; a dual-stack value holds at most one range per IP family"
    if len(networks) == 2 and networks[0].version == networks[1].version:
        return (f"two IPv{networks[0].version} ranges given; a dual-stack value holds one IPv4 and one "
                f"IPv6 range")
    return ""


def family_name(version: int) -> str:
    return f"IPv{version}"


def cidr_text(networks: Iterable[IPNetwork]) -> str:
    return ",".join(str(network) for network in networks)


# --- where things are written --------------------------------------------------------------------

@dataclass(eq=False, slots=True)
class EmbeddedDocument:
    """A YAML or JSON document held in a ConfigMap value, located inside the file that holds it.

    Field paths under `prefix` (`data."config.conf".clusterCIDR`) resolve inside the embedded
    text; any other path resolves in the ConfigMap itself. When the value's style does not keep
    lines and columns (folded, escaped, or the file cannot be read again), positions fall back to
    the value's key.
    """

    outer: Document
    prefix: str
    root: yt.Node | None
    first_line: int = -1  # 0-based file line of the embedded text's line 0; -1: fall back to the key
    column: int = 0  # 0-based file column of the embedded text's column 0
    block: bool = False  # a literal block: every line is shifted by `column`, not only line 0

    @property
    def path(self) -> str:
        return self.outer.path

    @property
    def origin(self) -> str:
        return self.outer.origin

    @property
    def text_source(self):
        return self.outer.text_source

    def held(self):
        """The ConfigMap's tree, for positions outside the embedded text (its own tree is kept)."""
        return self.outer.held()

    @property
    def mapped(self) -> bool:
        return self.root is not None and self.first_line >= 0

    def location(self, field_path: str = "", message: str = "") -> Location:
        inner = self.inner_path(field_path)
        if inner is None:
            return self.outer.location(field_path, message)
        if not self.mapped:
            return self.outer.location(self.prefix, message)
        key_node, value_node = yt.resolve(self.root, inner) if inner else (None, self.root)
        start = (key_node or value_node).start_mark
        end = value_node.end_mark
        if isinstance(value_node, (yt.MappingNode, yt.SequenceNode)) and key_node is not None:
            end = key_node.end_mark  # as Document.location: the key, not the whole block
        line, column = self.file_position(start)
        end_line, end_column = self.file_position(end, end=True)
        return Location(self.path, line, column, end_line, end_column, message)

    def inner_path(self, field_path: str) -> str | None:
        if field_path == self.prefix:
            return ""
        if field_path.startswith(self.prefix + "."):
            return field_path[len(self.prefix) + 1:]
        return None

    def file_position(self, mark, end: bool = False) -> tuple[int, int]:
        """1-based (line, column) in the file of a mark in the embedded text."""
        # A block shifts every line by its indentation, a one-line scalar only line 0; an end mark
        # at column 0 (just after the line before) stays at column 0.
        shift = self.column if (self.block and not (end and mark.column == 0)) or mark.line == 0 else 0
        return self.first_line + mark.line + 1, mark.column + shift + 1

    def node_location(self, node: yt.Node) -> Location:
        if not self.mapped:
            return self.outer.location(self.prefix)
        line, column = self.file_position(node.start_mark)
        return Location(self.path, line, column)


@dataclass(eq=False, slots=True)
class ConfigObject:
    """A finding's subject: the object a setting is written in (`document` may be embedded)."""

    document: Any  # Document or EmbeddedDocument: both have path, origin and location()
    ref: ObjectRef
    live: bool = False  # from --cluster: only ever related, never reported


@dataclass(eq=False, slots=True)
class CidrSource:
    """A place that states a Service or pod range."""

    role: str  # "service" or "pod"
    label: str  # what states it, for messages: "kubeadm networking.podSubnet"
    text: str
    networks: tuple[IPNetwork, ...]
    owner: ConfigObject | None  # None: a command-line option
    field_path: str
    cluster_wide: bool = True  # False for one node's podCIDR
    defaulted: bool = False  # a documented default, not written in the input

    @property
    def reportable(self) -> bool:
        return self.owner is not None and not self.owner.live and not self.defaulted

    def of_family(self, version: int) -> tuple[IPNetwork, ...]:
        return tuple(network for network in self.networks if network.version == version)

    def describe(self) -> str:
        return f"{self.text} ({self.label})"


@dataclass(frozen=True, slots=True)
class InvalidCidr:
    owner: ConfigObject
    field_path: str
    label: str  # the setting: "kube-proxy clusterCIDR"
    text: str
    problem: str
    effect: str  # what the consumer does with it: "kube-proxy refuses the configuration and does not start"


@dataclass(frozen=True, slots=True)
class Flag:
    name: str
    value: str | None  # None for a bare boolean flag (`--masquerade-all`)
    field_path: str  # the list item holding the value

    @property
    def text(self) -> str:
        return f"--{self.name}" if self.value is None else f"--{self.name}={self.value}"


@dataclass(eq=False, slots=True)
class ProxyConfig:
    """One kube-proxy configuration: a config document, an embedded one, or a container's flags."""

    owner: ConfigObject
    label: str
    from_flags: bool
    anchor_path: str  # where a missing setting belongs: the flags list, or the config document
    mode: str = ""  # as written; "" is kube-proxy's default (iptables)
    mode_path: str = ""
    cluster_cidr_text: str = ""
    cluster_cidrs: tuple[IPNetwork, ...] = ()
    cluster_cidr_path: str = ""  # "" when clusterCIDR / --cluster-cidr is absent
    cluster_cidr_known: bool = True  # False for $(VAR) placeholders and invalid values
    derived_from: CidrSource | None = None  # kubeadm fills an empty clusterCIDR from podSubnet
    detect_local_mode: str = DEFAULT_DETECT_LOCAL_MODE
    masquerade_all: bool = False
    node_port_addresses: tuple[str, ...] | None = None  # nodePortAddresses / --nodeport-addresses
    localhost_node_ports: bool | None = None  # iptables.localhostNodePorts / --iptables-localhost-nodeports
    launcher: ConfigObject | None = None  # the DaemonSet or Pod whose --config loads this config
    launcher_path: str = ""
    ignored_flags: list[Flag] = field(default_factory=list)  # flags --config makes kube-proxy ignore

    @property
    def effective_mode(self) -> str:
        return self.mode or DEFAULT_PROXY_MODE

    @property
    def cluster_cidr_setting(self) -> str:
        return "--cluster-cidr" if self.from_flags else "clusterCIDR"

    @property
    def uses_cluster_cidr(self) -> bool:
        """clusterCIDR decides what is local traffic only in detectLocalMode ClusterCIDR."""
        return self.detect_local_mode == DEFAULT_DETECT_LOCAL_MODE

    @property
    def missing_cluster_cidr(self) -> bool:
        return not self.cluster_cidr_text.strip() and self.derived_from is None



@dataclass(frozen=True, slots=True)
class CniConfig:
    """A CNI network configuration list found in the inputs: does it chain portmap, and how?"""

    source: str  # "kube-system/ConfigMap/kube-flannel-cfg (cni-conf.json)", "10-calico.conflist"
    plugins: tuple[str, ...]  # the plugin types in order
    portmap_backend: str | None  # portmap's "backend" when set ("iptables" | "nftables")
    live: bool = False

    @property
    def has_portmap(self) -> bool:
        return "portmap" in self.plugins


@dataclass(frozen=True, slots=True)
class NodePortRangeSetting:
    """Where a kube-apiserver --service-node-port-range is written (for findings about the range)."""

    range: tuple[int, int]
    label: str
    owner: ConfigObject
    field_path: str


@dataclass(slots=True)
class NetworkConfig:
    """What the inputs say about kube-proxy and the cluster's ranges (`Cluster.network`)."""

    proxies: list[ProxyConfig] = field(default_factory=list)
    service_ranges: list[CidrSource] = field(default_factory=list)
    pod_ranges: list[CidrSource] = field(default_factory=list)
    invalid: list[InvalidCidr] = field(default_factory=list)
    node_port_ranges: list[tuple[tuple[int, int], str]] = field(default_factory=list)  # (range, where)
    # Datapath facts found in the inputs (model.datapath): (value, where, from --cluster)
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


# --- reading -------------------------------------------------------------------------------------

# The NetworkConfig lists a document adds to (pod ranges go through NetworkReader.pod_sources):
# every one, or a per-document piece would lose what it found.
LISTED_FACTS = tuple(name for name, spec in NetworkConfig.__dataclass_fields__.items()
                     if name != "pod_ranges" and spec.default_factory is list)

# Pod-range sources in the order that decides "the" pod CIDR (the --pod-cidr option first).
POD_SOURCE_ORDER = ("option", "controller-manager", "kubeadm", "cni", "node")


class NodeCidrs(NamedTuple):
    """What the network model reads from a Node: its pod ranges as written ((text, field path)
    each), its apiVersion and its container runtime (`containerd://1.7.2`)."""

    document: Document
    api_version: str
    cidrs: tuple[tuple[str, str], ...]
    runtime: str = ""


def read_node_cidrs(document: Document) -> NodeCidrs:
    root = document.root
    spec = yt.get(root, "spec")
    pod_cidrs = yt.items(yt.get(spec, "podCIDRs"), "spec.podCIDRs")
    if pod_cidrs:
        cidrs = tuple((yt.as_str(item), f"spec.podCIDRs[{index}]") for index, item in enumerate(pod_cidrs))
    elif yt.get(spec, "podCIDR") is not None:
        cidrs = ((yt.as_str(yt.get(spec, "podCIDR")), "spec.podCIDR"),)
    else:
        cidrs = ()
    return NodeCidrs(document, yt.as_str(yt.get(root, "apiVersion")) or "v1", cidrs,
                     yt.as_str(yt.at(root, "status.nodeInfo.containerRuntimeVersion")))


def read_network_piece(document: Document, live: bool, diagnostics: list[Diagnostic]) -> NetworkReader | None:
    """What one document says about kube-proxy and the cluster's ranges, read while its tree is
    held; None when it says nothing. Pieces are joined by `network_from_pieces`."""
    root = document.root
    try:
        kind = yt.as_str(yt.get(root, "kind"))
        group = yt.as_str(yt.get(root, "apiVersion")).rpartition("/")[0]
    except yt.FieldTypeError:
        group = kind = ""
    if kind not in _NETWORK_KINDS and not (kind in _WORKLOAD_POD_SPECS and group in _CORE_GROUPS) and not (
            not kind and yt.get(root, "cniVersion") is not None):
        return None
    piece = NetworkReader({id(document)} if live else set())
    piece.guarded(piece.read_document, document)
    if piece.is_empty():
        return None
    if live:
        piece.identity = object_identity(root)
    return piece


def network_from_pieces(pieces: Iterable[NetworkReader], linted: set[tuple[str, str, str]],
                        nodes: dict[str, NodeCidrs] | None = None, facts: Any = None
                        ) -> tuple[NetworkConfig, list[Diagnostic]]:
    """The network model from per-document pieces, in input order. A linted object replaces a
    running one with the same kind, namespace and name (and the pods a linted DaemonSet owns), as
    for workloads: `linted` holds the identities of the linted objects."""
    reader = NetworkReader(set())
    for piece in pieces:
        if piece.live_ids and replaced(piece, linted):
            continue
        reader.absorb(piece)
    reader.resolve_launchers()
    if nodes:
        reader.read_nodes(nodes)
    if facts is not None:
        reader.read_facts(facts)
    return reader.finish(), reader.diagnostics


def replaced(piece: NetworkReader, linted: set[tuple[str, str, str]]) -> bool:
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
        piece = read_network_piece(document, is_live, diagnostics)
        if piece is not None:
            if is_live:
                try:
                    piece.owners = owner_references(document.root)
                except yt.FieldTypeError as error:
                    diagnostics.append(Diagnostic(node_location(document, error.node), str(error)))
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


class NetworkReader:
    def __init__(self, live_ids: set[int]):
        self.live_ids = live_ids
        self.network = NetworkConfig()
        self.diagnostics: list[Diagnostic] = []
        self.pod_sources: dict[str, list[CidrSource]] = {order: [] for order in POD_SOURCE_ORDER}
        # (namespace, ConfigMap name, key) -> the kube-proxy configuration embedded there
        self.embedded_proxies: dict[tuple[str, str, str], ProxyConfig] = {}
        self.launchers: list[tuple[ConfigObject, str, str, list[Flag], tuple[str, str, str] | None]] = []
        self.kubeadm_pod_subnets: dict[str, CidrSource | None] = {}  # file -> podSubnet of its ClusterConfiguration
        self.standalone_proxies: list[tuple[ProxyConfig, str]] = []  # (config, file) for kubeadm defaulting
        self.sources: dict[str, list[str] | None] = {}
        # A piece read from a running object (--cluster): what a linted object must match to replace it.
        self.identity: tuple[str, str, str] | None = None
        self.owners: tuple[tuple[str, str], ...] | None = ()

    # -- bookkeeping

    def is_empty(self) -> bool:
        network = self.network
        return not (any(getattr(network, name) for name in LISTED_FACTS) or any(self.pod_sources.values())
                    or self.launchers or self.kubeadm_pod_subnets or self.diagnostics)

    def absorb(self, piece: "NetworkReader") -> None:
        """Append one document's settings (pieces come in input order)."""
        network, other = self.network, piece.network
        for name in LISTED_FACTS:
            getattr(network, name).extend(getattr(other, name))
        for order, sources in piece.pod_sources.items():
            self.pod_sources[order] += sources
        self.embedded_proxies.update(piece.embedded_proxies)
        self.launchers += piece.launchers
        for path, subnet in piece.kubeadm_pod_subnets.items():
            self.kubeadm_pod_subnets.setdefault(path, subnet)
        self.standalone_proxies += piece.standalone_proxies
        self.diagnostics += piece.diagnostics

    def guarded(self, function, document: Document, *args) -> None:
        try:
            function(document, *args)
        except yt.FieldTypeError as error:
            self.diagnostics.append(Diagnostic(node_location(document, error.node), str(error)))
        except Exception as error:  # a bug: name the object's file, keep the others
            from kubelint_ports.loading import internal_error

            self.diagnostics.append(internal_error(document.path, error))

    def owner(self, document: Document | EmbeddedDocument, ref: ObjectRef, outer: Document) -> ConfigObject:
        return ConfigObject(document, ref, id(outer) in self.live_ids)

    def add_range(self, role: str, source: CidrSource, order: str = "") -> None:
        if role == "service":
            self.network.service_ranges.append(source)
        else:
            self.pod_sources[order].append(source)

    def cidr_setting(self, owner: ConfigObject, role: str, label: str, text: str, field_path: str,
                     effect: str, *, order: str = "", single: bool = False, cluster_wide: bool = True,
                     defaulted: bool = False) -> CidrSource | None:
        """Parse one written range; valid ones become sources, invalid ones `InvalidCidr`s."""
        if _UNRESOLVED.search(text):
            return None  # filled in at run time: nothing to check
        networks, problem = parse_cidrs(text, single=single)
        if problem:
            self.network.invalid.append(InvalidCidr(owner, field_path, label, text, problem, effect))
            return None
        source = CidrSource(role, label, text, networks, owner, field_path, cluster_wide, defaulted)
        self.add_range(role, source, order)
        return source

    # -- documents

    def read_document(self, document: Document) -> None:
        root = document.root
        api_version = yt.as_str(yt.get(root, "apiVersion"))
        kind = yt.as_str(yt.get(root, "kind"))
        group = api_version.rpartition("/")[0]
        if kind == "KubeProxyConfiguration" and group == "kubeproxy.config.k8s.io":
            owner = self.owner(document, config_ref(document, api_version, kind), document)
            proxy = proxy_from_config(root, owner, f"KubeProxyConfiguration in {document.path}", "")
            self.add_proxy_config(proxy)
            self.standalone_proxies.append((proxy, document.path))
        elif kind == "ClusterConfiguration" and group == "kubeadm.k8s.io":
            owner = self.owner(document, config_ref(document, api_version, kind), document)
            self.read_kubeadm(root, owner, "", document.path)
        elif kind == "ConfigMap" and group == "":
            self.read_config_map(document, api_version)
        elif kind == "ServiceCIDR" and group == "networking.k8s.io":
            self.read_service_cidr(document, api_version)
        elif kind == "IPPool" and group in ("crd.projectcalico.org", "projectcalico.org"):
            self.read_ip_pool(document, api_version)
        elif kind in _WORKLOAD_POD_SPECS and group in _CORE_GROUPS:
            self.read_workload(document, api_version, kind)
        elif not kind and yt.get(root, "cniVersion") is not None:
            self.read_cni_config(root, os.path.basename(document.path), id(document) in self.live_ids)

    def add_proxy_config(self, proxy: ProxyConfig) -> None:
        self.network.proxies.append(proxy)
        if proxy.cluster_cidr_path and proxy.cluster_cidr_text.strip():
            self.check_cluster_cidr(proxy)

    def check_cluster_cidr(self, proxy: ProxyConfig) -> None:
        text = proxy.cluster_cidr_text
        if _UNRESOLVED.search(text):
            proxy.cluster_cidr_known = False
            return
        networks, problem = parse_cidrs(text)
        if problem:
            proxy.cluster_cidr_known = False
            self.network.invalid.append(InvalidCidr(
                proxy.owner, proxy.cluster_cidr_path, f"kube-proxy {proxy.cluster_cidr_setting}", text, problem,
                "kube-proxy refuses the configuration and does not start"))
            return
        proxy.cluster_cidrs = networks

    def read_kubeadm(self, root: yt.Node, owner: ConfigObject, prefix: str, path: str) -> None:
        """kubeadm `ClusterConfiguration` (v1beta3 map extraArgs, v1beta4 list of {name, value})."""
        path_of = join_path(prefix)
        networking = yt.mapping(yt.get(root, "networking"), "networking")
        api_args = extra_args(root, "apiServer", path_of)
        manager_args = extra_args(root, "controllerManager", path_of)
        effect = "kubeadm rejects the configuration"
        if "service-cluster-ip-range" in api_args:
            value, field_path = api_args["service-cluster-ip-range"]
            self.cidr_setting(owner, "service", "kube-apiserver --service-cluster-ip-range (kubeadm extraArgs)",
                              value, field_path, "kube-apiserver does not start")
        elif yt.get(networking, "serviceSubnet") is not None:
            self.cidr_setting(owner, "service", "kubeadm networking.serviceSubnet",
                              yt.as_str(yt.get(networking, "serviceSubnet")), path_of("networking.serviceSubnet"), effect)
        else:
            self.cidr_setting(owner, "service", "kubeadm's default serviceSubnet", KUBEADM_DEFAULT_SERVICE_SUBNET,
                              path_of("networking") if networking is not None else prefix, effect, defaulted=True)
        pod_subnet = None
        if yt.get(networking, "podSubnet") is not None:
            pod_subnet = self.cidr_setting(owner, "pod", "kubeadm networking.podSubnet",
                                           yt.as_str(yt.get(networking, "podSubnet")), path_of("networking.podSubnet"),
                                           effect, order="kubeadm")
        if "cluster-cidr" in manager_args:
            value, field_path = manager_args["cluster-cidr"]
            self.cidr_setting(owner, "pod", "kube-controller-manager --cluster-cidr (kubeadm extraArgs)", value,
                              field_path, "kube-controller-manager does not start", order="controller-manager")
        if "service-node-port-range" in api_args:
            value, field_path = api_args["service-node-port-range"]
            self.node_port_range(owner, value, field_path, "kube-apiserver --service-node-port-range (kubeadm)")
        self.kubeadm_pod_subnets.setdefault(path, pod_subnet)

    def read_config_map(self, document: Document, api_version: str) -> None:
        root = document.root
        data = yt.mapping(yt.get(root, "data"), "data")
        if data is None:
            return
        ref = object_ref(root, api_version, "ConfigMap")
        for key_node, value in yt.pairs(data):
            if not isinstance(value, yt.ScalarNode) or not isinstance(key_node, yt.ScalarNode):
                continue
            key, text = key_node.value, value.value
            if len(text) > MAX_EMBEDDED_CHARS:
                continue
            prefix = f'data."{key}"'
            if key == "net-conf.json" and ref.name.endswith("flannel-cfg"):
                self.read_flannel(document, ref, prefix, key_node, value)
            elif "KubeProxyConfiguration" in text or "ClusterConfiguration" in text:
                self.read_embedded_config(document, ref, prefix, key, key_node, value)
            if '"cniVersion"' in text and '"plugins"' in text:
                # flannel's cni-conf.json, Calico's cni_network_config (a template: placeholders
                # such as __CNI_MTU__ are plain YAML scalars, so the text still composes)
                embedded = self.embed(document, prefix, key_node, value, json_text=True)
                if embedded is not None:
                    self.read_cni_config(embedded.root, f"{ref} ({key})", id(document) in self.live_ids)

    def embed(self, document: Document, prefix: str, key_node: yt.ScalarNode, value: yt.ScalarNode,
              *, json_text: bool = False) -> EmbeddedDocument | None:
        """Compose a ConfigMap value; an unreadable one is an input error inside the value."""
        try:
            root = budgets.compose(value.value, loader=ManifestLoader)
        except yaml.YAMLError as error:
            if json_text and not isinstance(error, budgets.LimitError):
                try:
                    data = json.loads(value.value)
                except (ValueError, RecursionError):
                    data = None
                if data is not None:  # valid JSON that YAML 1.1 cannot read (tabs): no inner positions
                    return EmbeddedDocument(document, prefix, _json_node(data))
            embedded = EmbeddedDocument(document, prefix, None)
            locate_embedded(embedded, key_node, value, self.source_lines(document.path))
            mark = getattr(error, "problem_mark", None)
            problem = " ".join(filter(None, (getattr(error, "context", None), getattr(error, "problem", None))))
            where = embedded.location(prefix)
            if mark is not None and embedded.first_line >= 0:
                line, column = embedded.file_position(mark)
                where = Location(document.path, line, column)
            self.diagnostics.append(Diagnostic(where, f"invalid {'JSON' if json_text else 'YAML'} in {prefix}: "
                                                      f"{problem or error}"))
            return None
        embedded = EmbeddedDocument(document, prefix, root)
        locate_embedded(embedded, key_node, value, self.source_lines(document.path))
        return embedded

    def source_lines(self, path: str) -> list[str] | None:
        """The file's lines, to learn a block scalar's indentation (the composer's marks do not say)."""
        if path not in self.sources:
            lines = None
            if path != STDIN_NAME:
                try:  # a regular file only: a pipe read once is empty now, a FIFO would block
                    lines = files.read_file(path, budgets.current().max_file_bytes).decode(
                        "utf-8-sig", "replace").splitlines()
                except OSError:
                    lines = None
            self.sources[path] = lines
        return self.sources[path]

    def read_embedded_config(self, document: Document, ref: ObjectRef, prefix: str, key: str,
                             key_node: yt.ScalarNode, value: yt.ScalarNode) -> None:
        embedded = self.embed(document, prefix, key_node, value)
        if embedded is None or not isinstance(embedded.root, yt.MappingNode):
            return
        root = embedded.root
        owner = self.owner(embedded, ref, document)
        try:
            kind = yt.as_str(yt.get(root, "kind"))
            if kind == "KubeProxyConfiguration":
                proxy = proxy_from_config(root, owner, f"{ref} ({key})", prefix)
                self.add_proxy_config(proxy)
                self.embedded_proxies[(ref.namespace, ref.name, key)] = proxy
            elif kind == "ClusterConfiguration":
                self.read_kubeadm(root, owner, prefix, f"{document.path}#{ref}")
        except yt.FieldTypeError as error:
            self.diagnostics.append(Diagnostic(embedded.node_location(error.node), str(error)))

    def read_flannel(self, document: Document, ref: ObjectRef, prefix: str, key_node: yt.ScalarNode,
                     value: yt.ScalarNode) -> None:
        embedded = self.embed(document, prefix, key_node, value, json_text=True)
        if embedded is None or not isinstance(embedded.root, yt.MappingNode):
            return
        owner = self.owner(embedded, ref, document)
        for field_name in ("Network", "IPv6Network"):
            node = yt.get(embedded.root, field_name)
            if isinstance(node, yt.ScalarNode):
                self.cidr_setting(owner, "pod", f"flannel net-conf.json {field_name}", node.value,
                                  f"{prefix}.{field_name}", "flanneld exits at start", order="cni", single=True)

    def read_cni_config(self, root: yt.Node, source: str, live: bool) -> None:
        """A network configuration list (`plugins`) or a single network configuration (`type`)."""
        if not isinstance(root, yt.MappingNode):
            return
        plugins = yt.get(root, "plugins")
        entries = plugins.value if isinstance(plugins, yt.SequenceNode) else [root]
        types, backend = [], None
        for entry in entries:
            if not isinstance(entry, yt.MappingNode):
                continue
            plugin = yt.get(entry, "type")
            name = plugin.value if isinstance(plugin, yt.ScalarNode) else ""
            types.append(name)
            if name == "portmap" and isinstance(yt.get(entry, "backend"), yt.ScalarNode):
                backend = yt.get(entry, "backend").value
        if any(types):
            self.network.cni_configs.append(CniConfig(source, tuple(types), backend, live))

    def read_image(self, image: str, component: str | None, owner: ConfigObject, container_path: str) -> None:
        """Versions from image tags (see `image_versions`); an image not listed there says nothing."""
        kind, version = image_version(image, component)
        if version is None:
            return
        where = f"image {image} of {owner.ref}"
        target = self.network.kube_proxy_versions if kind == "kube-proxy" else self.network.cni_plugins_versions
        target.append((version, where, owner.live))

    def read_service_cidr(self, document: Document, api_version: str) -> None:
        root = document.root
        ref = object_ref(root, api_version, "ServiceCIDR")
        owner = self.owner(document, ref, document)
        cidrs = yt.items(yt.get(yt.get(root, "spec"), "cidrs"), "spec.cidrs")
        networks: list[IPNetwork] = []
        texts: list[str] = []
        for index, item in enumerate(cidrs):
            text = yt.as_str(item)
            network, problem = parse_cidr(text.strip())
            if problem:
                self.network.invalid.append(InvalidCidr(owner, f"spec.cidrs[{index}]", f"ServiceCIDR {ref.name}",
                                                        text, problem, "the API server rejects the ServiceCIDR"))
                return
            networks.append(network)
            texts.append(text.strip())
        problem = family_problem(networks)
        if problem:
            self.network.invalid.append(InvalidCidr(owner, "spec.cidrs", f"ServiceCIDR {ref.name}", ",".join(texts),
                                                    problem, "the API server rejects the ServiceCIDR"))
            return
        for index, network in enumerate(networks):
            self.network.service_ranges.append(CidrSource(
                "service", f"ServiceCIDR {ref.name}", texts[index], (network,), owner, f"spec.cidrs[{index}]"))

    def read_ip_pool(self, document: Document, api_version: str) -> None:
        root = document.root
        spec = yt.mapping(yt.get(root, "spec"), "spec")
        if yt.as_bool(yt.get(spec, "disabled")) or yt.get(spec, "cidr") is None:
            return
        ref = object_ref(root, api_version, "IPPool")
        self.cidr_setting(self.owner(document, ref, document), "pod", f"Calico IPPool {ref.name} spec.cidr",
                          yt.as_str(yt.get(spec, "cidr")), "spec.cidr", "Calico cannot use the pool",
                          order="cni", single=True)

    def read_workload(self, document: Document, api_version: str, kind: str) -> None:
        root = document.root
        pod_spec_path = _WORKLOAD_POD_SPECS[kind]
        pod_spec = yt.mapping(yt.at(root, pod_spec_path), pod_spec_path)
        if pod_spec is None:
            return
        containers = [("containers", c) for c in yt.items(yt.get(pod_spec, "containers"), "containers")]
        init = yt.items(yt.get(pod_spec, "initContainers"), "initContainers")
        for index, container in enumerate(init):  # CNI installers run as init containers
            container = yt.mapping(container, f"initContainers[{index}]")
            if container is not None and may_install_cni(container):
                owner = self.owner(document, object_ref(root, api_version, kind), document)
                self.read_image(yt.as_str(yt.get(container, "image")), None, owner,
                                f"{pod_spec_path}.initContainers[{index}]")
        owner = None
        for index, (_, container) in enumerate(containers):
            container = yt.mapping(container, f"containers[{index}]")
            if container is None or not may_configure_network(container):
                continue  # most containers: one pass over their raw words, nothing typed
            owner = owner or self.owner(document, object_ref(root, api_version, kind), document)
            container_path = f"{pod_spec_path}.containers[{index}]"
            tokens = command_tokens(container, container_path)
            image = yt.as_str(yt.get(container, "image"))
            component, start, list_path = find_component(tokens, image)
            self.read_image(image, component, owner, container_path)
            if component is not None:
                flags = parse_flags(tokens[start:])
                anchor = list_path or f"{container_path}.command"
                if component == "kube-proxy":
                    self.read_proxy_flags(owner, owner.ref, flags, anchor, pod_spec, container, container_path)
                elif component == "kube-apiserver":
                    self.read_apiserver_flags(owner, flags)
                else:
                    self.read_controller_manager_flags(owner, flags)
            env = yt.items(yt.get(container, "env"), f"{container_path}.env")
            for env_index, variable in enumerate(env):
                name = yt.as_str(yt.get(variable, "name"))
                if name in ("CALICO_IPV4POOL_CIDR", "CALICO_IPV6POOL_CIDR") and yt.get(variable, "value") is not None:
                    self.cidr_setting(owner, "pod", name, yt.as_str(yt.get(variable, "value")),
                                      f"{container_path}.env[{env_index}].value",
                                      "calico-node cannot create the default pool", order="cni", single=True)

    def read_proxy_flags(self, owner: ConfigObject, ref: ObjectRef, flags: dict[str, Flag], anchor: str,
                         pod_spec: yt.Node, container: yt.Node, container_path: str) -> None:
        if "config" in flags and flags["config"].value:
            # kube-proxy replaces its whole configuration with the file: these flags do nothing.
            ignored = [flags[name] for name in PROXY_FLAGS if name in flags]
            target = config_map_key(flags["config"].value, pod_spec, container)
            self.launchers.append((owner, flags["config"].field_path, ref.namespace, ignored, target))
            return
        proxy = ProxyConfig(owner, f"kube-proxy flags of {ref}", True, anchor)
        if "proxy-mode" in flags:
            proxy.mode, proxy.mode_path = flags["proxy-mode"].value or "", flags["proxy-mode"].field_path
        if "cluster-cidr" in flags:
            proxy.cluster_cidr_text = flags["cluster-cidr"].value or ""
            proxy.cluster_cidr_path = flags["cluster-cidr"].field_path
        if "detect-local-mode" in flags:
            proxy.detect_local_mode = flags["detect-local-mode"].value or DEFAULT_DETECT_LOCAL_MODE
        if "masquerade-all" in flags:
            proxy.masquerade_all = flag_bool(flags["masquerade-all"])
        if "nodeport-addresses" in flags:
            proxy.node_port_addresses = tuple(a.strip() for a in (flags["nodeport-addresses"].value or "").split(",")
                                              if a.strip())
        if "iptables-localhost-nodeports" in flags:
            proxy.localhost_node_ports = flag_bool(flags["iptables-localhost-nodeports"])
        self.add_proxy_config(proxy)

    def read_apiserver_flags(self, owner: ConfigObject, flags: dict[str, Flag]) -> None:
        if "service-cluster-ip-range" in flags:
            flag = flags["service-cluster-ip-range"]
            self.cidr_setting(owner, "service", "kube-apiserver --service-cluster-ip-range", flag.value or "",
                              flag.field_path, "kube-apiserver does not start")
        if "service-node-port-range" in flags:
            flag = flags["service-node-port-range"]
            self.node_port_range(owner, flag.value or "", flag.field_path, "kube-apiserver --service-node-port-range")

    def read_controller_manager_flags(self, owner: ConfigObject, flags: dict[str, Flag]) -> None:
        if "cluster-cidr" in flags:
            flag = flags["cluster-cidr"]
            self.cidr_setting(owner, "pod", "kube-controller-manager --cluster-cidr", flag.value or "",
                              flag.field_path, "kube-controller-manager does not start", order="controller-manager")
        if "service-cluster-ip-range" in flags:
            flag = flags["service-cluster-ip-range"]
            self.cidr_setting(owner, "service", "kube-controller-manager --service-cluster-ip-range",
                              flag.value or "", flag.field_path, "kube-controller-manager does not start")

    def node_port_range(self, owner: ConfigObject, text: str, field_path: str, label: str) -> None:
        if _UNRESOLVED.search(text):
            return
        found = parse_port_range(text)
        if found is None:
            self.diagnostics.append(Diagnostic(
                owner.document.location(field_path),
                f"{label} {text!r} is not a port range like 30000-32767; kube-apiserver does not start"))
            return
        self.network.node_port_ranges.append((found, label))
        self.network.node_port_range_settings.append(NodePortRangeSetting(found, label, owner, field_path))

    # -- after all documents

    def resolve_launchers(self) -> None:
        """Tie each `kube-proxy --config` to the ConfigMap mounted at that path, when it is in the input."""
        for owner, config_path, namespace, ignored, target in self.launchers:
            if target is None:
                continue
            name, key = target
            proxy = self.embedded_proxies.get((namespace, name, key))
            if proxy is None and not namespace:
                proxy = next((p for (ns, n, k), p in self.embedded_proxies.items() if n == name and k == key), None)
            if proxy is None:
                continue  # the file comes from outside the inputs: its settings are unknown
            if proxy.launcher is None or (proxy.launcher.live and not owner.live):
                proxy.launcher, proxy.launcher_path = owner, config_path
            proxy.ignored_flags.extend(flag for flag in ignored if not owner.live)

    def read_nodes(self, nodes: dict[str, NodeCidrs]) -> None:
        for name, entry in sorted(nodes.items()):
            owner = ConfigObject(entry.document, ObjectRef(entry.api_version, "Node", "", name), live=True)
            for text, field_path in entry.cidrs:
                self.cidr_setting(owner, "pod", f"podCIDR of Node {name}", text, field_path, "", order="node",
                                  single=True, cluster_wide=False)
            if "://" in entry.runtime:
                name_part, _, version_part = entry.runtime.partition("://")
                self.network.runtimes.append((name_part, parse_version(version_part), name))
        # Nodes are never reported: an invalid podCIDR there is the API server's business.
        self.network.invalid = [invalid for invalid in self.network.invalid if invalid.owner.ref.kind != "Node"]

    def read_node(self, document: Document, name: str) -> None:
        spec = yt.get(document.root, "spec")
        owner = ConfigObject(document, ObjectRef(yt.as_str(yt.get(document.root, "apiVersion")) or "v1",
                                                 "Node", "", name), live=True)
        pod_cidrs = yt.items(yt.get(spec, "podCIDRs"), "spec.podCIDRs")
        if pod_cidrs:
            for index, item in enumerate(pod_cidrs):
                self.cidr_setting(owner, "pod", f"podCIDR of Node {name}", yt.as_str(item),
                                  f"spec.podCIDRs[{index}]", "", order="node", single=True, cluster_wide=False)
        elif yt.get(spec, "podCIDR") is not None:
            self.cidr_setting(owner, "pod", f"podCIDR of Node {name}", yt.as_str(yt.get(spec, "podCIDR")),
                              "spec.podCIDR", "", order="node", single=True, cluster_wide=False)
        runtime = yt.as_str(yt.at(document.root, "status.nodeInfo.containerRuntimeVersion"))
        if "://" in runtime:
            name_part, _, version_part = runtime.partition("://")
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


# --- helpers -------------------------------------------------------------------------------------

def join_path(prefix: str):
    return lambda path: f"{prefix}.{path}" if prefix else path




def object_ref(root: yt.Node, api_version: str, kind: str) -> ObjectRef:
    metadata = yt.mapping(yt.get(root, "metadata"), "metadata")
    return ObjectRef(api_version, kind, yt.as_str(yt.get(metadata, "namespace")), yt.as_str(yt.get(metadata, "name")))


def config_ref(document: Document, api_version: str, kind: str) -> ObjectRef:
    """Component configs have no metadata: the file names them."""
    ref = object_ref(document.root, api_version, kind)
    return ref if ref.name else ObjectRef(api_version, kind, "", os.path.basename(document.path))


def owner_references(root: yt.Node) -> tuple[tuple[str, str], ...]:
    """(kind, name) of an object's ownerReferences."""
    return tuple((yt.as_str(yt.get(reference, "kind")), yt.as_str(yt.get(reference, "name")))
                 for reference in yt.items(yt.get(yt.get(root, "metadata"), "ownerReferences"), "ownerReferences"))


def object_identity(root: yt.Node) -> tuple[str, str, str] | None:
    try:
        kind = yt.as_str(yt.get(root, "kind"))
        metadata = yt.get(root, "metadata")
        return kind, yt.as_str(yt.get(metadata, "namespace")), yt.as_str(yt.get(metadata, "name"))
    except yt.FieldTypeError:
        return None


def node_location(document: Document, node: yt.Node) -> Location:
    """Through the document, so a rendered Helm object's node maps to its template."""
    return document.node_location(node)


def locate_embedded(embedded: EmbeddedDocument, key_node: yt.ScalarNode, value: yt.ScalarNode,
                    lines: list[str] | None) -> None:
    """Learn where the embedded text's line 0, column 0 is in the file, if its style keeps positions.

    A literal block (`|`) keeps lines as they are, shifted by the block's indentation; a one-line
    plain scalar, or a quoted one without escapes, shifts only columns. Anything else (folded,
    escaped, multi-line quoted) keeps the key as the position.
    """
    start, end = value.start_mark, value.end_mark
    text = value.value
    if value.style == "|":
        first = start.line + 1  # content starts on the line after the `|` header
        indent = block_indent(text, lines, first) if lines is not None else None
        if indent is not None:
            embedded.first_line, embedded.column, embedded.block = first, indent, True
        return
    if "\n" in text or start.line != end.line:
        return
    if not value.style:
        offset = 0
    elif value.style in ("'", '"') and end.column - start.column == len(text) + 2:
        offset = 1  # no escapes: the text starts one column after the opening quote
    else:
        return
    embedded.first_line, embedded.column = start.line, start.column + offset


def block_indent(text: str, lines: list[str], first: int) -> int | None:
    """The indentation of a literal block whose content starts at file line `first` (0-based), checked
    against every content line, or None when the file does not match the scalar."""
    indent = None
    for offset, inner in enumerate(text.split("\n")):
        if not inner.strip():
            continue
        if first + offset >= len(lines):
            return None
        line = lines[first + offset]
        if indent is None:
            if not line.endswith(inner):
                return None
            indent = len(line) - len(inner)
            if line[:indent].strip(" "):
                return None
        elif line[indent:] != inner or line[:indent].strip(" "):
            return None
    return indent


def extra_args(root: yt.Node, component: str, at_path) -> dict[str, tuple[str, str]]:
    """kubeadm `extraArgs`: a map (v1beta3) or a list of {name, value} (v1beta4); the last one wins."""
    node = yt.get(yt.get(root, component), "extraArgs")
    found: dict[str, tuple[str, str]] = {}
    if isinstance(node, yt.MappingNode):
        for key_node, value in yt.pairs(node):
            found[yt.as_str(key_node)] = (yt.as_str(value), at_path(f'{component}.extraArgs."{key_node.value}"'))
    elif isinstance(node, yt.SequenceNode):
        for index, item in enumerate(node.value):
            name = yt.as_str(yt.get(item, "name"))
            if name:
                found[name] = (yt.as_str(yt.get(item, "value")), at_path(f"{component}.extraArgs[{index}].value"))
    return found


def may_configure_network(container: yt.MappingNode) -> bool:
    """A cheap look at a container's raw scalars: could it be a control-plane binary or calico-node?"""
    for key, value in container.value:
        if not isinstance(key, yt.ScalarNode):
            continue
        if key.value in ("command", "args", "image"):
            words = value.value if isinstance(value, yt.SequenceNode) else [value]
            for word in words:
                if isinstance(word, yt.ScalarNode) and ("kube-" in word.value or "hyperkube" in word.value
                                                        or (key.value == "image" and "cni-plugins" in word.value)):
                    return True
        elif key.value == "env" and isinstance(value, yt.SequenceNode):
            for variable in value.value:
                if isinstance(variable, yt.MappingNode):
                    for name_key, name in variable.value:
                        if name_key.value == "name":
                            if isinstance(name, yt.ScalarNode) and name.value.startswith("CALICO_IPV"):
                                return True
                            break
    return False


def may_install_cni(container: yt.MappingNode) -> bool:
    image = yt.get(container, "image")
    return isinstance(image, yt.ScalarNode) and "cni-plugins" in image.value


# Image tags that carry a version (model.datapath facts); every other image says nothing.
#   kube-proxy[-ARCH]:vX.Y.Z                 kube-proxy's version (registry.k8s.io, k8s.gcr.io, mirrors)
#   hyperkube[-ARCH]:vX.Y.Z                  kube-proxy's version, when the container runs `hyperkube proxy`
#   cni-plugins, hardened-cni-plugins,       containernetworking/plugins' version (RKE2's
#   containernetworking-plugins :vX.Y.Z[-*]  rancher/hardened-cni-plugins:v1.4.0-build2024...)
# Not read: flannel-cni-plugin (its tag versions flannel's own CNI binary, not portmap), calico/cni,
# cilium, install-cni images (their tags are the CNI's release, not the plugins').
_ARCH = r"(?:-(?:amd64|arm64|arm|ppc64le|s390x))?"
_KUBE_PROXY_IMAGE = re.compile(rf"kube-proxy{_ARCH}")
_HYPERKUBE_IMAGE = re.compile(rf"hyperkube{_ARCH}")
_CNI_PLUGINS_IMAGE = re.compile(rf"(?:hardened-)?(?:containernetworking-)?cni-plugins{_ARCH}|containernetworking-plugins{_ARCH}")
_IMAGE_PARTS = re.compile(r"(?:.*/)?([^/:@]+)(?::([^/@]*))?(?:@.*)?")


def image_version(image: str, component: str | None = None) -> tuple[str, tuple[int, ...] | None]:
    """("kube-proxy" | "cni-plugins" | "", version) read from an image reference."""
    match = _IMAGE_PARTS.fullmatch(image.strip()) if image else None
    if not match or not match.group(2):
        return "", None
    name, tag = match.group(1), match.group(2)
    if _KUBE_PROXY_IMAGE.fullmatch(name) or (_HYPERKUBE_IMAGE.fullmatch(name) and component == "kube-proxy"):
        return "kube-proxy", parse_version(tag)
    if _CNI_PLUGINS_IMAGE.fullmatch(name):
        return "cni-plugins", parse_version(tag)
    return "", None


def command_tokens(container: yt.Node, container_path: str) -> list[tuple[str, str, str]]:
    """(token, field path of the list item, field path of the list) for command then args.

    A shell string (`sh -c "kube-proxy --config=..."`) is split into words that share its item.
    """
    tokens: list[tuple[str, str, str]] = []
    for key in ("command", "args"):
        list_path = f"{container_path}.{key}"
        for index, item in enumerate(yt.items(yt.get(container, key), list_path)):
            if not isinstance(item, yt.ScalarNode):
                continue
            text = yt.as_str(item)
            item_path = f"{list_path}[{index}]"
            words = [text]
            if any(space in text for space in " \t\n") and any(name in text for name in (*COMPONENTS, "hyperkube")):
                try:
                    words = shlex.split(text)
                except ValueError:
                    words = text.split()
            tokens.extend((word, item_path, list_path) for word in words)
    return tokens


def find_component(tokens: list[tuple[str, str, str]], image: str) -> tuple[str | None, int, str]:
    """Which control-plane binary a container runs, where its flags start, and the list holding it."""
    for index, (word, _, list_path) in enumerate(tokens):
        if word.startswith("-"):
            continue  # `--log-file=/var/log/kube-proxy` is a flag of a launcher, not the binary
        base = word.rsplit("/", 1)[-1]
        if base in COMPONENTS:
            return base, index + 1, list_path
        if base == "hyperkube" and index + 1 < len(tokens):
            alias = tokens[index + 1][0]
            component = HYPERKUBE_ALIASES.get(alias, alias if alias in COMPONENTS else None)
            if component:
                return component, index + 2, list_path
    match = _IMAGE_NAME.fullmatch(image.strip()) if image else None
    # Only with words to read: a container that merely uses the image says nothing of its settings.
    if match and tokens and tokens[0][0].rsplit("/", 1)[-1] not in SHELLS:
        name = match.group(1)
        for component in COMPONENTS:
            if re.fullmatch(rf"{component}(-(amd64|arm64|arm|ppc64le|s390x))?", name):
                # The image's entrypoint is the binary: the container's words are all its flags.
                return component, 0, tokens[0][2] if tokens else ""
    return None, 0, ""


def parse_flags(tokens: list[tuple[str, str, str]]) -> dict[str, Flag]:
    """pflag's forms: `--name=value`, `--name value` (not for booleans), bare boolean `--name`."""
    flags: dict[str, Flag] = {}
    index = 0
    while index < len(tokens):
        word, item_path, _ = tokens[index]
        index += 1
        if not word.startswith("--") or word == "--":
            continue
        name, equals, value = word[2:].partition("=")
        if equals:
            flags[name] = Flag(name, value, item_path)
        elif name in BOOLEAN_FLAGS:
            flags[name] = Flag(name, None, item_path)
        elif index < len(tokens) and not tokens[index][0].startswith("-"):
            flags[name] = Flag(name, tokens[index][0], tokens[index][1])
            index += 1
        else:
            flags[name] = Flag(name, "", item_path)
    return flags


def flag_bool(flag: Flag) -> bool:
    if flag.value is None:
        return True
    return flag.value in _TRUE_WORDS


def config_map_key(config_path: str, pod_spec: yt.Node, container: yt.Node) -> tuple[str, str] | None:
    """(ConfigMap name, key) of the file `--config` names, through the container's volume mounts."""
    config_path = config_path.strip()
    best: tuple[int, str, str] | None = None
    for mount in yt.items(yt.get(container, "volumeMounts"), "volumeMounts"):
        mount_path = yt.as_str(yt.get(mount, "mountPath")).rstrip("/")
        sub_path = yt.as_str(yt.get(mount, "subPath"))
        name = yt.as_str(yt.get(mount, "name"))
        if sub_path and config_path == mount_path:
            candidate = (len(mount_path), name, sub_path)
        elif mount_path and config_path.startswith(mount_path + "/"):
            candidate = (len(mount_path), name, config_path[len(mount_path) + 1:])
        else:
            continue
        if best is None or candidate[0] > best[0]:
            best = candidate
    if best is None:
        return None
    _, volume_name, file_name = best
    for volume in yt.items(yt.get(pod_spec, "volumes"), "volumes"):
        if yt.as_str(yt.get(volume, "name")) != volume_name:
            continue
        config_map = yt.get(volume, "configMap")
        if config_map is None:
            return None
        items = yt.items(yt.get(config_map, "items"), "configMap.items")
        for item in items:
            if yt.as_str(yt.get(item, "path")) == file_name:
                return yt.as_str(yt.get(config_map, "name")), yt.as_str(yt.get(item, "key"))
        if items:
            return None  # only the listed keys are projected
        return yt.as_str(yt.get(config_map, "name")), file_name
    return None


def proxy_from_config(root: yt.Node, owner: ConfigObject, label: str, prefix: str) -> ProxyConfig:
    """A `KubeProxyConfiguration` (v1alpha1) mapping; `prefix` is its path in the owner's document."""
    path = join_path(prefix)
    proxy = ProxyConfig(owner, label, False, prefix)
    mode = yt.get(root, "mode")
    if mode is not None:
        proxy.mode, proxy.mode_path = yt.as_str(mode), path("mode")
    pair = yt.child(root, "clusterCIDR")
    if pair is not None:
        proxy.cluster_cidr_text = yt.as_str(pair[1])
        proxy.cluster_cidr_path = path("clusterCIDR")
    proxy.detect_local_mode = yt.as_str(yt.get(root, "detectLocalMode")) or DEFAULT_DETECT_LOCAL_MODE
    # v1alpha1 -> internal conversion: nftables.masqueradeAll in nftables mode, iptables.* otherwise
    table = "nftables" if proxy.mode == "nftables" else "iptables"
    proxy.masquerade_all = yt.as_bool(yt.get(yt.get(root, table), "masqueradeAll"))
    addresses = yt.get(root, "nodePortAddresses")
    if addresses is not None:
        proxy.node_port_addresses = tuple(yt.as_str(item) for item in yt.items(addresses, "nodePortAddresses"))
    localhost = yt.get(yt.get(root, "iptables"), "localhostNodePorts")
    if localhost is not None:
        proxy.localhost_node_ports = yt.as_bool(localhost)
    return proxy


def parse_port_range(text: str) -> tuple[int, int] | None:
    """apimachinery PortRange: `30000-32767`, `30000+2767`, or one port."""
    text = text.strip()
    match = re.fullmatch(r"([0-9]{1,10})(?:([-+])([0-9]{1,10}))?", text)
    if not match:
        return None
    low = int(match.group(1))
    if match.group(2) == "-":
        high = int(match.group(3))
    elif match.group(2) == "+":
        high = low + int(match.group(3))
    else:
        high = low
    if not 1 <= low <= high <= 65535:
        return None
    return low, high


def _json_node(data: Any) -> yt.Node:
    """Valid JSON that YAML could not compose, as nodes without useful marks (positions use the key)."""
    mark = yaml.Mark("<json>", 0, 0, 0, None, None)
    if isinstance(data, dict):
        return yt.MappingNode(yt.MAP, [(yt.ScalarNode(yt.STR, str(k), mark, mark), _json_node(v))
                                       for k, v in data.items()], mark, mark)
    if isinstance(data, list):
        return yt.SequenceNode(yt.SEQ, [_json_node(v) for v in data], mark, mark)
    text = "" if data is None else json.dumps(data) if not isinstance(data, str) else data
    return yt.ScalarNode(yt.STR, text, mark, mark)


# --- datapath facts --------------------------------------------------------------------------------

# Facts a user may state (config `facts:`, `--cni-plugins-version`, `--proxy-mode`) -> DatapathFacts field.
STATED_FACTS = {
    "proxy-mode": "proxy_mode", "kube-proxy-version": "kube_proxy_version", "hostport": "hostport",
    "portmap-backend": "hostport_backend", "cni-plugins-version": "cni_plugins_version",
    "crio-version": "crio_version", "node-port-addresses": "node_port_addresses",
    "localhost-node-ports": "localhost_node_ports", "masquerade-all": "masquerade_all",
    "hostport-order": "hostport_order",
}
VERSION_FACTS = frozenset(("kube-proxy-version", "cni-plugins-version", "crio-version"))


def agreed(found: list[tuple[Any, str]]) -> Fact | None:
    """One value from places that all say the same; None when nothing or they disagree."""
    if not found:
        return None
    values = {value for value, _ in found}
    if len(values) != 1:
        return None
    places = sorted(set(place for _, place in found))  # the same words whatever the input order
    more = f" and {len(places) - 1} more" if len(places) > 1 else ""
    return Fact(values.pop(), places[0] + more)


def by_precedence(found: list[tuple[Any, str, bool]]) -> Fact | None:
    """Linted inputs first, objects from --cluster second."""
    linted = [(value, place) for value, place, live in found if not live]
    return agreed(linted) if linted else agreed([(value, place) for value, place, _ in found])


def datapath_facts(network: NetworkConfig, stated: Iterable[tuple[str, Any, str]] = ()) -> DatapathFacts:
    """What the inputs and the user say about how nodes handle packets; the user wins."""
    found: dict[str, Fact | None] = {}
    proxies = network.proxies
    found["proxy_mode"] = agreed([(p.effective_mode, p.label) for p in proxies]) if network.proxy_mode else None
    found["kube_proxy_version"] = by_precedence(network.kube_proxy_versions)
    found["cni_plugins_version"] = by_precedence(network.cni_plugins_versions)
    for name, attribute in (("node_port_addresses", "node_port_addresses"),
                            ("localhost_node_ports", "localhost_node_ports")):
        values = [(getattr(p, attribute), p.label) for p in proxies if getattr(p, attribute) is not None]
        found[name] = agreed(values) if len(values) == len(proxies) else None
    found["masquerade_all"] = agreed([(p.masquerade_all, p.label) for p in proxies])
    runtimes = network.runtimes
    if runtimes and all(runtime == "cri-o" for runtime, _, _ in runtimes):
        found["hostport"] = Fact("crio", f"containerRuntimeVersion of Node {min(node for _, _, node in runtimes)}"
                                         + (f" and {len(runtimes) - 1} more" if len(runtimes) > 1 else ""))
        found["crio_version"] = agreed([(version, f"containerRuntimeVersion of Node {node}")
                                        for _, version, node in runtimes if version is not None])
    elif network.cni_configs:
        configs = [c for c in network.cni_configs if not c.live] or network.cni_configs
        found["hostport"] = agreed([("portmap" if c.has_portmap else "none", c.source) for c in configs])
        backends = [(c.portmap_backend, c.source) for c in configs if c.has_portmap and c.portmap_backend]
        found["hostport_backend"] = agreed(backends)
    for name, value, source in stated:
        attribute = STATED_FACTS[name]
        if name in VERSION_FACTS:
            value = parse_version(value)
        elif isinstance(value, list):
            value = tuple(value)
        if value is not None:
            found[attribute] = Fact(value, source)
    return DatapathFacts(**{name: fact for name, fact in found.items() if fact is not None})
