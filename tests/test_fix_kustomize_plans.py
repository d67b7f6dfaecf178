"""`lint --fix` plans for what kustomize builds (docs/fix.md, "What --fix promises"): a build reads
a private copy of its files holding the planned texts (`kustomize_build.planned_tree`), so a plan
that edits a patch or a base makes passes, is judged "never worse", and `--diff` is what `--fix`
writes, counts included. Each test writes its own small tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.findings import Report
from kubelint_ports.fixes.apply import FixPlan, new_problems
from kubelint_ports.fixes.run import FileChange
from kubelint_ports.vocabulary import Diagnostic, Location
from test_kustomize import needs_kustomize

runner = CliRunner()

BASE = {
    "base/kustomization.yaml": "resources:\n  - daemonset.yaml\n",
    "base/daemonset.yaml": """\
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
              hostPort: 10250
""",
    "overlay/kustomization.yaml": "resources:\n  - ../base\npatches:\n  - path: port.yaml\n",
}

# The overlay's patch quotes the hostPort (the API server rejects it); unquoted, the agent takes
# the kubelet's read-only port 10255 (KP303), which only an unsafe move mends, in a second pass.
PATCH = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  template:
    spec:
      containers:
        - name: agent
          ports:
            - containerPort: 10255
              hostPort: "10255"   # quoted
"""


def tree(directory: Path, patch_name: str = "port.yaml") -> Path:
    (directory / ".git").mkdir(parents=True)
    for name, text in BASE.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    (directory / "overlay" / patch_name).write_text(PATCH)
    return directory


def lint(*args: str):
    return runner.invoke(app, ["lint", *args])


def texts(directory: Path) -> dict[str, bytes]:
    return {str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*"))
            if path.is_file() and ".git" not in path.parts}


@needs_kustomize
def test_an_overlay_plan_makes_passes_and_its_diff_is_what_fix_writes(tmp_path, monkeypatch):
    shown_in, fixed_in = tree(tmp_path / "diff"), tree(tmp_path / "fix")
    monkeypatch.chdir(shown_in)
    shown = lint("--diff", "--unsafe-fixes", "overlay")
    subprocess.run(["patch", "-p1", "-s", "--no-backup-if-mismatch"], input=shown.stdout_bytes, cwd=shown_in,
                   check=True)
    monkeypatch.chdir(fixed_in)
    fixed = lint("--fix", "--unsafe-fixes", "overlay")
    assert texts(fixed_in) == texts(shown_in), fixed.output
    patch = (fixed_in / "overlay" / "port.yaml").read_text()
    # unquoted in the first pass, moved off the kubelet's port in the second (built from the copy)
    assert "hostPort: 10254   # quoted\n" in patch, fixed.output
    assert "would fix 2 findings in 1 file" in shown.stderr and "fixed 2 findings in 1 file" in fixed.stderr
    assert "read by kustomize" not in fixed.stderr  # no one-pass note any more
    again = lint("--fix", "--unsafe-fixes", "overlay")
    assert "fixed 0 findings in 0 files" in again.stderr and texts(fixed_in) == texts(shown_in), again.output


@needs_kustomize
def test_an_overlay_unquote_that_brings_a_new_finding_is_withdrawn(tmp_path, monkeypatch):
    directory = tree(tmp_path)
    before = texts(directory)
    monkeypatch.chdir(directory)
    shown = lint("--diff", "overlay")
    fixed = lint("--fix", "overlay")
    assert shown.stdout == "" and texts(directory) == before, fixed.output
    assert ("KP001 fix not applied: the fixed files would have a new finding, KP303 on "
            "DaemonSet/agent at spec.template.spec.containers[0].ports[0].hostPort "
            "(overlay/port.yaml:") in fixed.stderr, fixed.output


@needs_kustomize
def test_a_patch_kustomize_opens_through_a_symlink_is_planned_where_it_is_named(tmp_path, monkeypatch):
    directory = tree(tmp_path, patch_name="real-port.yaml")
    (directory / "overlay" / "port.yaml").symlink_to("real-port.yaml")
    monkeypatch.chdir(directory)
    fixed = lint("--fix", "--unsafe-fixes", "overlay")
    assert "hostPort: 10254" in (directory / "overlay" / "real-port.yaml").read_text(), fixed.output
    assert (directory / "overlay" / "port.yaml").is_symlink()
    assert "fixed 2 findings in 1 file" in fixed.stderr, fixed.output


def test_an_input_that_no_longer_reads_withdraws_the_fixes_of_the_file_it_names():
    from kubelint_ports.findings import Finding

    def finding(path: str) -> Finding:
        from kubelint_ports.vocabulary import ObjectRef, Severity

        return Finding(Location(path, 3, 5), "KP001", "invalid-port", Severity.ERROR, "quoted",
                       ObjectRef("v1", "Service", "", path), field_path="spec.ports[0].port")

    first = Report([], [Diagnostic(Location("old.yaml", 1, 1), "an old problem")], ())
    after = Report([], [Diagnostic(Location("kustomization.yaml", 0, 0),
                                   "cannot build Kustomize directory overlay: overlay/port.yaml: bad patch"),
                        Diagnostic(Location("old.yaml", 9, 1), "an old problem")], ())
    named, other = finding("overlay/port.yaml"), finding("other.yaml")
    plan = FixPlan([FileChange("overlay/port.yaml", "/r/overlay/port.yaml", b"a", b"b", (named,)),
                    FileChange("other.yaml", "/r/other.yaml", b"a", b"b", (other,))], after)
    refused = new_problems(first, plan)
    assert list(refused) == [("KP001", named.subject, named.identity_path or named.field_path)]
    assert "would no longer read cleanly (kustomization.yaml: cannot build" in next(iter(refused.values()))
    assert new_problems(first, FixPlan(plan.changes, first)) == {}
