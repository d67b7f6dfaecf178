"""Port names, duplicates and missing ports the API server rejects, as kubernetes/kubernetes
pkg/apis/core/validation/validation.go decides them (validateContainerPorts,
AccumulateUniqueHostPorts, validateServicePort, ValidateService, ValidatePortNumOrName).
Number fields (range, type, a port entry without its number) are invalid-port's."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from typing import Any

from kubelint_ports.checks import Hit, Related, register
from kubelint_ports.checks.manifest.phrases import told
from kubelint_ports.model import Cluster, Service, Workload
from kubelint_ports.model.objects import DeclaredPort

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_PORT_NAME_CHARS = re.compile(r"[-a-z0-9]+")


def name_problems(name: str, longest: int, rules: tuple[tuple[Callable[[str], bool], str], ...]) -> tuple[str, ...]:
    """What is wrong with a name, one text per rule broken: its length, then `rules` (a test that
    holds when the name breaks the rule, and what the rule says)."""
    too_long = (f"is {len(name)} characters long (at most {longest})",) if len(name) > longest else ()
    return too_long + tuple(text for broken, text in rules if broken(name))


# apimachinery's IsValidPortName: an IANA_SVC_NAME (RFC 6335 section 5.1), at most 15 characters
PORT_NAME_RULES = (
    (lambda name: not _PORT_NAME_CHARS.fullmatch(name), "may hold only lowercase letters, digits and '-'"),
    (lambda name: not re.search(r"[a-z]", name), "needs at least one letter"),
    (lambda name: "--" in name, "must not hold '--'"),
    (lambda name: name.startswith("-") or name.endswith("-"), "must not begin or end with '-'"),
)
# apimachinery's IsDNS1123Label, at most 63 characters: what a Service port name must be
DNS_LABEL_RULES = (
    (lambda name: not _DNS_LABEL.fullmatch(name),
     "must be lowercase letters, digits and '-', starting and ending with a letter or digit"),
)


@lru_cache(maxsize=4096)  # the same few names (http, metrics) come back in every workload
def port_name_problems(name: str) -> tuple[str, ...]:
    return name_problems(name, 15, PORT_NAME_RULES)


@lru_cache(maxsize=4096)
def dns_label_problems(name: str) -> tuple[str, ...]:
    return name_problems(name, 63, DNS_LABEL_RULES)


def join(problems: tuple[str, ...]) -> str:
    return ", ".join(problems[:-1]) + (" and " if len(problems) > 1 else "") + problems[-1]


# --- invalid-port-name -----------------------------------------------------------------------------

@register("invalid-port-name")
def invalid_port_name(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    for workload in cluster.workloads:
        yield from container_port_names(workload)
        for reference in workload.port_references:
            if isinstance(reference.value, str) and (problems := port_name_problems(reference.value)):
                head = f"{reference.source} port {reference.value!r} is not a valid port name"
                yield Hit(workload, reference.field_path, told(
                    f"{head} (container '{reference.container}')",
                    f"it {join(problems)}, so the API server rejects the pod",
                    "Use the name of a port the container declares, or its number.",
                    f"{head}: it {join(problems)}. The API server rejects the pod (container "
                    f"'{reference.container}'); use the name of a port the container declares, or its number.",
                    reference.container))
    for service in cluster.services:
        yield from service_port_names(service)


def container_port_names(workload: Workload) -> Iterator[Hit]:
    for port in workload.declared_ports:
        if port.name and (problems := port_name_problems(port.name)):
            head = f"port name {port.name!r} (container '{port.container}') is not an IANA service name"
            yield Hit(workload, f"{port.field_path}.name", told(
                head, f"it {join(problems)}, so the API server rejects the pod",
                "Rename it, and the Services, probes and NetworkPolicies that refer to it.",
                f"{head}: it {join(problems)}. The API server rejects the pod; rename it, and the Services, probes "
                f"and NetworkPolicies that refer to it.", port.container, port.name), port=port.container_port)


def service_port_names(service: Service) -> Iterator[Hit]:
    several = len(service.ports) > 1
    for port in service.ports:
        if port.name and (problems := dns_label_problems(port.name)):
            head = f"Service port name {port.name!r} is not a DNS label"
            yield Hit(service, f"{port.field_path}.name", told(
                head, f"it {join(problems)}, so the API server rejects the Service",
                "Rename it (clients that look up SRV records use the name).",
                f"{head}: it {join(problems)}. The API server rejects the Service; rename it (clients that look up SRV "
                f"records use the name).", port.name), port=port.port)
        elif not port.name and several:
            head = f"Service port {port.port} has no name, but the Service has {len(service.ports)} ports"
            effect = "the API server requires a name on each port of a multi-port Service and rejects it"
            yield Hit(service, port.field_path, told(
                head, effect, "Add `name:` (a DNS label such as http or metrics).",
                f"{head}: {effect}. Add `name:` (a DNS label such as http or metrics)."), port=port.port)
        if isinstance(port.target_port, str) and (problems := port_name_problems(port.target_port)):
            head = f"targetPort {port.target_port!r} is not a valid port name"
            yield Hit(service, f"{port.field_path}.targetPort", told(
                head, f"it {join(problems)}, so the API server rejects the Service",
                "Use the name a container port declares, or its number.",
                f"{head}: it {join(problems)}. The API server rejects the Service; use the name a container port "
                f"declares, or its number.", port.target_port), port=port.port)


# --- duplicate-port ----------------------------------------------------------------------------------

@register("duplicate-port")
def duplicate_port(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    for workload in cluster.workloads:
        yield from duplicate_names_in_containers(workload)
        yield from duplicate_host_ports(workload)
    for service in cluster.services:
        yield from duplicate_service_ports(service)


def duplicate_names_in_containers(workload: Workload) -> Iterator[Hit]:
    """Port names must be unique within one container's `ports` (validateContainerPorts)."""
    first: dict[tuple[str, str], DeclaredPort] = {}
    for port in workload.declared_ports:
        if not port.name or port_name_problems(port.name):
            continue
        key = (port.field_path.rpartition(".ports[")[0], port.name)
        if (earlier := first.setdefault(key, port)) is not port:
            head = f"port name {port.name!r} is declared twice in container '{port.container}'"
            effect = "the API server rejects the pod, and a Service or probe naming it could not tell the two apart"
            yield Hit(workload, f"{port.field_path}.name", told(
                head, effect, "Rename one of them.", f"{head}: {effect}. Rename one.", port.container),
                (Related(workload, f"{earlier.field_path}.name", f"port name {port.name!r} first declared here"),),
                port=port.container_port)


def host_port_key(workload: Workload, port: DeclaredPort) -> int | None:
    """The hostPort as the API server validates the Pod: on hostNetwork pods it defaults to the
    containerPort (k/k pkg/apis/core/v1/defaults.go), so Pods made from a template collide too."""
    if port.host_port:
        return port.host_port
    return port.container_port if workload.host_network else None


def duplicate_host_ports(workload: Workload) -> Iterator[Hit]:
    """(protocol, hostIP as written, hostPort) must be unique across the regular containers, and
    within each init container (init containers are checked one by one: AccumulateUniqueHostPorts)."""
    first: dict[tuple[str, str, str, int], DeclaredPort] = {}
    for port in workload.declared_ports:
        number = host_port_key(workload, port)
        if number is None:
            continue
        scope = "pod" if port.role == "container" else port.field_path.rpartition(".ports[")[0]
        key = (scope, port.protocol, port.host_ip, number)
        earlier = first.setdefault(key, port)
        if earlier is port:
            continue
        on_ip = f" on hostIP {port.host_ip}" if port.host_ip else ""
        where = f"container '{port.container}'" + (
            f" and container '{earlier.container}'" if earlier.container != port.container else "")
        if port.host_port:
            field, outcome = f"{port.field_path}.hostPort", "the API server rejects the pod"
        else:
            field = f"{port.field_path}.containerPort"
            rejected = "the pod" if workload.ref.kind == "Pod" else f"every Pod the {workload.ref.kind} creates"
            outcome = (f"on a hostNetwork pod the API sets hostPort = containerPort, so the API server rejects "
                       f"{rejected}")
        head = f"hostPort {number}/{port.protocol}{on_ip} is declared twice in one pod ({where})"
        yield Hit(workload, field, told(
            head, outcome, "Declare it once: the pod's containers share one network namespace.",
            f"{head}: {outcome}. Declare it once; containers of a pod share its network namespace, so one "
            f"declaration covers them all.", port.container, earlier.container),
            (Related(workload, f"{earlier.field_path}.{'hostPort' if earlier.host_port else 'containerPort'}",
                     f"hostPort {number}/{port.protocol} first declared here"),), port=number)


def duplicate_service_ports(service: Service) -> Iterator[Hit]:
    """Port names and (port, protocol) pairs must be unique in a Service (ValidateService); a
    duplicate (nodePort, protocol) is node-port-collision's."""
    names: dict[str, Any] = {}
    pairs: dict[tuple[int, str], Any] = {}
    for port in service.ports:
        if port.name and not dns_label_problems(port.name):
            if (earlier := names.setdefault(port.name, port)) is not port:
                head = f"Service port name {port.name!r} is used twice"
                yield Hit(service, f"{port.field_path}.name", told(
                    head, "the API server rejects the Service", "Give each port its own name.",
                    f"{head}: the API server rejects the Service. Give each port its own name.", port.name),
                    (Related(service, f"{earlier.field_path}.name", f"port name {port.name!r} first used here"),),
                    port=port.port)
        if port.port is None:
            continue
        if (earlier := pairs.setdefault((port.port, port.protocol), port)) is not port:
            head = f"port {port.port}/{port.protocol} is declared twice in this Service"
            remedy = "Merge the two entries, or use another port (TCP and UDP of one port may coexist)."
            yield Hit(service, f"{port.field_path}.port", told(
                head, "the API server rejects the Service", remedy,
                f"{head}: the API server rejects it. {remedy}"),
                (Related(service, f"{earlier.field_path}.port",
                         f"port {port.port}/{port.protocol} first declared here"),),
                port=port.port)


# --- service-without-ports -----------------------------------------------------------------------------

@register("service-without-ports")
def service_without_ports(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    """ValidateService: `spec.ports` is required, except on a headless Service (clusterIP None)
    and an ExternalName one, which answer by DNS alone."""
    for service in cluster.services:
        if not service.ports and not service.is_headless and service.type != "ExternalName":
            fix = "e.g. `ports: [{name: http, port: 80, targetPort: 8080}]`"
            if service.type == "ClusterIP":  # a NodePort or LoadBalancer Service cannot be headless
                fix += ", or make it headless (`clusterIP: None`) if it only gives its pods DNS names"
            head = f"Service {service.ref.name} has no ports"
            effect = (f"the API server rejects a {service.type} Service without `spec.ports` (spec.ports: Required "
                      f"value)")
            short_fix = "Add the ports clients connect to" + (
                ", or make it headless (`clusterIP: None`)" if service.type == "ClusterIP" else
                " (e.g. `[{name: http, port: 80, targetPort: 8080}]`)")
            yield Hit(service, "spec.ports", told(
                head, effect, short_fix, f"{head}: {effect}. Add the ports clients connect to, {fix}.",
                service.ref.name))
