"""`lint --fix` plans for what Helm renders (docs/fix.md, "What --fix promises"): a values file the
user named (`-f`, the configuration's `charts:`) counts as inside the run's root wherever it is;
a chart's plan is worked out in memory over several passes like a plain manifest's, so `--diff`
is what `--fix` writes, a second `--fix` writes nothing, and a fix that would bring a new finding
is withdrawn ("never worse").

Fixture: tests/fix/charts/shop, copied by each test; its `values-prod.yaml` moved out of the chart
where a test needs a values file outside the directories named."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.loading.helm.charts import in_process_engine

ROOT = Path(__file__).resolve().parents[1]
SHOP_CHART = ROOT / "tests" / "fix" / "charts" / "shop"
runner = CliRunner()
needs_engine = pytest.mark.skipif(in_process_engine() is None and shutil.which("helm") is None,
                                  reason="no Helm engine (helm-python-sdk) nor `helm` binary here")


def lint(*args: str):
    return runner.invoke(app, ["lint", *args])


def shop_with_values_outside(tmp_path: Path) -> Path:
    """tmp_path/shop (the chart, no repository anywhere) and tmp_path/env/prod.yaml (the user's
    values file, outside the chart named on the command line). Returns the values file."""
    shutil.copytree(SHOP_CHART, tmp_path / "shop")
    (tmp_path / "env").mkdir()
    values = tmp_path / "env" / "prod.yaml"
    (tmp_path / "shop" / "values-prod.yaml").rename(values)
    return values


# --- the root and the values files the user named ------------------------------------------------


@needs_engine
def test_a_values_file_given_with_f_outside_the_named_directory_is_written(tmp_path, monkeypatch):
    values = shop_with_values_outside(tmp_path)
    before = values.read_text()
    monkeypatch.chdir(tmp_path)
    shown = lint("--diff", "--unsafe-fixes", "-f", "env/prod.yaml", "shop")
    assert "--- a/env/prod.yaml" in shown.stdout, shown.output
    result = lint("--fix", "--unsafe-fixes", "-f", "env/prod.yaml", "shop")
    assert values.read_text() != before, result.output
    assert "is outside" not in result.stderr


@needs_engine
def test_a_values_file_named_in_the_configurations_charts_is_written(tmp_path, monkeypatch):
    values = shop_with_values_outside(tmp_path)
    before = values.read_text()
    (tmp_path / ".kubelint-ports.yaml").write_text("charts:\n  - path: shop\n    values: [env/prod.yaml]\n")
    monkeypatch.chdir(tmp_path)
    result = lint("--fix", "--unsafe-fixes", "shop")
    assert values.read_text() != before, result.output
    assert "is outside" not in result.stderr


# --- Helm plans made in memory, several passes, never worse ---------------------------------------

CHART = "apiVersion: v2\nname: {name}\nversion: 0.1.0\n"

# Two Services whose template quotes the same nodePort: the quotes hide the collision, so the
# first pass unquotes both and only the second pass sees KP203 and moves one.
TWO_PASSES = """\
apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-a
spec:
  type: NodePort
  selector: {app: a}
  ports:
    - port: 80
      nodePort: "30080"
---
apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-b
spec:
  type: NodePort
  selector: {app: b}
  ports:
    - port: 80
      nodePort: "30080"
"""

# A quoted hostPort the API server rejects: unquoted, the DaemonSet claims host port 10255 (KP101).
NEW_FINDING = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
        - name: agent
          image: busybox:1.36
          ports:
            - containerPort: 10255
              hostPort: "10255"
"""


def chart(directory: Path, name: str, template: str) -> None:
    (directory / name / "templates").mkdir(parents=True)
    (directory / name / "Chart.yaml").write_text(CHART.format(name=name))
    (directory / name / "templates" / "objects.yaml").write_text(template)


def count_of(output: str, verb: str) -> int:
    line = next(line for line in output.splitlines() if line.startswith(f"kubelint-ports: {verb} "))
    return int(line.split()[2 + (verb == "would fix")])


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file()}


@needs_engine
@pytest.mark.parametrize("options", [(), ("--unsafe-fixes",)], ids=["safe", "unsafe"])
def test_a_chart_fix_that_needs_two_passes_is_in_the_diff_and_fix_writes_it(options, tmp_path, monkeypatch):
    for copy in ("diff", "fix"):
        chart(tmp_path / copy, "two", TWO_PASSES)
    monkeypatch.chdir(tmp_path / "diff")
    shown = lint("--diff", *options, "two")
    assert "read by" not in shown.stderr  # no last-pass note: Helm rendered the planned texts
    subprocess.run(["patch", "-p1", "-s", "--no-backup-if-mismatch"], input=shown.stdout_bytes, cwd=tmp_path / "diff",
                   check=True)
    monkeypatch.chdir(tmp_path / "fix")
    fixed = lint("--fix", *options, "two")
    assert snapshot(tmp_path / "fix") == snapshot(tmp_path / "diff"), fixed.output
    template = (tmp_path / "fix" / "two" / "templates" / "objects.yaml").read_text()
    if options:  # both unquoted, then the second pass moves one
        assert '"30080"' not in template and template.count("nodePort: 30080") == 1, template
        assert "would fix 3 findings" in shown.stderr and "fixed 3 findings" in fixed.stderr
    else:  # the move is unsafe: unquoting both would bring KP203, which no safe fix mends
        assert '"30080"' in template, template
        assert count_of(shown.stderr, "would fix") == count_of(fixed.stderr, "fixed")
        assert "fix not applied: the fixed files would have a new finding, KP203" in fixed.stderr
    again = lint("--fix", *options, "two")
    assert snapshot(tmp_path / "fix") == snapshot(tmp_path / "diff"), again.output
    assert "fixed 0 findings in 0 files" in again.stderr


@needs_engine
def test_a_chart_fix_that_brings_a_new_finding_is_withdrawn(tmp_path, monkeypatch):
    # Unquoting puts the DaemonSet on the kubelet's read-only port (KP303), which no safe fix mends.
    chart(tmp_path, "ds", NEW_FINDING)
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    shown = lint("--diff", "ds")
    result = lint("--fix", "ds")
    assert shown.stdout == "" and snapshot(tmp_path) == before, result.output
    assert "KP001 fix not applied: the fixed files would have a new finding, KP303" in result.stderr
    assert "KP101" not in result.stderr.split("fix not applied")[1]  # revealed where the fix made hostPort valid


@needs_engine
def test_with_unsafe_fixes_the_finding_a_fix_reveals_is_mended_in_the_next_pass(tmp_path, monkeypatch):
    chart(tmp_path, "ds", NEW_FINDING)
    monkeypatch.chdir(tmp_path)
    result = lint("--fix", "--unsafe-fixes", "ds")
    template = (tmp_path / "ds" / "templates" / "objects.yaml").read_text()
    assert "hostPort: 10254\n" in template and "fixed 2 findings in 1 file" in result.stderr, result.output
    after = lint("ds")
    assert "KP303" not in after.stdout and "KP001" not in after.stdout and "KP101" in after.stdout
