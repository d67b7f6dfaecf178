"""What the command line says about fixes, as ruff users expect it (docs/fix.md): `--unsafe-fixes`
marks unsafe fixes `[*]` and counts them with `--fix`; a safe run says nothing of fixes it would
never make; `--show-fixes` lists what `--fix` fixed (or `--diff` would); GitHub, GitLab, JUnit and
Markdown say when a finding has a fix; SARIF carries a finding's fix once."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from test_fix_invariants import TREE_CASES, TREES, fixable_fixtures  # tests/ is on sys.path (pytest's rootdir)

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

# `gateway` needs the host port `agent` holds on every node (KP301, moved by an unsafe fix) and
# quotes a containerPort (KP001, unquoted by a safe one).
MANIFEST = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
        - name: agent
          image: agent:1
          ports:
            - containerPort: 8126
              hostPort: 8126
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: gateway}
spec:
  selector: {matchLabels: {app: gateway}}
  template:
    metadata: {labels: {app: gateway}}
    spec:
      containers:
        - name: gateway
          image: gateway:1
          ports:
            - containerPort: "8080"
            - containerPort: 8126
              hostPort: 8126
"""
SAFE_LINE, UNSAFE_LINE = "m.yaml:28:15:", "m.yaml:30:15:"

# A repeated Service port whose removal is unsafe (its targetPort is lost) and refused: the round
# trip would write the one-key flow mapping that stays, `{port: 80}`, as `port: 80`.
BLOCKED_UNSAFE = """\
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}, {port: 80, targetPort: 9090}]
"""


@pytest.fixture
def manifest(tmp_path, monkeypatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "m.yaml").write_text(MANIFEST)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "m.yaml"


def lint(*args: str):
    return runner.invoke(app, ["lint", *args])


def line_of(output: str, start: str, rule: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(start) and f" {rule}" in line)


def test_a_safe_run_marks_safe_fixes_and_counts_unsafe_ones_apart(manifest):
    shown = lint("m.yaml").stdout
    assert "KP001 [*] " in line_of(shown, SAFE_LINE, "KP001")
    assert "[*]" not in line_of(shown, UNSAFE_LINE, "KP301")
    assert "; 1 fixable with --fix (1 more with --unsafe-fixes)\n" in shown


def test_unsafe_fixes_marks_unsafe_fixes_too_and_counts_them_with_fix(manifest):
    shown = lint("--unsafe-fixes", "m.yaml").stdout
    assert "KP001 [*] " in line_of(shown, SAFE_LINE, "KP001")
    assert "KP301 [*] " in line_of(shown, UNSAFE_LINE, "KP301")
    assert "; 2 fixable with --fix\n" in shown and "more with --unsafe-fixes" not in shown
    concise = lint("--unsafe-fixes", "--format", "concise", "m.yaml").stdout
    assert "KP301 [*] " in line_of(concise, UNSAFE_LINE, "KP301") and "; 2 fixable with --fix\n" in concise


def test_a_safe_run_says_nothing_of_unsafe_fixes_it_would_never_make(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "s.yaml").write_text(BLOCKED_UNSAFE)
    monkeypatch.chdir(tmp_path)
    for option in ("--fix", "--diff"):
        safe = lint(option, "s.yaml")
        assert "fix not applied" not in safe.stderr, safe.stderr
        unsafe = lint(option, "--unsafe-fixes", "s.yaml")
        assert "s.yaml:6:24: KP003 fix not applied: " in unsafe.stderr, unsafe.stderr


def test_show_fixes_lists_what_fix_fixed(manifest):
    fixed = lint("--fix", "--show-fixes", "m.yaml")
    assert "kubelint-ports: fixed 1 finding in 1 file\n" in fixed.stderr
    assert "kubelint-ports: fixed m.yaml:28:15: KP001 remove the quotes: containerPort: 8080\n" in fixed.stderr
    assert "KP301" not in fixed.stderr  # unsafe: not made, and not listed


def test_show_fixes_with_diff_lists_what_would_be_fixed(manifest):
    shown = lint("--diff", "--unsafe-fixes", "--show-fixes", "m.yaml")
    listed = [line for line in shown.stderr.splitlines() if line.startswith("kubelint-ports: would fix m.yaml:")]
    assert len(listed) == 2, shown.stderr
    assert listed[0] == "kubelint-ports: would fix m.yaml:28:15: KP001 remove the quotes: containerPort: 8080"
    assert listed[1].startswith("kubelint-ports: would fix m.yaml:30:15: KP301 move hostPort 8126 to ")
    assert manifest.read_text() == MANIFEST


def test_without_show_fixes_nothing_is_listed(manifest):
    fixed = lint("--fix", "m.yaml")
    assert "fixed m.yaml:" not in fixed.stderr and "fixed 1 finding in 1 file" in fixed.stderr


@pytest.mark.parametrize("options,unsafe_hint", [((), "(fixable with --fix --unsafe-fixes)"),
                                                 (("--unsafe-fixes",), "(fixable with --fix)")],
                         ids=["safe", "unsafe"])
def test_github_gitlab_junit_and_markdown_say_a_finding_has_a_fix(manifest, options, unsafe_hint):
    github = lint("--format", "github", *options, "m.yaml").stdout.splitlines()
    kp001 = next(line for line in github if "line=28" in line)
    kp301 = next(line for line in github if "line=30" in line and "KP301" in line)
    assert "(fixable with --fix)" in kp001 and unsafe_hint in kp301
    assert not any("fixable" in line for line in github if "KP101" in line)

    gitlab = json.loads(lint("--format", "gitlab", *options, "m.yaml").stdout)
    by_rule_line = {(issue["check_name"], issue["location"]["lines"]["begin"]): issue["description"] for issue in gitlab}
    assert by_rule_line[("KP001", 28)].endswith("(fixable with --fix)")
    assert by_rule_line[("KP301", 30)].endswith(unsafe_hint)
    assert "fixable" not in by_rule_line[("KP101", 30)]

    junit = ET.fromstring(lint("--format", "junit", *options, "m.yaml").stdout)
    failures = {case.get("name").split()[0] + ":" + case.find("failure").text.split("\n")[1].split(":")[-2]:
                case.find("failure").text for case in junit.iter("testcase")}
    assert "fixable with --fix: remove the quotes" in failures["KP001:28"]
    assert unsafe_hint.strip("()") + ": move hostPort 8126" in failures["KP301:30"]

    markdown = lint("--format", "markdown", *options, "m.yaml").stdout
    row = next(line for line in markdown.splitlines() if "KP001" in line)
    assert row.endswith(r"\(fixable with \-\-fix\) |")


def test_a_fix_that_cannot_be_made_is_not_offered(tmp_path, monkeypatch):
    (tmp_path / "s.yaml").write_text(BLOCKED_UNSAFE)
    monkeypatch.chdir(tmp_path)
    github = lint("--format", "github", "s.yaml").stdout
    kp003 = next(line for line in github.splitlines() if "KP003" in line)
    assert "(fixable with --fix --unsafe-fixes)" in kp003  # described only: plain lint does not try the edit
    sarif = json.loads(lint("--format", "sarif", "--unsafe-fixes", "s.yaml").stdout)
    [result] = [result for result in sarif["runs"][0]["results"] if result["ruleId"] == "KP003"]
    assert "fixes" not in result and result["properties"]["fix"]["notApplied"]


def sarif_fixes_once(stdout: str) -> None:
    for result in json.loads(stdout)["runs"][0]["results"]:
        fixes = result.get("fixes") or []
        assert len(fixes) <= 1, result
        for fix in fixes:
            files = [change["artifactLocation"]["uri"] for change in fix["artifactChanges"]]
            assert len(files) == len(set(files)), result
            for change in fix["artifactChanges"]:
                replacements = [json.dumps(item, sort_keys=True) for item in change["replacements"]]
                assert len(replacements) == len(set(replacements)), result


@pytest.mark.parametrize("source", fixable_fixtures(), ids=lambda path: f"{path.parent.name}/{path.name}")
def test_sarif_carries_each_fix_once(source, tmp_path, monkeypatch):
    shutil.copyfile(source, tmp_path / source.name)
    monkeypatch.chdir(tmp_path)
    sarif_fixes_once(lint("--format", "sarif", "--unsafe-fixes", source.name).stdout)


@pytest.mark.parametrize("tree", TREE_CASES)
def test_sarif_carries_each_fix_once_for_charts_and_kustomizations(tree, tmp_path, monkeypatch):
    source, target = TREES[tree]
    shutil.copytree(ROOT / source, tmp_path / Path(target).parts[0])
    monkeypatch.chdir(tmp_path)
    sarif_fixes_once(lint("--format", "sarif", "--unsafe-fixes", target).stdout)
