"""What one document says about kube-proxy and the cluster's ranges (DOMAIN.md D and E): which
reader reads it, into one `NetworkSettings` per document (`model.cluster_network` joins them).

Sources, among linted paths and `--cluster` files:
- kube-proxy (`kube_proxy_config`): `KubeProxyConfiguration` documents; ConfigMaps whose value is
  an embedded one; kube-proxy containers of DaemonSets and static Pods (`component_pods`).
- Service CIDR: kube-apiserver (and kube-controller-manager) `--service-cluster-ip-range`, kubeadm
  `ClusterConfiguration` (`kubeadm_config`), `ServiceCIDR` objects (here).
- Pod CIDR: kube-controller-manager `--cluster-cidr`, kubeadm `networking.podSubnet`, flannel
  `net-conf.json`, Calico `IPPool.spec.cidr` and `CALICO_IPV4POOL_CIDR`/`CALICO_IPV6POOL_CIDR`
  (`cni_config`), Node `spec.podCIDR(s)` (`read_node_cidrs`, for the model's node inventory).
- Node-port range: kube-apiserver `--service-node-port-range` (flag or kubeadm `extraArgs`).

Embedded YAML/JSON (a ConfigMap value) is composed on its own (`embedded_config`). CIDRs are
parsed by `cidrs`; a value that is not a CIDR becomes an `InvalidCidr` for the `invalid-cidr` rule.
Each reader is imported when a document it reads comes: a run over plain workloads and Services
never loads the configuration readers.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

from kubelint_ports.loading.yaml_files.documents import Document, internal_error
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.cluster.cidrs import IPNetwork, family_problem, parse_cidr
from kubelint_ports.loading.cluster.network_settings import (
    CidrSource,
    InvalidCidr,
    NetworkSettings,
    config_ref,
    metadata_ref,
    object_identity,
)
from kubelint_ports.workload_kinds import runs_components
from kubelint_ports.vocabulary import Diagnostic, ObjectRef

if TYPE_CHECKING:
    from kubelint_ports.loading.cluster.embedded_config import EmbeddedDocument

# Kinds read_document reads besides workloads (its dispatch checks their API groups).
NETWORK_KINDS = frozenset(("KubeProxyConfiguration", "ClusterConfiguration", "ConfigMap", "ServiceCIDR", "IPPool"))


def read_network_settings(document: Document, live: bool) -> NetworkSettings | None:
    """What one document says about kube-proxy and the cluster's ranges, read while its tree is
    held; None when it says nothing."""
    root = document.root
    try:
        kind = yt.as_str(yt.get(root, "kind"))
        group = yt.as_str(yt.get(root, "apiVersion")).rpartition("/")[0]
    except yt.FieldTypeError:
        group = kind = ""
    if kind not in NETWORK_KINDS and not runs_components(group, kind) and not (
            not kind and yt.get(root, "cniVersion") is not None):
        return None
    settings = NetworkSettings(live)
    try:
        read_document(settings, document)
    except yt.FieldTypeError as error:
        settings.diagnostics.append(Diagnostic(document.node_location(error.node), str(error)))
    except Exception as error:  # a bug: name the object's file, keep the others
        settings.diagnostics.append(internal_error(document.path, error))
    if settings.is_empty():
        return None
    if live:
        settings.identity = object_identity(root)
    return settings


def read_document(settings: NetworkSettings, document: Document) -> None:
    root = document.root
    api_version = yt.as_str(yt.get(root, "apiVersion"))
    kind = yt.as_str(yt.get(root, "kind"))
    group = api_version.rpartition("/")[0]
    if kind == "KubeProxyConfiguration" and group == "kubeproxy.config.k8s.io":
        from kubelint_ports.loading.cluster.kube_proxy_config import proxy_from_config

        owner = settings.owner(document, config_ref(document, api_version, kind))
        proxy = proxy_from_config(root, owner, f"KubeProxyConfiguration in {document.path}", "")
        settings.add_proxy_config(proxy)
        settings.standalone_proxies.append((proxy, document.path))
    elif kind == "ClusterConfiguration" and group == "kubeadm.k8s.io":
        from kubelint_ports.loading.cluster.kubeadm_config import read_kubeadm

        owner = settings.owner(document, config_ref(document, api_version, kind))
        read_kubeadm(settings, root, owner, "", document.path)
    elif kind == "ConfigMap" and group == "":
        read_config_map(settings, document, api_version)
    elif kind == "ServiceCIDR" and group == "networking.k8s.io":
        read_service_cidr(settings, document, api_version)
    elif kind == "IPPool" and group in ("crd.projectcalico.org", "projectcalico.org"):
        from kubelint_ports.loading.cluster.cni_config import read_ip_pool

        read_ip_pool(settings, document, api_version)
    elif runs_components(group, kind):
        from kubelint_ports.loading.cluster.component_pods import read_workload

        read_workload(settings, document, api_version, kind)
    elif not kind and yt.get(root, "cniVersion") is not None:
        from kubelint_ports.loading.cluster.cni_config import read_cni_config

        read_cni_config(settings, root, os.path.basename(document.path))


def read_config_map(settings: NetworkSettings, document: Document, api_version: str) -> None:
    """Values that hold a kube-proxy or kubeadm configuration, flannel's net-conf.json, a CNI
    configuration list."""
    from kubelint_ports.loading.cluster.cni_config import read_cni_config, read_flannel
    from kubelint_ports.loading.cluster.embedded_config import MAX_EMBEDDED_CHARS, SourceLines, compose_embedded

    root = document.root
    data = yt.mapping(yt.get(root, "data"), "data")
    if data is None:
        return
    ref = metadata_ref(root, api_version, "ConfigMap")
    lines = SourceLines(document.path)
    for key_node, value in yt.pairs(data):
        if not isinstance(value, yt.ScalarNode) or not isinstance(key_node, yt.ScalarNode):
            continue
        key, text = key_node.value, value.value
        if len(text) > MAX_EMBEDDED_CHARS:
            continue
        prefix = f'data."{key}"'
        if key == "net-conf.json" and ref.name.endswith("flannel-cfg"):
            embedded = compose_embedded(document, prefix, key_node, value, lines, settings.diagnostics,
                                        json_text=True)
            if embedded is not None and isinstance(embedded.root, yt.MappingNode):
                read_flannel(settings, embedded, settings.owner(embedded, ref))
        elif "KubeProxyConfiguration" in text or "ClusterConfiguration" in text:
            embedded = compose_embedded(document, prefix, key_node, value, lines, settings.diagnostics)
            if embedded is not None and isinstance(embedded.root, yt.MappingNode):
                read_embedded_config(settings, embedded, ref, key)
        if '"cniVersion"' in text and '"plugins"' in text:
            # flannel's cni-conf.json, Calico's cni_network_config (a template: placeholders
            # such as __CNI_MTU__ are plain YAML scalars, so the text still composes)
            embedded = compose_embedded(document, prefix, key_node, value, lines, settings.diagnostics,
                                        json_text=True)
            if embedded is not None:
                read_cni_config(settings, embedded.root, f"{ref} ({key})")


def read_embedded_config(settings: NetworkSettings, embedded: EmbeddedDocument, ref: ObjectRef, key: str) -> None:
    """A kube-proxy or kubeadm configuration held in a ConfigMap value (kubeadm's `kube-system/kube-proxy`,
    key `config.conf`; `kube-system/kubeadm-config`); a field of the wrong type costs this value only."""
    from kubelint_ports.loading.cluster.kube_proxy_config import proxy_from_config
    from kubelint_ports.loading.cluster.kubeadm_config import read_kubeadm

    root, owner = embedded.root, settings.owner(embedded, ref)
    try:
        kind = yt.as_str(yt.get(root, "kind"))
        if kind == "KubeProxyConfiguration":
            proxy = proxy_from_config(root, owner, f"{ref} ({key})", embedded.prefix)
            settings.add_proxy_config(proxy)
            settings.embedded_proxies[(ref.namespace, ref.name, key)] = proxy
        elif kind == "ClusterConfiguration":
            read_kubeadm(settings, root, owner, embedded.prefix, f"{embedded.path}#{ref}")
    except yt.FieldTypeError as error:
        settings.diagnostics.append(Diagnostic(embedded.node_location(error.node), str(error)))


def read_service_cidr(settings: NetworkSettings, document: Document, api_version: str) -> None:
    root = document.root
    ref = metadata_ref(root, api_version, "ServiceCIDR")
    owner = settings.owner(document, ref)
    cidrs = yt.items(yt.get(yt.get(root, "spec"), "cidrs"), "spec.cidrs")
    networks: list[IPNetwork] = []
    texts: list[str] = []
    for index, item in enumerate(cidrs):
        text = yt.as_str(item)
        network, problem = parse_cidr(text.strip())
        if problem:
            settings.invalid.append(InvalidCidr(owner, f"spec.cidrs[{index}]", f"ServiceCIDR {ref.name}",
                                                text, problem, "the API server rejects the ServiceCIDR"))
            return
        networks.append(network)
        texts.append(text.strip())
    problem = family_problem(networks)
    if problem:
        settings.invalid.append(InvalidCidr(owner, "spec.cidrs", f"ServiceCIDR {ref.name}", ",".join(texts),
                                            problem, "the API server rejects the ServiceCIDR"))
        return
    for index, network in enumerate(networks):
        settings.service_ranges.append(CidrSource(
            "service", f"ServiceCIDR {ref.name}", texts[index], (network,), owner, f"spec.cidrs[{index}]"))


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
