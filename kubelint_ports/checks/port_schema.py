"""Declarative policies: a JSON Schema that every container port (or Service port), seen in its
context, must satisfy. Users write these in YAML without any Python (like Polaris checks).

Context of a container port: kind, namespace, name, labels (the pod's), hostNetwork, container,
portName, containerPort, hostPort (the port on the node, also for hostNetwork pods; null when
none), protocol, hostIP. Context of a Service port: kind ("Service"), namespace, name, labels,
type, portName, port, targetPort, nodePort, protocol.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.model import Cluster

PARAMS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["target", "schema", "message"],
    "properties": {
        "target": {"enum": ["container-port", "service-port"]},
        "schema": {"type": "object", "description": "JSON Schema (draft 2020-12) the port context must satisfy."},
        "message": {"type": "string", "minLength": 3, "description": "What is wrong and what to do."},
    },
}


def schema_problem(params: Mapping[str, Any]) -> str | None:
    """A user's schema may refer only to itself: a validator would fetch any other reference."""
    from kubelint_ports.loading import budgets, files

    problem = files.schema_reference_problem(params.get("schema"), budgets.current().max_depth)
    return f"params.schema {problem}" if problem else None


@lru_cache(maxsize=64)
def validator_for(schema_json: str):
    import json

    import jsonschema
    import referencing

    schema = json.loads(schema_json)
    problem = schema_problem({"schema": schema})
    if problem:  # policies are checked when loaded; this keeps the network out even when not
        raise ValueError(problem)
    jsonschema.Draft202012Validator.check_schema(schema)
    # A registry without `retrieve`: an unknown reference is an error, never a download.
    return jsonschema.Draft202012Validator(schema, registry=referencing.Registry())


def container_port_contexts(cluster: Cluster) -> Iterator[tuple[Any, str, dict[str, Any]]]:
    for workload in cluster.workloads:
        for port in workload.container_ports:
            field = f"{port.field_path}.hostPort" if port.host_port and not workload.host_network else \
                f"{port.field_path}.containerPort"
            yield workload, field, {
                "kind": workload.ref.kind, "namespace": workload.ref.namespace, "name": workload.ref.name,
                "labels": workload.pod_labels, "hostNetwork": workload.host_network, "container": port.container,
                "portName": port.name, "containerPort": port.container_port, "hostPort": port.host_port,
                "protocol": port.protocol, "hostIP": port.host_ip,
            }


def service_port_contexts(cluster: Cluster) -> Iterator[tuple[Any, str, dict[str, Any]]]:
    for service in cluster.services:
        labels = service.labels
        for port in service.ports:
            field = f"{port.field_path}.nodePort" if port.node_port else f"{port.field_path}.port"
            yield service, field, {
                "kind": "Service", "namespace": service.ref.namespace, "name": service.ref.name,
                "labels": labels if isinstance(labels, dict) else {}, "type": service.type, "portName": port.name,
                "port": port.port, "targetPort": port.target_port, "nodePort": port.node_port,
                "protocol": port.protocol,
            }


@register("port-schema", params_schema=PARAMS_SCHEMA, check_params=schema_problem)
def port_schema(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    import json

    validator = validator_for(json.dumps(params["schema"], sort_keys=True))
    contexts = container_port_contexts if params["target"] == "container-port" else service_port_contexts
    for subject, field, context in contexts(cluster):
        error = next(iter(sorted(validator.iter_errors(context), key=lambda e: list(map(str, e.path)))), None)
        if error is not None:
            where = ".".join(map(str, error.absolute_path)) or "port"
            value = context.get("hostPort") or context.get("containerPort") or context.get("nodePort") or \
                context.get("port")
            yield Hit(subject, field, f"{params['message'].strip()} ({where}: {error.message})",
                      port=value if isinstance(value, int) else None)
