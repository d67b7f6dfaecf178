"""Which nodes a pod can land on, decided the way the Kubernetes scheduler decides it.

Inputs are plain YAML subtrees (dicts, lists, and scalars that are usually strings because
manifests are read untyped). Anything of the wrong type is ignored rather than raised, so a
malformed manifest degrades to "less is known" instead of crashing a lint run.

Sources (kubernetes/kubernetes): component-helpers `scheduling/corev1/nodeaffinity`
(terms, operators, matchFields), `pkg/scheduler/framework/plugins` (tainttoleration,
nodeunschedulable), `pkg/controller/daemon/util` (automatic DaemonSet tolerations) and
`pkg/kubelet/lifecycle/predicate.go` (what the kubelet still checks for pods with nodeName).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import fields
from typing import Any

from kubelint_ports.records import record

HOSTNAME_LABEL = "kubernetes.io/hostname"
NAME_FIELD = "metadata.name"
NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"


class FrozenMap(Mapping[str, str]):
    """A read-only, hashable str -> str mapping, so frozen dataclasses holding labels hash."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, str] | Iterable[tuple[str, str]] = ()):
        self._data = dict(data)

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"


def _freeze_fields(self: Any) -> None:
    # Lets callers pass dicts and lists to the constructors without breaking hashability.
    for spec in fields(self):
        value = getattr(self, spec.name)
        if isinstance(value, Mapping) and not isinstance(value, FrozenMap):
            object.__setattr__(self, spec.name, FrozenMap(value))
        elif isinstance(value, list):
            object.__setattr__(self, spec.name, tuple(value))


@record(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute


@record(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "" tolerates every effect


@record(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()

    __post_init__ = _freeze_fields


@record(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    __post_init__ = _freeze_fields


@record(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str] = FrozenMap()
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    pod_cidrs: tuple[str, ...] = ()
    addresses: tuple[tuple[str, str], ...] = ()  # (type, address)

    __post_init__ = _freeze_fields

    def label(self, key: str) -> str | None:
        return self.labels.get(key)


@record(frozen=True, slots=True)
class Scheduling:
    node_name: str | None = None
    node_selector: Mapping[str, str] = FrozenMap()
    required_terms: tuple[NodeSelectorTerm, ...] | None = None  # None: no required node affinity
    tolerations: tuple[Toleration, ...] = ()

    __post_init__ = _freeze_fields


# Added by the DaemonSet controller to every pod it creates (pkg/controller/daemon/util).
# network-unavailable is only added for hostNetwork pods; it is included unconditionally
# because a linter reading a template would rather over-report a DaemonSet's reach.
DAEMONSET_TOLERATIONS = tuple(
    Toleration(key=f"node.kubernetes.io/{name}", operator="Exists", effect=effect)
    for name, effect in (
        ("not-ready", NO_EXECUTE),
        ("unreachable", NO_EXECUTE),
        ("disk-pressure", NO_SCHEDULE),
        ("memory-pressure", NO_SCHEDULE),
        ("pid-pressure", NO_SCHEDULE),
        ("unschedulable", NO_SCHEDULE),
        ("network-unavailable", NO_SCHEDULE),
    )
)

# The NodeUnschedulable plugin lets a pod onto a cordoned node only if it tolerates this taint.
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)

# Booleans as the Kubernetes YAML decoder (YAML 1.1) reads them.
_YAML_TRUE = frozenset({"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"})
_SCALARS = (str, int, float)
_INT64 = re.compile(r"[+-]?[0-9]+", re.ASCII)


# --- reading untyped YAML -------------------------------------------------------------------

def _mapping(value: Any) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> Sequence:
    return value if isinstance(value, (list, tuple)) else ()


def _text(value: Any) -> str:
    """A scalar as YAML spells it; null (and anything unreadable) becomes "" as in Go's decoder."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, _SCALARS) else ""


def _texts(value: Any) -> tuple[str, ...]:
    return tuple(_text(item) for item in _items(value) if item is None or isinstance(item, _SCALARS))


def _string_map(value: Any) -> FrozenMap:
    return FrozenMap(
        (_text(key), _text(item))
        for key, item in _mapping(value).items()
        if isinstance(key, _SCALARS) and (item is None or isinstance(item, _SCALARS))
    )


def _flag(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value in _YAML_TRUE)


def _requirement(raw: Any) -> Requirement:
    # An unreadable entry becomes an empty requirement, which matches nothing, like the
    # zero value Go would decode; it must not silently widen its term.
    raw = _mapping(raw)
    return Requirement(_text(raw.get("key")), _text(raw.get("operator")), _texts(raw.get("values")))


def _term(raw: Any) -> NodeSelectorTerm:
    raw = _mapping(raw)
    return NodeSelectorTerm(
        tuple(_requirement(r) for r in _items(raw.get("matchExpressions"))),
        tuple(_requirement(r) for r in _items(raw.get("matchFields"))),
    )


def node_from_object(obj: Mapping) -> Node:
    """A Node from one item of `kubectl get nodes -o yaml`."""
    metadata, spec, status = (_mapping(_mapping(obj).get(part)) for part in ("metadata", "spec", "status"))
    pod_cidrs = [cidr for cidr in _texts(spec.get("podCIDRs")) if cidr]
    legacy_cidr = _text(spec.get("podCIDR"))
    if legacy_cidr and legacy_cidr not in pod_cidrs:
        pod_cidrs.insert(0, legacy_cidr)
    return Node(
        name=_text(metadata.get("name")),
        labels=_string_map(metadata.get("labels")),
        taints=tuple(
            Taint(_text(t.get("key")), _text(t.get("value")), _text(t.get("effect")))
            for t in _items(spec.get("taints"))
            if isinstance(t, Mapping)
        ),
        unschedulable=_flag(spec.get("unschedulable")),
        pod_cidrs=tuple(pod_cidrs),
        addresses=tuple(
            (_text(a.get("type")), _text(a.get("address")))
            for a in _items(status.get("addresses"))
            if isinstance(a, Mapping) and _text(a.get("address"))
        ),
    )


def scheduling_from_pod_spec(pod_spec: Mapping) -> Scheduling:
    """The placement constraints of a pod spec (or a workload's pod template spec)."""
    pod_spec = _mapping(pod_spec)
    node_affinity = _mapping(_mapping(pod_spec.get("affinity")).get("nodeAffinity"))
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    return Scheduling(
        node_name=_text(pod_spec.get("nodeName")) or None,
        node_selector=_string_map(pod_spec.get("nodeSelector")),
        # A present selector with no terms matches no node, unlike an absent one.
        required_terms=(
            tuple(_term(t) for t in _items(required.get("nodeSelectorTerms")))
            if isinstance(required, Mapping) else None
        ),
        tolerations=tuple(
            # Dropped rather than zero-valued: an empty toleration would tolerate every taint
            # with an empty value.
            Toleration(
                key=_text(t.get("key")),
                operator=_text(t.get("operator")) or "Equal",
                value=_text(t.get("value")),
                effect=_text(t.get("effect")),
            )
            for t in _items(pod_spec.get("tolerations"))
            if isinstance(t, Mapping)
        ),
    )


# --- matching -------------------------------------------------------------------------------

def _tolerates_one(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(_tolerates_one(toleration, taint) for toleration in tolerations)


def _tolerates_every_taint_of(wide: Toleration, narrow: Toleration, effect: str) -> bool:
    """Whether `wide` tolerates every taint with `effect` that `narrow` tolerates."""
    if wide.effect and wide.effect != effect:
        return False
    if wide.key and wide.key != narrow.key:  # a narrow toleration without a key takes every key
        return False
    if wide.operator == "Exists":
        return True
    return wide.operator in ("", "Equal") and narrow.operator in ("", "Equal") and wide.value == narrow.value


def tolerations_within(tolerations: Iterable[Toleration], within: Sequence[Toleration]) -> bool:
    """Whether `within` tolerates every taint that keeps pods off nodes (NoSchedule, NoExecute)
    and that `tolerations` tolerate: then no node is open to a pod with `tolerations` alone.

    Tolerations only ever widen where a pod may go, so this compares reach, not equality: an
    `Exists` toleration without a key takes in the control-plane toleration. PreferNoSchedule
    taints keep no pod off a node, so tolerating them opens nothing."""
    for toleration in tolerations:
        if toleration.operator not in ("", "Equal", "Exists"):
            continue  # tolerates no taint
        for effect in (NO_SCHEDULE, NO_EXECUTE):
            if toleration.effect and toleration.effect != effect:
                continue
            if not any(_tolerates_every_taint_of(wide, toleration, effect) for wide in within):
                return False
    return True


def _int64(text: str | None) -> int | None:
    # strconv.ParseInt(s, 10, 64): no spaces or underscores, which Python's int() would accept.
    if text is None or len(text) > 20 or not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def _label_requirement_holds(requirement: Requirement, labels: Mapping[str, str]) -> bool:
    values, present, label = requirement.values, requirement.key in labels, labels.get(requirement.key)
    # Shapes the API would reject (In without values, Exists with values...) fail the term,
    # as the scheduler's parse error does.
    match requirement.operator:
        case "In":
            return bool(values) and present and label in values
        case "NotIn":
            return bool(values) and (not present or label not in values)
        case "Exists":
            return not values and present
        case "DoesNotExist":
            return not values and not present
        case "Gt" | "Lt" if len(values) == 1:
            label_number, bound = _int64(label), _int64(values[0])
            if label_number is None or bound is None:
                return False
            return label_number > bound if requirement.operator == "Gt" else label_number < bound
    return False


def _field_requirement_holds(requirement: Requirement, node: Node) -> bool:
    if requirement.key != NAME_FIELD or len(requirement.values) != 1:
        return False
    if requirement.operator == "In":
        return node.name == requirement.values[0]
    if requirement.operator == "NotIn":
        return node.name != requirement.values[0]
    return False


def matches_term(term: NodeSelectorTerm, node: Node) -> bool:
    """All requirements of the term hold; an empty term matches no node."""
    if not term.match_expressions and not term.match_fields:
        return False
    return all(_label_requirement_holds(r, node.labels) for r in term.match_expressions) and all(
        _field_requirement_holds(r, node) for r in term.match_fields
    )


def _selects(scheduling: Scheduling, node: Node) -> bool:
    if any(node.labels.get(key) != value for key, value in scheduling.node_selector.items()):
        return False
    terms = scheduling.required_terms
    return terms is None or any(matches_term(term, node) for term in terms)


def eligible(scheduling: Scheduling, node: Node, *, daemonset: bool = False) -> bool:
    """Whether a pod with these constraints can run on `node`.

    Scheduled pods need nodeSelector and required node affinity to match, every NoSchedule and
    NoExecute taint tolerated, and the node not cordoned unless the pod tolerates the
    unschedulable taint (DaemonSet pods always do, through their automatic tolerations).

    A pod with `nodeName` bypasses the scheduler, so cordons and NoSchedule taints do not stop
    it; but the kubelet's admission check still rejects it when nodeSelector or node affinity
    do not match or a NoExecute taint is not tolerated, so those still apply.
    """
    tolerations = scheduling.tolerations + (DAEMONSET_TOLERATIONS if daemonset else ())
    if scheduling.node_name:
        if node.name != scheduling.node_name:
            return False
        blocking_effects = {NO_EXECUTE}
    else:
        if node.unschedulable and not tolerates(tolerations, UNSCHEDULABLE_TAINT):
            return False
        blocking_effects = {NO_SCHEDULE, NO_EXECUTE}
    if not _selects(scheduling, node):
        return False
    return all(taint.effect not in blocking_effects or tolerates(tolerations, taint) for taint in node.taints)


def eligible_nodes(scheduling: Scheduling, nodes: Sequence[Node], *, daemonset: bool = False) -> list[Node]:
    return [node for node in nodes if eligible(scheduling, node, daemonset=daemonset)]


# --- reasoning without an inventory ---------------------------------------------------------

# Well-known labels with the value nearly every node has: a selector on them keeps a pod off almost
# no node, so without an inventory it proves nothing about where a DaemonSet does not run
# (node-exporter's `kubernetes.io/os: linux` DaemonSet still runs beside a pod without a selector).
# Other well-known labels do separate pools: kubernetes.io/hostname pins a node, and zone, region,
# instance-type and node-role labels differ between nodes. In a mixed-architecture or Windows
# cluster, pass --nodes: the inventory decides then.
UBIQUITOUS_LABELS = {
    "kubernetes.io/os": frozenset(("linux",)),
    "beta.kubernetes.io/os": frozenset(("linux",)),
    "kubernetes.io/arch": frozenset(("amd64", "arm64")),
    "beta.kubernetes.io/arch": frozenset(("amd64", "arm64")),
}


def constraining(selector: Mapping[str, str]) -> dict[str, str]:
    """The part of a nodeSelector that keeps pods off some nodes (ubiquitous labels dropped)."""
    return {key: value for key, value in selector.items() if value not in UBIQUITOUS_LABELS.get(key, ())}


def _excludes_only(term: NodeSelectorTerm) -> bool:
    """A term that only keeps pods off nodes carrying some label (`NotIn`, `DoesNotExist`).

    Such a term matches every node without those labels: node-exporter's chart excludes Fargate
    and virtual-kubelet nodes this way, and still runs on every ordinary node."""
    return (bool(term.match_expressions) and not term.match_fields
            and all(r.operator in ("NotIn", "DoesNotExist") for r in term.match_expressions))


def _excluded_keys(scheduling: Scheduling) -> frozenset[str] | None:
    """Without an inventory: the label keys that keep the pod off some nodes when its required
    node affinity only excludes labelled nodes (one term must be exclusion-only), an empty set
    when it has no required affinity, and None when the affinity selects nodes positively."""
    if scheduling.required_terms is None:
        return frozenset()
    excluding = [term for term in scheduling.required_terms if _excludes_only(term)]
    if not excluding:
        return None
    # One exclusion-only term suffices for a node to match; the one excluding the fewest keys wins.
    return min((frozenset(r.key for r in term.match_expressions) for term in excluding),
               key=lambda keys: (len(keys), sorted(keys)))


def _mentioned_keys(scheduling: Scheduling) -> set[str]:
    keys = set(scheduling.node_selector)
    for term in scheduling.required_terms or ():
        keys.update(r.key for r in term.match_expressions)
    return keys


def runs_on_every_ordinary_node(scheduling: Scheduling, other: Scheduling | None = None) -> bool:
    """Without an inventory: nothing in `scheduling`'s node affinity keeps it off a node that
    `other` may use (or, without `other`, off a node that carries no special label).

    True when the pod has no required node affinity, or only terms that exclude labelled nodes
    whose labels `other` does not ask for (so `other` may run on a node without them)."""
    keys = _excluded_keys(scheduling)
    if keys is None:
        return False
    return not keys or other is None or not (keys & _mentioned_keys(other))


def _term_pin(term: NodeSelectorTerm) -> str | None:
    names = {r.values[0] for r in term.match_expressions
             if r.key == HOSTNAME_LABEL and r.operator == "In" and len(r.values) == 1}
    names |= {r.values[0] for r in term.match_fields
              if r.key == NAME_FIELD and r.operator == "In" and len(r.values) == 1}
    return names.pop() if len(names) == 1 else None


def _pins(scheduling: Scheduling) -> list[str]:
    """Every node name the pod is pinned to, strongest first.

    Treats the kubernetes.io/hostname label as the node name. That holds on kubeadm, k3s and
    most clouds, but not everywhere (some AWS setups), so callers should not be stricter than a
    warning when the only evidence is a hostname label.
    """
    term_pins = {_term_pin(term) for term in scheduling.required_terms or ()}
    term_pin = term_pins.pop() if len(term_pins) == 1 else None
    candidates = (scheduling.node_name, scheduling.node_selector.get(HOSTNAME_LABEL), term_pin)
    return [name for name in candidates if name]


def pinned_node(scheduling: Scheduling) -> str | None:
    """The one node the pod is provably limited to, or None when that needs an inventory."""
    pins = _pins(scheduling)
    return pins[0] if pins else None


def may_share_node(a: Scheduling, b: Scheduling) -> bool:
    """False only when no node can run both pods.

    Without an inventory any node may exist, so this asks whether one node's name and labels can
    satisfy both pods' nodeName, nodeSelector and one required node affinity term of each. Taints
    and tolerations play no part: a toleration never keeps a pod off a node, and an untainted node
    runs every pod its name and labels let on (a taint only ever removes nodes, so no tainted node
    lets two pods share where no untainted one does). Like `_pins`, it takes the
    kubernetes.io/hostname label for the node name, present on every node."""
    own_a, own_b = _node_requirements(a), _node_requirements(b)
    return any(_satisfiable((*own_a, *own_b, *term_a, *term_b))
               for term_a in _term_choices(a) for term_b in _term_choices(b))


_NEVER = Requirement("", "In")  # a requirement no node meets (In without values)


def _node_requirements(scheduling: Scheduling) -> tuple[Requirement, ...]:
    """nodeName and nodeSelector as label requirements (the node name as its hostname label)."""
    name = (Requirement(HOSTNAME_LABEL, "In", (scheduling.node_name,)),) if scheduling.node_name else ()
    return (Requirement(HOSTNAME_LABEL, "Exists"), *name,
            *(Requirement(key, "In", (value,)) for key, value in scheduling.node_selector.items()))


def _term_choices(scheduling: Scheduling) -> list[tuple[Requirement, ...]]:
    """Each required node affinity term a node may match, as label requirements (one choice with
    none when the pod has no required affinity; none at all when no term can match)."""
    if scheduling.required_terms is None:
        return [()]
    choices = []
    for term in scheduling.required_terms:
        if not term.match_expressions and not term.match_fields:
            continue  # an empty term matches no node
        fields_ = tuple(
            Requirement(HOSTNAME_LABEL, r.operator, r.values)
            if r.key == NAME_FIELD and r.operator in ("In", "NotIn") and len(r.values) == 1 else _NEVER
            for r in term.match_fields)
        choices.append((*term.match_expressions, *fields_))
    return choices


def _satisfiable(requirements: Iterable[Requirement]) -> bool:
    """Whether some node's labels meet every requirement (the semantics of
    `_label_requirement_holds`). Keys are independent, so each is decided alone."""
    by_key: dict[str, list[Requirement]] = {}
    for requirement in requirements:
        by_key.setdefault(requirement.key, []).append(requirement)
    return all(_key_satisfiable(group) for group in by_key.values())


def _key_satisfiable(requirements: list[Requirement]) -> bool:
    allowed: set[str] | None = None
    forbidden: set[str] = set()
    present = absent = False
    low: int | None = None
    high: int | None = None
    for requirement in requirements:
        operator, values = requirement.operator, requirement.values
        if operator == "In" and values:
            allowed = set(values) if allowed is None else allowed & set(values)
            present = True
        elif operator == "NotIn" and values:
            forbidden.update(values)
        elif operator == "Exists" and not values:
            present = True
        elif operator == "DoesNotExist" and not values:
            absent = True
        elif operator in ("Gt", "Lt") and len(values) == 1 and _int64(values[0]) is not None:
            bound = _int64(values[0])
            if operator == "Gt":
                low = bound if low is None else max(low, bound)
            else:
                high = bound if high is None else min(high, bound)
            present = True
        else:
            return False  # a shape the API rejects: its term matches no node
    if absent:
        return not present
    if allowed is not None:
        return any(value not in forbidden and _within(value, low, high) for value in allowed)
    if low is not None or high is not None:
        # Some int64 strictly between the bounds (a number has several spellings, "7" and "+7",
        # so a NotIn list never rules one out).
        return (2**63 if high is None else high) - (-(2**63) - 1 if low is None else low) >= 2
    return True


def _within(value: str, low: int | None, high: int | None) -> bool:
    if low is None and high is None:
        return True
    number = _int64(value)
    return number is not None and (low is None or number > low) and (high is None or number < high)
