"""Traffic policies Local, measured (`policy_cells.py`): with externalTrafficPolicy: Local and no
endpoint on the node, clients outside the node fall through kube-proxy's external chain to the
hostPort pod, or meet kube-proxy's DROP (a timeout, not "connection refused"), while pods and the
node itself still reach the Service; internalTrafficPolicy: Local without a local endpoint DROPs
the ClusterIP. The model must say what the lab sees, with the node's endpoints known and unknown,
and KP201/KP202 must claim it."""

from __future__ import annotations

from pathlib import Path

import pytest

import policy_cells
from cells import matches, observable, observed_class
from policy_cells import CELLS, SCENARIOS, PolicyScenario

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.model import ClusterFacts
from kubelint_ports.model import datapath as dp

RUNS = [(scenario, order) for scenario in SCENARIOS for order in scenario.orders]


def seen(scenario: PolicyScenario, order, cell) -> str:
    return observed_class(policy_cells.observe(scenario, order).answers[cell.key], scenario)


@pytest.mark.parametrize("scenario, order, cell", [
    pytest.param(s, o, c, id=f"{s.name} | {o or 'fixed order'} | {c.key}") for s, o in RUNS for c in CELLS])
def test_policy_cell(lab_ready, scenario, order, cell):
    raw = policy_cells.observe(scenario, order).answers[cell.key]
    expected = observable(policy_cells.route_for(scenario, cell, order), cell)
    assert matches(observed_class(raw, scenario), expected), f"model predicts {sorted(expected)}, the lab saw {raw!r}"


def twins(scenario: PolicyScenario) -> list[PolicyScenario]:
    """The same node with and without a local endpoint."""
    return [s for s in SCENARIOS if s.proxy == scenario.proxy]


@pytest.mark.parametrize("proxy, cell", [pytest.param(p, c, id=f"{p} | {c.key}")
                                         for p in ("iptables", "ipvs", "ipvs-1.10", "nftables") for c in CELLS])
def test_unknown_local_endpoints_name_both_outcomes(lab_ready, proxy, cell):
    """Whether the node runs an endpoint is unknown to a linter: the model's outcomes are exactly
    what the two nodes showed, each under its condition."""
    scenarios = [s for s in SCENARIOS if s.proxy == proxy]
    answer = dp.Datapath(scenarios[0].facts(scenarios[0].orders[0])).deliver(
        cell.client, cell.destination, policy_cells.use(cell, None), cell.port)
    observed = {s.local_endpoint: seen(s, s.orders[0], cell) for s in scenarios}
    for outcome in answer.outcomes:
        values = {dict(term).get("local-endpoints") for term in outcome.when} or {True, False}
        for value in values - {None} or {True, False}:
            assert matches(observed[value], observable(outcome.route, cell)), (value, outcome, observed)
    # IPVS itself is not here: its outcomes at local delivery look alike (a process answers)
    classes = {frozenset(observable(outcome.route, cell)) for outcome in answer.outcomes}
    assert (len(classes) > 1) == (len(set(observed.values())) > 1), (answer.outcomes, observed)


@pytest.mark.parametrize("mode", ["iptables", "ipvs", "nftables"])
def test_rules_claim_what_the_nodes_show(lab_ready, tmp_path: Path, mode):
    """KP201 (hostPort vs the Local NodePort) and KP202 (host process vs it): for each client,
    the finding's possible receivers are what the nodes with and without an endpoint showed."""
    (tmp_path / "lab.yaml").write_text(policy_cells.MANIFEST, encoding="utf-8")
    scenario = next(s for s in SCENARIOS if s.proxy == mode)
    facts = ClusterFacts(proxy_mode=mode, stated=tuple(
        ({"hostport-backend": "portmap-backend"}.get(name, name),
         dp.version_text(fact.value) if name.endswith("version") else fact.value, "lab")
        for name, fact in scenario.facts().items()))
    report = lint_paths([str(tmp_path / "lab.yaml")], LintOptions(facts=facts))
    assert not report.diagnostics, report.diagnostics
    for cell in CELLS:
        if not cell.rule:
            continue
        [finding] = [f for f in report.findings if f.rule_id == cell.rule and f.port == cell.port]
        entries = [finding.traffic, *finding.traffic.get("paths", ())]
        [entry] = [e for e in entries if (e["client"], e["destination"]) == (cell.client, cell.destination)]
        observed = {seen(s, o, cell) for s in twins(scenario) for o in s.orders}
        said = set(entry["possible"]) - {dp.UNDEFINED}
        ipvs = {"local"} if mode == "ipvs" and said & {dp.SERVICE, dp.REJECTED} else set()
        assert all(matches(one, frozenset(said | ipvs | ({"timeout"} if dp.DROPPED in said else set())))
                   for one in observed), (cell.key, said, observed)


def test_incident_003_with_a_local_service_times_out(lab_ready, tmp_path: Path):
    """A host process on the nodePort of an externalTrafficPolicy: Local Service, on a node without
    an endpoint: clients outside the node get no answer (kube-proxy's DROP), not "connection
    refused"; pods and the node reach the Service. KP202 says so."""
    scenario = next(s for s in SCENARIOS if s.proxy == "iptables" and not s.local_endpoint)
    answers = policy_cells.observe(scenario, None).answers
    by_client = {cell.client: answers[cell.key] for cell in CELLS if cell.group == "etp-process"}
    assert by_client[dp.FROM_OUTSIDE] == "timeout" and by_client[dp.FROM_POD].startswith("service")
    (tmp_path / "lab.yaml").write_text(policy_cells.MANIFEST, encoding="utf-8")
    report = lint_paths([str(tmp_path / "lab.yaml")], LintOptions(facts=ClusterFacts(proxy_mode="iptables")))
    [finding] = [f for f in report.findings if f.rule_id == "KP202"]
    assert "kube-proxy drops it (a timeout)" in finding.message and "on nodes without an endpoint" in finding.message
    assert "services.nodeports: 0" in finding.message
