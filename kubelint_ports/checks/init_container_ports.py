"""hostPorts on init containers: declared, accepted by the API server, and never mapped."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.model import Cluster
from kubelint_ports.model.datapath import phrases_rules


@register("host-port-in-init-container")
def host_port_in_init_container(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    """The kubelet builds the pod sandbox's port mappings from `spec.containers` only
    (k/k pkg/kubelet/kuberuntime/kuberuntime_sandbox.go), so no init container's hostPort reaches
    the CNI portmap plugin. The scheduler ignores a plain init container's hostPort but reserves a
    sidecar's (pkg/scheduler/util GetHostPorts); Pod Security "baseline" forbids both
    (pod-security-admission policy/check_hostPorts.go)."""
    for workload in cluster.workloads:
        if workload.host_network:
            continue  # no portmap there: the process binds the node's port itself
        for port in workload.declared_ports:
            if port.role == "container" or not port.host_port:
                continue
            if port.role == "init":
                kind = "plain init container"
                scheduler = ("the scheduler does not count it either, so nothing on the node is reserved or "
                             "forwarded")
            else:
                kind = "sidecar (init container, restartPolicy Always)"
                scheduler = ("yet the scheduler reserves the port, so the pod blocks it on its node while no "
                             "traffic arrives")
            yield Hit(workload, f"{port.field_path}.hostPort", phrases_rules.init_container_host_port(
                port.host_port, port.protocol, kind, port.container, scheduler), port=port.host_port)
