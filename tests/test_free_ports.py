"""`kubelint-ports ports --free` (model.free_ports): free nodePorts and host ports, deterministic."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.model.free_ports import free_ranges, nearest

runner = CliRunner()

MANIFESTS = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  type: NodePort
  ports: [{name: http, port: 80, nodePort: 30000}, {name: https, port: 443, nodePort: 30002}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: ops}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
        - name: agent
          ports: [{containerPort: 8080, hostPort: 8080}, {containerPort: 30001, hostPort: 30001}]
"""


def free(tmp_path, *args: str) -> dict:
    path = tmp_path / "m.yaml"
    path.write_text(MANIFESTS)
    result = runner.invoke(app, ["ports", "--free", "--format", "json", str(path), *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_node_ports_taken_by_services_and_host_ports_are_not_free(tmp_path):
    scope = free(tmp_path)["scopes"][0]
    assert scope["kind"] == "nodePort" and scope["free"][0] == [30003, 32767]
    assert scope["taken"] == {"30000": ["shop/Service/web"], "30001": ["ops/DaemonSet/agent (hostPort)"],
                              "30002": ["shop/Service/web"]}


def test_host_ports_honour_daemons_node_ports_and_the_ranges(tmp_path):
    data = free(tmp_path, "--near", "8080", "--count", "4")
    hosts = data["scopes"][1]
    assert hosts["kind"] == "hostPort" and hosts["node"] == ""
    assert hosts["suggested"] == [8079, 8081, 8078, 8082]  # 8080 is the agent's hostPort
    assert "kubelet (node daemon)" in hosts["taken"]["10250"]
    assert all(not (30000 <= low <= 32767) and not (32768 <= low <= 60999) for low, _ in hosts["free"])
    assert data["scopes"][0]["suggested"] == [30003, 30004, 30005, 30006]


def test_text_output_is_deterministic(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(MANIFESTS)
    first = runner.invoke(app, ["ports", "--free", str(path)]).stdout
    assert first == runner.invoke(app, ["ports", "--free", str(path)]).stdout
    assert first.startswith("nodePorts (30000-32767): 2765 free\n  free: 30003-32767\n")


def test_helpers():
    assert free_ranges([1, 2, 3, 5, 7, 8]) == [(1, 3), (5, 5), (7, 8)]
    assert nearest([10, 12, 8, 7], 10, 3) == [10, 8, 12]
