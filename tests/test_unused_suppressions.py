"""KP005 unused-suppression (issue 35, ruff's RUF100): a suppression comment that silences nothing
is a finding at the comment; its safe `--fix` takes the idle rules out, or the comment; a name
that is no rule is one too; `require-reason: true` makes a comment without `-- reason` count for
nothing; a file without findings is read for its comments all the same."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.policies import builtin_policies, enabled_by_default

runner = CliRunner()

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: debug
{object_comment}spec:
  containers:
    - name: c
      image: x
      ports:
        - containerPort: 80
          hostPort: 8080{line_end}
        - name: metrics
{above}          containerPort: 9090
"""


def pod(object_comment="", line_end="", above=""):
    return POD.format(object_comment=object_comment, line_end=line_end, above=above)


def lint(tmp_path, monkeypatch, files: dict[str, str], **options):
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    policies = options.pop("policies", None)
    return lint_paths(sorted(files), LintOptions(**options), policies=policies)


def kp005(report):
    return [f for f in report.findings if f.rule_id == "KP005"]


def test_a_used_comment_is_no_finding(tmp_path, monkeypatch):
    report = lint(tmp_path, monkeypatch, {"a.yaml": pod(line_end="  # kubelint-ports: ignore KP101 -- agent")})
    assert not kp005(report)
    assert [f.suppressed for f in report.findings if f.rule_id == "KP101"] == ["agent"]


def test_an_unused_comment_is_a_finding_at_the_comment(tmp_path, monkeypatch):
    report = lint(tmp_path, monkeypatch, {"a.yaml": pod(above="          # kubelint-ports: ignore KP101 -- was a hostPort\n")})
    [finding] = kp005(report)
    assert (finding.location.path, finding.location.line, finding.location.column) == ("a.yaml", 13, 11)
    assert str(finding.severity) == "warning"
    assert finding.headline == "the `ignore` comment silences no KP101 finding"
    assert [(r.line, r.column) for r in finding.related] == [(13, 36)]
    assert not report.notes


def test_only_the_unused_rules_of_a_comment_are_named(tmp_path, monkeypatch):
    report = lint(tmp_path, monkeypatch, {"a.yaml": pod(line_end="  # kubelint-ports: ignore KP101, KP105 -- agent")})
    [finding] = kp005(report)
    assert finding.headline == "the `ignore` comment silences no KP105 finding"
    assert "Remove KP105 from it" in finding.message
    assert [f.suppressed for f in report.findings if f.rule_id == "KP101"] == ["agent"], "the used rule still counts"


def test_a_rule_that_did_not_run_is_not_judged(tmp_path, monkeypatch):
    text = pod(line_end="  # kubelint-ports: ignore KP101, KP301 -- agent")
    selected = [p for p in builtin_policies() if p.id in ("KP101", "KP005")]
    assert not kp005(lint(tmp_path, monkeypatch, {"a.yaml": text}, policies=selected))
    text = pod(line_end="  # kubelint-ports: ignore KP105, KP301 -- agent")
    [finding] = kp005(lint(tmp_path, monkeypatch, {"a.yaml": text},
                           policies=[p for p in builtin_policies() if p.id in ("KP105", "KP005")]))
    assert finding.headline == "the `ignore` comment silences no KP105 finding", "KP301 did not run: not named"


def test_all_is_judged_only_when_every_default_rule_ran(tmp_path, monkeypatch):
    text = pod(above="          # kubelint-ports: ignore all -- legacy\n")
    assert [f.headline for f in kp005(lint(tmp_path, monkeypatch, {"a.yaml": text}))] == [
        "the `ignore` comment silences no all finding"]
    selected = [p for p in builtin_policies() if p.id in ("KP101", "KP005")]
    assert not kp005(lint(tmp_path, monkeypatch, {"a.yaml": text}, policies=selected))


def test_without_the_rule_nothing_is_judged_and_problems_stay_notes(tmp_path, monkeypatch):
    text = pod(above="          # kubelint-ports: ignore KP101, KP999 -- stale\n")
    report = lint(tmp_path, monkeypatch, {"a.yaml": text},
                  policies=[p for p in enabled_by_default(builtin_policies()) if p.id != "KP005"])
    assert not kp005(report)
    assert any("names 'KP999', which is no rule" in note for note in report.notes)
    assert not any("silenced no" in note for note in report.notes)


def test_an_unknown_rule_is_a_finding(tmp_path, monkeypatch):
    report = lint(tmp_path, monkeypatch, {"a.yaml": pod(line_end="  # kubelint-ports: ignore KP101, KP10l -- agent")})
    [finding] = kp005(report)
    assert finding.headline == "the `ignore` comment names KP10l, which is no rule"
    assert [r.message for r in finding.related] == ["no rule"]
    assert [f.suppressed for f in report.findings if f.rule_id == "KP101"] == ["agent"]
    ok = lint(tmp_path, monkeypatch, {"a.yaml": pod(line_end="  # kubelint-ports: ignore host-port -- agent")})
    assert not kp005(ok), "a rule's name is known"


def test_a_stale_comment_in_a_file_without_findings(tmp_path, monkeypatch):
    service = ("apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n"
               "  ports:\n    - port: 80  # kubelint-ports: ignore KP101 -- was a hostPort\n")
    report = lint(tmp_path, monkeypatch, {"svc.yaml": service})
    assert [(f.location.path, f.location.line) for f in report.findings] == [("svc.yaml", 7)]
    clean = lint(tmp_path, monkeypatch, {"svc.yaml": service.replace("  # kubelint-ports: ignore KP101 -- was a hostPort", "")})
    assert not clean.findings


def test_the_byte_search_skips_files_without_the_mark(tmp_path, monkeypatch):
    from kubelint_ports import suppression_comments

    calls = []
    monkeypatch.setattr(suppression_comments, "comments_of_text", lambda path, text: calls.append(path) or [])
    lint(tmp_path, monkeypatch, {"a.yaml": pod(), "b.yaml": pod(line_end="  # kubelint-ports: ignore KP101 -- x")})
    assert calls == ["b.yaml"]


# --- require-reason -------------------------------------------------------------------------------

def test_require_reason_off_a_comment_without_reason_silences(tmp_path, monkeypatch):
    report = lint(tmp_path, monkeypatch, {"a.yaml": pod(line_end="  # kubelint-ports: ignore KP101")})
    assert not kp005(report)
    assert [f.suppressed for f in report.findings if f.rule_id == "KP101"] == ["`ignore` comment at a.yaml:11"]


def test_require_reason_on_a_comment_without_reason_does_not_silence(tmp_path, monkeypatch):
    report = lint(tmp_path, monkeypatch, {"a.yaml": pod(line_end="  # kubelint-ports: ignore KP101")},
                  require_reason=True)
    [finding] = kp005(report)
    assert finding.headline == "the `ignore` comment gives no reason" and finding.fix is None
    assert (finding.location.line, finding.location.column) == (11, 27)
    assert [f.suppressed for f in report.findings if f.rule_id == "KP101"] == [""]
    with_reason = lint(tmp_path, monkeypatch, {"a.yaml": pod(line_end="  # kubelint-ports: ignore KP101 -- agent")},
                       require_reason=True)
    assert not kp005(with_reason)


def test_require_reason_applies_to_the_ignore_annotation(tmp_path, monkeypatch):
    annotated = pod().replace("  name: debug\n", "  name: debug\n  annotations:\n    kubelint-ports.io/ignore: KP101\n")
    assert all(f.suppressed for f in lint(tmp_path, monkeypatch, {"a.yaml": annotated}).findings if f.rule_id == "KP101")
    report = lint(tmp_path, monkeypatch, {"a.yaml": annotated}, require_reason=True)
    assert not any(f.suppressed for f in report.findings if f.rule_id == "KP101")
    assert any("gives no kubelint-ports.io/ignore-reason" in note for note in report.notes)


def test_require_reason_in_the_configuration(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.yaml").write_text(pod(line_end="  # kubelint-ports: ignore KP101"))
    (tmp_path / ".kubelint-ports.yaml").write_text("require-reason: true\n")
    data = json.loads(runner.invoke(app, ["lint", "a.yaml", "--format", "json"]).stdout)
    assert "KP005" in {f["rule"]["id"] if isinstance(f.get("rule"), dict) else f.get("ruleId", f.get("rule"))
                       for f in data["findings"]} or "KP005" in json.dumps(data)
    (tmp_path / ".kubelint-ports.yaml").write_text("require-reason: yes please\n")
    result = runner.invoke(app, ["lint", "a.yaml"])
    assert result.exit_code == 2 and "require-reason" in result.output


# --- the fix -------------------------------------------------------------------------------------

CASES = {
    "line end, whole comment": (
        pod(above="").replace("containerPort: 9090", "containerPort: 9090  # kubelint-ports: ignore KP101 -- x"),
        pod()),
    "line above": (pod(above="          # kubelint-ports: ignore KP101 -- was a hostPort\n"), pod()),
    "one rule of two": (pod(line_end="  # kubelint-ports: ignore KP101, KP105 -- agent"),
                        pod(line_end="  # kubelint-ports: ignore KP101 -- agent")),
    "unknown and unused, spaces": (pod(line_end="  # kubelint-ports: ignore KP10l KP101 KP105 -- agent"),
                                   pod(line_end="  # kubelint-ports: ignore KP101 -- agent")),
    "ignore-object": (pod(object_comment="  # kubelint-ports: ignore-object KP104 -- stale\n"), pod()),
    "CRLF": (pod(above="          # kubelint-ports: ignore KP101 -- was a hostPort\n").replace("\n", "\r\n"),
             pod().replace("\n", "\r\n")),
}


def fix_and_diff(tmp_path, monkeypatch, text: str, name: str = "a.yaml"):
    for folder in ("fixed", "diffed"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_bytes(text.encode())
    monkeypatch.chdir(tmp_path / "fixed")
    fixed = runner.invoke(app, ["lint", "--fix", name])
    monkeypatch.chdir(tmp_path / "diffed")
    diffed = runner.invoke(app, ["lint", "--diff", name])
    return fixed, diffed


@pytest.mark.parametrize("case", list(CASES))
def test_the_fix_takes_out_what_silenced_nothing_and_diff_is_fix(tmp_path, monkeypatch, case):
    before, after = CASES[case]
    fixed, diffed = fix_and_diff(tmp_path, monkeypatch, before)
    assert (tmp_path / "fixed" / "a.yaml").read_bytes() == after.encode(), fixed.output
    assert diffed.exit_code == 1 and (tmp_path / "diffed" / "a.yaml").read_bytes() == before.encode()
    patched = (tmp_path / "diffed" / "a.yaml")
    import subprocess

    subprocess.run(["git", "apply", "-"], input=diffed.stdout_bytes, cwd=tmp_path / "diffed", check=True)
    assert patched.read_bytes() == after.encode(), "--diff is what --fix writes"
    monkeypatch.chdir(tmp_path / "fixed")
    again = runner.invoke(app, ["lint", "--diff", "a.yaml"])
    assert again.exit_code == 0 and not again.stdout, "it settles"


def test_a_comment_without_reason_gets_no_fix(tmp_path, monkeypatch):
    report = lint(tmp_path, monkeypatch, {"a.yaml": pod(line_end="  # kubelint-ports: ignore KP101")},
                  require_reason=True)
    from kubelint_ports.fixes import describe

    assert [f.fix for f in describe(report, edits=True).findings if f.rule_id == "KP005"] == [None]


def helm_available() -> bool:
    from kubelint_ports.loading.helm.charts import in_process_engine

    return in_process_engine() is not None or shutil.which("helm") is not None


TEMPLATE = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ .Release.Name }}-agent
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
        - name: agent
          image: {{ .Values.image }}
          ports:
            - containerPort: 80
              hostPort: {{ .Values.hostPort }} {{/* kubelint-ports: ignore KP101 -- one agent per node */}}
            {{- /* kubelint-ports: ignore KP104 -- stale */}}
            - containerPort: {{ .Values.metricsPort }} {{/* kubelint-ports: ignore KP101, KP203 -- stale */}}
"""
VALUES = ("image: nginx\n# kubelint-ports: ignore KP102 -- chosen by the network team\nhostPort: 31123\n"
          "metricsPort: 9300  # kubelint-ports: ignore KP203 -- stale\n")


@pytest.mark.skipif(not helm_available(), reason="no Helm engine")
def test_helm_template_and_values_comments(tmp_path, monkeypatch):
    for folder in ("fixed", "diffed"):
        chart = tmp_path / folder / "chart"
        (chart / "templates").mkdir(parents=True)
        (chart / "Chart.yaml").write_text("apiVersion: v2\nname: agent\nversion: 0.1.0\n")
        (chart / "values.yaml").write_text(VALUES)
        (chart / "templates" / "ds.yaml").write_text(TEMPLATE)
    monkeypatch.chdir(tmp_path / "fixed")
    report = lint_paths(["chart"])
    assert sorted((f.location.path, f.location.line, f.headline) for f in kp005(report)) == [
        ("chart/templates/ds.yaml", 16, "the `ignore` comment silences no KP104 finding"),
        ("chart/templates/ds.yaml", 17, "the `ignore` comment silences no KP101 or KP203 finding"),
        ("chart/values.yaml", 4, "the `ignore` comment silences no KP203 finding"),
    ]
    fixed = runner.invoke(app, ["lint", "--fix", "chart"])
    assert "fixed 3 findings in 2 files" in fixed.output
    template = (tmp_path / "fixed" / "chart" / "templates" / "ds.yaml").read_text()
    assert template == TEMPLATE.replace("            {{- /* kubelint-ports: ignore KP104 -- stale */}}\n", "").replace(
        " {{/* kubelint-ports: ignore KP101, KP203 -- stale */}}", "")
    assert (tmp_path / "fixed" / "chart" / "values.yaml").read_text() == VALUES.replace(
        "  # kubelint-ports: ignore KP203 -- stale", "")
    monkeypatch.chdir(tmp_path / "diffed")
    diffed = runner.invoke(app, ["lint", "--diff", "chart"])
    import subprocess

    subprocess.run(["git", "apply", "-"], input=diffed.stdout_bytes, cwd=tmp_path / "diffed", check=True)
    for name in ("chart/templates/ds.yaml", "chart/values.yaml"):
        assert (tmp_path / "diffed" / name).read_bytes() == (tmp_path / "fixed" / name).read_bytes()


def test_a_mark_inside_a_scalar_is_data_not_a_comment(tmp_path, monkeypatch):
    """`# kubelint-ports: ...` inside a ConfigMap's script, a quoted string or an argument is the
    object's data: it silences nothing, is never reported as unused, and --fix never edits it (it
    used to: the script line lost its text)."""
    from kubelint_ports.engine import LintOptions, lint_paths

    (tmp_path / ".git").mkdir()
    manifest = tmp_path / "a.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s, namespace: x}\ndata:\n"
        "  run.sh: |  # kubelint-ports: ignore KP999 -- a real comment after the indicator\n"
        "    echo hi # kubelint-ports: ignore KP101 -- a script line\n"
        "  flow: \"a # kubelint-ports: ignore KP301\"\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: x}\nspec:\n  containers:\n  - name: c\n"
        "    image: x\n    args: [\"--x # kubelint-ports: ignore KP101\"]\n    ports:\n"
        "    - containerPort: 80\n      hostPort: 8080\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    report = lint_paths(["a.yaml"], LintOptions())
    kp005 = [f for f in report.findings if f.rule_id == "KP005"]
    assert [(f.location.line, f.location.column) for f in kp005] == [(5, 14)], kp005  # the real one only
    assert any(f.rule_id == "KP101" and not f.suppressed for f in report.findings)  # the argument silenced nothing
