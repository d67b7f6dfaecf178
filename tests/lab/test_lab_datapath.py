"""The lab decides: for every scenario and every packet (cell), the datapath model's prediction,
the endpoint that really answered, and what the rule's finding claims must agree.

Cells are listed in `cells.py`; DOMAIN.md's table B is covered by the `nodeport` (NodePort with and
without endpoints), `clusterip`, `externalip`, `hostport-process` and `hostip` (any local node
address, 127.0.0.1, hostIP) groups, and KP305's `externalip-node` groups (a Service's externalIP
that is the node's own address, against a hostPort and against a host process), in iptables, IPVS and nftables mode, with portmap appended
(>= v0.7.5), first (< v0.7.5) and its nftables backend.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

import cells
from cells import CELLS, SCENARIOS, Cell, Scenario, matches, observable, observed_class, route_for

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.model import ClusterFacts
from kubelint_ports.model import datapath as dp
from kubelint_ports.policies import builtin_policies

RUNS = [(scenario, order) for scenario in SCENARIOS for order in scenario.orders]


def observation(scenario: Scenario, order: str | None) -> cells.Observation:
    return cells.observe(scenario, order)  # cached: each node is built once per run


@functools.cache
def report(scenario: Scenario, order: str | None, tmp: str):
    path = Path(tmp) / f"lab-{abs(hash((scenario, order)))}.yaml"
    path.write_text(cells.manifest(scenario), encoding="utf-8")
    nodes = Path(tmp) / "lab-nodes.yaml"
    nodes.write_text(cells.NODES, encoding="utf-8")
    facts = ClusterFacts(proxy_mode=scenario.mode, stated=scenario.stated(order))
    result = lint_paths([str(path)], LintOptions(facts=facts, node_files=(str(nodes),)), policies=builtin_policies())
    assert not result.diagnostics, result.diagnostics
    return result


@pytest.fixture(scope="session")
def lint_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("lab-lint"))


def claim(result, cell: Cell) -> frozenset[str] | None:
    """What the rule's finding says receives the cell's packet; None: the rule reports nothing."""
    for finding in result.findings:
        traffic = finding.traffic
        if finding.rule_id != cell.rule or traffic is None or traffic["protocol"] != cell.protocol.upper() \
                or traffic["port"] != cell.port:
            continue
        for entry in [traffic, *traffic.get("paths", ())]:
            if entry["client"] == cell.client and entry["destination"] == cell.destination:
                return frozenset(entry["possible"])
    return None


def claim_agrees(said: frozenset[str] | None, observed: set[str], scenario: Scenario) -> bool:
    if said is None:  # only KP304 stays silent: when the Service keeps its traffic
        return dp.HOSTPORT not in observed
    if dp.OTHERWISE in said:  # KP304 speaks of the hostPort pod and nothing else
        said = said - {dp.OTHERWISE}
        if dp.HOSTPORT not in said and dp.HOSTPORT in observed:
            return False
        return said <= observed or not said
    ipvs = scenario.mode == "ipvs"
    # IPVS is a stand-in process here: what IPVS does at local delivery (serve, refuse, or hang on
    # v1.10-v1.21's 127.0.0.1 virtual server, the only DROPPED in IPVS mode) is seen as a local answer.
    return all(matches(seen, said | ({"local"} if ipvs and said & {dp.SERVICE, dp.REJECTED, dp.DROPPED} else set()))
               for seen in observed) and len(said) == len(observed)


def cell_params():
    return [pytest.param(scenario, order, cell, id=f"{scenario.name} | {order or 'fixed order'} | {cell.key}")
            for scenario, order in RUNS for cell in CELLS]


@pytest.mark.parametrize("scenario, order, cell", cell_params())
def test_cell(lab_ready, lint_dir, scenario: Scenario, order, cell: Cell):
    """model's winner == the endpoint that answered == the rule's claim (the order observed given)."""
    raw = observation(scenario, order).answers[cell.key]
    seen = observed_class(raw, scenario)
    expected = observable(route_for(scenario, cell, order), cell)
    assert matches(seen, expected), f"model predicts {sorted(expected)}, the lab saw {raw!r}"
    said = claim(report(scenario, order, lint_dir), cell)
    assert claim_agrees(said, {seen}, scenario), f"{cell.rule} claims {said}, the lab saw {raw!r}"


def unordered_params():
    return [pytest.param(scenario, cell, id=f"{scenario.name} | any order | {cell.key}")
            for scenario in SCENARIOS if scenario.unordered for cell in CELLS]


@pytest.mark.parametrize("scenario, cell", unordered_params())
def test_cell_without_observed_order(lab_ready, lint_dir, scenario: Scenario, cell: Cell):
    """Handlers in different tables, or rules that go to the top when absent (portmap < v0.7.5
    beside kube-proxy): the model says "undefined" exactly where the two orders (hook registration,
    or which jump was inserted last) really give different winners, and names both."""
    seen = {observed_class(observation(scenario, order).answers[cell.key], scenario) for order in scenario.orders}
    route = route_for(scenario, cell, None)
    expected = observable(route, cell)
    assert all(matches(one, expected) for one in seen), f"model {sorted(expected)}, lab saw {sorted(seen)}"
    assert (route.receiver == dp.UNDEFINED) == (len(seen) > 1), f"model {route.receiver}, lab saw {sorted(seen)}"
    said = claim(report(scenario, None, lint_dir), cell)
    assert claim_agrees(said, seen, scenario), f"{cell.rule} claims {said}, the lab saw {sorted(seen)}"


# --- the incidents, replayed ------------------------------------------------------------------------

def scenario_named(name: str) -> Scenario:
    return next(scenario for scenario in SCENARIOS if scenario.name == name)


def test_incident_000_hostport_takes_a_clusterip_and_a_nodeport(lab_ready, lint_dir):
    """k8s 1.15, IPVS, portmap older than v0.7.5: mysql-b's hostPort 3306 answered mysql-a's
    ClusterIP, and a hostPort 31123 pod won every request to NodePort 31123. Old portmap and
    kube-proxy both insert their jump at the top when it is absent: on that node portmap's was
    inserted last (the hostPort pods came after kube-proxy), the order the incident's node showed."""
    scenario = scenario_named("ipvs, portmap < v0.7.5")
    answers = observation(scenario, dp.HOSTPORT_FIRST).answers
    for cell in CELLS:
        if cell.group in ("clusterip", "nodeport") and cell.destination != dp.LOCALHOST:
            assert answers[cell.key].startswith("hostport-pod"), (cell.key, answers[cell.key])
    result = report(scenario, dp.HOSTPORT_FIRST, lint_dir)
    capture = [f for f in result.findings if f.rule_id == "KP304" and f.port == cells.SERVICE_PORT]
    assert capture and all(str(f.severity) == "error" and "takes the traffic" in f.message for f in capture)
    [collision] = [f for f in result.findings if f.rule_id == "KP201" and "TCP" in f.message]
    assert "hostPort 31123/TCP takes the traffic of nodePort 31123" in collision.message
    # Without the observed order the lint names both outcomes and what decides; the capture is
    # still an error (it is the node's steady state), and kube-proxy's re-inserted jump undoes it.
    unobserved = report(scenario, None, lint_dir)
    capture = [f for f in unobserved.findings if f.rule_id == "KP304" and f.port == cells.SERVICE_PORT]
    assert capture and all(str(f.severity) == "error" and "inserted last" in f.message for f in capture)
    undone = observation(scenario, dp.KUBE_PROXY_FIRST).answers
    assert all(not undone[c.key].startswith("hostport-pod") for c in CELLS if c.group == "clusterip")
    # with portmap >= v0.7.5 kube-proxy's ACCEPT keeps the ClusterIP: no finding there
    modern = report(scenario_named("ipvs, portmap v1.1.1"), None, lint_dir)
    assert not [f for f in modern.findings if f.rule_id == "KP304" and f.port == cells.SERVICE_PORT]


@pytest.mark.parametrize("endpoints, answer, words", [(True, "service", "takes the traffic of hostNetwork port"),
                                                      (False, "refused", "kube-proxy refuses hostNetwork port")])
def test_incident_003_host_process_loses_its_node_port(lab_ready, lint_dir, endpoints, answer, words):
    """A hostNetwork web server on 30584 and NodePort 30584: DNATed away with endpoints, REJECTed
    (connection refused) without."""
    scenario = next(s for s in SCENARIOS if s.proxy == "iptables" and s.hostport == "portmap"
                    and s.endpoints is endpoints)
    answers = observation(scenario, None).answers
    for cell in CELLS:
        if cell.group == "process-nodeport":
            assert observed_class(answers[cell.key], scenario) == answer, (cell.key, answers[cell.key])
    result = report(scenario, None, lint_dir)
    found = [f for f in result.findings if f.rule_id == "KP202"]
    assert found and all(words in f.message and str(f.severity) == "error" for f in found)


def test_incident_001_a_stale_chain_shadows_the_live_pod(lab_ready):
    """A sandbox torn down without CNI DEL leaves its CNI-DN chain; the live pod's chain for the same
    hostPort comes after it, and the first DNAT wins: traffic goes to an address nobody has."""
    import netlab

    with netlab.Node() as node:
        stale = node.add_pod("stale", [{"hostPort": 7000, "containerPort": 8080, "protocol": "tcp"}])
        netlab.run("ip", "netns", "del", stale.namespace)  # the runtime died: no DEL, the rules stay
        node.namespaces.remove(stale.namespace)
        live = node.add_pod("live", [{"hostPort": 7000, "containerPort": 8080, "protocol": "tcp"}])
        node.serve(live.namespace, "live-pod", ["tcp:0.0.0.0:8080"])
        client = node.add_pod("client")
        [answer] = node.probe(client.namespace, [["tcp", netlab.NODE_IP, 7000]])
        rules = node.dump()["iptables-save"]
        assert answer in ("timeout", "refused") or answer.startswith("error"), answer
        stale_jump = rules.index(f'id: \\"{stale.container_id}\\"')
        assert stale_jump < rules.index(f'id: \\"{live.container_id}\\"')  # the stale jump comes first
        [direct] = node.probe(client.namespace, [["tcp", live.ip, 8080]])
        assert direct.startswith("live-pod")  # the live pod itself is fine
