"""The port map (`kubelint-ports ports`): a view of the lint run, never its own story.

The central test runs `lint` and `ports` on every example and fixture set and checks, both ways,
that the map marks exactly what lint reports: each conflict, capture and reserved-port finding
is on the map at its node and port, and every mark on the map is a lint finding about that holder.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from test_policies import FIXTURE_DIR, cli_flags, fixture_cases, fixture_files, folder_options, working_directory
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.formatters.html import script_safe
from kubelint_ports.policies import builtin_policies
from kubelint_ports.portmap import EVERY_NODE, port_map_of

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
INVENTORY = "examples/inventory/nodes.yaml"
runner = CliRunner()

TWO_FREE_NODES = textwrap.dedent("""\
    apiVersion: v1
    kind: List
    items:
      - {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}, spec: {}}
      - {apiVersion: v1, kind: Node, metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}, spec: {}}
    """)


def deployment(name: str, port: int, replicas: int = 1, spec: str = "") -> str:
    return textwrap.dedent(f"""\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: {name}, namespace: web}}
        spec:
          replicas: {replicas}
          template:
            spec:
              {spec}containers:
                - name: c
                  ports: [{{containerPort: {port}, hostPort: {port}}}]
        """)


def ports_json(*args: str) -> dict:
    result = runner.invoke(app, ["ports", "--format", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def claims_at(data: dict, node: str, port: int) -> list[dict]:
    [entry] = [n for n in data["nodes"] if n["name"] == node]
    return [claim for claim in entry["claims"] if claim["port"] == port]


# --- the contradictions ----------------------------------------------------------------------

def test_two_single_pods_on_two_free_nodes_are_no_conflict(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("m.yaml").write_text(deployment("a", 8080) + "---\n" + deployment("b", 8080))
    Path("nodes.yaml").write_text(TWO_FREE_NODES)
    lint = runner.invoke(app, ["lint", "--no-color", "m.yaml", "--nodes", "nodes.yaml"])
    assert lint.exit_code == 0 and "KP301" not in lint.output, lint.output
    data = ports_json("m.yaml", "--nodes", "nodes.yaml")
    for node in ("n1", "n2"):
        claims = claims_at(data, node, 8080)
        assert sorted(c["owner"] for c in claims) == ["web/Deployment/a", "web/Deployment/b"]
        assert {c["state"] for c in claims} == {"may run"}, claims
    text = runner.invoke(app, ["ports", "--no-color", "m.yaml", "--nodes", "nodes.yaml"]).stdout
    assert "CONFLICT" not in text and "0 in conflict" in text


def test_three_pods_on_two_nodes_are_a_conflict_on_both(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("m.yaml").write_text(deployment("a", 8080, replicas=2) + "---\n" + deployment("b", 8080))
    Path("nodes.yaml").write_text(TWO_FREE_NODES)
    data = ports_json("m.yaml", "--nodes", "nodes.yaml")
    for node in ("n1", "n2"):
        assert {c["state"] for c in claims_at(data, node, 8080)} == {"conflict"}
        assert all(f["rule"] == "KP301" for c in claims_at(data, node, 8080) for f in c["findings"]
                   if f["state"] == "conflict")


def test_examples_show_replica_overflow_and_undeclared_listener(monkeypatch):
    monkeypatch.chdir(ROOT)
    data = ports_json("examples/", "--nodes", INVENTORY)
    [edge] = claims_at(data, "edge-1", 443)
    assert edge["owner"] == "edge/Deployment/edge-ingress" and edge["state"] == "conflict"
    assert [f["rule"] for f in edge["findings"] if f["state"] == "conflict"] == ["KP301"]
    exporter = {n: [c for c in claims_at(data, n, 9100) if c["owner"] == "monitoring/DaemonSet/node-exporter"]
                for n in ("worker-1", "worker-2")}
    [on_worker_1], [on_worker_2] = exporter["worker-1"], exporter["worker-2"]
    assert on_worker_1["kind"] == "hostNetwork" and on_worker_1["note"] == "undeclared: --web.listen-address"
    assert on_worker_1["state"] == "capture" and [f["rule"] for f in on_worker_1["findings"]] == ["KP302"]
    # metrics-proxy may run on worker-1 only: node-exporter keeps its traffic on worker-2.
    assert on_worker_2["state"] == "runs" and on_worker_2["findings"] == []
    proxy_rules = {f["rule"] for c in claims_at(data, "worker-1", 9100) if c["owner"].endswith("metrics-proxy")
                   for f in c["findings"]}
    assert {"KP301", "KP302", "KP303"} <= proxy_rules


def test_without_inventory_pods_group_under_pinned_nodes_any_node_and_every_node(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pinned = "nodeName: n1\n              "
    Path("m.yaml").write_text("---\n".join([
        deployment("a", 8080, spec=pinned), deployment("b", 8080, spec=pinned), deployment("c", 9090),
        "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: web}\n"
        "spec: {type: NodePort, ports: [{port: 80, nodePort: 30080}]}\n"]))
    data = ports_json("m.yaml")
    assert [n["name"] for n in data["nodes"]] == ["n1", "(any node)", "(every node)"]
    assert {c["state"] for c in claims_at(data, "n1", 8080)} == {"conflict"}
    assert [c["state"] for c in claims_at(data, "(any node)", 9090)] == ["may run"]
    assert [c["kind"] for c in claims_at(data, "(every node)", 30080)] == ["nodePort"]
    assert data["inventory"] is False


def test_free_nodes_are_listed_and_the_text_form_counts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("m.yaml").write_text(deployment("a", 8080, spec="nodeName: n1\n              "))
    Path("nodes.yaml").write_text(TWO_FREE_NODES)
    text = runner.invoke(app, ["ports", "--no-color", "m.yaml", "--nodes", "nodes.yaml"]).stdout
    assert "n2\n  (no host ports)\n" in text
    assert text.splitlines()[-1] == "2 nodes: 1 holders, 0 in conflict, 0 captured, 0 on node-daemon ports"


def test_node_daemons_appear_beside_the_pods_on_their_ports(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("m.yaml").write_text(deployment("debug", 10250))
    data = ports_json("m.yaml")
    claims = claims_at(data, "(any node)", 10250)
    assert [(c["kind"], c["owner"]) for c in claims] == [("hostPort", "web/Deployment/debug"), ("node daemon", "kubelet")]
    assert claims[0]["state"] == "reserved"


def test_rules_turned_off_leave_no_mark(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("m.yaml").write_text(deployment("a", 8080, replicas=3))
    Path("nodes.yaml").write_text(TWO_FREE_NODES)
    Path(".kubelint-ports.yaml").write_text("rules:\n  host-port-conflict: off\n")
    data = ports_json("m.yaml", "--nodes", "nodes.yaml")
    assert {c["state"] for c in claims_at(data, "n1", 8080)} == {"may run"}


def test_a_rules_mark_is_its_policys_port_map(tmp_path, monkeypatch):
    """The state a finding gives its port is data on the policy (`port-map:`); a policy of one's
    own over a built-in check takes the built-in rule's unless it says otherwise."""
    from kubelint_ports.policies import policies_with

    assert {p.id: p.port_map for p in builtin_policies() if p.port_map} == {
        "KP201": "capture", "KP202": "capture", "KP203": "conflict", "KP301": "conflict", "KP302": "capture",
        "KP303": "reserved", "KP304": "capture"}
    [gpu] = [p for p in policies_with([EXAMPLES / "policies"]) if p.id == "KP902"]
    assert gpu.check == "node-reserved-port" and gpu.port_map == "reserved"
    monkeypatch.chdir(tmp_path)
    Path("m.yaml").write_text(deployment("a", 8080, replicas=3))
    Path("nodes.yaml").write_text(TWO_FREE_NODES)
    policies = Path("policies")
    policies.mkdir()
    text = (ROOT / "policies" / "KP301-host-port-conflict.yaml").read_text()
    (policies / "KP990-mine.yaml").write_text(
        text.replace("id: KP301", "id: KP990").replace("name: host-port-conflict", "name: mine")
        .replace("port-map: conflict", "port-map: capture"))
    data = ports_json("m.yaml", "--nodes", "nodes.yaml", "--policies", "policies", "--select", "KP990")
    assert {c["state"] for c in claims_at(data, "n1", 8080)} == {"capture"}


def test_the_port_map_is_a_view_that_reads_no_check_and_writes_nothing():
    """portmap reads the model and the findings; formatters write it (`Report.port_map`)."""
    import ast

    tree = ast.parse((ROOT / "kubelint_ports" / "portmap.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)} | {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not [name for name in imported if name.startswith(("kubelint_ports.checks", "kubelint_ports.formatters",
                                                              "kubelint_ports.engine"))], imported
    report = lint_paths([str(EXAMPLES / "clean.yaml")])
    assert report.port_map is report.port_map  # made once, when first asked


# --- lint and ports agree on every example and fixture set ----------------------------------------

def fixture_sets() -> list:
    sets = [pytest.param(ROOT, ("examples/",), (), id="examples"),
            pytest.param(ROOT, ("examples/",), ("--nodes", INVENTORY), id="examples-inventory")]
    for folder in sorted(path for path in FIXTURE_DIR.iterdir() if path.is_dir()):
        for case in fixture_cases(folder):
            where = folder / case
            for kind in ("fail", "pass"):
                files = fixture_files(where, kind)
                if files:
                    name = f"{folder.name}{'-' + case if case else ''}-{kind}"
                    sets.append(pytest.param(where, files, tuple(cli_flags(where)), id=name))
    return sets


def lint_report(folder: Path, files: tuple[str, ...], flags: tuple[str, ...]):
    with working_directory(folder):
        options = folder_options(folder) if folder != ROOT else LintOptions(
            node_files=tuple(flags[1:]) if flags else ())
        return lint_paths(list(files), options, policies=builtin_policies())


@pytest.mark.parametrize("folder, files, flags", fixture_sets())
def test_map_marks_exactly_what_lint_reports(folder, files, flags, monkeypatch):
    report = lint_report(folder, files, flags)
    monkeypatch.chdir(folder)
    data = ports_json(*flags, *files)
    state_of = {policy.id: policy.port_map for policy in builtin_policies()}  # the policies' `port-map`
    at = {}  # (node, port, location of the claim) -> claim
    for node in data["nodes"]:
        for claim in node["claims"]:
            at[(node["name"], claim["port"], claim["location"])] = claim
    nodes_of = {}
    for node, _, location in at:
        nodes_of.setdefault(location, set()).add(node)

    marked = [f for f in report.findings if state_of[f.rule_id] and not f.suppressed]
    for finding in marked:
        # On the claim it points at, on each node the rule names (else wherever that claim is).
        location = str(finding.location)
        holders_nodes = nodes_of.get(location, set())
        expected = set(finding.nodes) if finding.nodes and holders_nodes != {EVERY_NODE} else holders_nodes
        assert expected, f"{finding.rule_id} at {location} is on no node of the map"
        for node in expected:
            claim = at.get((node, finding.port, location))
            assert claim is not None, f"{finding.rule_id} at {location}: no claim of port {finding.port} on {node}"
            assert any(f["rule"] == finding.rule_id and f["location"] == location for f in claim["findings"]), \
                f"{finding.rule_id} at {location} is not marked on {node}"
        assert all((node, finding.port, location) not in at or not any(
            f["rule"] == finding.rule_id and f["location"] == location for f in at[(node, finding.port, location)]
            ["findings"]) for node in holders_nodes - expected), f"{finding.rule_id} marked beyond its nodes"
        # The claims it names (the running pod, the undeclared listener, the nodePort) carry it too.
        for related in map(str, finding.related):
            related_nodes = nodes_of.get(related, set())
            if finding.nodes and related_nodes != {EVERY_NODE}:
                related_nodes = related_nodes & set(finding.nodes)
            for node in related_nodes:
                claim = at.get((node, finding.port, related))
                assert claim is None or any(f["rule"] == finding.rule_id for f in claim["findings"]), \
                    f"{finding.rule_id} at {location} names {related}, unmarked on {node}"

    # Nothing is marked that lint does not report: every mark is a standing lint finding about
    # this claim (its own, or one naming it as related) on this node and port.
    by_place = {(f.rule_id, str(f.location)): f for f in marked}
    for (node, port, location), claim in at.items():
        for mark in claim["findings"]:
            if not mark["state"] or mark["suppressed"]:
                continue
            finding = by_place.get((mark["rule"], mark["location"]))
            assert finding is not None, f"{node} {port}: {mark} is not a lint finding"
            assert finding.port == port
            assert location == mark["location"] or location in {str(r) for r in finding.related}
            assert not finding.nodes or node in finding.nodes or node == EVERY_NODE
        strongest = [m["state"] for m in claim["findings"] if m["state"] and not m["suppressed"]]
        if not strongest:
            assert claim["state"] in ("runs", "may run"), claim
    assert port_map_of(report).unplaced == []


# --- the HTML page ------------------------------------------------------------------------------------

def page(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def embedded_data(html: str) -> dict:
    match = re.search(r'<script type="application/json" id="portmap-data">(.*?)</script>', html, re.S)
    assert match, "the page embeds its data"
    return json.loads(match.group(1))


def test_html_page_is_self_contained_and_deterministic(monkeypatch):
    monkeypatch.chdir(ROOT)
    first = page("ports", "examples/", "--nodes", INVENTORY, "--format", "html")
    assert first == page("ports", "examples/", "--nodes", INVENTORY, "--format", "html")
    # Nothing loaded from elsewhere: no external scripts, styles, images, fonts or frames.
    assert not re.search(r"<(script|img|iframe|link)\b[^>]*\b(src|href)=", first)
    assert "@import" not in first and "url(" not in first
    data = embedded_data(first)
    assert data["nodes"] == ["edge-1", "worker-1", "worker-2", "(every node)"]
    assert len(data["findings"]) == first.count('<li id="f')


def test_lint_html_puts_findings_first_and_ports_html_the_map(monkeypatch):
    monkeypatch.chdir(ROOT)
    lint_page = page("lint", "examples/", "--nodes", INVENTORY, "--format", "html")
    ports_page = page("ports", "examples/", "--nodes", INVENTORY, "--format", "html")
    assert lint_page.index('<section id="findings"') < lint_page.index('<section id="map"')
    assert ports_page.index('<section id="map"') < ports_page.index('<section id="findings"')
    assert embedded_data(lint_page) == embedded_data(ports_page)
    assert "examples/node-agents.yaml:74:15" in lint_page  # file:line:column of each finding


def test_html_report_next_to_another_format(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["lint", "examples/clean.yaml", "--report", f"html:{out}"])
    assert result.exit_code == 0, result.output
    assert embedded_data(out.read_text())["holders"]


def test_script_data_cannot_close_its_element():
    text = json.dumps({"name": "</script><script>alert(1)</script><!--"})
    safe = script_safe(text)
    assert "</" not in safe and "<!--" not in safe and json.loads(safe) == json.loads(text)


@pytest.mark.slow
def test_500_nodes_by_1000_ports_stay_under_5_mb(tmp_path, monkeypatch):
    from portmap_corpus import NODES, write

    manifest, nodes = write(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "ports.html"
    result = runner.invoke(app, ["ports", manifest.name, "--nodes", nodes.name, "--format", "html", "-o", str(out)])
    assert result.exit_code == 0, result.output
    size = out.stat().st_size
    print(f"500 nodes x 1,000 ports: {size:,} bytes")
    assert size < 5 * 1024 * 1024
    data = embedded_data(out.read_text())
    assert len(data["nodes"]) == NODES + 1  # and (every node)
    host_ports = {(h[0], h[1]) for h in data["holders"] if h[3] in ("hostPort", "hostNetwork")}
    assert len(host_ports) == 1000


# --- who receives the packet: the datapath model's answer ---------------------------------------------

def receiver_at(data: dict, node: str, port: int, protocol: str = "TCP") -> dict:
    receivers = {json.dumps(c["receiver"], sort_keys=True) for c in claims_at(data, node, port)
                 if c["protocol"] == protocol}
    assert len(receivers) == 1, "one answer per node and port"
    return json.loads(receivers.pop())


def test_examples_name_who_receives_each_port(monkeypatch):
    monkeypatch.chdir(ROOT)
    data = ports_json("examples/", "--nodes", INVENTORY)
    assert data["datapathFacts"]["proxy-mode"]["value"] == "ipvs"  # from the bundled kube-proxy configuration
    proxy = receiver_at(data, "worker-1", 9100)
    assert (proxy["winner"], proxy["receiver"], proxy["certain"]) == ("monitoring/Deployment/metrics-proxy", "hostport", True)
    assert "monitoring/DaemonSet/node-exporter never sees it" in proxy["text"]
    exporter = receiver_at(data, "worker-2", 9100)  # metrics-proxy cannot run there
    assert (exporter["winner"], exporter["receiver"]) == ("monitoring/DaemonSet/node-exporter", "host-process")
    # IPVS: the hostPort DNAT answers the NodePort on the node nginx may run on.
    assert receiver_at(data, "worker-1", 31123)["winner"] == "web/Deployment/nginx-hostport"
    assert receiver_at(data, "(every node)", 30080)["winner"] == "shop/Service/storefront"


@pytest.mark.parametrize("flags, winner", [
    ((), "depends"),
    (("--proxy-mode", "ipvs"), "web/Deployment/nginx-hostport"),
])
def test_unknown_facts_leave_the_winner_open(flags, winner, monkeypatch):
    monkeypatch.chdir(ROOT)
    data = ports_json("examples/nginx-hostport-nodeport.yaml", *flags)
    answer = receiver_at(data, "(any node)", 31123)
    assert answer["winner"] == winner and answer["certain"] is (winner != "depends")
    if winner == "depends":
        assert "in IPVS mode" in answer["text"] and "in iptables mode" in answer["text"]


@pytest.mark.parametrize("folder, files, flags", [p for p in fixture_sets() if "KP20" in p.id or "examples" in p.id])
def test_map_and_rules_get_the_same_answer_from_the_datapath(folder, files, flags, monkeypatch):
    """Where a cell holds just what a NodePort rule asked about (the hostPort or hostNetwork pod and
    the nodePort), the map's receiver is the rule's."""
    report = lint_report(folder, files, flags)
    monkeypatch.chdir(folder)
    data = ports_json(*flags, *files)
    compared = 0
    for finding in report.findings:
        if finding.rule_id not in ("KP201", "KP202") or not finding.traffic:
            continue
        for node in data["nodes"]:
            here = [c for c in node["claims"] if c["port"] == finding.port]
            mine = [c for c in here if c["location"] == str(finding.location)]
            if mine and len(here) == 1:
                assert mine[0]["receiver"]["receiver"] == finding.traffic["receiver"], (node["name"], finding.message)
                compared += 1
    assert compared or not any(f.rule_id in ("KP201", "KP202") for f in report.findings)


def test_ports_takes_lints_rule_choice_and_helm_options():
    """`ports` marks what `lint` finds: with `--select KP3` no KP2 rule marks anything."""
    args = ["ports", str(EXAMPLES), "--nodes", str(EXAMPLES / "inventory" / "nodes.yaml"), "--format", "json"]
    every = CliRunner().invoke(app, args)
    only_kp3 = CliRunner().invoke(app, [*args, "--select", "KP3", "--kube-version", "1.30"])
    assert every.exit_code == only_kp3.exit_code == 0, only_kp3.output

    def marks(output: str) -> set[str]:
        return set(re.findall(r'"rule": "(KP\d+)"', output))

    assert {"KP201", "KP301"} <= marks(every.stdout)
    assert marks(only_kp3.stdout) and all(rule.startswith("KP3") for rule in marks(only_kp3.stdout))


# --- what the page shows beside the grid: free ports, nodes, inputs, commit, links --------------------

@pytest.mark.parametrize("folder, files, flags", fixture_sets())
def test_the_pages_free_ports_are_ports_free(folder, files, flags):
    """The page's free ports (worked out as runs, for every node at once) are `ports --free`'s
    (model.free_ports, port by port), on every example and fixture set."""
    from kubelint_ports.model.free_ports import free_ports

    report = lint_report(folder, files, flags)
    port_map = port_map_of(report)
    view = port_map.free_view()
    expected = free_ports(report.cluster, port_map.reserved)
    node_ports, *hosts = expected.scopes
    assert (view.node_ports_free, view.node_ports_free_count) == (node_ports.free, node_ports.count)
    low, high = view.node_port_range
    assert {port for port, _ in view.node_ports_taken} == (
        set(node_ports.held) | {port for port in port_map.reserved if low <= port <= high})
    assert view.node_ports_free_count + len(view.node_ports_taken) == high - low + 1
    assert [(h.node, h.free, h.count) for h in view.host_ports] == [(s.node, s.free, s.count) for s in hosts]


def test_the_page_embeds_what_ports_free_prints(monkeypatch):
    """The command line's reserved ports (the node-reserved-port rules, examples/policies' GPU
    daemon too) and the page's are the same: the same free ports, node by node."""
    monkeypatch.chdir(ROOT)
    args = ("examples/", "--nodes", INVENTORY, "--policies", "examples/policies")
    free = json.loads(page("ports", *args, "--free", "--format", "json"))
    data = embedded_data(page("ports", *args, "--format", "html"))["free"]
    [node_ports] = [scope for scope in free["scopes"] if scope["kind"] == "nodePort"]
    assert data["nodePorts"] == node_ports["free"] and data["nodePortCount"] == node_ports["freeCount"]
    hosts = {scope["node"]: scope for scope in free["scopes"] if scope["kind"] == "hostPort"}
    assert [name for name, _, _ in data["hosts"]] == list(hosts) == ["edge-1", "worker-1", "worker-2"]
    for name, runs, count in data["hosts"]:
        assert (data["runs"][runs], count) == (hosts[name]["free"], hosts[name]["freeCount"]), name
    assert [9100, 9100] not in data["runs"][data["hosts"][1][1]]  # node-exporter's, on worker-1


def test_free_runs_leave_out_taken_ports_and_ranges():
    from kubelint_ports.model.free_ports import free_runs

    assert free_runs([], [], 1024, 1030) == ((1024, 1030),)
    assert free_runs([1024, 1026, 2000, 80], [(1028, 1029)], 1024, 1030) == ((1025, 1025), (1027, 1027), (1030, 1030))
    assert free_runs([], [(1000, 1040)], 1024, 1030) == ()
    assert free_runs([1030], [(1020, 1024)], 1024, 1030) == ((1025, 1029),)
    assert free_runs([], [(30000, 32767), (32768, 60999)]) == ((1024, 29999), (61000, 65535))


def test_nodes_carry_their_labels_and_taints(monkeypatch):
    monkeypatch.chdir(ROOT)
    data = embedded_data(page("ports", "examples/", "--nodes", INVENTORY, "--format", "html"))
    info = dict(zip(data["nodes"], data["nodeInfo"]))
    labels, taints, cordoned = info["edge-1"]
    assert ["node-role.kubernetes.io/edge", ""] in labels and taints == ["dedicated=edge:NoSchedule"] and not cordoned
    assert info["worker-2"][2] == 1  # spec.unschedulable
    assert info["(every node)"] == 0


def test_the_page_names_its_files_and_their_commit(tmp_path, monkeypatch):
    import subprocess

    repository = tmp_path / "repo"
    (repository / "k8s").mkdir(parents=True)
    (repository / "k8s" / "m.yaml").write_text(deployment("a", 8080, replicas=3))
    (repository / "nodes.yaml").write_text(TWO_FREE_NODES)
    git = ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "first"]):
        subprocess.run([*git, *command], check=True, capture_output=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    # A caller's GIT_DIR (a hook's) names another repository: the inputs' own is read.
    monkeypatch.setenv("GIT_DIR", str(ROOT / ".git"))
    monkeypatch.chdir(repository / "k8s")
    html = page("lint", "m.yaml", "--nodes", "../nodes.yaml", "--format", "html")
    assert f'at commit <code id="commit">{commit}</code>' in html
    assert ('<ul id="inputs"><li><span class="role">linted</span> <code class="loc">m.yaml</code></li><li>'
            '<span class="role">inventory (--nodes)</span> <code class="loc">../nodes.yaml</code></li></ul>') in html
    assert html == page("lint", "m.yaml", "--nodes", "../nodes.yaml", "--format", "html")  # byte for byte

    # Not a checkout, or files from two: no commit.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "m.yaml").write_text(deployment("a", 8080))
    monkeypatch.chdir(outside)
    assert "(no commit: the inputs are not all in one git checkout)" in page("lint", "m.yaml", "--format", "html")
    mixed = page("lint", "m.yaml", str(repository / "k8s" / "m.yaml"), "--format", "html")
    assert "no commit" in mixed and commit not in mixed


def test_reading_the_commit_never_hangs(tmp_path, monkeypatch):
    """The commit is read from `.git`, never asked of git (issue 31: git would run the tree's own
    configuration): a `git` that does not answer is never waited for. The hostile cases are in
    tests/test_hostile_git.py."""
    from kubelint_ports import portmap

    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("0123456789abcdef0123456789abcdef01234567\n")
    (tmp_path / "m.yaml").write_text("")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\nsleep 30\n")
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{__import__('os').environ['PATH']}")
    # Counted, not timed: a process started is the hang, however fast this machine ends it.
    import subprocess

    started = []

    def no_process(self, args, *rest, **options):
        started.append(args)
        raise AssertionError(f"reading the commit started a process: {args}")

    monkeypatch.setattr(subprocess.Popen, "__init__", no_process)
    assert portmap.repository_commit([str(tmp_path / "m.yaml")]) == "0123456789abcdef0123456789abcdef01234567"
    (tmp_path / ".git" / "HEAD").write_text("<script>alert(1)</script>\n")  # not an object name
    assert portmap.repository_commit([str(tmp_path / "m.yaml")]) == ""
    assert portmap.repository_commit(["<stdin>"]) == portmap.repository_commit([]) == ""  # no repository
    assert started == []


@pytest.mark.parametrize("link_base, linked", [
    ("https://github.example/o/r/blob/0123abc", True),
    ("HTTP://git.example/r/-/blob/main/", True),
    ("javascript:alert(1)//", False),
    ("JaVaScRiPt:alert(1)", False),
    ("data:text/html,<script>alert(1)</script>", False),
    ("//evil.example/r", False),  # no scheme: relative to the page's own (file:)
    ("https:evil", False),  # no host
    ("file:///etc", False),
])
def test_locations_link_only_under_an_http_link_base(link_base, linked, tmp_path):
    from kubelint_ports.formatters.html import Links
    from kubelint_ports.vocabulary import Location

    links = Links(link_base, str(tmp_path))
    inside = Location(str(tmp_path / "k8s" / "a b\"<x>.yaml"), 12, 3)
    url = links.url(inside)
    if linked:
        assert url == link_base.rstrip("/") + "/k8s/a%20b%22%3Cx%3E.yaml#L12"
        assert links.html(inside).startswith(f'<a class="loc" href="{url}" rel="noreferrer"><code>')
    else:
        assert url == "" and links.html(inside).startswith('<code class="loc">')
    assert links.url(Location("/elsewhere/x.yaml", 1, 1)) == ""  # outside the repository: no relative address
    assert links.url(Location("-", 1, 1)) == links.url(Location("command line", 0, 0)) == ""


def test_lint_page_lists_errors_before_warnings_before_notes(monkeypatch):
    monkeypatch.chdir(ROOT)
    html = page("lint", "examples/", "--nodes", INVENTORY, "--format", "html")
    findings = html[html.index('<section id="findings"'):html.index("</section>", html.index('<section id="findings"'))]
    shown = re.findall(r'<li id="f(\d+)" class="finding sev-(\w+)( suppressed)?"', findings)
    report = json.loads(page("lint", "examples/", "--nodes", INVENTORY, "--format", "json"))
    rank = {"error": 0, "warning": 1, "note": 2}
    assert len(shown) == len(report["findings"])
    order = [(bool(suppressed), rank[severity]) for _, severity, suppressed in shown]
    assert order == sorted(order) and order[0] == (False, 0) and {r for _, r in order} == {0, 1, 2}
    for severity in ("error", "warning", "note"):  # the report's order within each severity
        indices = [int(index) for index, sev, suppressed in shown if sev == severity and not suppressed]
        assert indices == sorted(indices)
    counts = report["summary"]
    assert (f'Errors ({counts["error"]})' in findings and f'Warnings ({counts["warning"]})' in findings
            and f'Notes ({counts["note"]})' in findings)


def test_the_holders_a_cell_shows_are_found_per_port_as_node_by_node():
    """`held_together` (per port) finds the same sets of holders as grouping each node's holders."""
    import random

    from kubelint_ports.portmap import Holder, held_together

    rng = random.Random(28)
    nodes = [f"n{index}" for index in range(12)]
    for _ in range(300):
        holders = [Holder(80, "TCP", "0.0.0.0", "hostPort", f"ns/Pod/p{index}", "ns", "1 pod", "may run",
                          tuple(rng.sample(nodes, rng.randint(0, 5))), None, index=index)
                   for index in range(rng.randint(1, 5))]
        by_node: dict[str, list] = {}
        for holder in holders:
            for node in holder.nodes:
                by_node.setdefault(node, []).append(holder)
        expected = {tuple(h.index for h in group) for group in by_node.values()}
        found = held_together(holders)
        assert {tuple(h.index for h in group) for group in found} == expected and len(found) == len(expected)
        assert all([h.index for h in group] == sorted(h.index for h in group) for group in found)


def test_the_map_written_node_by_node_is_what_json_dump_writes():
    """`write_indented` is `json.dump(indent=2, sort_keys=True)` byte for byte, iterators as lists."""
    import io

    from kubelint_ports.formatters.port_map_writer import write_indented

    data = {"version": 2, "empty": {}, "none": [], "nested": {"b": [1, 2.5, None, True], "a": {"x": "é\u2028</"}},
            "nodes": [{"name": "n", "claims": [{"port": 80, "findings": [], "receiver": None}]}, {}, []]}
    streamed = io.StringIO()
    write_indented({**data, "nodes": iter(data["nodes"]), "none": iter(())}, streamed)
    assert streamed.getvalue() == json.dumps(data, indent=2, sort_keys=True)
