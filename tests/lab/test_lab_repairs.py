"""Advice that works, proven on a lab node:

- KP803: the commands the finding prints (delete the hostPort jump and append it again, for
  PREROUTING and OUTPUT) are run in the node namespace, and the Service then gets its NodePort in
  iptables mode; in IPVS mode the hostPort keeps taking it, as the finding says.
- KP801: portmap's DEL without portMappings (since v0.8.7: what a runtime that lost its checkpoint
  sends) leaves the chain; an established UDP flow keeps its old DNAT after the chain is gone (hence
  `conntrack -D -p udp --orig-port-dst PORT`), while a new flow reaches the new pod.
- Entries inserted at the top (portmap < v0.7.5, CRI-O): the newest wins, so a stale entry is the
  shadowed one, and the `node` command says so from the dump's real order.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import netlab
import shapes
import shapes_local
from shapes import Endpoint, LabService

from kubelint_ports.engine import LintOptions, lint_snapshots
from kubelint_ports.policies import builtin_policies

NODE = "lab-node"
PORT = 31123


def snapshot(node: netlab.Node, directory: Path) -> Path:
    (directory / NODE).mkdir(parents=True, exist_ok=True)
    (directory / NODE / "iptables-save").write_text(node.node_run("iptables-save").stdout, encoding="utf-8")
    ipam = node.node_run("grep", "-r", ".", node.ipam_dir, check=False).stdout
    (directory / NODE / "ipam").write_text(ipam.replace(node.ipam_dir, "/var/lib/cni/networks"), encoding="utf-8")
    return directory / NODE


def findings(snapshot_dir: Path, rule: str, cluster: Path | None = None) -> list:
    options = LintOptions(cluster_files=(str(cluster),) if cluster else ())
    report = lint_snapshots([str(snapshot_dir)], options=options, policies=builtin_policies())
    assert not report.diagnostics, report.diagnostics
    return [f for f in report.findings if f.rule_id == rule]


def build_kp803_node(node: netlab.Node, mode: str):
    backend = node.add_pod("backend")
    hostport = node.add_pod("hostport", [{"hostPort": PORT, "containerPort": 8080, "protocol": "tcp"}])
    client = node.add_pod("client")
    node.serve(hostport.namespace, "hostport-pod", ["tcp:0.0.0.0:8080"])
    node.serve(backend.namespace, "service", ["tcp:0.0.0.0:9376"])
    service = LabService("web", "nginx", "http", "tcp", "10.96.0.80", 80, PORT, (Endpoint(backend.ip, 9376),))
    node.node_run("sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1")
    if mode == "iptables":
        node.iptables_restore(shapes.iptables_mode([service]))
    else:
        node.node_run("ip", "link", "add", "kube-ipvs0", "type", "bridge")
        node.node_run("ip", "addr", "add", "10.96.0.80/32", "dev", "kube-ipvs0")
        for command in shapes.ipvs_ipsets([service]):
            node.node_run("ipset", *command)
        node.iptables_restore(shapes.ipvs_mode())
    for jump in shapes.iptables_jumps(mode):
        node.iptables(*jump)
    shapes_local.portmap_inserted_last(node)  # portmap < v0.7.5, a hostPort pod added after kube-proxy
    return client


def run_printed_commands(node: netlab.Node, message: str) -> list[str]:
    [printed] = re.findall(r"`(iptables -t nat -D [^`]+ && iptables -t nat -A [^`]+)`", message)
    commands = printed.split(" && ")
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "iptables"
        node.node_run(*words)
    return commands


def test_kp803_printed_commands_give_the_node_port_back(lab_ready, tmp_path: Path):
    for mode, after in (("iptables", "service"), ("ipvs", "hostport-pod")):
        with netlab.Node(prefix="kp22r") as node:
            client = build_kp803_node(node, mode)
            [before] = node.probe(client.namespace, [["tcp", netlab.NODE_IP, PORT]])
            assert before.startswith("hostport-pod"), before
            found = findings(snapshot(node, tmp_path / f"{mode}-before"), "KP803")
            assert sorted(f.message.split(" ", 1)[0] for f in found) == ["OUTPUT", "PREROUTING"]
            for finding in found:
                run_printed_commands(node, finding.message)
                assert ("In IPVS mode that ends only the ClusterIP capture" in finding.message) is (mode == "ipvs")
            [now] = node.probe(client.namespace, [["tcp", netlab.NODE_IP, PORT]])
            [from_node] = node.probe(node.namespace, [["tcp", netlab.NODE_IP, PORT]])
            assert now.startswith(after) and from_node.startswith(after), (mode, now, from_node)
            assert not findings(snapshot(node, tmp_path / f"{mode}-after"), "KP803")


def pods_wide(path: Path, pods: list[tuple[str, str]]) -> Path:
    """`kubectl get pods -o wide` text for pods (name, IP) running on the lab node."""
    lines = ["NAMESPACE   NAME     READY   STATUS    RESTARTS   AGE   IP            NODE       NOMINATED NODE   "
             "READINESS GATES"]
    lines += [f"default     {name:<8} 1/1     Running   0          1m    {ip:<13} {NODE}   <none>           <none>"
              for name, ip in pods]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def cni_del(node: netlab.Node, pod: netlab.Pod, port_mappings: list[dict] | None) -> None:
    """portmap's DEL alone (the runtime's checkpoint, when it has one, gives the portMappings)."""
    plugin = next(p for p in node.network["plugins"] if p["type"] == "portmap")
    config = {"cniVersion": node.network["cniVersion"], "name": node.network["name"], **plugin}
    if port_mappings is not None:
        config["runtimeConfig"] = {"portMappings": port_mappings}
    env = {**os.environ, "CNI_COMMAND": "DEL", "CNI_CONTAINERID": pod.container_id,
           "CNI_NETNS": f"/run/netns/{pod.namespace}", "CNI_IFNAME": "eth0", "CNI_PATH": netlab.CNI_PATH}
    netlab.run(*node.exec_args(node.namespace), os.path.join(netlab.CNI_PATH, "portmap"), stdin=json.dumps(config),
               env=env)


def delete_entry(node: netlab.Node, container_id: str) -> None:
    """KP801's fix for portmap's iptables backend: this rule out of CNI-HOSTPORT-DNAT, then its chain."""
    rules = node.node_run("iptables-save", "-t", "nat").stdout.splitlines()
    [jump] = [line for line in rules if line.startswith("-A CNI-HOSTPORT-DNAT ") and container_id in line]
    words = shlex.split(jump)
    node.iptables("-t", "nat", "-D", *words[1:])
    chain = words[-1]
    node.iptables("-t", "nat", "-F", chain)
    node.iptables("-t", "nat", "-X", chain)


def test_kp801_teardown_without_port_mappings_and_udp_flows(lab_ready, tmp_path: Path):
    udp = [{"hostPort": 7002, "containerPort": 8080, "protocol": "udp"}]
    with netlab.Node(prefix="kp22s") as node:
        # DEL without portMappings returns early: the chain stays although DEL ran.
        lost = node.add_pod("lost", [{"hostPort": 7003, "containerPort": 8080, "protocol": "udp"}])
        cni_del(node, lost, [])
        assert f'id: \\"{lost.container_id}\\"' in node.node_run("iptables-save", "-t", "nat").stdout
        netlab.run("ip", "netns", "del", lost.namespace)
        node.namespaces.remove(lost.namespace)
        # A stale entry ahead of the live one takes a UDP flow; after KP801's fix deletes it, that
        # flow keeps its DNAT (portmap flushes UDP conntrack entries on ADD, since v0.9.0, not when
        # a chain goes by hand), while a new flow reaches the live pod.
        old = node.add_pod("old", udp)  # its runtime dies: its rules stay
        node.serve(old.namespace, "old-pod", ["udp:0.0.0.0:8080"])  # kept to see where the flow goes
        new = node.add_pod("new", udp)
        node.serve(new.namespace, "new-pod", ["udp:0.0.0.0:8080"])
        [first] = node.probe(node.outside, [["udp", netlab.NODE_IP, 7002, 40001]])
        delete_entry(node, old.container_id)
        same_flow, fresh_flow = node.probe(node.outside, [["udp", netlab.NODE_IP, 7002, 40001],
                                                          ["udp", netlab.NODE_IP, 7002, 40002]])
        assert first.startswith("old-pod") and same_flow.startswith("old-pod"), (first, same_flow)
        assert fresh_flow.startswith("new-pod"), fresh_flow
        # The printed conntrack command, run on the node as a user would, moves the old flow too.
        node.node_run("conntrack", "-D", "-p", "udp", "--orig-port-dst", "7002")
        [after] = node.probe(node.outside, [["udp", netlab.NODE_IP, 7002, 40001]])
        assert after.startswith("new-pod"), after
        directory = snapshot(node, tmp_path)
        cluster = pods_wide(tmp_path / "cluster.txt", [("new", new.ip), ("old", old.ip)])
    [stale] = findings(directory, "KP801", cluster)
    assert lost.ip in stale.message and "returns early when the runtime passes no portMappings" in stale.message
    assert "`conntrack -D -p udp --orig-port-dst 7003`" in stale.message


def test_newest_entry_wins_where_entries_are_inserted_at_the_top(lab_ready, tmp_path: Path):
    https = [{"hostPort": 443, "containerPort": 443, "protocol": "tcp"}]
    with netlab.Node(prefix="kp22p") as node:
        stale = node.add_pod("a", https)
        shapes_local.prepend_container_jumps(node, stale.container_id)
        netlab.run("ip", "netns", "del", stale.namespace)  # the runtime died: no DEL
        node.namespaces.remove(stale.namespace)
        live = node.add_pod("b", https)
        shapes_local.prepend_container_jumps(node, live.container_id)
        node.serve(live.namespace, "live-pod", ["tcp:0.0.0.0:443"])
        [answer] = node.probe(node.outside, [["tcp", netlab.NODE_IP, 443]])
        assert answer.startswith("live-pod"), answer
        directory = snapshot(node, tmp_path)
        cluster = pods_wide(tmp_path / "cluster.txt", [("b", live.ip)])
    [finding] = findings(directory, "KP801", cluster)
    assert "shadows it" in finding.message and "takes no traffic today" in finding.message
    assert "portmap < v0.7.5 inserted it at the top (the newest comes first)" in finding.message
    [shadowed] = findings(directory, "KP802", cluster)
    assert stale.ip in shadowed.message.split("here receives nothing")[0].rsplit("so ", 1)[-1]
