"""SARIF output: schema-valid, levels kept, stable fingerprints, byte-stable, GitHub's limits."""

from __future__ import annotations

import dataclasses
import os
import io
import json
from pathlib import Path

import pytest
import sarif_om as om

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.findings import Finding, Location, ObjectRef, Report, Severity
from kubelint_ports.formatters import FormatOptions, get_formatter
from kubelint_ports.formatters.sarif import FINGERPRINT_KEY, MAX_RESULTS, to_sarif_dict
from kubelint_ports.policies import builtin_policies, enabled_by_default

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "shared/schemas/sarif-schema-2.1.0.json"

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx-hostport, namespace: web}
spec:
  template:
    spec:
      containers:
        - name: nginx
          ports:
            - containerPort: 80
              hostPort: 31123
"""
SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: nginx-nodeport, namespace: web}
spec:
  type: NodePort
  ports:
    - port: 80
      nodePort: 31123
"""
MALFORMED = "apiVersion: v1\nkind: [\n"


@pytest.fixture
def manifests(tmp_path, monkeypatch):
    """A hostPort/NodePort collision across two files (so a related location) and a broken file."""
    monkeypatch.chdir(tmp_path)  # findings' paths are relative to the working directory
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy/app.yaml").write_text(DEPLOYMENT)
    (tmp_path / "service.yaml").write_text(SERVICE)
    (tmp_path / "broken.yaml").write_text(MALFORMED)
    return tmp_path


def render(report: Report, category: str = "") -> str:
    out = io.StringIO()
    get_formatter("sarif")(report, out, FormatOptions(sarif_category=category))
    return out.getvalue()


def sarif_for(paths, category: str = "") -> dict:
    return json.loads(render(lint_paths(paths, LintOptions()), category))


def validate(log: dict) -> None:
    if not SCHEMA_PATH.is_file():
        pytest.skip(f"SARIF 2.1.0 schema not found at {SCHEMA_PATH} (the repo's parent should hold shared/)")
    import jsonschema

    errors = [f"{list(e.absolute_path)}: {e.message}" for e in jsonschema.Draft4Validator(
        json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))).iter_errors(log)]
    assert errors == []


def make_finding(line: int, severity: Severity = Severity.WARNING, **changes) -> Finding:
    finding = Finding(Location("app.yaml", line, 3, line, 9), "KP101", "host-port", severity, "message",
                      ObjectRef("v1", "Pod", "default", f"pod-{line}"), field_path="spec.x")
    return dataclasses.replace(finding, **changes)


def test_real_run_is_schema_valid_with_diagnostics_and_related_locations(manifests):
    log = sarif_for(["."])
    validate(log)
    run = log["runs"][0]
    assert log["version"] == "2.1.0" and "$schema" in log
    driver = run["tool"]["driver"]
    assert driver["name"] == "kubelint-ports" and driver["version"] == driver["semanticVersion"]
    collision = next(r for r in run["results"] if r["ruleId"] == "KP201")
    assert collision["level"] == "error"
    assert collision["locations"][0]["logicalLocations"] == [
        {"name": "nginx-hostport", "fullyQualifiedName": "web/Deployment/nginx-hostport", "kind": "resource"}]
    related = collision["relatedLocations"]
    assert related[0]["id"] == 1 and "nginx-nodeport" in related[0]["message"]["text"]
    assert related[0]["physicalLocation"]["artifactLocation"] == {"uri": "service.yaml", "uriBaseId": "%SRCROOT%"}
    assert related[0]["physicalLocation"]["region"]["startLine"] == 8
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    [notification] = invocation["toolExecutionNotifications"]
    assert notification["level"] == "error" and notification["message"]["text"].startswith("invalid YAML")
    assert notification["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "broken.yaml"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == manifests.resolve().as_uri() + "/"
    assert run["columnKind"] == "unicodeCodePoints"


def test_rules_table_and_rule_index(manifests):
    log = sarif_for(["."])
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == [policy.id for policy in enabled_by_default(builtin_policies())]
    for rule, policy in zip(rules, enabled_by_default(builtin_policies())):
        assert rule["defaultConfiguration"]["level"] == str(policy.severity)  # kept even for "warning"
        assert rule["help"]["markdown"].startswith(f"# {policy.id} {policy.name}")
        assert len(rule["fullDescription"]["text"]) <= 1024
        assert rule["properties"]["precision"] == "high"
        assert "security-severity" not in rule["properties"]
    results = log["runs"][0]["results"]
    assert {r["ruleId"] for r in results} >= {"KP101", "KP102", "KP201"}
    for result in results:
        assert result["level"] in ("error", "warning", "note")
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]


def test_end_columns_cover_the_key_and_value(manifests):
    [result] = [r for r in sarif_for(["deploy/app.yaml"])["runs"][0]["results"] if r["ruleId"] == "KP101"]
    line = DEPLOYMENT.splitlines().index("              hostPort: 31123") + 1
    start = "              hostPort: 31123".index("hostPort") + 1
    assert result["locations"][0]["physicalLocation"]["region"] == {
        "startLine": line, "startColumn": start, "endLine": line, "endColumn": start + len("hostPort: 31123")}


def test_missing_end_falls_back_to_one_character():
    finding = make_finding(4, location=Location("app.yaml", 4, 7))
    log = json.loads(render(Report([finding], [], builtin_policies())))
    assert log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 4, "startColumn": 7, "endLine": 4, "endColumn": 8}


def test_fingerprint_survives_line_shifts(manifests):
    def fingerprints():
        results = sarif_for(["deploy/app.yaml", "service.yaml"])["runs"][0]["results"]
        return [(r["ruleId"], r["partialFingerprints"][FINGERPRINT_KEY],
                 r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results]

    before = fingerprints()
    (manifests / "deploy/app.yaml").write_text("\n\n\n" + DEPLOYMENT)
    after = fingerprints()
    assert [(rule, key) for rule, key, _ in after] == [(rule, key) for rule, key, _ in before]
    assert [line for *_, line in after] == [line + 3 for *_, line in before]
    assert len({key for _, key, _ in before}) == len(before)  # distinct rules -> distinct keys
    assert all("primaryLocationLineHash" not in r["partialFingerprints"]
               for r in sarif_for(["."])["runs"][0]["results"])


def test_output_is_byte_identical_across_runs(manifests):
    first = render(lint_paths(["."], LintOptions()))
    second = render(lint_paths(["."], LintOptions()))
    assert first == second and first.endswith("}\n")


def test_automation_details_only_with_a_category(manifests):
    assert "automationDetails" not in sarif_for(["service.yaml"])["runs"][0]
    log = sarif_for(["service.yaml"], category="manifests/prod")
    assert log["runs"][0]["automationDetails"] == {"id": "manifests/prod"}
    validate(log)


def test_empty_report_still_has_results(manifests):
    log = sarif_for(["service.yaml"])
    assert log["runs"][0]["results"] == []
    assert log["runs"][0]["invocations"] == [{"executionSuccessful": True}]
    validate(log)


def test_uris_relative_encoded_absolute_and_stdin(manifests):
    (manifests / "my dir").mkdir()
    (manifests / "my dir/a b#1.yaml").write_text(DEPLOYMENT)
    absolute = str((manifests / "deploy/app.yaml").resolve())
    results = sarif_for(["my dir"])["runs"][0]["results"]
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "my%20dir/a%20b%231.yaml", "uriBaseId": "%SRCROOT%"}
    report = Report([make_finding(2, location=Location(absolute, 2, 1, 2, 5)),
                     make_finding(3, location=Location("<stdin>", 3, 1, 3, 5))], [], builtin_policies())
    log = json.loads(render(report))
    validate(log)
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in log["runs"][0]["results"]]
    assert uris == [{"uri": Path(absolute).as_uri()}, {"uri": "stdin"}]


@pytest.mark.parametrize("kind", ["inSource", "external"])
def test_suppressed_findings_are_kept_with_a_suppression(kind):
    finding = dataclasses.replace(make_finding(2, suppressed="ports are fixed by the appliance"), suppressed_by=kind)
    log = json.loads(render(Report([finding], [], builtin_policies())))
    validate(log)
    assert log["runs"][0]["results"][0]["suppressions"] == [
        {"kind": kind, "justification": "ports are fixed by the appliance"}]


def test_results_are_capped_with_a_notification():
    findings = [make_finding(line) for line in range(1, MAX_RESULTS + 11)]
    findings[-1] = dataclasses.replace(findings[-1], severity=Severity.ERROR)  # past the cap, but most severe
    log = json.loads(render(Report(findings, [], builtin_policies())))
    run = log["runs"][0]
    assert len(run["results"]) == MAX_RESULTS
    assert run["results"][-1]["level"] == "error"
    [notification] = run["invocations"][0]["toolExecutionNotifications"]
    assert notification["level"] == "warning" and "25,000" in notification["message"]["text"]
    assert run["invocations"][0]["executionSuccessful"] is True


def test_serializer_keeps_default_level_and_sorts_sets():
    result = om.Result(message=om.Message(text="m"), level="warning", rule_id="KP101")
    assert to_sarif_dict(result) == {"message": {"text": "m"}, "level": "warning", "ruleId": "KP101"}
    assert to_sarif_dict(om.ReportingConfiguration(level="warning")) == {"level": "warning"}
    assert to_sarif_dict(om.PropertyBag(tags={"b", "a"})) == {"tags": ["a", "b"]}
    assert to_sarif_dict(om.Run(tool=om.Tool(driver=om.ToolComponent(name="x")), results=[]))["results"] == []


def test_no_python_reprs_leak_into_output(manifests):
    text = render(lint_paths(["."], LintOptions()))
    assert "{'" not in text and "<sarif_om" not in text and "NOTHING" not in text


MULTITOOL_VERSION = "5.7.0"
GITHUB_RULES = Path(__file__).resolve().parents[2] / "shared" / "tools" / "sarif-multitool-github-rules.xml"


def sarif_multitool() -> Path:
    """The SARIF multitool from npm, installed once into a cache directory (the registry is reachable
    here and in CI); skipped with the reason when npm or the rules file is missing."""
    import shutil
    import subprocess

    if not GITHUB_RULES.exists():
        pytest.skip(f"GitHub rules for the multitool not found at {GITHUB_RULES}")
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the SARIF multitool check needs it")
    cache = Path(os.environ.get("KUBELINT_TOOL_CACHE", Path.home() / ".cache" / "kubelint-ports")) / \
        f"sarif-multitool-{MULTITOOL_VERSION}"
    tool = cache / "node_modules" / ".bin" / "sarif-multitool"
    if not tool.exists():
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund",
                               f"@microsoft/sarif-multitool@{MULTITOOL_VERSION}"],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not tool.exists():
            pytest.skip(f"could not install @microsoft/sarif-multitool@{MULTITOOL_VERSION}: {done.stderr[-500:]}")
    return tool


def test_github_accepts_our_sarif_per_the_multitool(manifests, tmp_path):
    """`sarif-multitool validate` with GitHub's rules; its exit code is always 0, so read its log."""
    import subprocess

    tool = sarif_multitool()
    log_file = tmp_path / "out.sarif"
    log_file.write_text(render(lint_paths(["."], LintOptions())))
    result_file = tmp_path / "validation.sarif"
    done = subprocess.run([str(tool), "validate", str(log_file), "--rule-kind", "\"Gh;Sarif\"", "--config",
                           str(GITHUB_RULES), "-o", str(result_file), "--log", "ForceOverwrite"],
                          capture_output=True, text=True, timeout=300)
    assert result_file.exists(), done.stdout + done.stderr
    validation = json.loads(result_file.read_text(encoding="utf-8-sig"))
    problems = [(r.get("ruleId"), r["message"].get("text") or r["message"].get("id"))
                for run in validation["runs"] for r in run.get("results", []) if r.get("level") == "error"]
    assert not problems, problems
