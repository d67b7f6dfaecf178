"""Which workloads a Service selects, and which container port each of its ports leads to: what
the EndpointSlice controller decides for every pod (kubernetes/kubernetes
staging/src/k8s.io/endpointslice/util `FindPort`; a Service without a selector gets no managed
endpoints at all).

Workloads are indexed by (namespace, label key, value), so finding a Service's workloads costs
the size of its smallest label group, never a walk over every workload of the cluster.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import field

from kubelint_ports.model.objects import Cluster, DeclaredPort, Service, Workload
from kubelint_ports.records import record


@record(slots=True)
class Selection:
    # Tuples, not lists: most label values name one workload, and 17,500 one-item lists cost
    # 0.7 MiB more (10k corpus).
    by_label: dict[tuple[str, str, str], tuple[Workload, ...]] = field(default_factory=dict)
    _selected: dict[int, list[Workload]] = field(default_factory=dict)

    def selected(self, service: Service) -> list[Workload]:
        """The workloads whose pods the Service's selector matches, in input order."""
        key = id(service)
        if key not in self._selected:
            self._selected[key] = self._match(service)
        return self._selected[key]

    def _match(self, service: Service) -> list[Workload]:
        if not service.selector or service.type == "ExternalName":
            return []
        declared = {k: v for k, v in service.selector.items() if k not in CONTROLLER_LABELS}
        if declared:
            groups = [self.by_label.get((service.ref.namespace, k, v), ()) for k, v in sorted(declared.items())]
            candidates = min(groups, key=len)
        else:  # only labels controllers add: any workload of the namespace may carry them
            candidates = [w for group in self.by_label.values() for w in group if w.ref.namespace == service.ref.namespace]
            candidates = list(dict.fromkeys(candidates))
        return [workload for workload in candidates
                if all(workload.pod_labels.get(k) == v for k, v in declared.items())
                and all(carries_controller_label(workload, k, v) for k, v in service.selector.items()
                        if k in CONTROLLER_LABELS)]


# Labels that controllers put on the pods they make, never written in a pod template: a selector
# on them selects that workload's pods (a Service for one StatefulSet replica, say).
CONTROLLER_LABELS = frozenset(("statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index",
                               "controller-revision-hash", "pod-template-hash"))


def carries_controller_label(workload: Workload, key: str, value: str) -> bool:
    """Whether the workload's controller may give one of its pods `key: value`."""
    if workload.pod_labels.get(key) == value:
        return True
    kind = workload.ref.kind
    if key == "statefulset.kubernetes.io/pod-name":  # <name>-<ordinal>
        name, _, ordinal = value.rpartition("-")
        return kind == "StatefulSet" and name == workload.ref.name and ordinal.isdigit()
    if key == "apps.kubernetes.io/pod-index":
        return kind == "StatefulSet" and value.isdigit()
    if key == "pod-template-hash":  # the ReplicaSets a Deployment makes
        return kind in ("Deployment", "ReplicaSet")
    return kind in ("StatefulSet", "DaemonSet")  # controller-revision-hash


def selection(cluster: Cluster) -> Selection:
    """The cluster's selection index, built once per run."""
    if cluster.selection is None:
        workloads = tuple(cluster.workloads)
        by_label = _updated(workloads)
        if by_label is None:
            grouped: dict[tuple[str, str, str], list[Workload]] = defaultdict(list)
            for workload in workloads:
                if workload.helm_hook:
                    continue
                for key, value in workload.pod_labels.items():
                    grouped[(workload.ref.namespace, key, value)].append(workload)
            by_label = {key: tuple(group) for key, group in grouped.items()}
        _last[:] = [workloads, by_label]
        cluster.selection = Selection(by_label)
    return cluster.selection


# The last index built, with its workloads. A long-lived process (the language server) models
# nearly the same workloads run after run: the objects of unchanged files are handed on as they
# were, an edited file's are new. Indexing 10,000 workloads' labels cost 0.02 s of every edit.
_last: list = [(), {}]
MAX_REPLACED = 16  # past it, the index is built afresh


def _updated(workloads: tuple[Workload, ...]) -> dict | None:
    """The last index with the workloads that took the place of others in `workloads` put in
    theirs, when each has the same namespace, pod labels and hook flag as the one it replaces (an
    edit of a port): then every group, and the order of the groups, is what building it afresh
    gives. None when the index has to be built afresh."""
    last_workloads, last_index = _last
    if not last_workloads or len(last_workloads) != len(workloads):
        return None
    replaced: dict[int, Workload] = {}
    for old, new in zip(last_workloads, workloads):
        if old is not new:
            if len(replaced) == MAX_REPLACED or old.helm_hook != new.helm_hook or \
                    old.ref.namespace != new.ref.namespace or old.pod_labels != new.pod_labels or \
                    list(old.pod_labels) != list(new.pod_labels):
                return None
            replaced[id(old)] = new
    if not replaced:
        return last_index
    index = dict(last_index)  # the last one stays the last cluster's, as it was
    for old_id, new in replaced.items():
        if new.helm_hook:
            continue
        for key, value in new.pod_labels.items():
            group = (new.ref.namespace, key, value)
            index[group] = tuple(replaced.get(id(member), member) for member in index[group])
    return index


def has_endpoints(cluster: Cluster, service: Service) -> bool | None:
    """True when a workload among the inputs matches the Service's selector (its pods are the
    endpoints), False when all of them are scaled to zero, None when nothing says (no selector,
    or pods outside the inputs)."""
    if not service.selector:
        return None
    matched = selection(cluster).selected(service)
    if not matched:
        return None
    return any(workload.replicas != 0 for workload in matched)  # all scaled to zero: no endpoints


def serving_ports(workload: Workload) -> list[DeclaredPort]:
    """Ports of the containers that run beside the pod's life: regular containers, then sidecars
    (the order FindPort searches them); plain init containers have exited."""
    ports = workload.declared_ports
    return [p for p in ports if p.role == "container"] + [p for p in ports if p.role == "sidecar"]


def port_named(workload: Workload, name: str, protocol: str) -> DeclaredPort | None:
    """The port a named targetPort resolves to in this workload's pods: same name AND protocol."""
    return next((p for p in serving_ports(workload) if p.name == name and p.protocol == protocol), None)


def ports_numbered(workload: Workload, number: int) -> list[DeclaredPort]:
    return [p for p in serving_ports(workload) if p.container_port == number]
