"""GitHub workflow-command output: escaping, errors first, suppressed skipped, input errors first."""

from __future__ import annotations

import io

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.findings import Finding, Report
from kubelint_ports.formatters import FormatOptions, get_formatter
from kubelint_ports.formatters.text import summary_line
from kubelint_ports.vocabulary import Diagnostic, Location, ObjectRef, Severity


def render(report: Report) -> list[str]:
    out = io.StringIO()
    get_formatter("github")(report, out, FormatOptions())
    text = out.getvalue()
    assert text.endswith("\n")
    return text.splitlines()


def finding(name: str, severity: Severity = Severity.WARNING, *, path: str = "app.yaml",
            message: str = "msg", **extra) -> Finding:
    return Finding(Location(path, 3, 5, 3, 12), "KP101", "host-port", severity, message,
                   ObjectRef("v1", "Pod", "web", name), **extra)


def test_line_format_for_a_real_collision(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # a repository: annotation paths are relative to its top level
    (tmp_path / "app.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: web}\nspec:\n  containers:\n"
        "    - name: c\n      ports:\n        - {containerPort: 80, hostPort: 31123}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: web}\n"
        "spec: {type: NodePort, ports: [{port: 80, nodePort: 31123}]}\n")
    report = lint_paths(["app.yaml"], LintOptions())
    lines = render(report)
    # the title: rule and headline; the message: effect and fix, then the object and the rule's page
    assert lines[0].startswith("::error file=app.yaml,line=8,col=31,endLine=8,endColumn=46,"
                               "title=KP201 hostPort 31123/TCP collides with nodePort 31123 of web/Service/s::")
    effect_and_fix = lines[0].split("::", 2)[2].split("%0A", 1)[0]
    assert len(effect_and_fix) <= 300 and "29999" in effect_and_fix  # the free port, in the fix
    assert "%0Aweb/Pod/p · KP201: https://" in lines[0] and "/docs/rules/KP201-" in lines[0]
    assert "%0Aapp.yaml:13:" in lines[0]  # the related Service port, on its own line
    assert all(line.startswith("::warning ") for line in lines[1:-1])
    assert lines[-1] == summary_line(report)


def test_escaping_of_message_and_properties():
    report = Report([finding("p", path="dir,a:b/x%.yaml", message="100% busy\r\nnext line, really: yes")], [], ())
    assert render(report)[0].startswith(
        "::warning file=dir%2Ca%3Ab/x%25.yaml,line=3,col=5,endLine=3,endColumn=12,title=KP101 100%25 busy%0D%0Anext "
        "line%2C really::yes%0Aweb/Pod/p")


def test_errors_first_then_warnings_then_notices_in_report_order():
    report = Report([finding("n1", Severity.NOTE), finding("w1"), finding("e1", Severity.ERROR),
                     finding("w2"), finding("e2", Severity.ERROR)], [], ())
    lines = render(report)[:-1]
    assert [(line.split(" ", 1)[0], line.split("%0A")[1].split(" ")[0].rsplit("/", 1)[1]) for line in lines] == [
        ("::error", "e1"), ("::error", "e2"), ("::warning", "w1"), ("::warning", "w2"), ("::notice", "n1")]


def test_suppressed_findings_are_skipped_but_counted():
    report = Report([finding("kept"), finding("hidden", suppressed="reviewed")], [], ())
    lines = render(report)
    assert len(lines) == 2 and "kept" in lines[0]
    assert lines[1] == summary_line(report) and "1 suppressed" in lines[1]


def test_input_diagnostics_come_first():
    report = Report([finding("p", Severity.ERROR)],
                    [Diagnostic(Location("bad.yaml", 2, 1), "invalid YAML: oops"),
                     Diagnostic(Location("gone.yaml", 0, 0), "cannot read: No such file")], ())
    lines = render(report)
    assert lines[0] == "::error file=bad.yaml,line=2,col=1,title=kubelint-ports input error::invalid YAML: oops"
    assert lines[1] == "::error file=gone.yaml,title=kubelint-ports input error::cannot read: No such file"
    assert lines[2].startswith("::error file=app.yaml,line=3,")


def test_real_malformed_file_is_reported(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / "broken.yaml").write_text("kind: [\n")
    lines = render(lint_paths(["broken.yaml"], LintOptions()))
    assert lines[0].startswith("::error file=broken.yaml,line=")
    assert "title=kubelint-ports input error::invalid YAML" in lines[0]


def test_paths_are_relative_to_the_repository_from_a_subdirectory(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "broken.yaml").write_text("kind: [\n")
    monkeypatch.chdir(tmp_path / "deploy")
    lines = render(lint_paths(["broken.yaml", "missing.yaml"], LintOptions()))
    assert lines[0].startswith("::error file=deploy/broken.yaml,line=")
    assert lines[1] == "::error title=kubelint-ports input error::command line: no such file or directory 'missing.yaml'"
