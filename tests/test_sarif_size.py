"""Issue 35: a SARIF log carries the rules that have a result, each with its summary and a link,
not the full docs of every rule that ran (220 KB for one finding); `--sarif-full-rules` keeps them."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from test_sarif import make_finding, validate
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.findings import Report
from kubelint_ports.formatters import FormatOptions, get_formatter
from kubelint_ports.formatters.sarif import MAX_RESULTS
from kubelint_ports.policies import builtin_policies, enabled_by_default
from kubelint_ports.vocabulary import Severity

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
ONE_FINDING = EXAMPLES / "hostnetwork-web.yaml"  # one KP finding, the shortest example with one

# A log of one finding: its result, the run's frame and one rule. It was 224 KB.
ONE_FINDING_BUDGET = 8_000
# Per rule in the table: id, name, summary thrice, a link twice, level, tags. Its full docs were ~5.5 KB.
PER_RULE_BUDGET = 1_500


def lint(*args: str) -> str:
    result = CliRunner().invoke(app, ["lint", *args, "--format", "sarif"])
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def render(report: Report, options: FormatOptions | None = None) -> dict:
    out = io.StringIO()
    get_formatter("sarif")(report, out, options or FormatOptions())
    return json.loads(out.getvalue())


def driver_rules(log: dict) -> list[dict]:
    return log["runs"][0]["tool"]["driver"].get("rules", [])


def test_a_log_of_one_finding_is_small_and_whole():
    text = lint(str(ONE_FINDING))
    log = json.loads(text)
    validate(log)
    [result] = log["runs"][0]["results"]
    [rule] = driver_rules(log)
    assert rule["id"] == result["ruleId"] and result["ruleIndex"] == 0
    assert len(text.encode()) < ONE_FINDING_BUDGET, len(text.encode())
    assert len(json.dumps(rule, indent=2)) < PER_RULE_BUDGET
    full = lint(str(ONE_FINDING), "--sarif-full-rules")
    validate(json.loads(full))
    assert len(full.encode()) > 20 * len(text.encode()), "the full docs of every rule: what the option is for"


def test_the_examples_carry_only_their_rules():
    text = lint(str(EXAMPLES))
    log = json.loads(text)
    validate(log)
    rules, results = driver_rules(log), log["runs"][0]["results"]
    used = {result["ruleId"] for result in results}
    assert [rule["id"] for rule in rules] == [p.id for p in enabled_by_default(builtin_policies()) if p.id in used]
    assert all(rules[result["ruleIndex"]]["id"] == result["ruleId"] for result in results)
    assert len(json.dumps(rules, indent=2)) < PER_RULE_BUDGET * len(rules)
    full = lint(str(EXAMPLES), "--sarif-full-rules")
    full_log = json.loads(full)
    # the rules table is what the option changes: the results (with each finding's analysis as
    # markdown, issue 36) are the same in both
    lean_rules, full_rules = len(json.dumps(rules)), len(json.dumps(driver_rules(full_log)))
    assert lean_rules < full_rules / 4, (lean_rules, full_rules)
    assert len(text) < len(full), (len(text), len(full))
    assert {rule["id"] for rule in driver_rules(full_log)} == {p.id for p in enabled_by_default(builtin_policies())}


def test_a_clean_run_has_an_empty_rules_table():
    log = json.loads(lint(str(EXAMPLES / "clean.yaml")))
    validate(log)
    assert log["runs"][0]["results"] == [] and driver_rules(log) == []
    assert {rule["id"] for rule in driver_rules(json.loads(lint(str(EXAMPLES / "clean.yaml"),
                                                                "--sarif-full-rules")))} >= {"KP101", "KP201"}


def test_suppressed_results_keep_their_rule():
    """A suppressed result is a result (GitHub shows it as a dismissed alert): its rule stays."""
    findings = [make_finding(2, suppressed="accepted", suppressed_by="external"),
                make_finding(3, rule_id="KP201", rule_name="host-port-node-port-collision", severity=Severity.ERROR)]
    log = render(Report(findings, [], builtin_policies()))
    validate(log)
    assert [rule["id"] for rule in driver_rules(log)] == ["KP101", "KP201"]
    results = log["runs"][0]["results"]
    assert results[0]["suppressions"] and results[0]["ruleIndex"] == 0 and results[1]["ruleIndex"] == 1


def test_rule_index_points_into_the_reduced_table_whatever_the_order_of_results():
    order = [("KP201", "host-port-node-port-collision"), ("KP001", "invalid-port"), ("KP201", "x"),
             ("KP101", "host-port")]
    findings = [make_finding(line, rule_id=rule, rule_name=name) for line, (rule, name) in enumerate(order, 1)]
    log = render(Report(findings, [], builtin_policies()))
    validate(log)
    rules = driver_rules(log)
    assert [rule["id"] for rule in rules] == ["KP001", "KP101", "KP201"], "the rules' order, not the results'"
    assert [result["ruleIndex"] for result in log["runs"][0]["results"]] == [2, 0, 2, 1]


def test_a_result_of_a_rule_that_did_not_run_has_no_index():
    """As before: a finding whose rule is not among the report's rules gets no `ruleIndex` and adds no rule."""
    log = render(Report([make_finding(2, rule_id="KP999", rule_name="gone")], [], builtin_policies()))
    validate(log)
    assert "ruleIndex" not in log["runs"][0]["results"][0] and driver_rules(log) == []


@pytest.mark.slow
def test_rules_of_results_left_out_past_the_cap_are_left_out_too():
    findings = [make_finding(line) for line in range(1, MAX_RESULTS + 2)]
    findings[-1] = dataclasses.replace(findings[-1], rule_id="KP001", rule_name="invalid-port",
                                       suppressed="accepted", suppressed_by="external")  # the one dropped
    log = render(Report(findings, [], builtin_policies()))
    assert len(log["runs"][0]["results"]) == MAX_RESULTS
    assert [rule["id"] for rule in driver_rules(log)] == ["KP101"]


def test_short_rules_link_an_absolute_https_page():
    [rule] = driver_rules(json.loads(lint(str(ONE_FINDING))))
    uri = urlsplit(rule["helpUri"])
    assert uri.scheme == "https" and uri.netloc and uri.path.endswith(".md")
    assert (ROOT / "docs" / "rules" / Path(uri.path).name).is_file()
    assert rule["help"]["markdown"].endswith(f"]({rule['helpUri']}): what it checks, why, an example and the fix.")


@pytest.mark.parametrize("flag", [False, True])
def test_the_option_reaches_the_formatter_and_nothing_else_changes(flag):
    options = FormatOptions(sarif_category="k8s", quiet=True)
    given = dataclasses.replace(options, sarif_full_rules=True) if flag else options
    assert given.sarif_full_rules is flag
    assert {k: v for k, v in dataclasses.asdict(given).items() if k != "sarif_full_rules"} == {
        k: v for k, v in dataclasses.asdict(options).items() if k != "sarif_full_rules"}


def test_report_file_and_node_take_the_option(tmp_path):
    sarif = tmp_path / "r.sarif"
    result = CliRunner().invoke(app, ["lint", str(ONE_FINDING), "--report", f"sarif:{sarif}", "--sarif-full-rules"])
    assert result.exit_code in (0, 1), result.output
    assert len(driver_rules(json.loads(sarif.read_text()))) == len(enabled_by_default(builtin_policies()))
    snapshots = EXAMPLES / "node-snapshots" / "incident-000"
    for flag, many in (([], False), (["--sarif-full-rules"], True)):
        result = CliRunner().invoke(app, ["node", str(snapshots / "node-1"), "--format", "sarif", *flag])
        assert result.exit_code in (0, 1), result.output
        log = json.loads(result.stdout)
        used = {r["ruleId"] for r in log["runs"][0]["results"]}
        ids = {rule["id"] for rule in driver_rules(log)}
        assert (ids > used) if many else (ids == used), (ids, used)
