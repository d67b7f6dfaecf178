"""Organisation policies other linters and admission controllers enforce about ports (kube-linter,
kube-score, Polaris, Kyverno, Gatekeeper). They are choices, not mistakes: their policies ship off
by default and `rules:` in the configuration turns them on with the parameters a team wants."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.model import Cluster

PROTOCOLS = ["TCP", "UDP", "SCTP"]


@register("host-network")
def host_network(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    for workload in cluster.workloads:
        if workload.host_network:
            ports = sorted({claim.port for claim in workload.claims})
            listed = f" (declared: {', '.join(map(str, ports))})" if ports else ""
            yield Hit(workload, f"{workload.pod_spec_path}.hostNetwork", (
                f"the pod runs in the node's network namespace (hostNetwork is true): every port it opens is a "
                f"port of the node{listed}, outside NetworkPolicies, and one such pod fits per node and port. "
                f"Use a Service (and hostPort only if you must)."))


RANGES_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["min", "max"],
        "properties": {"min": {"type": "integer", "minimum": 1, "maximum": 65535},
                       "max": {"type": "integer", "minimum": 1, "maximum": 65535}},
    },
}


@register("host-port-not-allowed", params_schema={
    "type": "object",
    "additionalProperties": False,
    "properties": {"allowed": RANGES_SCHEMA},
})
def host_port_not_allowed(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    """Every container kind, as admission sees a Pod: hostNetwork pods' ports, init containers'
    included, are hostPorts there (the API defaults hostPort = containerPort)."""
    allowed = [(r["min"], r["max"]) for r in params.get("allowed", ())]
    permitted = " or ".join(f"{low}-{high}" for low, high in allowed) if allowed else "none"
    for workload in cluster.workloads:
        for port in workload.declared_ports:
            number = port.host_port or (port.container_port if workload.host_network else None)
            if not number or any(low <= number <= high for low, high in allowed):
                continue
            field = f"{port.field_path}.{'hostPort' if port.host_port else 'containerPort'}"
            yield Hit(workload, field, (
                f"host port {number}/{port.protocol} (container '{port.container}') is not allowed here: the "
                f"host ports this cluster permits are {permitted}. Admission policies such as Pod Security "
                f"'baseline' reject the pod; expose it through a Service, or use an allowed port."), port=number)


@register("forbidden-service-type", params_schema={
    "type": "object",
    "additionalProperties": False,
    "properties": {"types": {"type": "array", "items": {"enum": ["ClusterIP", "NodePort", "LoadBalancer",
                                                                  "ExternalName"]}}},
})
def forbidden_service_type(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    forbidden = set(params.get("types", ()))
    for service in cluster.services:
        if service.type in forbidden:
            opens = " and opens a nodePort on every node" if service.type in ("NodePort", "LoadBalancer") else ""
            yield Hit(service, "spec.type", (
                f"type {service.type} is not allowed here: it exposes the Service outside the cluster{opens}, "
                f"where NetworkPolicies do not reach. Use ClusterIP behind an Ingress or Gateway."))


@register("privileged-port", params_schema={
    "type": "object",
    "additionalProperties": False,
    "properties": {"below": {"type": "integer", "minimum": 1, "maximum": 65536}},
})
def privileged_port(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    below = params.get("below", 1024)
    for workload in cluster.workloads:
        for port in workload.declared_ports:
            if port.container_port and port.container_port < below:
                yield Hit(workload, f"{port.field_path}.containerPort", (
                    f"containerPort {port.container_port} (container '{port.container}') is a privileged port: "
                    f"binding below {below} needs root or CAP_NET_BIND_SERVICE unless the runtime lowers "
                    f"net.ipv4.ip_unprivileged_port_start. Listen on {below} or above and let the Service map the "
                    f"public port."), port=port.container_port)


@register("forbidden-container-port", params_schema={
    "type": "object",
    "additionalProperties": False,
    "properties": {"ports": {"type": "array", "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["port", "reason"],
        "properties": {"port": {"type": "integer", "minimum": 1, "maximum": 65535},
                       "protocol": {"enum": PROTOCOLS},
                       "reason": {"type": "string", "minLength": 1}},
    }}},
})
def forbidden_container_port(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    forbidden = {(entry.get("protocol", "TCP"), entry["port"]): entry["reason"] for entry in params.get("ports", ())}
    for workload in cluster.workloads:
        for port in workload.declared_ports:
            reason = forbidden.get((port.protocol, port.container_port))
            if reason:
                yield Hit(workload, f"{port.field_path}.containerPort", (
                    f"containerPort {port.container_port}/{port.protocol} (container '{port.container}') is not "
                    f"allowed here: {reason}. Use another port, or accept it with an annotation and a reason."),
                    port=port.container_port)
