"""Tolerations only widen where a pod may go (issue 34), and the placement model's "may these two
pods share a node" answers, checked against a brute-force placement written here from the
Kubernetes scheduling rules (not from kubelint_ports.model.placement).

The criterion the no-inventory answer is held to, derived from the issue:

    Without an inventory, `may_share_node(a, b)` is True exactly when some inventory has a node
    that runs both pods.

"Never narrower than what some inventory allows" makes it True whenever some inventory has such a
node. "Never wider than what every cluster with an untainted node gives" makes it False whenever no
inventory has one. The two bounds meet: a taint or a cordon only ever removes a node from a pod's
reach (tolerations only widen it), so a node that runs both pods stays one with its taints and
cordon dropped; "some inventory lets them share" is therefore the same as "some untainted,
uncordoned node lets them share", and only names and labels decide that. Tolerations play no part.

The one assumption, the model's own (placement._pins): a node's kubernetes.io/hostname label is
its name, so every generated node carries it.

Checked by brute force:
- exactness without an inventory, against an exhaustive universe of nodes: every combination of
  the label values the generated pods can tell apart (absent, each mentioned value, one value
  nobody mentions) for every key, and every node name (each mentioned one and one more);
- with an inventory, `Allocation.may_share_node` equals the brute force on random inventories
  (labels, NoSchedule/NoExecute/PreferNoSchedule taints, cordons, DaemonSets and other pods), and
  whenever a random inventory lets two pods share a node, the no-inventory answer says they may;
- KP301 without an inventory (`allocation.covers`): a DaemonSet covers another DaemonSet whatever
  either tolerates, and covers another workload exactly when no node is open to that workload
  alone, checked against every single-taint node (enough: a node with several taints that the
  other workload tolerates and the DaemonSet does not has one such taint, alone on a node).
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from kubelint_ports.model.allocation import Allocation, covers
from kubelint_ports.model.objects import Cluster
from kubelint_ports.model.placement import (
    Node,
    Taint,
    Toleration,
    may_share_node,
    scheduling_from_pod_spec,
    tolerations_within,
)

HERE = Path(__file__).parent / "placement"
HOSTNAME = "kubernetes.io/hostname"
KEYS = ("zone", "disk", "gpu")
VALUES = ("a", "b", "c")
NAMES = ("n1", "n2", "n3")
UNMENTIONED_VALUE, UNMENTIONED_NAME = "zz", "n-other"
EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")
TAINT_KEYS = ("dedicated", "node-role.kubernetes.io/control-plane", "gpu", "node.kubernetes.io/unschedulable",
              "node.kubernetes.io/not-ready")
TAINT_VALUES = ("", "x", "y")
SEED = 34
PAIRS = 400
INVENTORIES_PER_PAIR = 3
TOLERATION_PAIRS = 600

# pkg/controller/daemon/util: what the DaemonSet controller adds to every pod it makes.
DAEMONSET_AUTO_TOLERATIONS = [
    {"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": effect}
    for key, effect in (("not-ready", "NoExecute"), ("unreachable", "NoExecute"), ("disk-pressure", "NoSchedule"),
                        ("memory-pressure", "NoSchedule"), ("pid-pressure", "NoSchedule"),
                        ("unschedulable", "NoSchedule"), ("network-unavailable", "NoSchedule"))
]


# --- the brute force: Kubernetes' rules, on plain dicts --------------------------------------

def brute_tolerates(toleration: dict, taint: dict) -> bool:
    # k8s.io/api core/v1 Toleration.ToleratesTaint
    if toleration.get("effect", "") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("key", "") and toleration["key"] != taint["key"]:
        return False
    operator = toleration.get("operator", "Equal")
    if operator == "Exists":
        return True
    return operator == "Equal" and toleration.get("value", "") == taint.get("value", "")


def brute_requirement(requirement: dict, labels: dict) -> bool:
    key, operator, values = requirement["key"], requirement["operator"], requirement.get("values", [])
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    return key not in labels  # DoesNotExist


def brute_term(term: dict, node: dict) -> bool:
    expressions, fields = term.get("matchExpressions", []), term.get("matchFields", [])
    if not expressions and not fields:
        return False  # an empty term matches no node
    return (all(brute_requirement(r, node["labels"]) for r in expressions)
            and all(brute_requirement(r, {"metadata.name": node["name"]}) for r in fields))


def brute_fits(spec: dict, node: dict, daemonset: bool) -> bool:
    """The scheduler's filters (NodeName, NodeUnschedulable, NodeAffinity, TaintToleration), and for
    a pod with nodeName, which skips the scheduler, what the kubelet admits (no NoExecute taint it
    does not tolerate, nodeSelector and affinity still matching)."""
    tolerations = spec.get("tolerations", []) + (DAEMONSET_AUTO_TOLERATIONS if daemonset else [])
    if "nodeName" in spec:
        if node["name"] != spec["nodeName"]:
            return False
        repelling = {"NoExecute"}
    else:
        cordon = {"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}
        if node["unschedulable"] and not any(brute_tolerates(t, cordon) for t in tolerations):
            return False
        repelling = {"NoSchedule", "NoExecute"}
    if any(node["labels"].get(key) != value for key, value in spec.get("nodeSelector", {}).items()):
        return False
    required = spec.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None and not any(brute_term(term, node) for term in required["nodeSelectorTerms"]):
        return False
    return all(taint["effect"] not in repelling or any(brute_tolerates(t, taint) for t in tolerations)
               for taint in node["taints"])


def as_node(node: dict) -> Node:
    return Node(node["name"], labels=node["labels"],
                taints=tuple(Taint(t["key"], t["value"], t["effect"]) for t in node["taints"]),
                unschedulable=node["unschedulable"])


# --- generators ------------------------------------------------------------------------------

def random_toleration(rng: random.Random) -> dict:
    effect = rng.choice(("",) + EFFECTS)
    if rng.random() < 0.15:
        toleration = {"operator": "Exists"}  # no key: every key (the API needs Exists then)
    elif rng.random() < 0.5:
        toleration = {"key": rng.choice(TAINT_KEYS), "operator": "Exists"}
    else:
        toleration = {"key": rng.choice(TAINT_KEYS), "operator": rng.choice(("Equal", None)),
                      "value": rng.choice(TAINT_VALUES)}
        if toleration["operator"] is None:
            del toleration["operator"]  # Equal by default
    if effect:
        toleration["effect"] = effect
    return toleration


def random_expression(rng: random.Random) -> dict:
    key = rng.choice(KEYS + (HOSTNAME,))
    pool = NAMES if key == HOSTNAME else VALUES
    operator = rng.choice(("In", "NotIn", "Exists", "DoesNotExist"))
    expression = {"key": key, "operator": operator}
    if operator in ("In", "NotIn"):
        expression["values"] = rng.sample(pool, rng.randint(1, 2))
    return expression


def random_spec(rng: random.Random) -> dict:
    spec: dict = {}
    if rng.random() < 0.2:
        spec["nodeName"] = rng.choice(NAMES)
    if rng.random() < 0.45:
        spec["nodeSelector"] = {key: rng.choice(VALUES) for key in rng.sample(KEYS, rng.randint(1, 2))}
        if rng.random() < 0.15:
            spec["nodeSelector"][HOSTNAME] = rng.choice(NAMES)
    if rng.random() < 0.55:
        terms = []
        for _ in range(rng.choice((0, 1, 1, 1, 2, 2, 3))):
            if rng.random() < 0.05:
                terms.append({})
                continue
            term: dict = {"matchExpressions": [random_expression(rng) for _ in range(rng.randint(1, 3))]}
            if rng.random() < 0.2:
                term["matchFields"] = [{"key": "metadata.name", "operator": rng.choice(("In", "NotIn")),
                                        "values": [rng.choice(NAMES)]}]
            terms.append(term)
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    if rng.random() < 0.6:
        spec["tolerations"] = [random_toleration(rng) for _ in range(rng.randint(1, 3))]
    return spec


def random_inventory(rng: random.Random) -> list[dict]:
    names = rng.sample(NAMES + (UNMENTIONED_NAME, "n5", "n6"), rng.randint(1, 5))
    nodes = []
    for name in names:
        labels = {key: rng.choice(VALUES + (UNMENTIONED_VALUE,)) for key in KEYS if rng.random() < 0.6}
        taints = [{"key": rng.choice(TAINT_KEYS), "value": rng.choice(TAINT_VALUES), "effect": rng.choice(EFFECTS)}
                  for _ in range(rng.choice((0, 0, 1, 1, 2)))]
        nodes.append({"name": name, "labels": {**labels, HOSTNAME: name}, "taints": taints,
                      "unschedulable": rng.random() < 0.15})
    return nodes


def every_distinguishable_node() -> list[dict]:
    """One untainted, uncordoned node per combination the generated pods can tell apart."""
    choices = [(None,) + VALUES + (UNMENTIONED_VALUE,)] * len(KEYS)
    nodes = []
    for name in NAMES + (UNMENTIONED_NAME,):
        for values in itertools.product(*choices):
            labels = {key: value for key, value in zip(KEYS, values) if value is not None}
            nodes.append({"name": name, "labels": {**labels, HOSTNAME: name}, "taints": [], "unschedulable": False})
    return nodes


def workload(spec: dict, daemonset: bool) -> SimpleNamespace:
    """What Allocation and covers read of a workload."""
    scheduling = scheduling_from_pod_spec(spec)
    return SimpleNamespace(scheduling=scheduling, is_daemonset=daemonset, replicas=None if daemonset else 2,
                           live=False)


# --- the properties --------------------------------------------------------------------------

def test_may_share_node_without_an_inventory_is_exactly_some_node_running_both() -> None:
    rng = random.Random(SEED)
    universe = every_distinguishable_node()
    counts = {"share": 0, "apart": 0, "inventories": 0, "shared in an inventory": 0}
    for _ in range(PAIRS):
        a, b = random_spec(rng), random_spec(rng)
        model = may_share_node(scheduling_from_pod_spec(a), scheduling_from_pod_spec(b))
        assert model is may_share_node(scheduling_from_pod_spec(b), scheduling_from_pod_spec(a))
        # Taints and cordons only remove nodes, so the untainted universe decides; no DaemonSet
        # tolerations needed there.
        truth = any(brute_fits(a, node, False) and brute_fits(b, node, False) for node in universe)
        assert model is truth, (a, b)
        counts["share" if truth else "apart"] += 1

        for _ in range(INVENTORIES_PER_PAIR):
            inventory = random_inventory(rng)
            first, second = workload(a, rng.random() < 0.4), workload(b, rng.random() < 0.4)
            allocation = Allocation(Cluster(nodes=[as_node(node) for node in inventory]))
            shared = any(brute_fits(a, node, first.is_daemonset) and brute_fits(b, node, second.is_daemonset)
                         for node in inventory)
            assert allocation.may_share_node(first, second) is shared, (a, b, inventory)
            assert not shared or model, (a, b, inventory)  # never narrower than some inventory
            counts["inventories"] += 1
            counts["shared in an inventory"] += shared
    # The generator reaches both answers often enough to mean something.
    assert counts["share"] > PAIRS // 5 and counts["apart"] > PAIRS // 5, counts
    assert counts["shared in an inventory"] > 50, counts


def test_a_daemonset_covers_exactly_the_workloads_no_tainted_node_takes_away() -> None:
    """KP301 without an inventory, tolerations alone: the DaemonSet covers another DaemonSet
    whatever either tolerates (both run on every untainted node), and another workload exactly
    when every node that workload may use runs the DaemonSet too."""
    rng = random.Random(SEED + 1)
    taints = [{"key": key, "value": value, "effect": effect}
              for key in TAINT_KEYS + ("other-key",) for value in TAINT_VALUES + ("other",) for effect in EFFECTS]
    nodes = [{"name": "n", "labels": {HOSTNAME: "n"}, "taints": [taint], "unschedulable": cordoned}
             for taint in taints for cordoned in (False, True)]
    nodes += [{"name": "n", "labels": {HOSTNAME: "n"}, "taints": [], "unschedulable": cordoned}
              for cordoned in (False, True)]
    outcomes = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    for _ in range(TOLERATION_PAIRS):
        ds_spec = {"tolerations": [random_toleration(rng) for _ in range(rng.randint(0, 3))]}
        other_spec = {"tolerations": [random_toleration(rng) for _ in range(rng.randint(0, 3))]}
        other_is_daemonset = rng.random() < 0.4
        expected = other_is_daemonset or all(brute_fits(ds_spec, node, True) for node in nodes
                                             if brute_fits(other_spec, node, False))
        got = covers(workload(ds_spec, True), workload(other_spec, other_is_daemonset))
        assert got is expected, (ds_spec, other_spec, other_is_daemonset)
        outcomes[(other_is_daemonset, got)] += 1
    assert outcomes[(False, True)] > 30 and outcomes[(False, False)] > 30, outcomes


# --- examples --------------------------------------------------------------------------------

CONTROL_PLANE = Toleration("node-role.kubernetes.io/control-plane", "Exists", effect="NoSchedule")


@pytest.mark.parametrize(
    ("narrow", "wide", "expected"),
    [
        ([CONTROL_PLANE], [Toleration(operator="Exists", effect="NoSchedule")], True),
        ([CONTROL_PLANE], [Toleration(operator="Exists")], True),
        ([Toleration(operator="Exists", effect="NoSchedule")], [CONTROL_PLANE], False),
        ([Toleration("k", "Equal", "v")], [Toleration("k", "Exists")], True),
        ([Toleration("k", "Exists")], [Toleration("k", "Equal", "v")], False),
        # No effect: both hard effects, which two tolerations may cover between them.
        ([Toleration("k", "Exists")], [Toleration("k", "Exists", effect="NoSchedule"),
                                       Toleration("k", "Exists", effect="NoExecute")], True),
        ([Toleration("k", "Exists")], [Toleration("k", "Exists", effect="NoSchedule")], False),
        # PreferNoSchedule keeps no pod off a node: tolerating it opens nothing.
        ([Toleration(operator="Exists", effect="PreferNoSchedule")], [], True),
        ([], [], True),
    ],
)
def test_tolerations_within(narrow: list, wide: list, expected: bool) -> None:
    assert tolerations_within(narrow, wide) is expected


def kp301(*args: str) -> set[str]:
    from kubelint_ports.engine import LintOptions, lint_paths

    nodes = tuple(str(HERE / name) for name in args[1:])
    report = lint_paths([str(HERE / args[0])], LintOptions(node_files=nodes))
    return {f.subject.name for f in report.findings if f.rule_id == "KP301"}


def test_issue_34_daemonsets_with_different_tolerations_collide_without_an_inventory() -> None:
    """Both node agents run on every untainted node; one of them stays Pending on each."""
    assert kp301("issue34-node-agents.yaml") == {"otel-agent", "metrics-agent"}


def test_issue_34_daemonsets_collide_on_the_inventory_too() -> None:
    assert kp301("issue34-node-agents.yaml", "issue34-nodes.yaml") == {"otel-agent", "metrics-agent"}


def test_a_deployment_tolerating_a_taint_the_daemonset_does_not_is_not_provably_covered(tmp_path) -> None:
    """Its replicas may all go to control-plane nodes, where the DaemonSet does not run; and the
    other way round, a DaemonSet tolerating every NoSchedule taint covers it."""
    from kubelint_ports.engine import LintOptions, lint_paths

    daemonset, _, _ = (HERE / "issue34-node-agents.yaml").read_text().partition("\n---\n")
    deployment = """
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: gateway, namespace: observability}
spec:
  replicas: 1
  selector: {matchLabels: {app: gateway}}
  template:
    metadata: {labels: {app: gateway}}
    spec:
      tolerations: [TOLERATION]
      containers:
        - name: gateway
          ports: [{containerPort: 4317, hostPort: 4317}]
"""

    def found(toleration: str, ds_toleration: str) -> set[str]:
        path = tmp_path / "m.yaml"
        path.write_text(daemonset.replace("{key: node-role.kubernetes.io/control-plane, operator: Exists, "
                                          "effect: NoSchedule}", ds_toleration)
                        + deployment.replace("TOLERATION", toleration))
        report = lint_paths([str(path)], LintOptions())
        return {f.subject.name for f in report.findings if f.rule_id == "KP301"}

    control_plane = "{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}"
    every_no_schedule = "{operator: Exists, effect: NoSchedule}"
    assert found(every_no_schedule, control_plane) == set()
    assert found(control_plane, every_no_schedule) == {"otel-agent", "gateway"}
    assert found(control_plane, control_plane) == {"otel-agent", "gateway"}


def test_a_daemonset_does_not_cover_one_that_asks_for_other_nodes() -> None:
    """A ubiquitous label proves nothing about where a DaemonSet runs, but a pod that asks for a
    different value of it runs on none of those nodes: a Linux agent never meets a Windows one."""
    linux = workload({"nodeSelector": {"kubernetes.io/os": "linux"}}, True)
    windows = workload({"nodeSelector": {"kubernetes.io/os": "windows"}}, True)
    anywhere = workload({"tolerations": [{"operator": "Exists"}]}, True)
    assert not covers(linux, windows) and not covers(windows, linux)
    assert covers(linux, anywhere) and covers(anywhere, windows)
