"""Services and probes the API server accepts but that lead nowhere: selectors that match no
workload, target ports no selected container declares or declares for another protocol, and
probe or hook ports named after no port of their container. The EndpointSlice controller
resolves a named targetPort per pod by name AND protocol (FindPort); the kubelet resolves a
probe's named port within its own container (k/k pkg/probe/util.go ResolveContainerPort)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, Related, register
from kubelint_ports.checks.manifest import network_phrases as phrases
from kubelint_ports.model import Cluster, Service, Workload
from kubelint_ports.model.objects import ServicePort, SilentPort
from kubelint_ports.model.selection import (
    CONTROLLER_LABELS,
    carries_controller_label,
    port_named,
    ports_numbered,
    selection,
    serving_ports,
)

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
        yield dangling(cluster, service)


def dangling(cluster: Cluster, service: Service) -> Hit:
    """Which case of a Service that selects nothing: a note by default, since pods may get labels
    at run time; a warning with evidence of a mistake (the policy's docs state the criteria)."""
    namespace = service.ref.namespace
    where = f"namespace '{namespace}'" if namespace else "the Service's namespace"
    templates = [w for w in cluster.workloads if w.ref.namespace == namespace]
    selector = selector_text(service)
    near = near_miss(service.selector, [w for w in templates if not w.helm_hook])
    if near is not None:
        workload, ours, theirs = near
        return Hit(service, "spec.selector", phrases.dangling_near_miss(selector, str(workload.ref), ours, theirs),
                   (Related(workload, labels_path(workload), f"pod labels of {workload.ref}"),), variant="near-miss")
    written = {key for w in templates for key in w.pod_labels}
    unwritten = sorted(key for key in service.selector if key not in written and key not in CONTROLLER_LABELS)
    rest = {key: value for key, value in service.selector.items() if key not in unwritten}
    labeller = next((w for w in templates if rest and all(carries(w, k, v) for k, v in rest.items())), None)
    if unwritten and labeller is None:
        return Hit(service, "spec.selector", phrases.dangling_unwritten(selector, where, unwritten),
                   variant="unwritten")
    return Hit(service, "spec.selector", phrases.dangling_maybe_at_run_time(
        selector, where, unwritten, str(labeller.ref) if labeller is not None and unwritten else ""))


def labels_path(workload: Workload) -> str:
    """Where a workload's pod template writes its labels."""
    spec = workload.pod_spec_path
    return f"{spec.rpartition('.')[0]}.metadata.labels" if "." in spec else "metadata.labels"


def carries(workload: Workload, key: str, value: str) -> bool:
    """Whether the workload's pods carry `key: value` (written in the template, or put there by
    the workload's controller)."""
    if key in CONTROLLER_LABELS:
        return carries_controller_label(workload, key, value)
    return workload.pod_labels.get(key) == value


def near_miss(selector: Mapping[str, str], workloads: list[Workload]) -> tuple[Workload, str, str] | None:
    """The first workload whose pods one edit of the selector would select, with the selector's
    pair and the pods' one: every other pair of the selector matches, and the one that does not
    either has a close value (`close`) or names, with the same value, a key the pods carry under
    another name. Dropping a key of the selector is no edit here: an extra key is how labels set
    at run time (a database's role, a server's active pod) are selected."""
    for workload in workloads:
        misses = [(key, value) for key, value in selector.items() if not carries(workload, key, value)]
        if len(misses) != 1:
            continue
        key, value = misses[0]
        theirs = their_value(workload, key, value)
        if theirs is not None and close(value, theirs):
            return workload, f"{key}: {value}", f"{key}: {theirs}"
        renamed = sorted(k for k, v in workload.pod_labels.items() if v == value and k not in selector)
        if renamed:
            return workload, f"{key}: {value}", f"{renamed[0]}: {value}"
    return None


def their_value(workload: Workload, key: str, value: str) -> str | None:
    """The value the workload's pods carry for `key`, when they carry it."""
    if key == "statefulset.kubernetes.io/pod-name":  # <StatefulSet name>-<ordinal>
        if workload.ref.kind != "StatefulSet":
            return None
        ordinal = value.rpartition("-")[2]
        return f"{workload.ref.name}-{ordinal if ordinal.isdigit() else 0}"
    return None if key in CONTROLLER_LABELS else workload.pod_labels.get(key)


def close(ours: str, theirs: str) -> bool:
    """Two label values a slip of the keyboard or a leftover suffix apart: 1 to 3 edits (insert,
    delete, substitute, swap two neighbours), fewer than half the longer value's length."""
    distance = edit_distance(ours, theirs)
    return 1 <= distance <= 3 and 2 * distance < max(len(ours), len(theirs))


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance (Levenshtein with swaps of neighbours)."""
    if abs(len(a) - len(b)) > 3:
        return 4  # beyond `close` in any case; label values may be 63 characters
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            row[j] = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


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
    """Each port of each Service that selects workloads, with those workloads: listed once per
    cluster (three rules walk them, over 5,000 Services on the 10k corpus)."""
    key = ("routed_ports", id(cluster.services), len(cluster.services))
    if key not in cluster.derived:
        chosen = selection(cluster)
        cluster.derived[key] = [(service, port, workloads) for service in cluster.services
                                if (workloads := chosen.selected(service) if routed(service) else [])
                                for port in service.ports]
    return iter(cluster.derived[key])


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
    """Silent where a selected pod's own probe connects to the port (the kubelet's probes show
    something listens there); worded after the flag where only a listen flag names it."""
    for service, port, workloads in routed_ports(cluster):
        number, field = target_of(port)
        if not isinstance(number, int) or any(ports_numbered(w, number) for w in workloads):
            continue
        if any(probed(w, number) for w in workloads):
            continue
        what = f"targetPort {number}" if port.target_port is not None else \
            f"port {number} (no targetPort, so container port {number})"
        flagged = next(((w, flag) for w in workloads for flag in listen_flags(w) if flag.port == number), None)
        if flagged is not None:
            workload, flag = flagged
            yield Hit(service, field, phrases.target_port_number_flagged(
                what, number, str(workload.ref), flag.container, flag.source, workload_list(workloads)),
                (Related(workload, flag.field_path, f"{flag.source} of container '{flag.container}'"),), port=number)
            continue
        yield Hit(service, field, phrases.target_port_number_undeclared(what, number, workload_list(workloads)),
                  port=number)


PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def probed(workload: Workload, number: int) -> bool:
    """Whether a probe of the workload's containers connects to port `number` of its pods."""
    return any(reference.value == number and reference.source in PROBES for reference in workload.port_references)


def listen_flags(workload: Workload) -> list[SilentPort]:
    """The ports the listen flags of the workload's running containers name (`--port=8080`,
    `--metrics-bind-address=:8443`), as the model reads them (`object_readers.listening_ports`,
    `Workload.listen_flags`, any pod's)."""
    return list(workload.listen_flags)


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
        # A workload declares a few ports: searched as they are, not indexed by container first
        # (a dict of lists per workload was most of this rule's time on 10,000 workloads).
        ports = workload.declared_ports
        for reference in workload.port_references:
            container = reference.container
            if isinstance(reference.value, str):
                if any(p.name == reference.value and p.container == container for p in ports):
                    continue
                yield Hit(workload, reference.field_path, phrases.probe_port_name_missing(
                    reference.source, reference.value, reference.container))
            elif params.get("numeric") and not any(p.container_port == reference.value and p.container == container
                                                   for p in ports):
                yield Hit(workload, reference.field_path, phrases.probe_port_number_undeclared(
                    reference.source, reference.value, reference.container), variant="numeric", port=reference.value)
