"""Pods that run cluster components: kube-proxy, kube-apiserver and kube-controller-manager (DaemonSets,
static Pods), calico-node, and the CNI plugin installers of init containers.

Read: the components' flags (`component_flags`; kube-proxy's go to `kube_proxy_config`),
calico-node's pool variables (`cni_config`) and the versions image tags carry:
  kube-proxy[-ARCH]:vX.Y.Z                 kube-proxy's version (registry.k8s.io, k8s.gcr.io, mirrors)
  hyperkube[-ARCH]:vX.Y.Z                  kube-proxy's version, when the container runs `hyperkube proxy`
  cni-plugins, hardened-cni-plugins,       containernetworking/plugins' version (RKE2's
  containernetworking-plugins :vX.Y.Z[-*]  rancher/hardened-cni-plugins:v1.4.0-build2024...)
Not read: flannel-cni-plugin (its tag versions flannel's own CNI binary, not portmap), calico/cni,
cilium, install-cni images (their tags are the CNI's release, not the plugins').
"""

from __future__ import annotations

import functools
import re

from kubelint_ports.loading.yaml_files.documents import Document
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.cluster.network_settings import ConfigObject, Flag, NetworkSettings, metadata_ref
from kubelint_ports.workload_kinds import WORKLOAD_KINDS

_ARCH = r"(?:-(?:amd64|arm64|arm|ppc64le|s390x))?"


@functools.cache
def image_patterns() -> tuple[re.Pattern, re.Pattern, re.Pattern, re.Pattern]:
    """(an image reference's parts, kube-proxy's, hyperkube's, the CNI plugins' image names),
    compiled when an image is first read: most runs read none."""
    return (re.compile(r"(?:.*/)?([^/:@]+)(?::([^/@]*))?(?:@.*)?"), re.compile(rf"kube-proxy{_ARCH}"),
            re.compile(rf"hyperkube{_ARCH}"),
            re.compile(rf"(?:hardened-)?(?:containernetworking-)?cni-plugins{_ARCH}"
                       rf"|containernetworking-plugins{_ARCH}"))


def read_workload(settings: NetworkSettings, document: Document, api_version: str, kind: str) -> None:
    root = document.root
    pod_spec_path = WORKLOAD_KINDS[kind][0]
    pod_spec = yt.mapping(yt.at(root, pod_spec_path), pod_spec_path)
    if pod_spec is None:
        return
    containers = [("containers", c) for c in yt.items(yt.get(pod_spec, "containers"), "containers")]
    init = yt.items(yt.get(pod_spec, "initContainers"), "initContainers")
    for index, container in enumerate(init):  # CNI installers run as init containers
        container = yt.mapping(container, f"initContainers[{index}]")
        if container is not None and may_install_cni(container):
            owner = settings.owner(document, metadata_ref(root, api_version, kind))
            read_image(settings, yt.as_str(yt.get(container, "image")), None, owner)
    owner = None
    for index, (_, container) in enumerate(containers):
        container = yt.mapping(container, f"containers[{index}]")
        if container is None or not may_configure_network(container):
            continue  # most containers: one pass over their raw words, nothing typed (nor imported)
        from kubelint_ports.loading.cluster.cni_config import read_calico_env
        from kubelint_ports.loading.cluster.component_flags import command_tokens, find_component, parse_flags
        from kubelint_ports.loading.cluster.kube_proxy_config import read_proxy_flags

        owner = owner or settings.owner(document, metadata_ref(root, api_version, kind))
        container_path = f"{pod_spec_path}.containers[{index}]"
        tokens = command_tokens(container, container_path)
        image = yt.as_str(yt.get(container, "image"))
        component, start, list_path = find_component(tokens, image)
        read_image(settings, image, component, owner)
        if component is not None:
            flags = parse_flags(tokens[start:])
            anchor = list_path or f"{container_path}.command"
            if component == "kube-proxy":
                read_proxy_flags(settings, owner, owner.ref, flags, anchor, pod_spec, container)
            elif component == "kube-apiserver":
                read_apiserver_flags(settings, owner, flags)
            else:
                read_controller_manager_flags(settings, owner, flags)
        read_calico_env(settings, owner, container, container_path)


def read_apiserver_flags(settings: NetworkSettings, owner: ConfigObject, flags: dict[str, Flag]) -> None:
    if "service-cluster-ip-range" in flags:
        flag = flags["service-cluster-ip-range"]
        settings.cidr_setting(owner, "service", "kube-apiserver --service-cluster-ip-range", flag.value or "",
                              flag.field_path, "kube-apiserver does not start")
    if "service-node-port-range" in flags:
        flag = flags["service-node-port-range"]
        settings.node_port_range(owner, flag.value or "", flag.field_path, "kube-apiserver --service-node-port-range")


def read_controller_manager_flags(settings: NetworkSettings, owner: ConfigObject, flags: dict[str, Flag]) -> None:
    if "cluster-cidr" in flags:
        flag = flags["cluster-cidr"]
        settings.cidr_setting(owner, "pod", "kube-controller-manager --cluster-cidr", flag.value or "",
                              flag.field_path, "kube-controller-manager does not start", origin="controller-manager")
    if "service-cluster-ip-range" in flags:
        flag = flags["service-cluster-ip-range"]
        settings.cidr_setting(owner, "service", "kube-controller-manager --service-cluster-ip-range",
                              flag.value or "", flag.field_path, "kube-controller-manager does not start")


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


def read_image(settings: NetworkSettings, image: str, component: str | None, owner: ConfigObject) -> None:
    """The tag of an image listed above; any other image says nothing."""
    kind, tag = image_tag(image, component)
    if kind:
        settings.image_tags.append((kind, tag, f"image {image} of {owner.ref}", owner.live))


def image_tag(image: str, component: str | None = None) -> tuple[str, str]:
    """("kube-proxy" | "cni-plugins", tag) of an image reference whose tag carries a version;
    ("", "") for any other."""
    parts, kube_proxy, hyperkube, cni_plugins = image_patterns()
    match = parts.fullmatch(image.strip()) if image else None
    if not match or not match.group(2):
        return "", ""
    name, tag = match.group(1), match.group(2)
    if kube_proxy.fullmatch(name) or (hyperkube.fullmatch(name) and component == "kube-proxy"):
        return "kube-proxy", tag
    if cni_plugins.fullmatch(name):
        return "cni-plugins", tag
    return "", ""
