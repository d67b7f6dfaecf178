"""Services and probes the API server accepts but that lead nowhere: selectors that match no
workload, target ports no selected container declares or declares for another protocol, and
probe or hook ports named after no port of their container. The EndpointSlice controller
resolves a named targetPort per pod by name AND protocol (FindPort); the kubelet resolves a
probe's named port within its own container (k/k pkg/probe/util.go ResolveContainerPort)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, Related, register
from kubelint_ports.checks.manifest import phrases
from kubelint_ports.model import Cluster, Service, Workload
from kubelint_ports.model.objects import ServicePort
from kubelint_ports.model.selection import port_named, ports_numbered, selection, serving_ports

MAX_RELATED = 10


def selector_text(service: Service) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted(service.selector.items()))


def routed(service: Service) -> bool:
    """Services whose endpoints the control plane derives from a selector."""
    return bool(service.selector) and service.type != "ExternalName"


def workload_list(workloads: list[Workload]) -> str:
    names = [str(w.ref) for w in workloads[:3]]
    if len(workloads) > 3:
        names.append(f"{len(workloads) - 3} more")
    return ", ".join(names)


def target_of(port: ServicePort) -> tuple[int | str | None, str]:
    """The targetPort and the key holding it: an absent targetPort is the port itself."""
    if port.target_port is not None:
        return port.target_port, f"{port.field_path}.targetPort"
    return port.port, f"{port.field_path}.port"


# --- dangling-service -----------------------------------------------------------------------------

@register("dangling-service", params_schema={
    "type": "object",
    "additionalProperties": False,
    "properties": {"strict": {"type": "boolean"}, "selectorless": {"type": "boolean"}},
})
def dangling_service(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    """By default only in a namespace whose workloads are among the inputs (another Service there
    selects one), so linting a file of Services alone stays quiet."""
    chosen = selection(cluster)
    serving_namespaces = {service.ref.namespace for service in cluster.services
                          if routed(service) and chosen.selected(service)}
    for service in cluster.services:
        if service.type == "ExternalName":
            continue
        if not service.selector:
            if params.get("selectorless"):
                yield Hit(service, "spec", phrases.SELECTORLESS_SERVICE)
            continue
        if chosen.selected(service) or made_elsewhere(cluster, service):
            continue
        if not params.get("strict") and service.ref.namespace not in serving_namespaces:
            continue
        namespace = f"namespace '{service.ref.namespace}'" if service.ref.namespace else "the Service's namespace"
        yield Hit(service, "spec.selector", (
            f"selector {selector_text(service)} matches no workload: no pod template in {namespace} among the "
            f"inputs carries these labels, so the Service has no endpoints and connections to it are refused or "
            f"time out. Fix the selector or the pod labels."))


# Pods that no manifest declares: the control plane's static pods and add-ons, which monitoring
# charts select on purpose (kube-prometheus-stack's Services for the scheduler, etcd, kube-proxy).
CLUSTER_COMPONENTS = {
    "component": frozenset(("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "kube-proxy")),
    "k8s-app": frozenset(("kube-dns", "kube-proxy", "kube-controller-manager", "kube-scheduler", "kubelet",
                          "etcd", "coredns", "metrics-server")),
    "tier": frozenset(("control-plane",)),
}


def made_elsewhere(cluster: Cluster, service: Service) -> bool:
    """The selected pods may exist without any input declaring them: a custom resource in the
    namespace whose operator makes pods (Prometheus, Alertmanager, a database cluster), or a
    component of the cluster itself (static pods and add-ons in kube-system)."""
    if cluster.pod_makers.get(service.ref.namespace or ""):
        return True
    if service.ref.namespace == "kube-system":
        return True
    return any(service.selector.get(key) in values for key, values in CLUSTER_COMPONENTS.items())


# --- target ports -----------------------------------------------------------------------------------

def routed_ports(cluster: Cluster) -> Iterator[tuple[Service, ServicePort, list[Workload]]]:
    """Each port of each Service that selects workloads, with those workloads."""
    chosen = selection(cluster)
    for service in cluster.services:
        workloads = chosen.selected(service) if routed(service) else []
        for port in service.ports if workloads else ():
            yield service, port, workloads


@register("target-port-name-not-declared")
def target_port_name_not_declared(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    for service, port, workloads in routed_ports(cluster):
        if isinstance(port.target_port, str):
            missing = [w for w in workloads if port_named(w, port.target_port, port.protocol) is None]
            if missing:
                yield unresolved_name(service, port, workloads, missing)


def unresolved_name(service: Service, port: ServicePort, workloads: list[Workload], missing: list[Workload]) -> Hit:
    name, protocol = port.target_port, port.protocol
    other = next((p for w in missing for p in serving_ports(w) if p.name == name), None)
    if other is not None:
        why = (f"the port named {name!r} in {workload_list(missing)} is {other.protocol}, and a named targetPort "
               f"must match name and protocol")
    else:
        why = f"no container of {workload_list(missing)} declares a port named {name!r}"
    related = tuple(Related(w, w.pod_spec_path, f"pods of {w.ref} (no {name} {protocol} port)")
                    for w in missing[:MAX_RELATED])
    if len(missing) == len(workloads):
        return Hit(service, f"{port.field_path}.targetPort", phrases.target_port_name_nowhere(
            name, protocol, why, port.port), related, variant="none", port=port.port)
    served = len(workloads) - len(missing)
    return Hit(service, f"{port.field_path}.targetPort", phrases.target_port_name_somewhere(
        name, protocol, why, port.port, served), related, variant="some", port=port.port)


@register("target-port-number-not-declared")
def target_port_number_not_declared(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    for service, port, workloads in routed_ports(cluster):
        number, field = target_of(port)
        if isinstance(number, int) and not any(ports_numbered(w, number) for w in workloads):
            what = f"targetPort {number}" if port.target_port is not None else \
                f"port {number} (no targetPort, so container port {number})"
            yield Hit(service, field, phrases.target_port_number_undeclared(what, number, workload_list(workloads)),
                      port=number)


@register("service-protocol-mismatch")
def service_protocol_mismatch(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    for service, port, workloads in routed_ports(cluster):
        number, _ = target_of(port)
        if not isinstance(number, int):
            continue
        protocols = {p.protocol for w in workloads for p in ports_numbered(w, number)}
        if not protocols or port.protocol in protocols:
            continue  # declared nowhere (target-port-number-not-declared's), or for this protocol
        others = sorted(protocols)
        yield Hit(service, f"{port.field_path}.port", phrases.service_protocol_mismatch(
            port.port, port.protocol, number, others, workload_list(workloads)), port=port.port)


# --- probe-port-name-not-declared --------------------------------------------------------------------

@register("probe-port-name-not-declared", params_schema={
    "type": "object",
    "additionalProperties": False,
    "properties": {"numeric": {"type": "boolean"}},
})
def probe_port_name_not_declared(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    for workload in cluster.workloads:
        by_container: dict[str, list] = defaultdict(list)
        for port in workload.declared_ports:
            by_container[port.container].append(port)
        for reference in workload.port_references:
            ports = by_container.get(reference.container, [])
            effect = phrases.probe_effect(reference.source)
            if isinstance(reference.value, str):
                if any(p.name == reference.value for p in ports):
                    continue
                yield Hit(workload, reference.field_path, (
                    f"{reference.source} port {reference.value!r} is not a port of container "
                    f"'{reference.container}': the kubelet resolves a named port only among the container's own "
                    f"ports, so every {reference.source} attempt fails ({effect}). Declare a port named "
                    f"{reference.value!r} on '{reference.container}', or use the number."))
            elif params.get("numeric") and not any(p.container_port == reference.value for p in ports):
                yield Hit(workload, reference.field_path, (
                    f"{reference.source} port {reference.value} is not declared by container "
                    f"'{reference.container}': the kubelet connects anyway, but nothing in the manifest says the "
                    f"container listens there. Declare containerPort {reference.value}."),
                    variant="numeric", port=reference.value)
