"""kubeadm's `ClusterConfiguration` (standalone or embedded in a ConfigMap such as
`kube-system/kubeadm-config`): the Service range (`networking.serviceSubnet`, default
10.96.0.0/12, or kube-apiserver's `extraArgs`), the pod range (`networking.podSubnet`,
kube-controller-manager's `--cluster-cidr`) and the node-port range (kube-apiserver's
`--service-node-port-range`). `extraArgs` is a map in v1beta3 and a list of {name, value} in v1beta4.
"""

from __future__ import annotations

from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.cluster.network_settings import ConfigObject, NetworkSettings, join_path

KUBEADM_DEFAULT_SERVICE_SUBNET = "10.96.0.0/12"


def read_kubeadm(settings: NetworkSettings, root: yt.Node, owner: ConfigObject, prefix: str, path: str) -> None:
    """A `ClusterConfiguration` mapping; `prefix` is its path in the owner's document, `path` names
    its file (a KubeProxyConfiguration of the same file takes its podSubnet: `model.cluster_network`)."""
    path_of = join_path(prefix)
    networking = yt.mapping(yt.get(root, "networking"), "networking")
    api_args = extra_args(root, "apiServer", path_of)
    manager_args = extra_args(root, "controllerManager", path_of)
    effect = "kubeadm rejects the configuration"
    if "service-cluster-ip-range" in api_args:
        value, field_path = api_args["service-cluster-ip-range"]
        settings.cidr_setting(owner, "service", "kube-apiserver --service-cluster-ip-range (kubeadm extraArgs)",
                              value, field_path, "kube-apiserver does not start")
    elif yt.get(networking, "serviceSubnet") is not None:
        settings.cidr_setting(owner, "service", "kubeadm networking.serviceSubnet",
                              yt.as_str(yt.get(networking, "serviceSubnet")), path_of("networking.serviceSubnet"),
                              effect)
    else:
        settings.cidr_setting(owner, "service", "kubeadm's default serviceSubnet", KUBEADM_DEFAULT_SERVICE_SUBNET,
                              path_of("networking") if networking is not None else prefix, effect, defaulted=True)
    pod_subnet = None
    if yt.get(networking, "podSubnet") is not None:
        pod_subnet = settings.cidr_setting(owner, "pod", "kubeadm networking.podSubnet",
                                           yt.as_str(yt.get(networking, "podSubnet")),
                                           path_of("networking.podSubnet"), effect, origin="kubeadm")
    if "cluster-cidr" in manager_args:
        value, field_path = manager_args["cluster-cidr"]
        settings.cidr_setting(owner, "pod", "kube-controller-manager --cluster-cidr (kubeadm extraArgs)", value,
                              field_path, "kube-controller-manager does not start", origin="controller-manager")
    if "service-node-port-range" in api_args:
        value, field_path = api_args["service-node-port-range"]
        settings.node_port_range(owner, value, field_path, "kube-apiserver --service-node-port-range (kubeadm)")
    settings.kubeadm_pod_subnets.setdefault(path, pod_subnet)


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
