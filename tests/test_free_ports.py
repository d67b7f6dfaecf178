"""`kubelint-ports ports --free` (model.free_ports): free nodePorts and host ports, deterministic."""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.findings import split_message
from kubelint_ports.model.free_ports import (free_host_port_runs, free_ports, free_ranges, free_runs, host_port_holders,
                                             host_port_holders_by_node, nearest, nearest_free_host_port,
                                             nearest_in_runs, run_ports)

COLLISIONS = Path(__file__).resolve().parent / "fix" / "host-ports" / "collisions.yaml"

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


# --- one implementation: runs from the taken ports, checked against a walk over every port ----------------

def test_nearest_in_runs_is_nearest_over_every_free_port():
    rng = random.Random(25)
    for _ in range(500):
        taken = rng.sample(range(1, 100), rng.randint(0, 60))
        runs = free_runs(taken, (), 1, 100)
        near, count = rng.randint(-5, 105), rng.randint(1, 8)
        assert nearest_in_runs(runs, near, count) == nearest(run_ports(runs), near, count), (runs, near, count)


def test_free_runs_are_the_ports_a_walk_finds_free():
    rng = random.Random(27)
    for _ in range(2000):
        first, last = rng.choice([(1, 300), (50, 200), (1024, 1100)])
        taken = [rng.randint(0, 320) + (1000 if first == 1024 else 0) for _ in range(rng.randint(0, 80))]
        ranges = [(rng.randint(0, 320), rng.randint(0, 320)) for _ in range(rng.randint(0, 3))]
        free = [port for port in range(first, last + 1)
                if port not in taken and not any(low <= port <= high for low, high in ranges)]
        assert free_runs(taken, ranges, first, last) == tuple(free_ranges(free)), (taken, ranges, first, last)


def test_the_nearest_free_host_port_is_the_nearest_of_the_runs(tmp_path):
    """The outward search the rules and fixes ask agrees with the runs `ports --free` lists, with
    held ports in clumps, at the edges of the blocked ranges and of the port space."""
    from types import SimpleNamespace

    rng = random.Random(26)
    for _ in range(400):
        low = rng.choice([1100, 30000, 40000])
        node_ports = (low, low + rng.randint(0, 3000))
        ephemeral = rng.choice([(32768, 60999), (49152, 65535), (1024, 1030), (5000, 4000)])
        cluster = SimpleNamespace(node_port_range=node_ports, ephemeral_port_range=ephemeral)
        centre = rng.choice([1024, 8080, node_ports[0], node_ports[1], ephemeral[0], 65535])
        held = {rng.randint(centre - 40, centre + 40) for _ in range(rng.randint(0, 80))}
        near = rng.choice([rng.randint(0, 66000), centre + rng.randint(-20, 20)])
        runs = nearest_in_runs(free_host_port_runs(cluster, held), near, 1)
        assert nearest_free_host_port(cluster, held, near) == (runs[0] if runs else None), (node_ports, ephemeral, near)
    everything = SimpleNamespace(node_port_range=(1024, 40000), ephemeral_port_range=(39000, 65535))
    assert nearest_free_host_port(everything, set(), 8080) is None


INVENTORY = """\
apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: Node, metadata: {name: a1, labels: {pool: a}}, spec: {}}
  - {apiVersion: v1, kind: Node, metadata: {name: a2, labels: {pool: a}}, spec: {}}
  - {apiVersion: v1, kind: Node, metadata: {name: b1, labels: {pool: b}}, spec: {}}
"""

# A Deployment on the nodes of pool a, a pod pinned to b1 (one on a nodePort of the range): JSON documents.
POOLS = "\n---\n".join(json.dumps(document) for document in (
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": "shop"},
     "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "api"}},
              "template": {"metadata": {"labels": {"app": "api"}}, "spec": {
                  "nodeSelector": {"pool": "a"},
                  "containers": [{"name": "api", "ports": [{"containerPort": 8090, "hostPort": 8090}]}]}}}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debug", "namespace": "ops"},
     "spec": {"nodeName": "b1", "containers": [{"name": "debug", "ports": [
         {"containerPort": 7000, "hostPort": 7000}, {"containerPort": 1, "hostPort": 30010}]}]}}))


def pools_cluster(tmp_path):
    (tmp_path / "nodes.yaml").write_text(INVENTORY)
    (tmp_path / "m.yaml").write_text(MANIFESTS + "---\n" + POOLS + "\n")
    return lint_paths([str(tmp_path / "m.yaml")], LintOptions(node_files=(str(tmp_path / "nodes.yaml"),))).cluster


def test_each_nodes_free_host_ports_are_those_a_walk_over_every_port_finds(tmp_path):
    cluster = pools_cluster(tmp_path)
    reserved = cluster.node_daemons
    found = free_ports(cluster, reserved, near=8090, count=3)
    node_ports, *hosts = found.scopes
    assert [scope.node for scope in hosts] == ["a1", "a2", "b1"]
    for scope in hosts:
        walked = [port for port in range(1024, 65536) if port not in scope.held
                  and not 30000 <= port <= 32767 and not 32768 <= port <= 60999]
        assert (scope.free, scope.count) == (tuple(free_ranges(walked)), len(walked)), scope.node
        assert list(scope.suggested) == nearest(walked, 8090, 3)
    a1, a2, b1 = hosts
    assert 8090 in a1.held and 8090 not in b1.held and 7000 in b1.held and 7000 not in a1.held
    assert a1.suggested == (8089, 8091, 8088) and b1.suggested == (8090, 8089, 8091)
    assert b1.held[30010] == ("ops/Pod/debug (hostPort)",) and 30010 not in a1.held
    walked = [port for port in range(30000, 32768) if port not in node_ports.held and port not in reserved]
    assert (node_ports.free, node_ports.count) == (tuple(free_ranges(walked)), len(walked))


def test_nodes_the_same_pods_may_run_on_share_one_answer(tmp_path):
    cluster = pools_cluster(tmp_path)
    by_node = host_port_holders_by_node(cluster, {10250: "kubelet"})
    assert by_node["a1"] is by_node["a2"] and by_node["b1"] is not by_node["a1"]
    assert host_port_holders(cluster, "b1", {10250: "kubelet"}) == by_node["b1"]
    assert by_node["a1"][10250] == ("kubelet (node daemon)",)
    assert host_port_holders(cluster, "", {})[7000] == ("ops/Pod/debug (hostPort)",)  # "": any node, every pod


def test_a_500_node_corpus_is_worked_out_once_per_kind_of_node(tmp_path):
    """500 nodes in 10 pools, 30 of them running a pinned pod: 40 answers, not 500 walks."""
    from portmap_corpus import NODES, PINNED, POOLS, write

    manifests, nodes = write(tmp_path)
    cluster = lint_paths([str(manifests)], LintOptions(node_files=(str(nodes),))).cluster
    by_node = host_port_holders_by_node(cluster, {})
    assert len(by_node) == NODES and len({id(holders) for holders in by_node.values()}) == POOLS + PINNED


# --- collision messages name the port the unsafe fix moves to ---------------------------------------------

def lint_json(tmp_path, *args: str) -> list[dict]:
    result = runner.invoke(app, ["lint", "--format", "json", *args])
    return json.loads(result.stdout)["findings"]


@pytest.mark.parametrize("inventory", [False, True])
def test_host_port_collisions_name_the_free_host_port_the_fix_takes(tmp_path, monkeypatch, inventory):
    shutil.copyfile(COLLISIONS, tmp_path / "c.yaml")
    (tmp_path / "nodes.yaml").write_text(INVENTORY)
    monkeypatch.chdir(tmp_path)
    findings = lint_json(tmp_path, "c.yaml", "--select", "KP201", *(("--nodes", "nodes.yaml") if inventory else ()))
    [finding] = findings
    named = re.search(r"The nearest (.*) is (\d+) \(`kubelint-ports ports --free --near 31123`\)\.$",
                      finding["message"])
    moved = re.match(r"move hostPort 31123 to (\d+),", finding["fix"]["description"])
    assert named and moved and named.group(2) == moved.group(1) == "29999", finding
    assert named.group(1) == ("free hostPort on every node this pod may run on" if inventory
                              else "hostPort that no pod, nodePort or node daemon of the inputs holds")
    assert "nearest" not in split_message(finding["message"])[0]  # the claim stays the claim


def test_a_daemon_port_the_configuration_adds_is_kept_free_by_the_message_the_fix_and_ports_free(tmp_path, monkeypatch):
    """One truth for the node daemons (Cluster.node_daemons, from the run's policies): with 29999
    reserved in the configuration, KP201 names 29998, the fix moves to 29998, `ports --free` says
    29998; none of them 29999."""
    shutil.copyfile(COLLISIONS, tmp_path / "c.yaml")
    (tmp_path / ".kubelint-ports.yaml").write_text(
        "rules:\n  KP303:\n    ports:\n      - {port: 10250, daemon: kubelet}\n      - {port: 29999, daemon: node-agent}\n")
    monkeypatch.chdir(tmp_path)
    # KP303 not selected: the daemons are a fact about the nodes, whichever rules run
    [finding] = lint_json(tmp_path, "c.yaml", "--select", "KP201")
    named = re.search(r"The nearest .* is (\d+) \(`kubelint-ports ports --free --near 31123`\)\.$", finding["message"])
    moved = re.match(r"move hostPort 31123 to (\d+),", finding["fix"]["description"])
    free_json = json.loads(runner.invoke(app, ["ports", "--free", "--near", "31123", "--format", "json", "c.yaml"]).stdout)
    [host_ports] = [scope for scope in free_json["scopes"] if scope["kind"] == "hostPort"]
    assert named and moved and int(named.group(1)) == int(moved.group(1)) == host_ports["suggested"][0] == 29998, finding


SECOND_CLAIM = MANIFESTS + "---\n" + json.dumps(  # a second Service on web's nodePort 30002
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "copy", "namespace": "shop"},
     "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30002}]}})


def test_node_port_collisions_name_the_lowest_free_node_port_the_fix_takes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(SECOND_CLAIM)
    findings = lint_json(tmp_path, "s.yaml", "--select", "KP203")
    named = {re.search(r"The lowest nodePort of 30000-32767 the inputs leave free is (\d+) ", f["message"]).group(1)
             for f in findings}
    moved = [re.match(r"move nodePort 30002 to (\d+),", f["fix"]["description"]).group(1)
             for f in findings if f.get("fix")]
    assert named == set(moved) == {"30003"}  # 30000-30002 are the Services' and the agent's


def test_a_message_names_no_free_port_when_the_range_is_full(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(SECOND_CLAIM)
    findings = lint_json(tmp_path, "s.yaml", "--select", "KP203", "--node-port-range", "30000-30002")
    assert findings and not any("leave free" in finding["message"] for finding in findings)
    findings = lint_json(tmp_path, "s.yaml", "--select", "KP203", "--node-port-range", "30000-30003")
    assert findings and all("30000-30003 the inputs leave free is 30003 " in finding["message"] for finding in findings)
