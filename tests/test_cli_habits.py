"""What users bring from ruff and kube-linter: headlines that fit, --explain, --quiet,
--statistics, --select/--ignore, NO_COLOR/FORCE_COLOR; missing inputs and empty standard input
as input errors; baselines that survive a new sidecar."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.formatters.text import WIDTH

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

AGENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: agent, namespace: ops}
spec:
  template:
    spec:
      containers:
        - name: agent
          ports:
            - containerPort: 31123
              hostPort: 31123
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: ops}
spec:
  type: NodePort
  ports: [{port: 80, nodePort: 31123}]
"""
SIDECAR = """\
        - name: mesh-proxy
          ports:
            - containerPort: 15001
"""


def run(*args: str, input: str | bytes | None = None, env: dict | None = None):
    return CliRunner().invoke(app, list(args), input=input, env=env)


@pytest.fixture
def manifest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.yaml").write_text(AGENT)
    return tmp_path / "app.yaml"


# --- text output -----------------------------------------------------------------------------------

FINDING_LINE = re.compile(r"^(?P<path>[^\s:]+):(?P<line>\d+):(?P<column>\d+): (?P<severity>\w+) +(?P<rule>KP\d+)"
                          r"(?: \[\*\])? (?P<claim>.*)$")


def finding_lines(text: str) -> list[re.Match]:
    return [match for line in text.splitlines() if (match := FINDING_LINE.match(line))]


def test_every_finding_line_starts_with_its_place_and_says_the_whole_claim(monkeypatch):
    """As ruff's formats: `path:line:col:` first, so terminals and editors open it; the headline is
    never cut (issue 25: ten example headlines lost the key fact to a 120-column cut): it is short
    by itself (issue 36), a long name shortened in the middle, never a port."""
    monkeypatch.chdir(ROOT)
    text = run("lint", "examples/", "--nodes", "examples/inventory/nodes.yaml").stdout
    data = json.loads(run("lint", "examples/", "--nodes", "examples/inventory/nodes.yaml", "--format", "json").stdout)
    lines = finding_lines(text)
    assert len(lines) == len(data["findings"]) and lines
    for match, finding in zip(lines, data["findings"]):
        assert (match["path"], int(match["line"]), int(match["column"]), match["severity"], match["rule"]) == (
            finding["file"], finding["line"], finding["column"], finding["severity"], finding["rule"])
        assert (ROOT / match["path"]).is_file()
        claim = match["claim"]
        assert claim == finding["short"]["headline"] and len(claim) <= 120
        if "…" not in claim:
            assert claim in finding["message"] or claim.rstrip(".") in finding["message"] or finding["rule"] in (
                "KP001", "KP301", "KP304", "KP402", "KP403", "KP404", "KP405"), (claim, finding["message"])
    concise = run("lint", "examples/", "--nodes", "examples/inventory/nodes.yaml", "--output-format", "concise").stdout
    assert [m.group(0) for m in finding_lines(concise)] == [m.group(0) for m in lines]
    summary = next(line for line in text.splitlines() if " objects from " in line and not FINDING_LINE.match(line))
    assert " objects from " in summary
    assert concise.splitlines() == [m.group(0) for m in lines] + [summary], "the lines and the summary, nothing else"


def test_explain_shows_the_explanation_object_and_related_places(manifest):
    plain = run("lint", "app.yaml").stdout
    assert "portmap" not in plain and "Run with -v" in plain
    explained = run("lint", "app.yaml", "-v").stdout
    assert explained == run("lint", "app.yaml", "--explain").stdout
    assert "app.yaml:11:15: error   KP201 hostPort 31123/TCP collides with nodePort 31123 of ops/Service/svc\n" \
        in explained
    assert "      on every node this pod runs on, this pod gets it" in explained
    assert "      KP201 host-port-node-port-collision on ops/Deployment/agent\n" in explained
    assert "      app.yaml:18:22: nodePort 31123 of ops/Service/svc\n" in explained
    assert "Run with -v" not in explained
    assert max(len(line) for line in explained.splitlines()) <= WIDTH


def test_a_message_without_a_claim_is_never_cut():
    import io

    from kubelint_ports.findings import Finding, Report
    from kubelint_ports.formatters import FormatOptions
    from kubelint_ports.formatters.text import format_report
    from kubelint_ports.vocabulary import Location, ObjectRef, Severity

    message = ("word " * 60 + "the-end").strip()
    finding = Finding(Location("a.yaml", 3, 5), "KP101", "host-port", Severity.WARNING, message,
                      ObjectRef("v1", "Pod", "", "p"))
    for explain in (False, True):
        out = io.StringIO()
        format_report(Report([finding], [], ()), out, FormatOptions(explain=explain))
        headline = out.getvalue().splitlines()[0]
        assert headline == f"a.yaml:3:5: warning KP101 {message}"


def test_quiet_prints_findings_only(manifest):
    quiet = run("lint", "app.yaml", "-q")
    assert quiet.exit_code == 1
    assert quiet.stdout.splitlines()[0].startswith("app.yaml:11:15: ") and "error" in quiet.stdout
    assert "in 2 objects" not in quiet.stdout and "Run with -v" not in quiet.stdout
    assert run("lint", "app.yaml", "-q", "--select", "KP204").stdout == ""  # nothing found: nothing printed
    baseline = manifest.parent / "b.json"
    assert run("lint", "app.yaml", "-q", "--write-baseline", str(baseline)).stderr == ""


def test_statistics_text_and_json(manifest):
    text = run("lint", "app.yaml", "--statistics").stdout
    assert text.splitlines()[:3] == ["     1  KP101  warning  host-port",
                                     "     1  KP102  warning  host-port-in-node-port-range",
                                     "     1  KP201  error    host-port-node-port-collision"]
    data = json.loads(run("lint", "app.yaml", "--statistics", "--format", "json").stdout)
    assert data["statistics"][2] == {"rule": "KP201", "name": "host-port-node-port-collision", "severity": "error",
                                     "count": 1}
    assert "findings" not in data and data["summary"]["error"] == 1
    refused = run("lint", "app.yaml", "--statistics", "--format", "sarif")
    assert refused.exit_code == 2 and "--statistics" in refused.output


@pytest.mark.parametrize("env, flag, colored", [
    ({}, None, False), ({"FORCE_COLOR": "1"}, None, True), ({"FORCE_COLOR": "0"}, None, False),
    ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, None, False), ({"NO_COLOR": ""}, None, False),
    ({"NO_COLOR": "1"}, "--color", True), ({"FORCE_COLOR": "1"}, "--no-color", False)])
def test_no_color_and_force_color(manifest, env, flag, colored):
    env = {"NO_COLOR": None, "FORCE_COLOR": None, **env}
    result = run("lint", "app.yaml", *([flag] if flag else []), env=env)
    assert ("\033[" in result.stdout) is colored


def test_force_color_never_colors_a_report_file(manifest):
    run("lint", "app.yaml", "-o", "out.txt", env={"FORCE_COLOR": "1", "NO_COLOR": None})
    assert "\033[" not in (manifest.parent / "out.txt").read_text()


# --- --select / --ignore -----------------------------------------------------------------------------

def rules_found(*args: str) -> set[str]:
    result = run("lint", "app.yaml", "--format", "json", *args)
    assert result.exit_code in (0, 1), result.output
    return {f["rule"] for f in json.loads(result.stdout)["findings"]}


def test_select_and_ignore_by_id_name_prefix_and_comma(manifest):
    assert rules_found() == {"KP101", "KP102", "KP201"}
    assert rules_found("--select", "KP201") == {"KP201"}
    assert rules_found("--select", "host-port,kp102") == {"KP101", "KP102"}
    assert rules_found("--select", "KP1", "--select", "KP2") == {"KP101", "KP102", "KP201"}
    assert rules_found("--select", "KP1") == {"KP101", "KP102"}
    assert rules_found("--ignore", "KP1") == {"KP201"}
    assert rules_found("--select", "all", "--ignore", "host-port-node-port-collision,KP101") == {"KP102"}
    assert run("lint", "app.yaml", "--select", "KP201").exit_code == 1
    assert run("lint", "app.yaml", "--ignore", "KP2").exit_code == 0


@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_unknown_rule_in_select_is_a_usage_error(manifest, option):
    result = run("lint", "app.yaml", option, "KP101,hots-port")
    assert result.exit_code == 2 and "unknown rule or rule prefix 'hots-port'" in result.output


def test_config_select_and_ignore(manifest):
    config = manifest.parent / ".kubelint-ports.yaml"
    config.write_text("select: [KP1, KP201]\nignore: [host-port]\n")
    assert rules_found() == {"KP102", "KP201"}
    assert rules_found("--select", "KP2") == {"KP201"}, "the command line's select replaces the config's"
    assert rules_found("--ignore", "KP102") == {"KP201"}, "ignores add up"
    import yaml

    effective = yaml.safe_load(run("config").stdout)
    from kubelint_ports.policies import builtin_policies

    kp1 = {policy.id for policy in builtin_policies() if policy.enabled and policy.id.startswith("KP1")}
    assert {"KP101", "KP102"} <= kp1  # derived from the policies: a new KP1xx rule needs no edit here
    assert effective["select"] == ["KP1", "KP201"] and set(effective["rules"]) == kp1 - {"KP101"} | {"KP201"}
    config.write_text("select: [KP101]\nignore:\n  - KP102\n  - nope\n")
    result = run("lint", "app.yaml")
    assert result.exit_code == 2 and ".kubelint-ports.yaml:4: ignore.1: unknown rule" in result.output
    config.write_text("select: KP101\n")
    result = run("lint", "app.yaml")
    assert result.exit_code == 2 and ".kubelint-ports.yaml:1: select:" in result.output


# --- inputs that are not there --------------------------------------------------------------------

def test_missing_file_points_at_the_command_line(manifest):
    result = run("lint", "nope.yaml", "app.yaml")
    assert result.exit_code == 2
    assert result.stdout.splitlines()[0] == "command line: input-error no such file or directory 'nope.yaml'"
    assert "KP201" in result.stdout, "the other inputs are still linted"
    assert ":0:0" not in result.stdout
    nodes = run("lint", "app.yaml", "--nodes", "inventory.yaml")
    assert nodes.exit_code == 2 and "command line: input-error no such file or directory 'inventory.yaml'" in nodes.stdout


def test_missing_path_in_the_config_names_its_line(manifest):
    (manifest.parent / ".kubelint-ports.yaml").write_text("paths:\n  - app.yaml\n  - charts/\n")
    result = run("lint")
    assert result.exit_code == 2
    assert ".kubelint-ports.yaml:3: paths.1: no such file or directory 'charts/'" in result.output
    assert run("lint", "app.yaml").exit_code == 1, "paths on the command line replace the config's"


@pytest.mark.parametrize("data", ["", "\n\n"])
def test_empty_standard_input_is_an_input_error_said_once(data):
    result = run("lint", "-", input=data)
    assert result.exit_code == 2
    assert "<stdin>: input-error standard input is empty" in result.stdout
    assert result.stderr == "" and result.output.count("standard input is empty") == 1
    sarif = run("lint", "-", "--format", "sarif", input=data)
    assert sarif.exit_code == 2 and "did the command before the pipe fail?" in sarif.stderr


def test_failed_pipe_does_not_pass_silently(tmp_path):
    """`false | kubelint-ports lint -` as a shell runs it."""
    import shutil
    import subprocess
    import sys

    shell = shutil.which("sh")
    if shell is None:
        pytest.skip("no POSIX shell")
    done = subprocess.run([shell, "-c", f'false | "{sys.executable}" -m kubelint_ports lint -'],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and (done.stdout + done.stderr).count("standard input is empty") == 1


# --- baselines ------------------------------------------------------------------------------------

def test_baseline_survives_a_sidecar_and_reordered_ports(manifest):
    baseline = manifest.parent / "baseline.json"
    assert run("lint", "app.yaml", "--write-baseline", str(baseline)).exit_code == 0
    entries = json.loads(baseline.read_text())
    assert entries["version"] == 2
    assert {e["fieldPath"] for e in entries["findings"]} == {
        "spec.template.spec.containers[agent].ports[31123/TCP].hostPort"}
    manifest.write_text(AGENT.replace("      containers:\n", "      containers:\n" + SIDECAR)
                        .replace("          ports:\n            - containerPort: 31123",
                                 "          ports:\n            - containerPort: 8080\n            - containerPort: 31123"))
    result = run("lint", "app.yaml", "--baseline", str(baseline), "--format", "json")
    assert result.exit_code == 0, result.stdout
    findings = json.loads(result.stdout)["findings"]
    assert {f["fieldPath"] for f in findings} == {"spec.template.spec.containers[1].ports[1].hostPort"}
    assert all(f["suppressed"] == "in the baseline" for f in findings)


def test_version_1_baselines_still_match_with_a_note(manifest):
    from kubelint_ports.engine import lint_paths

    report = lint_paths(["app.yaml"])
    old = {"version": 1, "tool": "kubelint-ports",
           "findings": [{"fingerprint": f.legacy_fingerprint, "rule": f.rule_id} for f in report.findings]}
    baseline = manifest.parent / "old.json"
    baseline.write_text(json.dumps(old))
    result = run("lint", "app.yaml", "--baseline", str(baseline))
    assert result.exit_code == 0, result.output
    assert "is a version 1 baseline" in result.stderr and "--write-baseline" in result.stderr
    baseline.write_text(json.dumps({**old, "version": 7}))
    result = run("lint", "app.yaml", "--baseline", str(baseline))
    assert result.exit_code == 2 and "unsupported baseline version 7" in result.output


def test_version_1_keys_do_not_match_a_version_2_baseline(manifest):
    """Legacy keys are honoured only in a legacy file: a version 2 file means exactly its keys."""
    from kubelint_ports.engine import LintOptions, lint_paths
    from kubelint_ports.suppressions import Baseline

    legacy = {f.legacy_fingerprint for f in lint_paths(["app.yaml"]).findings}
    as_v2 = lint_paths(["app.yaml"], LintOptions(baseline=Baseline.of(legacy, 2)))
    as_v1 = lint_paths(["app.yaml"], LintOptions(baseline=Baseline.of(legacy, 1)))
    assert not any(f.suppressed for f in as_v2.findings) and all(f.suppressed for f in as_v1.findings)


# --- rules that are off, report files that cannot be written, baselines being rewritten -----------

def test_select_turns_on_a_rule_that_is_off_and_ignore_of_an_off_rule_is_harmless(manifest):
    """ruff habits: `--ignore X` in CI args must not break when the config turns X off, and a rule
    off by default (KP55x) can be asked for by its id or name; a prefix takes only rules that are on."""
    (manifest.parent / "hostnet.yaml").write_text(AGENT.replace("      containers:", "      hostNetwork: true\n"
                                                                "      containers:", 1))
    result = run("lint", "hostnet.yaml", "--format", "json", "--select", "KP551")
    assert result.exit_code == 0 and {f["rule"] for f in json.loads(result.stdout)["findings"]} == {"KP551"}
    assert rules_found("--select", "KP5") == set(), "a prefix does not turn on rules that are off by default"
    (manifest.parent / ".kubelint-ports.yaml").write_text("rules:\n  host-port: {severity: off}\n")
    assert rules_found() == {"KP102", "KP201"}, "`severity: off` (YAML's false) turns the rule off"
    assert rules_found("--ignore", "KP101,KP551") == {"KP102", "KP201"}
    assert rules_found("--select", "host-port") == {"KP101"}, "the command line names it: it runs"


@pytest.mark.parametrize("args", [["-o", "missing-dir/out.txt"], ["--report", "sarif:missing-dir/out.sarif"],
                                  ["--write-baseline", "missing-dir/b.json"], ["-o", "."]])
def test_a_report_that_cannot_be_written_is_a_usage_error_before_linting(manifest, args):
    result = run("lint", "app.yaml", *args)
    assert result.exit_code == 2, result.output
    assert "kubelint-ports: error: cannot write" in result.output and "Traceback" not in result.output
    assert "KP201" not in result.stdout, "nothing is linted for a report that cannot be written"


def test_write_baseline_records_every_finding_whatever_baseline_is_configured(manifest):
    config = manifest.parent / ".kubelint-ports.yaml"
    config.write_text("baseline: .kubelint-ports-baseline.json\n")
    baseline = manifest.parent / ".kubelint-ports-baseline.json"
    first = run("lint", "app.yaml", "--write-baseline", str(baseline))  # the configured file does not exist yet
    assert first.exit_code == 0, first.output
    assert len(json.loads(baseline.read_text())["findings"]) == 3
    assert run("lint", "app.yaml").exit_code == 0
    again = run("lint", "app.yaml", "--write-baseline", str(baseline))  # refreshing it keeps what it held
    assert again.exit_code == 0 and len(json.loads(baseline.read_text())["findings"]) == 3


def test_a_colon_inside_backticks_stays_in_the_headline():
    from kubelint_ports.findings import split_message

    claim, rest = split_message("healthCheckNodePort 1 is only allowed with `externalTrafficPolicy: Local`; "
                                "no: the API server rejects it")
    assert claim == "healthCheckNodePort 1 is only allowed with `externalTrafficPolicy: Local`; no"
    assert rest == "the API server rejects it"
    assert split_message("a `b: c` d") == ("a `b: c` d", "")


def test_an_ignore_annotation_naming_no_rule_gets_a_note(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.yaml").write_text(AGENT.replace(
        "metadata: {name: agent, namespace: ops}",
        "metadata:\n  name: agent\n  namespace: ops\n  annotations:\n"
        "    kubelint-ports.io/ignore: \"hostport,KP9999,KP102\"", 1))
    result = run("lint", "a.yaml", "--format", "json")
    assert result.exit_code == 1, result.output  # KP201 still stands; the note changes no exit code
    assert ("kubelint-ports: note: a.yaml:7:5: kubelint-ports.io/ignore names 'hostport', 'KP9999', which are "
            "no rules") in result.stderr
    suppressed = {f["rule"] for f in json.loads(result.stdout)["findings"] if f["suppressed"]}
    assert suppressed == {"KP102"}


# --- what ruff, kube-linter and Checkov users expect of the command line (issue 25) ----------------

def test_rules_fit_100_columns_and_come_as_json():
    from kubelint_ports.policies import builtin_policies

    text = run("rules").stdout
    assert max(len(line) for line in text.splitlines()) <= 100
    data = json.loads(run("rules", "--format", "json").stdout)
    assert [rule["id"] for rule in data] == [policy.id for policy in builtin_policies()]
    assert {"id", "name", "severity", "enabled", "summary", "variants", "tags", "docs"} <= data[0].keys()
    assert all((ROOT / rule["docs"]).is_file() for rule in data)


def test_version_command_and_completion():
    from kubelint_ports import __version__

    assert run("version").stdout.startswith(f"kubelint-ports {__version__}\nHelm charts: ")
    assert "--install-completion" in run("--help").stdout


@pytest.mark.parametrize("where", ["explain", "select", "config-rules", "config-key"])
def test_a_misspelt_name_gets_a_did_you_mean(where, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n")
    if where == "explain":
        result = run("explain", "host-prot")
    elif where == "select":
        result = run("lint", "m.yaml", "--select", "host-prot")
    else:
        (tmp_path / ".kubelint-ports.yaml").write_text(
            "rules: {host-prot: off}\n" if where == "config-rules" else "pahts: [k8s]\n")
        result = run("lint", "m.yaml")
    assert result.exit_code == 2
    expected = "(did you mean 'paths'?)" if where == "config-key" else "(did you mean 'host-port'?)"
    assert expected in result.output
