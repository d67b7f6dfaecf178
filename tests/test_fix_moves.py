"""Unsafe fixes that move a port: a colliding hostPort to the free host port nearest it on every
node the pod may run on, and a nodePort moved or (the configuration's `fix: {node-port: remove}`)
removed so the API server allocates one (docs/fix.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_fix import COLLIDING_NODE_PORTS
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.config import ConfigError, load_config
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.fixes import changes, describe

ROOT = Path(__file__).resolve().parents[1]
COLLISIONS = ROOT / "tests" / "fix" / "host-ports" / "collisions.yaml"
runner = CliRunner()


def test_colliding_host_ports_move_to_the_nearest_free_port_and_the_first_keeps_its_own(tmp_path, monkeypatch):
    shutil.copyfile(COLLISIONS, tmp_path / "c.yaml")
    monkeypatch.chdir(tmp_path)
    before = (tmp_path / "c.yaml").read_text()
    result = runner.invoke(app, ["lint", "--fix", "c.yaml"])
    assert (tmp_path / "c.yaml").read_text() == before, "host port moves are unsafe"
    result = runner.invoke(app, ["lint", "--fix", "--unsafe-fixes", "c.yaml"])
    assert (tmp_path / "c.yaml").read_text() == before.replace(
        "hostPort: 10250   # kubelet's", "hostPort: 10251   # kubelet's").replace(  # 10249 is kube-proxy's
        "              containerPort: 8126\n              hostPort: 8126\n",
        "              containerPort: 8126\n              hostPort: 8125\n").replace(
        "hostPort: 31123", "hostPort: 29999"), result.output  # below the node-port range
    assert "hostPort: 8126, protocol: TCP}" in (tmp_path / "c.yaml").read_text()  # the agent, listed first
    assert "fixed 3 findings in 1 file" in result.output
    after = runner.invoke(app, ["lint", "c.yaml"]).stdout
    assert not any(rule in after for rule in ("KP201", "KP301", "KP303")), after


def test_the_description_explains_the_choice(tmp_path, monkeypatch):
    shutil.copyfile(COLLISIONS, tmp_path / "c.yaml")
    monkeypatch.chdir(tmp_path)
    report = describe(lint_paths(["c.yaml"]))
    fix = next(f.fix for f in report.findings if f.rule_id == "KP201")
    assert (fix.applicability, fix.description) == (
        "unsafe", "move hostPort 31123 to 29999, the free host port nearest 31123 on any node (no inventory), outside "
                  "the node-port range 30000-32767 and the ephemeral range 32768-60999; clients of the node's port "
                  "31123 must follow")


NODES = """\
apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: Node, metadata: {name: a, labels: {kubernetes.io/hostname: a}}}
  - {apiVersion: v1, kind: Node, metadata: {name: b, labels: {kubernetes.io/hostname: b}}}
"""

PINNED = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  namespace: ops
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
        - {name: agent, image: busybox:1.36, ports: [{containerPort: 8126, hostPort: 8126}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: gateway, namespace: ops}
spec:
  replicas: 1
  selector: {matchLabels: {app: gateway}}
  template:
    metadata: {labels: {app: gateway}}
    spec:
      nodeSelector: {kubernetes.io/hostname: a}
      containers:
        - name: gateway
          image: busybox:1.36
          ports:
            - containerPort: 8126
              hostPort: 8126
---
apiVersion: v1
kind: Pod
metadata: {name: holder, namespace: ops}
spec:
  nodeSelector: {kubernetes.io/hostname: NODE}
  containers:
    - name: holder
      image: busybox:1.36
      ports: [{containerPort: 8125, hostPort: 8125}]
"""


@pytest.mark.parametrize(("holder_node", "moved_to"), [("b", 8125), ("a", 8127)])
def test_a_host_port_is_free_only_if_free_on_every_node_the_pod_may_run_on(holder_node, moved_to, tmp_path,
                                                                           monkeypatch):
    (tmp_path / "nodes.yaml").write_text(NODES)
    (tmp_path / "m.yaml").write_text(PINNED.replace("NODE", holder_node))
    monkeypatch.chdir(tmp_path)
    report = describe(lint_paths(["m.yaml"], LintOptions(node_files=("nodes.yaml",))), edits=True)
    fix = next(f.fix for f in report.findings if f.rule_id == "KP301" and f.subject.name == "gateway")
    assert fix.edits[0].text == str(moved_to)
    assert "on every node it may run on (a)" in fix.description


def test_the_configuration_can_choose_to_remove_the_node_port(tmp_path, monkeypatch):
    (tmp_path / "s.yaml").write_text(COLLIDING_NODE_PORTS)
    (tmp_path / ".kubelint-ports.yaml").write_text("fix:\n  node-port: remove   # let the API server pick\n")
    monkeypatch.chdir(tmp_path)
    choices = load_config().fix_choices
    report = describe(lint_paths(["s.yaml"]), edits=True, choices=choices)
    [change] = changes(report, unsafe=True)
    assert change.new.decode() == COLLIDING_NODE_PORTS.replace("      nodePort: 30000   # collides with a\n", "").replace(
        "      nodePort: 8080    # outside the range\n", "")
    fix = next(f.fix for f in report.findings if f.rule_id == "KP204")
    assert fix.description == ("remove nodePort 8080, so the API server allocates a free one when the Service is "
                               "applied; clients of port 8080 must follow the new one")
    assert fix.applicability == "unsafe"


def test_the_default_choice_moves_the_node_port(tmp_path, monkeypatch):
    (tmp_path / ".kubelint-ports.yaml").write_text("fix: {node-port: move}\n")
    monkeypatch.chdir(tmp_path)
    assert load_config().fix_choices.node_port == "move"
    (tmp_path / ".kubelint-ports.yaml").write_text("paths: [.]\n")
    assert load_config().fix_choices.node_port == "move"


@pytest.mark.parametrize("section", ["fix: {node-port: delete}\n", "fix: {host-port: remove}\n"])
def test_the_fix_section_is_validated(section, tmp_path, monkeypatch):
    (tmp_path / ".kubelint-ports.yaml").write_text(section)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as raised:
        load_config()
    assert raised.value.line == 1 and raised.value.message.startswith("fix")


@pytest.mark.parametrize("near", [1024, 8126, 10250, 29999, 31123, 45000, 61000, 65535])
def test_the_outward_search_answers_what_ports_free_near_answers(near, tmp_path, monkeypatch):
    from kubelint_ports.model.free_ports import free_host_ports, nearest, nearest_free_host_port

    shutil.copyfile(COLLISIONS, tmp_path / "c.yaml")
    monkeypatch.chdir(tmp_path)
    cluster = lint_paths(["c.yaml"]).cluster
    held = {1024, 1025, 8125, 8126, 8127, 10249, 10250, 29999, 61000, 61001, 65535}
    assert nearest_free_host_port(cluster, held, near) == nearest(free_host_ports(cluster, held), near, 1)[0]


def test_the_command_line_honours_the_configurations_choice(tmp_path):
    """`lint --diff --unsafe-fixes` reads `fix: {node-port: remove}` from the configuration file."""
    import subprocess
    import sys

    (tmp_path / "s.yaml").write_text(COLLIDING_NODE_PORTS)
    (tmp_path / ".kubelint-ports.yaml").write_text("fix:\n  node-port: remove\n")
    done = subprocess.run([sys.executable, "-m", "kubelint_ports", "lint", "--diff", "--unsafe-fixes", "s.yaml"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    removed = [line for line in done.stdout.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == ["-      nodePort: 30000   # collides with a", "-      nodePort: 8080    # outside the range"]
    assert not any(line.startswith("+") and not line.startswith("+++") for line in done.stdout.splitlines())


def test_a_move_that_another_move_pushed_further_says_so(tmp_path, monkeypatch):
    """Three Services on one nodePort, three node agents on one hostPort: the first of each keeps
    its port, the second takes the lowest (nearest) free one, and the third, pushed past it by
    the second's move, says so: its messages still name the port the inputs leave free."""
    services = "---\n".join(f"apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: shop}}\n"
                            "spec: {type: NodePort, ports: [{port: 80, nodePort: 30080}]}\n"
                            for name in ("one", "two", "three"))
    agents = "---\n".join(f"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: {name}, namespace: ops}}\n"
                          f"spec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n"
                          f"    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      containers:\n"
                          f"        - {{name: {name}, image: x, ports: [{{containerPort: 8080, hostPort: 8080}}]}}\n"
                          for name in ("a", "b", "c"))
    (tmp_path / "s.yaml").write_text(services + "---\n" + agents)
    monkeypatch.chdir(tmp_path)
    report = describe(lint_paths(["s.yaml"]))
    moves = {(f.rule_id, f.subject.name): f.fix.description for f in report.findings
             if f.fix is not None and f.rule_id in ("KP203", "KP301")}
    assert moves[("KP203", "two")].startswith("move nodePort 30080 to 30000, the lowest nodePort of 30000-32767 "
                                              "that no Service or pod of the inputs claims; ")
    assert moves[("KP203", "three")].startswith("move nodePort 30080 to 30001, the lowest nodePort of 30000-32767 "
                                                "that no Service or pod of the inputs claims and no other move of "
                                                "this run takes; ")
    assert moves[("KP301", "b")].startswith("move hostPort 8080 to 8079, the free host port nearest 8080 on any "
                                            "node (no inventory), outside ")
    assert moves[("KP301", "c")].startswith("move hostPort 8080 to 8081, the free host port nearest 8080 on any "
                                            "node (no inventory) that no other move of this run takes, outside ")
    assert ("KP203", "one") not in moves and ("KP301", "a") not in moves
