"""A repository's own policies as hostile input, at run time (issue 31): a `pattern` that stays
under its per-match deadline but costs a second per port, and a message template that repeats a
20,000-item list in every finding. Each policy's patterns share one budget per run, every text is
matched once, a message has a length cap and a policy's findings a count cap; running out is said
once, as an input problem at the policy, never as an error per port.

No test here measures wall time: each counts the matches performed (a spy on the compiled
pattern) or injects a tiny budget, so a loaded machine cannot make them flaky."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

from kubelint_ports.engine import lint_paths
from kubelint_ports.policies import policies_with

pytestmark = pytest.mark.slow  # policies run to their budgets: not in the quick subset

SLOW = ".*.*.*.*.*.*="  # no repeated group (the load-time check lets it through), yet O(n^6): ~1 s on 50 characters
MESSAGE_CHARS = 2048  # the cap docs/safety.md states


def policy_data(policy_id: str, schema: dict, message: str = "port {containerPort} breaks the naming rule",
                **params) -> dict:
    return {"id": policy_id, "name": f"hostile-{policy_id.lower()}", "severity": "warning",
            "summary": "A policy a stranger's repository brings", "check": "port-schema",
            "params": {"target": "container-port", "message": message, "schema": schema, **params},
            "docs": {"what": "Flags what the hostile policy says.", "why": "A reproducer for issue 31's budgets.",
                     "example": "apiVersion: v1", "fix": "apiVersion: v1", "references": ["https://example.com"]}}


def write_policy(directory: Path, data: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{data['id']}-{data['name']}.yaml"
    path.write_text(json.dumps(data, indent=1))  # JSON is YAML; one key per line, so a key has its line
    return path


def load(directory: Path, *ids: str):
    wanted = [policy for policy in policies_with([str(directory)]) if policy.id in ids]
    assert len(wanted) == len(ids)
    return wanted


def pod(path: Path, ports: int, port_name=lambda index: f"p{index}", pod_name: str = "web") -> Path:
    entries = "\n".join(f"    - {{containerPort: {8000 + index}, name: {port_name(index)}}}" for index in range(ports))
    path.write_text(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {pod_name}}}\n"
                    f"spec:\n  containers:\n  - name: app\n    image: x\n    ports:\n{entries}\n")
    return path


class CountingPattern:
    """A compiled pattern that counts the texts it is asked to search."""

    def __init__(self, compiled):
        self.compiled, self.texts = compiled, []

    def search(self, text):
        self.texts.append(text)
        return self.compiled.search(text)


@pytest.fixture
def python_re(monkeypatch):
    """Patterns in Python's re, as without google-re2, with a spy on each one compiled: returns
    `spy(pattern)`, the pattern's CountingPattern."""
    from kubelint_ports import policy_schemas as user_schemas

    # The deadline and the budget's end are a timer signal, which only the main thread receives.
    assert threading.current_thread() is threading.main_thread(), "tests must run in the main thread"
    monkeypatch.setattr(user_schemas, "re2_compiled", lambda pattern: None)
    user_schemas.matcher.cache_clear()

    def spy(pattern: str) -> CountingPattern:
        compiled = user_schemas.matcher(pattern)
        if not isinstance(compiled.compiled, CountingPattern):
            compiled.compiled = CountingPattern(compiled.compiled)
        return compiled.compiled

    yield spy
    user_schemas.matcher.cache_clear()


@pytest.fixture
def tiny_budget(monkeypatch):
    """A policy's patterns may match for 50 ms in a run (and a match for 1 s), so a slow pattern
    spends the budget on its first text, however loaded the machine."""
    from kubelint_ports import policy_schemas as user_schemas

    monkeypatch.setattr(user_schemas, "POLICY_PATTERN_SECONDS", 0.05, raising=False)  # raising: the code before had none
    monkeypatch.setattr(user_schemas, "PATTERN_SECONDS", 1.0)


def line_of(path: Path, text: str) -> int:
    return next(number for number, line in enumerate(path.read_text().splitlines(), 1) if text in line)


# --- a pattern under its deadline: each text matched once, and one budget per policy and run --------

def test_a_text_met_on_every_port_is_matched_once(tmp_path, python_re):
    """A pod's name is the same for its 20 ports: the pattern on it ran 20 times (20 s with a
    slow pattern); now once."""
    pattern = "^[a-z]+$"
    write_policy(tmp_path / "policies", policy_data("KP970", {"properties": {"name": {"pattern": pattern}}}))
    [policy] = load(tmp_path / "policies", "KP970")
    spy = python_re(pattern)
    report = lint_paths([str(pod(tmp_path / "pod.yaml", 20))], policies=[policy])
    assert not report.diagnostics and not report.findings
    assert spy.texts == ["web"]


def test_matches_are_at_most_the_distinct_texts(tmp_path, python_re):
    pattern = "^p[0-9]$"
    write_policy(tmp_path / "policies", policy_data("KP971", {"properties": {"portName": {"pattern": pattern}}}))
    [policy] = load(tmp_path / "policies", "KP971")
    spy = python_re(pattern)
    report = lint_paths([str(pod(tmp_path / "pod.yaml", 30, port_name=lambda index: f"p{index % 12}"))],
                        policies=[policy])
    assert sorted(spy.texts) == sorted({f"p{index}" for index in range(12)})
    assert len(report.findings) == 4  # ports 10 and 22 are named p10, 11 and 23 p11: two digits, no match


def test_a_slow_pattern_stops_its_policy_with_one_input_problem(tmp_path, python_re, tiny_budget):
    """Twenty distinct port names, each a second of backtracking under the deadline: the policy
    spends its budget on the first and stops, and says so once, at the pattern in its file."""
    path = write_policy(tmp_path / "policies", policy_data("KP972", {"properties": {"portName": {"pattern": SLOW}}}))
    [policy] = load(tmp_path / "policies", "KP972")
    spy = python_re(SLOW)
    report = lint_paths([str(pod(tmp_path / "pod.yaml", 20, port_name=lambda index: f"{'a' * 48}{index}"))],
                        policies=[policy])
    assert len(spy.texts) == 1
    assert not report.findings  # nothing flagged on a match that never finished
    [problem] = report.diagnostics
    assert not problem.internal
    assert problem.location.path == str(path) and problem.location.line == line_of(path, '"pattern"')
    assert "KP972" in problem.message and repr(SLOW) in problem.message
    assert "20 container ports unchecked" in problem.message


def test_a_policy_with_a_sane_pattern_keeps_its_findings_within_the_budget(tmp_path, python_re, tiny_budget):
    pattern = "^web-[0-9]+$"
    write_policy(tmp_path / "policies", policy_data("KP973", {"properties": {"portName": {"pattern": pattern}}}))
    [policy] = load(tmp_path / "policies", "KP973")
    report = lint_paths([str(pod(tmp_path / "pod.yaml", 20))], policies=[policy])
    assert len(report.findings) == 20 and not report.diagnostics


def test_the_runs_policies_share_a_budget_too(tmp_path, python_re, monkeypatch):
    """Many policies of one repository cannot each spend a policy's budget: the run's is shared.
    The first policy spends it, the second says it ran out for the run."""
    from kubelint_ports import policy_schemas as user_schemas

    monkeypatch.setattr(user_schemas, "RUN_PATTERN_SECONDS", 0.05, raising=False)
    monkeypatch.setattr(user_schemas, "PATTERN_SECONDS", 1.0)
    for policy_id in ("KP974", "KP975"):
        write_policy(tmp_path / "policies", policy_data(policy_id, {"properties": {"portName": {"pattern": SLOW}}}))
    policies = load(tmp_path / "policies", "KP974", "KP975")
    spy = python_re(SLOW)
    report = lint_paths([str(pod(tmp_path / "pod.yaml", 20, port_name=lambda index: f"{'a' * 48}{index}"))],
                        policies=policies)
    assert len(spy.texts) == 1
    assert sorted(re.search(r"KP97\d", problem.message)[0] for problem in report.diagnostics) == ["KP974", "KP975"]
    assert not any(problem.internal for problem in report.diagnostics)


def test_a_policy_budget_is_the_runs_not_each_units(tmp_path, python_re, tiny_budget):
    """A repository of 1,000 deployment units runs each policy 1,000 times: the memo and the
    budget span them all, and the policy speaks once."""
    from kubelint_ports.engine import LintOptions, load_cluster, run_checks_by_unit

    write_policy(tmp_path / "policies", policy_data("KP976", {"properties": {"portName": {"pattern": SLOW}}}))
    [policy] = load(tmp_path / "policies", "KP976")
    spy = python_re(SLOW)
    cluster, _, diagnostics = load_cluster([str(pod(tmp_path / "pod.yaml", 5, port_name=lambda i: f"{'a' * 48}{i}"))],
                                           LintOptions(jobs=1))
    cluster.units.extend((f"unit-{number}", cluster) for number in range(3))
    assert run_checks_by_unit(cluster, [policy], diagnostics) == []
    assert len(spy.texts) == 1
    [problem] = diagnostics
    assert "15 container ports unchecked" in problem.message  # 5 ports in each of 3 units


def test_a_parameters_items_matched_at_load_share_a_budget(tmp_path, python_re, tiny_budget):
    """A list parameter of many names is checked against its declared schema when the policy
    loads: the same budget holds there, and identical items are matched once."""
    from kubelint_ports.policies import PolicyError

    # 45 characters: half a second each, under the deadline, and ten times the tiny budget
    data = policy_data("KP977", {"properties": {"name": {"enum": {"$param": "names"}}}},
                       parameters={"names": {"type": "array", "items": {"type": "string", "pattern": SLOW}}},
                       names=["a" * 45] * 50 + [f"{'a' * 45}{index}" for index in range(50)])
    path = write_policy(tmp_path / "policies", data)
    spy = python_re(SLOW)
    with pytest.raises(PolicyError) as raised:
        policies_with([str(tmp_path / "policies")])
    assert raised.value.path == str(path) and raised.value.message.startswith("params.names")
    assert "re2" in raised.value.message
    assert len(spy.texts) == 1  # the budget is spent on the first


@pytest.mark.parametrize("budget", ["POLICY_SECONDS", "RUN_POLICY_SECONDS"])
def test_a_schema_too_big_to_check_every_port_stops_its_policy(tmp_path, monkeypatch, budget):
    """No pattern at all: an `each` over 20,000 ranges is 20,000 subschemas for every port (6 ms a
    port, a minute per 10,000 ports). Checking has a time budget per policy, and per run, too
    (here 2,000 ranges and a budget spent by the first port)."""
    from kubelint_ports.checks.manifest import port_schema

    monkeypatch.setattr(port_schema, budget, 1e-9, raising=False)  # spent on the first port, however fast
    ranges = [{"min": 30_000 + index, "max": 30_000 + index} for index in range(2_000)]  # no port of the pod
    data = policy_data("KP983", {"properties": {"containerPort": {"anyOf": [
        {"$param": "ranges", "each": {"minimum": {"$item": "min"}, "maximum": {"$item": "max"}}}]}}},
                       parameters={"ranges": {"type": "array"}}, ranges=ranges)
    path = write_policy(tmp_path / "policies", data)
    [policy] = load(tmp_path / "policies", "KP983")
    report = lint_paths([str(pod(tmp_path / "pod.yaml", 20))], policies=[policy])
    assert len(report.findings) == 1  # the first port, checked before the budget was seen spent
    [problem] = report.diagnostics
    assert not problem.internal and problem.location.path == str(path)
    assert "KP983" in problem.message and "19 container ports unchecked" in problem.message


# --- a message has a length cap ----------------------------------------------------------------------

def test_a_template_over_a_huge_list_is_cut_with_a_count(tmp_path):
    """`{ranges:{min}-{max}}` over 20,000 ranges wrote 240 KB per finding (238 MB of JSON from a
    500 KB policy): a message is at most 2,048 characters, and says how many it left out."""
    ranges = [{"min": 1000 + index, "max": 1001 + index} for index in range(20_000)]
    data = policy_data("KP978", {"properties": {"containerPort": {"maximum": 1}}},
                       message="port {containerPort} is outside {ranges:{min}-{max}}",
                       parameters={"ranges": {"type": "array"}}, ranges=ranges)
    write_policy(tmp_path / "policies", data)
    [policy] = load(tmp_path / "policies", "KP978")
    report = lint_paths([str(pod(tmp_path / "pod.yaml", 3))], policies=[policy])
    assert len(report.findings) == 3 and not report.diagnostics
    for finding in report.findings:
        assert len(finding.message) <= MESSAGE_CHARS
        assert finding.message.startswith(f"port {finding.port} is outside 1000-1001, 1001-1002")
        shown = finding.message.count("-")  # one per range: "1000-1001"
        left_out = int(re.search(r"and ([\d,]+) more$", finding.message)[1].replace(",", ""))
        assert shown + left_out == 20_000


@pytest.mark.parametrize("message", [
    "{name} " * 100_000,  # a long value, many times
    "port {containerPort}: " + "words " * 100_000,  # the policy's own text
    "{labels}",  # a map of 5,000 labels
])
def test_any_message_is_capped(tmp_path, message):
    write_policy(tmp_path / "policies", policy_data("KP979", {"properties": {"containerPort": {"maximum": 1}}},
                                                    message=message))
    [policy] = load(tmp_path / "policies", "KP979")
    labels = ", ".join(f"label-{index}: value-{index}" for index in range(5000))
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {'n' * 5000}, labels: {{{labels}}}}}\n"
                        "spec:\n  containers:\n  - name: app\n    image: x\n    ports: [{containerPort: 80}]\n")
    [finding] = lint_paths([str(manifest)], policies=[policy]).findings
    assert len(finding.message) <= MESSAGE_CHARS
    assert re.search(r"(and [\d,]+ more|cut at 2,048 characters\))$", finding.message)


def test_a_message_without_placeholders_is_capped_too(tmp_path):
    write_policy(tmp_path / "policies", policy_data("KP980", {"properties": {"containerPort": {"maximum": 1}}},
                                                    message="no ports here. " * 10_000))
    [policy] = load(tmp_path / "policies", "KP980")
    [finding] = lint_paths([str(pod(tmp_path / "pod.yaml", 1))], policies=[policy]).findings
    assert len(finding.message) <= MESSAGE_CHARS


def test_short_messages_are_unchanged():
    from kubelint_ports.checks.manifest.port_schema import rendered

    context = {"containerPort": 80, "protocol": "TCP", "labels": {"app": "web"}}
    params = {"allowed": [{"min": 8000, "max": 8099}, {"min": 9000, "max": 9001}], "none": []}
    assert rendered("port {containerPort}/{protocol} ({labels}) not in {allowed:{min}-{max}}; {none:{min}}",
                    context, params, {}) == "port 80/TCP (app=web) not in 8000-8099, 9000-9001; none"


# --- a policy's findings have a count cap --------------------------------------------------------------

def test_a_policys_findings_past_the_cap_are_counted_once(tmp_path, monkeypatch):
    from kubelint_ports.checks.manifest import port_schema

    monkeypatch.setattr(port_schema, "MAX_FINDINGS", 5, raising=False)
    path = write_policy(tmp_path / "policies", policy_data("KP981", {"properties": {"containerPort": {"maximum": 1}}}))
    [policy] = load(tmp_path / "policies", "KP981")
    report = lint_paths([str(pod(tmp_path / "pod.yaml", 20))], policies=[policy])
    assert len(report.findings) == 5
    [problem] = report.diagnostics
    assert not problem.internal and problem.location.path == str(path)
    assert "KP981" in problem.message and "15 more" in problem.message


def test_the_cap_counts_findings_over_the_whole_run(tmp_path, monkeypatch):
    """Across deployment units: the count is the run's, and the note says the run's total."""
    from kubelint_ports.checks.manifest import port_schema
    from kubelint_ports.engine import LintOptions, load_cluster, run_checks_by_unit

    monkeypatch.setattr(port_schema, "MAX_FINDINGS", 5, raising=False)
    write_policy(tmp_path / "policies", policy_data("KP982", {"properties": {"containerPort": {"maximum": 1}}}))
    [policy] = load(tmp_path / "policies", "KP982")
    cluster, _, diagnostics = load_cluster([str(pod(tmp_path / "pod.yaml", 4))], LintOptions(jobs=1))
    cluster.units.extend((f"unit-{number}", cluster) for number in range(3))
    findings = run_checks_by_unit(cluster, [policy], diagnostics)
    assert len(findings) == 4  # the 4 ports, each found in units 0 and 1 (5 shown in all)
    [problem] = diagnostics
    assert "5 findings shown and 7 more" in problem.message
