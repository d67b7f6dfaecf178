"""CNI settings: network configuration lists (does portmap chain, with which backend?), flannel's
`net-conf.json` (`Network`, `IPv6Network`), Calico's `IPPool` objects and calico-node's
`CALICO_IPV4POOL_CIDR` / `CALICO_IPV6POOL_CIDR`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelint_ports.loading.yaml_files.documents import Document
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.cluster.network_settings import CniConfig, ConfigObject, NetworkSettings, metadata_ref

if TYPE_CHECKING:
    from kubelint_ports.loading.cluster.embedded_config import EmbeddedDocument

CALICO_POOL_VARIABLES = ("CALICO_IPV4POOL_CIDR", "CALICO_IPV6POOL_CIDR")


def read_cni_config(settings: NetworkSettings, root: yt.Node, source: str) -> None:
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
        settings.cni_configs.append(CniConfig(source, tuple(types), backend, settings.live))


def read_flannel(settings: NetworkSettings, embedded: EmbeddedDocument, owner: ConfigObject) -> None:
    """flannel's `net-conf.json`, composed from its ConfigMap value."""
    for field_name in ("Network", "IPv6Network"):
        node = yt.get(embedded.root, field_name)
        if isinstance(node, yt.ScalarNode):
            settings.cidr_setting(owner, "pod", f"flannel net-conf.json {field_name}", node.value,
                                  f"{embedded.prefix}.{field_name}", "flanneld exits at start", origin="cni",
                                  single=True)


def read_ip_pool(settings: NetworkSettings, document: Document, api_version: str) -> None:
    root = document.root
    spec = yt.mapping(yt.get(root, "spec"), "spec")
    if yt.as_bool(yt.get(spec, "disabled")) or yt.get(spec, "cidr") is None:
        return
    ref = metadata_ref(root, api_version, "IPPool")
    settings.cidr_setting(settings.owner(document, ref), "pod", f"Calico IPPool {ref.name} spec.cidr",
                          yt.as_str(yt.get(spec, "cidr")), "spec.cidr", "Calico cannot use the pool",
                          origin="cni", single=True)


def read_calico_env(settings: NetworkSettings, owner: ConfigObject, container: yt.Node, container_path: str) -> None:
    """calico-node's default pool, from its environment."""
    env = yt.items(yt.get(container, "env"), f"{container_path}.env")
    for env_index, variable in enumerate(env):
        name = yt.as_str(yt.get(variable, "name"))
        if name in CALICO_POOL_VARIABLES and yt.get(variable, "value") is not None:
            settings.cidr_setting(owner, "pod", name, yt.as_str(yt.get(variable, "value")),
                                  f"{container_path}.env[{env_index}].value",
                                  "calico-node cannot create the default pool", origin="cni", single=True)
