"""Invariant 2 of `--fix` (docs/fix.md, "What --fix promises"): never worse. The planned texts are
linted again; a fix whose result has a finding the run did not have before (by rule, object and
field, not by line), on its own object or another, is withdrawn with the new finding named, and
the plan is made again without it. Reproducers, then the property over every fixable fixture."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.fixes.plan import UNSAFE, Plan
from kubelint_ports.fixes.source import scalar_span
from test_fix_invariants import TREE_CASES, TREES, fixable_fixtures  # tests/ is on sys.path (pytest's rootdir)

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

# A DaemonSet whose quoted hostPort the API server rejects: unquoted, it would run on the kubelet's
# read-only port 10255 (a new KP303) and claim a host port (a new KP101). Its quoted containerPort's
# fix brings nothing new and is made.
QUOTED_KUBELET_PORT = """\
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
            - containerPort: "8080"
              hostPort: "10255"
"""

# A hostNetwork DaemonSet on the kubelet's port (KP303): the process listens where it listens, so
# a hostPort moved away from containerPort is what KP001 rejects.
HOST_NETWORK_ON_KUBELET_PORT = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      hostNetwork: true
      containers:
        - name: agent
          image: agent:1
          ports:
            - containerPort: 10255
              hostPort: 10255
"""

# Two DaemonSets (on every node): `relay`'s hostPort 10250 is the kubelet's (KP303); `cache` holds
# hostPort 7000.
TWO_WORKLOADS = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: relay}
spec:
  selector: {matchLabels: {app: relay}}
  template:
    metadata: {labels: {app: relay}}
    spec:
      containers:
        - name: relay
          image: relay:1
          ports:
            - containerPort: 8080
              hostPort: 10250
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: cache}
spec:
  selector: {matchLabels: {app: cache}}
  template:
    metadata: {labels: {app: cache}}
    spec:
      containers:
        - name: cache
          image: cache:1
          ports:
            - containerPort: 7000
              hostPort: 7000
"""


def lint(*args: str):
    return runner.invoke(app, ["lint", *args])


def notes_of(output: str) -> list[str]:
    return [line for line in output.splitlines() if " fix not applied: " in line]


def finding_keys(directory: Path, target: str) -> set[tuple]:
    """The findings of a run by rule, object and field (what `--fix` compares: lines move)."""
    import os

    from kubelint_ports.engine import lint_paths
    from kubelint_ports.fixes.apply import key_of

    here = os.getcwd()
    os.chdir(directory)
    try:
        report = lint_paths([target])
    finally:
        os.chdir(here)
    return {key_of(finding) for finding in report.findings if not finding.suppressed}


def brought(after: set[tuple], before: set[tuple]) -> set[tuple]:
    """The findings after `--fix` that the run did not have, less those of a `presence` rule
    (KP101: the field is set) on a field that had another finding before: the fix made the field
    valid and so revealed them (docs/fix.md, "Never worse")."""
    from kubelint_ports.policies import builtin_policies

    presence = {policy.id for policy in builtin_policies() if policy.presence}
    fields = {key[1:] for key in before}
    return {key for key in after - before if not (key[0] in presence and key[1:] in fields)}


def test_presence_rules_are_those_that_flag_a_field_for_being_set():
    from kubelint_ports.policies import builtin_policies

    assert {policy.id for policy in builtin_policies() if policy.presence} == {"KP101"}


def moving_host_port_to(port: int):
    """A KP303 fixer that moves the hostPort to `port`, whatever holds it: a fix whose result is
    worse, to prove that the plan catches it (the real move rules offer no such move)."""
    def fixer(target, finding, context):
        if target.key is None or target.key.value != "hostPort" or not isinstance(target.value, yaml.ScalarNode):
            return None
        start, end = scalar_span(target.value)
        return Plan(UNSAFE, f"move hostPort to {port}", splice=(start, end, str(port)))
    return fixer


def test_a_safe_unquote_onto_the_kubelets_port_is_withdrawn_naming_the_new_finding(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "agent.yaml").write_text(QUOTED_KUBELET_PORT)
    monkeypatch.chdir(tmp_path)
    fixed = lint("--fix", "agent.yaml")
    written = (tmp_path / "agent.yaml").read_text()
    assert 'containerPort: 8080\n' in written, fixed.output  # its fix brings nothing new
    assert 'hostPort: "10255"' in written, fixed.output  # its would: left as it was
    assert "fixed 1 finding in 1 file" in fixed.stderr
    [note] = notes_of(fixed.stderr)
    assert note.startswith("kubelint-ports: note: agent.yaml:14:15: KP001 fix not applied: ")
    assert "KP303 on DaemonSet/agent at spec.template.spec.containers[0].ports[0].hostPort (agent.yaml:14:15)" in note
    again = lint("--fix", "agent.yaml")
    assert (tmp_path / "agent.yaml").read_text() == written and "fixed 0 findings in 0 files" in again.stderr


def test_diff_shows_what_the_withdrawal_leaves(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "agent.yaml").write_text(QUOTED_KUBELET_PORT)
    monkeypatch.chdir(tmp_path)
    shown = lint("--diff", "agent.yaml")
    assert '+            - containerPort: 8080\n' in shown.stdout and "-              hostPort" not in shown.stdout
    assert "would fix 1 finding in 1 file" in shown.stderr and len(notes_of(shown.stderr)) == 1


def test_a_move_that_breaks_hostnetwork_equality_is_withdrawn(tmp_path, monkeypatch):
    from kubelint_ports.fixes.rules import FIXES

    monkeypatch.setitem(FIXES, "KP303", moving_host_port_to(10254))
    (tmp_path / ".git").mkdir()
    (tmp_path / "agent.yaml").write_text(HOST_NETWORK_ON_KUBELET_PORT)
    monkeypatch.chdir(tmp_path)
    fixed = lint("--fix", "--unsafe-fixes", "agent.yaml")
    assert (tmp_path / "agent.yaml").read_text() == HOST_NETWORK_ON_KUBELET_PORT, fixed.output
    assert "fixed 0 findings in 0 files" in fixed.stderr
    [note] = notes_of(fixed.stderr)
    assert "KP303 fix not applied: " in note
    assert "KP001 on DaemonSet/agent at spec.template.spec.containers[0].ports[0].hostPort" in note


def test_a_move_that_makes_a_finding_on_another_object_is_withdrawn_and_only_it(tmp_path, monkeypatch):
    """`relay`'s move onto `cache`'s hostPort: both get a new KP301, `cache`'s naming `relay` as
    its partner; the move is withdrawn, and the fix of the other quoted port stays. (KP301's own
    fix is taken away: it would move `relay` on in the next pass, and the plan would be no worse.)"""
    from kubelint_ports.fixes.rules import FIXES

    monkeypatch.setitem(FIXES, "KP303", moving_host_port_to(7000))
    monkeypatch.delitem(FIXES, "KP301")
    text = TWO_WORKLOADS.replace("containerPort: 7000", 'containerPort: "7000"')
    (tmp_path / ".git").mkdir()
    (tmp_path / "m.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    fixed = lint("--fix", "--unsafe-fixes", "m.yaml")
    assert (tmp_path / "m.yaml").read_text() == TWO_WORKLOADS, fixed.output
    [note] = notes_of(fixed.stderr)
    assert note.startswith("kubelint-ports: note: m.yaml:14:15: KP303 fix not applied: ")
    assert "KP301 on DaemonSet/cache at spec.template.spec.containers[0].ports[0].hostPort" in note


def test_the_planner_reports_the_withdrawal_on_the_finding(tmp_path, monkeypatch):
    """`Fix.blocked` carries the reason (JSON `fix.notApplied`, text -v)."""
    from kubelint_ports.engine import lint_paths
    from kubelint_ports.fixes.apply import Planner
    from kubelint_ports.fixes.rules import FIXES

    monkeypatch.setitem(FIXES, "KP303", moving_host_port_to(10254))
    (tmp_path / "agent.yaml").write_text(HOST_NETWORK_ON_KUBELET_PORT)
    monkeypatch.chdir(tmp_path)
    plan = Planner(lambda: lint_paths(["agent.yaml"]), unsafe=True, roots=(str(tmp_path.resolve()),)).plan(
        lint_paths(["agent.yaml"]))
    assert plan.changes == []
    [kp303] = [finding for finding in plan.report.findings if finding.rule_id == "KP303"]
    assert "new finding" in kp303.fix.blocked and "KP001" in kp303.fix.blocked


@pytest.mark.slow
@pytest.mark.parametrize("options", [(), ("--unsafe-fixes",)], ids=["safe", "unsafe"])
@pytest.mark.parametrize("source", fixable_fixtures(), ids=lambda path: f"{path.parent.name}/{path.name}")
def test_fix_makes_no_new_finding_on_any_fixable_fixture(source, options, tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    shutil.copyfile(source, tmp_path / source.name)
    before = finding_keys(tmp_path, source.name)
    monkeypatch.chdir(tmp_path)
    fixed = lint("--fix", *options, source.name)
    assert fixed.exit_code in (0, 1), fixed.output
    new = brought(finding_keys(tmp_path, source.name), before)
    assert not new, f"--fix {' '.join(options)} brought new findings: {sorted(map(str, new))}\n{fixed.output}"


# Helm and kustomize read the files from disk: they render and build private copies holding the
# planned texts, so a plan that edits what they read is judged like a plain manifest's.
@pytest.mark.slow
@pytest.mark.parametrize("tree", TREE_CASES)
def test_fix_makes_no_new_finding_in_charts_and_kustomizations(tree, tmp_path, monkeypatch):
    source, target = TREES[tree]
    (tmp_path / ".git").mkdir()
    shutil.copytree(ROOT / source, tmp_path / Path(target).parts[0])
    before = finding_keys(tmp_path, target)
    monkeypatch.chdir(tmp_path)
    fixed = lint("--fix", "--unsafe-fixes", target)
    assert fixed.exit_code in (0, 1), fixed.output
    new = brought(finding_keys(tmp_path, target), before)
    assert not new, f"--fix brought new findings: {sorted(map(str, new))}\n{fixed.output}"
