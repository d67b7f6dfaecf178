"""Snapshot readers: formats captured from the real tools, content detection, bad input.

`tests/snapshots/formats/` holds the output of iptables-nft-save, iptables-legacy-save, nft list
ruleset (text and -j), ip -o addr, ipset list and ss -Htlnup, captured in a throwaway network
namespace after `setup.sh` there. The parser tests run without root; the lab test regenerates the
dumps with the real tools and checks that they still read the same (it skips, saying why, without
root or network namespaces).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from external_tools import missing_tools_reason

from kubelint_ports.loading.snapshot import detect, load_snapshot, read_file
from kubelint_ports.model.node_state import build_node_state, chain_hash

FORMATS = Path(__file__).resolve().parent / "snapshots" / "formats"
CAPTURED = ("iptables-nft-save-with-legacy-warning", "iptables-legacy-save", "nft-ruleset", "nft-j.json",
            "ip-o-addr", "ipset-list", "ss-Htlnup")


def read(name: str):
    snapshot_file, problems = read_file(str(FORMATS / name))
    assert not problems, problems
    return snapshot_file


def rules_of(snapshot_file) -> dict:
    """(table, chain) -> [(protocol, dports, target, destination, comment)], comparable across dumps."""
    return {(table.name, chain.name): [(r.protocol, r.dports, r.target, r.to_destination, r.comment, r.dst_local)
                                       for r in chain.rules]
            for table in snapshot_file.ruleset.tables.values() for chain in table.chains.values()}


def write(tmp_path: Path, node: str, files: dict[str, str]) -> Path:
    directory = tmp_path / node
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


# --- formats of the real tools -------------------------------------------------------------------

def test_detector_knows_each_captured_format():
    kinds = {name: detect((FORMATS / name).read_text(encoding="utf-8"))[0] for name in CAPTURED}
    assert kinds == {"iptables-nft-save-with-legacy-warning": "iptables-save", "iptables-legacy-save": "iptables-save",
                     "nft-ruleset": "nft", "nft-j.json": "nft-json", "ip-o-addr": "ip-addr", "ipset-list": "ipset",
                     "ss-Htlnup": "ss"}


def test_iptables_nft_save():
    dump = read("iptables-nft-save-with-legacy-warning")
    assert dump.ruleset.backend == "nf_tables" and dump.ruleset.other_backend_line == 1
    rules = rules_of(dump)
    assert rules[("nat", "CNI-HOSTPORT-DNAT")] == [
        ("tcp", ((8082, 8082), (443, 443)), "CNI-DN-04579c7bb67f4c3f6cca0", "", 'dnat name: "cbr0" id: "abc"', False)]
    assert rules[("nat", "CNI-DN-04579c7bb67f4c3f6cca0")][0][:4] == ("tcp", ((8082, 8082),), "DNAT", "10.4.0.10:80")
    masquerade = dump.ruleset.tables["nat"].chains["KUBE-SERVICES"].rules[0]
    assert masquerade.source == "10.244.0.0/16" and "-s" in masquerade.negated
    assert masquerade.match_sets == (("KUBE-CLUSTER-IP", "dst,dst"),)
    reject = dump.ruleset.tables["filter"].chains["KUBE-EXTERNAL-SERVICES"].rules[0]
    assert (reject.target, reject.dports, reject.dst_local, reject.comment) == (
        "REJECT", ((30081, 30081),), True, "ns/svc:http has no endpoints")


def test_iptables_legacy_save():
    dump = read("iptables-legacy-save")
    assert dump.ruleset.backend == "legacy"
    assert rules_of(dump)[("nat", "PREROUTING")] == [("", (), "KUBE-SERVICES", "", "", False)]


def test_nft_text_and_json_read_alike():
    text, json_dump = read("nft-ruleset"), read("nft-j.json")
    assert rules_of(text) == rules_of(json_dump) or {
        key: value for key, value in rules_of(text).items() if not key[0].endswith((" nat", " filter"))} == {
        key: value for key, value in rules_of(json_dump).items() if not key[0].endswith((" nat", " filter"))}
    hostports = rules_of(text)[("ip cni_hostport", "hostports")]
    assert hostports == [("tcp", ((8080, 8080),), "DNAT", "10.0.0.2:80", "icee6giejonei6so", False)]
    members = [m for m, _ in text.ruleset.tables["ip kube-proxy"].sets["service-nodeports"].members]
    assert sorted(members) == sorted(m for m, _ in json_dump.ruleset.tables["ip kube-proxy"].sets["service-nodeports"].members)
    # nft -j is one line: places are line 1 and the column of the rule's object
    rule = json_dump.ruleset.tables["ip cni_hostport"].chains["hostports"].rules[0]
    line = (FORMATS / "nft-j.json").read_text(encoding="utf-8").splitlines()[rule.line - 1]
    assert line[rule.column - 1:].startswith('{"rule": {"family": "ip", "table": "cni_hostport", "chain": "hostports"')


def test_ip_addr_ipset_ss():
    addresses = [(a.interface, a.address, a.prefix) for a in read("ip-o-addr").addresses]
    assert ("cni0", "10.244.1.1", 24) in addresses and ("lo", "::1", 128) in addresses
    assert read("ipset-list").sets["KUBE-CLUSTER-IP"].members == [("10.96.0.1,tcp:443", 9)]
    listeners = [(l.protocol, l.address, l.port, l.processes[0][0]) for l in read("ss-Htlnup").listeners]
    assert listeners == [("udp", "*", 5353, "python3"), ("tcp", "0.0.0.0", 30584, "python3"),
                         ("tcp", "127.0.0.1", 10248, "python3")]


def test_real_tools_print_what_the_readers_expect(tmp_path: Path):
    """Lab: regenerate the dumps in a network namespace with the real tools; they read the same."""
    if os.geteuid() != 0:
        pytest.skip("regenerating the node dumps needs root, to create a network namespace (ip netns add)")
    missing = missing_tools_reason(("ip", "iproute2"), ("iptables-nft", "iptables"), ("iptables-legacy", "iptables"),
                                   ("nft", "nftables"), ("ipset", "ipset"), ("ss", "iproute2"),
                                   who="regenerating the node dumps")
    if missing:
        pytest.skip(missing)
    namespace = f"kp13-test-{uuid.uuid4().hex[:6]}"
    created = subprocess.run(["ip", "netns", "add", namespace], capture_output=True, text=True)
    if created.returncode:
        pytest.skip(f"regenerating the node dumps needs a network namespace, which `ip netns add` could not "
                    f"create: {created.stderr.strip()}")
    try:
        setup = subprocess.run(["ip", "netns", "exec", namespace, "sh", str(FORMATS / "setup.sh")],
                               capture_output=True, text=True)
        if setup.returncode and "not supported" in setup.stderr.lower():
            pytest.skip(f"regenerating the node dumps needs a kernel feature this kernel lacks: {setup.stderr.strip()}")
        assert setup.returncode == 0, setup.stderr
        for name, command in (("iptables-nft-save-with-legacy-warning", ["iptables-nft-save"]),
                              ("iptables-legacy-save", ["iptables-legacy-save"]),
                              ("nft-ruleset", ["nft", "list", "ruleset"]), ("nft-j.json", ["nft", "-j", "list", "ruleset"]),
                              ("ipset-list", ["ipset", "list"])):
            # iptables-nft-save warns about legacy tables on stderr: the README's one-liner keeps it (2>&1)
            done = subprocess.run(["ip", "netns", "exec", namespace, *command], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT if name.startswith("iptables") else subprocess.DEVNULL,
                                  text=True, check=True)
            (tmp_path / name).write_text(done.stdout, encoding="utf-8")
            fresh, problems = read_file(str(tmp_path / name))
            assert not problems, problems
            if fresh.ruleset is not None:
                assert rules_of(fresh) == rules_of(read(name)), name
            else:
                assert fresh.sets.keys() == read(name).sets.keys()
    finally:
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


# --- content, not names ---------------------------------------------------------------------------

def test_files_are_recognised_by_content_not_name(tmp_path: Path):
    directory = write(tmp_path, "node-1", {
        "ss.txt": (FORMATS / "iptables-legacy-save").read_text(encoding="utf-8"),
        "rules": (FORMATS / "ss-Htlnup").read_text(encoding="utf-8"),
    })
    snapshot, problems = load_snapshot(str(directory))
    assert not problems
    assert {f.path.rsplit("/", 1)[-1]: f.kind for f in snapshot.files} == {"ss.txt": "iptables-save", "rules": "ss"}
    assert snapshot.node == "node-1"


def test_iptables_dash_s_output_of_incident_001():
    """`iptables -t nat -S CNI-HOSTPORT-DNAT` as incident 001 quotes it (line breaks restored)."""
    text = (
        "-N CNI-HOSTPORT-DNAT\n"
        '-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"cbr0\\" id: \\"fb7cdb0a4f8da673da0a9818ec9a1576'
        'f953a8e8decf87a081827c11e4aa7138\\"" -m multiport --dports 443,9001,80,9002,9003,19004,19003,50051,25,465,993,'
        "995,7010,7020,12321 -j CNI-DN-b24a4eb3a38dc5843c23a\n")
    kind, _ = detect(text)
    assert kind == "iptables-save"
    from kubelint_ports.loading.snapshot.iptables_save import read_iptables_save

    ruleset, problems = read_iptables_save(text, "rules")
    assert not problems and ruleset.tool == "iptables -S"
    rule = ruleset.tables["nat"].chains["CNI-HOSTPORT-DNAT"].rules[0]
    assert len(rule.dports) == 15 and rule.comment.endswith('c11e4aa7138"')
    assert chain_hash("cbr0", "fb7cdb0a4f8da673da0a9818ec9a1576f953a8e8decf87a081827c11e4aa7138") == "b24a4eb3a38dc5843c23a"


def test_ipam_ipv6_and_crictl(tmp_path: Path):
    directory = write(tmp_path, "node-1", {
        "ipam": "/var/lib/cni/networks/k8s-pod-network/fd00:10:244::5:aaaa1111\r\n"
                "/var/lib/cni/networks/k8s-pod-network/fd00:10:244::5:eth0\n"
                "/var/lib/cni/networks/k8s-pod-network/last_reserved_ip.0:fd00:10:244::5\n",
        "pods": '{\n  "items": [\n    {\n      "id": "aaaa1111",\n      "metadata": {"name": "web", "namespace": "shop"},'
                '\n      "state": "SANDBOX_READY"\n    }\n  ]\n}\n',
    })
    state = build_node_state(load_snapshot(str(directory))[0])
    assert [(l.address, l.container_id, l.place.line) for l in state.leases] == [("fd00:10:244::5", "aaaa1111", 1)]
    assert state.sandboxes["aaaa1111"].place.line == 4


# --- bad input: a diagnostic at the file's line, exit 2, the other files still read --------------

def run_node(*args: str):
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    return CliRunner().invoke(app, ["node", "--no-color", *args])


INCIDENT_003 = Path(__file__).resolve().parent / "policies" / "KP805" / "fail-incident-003" / "node-5"


@pytest.mark.parametrize("text, line, words", [
    pytest.param("*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j ACCEPT\n", 3, "truncated", id="truncated"),
    pytest.param("*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j KUBE-SERVICES\nCOMMIT\n", 3,
                 "neither a chain", id="unknown-target-chain"),
    pytest.param("*nat\n:PREROUTING ACCEPT [0:0]\n-A KUBE-SERVICES -j ACCEPT\nCOMMIT\n", 3,
                 "does not declare", id="unknown-chain"),
    pytest.param("*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -m frobnicate --x 1 -j ACCEPT\nCOMMIT\n", 3,
                 "unknown match module 'frobnicate'", id="unknown-module"),
    pytest.param("# Generated by iptables-save v1.8.9 (legacy) on x\n*nat\nCOMMIT\n"
                 "# Generated by iptables-save v1.8.9 (nf_tables) on x\n*filter\nCOMMIT\n", 4,
                 "mixes iptables-save output", id="mixed-backends"),
    pytest.param("Chain INPUT (policy ACCEPT)\ntarget     prot opt source    destination\n", 1,
                 "iptables -L", id="wrong-tool"),
    pytest.param('{"nftables": [{"table": {"family": "ip", "name": "nat"', 1, "truncated", id="truncated-json"),
    pytest.param("tcp LISTEN 0 5 0.0.0.0:99999 0.0.0.0:*\n", 1, "port 99999 is out of range", id="ss-port"),
    pytest.param("-A -t 10.96.0.1:99999 -s rr\n", 1, "not an IP address and a port", id="ipvs-port"),
    pytest.param("-A -t notanip:443 -s rr\n", 1, "not an IP address and a port", id="ipvs-address"),
    pytest.param("Name: KUBE-NODE-PORT-TCP\nType: bitmap:port\nMembers:\n30080\nabc\n", 5,
                 "'abc' in set KUBE-NODE-PORT-TCP (bitmap:port) is not a port", id="ipset-member"),
    pytest.param("Name: KUBE-NODE-PORT-UDP\nType: bitmap:port\nMembers:\n99999\n", 4, "is not a port",
                 id="ipset-port"),
    pytest.param("/var/lib/cni/networks/cbr0/notanip:abc\n", 1, "'notanip' is not an IP address", id="ipam-name"),
])
def test_bad_dump_is_a_diagnostic_and_other_files_still_read(tmp_path: Path, text: str, line: int, words: str):
    directory = tmp_path / "node-5"
    shutil.copytree(INCIDENT_003, directory)
    (directory / "broken").write_text(text, encoding="utf-8")
    result = run_node(str(directory))
    assert result.exit_code == 2, result.output
    errors = [row for row in result.stdout.splitlines() if "input-error" in row]
    assert len(errors) == 1 and f"node-5/broken:{line}:" in errors[0] and words in errors[0], result.stdout
    assert "KP805" in result.stdout  # iptables-save and ss of the same snapshot were still read


def test_crlf_line_ends_read_as_the_tool_printed_them(tmp_path: Path):
    directory = tmp_path / "node-5"
    shutil.copytree(INCIDENT_003, directory)
    dump = directory / "iptables-save"
    dump.write_bytes(dump.read_bytes().replace(b"\n", b"\r\n"))
    result = run_node(str(directory))
    assert "input-error" not in result.stdout and "KP805" in result.stdout, result.stdout


def test_legacy_tables_warning_needs_the_legacy_dump(tmp_path: Path):
    directory = write(tmp_path, "node-1", {
        "iptables-nft-save": (FORMATS / "iptables-nft-save-with-legacy-warning").read_text(encoding="utf-8")})
    result = run_node(str(directory))
    assert result.exit_code == 2 and "iptables-nft-save:1:1: input-error iptables-legacy tables" in result.stdout
    (directory / "iptables-legacy-save").write_text((FORMATS / "iptables-legacy-save").read_text(encoding="utf-8"))
    assert run_node(str(directory)).exit_code == 0


def test_unknown_file_and_missing_snapshot(tmp_path: Path):
    directory = write(tmp_path, "node-1", {"notes": "hello\n", "ss": "tcp LISTEN 0 5 0.0.0.0:22 0.0.0.0:*\n"})
    result = run_node(str(directory), str(tmp_path / "node-9"))
    assert result.exit_code == 2
    assert "node-1/notes:1:1: input-error not a snapshot dump" in result.stdout
    assert "command line: input-error no such snapshot '" in result.stdout and "node-9'" in result.stdout


def test_the_same_backend_dumped_twice_counts_once(tmp_path: Path):
    """The collector saves `iptables-save` and `iptables-legacy-save`; on a legacy node both print
    the same tables, which must not look like two DNAT entries for each hostPort."""
    dump = (Path(__file__).resolve().parent / "policies" / "KP802" / "pass-incident-001-cleaned" / "node-26"
            / "iptables-save").read_text(encoding="utf-8")
    directory = write(tmp_path, "node-26", {"iptables-save": dump, "iptables-legacy-save": dump})
    result = run_node(str(directory))
    assert result.exit_code == 0, result.stdout


# --- --cluster: read once, its problems never turn into "no pod runs" ----------------------------

QA = Path(__file__).resolve().parent / "snapshots" / "qa"
CLEANED_001 = Path(__file__).resolve().parent / "policies" / "KP801" / "pass-incident-001-cleaned"
PODS_WIDE = (CLEANED_001 / "cluster.txt").read_text(encoding="utf-8")
PODS_YAML = """apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: gw, namespace: default}
  spec: {nodeName: node-26, containers: [{name: c, image: x}]}
  status: {phase: Running, podIP: 10.187.2.34, podIPs: [{ip: 10.187.2.34}]}
"""


def node_26(tmp_path: Path, name: str = "node-26") -> Path:
    directory = tmp_path / name
    shutil.copytree(CLEANED_001 / "node-26", directory, dirs_exist_ok=True)
    return directory


def test_cleaned_incident_001_is_clean_with_its_pods(tmp_path: Path):
    """The baseline of the tests below: with the right --cluster, the live hostPorts are not stale."""
    (tmp_path / "pods.txt").write_text(PODS_WIDE, encoding="utf-8")
    (tmp_path / "pods.yaml").write_text(PODS_YAML, encoding="utf-8")
    for pods in ("pods.txt", "pods.yaml"):
        result = run_node(str(node_26(tmp_path)), "--cluster", str(tmp_path / pods))
        assert result.exit_code == 0 and "KP801" not in result.stdout, result.stdout


@pytest.mark.parametrize("text, exit_code, words", [
    pytest.param("", 2, "pods.txt: input-error nothing to read: the file is empty", id="empty"),
    pytest.param("Warning: v1 ComponentStatus is deprecated in v1.19+\n" + PODS_WIDE, 0, "", id="kubectl-warning"),
    pytest.param("Warning: v1 ComponentStatus is deprecated in v1.19+\n" + PODS_YAML, 0, "", id="kubectl-warning-yaml"),
    pytest.param(PODS_WIDE.splitlines()[0] + "\ndefault     broken-row   1/1\n" + "\n".join(PODS_WIDE.splitlines()[1:]),
                 2, "pods.txt:2:1: input-error not a row of `kubectl get pods -o wide`", id="bad-row"),
    pytest.param("No resources found in default namespace.\n", 2, "pods.txt: input-error --cluster lists no pods",
                 id="no-resources"),
    pytest.param("apiVersion: v1\nkind: List\nitems: []\n", 2, "--cluster lists no pods", id="empty-list"),
    pytest.param("foo: bar\n", 2, "pods.txt:1:1: input-error neither `kubectl get pods -A -o wide` text",
                 id="not-objects"),
    pytest.param(PODS_YAML + "- [\n", 2, "pods.txt:10:1: input-error invalid YAML", id="yaml-error"),
    pytest.param("\x00\x01binary", 2, "binary data", id="binary"),
])
def test_a_cluster_file_with_a_problem_makes_pods_unknown(tmp_path: Path, text: str, exit_code: int, words: str):
    """A --cluster file that cannot say which pods run (empty, an error, a partial list) is an
    input error and proves nothing: no live hostPort may be called stale because of it."""
    (tmp_path / "pods.txt").write_text(text, encoding="utf-8")
    result = run_node(str(node_26(tmp_path)), "--cluster", str(tmp_path / "pods.txt"))
    assert result.exit_code == exit_code, result.stdout
    assert "KP801" not in result.stdout, result.stdout
    assert words in result.stdout


def test_cluster_from_a_pipe_is_read_once(tmp_path: Path):
    """`--cluster <(kubectl get pods -A -o yaml)`: a pipe gives its bytes once; sniffing the format
    must not consume them (the YAML reader then saw an empty pipe: every hostPort looked stale)."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, PODS_YAML.encode())
        os.close(write_end)
        result = run_node(str(node_26(tmp_path)), "--cluster", f"/dev/fd/{read_end}")
    finally:
        os.close(read_end)
    assert result.exit_code == 0 and "KP801" not in result.stdout, result.stdout


def test_cluster_fifo_and_device_do_not_hang(tmp_path: Path):
    import sys

    fifo = tmp_path / "pods-fifo"
    os.mkfifo(fifo)
    for cluster, words in ((str(fifo), "a pipe that nobody wrote to"), ("/dev/urandom", "a character device")):
        result = subprocess.run([sys.executable, "-m", "kubelint_ports", "node", "--no-color",
                                 str(node_26(tmp_path)), "--cluster", cluster],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 2 and words in result.stdout and "KP801" not in result.stdout, result.stdout


def test_snapshot_named_unlike_its_node(tmp_path: Path):
    """A directory named `node-26.internal` for the Node `node-26`: --cluster places no pod there,
    which says the name is wrong, not that every hostPort is stale; the message names node-26,
    where --cluster runs the pods the DNATs lead to."""
    (tmp_path / "pods.txt").write_text(PODS_WIDE, encoding="utf-8")
    directory = node_26(tmp_path, "node-26.internal")
    result = run_node(str(directory), "--cluster", str(tmp_path / "pods.txt"))
    assert result.exit_code == 2 and "KP801" not in result.stdout, result.stdout
    assert "no pod on a node named 'node-26.internal'" in result.stdout and "`--node node-26`" in result.stdout
    result = run_node(str(directory), "--cluster", str(tmp_path / "pods.txt"), "--node", "node-26")
    assert result.exit_code == 0, result.stdout


# --- rule positions and address families ---------------------------------------------------------

def test_jump_positions_are_not_compared_across_backends():
    """iptables-nft's CNI-HOSTPORT-DNAT at rule 1 and iptables-legacy's KUBE-SERVICES at rule 1:
    two tables at one hook priority, no order between them (in the lab the hostPort pod won)."""
    from kubelint_ports.model.node_state import facts_from_dumps

    directory = QA / "mixed-backends" / "node-m"
    assert facts_from_dumps(build_node_state(load_snapshot(str(directory))[0])).hostport_order is None
    result = run_node(str(directory))
    assert "KP803" not in result.stdout, result.stdout


def portmap_dump(header: str, entries: list[tuple[str, int, str]]) -> str:
    """A nat table with portmap's rules: one CNI-DN chain per (sandbox ID, port, pod address)."""
    chains = {sandbox: chain_hash("cbr0", sandbox) for sandbox, _, _ in entries}
    lines = [header, "*nat", ":PREROUTING ACCEPT [0:0]", ":CNI-HOSTPORT-DNAT - [0:0]"]
    lines += [f":CNI-DN-{chain} - [0:0]" for chain in chains.values()]
    lines.append("-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT")
    for sandbox, port, pod in entries:
        lines.append(f'-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"cbr0\\" id: \\"{sandbox}\\"" '
                     f"-m multiport --dports {port} -j CNI-DN-{chains[sandbox]}")
        lines.append(f"-A CNI-DN-{chains[sandbox]} -p tcp -m tcp --dport {port} -j DNAT --to-destination {pod}:80")
    return "\n".join(lines + ["COMMIT", ""])


def test_host_port_entries_are_not_ordered_across_dump_files(tmp_path: Path):
    """Two backends' DNATs for one port: which a packet meets first is no rule's position, so
    neither entry is "shadowed" (in one file, the same two entries are)."""
    nft = portmap_dump("# Generated by iptables-nft-save v1.8.9 (nf_tables) on x", [("aaa", 30080, "10.244.1.9")])
    legacy = portmap_dump("# Generated by iptables-legacy-save v1.8.9 (legacy) on x",
                          [("bbb", 30081, "10.244.1.7"), ("ccc", 30080, "10.244.1.8")])
    result = run_node(str(write(tmp_path, "node-m", {"iptables-save": nft, "iptables-legacy-save": legacy})))
    assert "KP802" not in result.stdout, result.stdout
    one_file = portmap_dump("# Generated by iptables-save v1.8.9 (legacy) on x",
                            [("aaa", 30080, "10.244.1.9"), ("bbb", 30081, "10.244.1.7"), ("ccc", 30080, "10.244.1.8")])
    result = run_node(str(write(tmp_path, "node-n", {"iptables-save": one_file})))
    assert "KP802" in result.stdout, result.stdout


def test_a_sandbox_the_runtime_calls_ready_is_never_stale():
    """crictl says SANDBOX_READY for the chain's sandbox while the IPAM directory lacks its lease:
    the runtime's word wins, so no KP801 tells the user to delete a live pod's rules."""
    directory = QA / "ready-sandbox-without-lease" / "node-conflict"
    result = run_node(str(directory))
    assert result.exit_code == 0 and "KP801" not in result.stdout, result.stdout
    assert "10.244.1.5" in (directory / "iptables-save").read_text(encoding="utf-8")
    assert "10.244.1.5" not in (directory / "ipam").read_text(encoding="utf-8")  # the lease really is missing


# --- large dumps: read fast, and the same as token by token ---------------------------------------

SIMPLE_LINES = (  # the shapes `_SIMPLE_RULE` reads with one match, and near misses it must leave alone
    '-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp '
    "--dport 443 -j KUBE-SVC-NPX46M4PTMTKRN6Y",
    '-A KUBE-SVC-NPX46M4PTMTKRN6Y ! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -m comment --comment "default/kubernetes:'
    'https cluster IP" -m tcp --dport 443 -j KUBE-MARK-MASQ',
    '-A KUBE-NODEPORTS -p udp -m comment --comment "" -m udp --dport 30053 -j KUBE-EXT-LOLE4ISW44XBNF3G',
    "-A CNI-DN-b174b2b51888da32f91e5 -s fd00::7/128 -p tcp -m tcp --dport 09090 -j CNI-HOSTPORT-SETMARK",
    '-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "a \\"quoted\\" name" -m tcp --dport 443 -j X',
    '-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "x"  -m tcp --dport 443 -j X',
    "-A KUBE-SERVICES -d 10.96.0.1/32 -p 6 -m tcp --dport 443 -j X",
    "-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m tcp --dport 443 -j REJECT --reject-with icmp-port-unreachable",
    "-A KUBE-SERVICES ! -d 10.96.0.1/32 -p tcp -m tcp --dport 443 -j X",
    "-A KUBE-SERVICES -p tcp -m tcp --dport 443 -j X ",
)


def dump_lines() -> list[str]:
    """Every rule line of the committed dumps, and SIMPLE_LINES."""
    root = Path(__file__).resolve().parent
    dumps = [*FORMATS.glob("iptables*"), *(root / "snapshots" / "qa").rglob("iptables*"),
             *(root / "policies").glob("KP80*/*/*/iptables*")]
    found = [line for dump in dumps for line in dump.read_text(encoding="utf-8").split("\n") if line.startswith("-A ")]
    return found + list(SIMPLE_LINES)


def test_rules_read_with_one_match_are_the_rules_read_token_by_token():
    from kubelint_ports.loading.snapshot import iptables_save
    from kubelint_ports.loading.snapshot.dump_records import Chain, Table

    fast, slow, simple = Table("nat", 1), Table("nat", 1), 0
    for number, line in enumerate(dump_lines(), start=1):
        name = line.split()[1]
        for table in (fast, slow):
            table.chains.setdefault(name, Chain(name, 1, "-"))
        if iptables_save._simple_rule(line, number, fast.chains):
            simple += 1
            iptables_save._tokenised_rule(line, number, slow, header_less=False)
            assert fast.chains[name].rules[-1] == slow.chains[name].rules[-1], line
    assert simple > 60  # most kube-proxy and portmap lines of the fixtures take the short way
    matched = [bool(iptables_save._SIMPLE_RULE.fullmatch(line)) for line in SIMPLE_LINES]
    assert matched == [True] * 4 + [False] * (len(SIMPLE_LINES) - 4)


def test_port_past_65535_in_a_simple_rule_is_still_an_input_error():
    from kubelint_ports.loading.snapshot.iptables_save import read_iptables_save

    text = ("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-A - [0:0]\n-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment "
            '--comment "a/b:c cluster IP" -m tcp --dport 99999 -j KUBE-SVC-A\nCOMMIT\n')
    _, problems = read_iptables_save(text, "rules")
    assert [(p.location.line, p.location.column, p.message) for p in problems] == [
        (4, 88, "--dport '99999' is not a port list")]


def test_jump_rules_of_kube_proxy_chains_keep_their_line_and_target():
    from dataclasses import MISSING, fields

    from kubelint_ports.loading.snapshot.dump_records import JumpRule, Rule

    dump = QA / "partial-shadow" / "node-802" / "iptables-save"
    lines = dump.read_text(encoding="utf-8").split("\n")
    chains = read_file(str(dump))[0].ruleset.tables["nat"].chains
    endpoint = chains["KUBE-SEP-BBBBBBBBBBBBBBBB"].rules
    assert [(type(r), r.target, r.end_column) for r in endpoint] == [
        (JumpRule, "KUBE-MARK-MASQ", len(lines[endpoint[0].line - 1]) + 1),
        (JumpRule, "DNAT", len(lines[endpoint[1].line - 1]) + 1)]
    masquerade, jump = chains["KUBE-SVC-LOLE4ISW44XBNF3G"].rules
    assert type(masquerade) is Rule and masquerade.negated == {"-s"} and masquerade.source == "10.244.0.0/16"
    assert type(jump) is JumpRule and jump.target == "KUBE-SEP-BBBBBBBBBBBBBBBB" and jump.matches_port(80)
    for field in fields(Rule):  # what a jump rule does not say reads as "not matched on"
        if field.name not in JumpRule.__slots__:
            assert field.default is not MISSING and getattr(jump, field.name) == field.default, field.name


@pytest.mark.parametrize("line", [
    "-A KUBE-SEP-X -m comment --comment x -j DNAT", "-A KUBE-SEP-X -m  comment -j X", "-A KUBE-SEP-X -m -m tcp -j X",
    "-A KUBE-SEP-X -m comment\t-j X", "-A KUBE-SEP-X -j X -m tcp", "-A KUBE-SEP-X -j X -m",
    "-A KUBE-SEP-X -m tcpx -j X",
    "-A KUBE-SEP-X -m tcp -m foo -j X", "-A KUBE-SEP-X -m statistic -m recent -j X", "-A KUBE-SEP-X -j X",
])
def test_the_search_for_unknown_match_modules_agrees_with_each_line(line):
    """The whole dump is searched once for a ` -m NAME` that is no match module; where that finds
    none, no line's own check could have failed."""
    from kubelint_ports.loading.snapshot.iptables_save import _UNKNOWN_MODULE, _modules_known

    assert (_UNKNOWN_MODULE.search(line) is None) == _modules_known(line)


def test_a_dump_split_a_piece_at_a_time_has_the_lines_of_the_whole():
    import random

    from kubelint_ports.loading.snapshot.iptables_save import _lines
    from kubelint_ports.loading.snapshot.text import lines

    rng = random.Random(7)
    texts = ["", "\n", "\n\n", "a", "a\n", "a\n\n", "\nb", "ab\ncd\n", "ab\ncd"]
    texts += ["".join(rng.choice("ab\n") for _ in range(rng.randrange(30))) for _ in range(200)]
    for text in texts:
        for size in range(1, 8):
            assert list(_lines(text, size)) == lines(text), (text, size)
