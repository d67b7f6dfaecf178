"""JUnit XML and GitLab Code Quality reports, validated against their schemas; paths relative to
the repository's top level from any directory."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest

from external_tools import junit_schema
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.findings import Finding, Report
from kubelint_ports.vocabulary import Diagnostic, Location, ObjectRef, Severity
from kubelint_ports.formatters import FormatOptions, get_formatter
from kubelint_ports.policies import builtin_policies

GITLAB_SCHEMA = Path(__file__).resolve().parent / "schemas" / "gitlab-codequality.schema.json"

COLLISION = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      containers:
        - name: web
          ports: [{containerPort: 80, hostPort: 31123}]
"""
SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  type: NodePort
  ports: [{port: 80, nodePort: 31123}]
"""


@pytest.fixture
def repository(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "deploy.yaml").write_text(COLLISION)
    (tmp_path / "k8s" / "service.yaml").write_text(SERVICE)
    (tmp_path / "k8s" / "broken.yaml").write_text("kind: [\n")
    monkeypatch.chdir(tmp_path / "k8s")  # run from a subdirectory: paths stay repository-relative
    return tmp_path


def render(kind: str, report: Report, **options) -> str:
    out = io.StringIO()
    get_formatter(kind)(report, out, FormatOptions(**options))
    return out.getvalue()


def finding(**changes) -> Finding:
    base = Finding(Location("app.yaml", 3, 5, 3, 12), "KP101", "host-port", Severity.WARNING,
                   "container 'web' claims hostPort 80/TCP: why", ObjectRef("v1", "Pod", "shop", "web"),
                   field_path="spec.containers[0].ports[0].hostPort")
    return dataclasses.replace(base, **changes)


# --- JUnit ----------------------------------------------------------------------------------------

def validate_junit(text: str):
    import xmlschema

    schema = xmlschema.XMLSchema(str(junit_schema()))
    schema.validate(text)
    import xml.etree.ElementTree as ET

    return ET.fromstring(text)


def test_junit_is_valid_and_counts_failures_and_errors(repository):
    report = lint_paths([".", "missing.yaml"], LintOptions())
    tree = validate_junit(render("junit", report))
    assert tree.tag == "testsuites"
    suites = {suite.get("name"): suite for suite in tree}
    assert set(suites) == {"command line", "k8s/broken.yaml", "k8s/deploy.yaml"}
    deploy = suites["k8s/deploy.yaml"]
    assert deploy.get("file") == "k8s/deploy.yaml" and "file" not in suites["command line"].attrib
    failures = [case.find("failure") for case in deploy]
    assert {failure.get("type") for failure in failures} == {"KP101", "KP102", "KP201"}
    collision = next(f for f in failures if f.get("type") == "KP201")
    assert collision.get("message") == "error: hostPort 31123/TCP collides with nodePort 31123 of shop/Service/web"
    assert "k8s/service.yaml:6:" in collision.text and "object: shop/Deployment/web" in collision.text
    assert suites["k8s/broken.yaml"].find("testcase/error").get("type") == "input-error"
    assert (tree.get("tests"), tree.get("failures"), tree.get("errors")) == ("5", "3", "2")


def test_junit_marks_suppressed_findings_skipped_and_survives_control_characters():
    report = Report([finding(suppressed="reviewed"), finding(message="bad \x01 name: \x1b[31m")], [], ())
    tree = validate_junit(render("junit", report, source_root=str(Path.cwd())))
    cases = list(tree.iter("testcase"))
    assert cases[0].find("skipped").get("message") == "suppressed: reviewed"
    assert "\ufffd" in cases[1].find("failure").text
    assert tree.get("failures") == "1"


def test_junit_of_a_clean_run_is_valid_and_empty():
    tree = validate_junit(render("junit", Report([], [], builtin_policies())))
    assert (tree.get("tests"), list(tree)) == ("0", [])


# --- GitLab Code Quality ---------------------------------------------------------------------------

def validate_gitlab(text: str) -> list:
    import jsonschema

    data = json.loads(text)
    schema = json.loads(GITLAB_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]
    assert errors == []
    fingerprints = [issue["fingerprint"] for issue in data]
    assert len(fingerprints) == len(set(fingerprints)), "GitLab drops issues whose fingerprint repeats"
    return data


def test_gitlab_report_is_valid_with_repository_paths(repository):
    report = lint_paths([".", "missing.yaml"], LintOptions())
    issues = validate_gitlab(render("gitlab", report))
    by_check = {issue["check_name"]: issue for issue in issues}
    assert set(by_check) == {"KP101", "KP102", "KP201", "input-error"}
    collision = by_check["KP201"]
    assert collision["severity"] == "major" and by_check["KP101"]["severity"] == "minor"
    assert collision["location"] == {"path": "k8s/deploy.yaml", "lines": {"begin": 9, "end": 9}}
    assert collision["fingerprint"] == next(f.fingerprint for f in report.findings if f.rule_id == "KP201")
    assert by_check["input-error"]["location"]["path"] == "k8s/broken.yaml"
    assert by_check["input-error"]["severity"] == "critical"
    assert len(issues) == 4, "the command line's error has no file to show it on"


def test_gitlab_leaves_suppressed_out_and_numbers_repeated_fingerprints():
    twin = finding()
    report = Report([twin, dataclasses.replace(twin, location=Location("app.yaml", 9, 5)),
                     finding(suppressed="reviewed", rule_id="KP102")], [], ())
    issues = validate_gitlab(render("gitlab", report, source_root=str(Path.cwd())))
    assert [issue["check_name"] for issue in issues] == ["KP101", "KP101"]
    assert issues[0]["fingerprint"] == twin.fingerprint != issues[1]["fingerprint"]


def test_gitlab_schema_rejects_what_gitlab_rejects():
    """The schema is ours (GitLab publishes none): show that it can fail."""
    import jsonschema

    schema = json.loads(GITLAB_SCHEMA.read_text(encoding="utf-8"))
    good = {"description": "d", "check_name": "c", "fingerprint": "f", "severity": "minor",
            "location": {"path": "a.yaml", "lines": {"begin": 1}}}
    assert jsonschema.Draft202012Validator(schema).is_valid([good])
    for bad in ({**good, "severity": "warning"}, {**good, "location": {"path": "/abs/a.yaml", "lines": {"begin": 1}}},
                {key: value for key, value in good.items() if key != "fingerprint"},
                {**good, "location": {"path": "a.yaml", "lines": {"begin": 0}}}):
        assert not jsonschema.Draft202012Validator(schema).is_valid([bad]), bad


def test_command_line_formats(repository):
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    for kind in ("junit", "gitlab"):
        result = CliRunner().invoke(app, ["lint", "--format", kind, "deploy.yaml", "service.yaml"])
        assert result.exit_code == 1, result.output
        assert ("<testsuites" in result.stdout) if kind == "junit" else json.loads(result.stdout)
    out = repository / "quality.json"
    result = CliRunner().invoke(app, ["lint", "--report", f"gitlab:{out}", "--report", f"junit:{out}.xml", "."])
    assert result.exit_code == 2  # broken.yaml
    validate_gitlab(out.read_text())
    validate_junit(Path(f"{out}.xml").read_text())


def test_diagnostic_without_a_file_in_every_format():
    report = Report([], [Diagnostic(Location("command line", 0, 0), "no such file or directory 'x.yaml'")], ())
    assert render("text", report).startswith("command line: input-error no such file or directory 'x.yaml'\n")
    sarif = json.loads(render("sarif", report))
    [note] = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert note == {"level": "error", "message": {"text": "command line: no such file or directory 'x.yaml'"}}
    assert render("github", report).splitlines()[0] == (
        "::error title=kubelint-ports input error::command line: no such file or directory 'x.yaml'")
    assert "`command line`" in render("markdown", report, link_base="https://x/blob/1")


def test_junit_test_names_survive_lines_moving(tmp_path):
    """A CI's test history follows a test by name: a comment added above the object must not
    rename it (issue 25), and two findings of one rule on one object keep apart."""
    import xml.etree.ElementTree as ET

    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    import re
    from pathlib import Path

    manifest = (Path(__file__).resolve().parents[1] / "examples" / "nginx-hostport-nodeport.yaml").read_text()

    def names(text: str) -> list[str]:
        path = tmp_path / "m.yaml"
        path.write_text(text)
        out = CliRunner().invoke(app, ["lint", str(path), "--format", "junit"]).stdout
        return sorted(case.get("name") for case in ET.fromstring(out).iter("testcase"))

    before = names(manifest)
    assert before and len(before) == len(set(before))
    assert names("# a comment\n# and another\n" + manifest) == before
    assert not any(re.search(r"\(\d+:\d+\)", name) for name in before)
