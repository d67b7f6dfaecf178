"""Node snapshots from the lab: incident 001 replayed with the real CNI plugins, dumped with the
real tools, and diagnosed by `kubelint-ports node`.

Sandbox A is added with hostPort 443 and never deleted (the runtime died before CNI DEL), then
sandbox B of the redeployed pod is added with the same hostPort. portmap appends B's jump after
A's, so the packet goes to A: the lab proves it with a real connection, and the snapshot rules
report A's chain (KP801, stale) and B's (KP802, shadowed).

The dumps are committed as `tests/policies/KP801/fail-lab-incident-001/` so the parser and rule
tests run without root. This test regenerates them and checks they read the same (sandbox IDs
and namespace names carry the process id, so the comparison leaves them out). Set
KUBELINT_UPDATE_LAB_FIXTURES=1 to rewrite the committed copy.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import netlab

from kubelint_ports.engine import LintOptions, lint_snapshots
from kubelint_ports.loading.snapshot import load_snapshot
from kubelint_ports.model.node_state import build_node_state
from kubelint_ports.policies import builtin_policies

FIXTURE = Path(__file__).resolve().parents[1] / "policies" / "KP801" / "fail-lab-incident-001"
NODE = "lab-node"
HTTPS = [{"hostPort": 443, "containerPort": 443, "protocol": "tcp"}]


def snapshot_files(node: netlab.Node) -> dict[str, str]:
    """The files the README's collector writes, from the lab node (the IPAM directory the way
    `grep -r .` prints it)."""
    ipam = node.node_run("grep", "-r", ".", node.ipam_dir).stdout.replace(node.ipam_dir, "/var/lib/cni/networks")
    return {
        "iptables-save": node.node_run("iptables-save").stdout,
        "nft-ruleset": node.node_run("nft", "list", "ruleset").stdout,
        "ss": node.node_run("ss", "-Htlnup").stdout,
        "ip-addr": node.node_run("ip", "-o", "addr").stdout,
        "ipam": ipam,
    }


def shape(directory: Path) -> dict:
    """What the dumps say, without the run's names (sandbox IDs, chain hashes, namespace names; the
    DNAT rules' lines too, since iptables-save sorts the per-sandbox chains by their hashed names)."""
    snapshot, problems = load_snapshot(str(directory), NODE)
    state = build_node_state(snapshot)
    return {
        "problems": [d.message for d in problems],
        "kinds": sorted(state.kinds),
        "host_ports": [(e.protocol, e.port, e.pod_ip, e.pod_port, e.jump.line, e.chain_name_matches)
                       for e in state.host_ports],
        "leases": sorted(lease.address for lease in state.leases),
        "jumps": [(j.hook, j.index, j.leads_to) for j in state.entry_jumps],
    }


def findings_of(directory: Path, cluster: Path) -> list[tuple[str, int]]:
    report = lint_snapshots([str(directory)], options=LintOptions(cluster_files=(str(cluster),)),
                            policies=builtin_policies())
    assert not report.diagnostics, report.diagnostics
    return [(f.rule_id, f.location.line) for f in report.findings]


def test_incident_001_replayed(lab_ready, tmp_path: Path):
    with netlab.Node(prefix="kp13") as node:
        stale = node.add_pod("a", HTTPS)  # its runtime dies: no CNI DEL ever runs
        live = node.add_pod("b", HTTPS)
        node.serve(stale.namespace, "a", ["tcp:0.0.0.0:443"])
        node.serve(live.namespace, "b", ["tcp:0.0.0.0:443"])
        answers = node.probe(node.outside, [("tcp", netlab.NODE_IP, 443)])
        assert answers[0].startswith("a "), answers  # the first DNAT wins: the stale sandbox's
        files = snapshot_files(node)
    directory = tmp_path / NODE
    directory.mkdir()
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    cluster = tmp_path / "cluster.txt"
    cluster.write_text(
        "NAMESPACE   NAME     READY   STATUS    RESTARTS   AGE   IP            NODE       NOMINATED NODE   READINESS GATES\n"
        f"default     web-b    1/1     Running   0          1m    {live.ip}   {NODE}   <none>           <none>\n",
        encoding="utf-8")
    found = findings_of(directory, cluster)
    state = build_node_state(load_snapshot(str(directory), NODE)[0])
    first, second = state.host_ports
    assert (first.pod_ip, second.pod_ip) == (stale.ip, live.ip)
    assert first.sandbox_id == stale.container_id and first.chain_name_matches
    assert ("KP801", first.jump.line) in found and ("KP802", second.jump.line) in found

    if os.environ.get("KUBELINT_UPDATE_LAB_FIXTURES") == "1":
        (FIXTURE / NODE).mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (FIXTURE / NODE / name).write_text(text, encoding="utf-8")
        (FIXTURE / "cluster.txt").write_text(cluster.read_text(encoding="utf-8"), encoding="utf-8")
    assert shape(directory) == shape(FIXTURE / NODE), "the committed lab dumps no longer read like fresh ones"
    committed_ip = re.search(r"(\S+)\s+lab-node", (FIXTURE / "cluster.txt").read_text(encoding="utf-8"))
    assert committed_ip and committed_ip.group(1) == live.ip
    assert findings_of(FIXTURE / NODE, FIXTURE / "cluster.txt") == found
