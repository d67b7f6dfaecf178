"""Traffic policies Local, measured (`policy_cells.py`): with externalTrafficPolicy: Local and no
endpoint on the node, clients outside the node fall through kube-proxy's external chain to the
hostPort pod, or meet kube-proxy's DROP (a timeout, not "connection refused"), while pods and the
node itself still reach the Service; internalTrafficPolicy: Local without a local endpoint DROPs
the ClusterIP. The model must say what the lab sees, with the node's endpoints known and unknown,
and KP201/KP202 must claim it.

A kube-proxy without clusterCIDR (detectLocalMode ClusterCIDR: its local detector is a no-op) writes
no pod short-circuit (`BLIND`): a pod's packet to a Local NodePort on a node without a local endpoint
falls through like an outsider's, to the hostPort pod or kube-proxy's DROP; the model says so with
the fact `local_detector` false."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest

import policy_cells
import shapes
import shapes_local
from cells import HOSTPORT_FIRST, Observation, matches, observable, observed_class
from policy_cells import CELLS, SCENARIOS, PolicyScenario
from shapes_local import PolicyService
from test_shapes_upstream import canonical, chain_names, data, overall_services, parse_nft_dump, parse_restore, \
    policy_services

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.model import ClusterFacts
from kubelint_ports.model import datapath as dp

# --- kube-proxy without a local detector ----------------------------------------------------------

@dataclass(frozen=True)
class BlindScenario(PolicyScenario):
    """A node whose kube-proxy runs without clusterCIDR (detectLocalMode ClusterCIDR), so its local
    detector is a no-op and the external chain has no pod short-circuit; `source` names the code."""

    source: str = ""

    def facts(self, order: str | None = None) -> dp.DatapathFacts:
        return replace(super().facts(order), local_detector=dp.Fact(False, "lab"))

    @property
    def cluster_cidr(self) -> str | None:
        return None  # kube-proxy's rules written without clusterCIDR

    @property
    def detected(self) -> PolicyScenario:
        """The same node with kube-proxy telling pods apart (a clusterCIDR)."""
        return PolicyScenario(self.name, self.proxy, self.local_endpoint)


BLIND = tuple(BlindScenario(f"{proxy}, no local endpoint, no clusterCIDR (no pod short-circuit)", proxy, False,
                            f"`pkg/proxy/{proxy}/proxier.go`, syncProxyRules: the pods' short-circuit of the "
                            f"external chain is written only `if proxier.localDetector.IsImplemented()`")
              for proxy in ("iptables", "nftables"))
ALL_SCENARIOS = (*SCENARIOS, *BLIND)


def observe(scenario: PolicyScenario, order: str | None) -> Observation:
    return policy_cells.observe(scenario, order)


RUNS = [(scenario, order) for scenario in ALL_SCENARIOS for order in scenario.orders]


def seen(scenario: PolicyScenario, order, cell) -> str:
    return observed_class(observe(scenario, order).answers[cell.key], scenario)


@pytest.mark.parametrize("scenario, order, cell", [
    pytest.param(s, o, c, id=f"{s.name} | {o or 'fixed order'} | {c.key}") for s, o in RUNS for c in CELLS])
def test_policy_cell(lab_ready, scenario, order, cell):
    raw = observe(scenario, order).answers[cell.key]
    expected = observable(policy_cells.route_for(scenario, cell, order), cell)
    assert matches(observed_class(raw, scenario), expected), f"model predicts {sorted(expected)}, the lab saw {raw!r}"


@pytest.mark.parametrize("scenario, order", [pytest.param(s, o, id=f"{s.name} | {o or 'fixed order'}")
                                             for s in BLIND for o in s.orders])
def test_pods_fall_through_without_a_local_detector(lab_ready, scenario, order):
    """The cells above hold the model to the lab with `local_detector` false; here the detector
    must matter: where the model with a detector says otherwise, the lab contradicts it (so these
    cells can fail), pods take the `ext-pod-undetected` step, and the node's own packets are
    short-circuited as before."""
    observation, differing = observe(scenario, order), []
    for cell in CELLS:
        if not cell.group.startswith("etp-"):
            continue
        blind = policy_cells.route_for(scenario, cell, order)
        detected = policy_cells.route_for(scenario.detected, cell, order)
        observed = observed_class(observation.answers[cell.key], scenario)
        if cell.client != dp.FROM_POD:
            assert blind == detected, (cell.key, blind, detected)
        elif blind != detected:  # the hostPort DNAT can come first (nftables, hostPort's hook last)
            assert "ext-pod-undetected" in blind.steps, (cell.key, blind.steps)
        if observable(blind, cell) != observable(detected, cell):
            assert not matches(observed, observable(detected, cell)), (cell.key, observed, detected)
            differing.append(cell.key)
    # without a hostPort pod on the port (etp-process) the detector always decides: Service or DROP
    assert any(key.startswith("etp-process ") and f"{dp.FROM_POD}->" in key for key in differing), differing
    if scenario.mode == "iptables" or order != HOSTPORT_FIRST:  # else the hostPort pod wins either way
        assert any(key.startswith("etp-hostport ") for key in differing), differing


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


# --- the no-detector shapes are kube-proxy's, minus the pods' short-circuit ----------------------

def without(text: str, marker: str) -> str:
    """Upstream text less its one line carrying `marker` (the pods' short-circuit)."""
    lines = text.splitlines(keepends=True)
    kept = [line for line in lines if marker not in line]
    assert len(lines) - len(kept) == 1, marker
    return "".join(kept)


def upstream_local_services() -> list[tuple[str, PolicyService]]:
    """The eTP Local Services of test_shapes_upstream's data: ns1/svca with a local endpoint (the
    source reading), ns2/svc2 without one (TestOverallIPTablesRules / TestOverallNFTablesRules)."""
    svca, svc2 = policy_services()[0], overall_services()[1]
    return [(name, PolicyService(service, external_local=True, local=service.local_endpoints))
            for name, service in (("svca", svca), ("svc2", svc2))]


def iptables_external(text: str, policy: PolicyService) -> tuple[list[str], list[str]]:
    """KUBE-EXT-* in order, and the NodePort's "has no local endpoints" DROP, normalised."""
    service = policy.service
    names, tables = chain_names([service]), parse_restore(text)
    ext = shapes.svc_chain(service, "KUBE-EXT-")
    drops = [canonical(rule, names) for rule in tables["filter"]["rules"].get("KUBE-EXTERNAL-SERVICES", [])
             if f"--dport {service.node_port} " in rule]
    return [canonical(rule, names) for rule in tables["nat"]["rules"].get(ext, [])], drops


def nftables_external(text: str, policy: PolicyService) -> tuple[list[str], set[str]]:
    """The `external-` chain in order, and the NodePort's no-endpoint-nodeports element, normalised."""
    service = policy.service
    chains, elements = parse_nft_dump(text)
    external = f"external-{service.namespace}/{service.name}/{service.protocol}/{service.port_name}"
    return chains[external], {item for item in elements.get("no-endpoint-nodeports", set())
                              if item.startswith(f"{service.protocol} . {service.node_port} ")}


@pytest.mark.parametrize("name, policy", [pytest.param(n, p, id=n) for n, p in upstream_local_services()])
def test_local_shapes_match_kube_proxy_with_and_without_a_detector(name, policy):
    """shapes_local's external chains (and the DROP without a local endpoint) are the upstream
    text's; with `cluster_cidr=None` they are that text less the pods' short-circuit line, as
    kube-proxy without a local detector writes them (pkg/proxy/iptables/proxier.go and
    pkg/proxy/nftables/proxier.go: `if proxier.localDetector.IsImplemented()`)."""
    files = {"svca": ("iptables-syncProxyRules.source.txt", "nftables-syncProxyRules.source.txt"),
             "svc2": ("iptables-TestOverallIPTablesRules.txt", "nftables-TestOverallNFTablesRules.txt")}[name]
    iptables_text, nftables_text = data(files[0]), data(files[1])
    label = policy.service.port_label
    cases = [
        (iptables_external, iptables_text, shapes_local.iptables_policies,
         f'"pod traffic for {label} external destinations"'),
        (nftables_external, nftables_text, shapes_local.nftables_policies,
         f"{policy.service.namespace}/{policy.service.name}/tcp/p80 ip saddr 10.0.0.0/8 goto"),
    ]
    for extract, upstream, write, marker in cases:
        detected = extract(upstream, policy)
        blind = extract(without(upstream, marker), policy)
        assert extract(write([policy], cluster_cidr="10.0.0.0/8"), policy) == detected, write.__name__
        assert extract(write([policy], cluster_cidr=None), policy) == blind, write.__name__
        assert len(blind[0]) == len(detected[0]) - 1 and blind[1] == detected[1]
        assert bool(blind[1]) == (not policy.local)  # the DROP exactly when no endpoint is local


# --- docs/datapath.md shows what this lab run observed ---------------------------------------------
# Here, not in a module of its own: a test file runs on one xdist worker, and this module's
# observations (functools.cache) are then shared with the doc's, instead of the whole lab being
# observed a second time on the other worker (31 s).

def test_docs_match_the_lab(lab_ready):
    """Regenerate with `python tests/lab/write_datapath_doc.py` (as root) when the lab's results change."""
    import write_datapath_doc

    text = write_datapath_doc.DOC.read_text(encoding="utf-8")
    section = text.split(write_datapath_doc.BEGIN, 1)[1].split(write_datapath_doc.END, 1)[0]
    assert section.strip() == write_datapath_doc.results().strip(), \
        "docs/datapath.md is stale: run `python tests/lab/write_datapath_doc.py` (as root)"
