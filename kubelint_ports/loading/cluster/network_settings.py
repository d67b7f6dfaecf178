"""What the inputs write about kube-proxy and the cluster's ranges, as plain records (DOMAIN.md D and E).

Each network reader (`kube_proxy_config`, `kubeadm_config`, `cni_config`, `component_pods`, chosen
per document by `loading.cluster.network_readers`) adds what one document writes to that document's
`NetworkSettings`. Nothing here decides: `model.cluster_network` joins the pieces in input order, ties
`kube-proxy --config` to its ConfigMap, ranks the pod ranges and applies kubeadm's defaults.
"""

from __future__ import annotations

import os
import re
from dataclasses import field
from typing import Any

from kubelint_ports.loading.yaml_files.documents import Document
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.cluster.cidrs import IPNetwork, parse_cidrs
from kubelint_ports.records import record
from kubelint_ports.vocabulary import Diagnostic, ObjectRef

DEFAULT_PROXY_MODE = "iptables"  # Linux; kube-proxy's "" means iptables
DEFAULT_DETECT_LOCAL_MODE = "ClusterCIDR"
UNRESOLVED = re.compile(r"\$\(|\$\{|\{\{")  # $(ENV) expansion, shell or template placeholders


@record(eq=False, slots=True)
class ConfigObject:
    """A finding's subject: the object a setting is written in (`document` may be embedded)."""

    document: Any  # Document or EmbeddedDocument: both have path, origin and location()
    ref: ObjectRef
    live: bool = False  # from --cluster: only ever related, never reported


@record(eq=False, slots=True)
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


@record(frozen=True, slots=True)
class InvalidCidr:
    owner: ConfigObject
    field_path: str
    label: str  # the setting: "kube-proxy clusterCIDR"
    text: str
    problem: str
    effect: str  # what the consumer does with it: "kube-proxy refuses the configuration and does not start"


@record(frozen=True, slots=True)
class Flag:
    name: str
    value: str | None  # None for a bare boolean flag (`--masquerade-all`)
    field_path: str  # the list item holding the value

    @property
    def text(self) -> str:
        return f"--{self.name}" if self.value is None else f"--{self.name}={self.value}"


@record(eq=False, slots=True)
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


@record(frozen=True, slots=True)
class CniConfig:
    """A CNI network configuration list found in the inputs: does it chain portmap, and how?"""

    source: str  # "kube-system/ConfigMap/kube-flannel-cfg (cni-conf.json)", "10-calico.conflist"
    plugins: tuple[str, ...]  # the plugin types in order
    portmap_backend: str | None  # portmap's "backend" when set ("iptables" | "nftables")
    live: bool = False

    @property
    def has_portmap(self) -> bool:
        return "portmap" in self.plugins


@record(frozen=True, slots=True)
class NodePortRangeSetting:
    """Where a kube-apiserver --service-node-port-range is written (for findings about the range)."""

    range: tuple[int, int]
    label: str
    owner: ConfigObject
    field_path: str


@record(eq=False, slots=True)
class Launcher:
    """A kube-proxy container started with `--config`: the file it loads replaces its flags."""

    owner: ConfigObject
    config_path: str  # field path of the --config flag
    namespace: str
    ignored: list[Flag]  # the flags --config makes kube-proxy ignore
    target: tuple[str, str] | None  # (ConfigMap name, key) mounted at the file, when the pod says


@record(eq=False, slots=True)
class NetworkSettings:
    """What one document writes about kube-proxy and the cluster's ranges; pickled back from
    worker processes. Pod ranges are kept by where they come from ("controller-manager",
    "kubeadm", "cni"): the model ranks them."""

    live: bool = False  # read from --cluster
    proxies: list[ProxyConfig] = field(default_factory=list)
    service_ranges: list[CidrSource] = field(default_factory=list)
    pod_sources: dict[str, list[CidrSource]] = field(default_factory=dict)
    invalid: list[InvalidCidr] = field(default_factory=list)
    node_port_ranges: list[tuple[tuple[int, int], str]] = field(default_factory=list)  # (range, where)
    node_port_range_settings: list[NodePortRangeSetting] = field(default_factory=list)  # with positions
    cni_configs: list[CniConfig] = field(default_factory=list)
    # ("kube-proxy" | "cni-plugins", image tag, where, from --cluster): the model reads the versions
    image_tags: list[tuple[str, str, str, bool]] = field(default_factory=list)
    # (namespace, ConfigMap name, key) -> the kube-proxy configuration embedded there
    embedded_proxies: dict[tuple[str, str, str], ProxyConfig] = field(default_factory=dict)
    launchers: list[Launcher] = field(default_factory=list)
    kubeadm_pod_subnets: dict[str, CidrSource | None] = field(default_factory=dict)  # file -> its podSubnet
    standalone_proxies: list[tuple[ProxyConfig, str]] = field(default_factory=list)  # (config, file)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # Set by the caller. A piece read from a running object (--cluster): what a linted object must
    # match to replace it (identity, and its ownerReferences; None when they cannot be read).
    identity: tuple[str, str, str] | None = None
    owners: tuple[tuple[str, str], ...] | None = ()
    document: Document | None = None  # which deployment unit its settings belong to (model.units)

    def is_empty(self) -> bool:
        return not (self.proxies or self.service_ranges or any(self.pod_sources.values()) or self.invalid
                    or self.node_port_ranges or self.node_port_range_settings or self.cni_configs
                    or self.image_tags or self.launchers or self.kubeadm_pod_subnets or self.diagnostics)

    def owner(self, document: Any, ref: ObjectRef) -> ConfigObject:
        return ConfigObject(document, ref, self.live)

    def add_range(self, source: CidrSource, origin: str = "") -> None:
        if source.role == "service":
            self.service_ranges.append(source)
        else:
            self.pod_sources.setdefault(origin, []).append(source)

    def cidr_setting(self, owner: ConfigObject, role: str, label: str, text: str, field_path: str,
                     effect: str, *, origin: str = "", single: bool = False,
                     defaulted: bool = False) -> CidrSource | None:
        """Parse one written range; valid ones become sources, invalid ones `InvalidCidr`s."""
        found = cidr_source(owner, role, label, text, field_path, effect, single=single, defaulted=defaulted)
        if isinstance(found, InvalidCidr):
            self.invalid.append(found)
            return None
        if found is not None:
            self.add_range(found, origin)
        return found

    def add_proxy_config(self, proxy: ProxyConfig) -> None:
        self.proxies.append(proxy)
        if proxy.cluster_cidr_path and proxy.cluster_cidr_text.strip():
            self.check_cluster_cidr(proxy)

    def check_cluster_cidr(self, proxy: ProxyConfig) -> None:
        text = proxy.cluster_cidr_text
        if UNRESOLVED.search(text):
            proxy.cluster_cidr_known = False
            return
        networks, problem = parse_cidrs(text)
        if problem:
            proxy.cluster_cidr_known = False
            self.invalid.append(InvalidCidr(
                proxy.owner, proxy.cluster_cidr_path, f"kube-proxy {proxy.cluster_cidr_setting}", text, problem,
                "kube-proxy refuses the configuration and does not start"))
            return
        proxy.cluster_cidrs = networks

    def node_port_range(self, owner: ConfigObject, text: str, field_path: str, label: str) -> None:
        if UNRESOLVED.search(text):
            return
        found = parse_port_range(text)
        if found is None:
            self.diagnostics.append(Diagnostic(
                owner.document.location(field_path),
                f"{label} {text!r} is not a port range like 30000-32767; kube-apiserver does not start"))
            return
        self.node_port_ranges.append((found, label))
        self.node_port_range_settings.append(NodePortRangeSetting(found, label, owner, field_path))


def cidr_source(owner: ConfigObject, role: str, label: str, text: str, field_path: str, effect: str, *,
                single: bool = False, cluster_wide: bool = True,
                defaulted: bool = False) -> CidrSource | InvalidCidr | None:
    """One written range: a source, why it is invalid, or None when it is filled in at run time."""
    if UNRESOLVED.search(text):
        return None  # filled in at run time: nothing to check
    networks, problem = parse_cidrs(text, single=single)
    if problem:
        return InvalidCidr(owner, field_path, label, text, problem, effect)
    return CidrSource(role, label, text, networks, owner, field_path, cluster_wide, defaulted)


def parse_port_range(text: str) -> tuple[int, int] | None:
    """apimachinery PortRange: `30000-32767`, `30000+2767`, or one port; None for a range
    kube-apiserver refuses (`settings.parse_range_option` reads the command line's, and raises)."""
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


# --- where a setting is written -----------------------------------------------------------------

def join_path(prefix: str):
    return lambda path: f"{prefix}.{path}" if prefix else path


def metadata_ref(root: yt.Node, api_version: str, kind: str) -> ObjectRef:
    """A configuration object's reference as its metadata writes it: no namespace when none is
    written, no name from `generateName` (the model's `object_ref` fills both in for workloads)."""
    metadata = yt.mapping(yt.get(root, "metadata"), "metadata")
    return ObjectRef(api_version, kind, yt.as_str(yt.get(metadata, "namespace")), yt.as_str(yt.get(metadata, "name")))


def config_ref(document: Document, api_version: str, kind: str) -> ObjectRef:
    """Component configs have no metadata: the file names them."""
    ref = metadata_ref(document.root, api_version, kind)
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
