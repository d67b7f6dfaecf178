"""Suppression comments (issue 35): `# kubelint-ports: ignore RULES -- reason` at a finding's line
or on the line above it, `# kubelint-ports: ignore-object RULES -- reason` in the object's own
lines, the Helm template comment `{{/* kubelint-ports: ignore RULES -- reason */}}` and the same
`#` comment at the values key that feeds the template; unknown rules and comments that silence
nothing get a note; every suppression counts in the summary and in SARIF."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.engine import lint_paths
from kubelint_ports.findings import Finding
from kubelint_ports.suppressions import apply_comments, comments_of_text, parse_body
from kubelint_ports.vocabulary import Location, ObjectRef, Severity

runner = CliRunner()

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: nginx
          image: nginx
          ports:
            - containerPort: 80
              hostPort: 31123{end_of_line}
            - containerPort: 81
{above}              hostPort: 31124
"""

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
          hostPort: 8080
"""


def findings_of(tmp_path, monkeypatch, text: str, name: str = "a.yaml"):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(text)
    report = lint_paths([name])
    return report, {(f.location.line, f.rule_id): f for f in report.findings}


def test_parse_the_comment_forms():
    assert parse_body("ignore KP101 -- the agent needs it") == ("line", ("KP101",), "the agent needs it")
    assert parse_body("ignore-object KP301, host-port--why") == ("object", ("KP301", "host-port"), "why")
    assert parse_body("ignore KP101") == ("line", ("KP101",), "")
    assert parse_body("silence KP101") is None
    found = comments_of_text("f.yaml", "a: 1\n"
                                       "b: 2  # kubelint-ports: ignore KP101 -- r\n"
                                       "c: '#kubelint-ports: ignore KP101'\n"  # inside a scalar: no comment
                                       "# kubelint-ports: ignore KP102\n"
                                       "# another comment\n"
                                       "d: 4\n"
                                       "---\n"
                                       "x: {{ .Values.x }} {{/* kubelint-ports: ignore KP201 -- why */}}\n"
                                       "  {{- /* kubelint-ports: ignore-object KP301 */ -}}\n"
                                       "y: 1\n"
                                       "---\n"
                                       "z: 1 # kubelint-ports: bogus\n")
    assert [(c.line, c.scope, c.rules, c.reason, c.applies_from, c.applies_to) for c in found] == [
        (2, "line", ("KP101",), "r", 2, 2),
        (4, "line", ("KP102",), "", 6, 6),  # above a key: the next line that is not only a comment
        (8, "line", ("KP201",), "why", 8, 8),
        (9, "object", ("KP301",), "", 8, 10),  # the YAML document it stands in
        (12, "line", (), "", 0, -1),
    ]
    assert found[-1].problem


def test_a_comment_at_the_end_of_the_line_silences_only_the_rules_it_names(tmp_path, monkeypatch):
    text = DEPLOYMENT.format(end_of_line="  # kubelint-ports: ignore KP101 -- the node agent needs it", above="")
    _, found = findings_of(tmp_path, monkeypatch, text)
    assert found[(19, "KP101")].suppressed == "the node agent needs it"
    assert found[(19, "KP101")].suppressed_by == "inSource"
    assert not found[(19, "KP102")].suppressed
    assert not found[(21, "KP101")].suppressed, "another line"


def test_a_comment_on_the_line_above_silences_the_key_below(tmp_path, monkeypatch):
    text = DEPLOYMENT.format(end_of_line="", above="              # kubelint-ports: ignore KP102, host-port -- legacy\n")
    _, found = findings_of(tmp_path, monkeypatch, text)
    assert found[(22, "KP101")].suppressed == found[(22, "KP102")].suppressed == "legacy"
    assert not found[(19, "KP101")].suppressed


def test_ignore_object_silences_the_findings_of_its_own_document_only(tmp_path, monkeypatch):
    comment = "  # kubelint-ports: ignore-object KP101 -- a debug pod\n"
    text = POD.format(object_comment=comment) + "---\n" + POD.replace("debug", "other").format(object_comment="")
    _, found = findings_of(tmp_path, monkeypatch, text)
    assert found[(12, "KP101")].suppressed == "a debug pod"
    assert not found[(24, "KP101")].suppressed


def test_without_a_reason_the_comment_says_where_it_is(tmp_path, monkeypatch):
    text = DEPLOYMENT.format(end_of_line="  # kubelint-ports: ignore KP101", above="")
    _, found = findings_of(tmp_path, monkeypatch, text)
    assert found[(19, "KP101")].suppressed == "`ignore` comment at a.yaml:19"


def test_require_reason_keeps_a_comment_without_one_from_silencing(tmp_path):
    where = Location("a.yaml", 2, 7, 2, 20)
    finding = Finding(where, "KP101", "host-port", Severity.WARNING, "m", ObjectRef("v1", "Pod", "", "p"))
    text = "a: 1\nb: 2  # kubelint-ports: ignore KP101\n"
    reader = lambda path: comments_of_text(path, text)
    assert apply_comments([finding], reader=reader).findings[0].suppressed
    run = apply_comments([finding], reader=reader, require_reason=True)
    assert not run.findings[0].suppressed and "gives no reason" in run.notes[0]


def test_unknown_rules_and_unused_comments_are_kp005_findings_at_the_comment(tmp_path, monkeypatch):
    text = DEPLOYMENT.format(end_of_line="  # kubelint-ports: ignore KP999,KP105 -- typo", above="")
    report, found = findings_of(tmp_path, monkeypatch, text)
    assert not found[(19, "KP101")].suppressed
    comment = found[(19, "KP005")]
    assert (comment.location.column, comment.headline) == (
        32, "the `ignore` comment names KP999, which is no rule and KP105, which silenced no finding")
    assert not report.notes, "the rule says it: no note besides"


def test_a_comment_for_a_rule_that_did_not_run_is_not_called_unused(tmp_path, monkeypatch):
    text = DEPLOYMENT.format(end_of_line="  # kubelint-ports: ignore KP105 -- r", above="")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.yaml").write_text(text)
    from kubelint_ports.policies import builtin_policies

    report = lint_paths(["a.yaml"], policies=[p for p in builtin_policies() if p.id == "KP101"])
    assert not any("silenced no" in note for note in report.notes)


def test_every_suppression_counts_in_the_summary_and_in_sarif(tmp_path, monkeypatch):
    text = DEPLOYMENT.format(end_of_line="  # kubelint-ports: ignore KP101 -- the node agent needs it", above="")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.yaml").write_text(text)
    result = runner.invoke(app, ["lint", "a.yaml"])
    assert "(1 suppressed)" in result.stdout
    sarif = json.loads(runner.invoke(app, ["lint", "a.yaml", "--format", "sarif"]).stdout)
    suppressed = [r for r in sarif["runs"][0]["results"] if r.get("suppressions")]
    assert [(r["ruleId"], r["suppressions"]) for r in suppressed] == [
        ("KP101", [{"kind": "inSource", "justification": "the node agent needs it"}])]


def helm_available() -> bool:
    from kubelint_ports.loading.helm.charts import in_process_engine

    return in_process_engine() is not None or shutil.which("helm") is not None


@pytest.mark.skipif(not helm_available(), reason="no Helm engine")
def test_helm_template_comment_and_values_key_comment(tmp_path, monkeypatch):
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: agent\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("image: nginx\n"
                                       "# kubelint-ports: ignore KP102 -- chosen by the network team\n"
                                       "hostPort: 31123\n"
                                       "metricsPort: 9100\n")
    (chart / "templates" / "ds.yaml").write_text("""\
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
            - containerPort: 9100
              hostPort: {{ .Values.metricsPort }}
""")
    monkeypatch.chdir(tmp_path)
    report = lint_paths(["chart"])
    found = {(f.location.path, f.location.line, f.rule_id): f for f in report.findings}
    template = "chart/templates/ds.yaml"
    assert found[(template, 15, "KP101")].suppressed == "one agent per node"
    assert found[(template, 15, "KP102")].suppressed == "chosen by the network team", "the values key's comment"
    assert not found[(template, 17, "KP101")].suppressed
    assert not any("silenced no" in note for note in report.notes)


@pytest.mark.parametrize("line", [
    "{{/* kubelint-ports: " + " " * 200_000 + "x",  # a pattern with two unbounded runs took minutes here
    "# kubelint-ports: ignore KP101" + " " * 200_000 + "x",
    "kubelint-ports:" * 100_000,
    "# " + "{{/* kubelint-ports: " * 20_000,
])
def test_a_long_hostile_line_is_read_in_one_pass(line):
    from kubelint_ports.suppressions import comment_in

    found = comment_in(line)
    assert found is None or found[2].startswith(("ignore", "")), found


def test_comments_are_found_by_scanning_as_the_patterns_did():
    from kubelint_ports.suppressions import comment_in, comment_only

    assert comment_in("      hostPort: 9100  # kubelint-ports: ignore KP101 -- node-exporter  ") == (
        22, 69, "ignore KP101 -- node-exporter")
    assert comment_in("{{- /* kubelint-ports: ignore KP201 -- ok */ -}}") == (0, 48, "ignore KP201 -- ok")
    assert comment_in("image: repo#kubelint-ports: ignore KP101") is None  # no blank before the `#`
    assert comment_in("  {{/* kubelint-ports: ignore KP101 */}} hostPort: 1")[2] == "ignore KP101"
    assert comment_only("  # kubelint-ports: ignore KP101") and comment_only("{{/* kubelint-ports: ignore KP1 */}}")
    assert not comment_only("{{/* kubelint-ports: ignore KP1 */}} hostPort: 1")
