"""hostPorts on init containers: declared, accepted by the API server, and never mapped."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.checks.manifest import phrases
from kubelint_ports.model import Cluster


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
            yield Hit(workload, f"{port.field_path}.hostPort", phrases.init_container_host_port(
                port.host_port, port.protocol, port.role == "init", port.container), port=port.host_port)
