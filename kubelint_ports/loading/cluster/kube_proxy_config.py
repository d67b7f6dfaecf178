"""kube-proxy's configuration: a `KubeProxyConfiguration` (v1alpha1, standalone or embedded in a
ConfigMap such as kubeadm's `kube-system/kube-proxy`, key `config.conf`) or a container's flags.

`--cluster-cidr`, `--proxy-mode`, `--detect-local-mode`, `--masquerade-all` are read, unless
`--config` is given: kube-proxy then replaces its whole configuration with the file, so those flags
are ignored (cmd/kube-proxy/app/options.go `Complete`; only logging flags and
`--hostname-override` survive, and none of them matters here). Such a container is kept as a
`Launcher`, with the ConfigMap key mounted at the file when the pod says.
"""

from __future__ import annotations

from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.cluster.component_flags import flag_bool
from kubelint_ports.loading.cluster.network_settings import (
    DEFAULT_DETECT_LOCAL_MODE,
    ConfigObject,
    Flag,
    Launcher,
    NetworkSettings,
    ProxyConfig,
    join_path,
)
from kubelint_ports.vocabulary import ObjectRef

PROXY_FLAGS = ("cluster-cidr", "proxy-mode", "detect-local-mode", "masquerade-all")


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


def read_proxy_flags(settings: NetworkSettings, owner: ConfigObject, ref: ObjectRef, flags: dict[str, Flag],
                     anchor: str, pod_spec: yt.Node, container: yt.Node) -> None:
    if "config" in flags and flags["config"].value:
        # kube-proxy replaces its whole configuration with the file: these flags do nothing.
        ignored = [flags[name] for name in PROXY_FLAGS if name in flags]
        target = config_map_key(flags["config"].value, pod_spec, container)
        settings.launchers.append(Launcher(owner, flags["config"].field_path, ref.namespace, ignored, target))
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
    settings.add_proxy_config(proxy)


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
