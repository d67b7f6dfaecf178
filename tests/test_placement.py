"""Placement: which nodes a pod can land on (DOMAIN.md section A)."""

from __future__ import annotations

import pytest

from kubelint_ports.model.placement import (
    DAEMONSET_TOLERATIONS,
    Node,
    NodeSelectorTerm,
    Requirement,
    Scheduling,
    Taint,
    Toleration,
    eligible,
    eligible_nodes,
    matches_term,
    may_share_node,
    node_from_object,
    pinned_node,
    scheduling_from_pod_spec,
    tolerates,
)

WORKER = Node("worker-1", labels={"zone": "a", "gpu-count": "4", "kubernetes.io/hostname": "worker-1"})


def term(*expressions: tuple, fields: tuple = ()) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        tuple(Requirement(k, op, tuple(v)) for k, op, v in expressions),
        tuple(Requirement(k, op, tuple(v)) for k, op, v in fields),
    )


def affinity(*terms: dict) -> dict:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


def expr(key: str, operator: str, *values) -> dict:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


# --- operators --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (("zone", "In", ["a", "b"]), True),
        (("zone", "In", ["b"]), False),
        (("missing", "In", ["a"]), False),
        (("zone", "In", []), False),  # rejected by the API: never matches
        (("zone", "NotIn", ["b"]), True),
        (("zone", "NotIn", ["a"]), False),
        (("missing", "NotIn", ["a"]), True),  # absent label satisfies NotIn
        (("zone", "Exists", []), True),
        (("missing", "Exists", []), False),
        (("zone", "Exists", ["a"]), False),  # values with Exists is invalid
        (("missing", "DoesNotExist", []), True),
        (("zone", "DoesNotExist", []), False),
        (("gpu-count", "Gt", ["3"]), True),
        (("gpu-count", "Gt", ["4"]), False),
        (("gpu-count", "Lt", ["5"]), True),
        (("gpu-count", "Lt", ["4"]), False),
        (("gpu-count", "Gt", ["-1"]), True),
        (("zone", "Gt", ["1"]), False),  # non-numeric label
        (("gpu-count", "Lt", ["many"]), False),  # non-numeric bound
        (("gpu-count", "Gt", ["1", "2"]), False),  # Gt needs exactly one value
        (("gpu-count", "Gt", ["1_0"]), False),  # Go's ParseInt rejects what int() accepts
        (("missing", "Lt", ["10"]), False),
        (("zone", "Matches", ["a"]), False),  # unknown operator
    ],
)
def test_label_operators(requirement: tuple, expected: bool) -> None:
    assert matches_term(term(requirement), WORKER) is expected


def test_expressions_in_a_term_are_anded() -> None:
    assert matches_term(term(("zone", "In", ["a"]), ("gpu-count", "Gt", ["2"])), WORKER)
    assert not matches_term(term(("zone", "In", ["a"]), ("gpu-count", "Gt", ["8"])), WORKER)


def test_terms_are_ored() -> None:
    spec = affinity(expr("zone", "In", "b"), expr("zone", "In", "a"))
    assert eligible(scheduling_from_pod_spec(spec), WORKER)
    spec = affinity(expr("zone", "In", "b"), expr("zone", "In", "c"))
    assert not eligible(scheduling_from_pod_spec(spec), WORKER)


def test_empty_term_matches_nothing() -> None:
    assert not matches_term(NodeSelectorTerm((), ()), WORKER)
    # An empty term beside a matching one does not veto it: terms are OR'ed.
    spec = affinity({}, expr("zone", "In", "a"))
    assert eligible(scheduling_from_pod_spec(spec), WORKER)
    assert not eligible(scheduling_from_pod_spec(affinity({})), WORKER)


def test_required_affinity_without_terms_matches_nothing() -> None:
    scheduling = scheduling_from_pod_spec(affinity())
    assert scheduling.required_terms == ()
    assert not eligible(scheduling, WORKER)


def test_match_fields_on_metadata_name() -> None:
    assert matches_term(term(fields=(("metadata.name", "In", ["worker-1"]),)), WORKER)
    assert not matches_term(term(fields=(("metadata.name", "In", ["worker-2"]),)), WORKER)
    assert matches_term(term(fields=(("metadata.name", "NotIn", ["worker-2"]),)), WORKER)
    assert not matches_term(term(fields=(("metadata.name", "NotIn", ["worker-1"]),)), WORKER)
    # Only metadata.name, only In/NotIn, and exactly one value are supported.
    assert not matches_term(term(fields=(("metadata.uid", "In", ["worker-1"]),)), WORKER)
    assert not matches_term(term(fields=(("metadata.name", "Exists", []),)), WORKER)
    assert not matches_term(term(fields=(("metadata.name", "In", ["worker-1", "worker-2"]),)), WORKER)


def test_match_fields_and_expressions_are_anded() -> None:
    assert matches_term(term(("zone", "In", ["a"]), fields=(("metadata.name", "In", ["worker-1"]),)), WORKER)
    assert not matches_term(term(("zone", "In", ["b"]), fields=(("metadata.name", "In", ["worker-1"]),)), WORKER)


# --- nodeSelector and nodeName ----------------------------------------------------------------

def test_node_selector_needs_every_label() -> None:
    assert eligible(scheduling_from_pod_spec({"nodeSelector": {"zone": "a"}}), WORKER)
    assert not eligible(scheduling_from_pod_spec({"nodeSelector": {"zone": "a", "disk": "ssd"}}), WORKER)
    assert not eligible(scheduling_from_pod_spec({"nodeSelector": {"zone": "b"}}), WORKER)


def test_node_selector_reads_typed_scalars_as_yaml_spells_them() -> None:
    node = Node("n", labels={"gpu": "true", "slots": "10"})
    assert eligible(scheduling_from_pod_spec({"nodeSelector": {"gpu": True, "slots": 10}}), node)


def test_node_name_pins_to_that_node_only() -> None:
    scheduling = scheduling_from_pod_spec({"nodeName": "worker-1"})
    other = Node("worker-2", labels=WORKER.labels)
    assert eligible_nodes(scheduling, [other, WORKER]) == [WORKER]


def test_node_name_bypasses_cordon_and_no_schedule_but_not_no_execute() -> None:
    scheduling = scheduling_from_pod_spec({"nodeName": "n"})
    assert eligible(scheduling, Node("n", unschedulable=True))
    assert eligible(scheduling, Node("n", taints=(Taint("dedicated", "db", "NoSchedule"),)))
    # The kubelet's admission check still rejects untolerated NoExecute taints.
    assert not eligible(scheduling, Node("n", taints=(Taint("dedicated", "db", "NoExecute"),)))


def test_node_name_still_needs_selector_to_match() -> None:
    scheduling = scheduling_from_pod_spec({"nodeName": "worker-1", "nodeSelector": {"zone": "b"}})
    assert not eligible(scheduling, WORKER)


# --- taints and tolerations -------------------------------------------------------------------

@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_hard_taints_block_untolerated_pods(effect: str) -> None:
    node = Node("n", taints=(Taint("dedicated", "db", effect),))
    assert not eligible(Scheduling(), node)
    assert eligible(Scheduling(tolerations=(Toleration("dedicated", "Equal", "db", effect),)), node)


def test_prefer_no_schedule_never_blocks() -> None:
    assert eligible(Scheduling(), Node("n", taints=(Taint("dedicated", "db", "PreferNoSchedule"),)))


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        (Toleration("dedicated", "Equal", "db", "NoSchedule"), True),
        (Toleration("dedicated", "Equal", "web", "NoSchedule"), False),
        (Toleration("other", "Equal", "db", "NoSchedule"), False),
        (Toleration("dedicated", "Exists", "", "NoSchedule"), True),
        (Toleration("dedicated", "Exists", "", "NoExecute"), False),  # wrong effect
        (Toleration("dedicated", "Exists", "", ""), True),  # empty effect: all effects
        (Toleration("dedicated", "Equal", "db", ""), True),
        (Toleration("", "Exists", "", ""), True),  # tolerates everything
        (Toleration("", "Exists", "", "NoExecute"), False),  # everything, but of one effect
        (Toleration("dedicated", "Gte", "db", ""), False),  # unknown operator
    ],
)
def test_toleration_matching(toleration: Toleration, expected: bool) -> None:
    assert tolerates([toleration], Taint("dedicated", "db", "NoSchedule")) is expected


def test_tolerations_parsed_from_pod_spec() -> None:
    scheduling = scheduling_from_pod_spec({"tolerations": [
        {"key": "dedicated", "value": "db", "effect": "NoSchedule"},  # operator omitted: Equal
        {"key": "gpu", "operator": "Exists"},
        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": "300"},
    ]})
    assert scheduling.tolerations == (
        Toleration("dedicated", "Equal", "db", "NoSchedule"),
        Toleration("gpu", "Exists", "", ""),
        Toleration("", "Exists", "", "NoExecute"),
    )
    node = Node("n", taints=(
        Taint("dedicated", "db", "NoSchedule"),
        Taint("gpu", "nvidia", "NoSchedule"),
        Taint("maintenance", "", "NoExecute"),
    ))
    assert eligible(scheduling, node)
    assert not eligible(scheduling, Node("n", taints=(Taint("dedicated", "web", "NoSchedule"),)))


# --- cordoned nodes and DaemonSets ------------------------------------------------------------

def test_cordoned_node_refuses_deployment_pods_but_not_daemonset_pods() -> None:
    cordoned = Node("n", unschedulable=True)
    assert not eligible(Scheduling(), cordoned)
    assert eligible(Scheduling(), cordoned, daemonset=True)


def test_pod_tolerating_the_unschedulable_taint_may_use_a_cordoned_node() -> None:
    everything = Scheduling(tolerations=(Toleration("", "Exists", "", ""),))
    assert eligible(everything, Node("n", unschedulable=True))


@pytest.mark.parametrize(
    "taint",
    [
        Taint("node.kubernetes.io/not-ready", "", "NoExecute"),
        Taint("node.kubernetes.io/unreachable", "", "NoExecute"),
        Taint("node.kubernetes.io/disk-pressure", "", "NoSchedule"),
        Taint("node.kubernetes.io/memory-pressure", "", "NoSchedule"),
        Taint("node.kubernetes.io/pid-pressure", "", "NoSchedule"),
        Taint("node.kubernetes.io/unschedulable", "", "NoSchedule"),
        Taint("node.kubernetes.io/network-unavailable", "", "NoSchedule"),
    ],
)
def test_daemonset_automatic_tolerations(taint: Taint) -> None:
    node = Node("n", taints=(taint,))
    assert not eligible(Scheduling(), node)
    assert eligible(Scheduling(), node, daemonset=True)


def test_daemonset_automatic_tolerations_are_effect_specific() -> None:
    assert len(DAEMONSET_TOLERATIONS) == 7
    node = Node("n", taints=(Taint("node.kubernetes.io/disk-pressure", "", "NoExecute"),))
    assert not eligible(Scheduling(), node, daemonset=True)
    assert not eligible(Scheduling(), Node("n", taints=(Taint("dedicated", "db", "NoSchedule"),)), daemonset=True)


def test_daemonset_still_honours_node_selector() -> None:
    scheduling = scheduling_from_pod_spec({"nodeSelector": {"zone": "b"}})
    assert not eligible(scheduling, WORKER, daemonset=True)


def test_eligible_nodes_keeps_input_order() -> None:
    nodes = [Node(f"n{i}", labels={"zone": "a" if i % 2 else "b"}) for i in range(6)]
    selected = eligible_nodes(scheduling_from_pod_spec({"nodeSelector": {"zone": "a"}}), nodes)
    assert [node.name for node in selected] == ["n1", "n3", "n5"]


# --- reading objects --------------------------------------------------------------------------

KUBECTL_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "ip-10-0-1-17.ec2.internal",
        "labels": {
            "kubernetes.io/hostname": "ip-10-0-1-17",
            "kubernetes.io/os": "linux",
            "topology.kubernetes.io/zone": "us-east-1a",
            "node-role.kubernetes.io/control-plane": "",
        },
        "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        "resourceVersion": "123456",
    },
    "spec": {
        "podCIDR": "10.244.1.0/24",
        "podCIDRs": ["10.244.1.0/24", "fd00:10:244:1::/64"],
        "providerID": "aws:///us-east-1a/i-0abc",
        "taints": [
            {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2024-05-01T10:00:00Z"},
        ],
        "unschedulable": "true",
    },
    "status": {
        "addresses": [
            {"type": "InternalIP", "address": "10.0.1.17"},
            {"type": "InternalIP", "address": "fd00::17"},
            {"type": "Hostname", "address": "ip-10-0-1-17"},
        ],
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}


def test_node_from_kubectl_item() -> None:
    node = node_from_object(KUBECTL_NODE)
    assert node.name == "ip-10-0-1-17.ec2.internal"
    assert node.label("topology.kubernetes.io/zone") == "us-east-1a"
    assert node.label("node-role.kubernetes.io/control-plane") == ""
    assert node.label("missing") is None
    assert node.taints == (
        Taint("node-role.kubernetes.io/control-plane", "", "NoSchedule"),
        Taint("node.kubernetes.io/unschedulable", "", "NoSchedule"),
    )
    assert node.unschedulable is True
    assert node.pod_cidrs == ("10.244.1.0/24", "fd00:10:244:1::/64")
    assert node.addresses == (("InternalIP", "10.0.1.17"), ("InternalIP", "fd00::17"), ("Hostname", "ip-10-0-1-17"))
    hash(node)  # usable in sets and as dict keys


def test_node_from_object_legacy_pod_cidr_and_yaml_booleans() -> None:
    node = node_from_object({"metadata": {"name": "n"}, "spec": {"podCIDR": "10.0.0.0/24", "unschedulable": "no"}})
    assert node.pod_cidrs == ("10.0.0.0/24",)
    assert node.unschedulable is False
    assert node_from_object({"spec": {"unschedulable": True}}).unschedulable is True
    assert node_from_object({"spec": {"unschedulable": "yes"}}).unschedulable is True


@pytest.mark.parametrize(
    "garbage",
    [
        None,
        "node",
        [],
        {"metadata": "x", "spec": ["y"], "status": 3},
        {"metadata": {"name": ["a"], "labels": ["a=b"]},
         "spec": {"taints": ["a:NoSchedule", None], "podCIDRs": "10.0.0.0/8", "unschedulable": {"x": 1}},
         "status": {"addresses": [None, "10.0.0.1", {"type": "InternalIP"}]}},
    ],
)
def test_node_from_malformed_object_does_not_crash(garbage: object) -> None:
    node = node_from_object(garbage)
    assert node.taints == () and node.pod_cidrs == () and node.addresses == ()
    assert not node.unschedulable


@pytest.mark.parametrize(
    "garbage",
    [
        None,
        {"nodeName": {"a": 1}, "nodeSelector": ["zone=a"], "tolerations": "all", "affinity": "x"},
        {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "x"}}},
        {"tolerations": [None, "x", 3]},
    ],
)
def test_scheduling_from_malformed_spec_is_unconstrained(garbage: object) -> None:
    scheduling = scheduling_from_pod_spec(garbage)
    assert scheduling == Scheduling()
    assert eligible(scheduling, WORKER)


def test_malformed_requirement_fails_its_term_only() -> None:
    spec = affinity({"matchExpressions": ["zone in (a)"]}, {"matchExpressions": [None]}, expr("zone", "In", "a"))
    scheduling = scheduling_from_pod_spec(spec)
    assert [matches_term(t, WORKER) for t in scheduling.required_terms] == [False, False, True]
    assert eligible(scheduling, WORKER)


def test_scheduling_reads_typed_requirement_values() -> None:
    spec = affinity({"matchExpressions": [{"key": "gpu-count", "operator": "Gt", "values": [3]}]})
    assert scheduling_from_pod_spec(spec).required_terms[0].match_expressions[0].values == ("3",)
    assert eligible(scheduling_from_pod_spec(spec), WORKER)


def test_no_affinity_is_distinct_from_empty_affinity() -> None:
    assert scheduling_from_pod_spec({"affinity": {"nodeAffinity": None}}).required_terms is None
    assert scheduling_from_pod_spec({}).required_terms is None


# --- pinned_node ------------------------------------------------------------------------------

def hostname_term(name: str) -> dict:
    return expr("kubernetes.io/hostname", "In", name)


def name_field_term(name: str) -> dict:
    return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"nodeName": "n1"}, "n1"),
        ({"nodeSelector": {"kubernetes.io/hostname": "n2", "zone": "a"}}, "n2"),
        (affinity(hostname_term("n3")), "n3"),
        (affinity(name_field_term("n4")), "n4"),
        (affinity(hostname_term("n5"), name_field_term("n5")), "n5"),  # every term agrees
        (affinity(hostname_term("n5"), name_field_term("n6")), None),  # terms disagree
        (affinity(hostname_term("n5"), expr("zone", "In", "a")), None),  # one term not pinned
        (affinity(expr("kubernetes.io/hostname", "In", "n1", "n2")), None),
        (affinity({**hostname_term("n1"), **name_field_term("n2")}), None),  # term contradicts itself
        (affinity(expr("kubernetes.io/hostname", "NotIn", "n1")), None),
        (affinity(), None),
        ({"nodeSelector": {"zone": "a"}}, None),
        ({}, None),
    ],
)
def test_pinned_node(spec: dict, expected: str | None) -> None:
    assert pinned_node(scheduling_from_pod_spec(spec)) == expected


def test_pinned_node_prefers_node_name() -> None:
    spec = {"nodeName": "n1", "nodeSelector": {"kubernetes.io/hostname": "n2"}}
    assert pinned_node(scheduling_from_pod_spec(spec)) == "n1"


# --- may_share_node ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ({}, {}, True),
        ({"nodeName": "n1"}, {"nodeName": "n1"}, True),
        ({"nodeName": "n1"}, {"nodeName": "n2"}, False),
        ({"nodeName": "n1"}, {}, True),
        ({"nodeName": "n1"}, {"nodeSelector": {"kubernetes.io/hostname": "n2"}}, False),
        ({"nodeName": "n1"}, {"nodeSelector": {"kubernetes.io/hostname": "n1"}}, True),
        ({"nodeSelector": {"kubernetes.io/hostname": "n1"}}, affinity(hostname_term("n2")), False),
        ({"nodeSelector": {"kubernetes.io/hostname": "n1"}}, affinity(name_field_term("n1")), True),
        (affinity(hostname_term("n1")), affinity(name_field_term("n2")), False),
        ({"nodeSelector": {"zone": "a"}}, {"nodeSelector": {"zone": "b"}}, False),
        ({"nodeSelector": {"zone": "a"}}, {"nodeSelector": {"zone": "a", "disk": "ssd"}}, True),
        ({"nodeSelector": {"zone": "a"}}, {"nodeSelector": {"disk": "ssd"}}, True),
        # A node has one zone: no cluster runs both (tests/test_placement_tolerations.py checks the rule).
        (affinity(expr("zone", "In", "a")), affinity(expr("zone", "In", "b")), False),
        ({"nodeName": "n1"}, affinity(hostname_term("n1"), expr("zone", "In", "a")), True),
    ],
)
def test_may_share_node(a: dict, b: dict, expected: bool) -> None:
    first, second = scheduling_from_pod_spec(a), scheduling_from_pod_spec(b)
    assert may_share_node(first, second) is expected
    assert may_share_node(second, first) is expected


# --- value objects ----------------------------------------------------------------------------

def test_constructors_accept_plain_dicts_and_lists_and_stay_hashable() -> None:
    scheduling = Scheduling(node_selector={"zone": "a"}, tolerations=[Toleration("k", "Exists")],
                            required_terms=[NodeSelectorTerm([Requirement("zone", "In", ["a"])])])
    assert scheduling == scheduling_from_pod_spec({
        "nodeSelector": {"zone": "a"}, "tolerations": [{"key": "k", "operator": "Exists"}],
        **affinity(expr("zone", "In", "a")),
    })
    assert len({scheduling, Scheduling(node_selector={"zone": "a"}, tolerations=[Toleration("k", "Exists")],
                                       required_terms=[NodeSelectorTerm([Requirement("zone", "In", ["a"])])])}) == 1
    with pytest.raises(TypeError):
        scheduling.node_selector["zone"] = "b"  # type: ignore[index]


def test_node_index_narrows_to_exactly_the_eligible_nodes() -> None:
    """The allocation's name/label index only narrows: on random constraints it never loses a
    node the exact test accepts, and keeps inventory order."""
    import random

    from kubelint_ports.model.allocation import NodeIndex

    rng = random.Random(7)
    zones, names = ["a", "b", "c"], [f"n{i}" for i in range(30)]
    nodes = [Node(name, labels={"zone": rng.choice(zones), "kubernetes.io/hostname": name,
                                **({"gpu": "1"} if rng.random() < 0.3 else {})},
                  taints=(Taint("dedicated", "x", "NoSchedule"),) if rng.random() < 0.2 else (),
                  unschedulable=rng.random() < 0.1) for name in names]
    index = NodeIndex(nodes)
    for _ in range(400):
        spec: dict = {}
        if rng.random() < 0.2:
            spec["nodeName"] = rng.choice(names + ["absent"])
        if rng.random() < 0.4:
            spec["nodeSelector"] = {"zone": rng.choice(zones + ["z"])}
        if rng.random() < 0.5:
            terms = []
            for _ in range(rng.randint(0, 2)):
                expression = rng.choice([
                    {"key": "zone", "operator": "In", "values": rng.sample(zones, 2)},
                    {"key": "gpu", "operator": rng.choice(["Exists", "DoesNotExist"])},
                    {"key": "zone", "operator": "NotIn", "values": ["a"]},
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [rng.choice(names)]}])
                field = [{"key": "metadata.name", "operator": "In", "values": [rng.choice(names)]}] \
                    if rng.random() < 0.3 else []
                terms.append({"matchExpressions": [expression], "matchFields": field})
            spec.update(affinity(*terms))
        scheduling = scheduling_from_pod_spec(spec)
        daemonset = rng.random() < 0.3
        assert eligible_nodes(scheduling, index.candidates(scheduling), daemonset=daemonset) == \
            eligible_nodes(scheduling, nodes, daemonset=daemonset), spec


# --- affinity that only excludes labelled nodes (issue 24: node-exporter's chart) -------------

NODE_EXPORTER = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-exporter, namespace: monitoring}
spec:
  template:
    spec:
      hostNetwork: true
      nodeSelector: {kubernetes.io/os: linux}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - {key: eks.amazonaws.com/compute-type, operator: NotIn, values: [fargate]}
                  - {key: type, operator: DoesNotExist}
      containers:
        - name: node-exporter
          ports: [{containerPort: 9100}]
"""
OTHER_HOLDER = """\
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: other, namespace: agents}
spec:
  template:
    spec:
      hostNetwork: true
      SELECTOR
      containers:
        - name: agent
          ports: [{containerPort: 9100}]
"""


def kp301_objects(tmp_path, selector: str, daemonset: str = NODE_EXPORTER) -> set[str]:
    from kubelint_ports.engine import LintOptions, lint_paths

    path = tmp_path / "m.yaml"
    path.write_text(daemonset + OTHER_HOLDER.replace("SELECTOR", selector))
    report = lint_paths([str(path)], LintOptions())
    return {f.subject.name for f in report.findings if f.rule_id == "KP301"}


def test_a_daemonset_that_only_excludes_labelled_nodes_runs_on_every_ordinary_node(tmp_path):
    """Without an inventory, NotIn/DoesNotExist keep the DaemonSet off labelled nodes only: the
    other hostNetwork 9100 holder, which may run on an ordinary node, collides with it there."""
    assert kp301_objects(tmp_path, "nodeSelector: {pool: web}") == {"node-exporter", "other"}


def test_a_pod_that_asks_for_an_excluded_label_is_not_covered(tmp_path):
    """`other` runs only on Fargate nodes, which the DaemonSet avoids: no provable collision."""
    assert kp301_objects(tmp_path, "nodeSelector: {eks.amazonaws.com/compute-type: fargate}") == set()


def test_an_affinity_that_selects_nodes_positively_still_needs_an_inventory(tmp_path):
    positive = NODE_EXPORTER.replace("operator: NotIn, values: [fargate]", "operator: In, values: [ec2]")
    assert kp301_objects(tmp_path, "nodeSelector: {pool: web}", positive) == set()


def test_exclusion_only_terms_do_not_narrow_the_inventory():
    from kubelint_ports.model.placement import runs_on_every_ordinary_node

    spec = scheduling_from_pod_spec(affinity(expr("type", "NotIn", "virtual-kubelet")))
    assert runs_on_every_ordinary_node(spec)
    assert eligible(spec, Node("plain", labels={}), daemonset=True)
    assert not eligible(spec, Node("vk", labels={"type": "virtual-kubelet"}), daemonset=True)
    mixed = scheduling_from_pod_spec(affinity({"matchExpressions": [*expr("type", "NotIn", "vk")["matchExpressions"],
                                                                     *expr("zone", "In", "a")["matchExpressions"]]}))
    assert not runs_on_every_ordinary_node(mixed)
