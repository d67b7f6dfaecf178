"""Hostile node dumps (issue 21): each class of input that crashed, hung, was read as nothing or
leaked file content through the `node` command, reproduced.

The promise for every one: no exception escapes (an internal error, exit 3, lost every other
node's findings), a malformed dump is an input error at its line (exit 2), the snapshot's other
files and the other nodes are still read, reading stays linear in the input (measured by
benchmarks/bench_json_dumps.py), and no message quotes more of a file than a short, escaped
excerpt of the token at fault.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from kubelint_ports.loading.snapshot import load_snapshot, read_file
from kubelint_ports.loading.snapshot.read import parse

INCIDENT_003 = Path(__file__).resolve().parent / "policies" / "KP805" / "fail-incident-003" / "node-5"
FORMATS = Path(__file__).resolve().parent / "snapshots" / "formats"


def run_node(*args: str):
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    return CliRunner().invoke(app, ["node", "--no-color", *args])


def two_nodes(tmp_path: Path, name: str | None = None, data: bytes = b"") -> tuple[Path, Path]:
    """node-5 (incident 003 plus the hostile file `name`) and node-6 (incident 003 as is): both
    have a KP805 finding of their own, which must survive the hostile file."""
    hostile, other = tmp_path / "node-5", tmp_path / "node-6"
    shutil.copytree(INCIDENT_003, hostile)
    shutil.copytree(INCIDENT_003, other)
    if name:
        assert not (hostile / name).exists(), "the hostile file must not replace one of incident 003's"
        (hostile / name).write_bytes(data)
    return hostile, other


def assert_input_error_and_other_nodes_kept(result, where: str, words: str = "") -> str:
    """Exit 2 (never 3, never an exception), the one input error at `where`, and KP805 for both nodes."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    errors = [row for row in result.stdout.splitlines() if "input-error" in row]
    assert len(errors) == 1 and where in errors[0] and words in errors[0], result.stdout
    assert "node-5/ss" in result.stdout and "node-6/ss" in result.stdout and result.stdout.count("KP805") == 2, (
        result.stdout)
    return errors[0]


# --- crashes: every exception the JSON readers let out, now an input error at the object -------

TABLE = {"table": {"family": "ip", "name": "nat"}}
CHAIN = {"chain": {"family": "ip", "table": "nat", "name": "X"}}


def rule(*expressions) -> dict:
    return {"rule": {"family": "ip", "table": "nat", "chain": "X", "expr": list(expressions)}}


def dport(right) -> dict:
    return {"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": right}}


# (the bad object, what the error says); each crashed `node` with the exception in its id
BAD_NFT_OBJECTS = [
    pytest.param({"chain": {"family": "ip", "table": "nat"}}, "chain without a `name`", id="KeyError-chain-name"),
    pytest.param({"set": {"family": "ip", "table": "nat"}}, "set without a `name`", id="KeyError-set-name"),
    pytest.param({"chain": {"family": "ip", "table": "nat", "name": ["X"]}}, "`name` is a list",
                 id="TypeError-unhashable-name"),
    pytest.param({"rule": {"family": "ip", "table": "nat", "chain": ["X"], "expr": []}}, "`chain` is a list",
                 id="TypeError-unhashable-chain"),
    pytest.param({"set": {"family": "ip", "table": "nat", "name": "s", "elem": 5}}, "`elem` is a number",
                 id="TypeError-elem-number"),
    pytest.param({"set": {"family": "ip", "table": "nat", "name": "s", "elem": [{"concat": 3}]}},
                 "`concat` is a number", id="TypeError-concat-number"),
    pytest.param({"rule": {"family": "ip", "table": "nat", "chain": "X", "expr": 5}}, "`expr` is a number",
                 id="TypeError-expr-number"),
    pytest.param(rule(dport({"set": 4})), "a port `set` is a number", id="TypeError-port-set-number"),
    pytest.param({"set": {"family": "ip", "table": "nat", "name": "s", "elem": [{"elem": []}]}},
                 "without its `val`", id="AttributeError-elem-list"),
    pytest.param({"map": {"family": "ip", "table": "nat", "name": "m", "elem": [[{"concat": ["tcp", 80]},
                                                                               {"goto": "x"}]]}},
                 "a `goto` is not", id="AttributeError-goto-string"),
    pytest.param({"set": {"family": "ip", "table": "nat", "name": "s", "elem": [{"prefix": "x"}]}},
                 "a `prefix` is not", id="AttributeError-prefix-string"),
    pytest.param(rule({"match": "x"}), "`match` is a string", id="AttributeError-match-string"),
    pytest.param(rule({"match": {"left": {"meta": "x"}, "right": "tcp"}}), "`meta` is a string",
                 id="AttributeError-meta-string"),
    pytest.param(rule({"match": {"left": {"payload": "x"}, "right": 1}}), "`payload` is a string",
                 id="AttributeError-payload-string"),
    pytest.param(rule({"jump": "x"}), "a `jump` is not", id="AttributeError-jump-string"),
    pytest.param(rule({"dnat": 5}), "`dnat` is a number", id="AttributeError-dnat-number"),
    pytest.param(rule({"xt": "x"}), "`xt` is a string", id="AttributeError-xt-string"),
    pytest.param(rule(dport({"range": [1, 2, 3]})), "is not [LOW, HIGH]", id="ValueError-range-of-three"),
    pytest.param(rule(dport({"range": ["a", "b"]})), "is not [LOW, HIGH]", id="ValueError-range-of-words"),
]


@pytest.mark.parametrize("bad, words", BAD_NFT_OBJECTS)
def test_a_malformed_nft_json_object_is_an_input_error_at_its_place(tmp_path: Path, bad: dict, words: str):
    good_after = rule(dport(80), {"accept": None})
    text = json.dumps({"nftables": [TABLE, CHAIN, bad, good_after]})
    column = text.index(json.dumps(bad)) + 1
    result = run_node(*map(str, two_nodes(tmp_path, "nft.json", text.encode())))
    assert_input_error_and_other_nodes_kept(result, f"node-5/nft.json:1:{column}:", words)


def test_every_malformed_nft_json_object_is_listed_and_the_rest_read():
    objects = [TABLE, CHAIN, {"chain": {"family": "ip", "table": "nat"}}, rule(dport(80)), rule({"jump": 1})]
    text = '{"nftables": [\n' + ",\n".join(f"  {json.dumps(o)}" for o in objects) + "\n]}\n"  # one per line
    read, problems = parse("nft-json", text, "dump")
    assert [(p.location.line, p.location.column, p.message) for p in problems] == [
        (4, 3, "chain without a `name`"), (6, 3, 'a `jump` is not {"target": CHAIN}')]
    assert read.ruleset.tables["ip nat"].chains["X"].rules[0].dports == ((80, 80),)  # the good rule was read


@pytest.mark.parametrize("name, text, words", [
    pytest.param("nft.json", '{"nftables": [' + "[" * 100_000 + "]" * 100_000 + "]}",
                 "nested deeper than 200 levels (limit max-depth)", id="RecursionError-nft"),
    pytest.param("pods.json", '{"items": [' + "[" * 100_000 + "]" * 100_000 + '], "x": "SANDBOX_READY"}',
                 "nested deeper than 200 levels (limit max-depth)", id="RecursionError-crictl"),
    pytest.param("pods.json", json.dumps({"items": [{"id": "a", "state": ["SANDBOX_READY"]}]}),
                 "items[0] is not a pod sandbox: its `state`", id="TypeError-crictl-state-list"),
    pytest.param("ss.txt", "tcp LISTEN 0 5 0.0.0.0:\u00b2 0.0.0.0:*\n", "is not ADDRESS:PORT",
                 id="ValueError-ss-superscript-port"),
    pytest.param("nft", "table ip cni_hostport {\n\tchain hostports {\n\t\ttcp dport 8080 dnat to 10.0.0.2:\u00b2\n"
                        "\t}\n}\n", "the DNAT destination '10.0.0.2:\u00b2' has no port",
                 id="ValueError-nft-dnat-port"),
    pytest.param("rules", "*nat\n:PREROUTING ACCEPT [0:0]\n:CNI-HOSTPORT-DNAT - [0:0]\n:CNI-DN-x - [0:0]\n"
                          "-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT\n"
                          '-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"cbr0\\" id: \\"abc\\"" '
                          "-m multiport --dports 8080 -j CNI-DN-x\n"
                          "-A CNI-DN-x -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.244.1.5:\u00b2\nCOMMIT\n",
                 "the DNAT destination '10.244.1.5:\u00b2' has no port", id="ValueError-iptables-dnat-port"),
    pytest.param("ss.txt", 'tcp LISTEN 0 5 0.0.0.0:22 0.0.0.0:* users:(("sshd",pid=' + "9" * 5000 + ",fd=3))\n",
                 "is not a process ID", id="ValueError-ss-pid-digits"),
    pytest.param("nft", "table ip nat {\n\tchain X {\n\t\ttype nat hook prerouting priority dstnat + " + "9" * 5000
                 + "; policy accept;\n\t}\n}\n", "is not a 32-bit number", id="ValueError-nft-priority-digits"),
])
def test_nesting_type_confusion_and_odd_digits_are_input_errors(tmp_path: Path, name: str, text: str, words: str):
    result = run_node(*map(str, two_nodes(tmp_path, name, text.encode())))
    assert_input_error_and_other_nodes_kept(result, f"node-5/{name}:", words)


def test_a_key_named_inside_a_string_is_no_key(tmp_path: Path):
    """`"nftables"` as a value and a `[` in a string: the list was looked for by text search, and
    decoding from the wrong bracket raised JSONDecodeError out of the reader."""
    text = '{"k": "nftables", "z": "[", "nftables": [{"table": {"family": "ip", "name": "nat"}}]}'
    result = run_node(*map(str, two_nodes(tmp_path, "nft.json", text.encode())))
    assert result.exit_code == 1 and result.stdout.count("KP805") == 2, result.output
    read, problems = parse("nft-json", text, "dump")
    assert not problems and read.ruleset.tables["ip nat"].line == 1


def test_json_depth_is_refused_before_the_decoder_recurses(monkeypatch):
    """The budget speaks first: `json` is never handed a text nested past max-depth."""
    import kubelint_ports.loading.snapshot.json_text as json_text

    def refuse(*args, **kwargs):
        raise AssertionError("the decoder saw a text over the depth budget")

    monkeypatch.setattr(json_text._DECODER, "raw_decode", refuse)
    _, problems = parse("nft-json", '{"nftables": [' + "[" * 201 + "]" * 201 + "]}", "dump")
    assert [(p.location.line, p.location.column) for p in problems] == [(1, 213)]
    assert "nested deeper than 200 levels" in problems[0].message


def test_every_bad_crictl_item_is_an_input_error_at_its_line():
    text = ('{"items": [\n {"id": "a", "state": "SANDBOX_READY"},\n {"id": 5, "state": "SANDBOX_READY"},\n'
            ' {"id": "c", "state": "SANDBOX_READY", "metadata": {"name": {"x": 1}}},\n 7\n]}\n')
    read, problems = parse("crictl-pods", text, "pods")
    assert [(p.location.line, p.message.split(" is not")[0]) for p in problems] == [
        (3, "items[1]"), (4, "items[2]"), (5, "items[3]")]
    assert [s.id for s in read.sandboxes] == ["a"]


# --- big JSON dumps: places stay exact (that reading them stays linear in time is measured by
# benchmarks/bench_json_dumps.py, never asserted: a busy machine stretches any timing) ----------

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_json_dumps import crictl_escaped_ids  # noqa: E402


def test_places_in_a_big_json_dump_are_exact():
    text = crictl_escaped_ids(500)
    read, _ = parse("crictl-pods", text, "pods")
    assert [s.line for s in read.sandboxes] == list(range(2, 502))
    assert read.sandboxes[0].id == "a" + "0" * 62 and read.sandboxes[0].end_column == len(text.split("\n")[1]) + 1


# --- line ends and byte-order marks: every text dump reads the same -----------------------------

TEXT_DUMPS = {  # one dump of each text format, as its tool prints it
    "iptables-save": (FORMATS / "iptables-legacy-save").read_text(encoding="utf-8"),
    "nft": (FORMATS / "nft-ruleset").read_text(encoding="utf-8"),
    "ipset": (FORMATS / "ipset-list").read_text(encoding="utf-8"),
    "ss": (FORMATS / "ss-Htlnup").read_text(encoding="utf-8"),
    "ip-addr": (FORMATS / "ip-o-addr").read_text(encoding="utf-8"),
    "ipvsadm": "-A -t 10.96.0.1:443 -s rr\n-a -t 10.96.0.1:443 -r 10.0.0.1:6443 -m -w 1\n",
    "sysctl": "net.ipv4.ip_local_port_range = 32768\t60999\n",
    "ipam": "/var/lib/cni/networks/cbr0/10.244.1.5:aaaa1111\r\n/var/lib/cni/networks/cbr0/10.244.1.5:eth0\n",
    "nft-json": (FORMATS / "nft-j.json").read_text(encoding="utf-8"),
    "crictl-pods": '{\n  "items": [\n    {"id": "aaaa1111", "state": "SANDBOX_READY"}\n  ]\n}\n',
}


RECORDS = ("ruleset", "sets", "listeners", "addresses", "leases", "sandboxes", "virtual_servers", "sysctls")


def records(snapshot_file):
    return {name: repr(getattr(snapshot_file, name)) for name in RECORDS}


@pytest.mark.parametrize("encode", [
    pytest.param(lambda text: text.replace("\n", "\r").encode(), id="cr-only"),
    pytest.param(lambda text: b"\xef\xbb\xbf" + text.encode(), id="utf8-bom"),
    pytest.param(lambda text: b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode(), id="bom-and-crlf"),
])
@pytest.mark.parametrize("kind", sorted(TEXT_DUMPS))
def test_cr_line_ends_and_a_byte_order_mark_read_as_the_tool_printed(tmp_path: Path, kind: str, encode):
    dump = tmp_path / "dump"
    dump.write_text(TEXT_DUMPS[kind], encoding="utf-8")
    expected, problems = read_file(str(dump))
    assert expected is not None and expected.kind == kind and not problems
    dump.write_bytes(encode(TEXT_DUMPS[kind]))
    found, problems = read_file(str(dump))
    assert not problems and found is not None and found.kind == kind
    assert records(found) == records(expected)


def test_a_cr_only_iptables_save_is_read_not_skipped(tmp_path: Path):
    """It read as one comment line: exit 0 and KP805 lost; behind a BOM it was "not a snapshot dump"."""
    hostile, other = two_nodes(tmp_path)
    dump = hostile / "iptables-save"
    dump.write_bytes(dump.read_bytes().replace(b"\n", b"\r"))
    (other / "iptables-save").write_bytes(b"\xef\xbb\xbf" + (other / "iptables-save").read_bytes())
    result = run_node(str(hostile), str(other))
    assert result.exit_code == 1 and result.stdout.count("KP805") == 2 and "input-error" not in result.stdout, (
        result.stdout)


def test_a_utf16_dump_is_named_as_such(tmp_path: Path):
    text = TEXT_DUMPS["ss"]
    (tmp_path / "ss").write_bytes(text.encode("utf-16"))
    _, problems = read_file(str(tmp_path / "ss"))
    assert len(problems) == 1 and "UTF-16 text: save the dump as UTF-8" in problems[0].message


# --- nonsense values: input errors at their line, not facts the checks believe -------------------

@pytest.mark.parametrize("name, text, line, words", [
    pytest.param("ipset", "Name: KUBE-CLUSTER-IP\nType: hash:ip,port\nMembers:\n10.96.0.1,tcp:99999999999999\n", 4,
                 "'tcp:99999999999999' in set KUBE-CLUSTER-IP (hash:ip,port) is not a port", id="ipset-port"),
    pytest.param("ipset", "Name: KUBE-CLUSTER-IP\nType: hash:ip,port\nMembers:\n999.0.0.1,tcp:80\n", 4,
                 "'999.0.0.1' in set KUBE-CLUSTER-IP (hash:ip,port) is not an IP address", id="ipset-address"),
    pytest.param("ipset", "create KUBE-LOOP-BACK hash:ip,port,ip family inet\n"
                          "add KUBE-LOOP-BACK 10.244.1.5,tcp:80\n", 2, "is not IP,PORT,IP", id="ipset-save-parts"),
    pytest.param("sysctl", "net.ipv4.ip_local_port_range = 60999 32768\n", 1,
                 "'60999 32768' is not a range the kernel accepts", id="sysctl-inverted"),
    pytest.param("sysctl", "net.ipv4.ip_local_port_range = 1 99999999999999\n", 1, "not a range the kernel",
                 id="sysctl-huge"),
    pytest.param("sysctl", "net.ipv4.ip_local_reserved_ports = 30000-20000\n", 1, "'30000-20000' is not a port",
                 id="sysctl-reserved-inverted"),
    pytest.param("nft", "table ip nat {\n\tchain X {\n\t\ttcp dport 900-100 accept\n\t}\n}\n", 3,
                 "'900-100' is not a port or a port range", id="nft-inverted-range"),
    pytest.param("nft", "table ip nat {\n\tchain X {\n\t\ttcp dport 99999999999999 accept\n\t}\n}\n", 3,
                 "'99999999999999' is not a port", id="nft-huge-port"),
    pytest.param("nft", "table ip nat {\n\tchain X {\n\t\tip daddr 999.0.0.1 tcp dport 80 accept\n\t}\n}\n", 3,
                 "'999.0.0.1' is not an IP address", id="nft-address"),
    pytest.param("nft", "table ip kube-proxy {\n\tmap service-nodeports {\n\t\ttype inet_proto . inet_service : verdict"
                        "\n\t\telements = { tcp . 99999 : goto external-x }\n\t}\n}\n", 4,
                 "'99999' in element", id="nft-map-element-port"),
    pytest.param("nft.json", json.dumps({"nftables": [TABLE, CHAIN, rule(dport(99999))]}), 1,
                 "destination port '99999' is not a port", id="nft-json-port"),
    pytest.param("ip-addr", "2: eth0    inet 999.0.0.1/24 brd 10.0.0.255 scope global eth0\n", 1,
                 "'999.0.0.1/24' is not an inet address", id="ip-addr-address"),
    pytest.param("ip-addr", "2: eth0    inet 10.0.0.1/33 scope global eth0\n", 1, "prefix length of at most 32",
                 id="ip-addr-prefix"),
    pytest.param("ss.txt", "tcp LISTEN 0 5 999.0.0.1:22 0.0.0.0:*\n", 1, "'999.0.0.1:22' is not ADDRESS:PORT",
                 id="ss-address"),
    # found by the 100,000-input campaign (seed 25): an IndexError, exit 3, before
    pytest.param("ipvsadm", "-A -t 10.96.0.1:443 -s rr\n-a -t 10.96.0.1:443 -r\n", 2,
                 "`-r` names no real server", id="ipvsadm-real-server-missing"),
])
def test_nonsense_values_are_input_errors_at_their_line(tmp_path: Path, name: str, text: str, line: int, words: str):
    result = run_node(*map(str, two_nodes(tmp_path, name, text.encode())))
    assert_input_error_and_other_nodes_kept(result, f"node-5/{name}:{line}:", words)


# --- what a snapshot directory holds besides dump files ------------------------------------------

def test_subdirectories_symlinked_directories_and_fifos_are_passed_over_with_a_note(tmp_path: Path):
    node = tmp_path / "node-5"
    shutil.copytree(INCIDENT_003, node)
    (node / "old").mkdir()
    (node / "old" / "iptables-save").write_text("*nat\nnot read\n")
    (tmp_path / "elsewhere").mkdir()
    (node / "more").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (node / "inside").symlink_to(node / "old", target_is_directory=True)
    os.mkfifo(node / "pipe")
    snapshot, problems = load_snapshot(str(node))
    assert not problems
    assert sorted(Path(f.path).name for f in snapshot.files) == ["iptables-save", "ss"]
    notes = "\n".join(snapshot.notes)
    assert len(snapshot.notes) == 4, notes
    for entry, words in (("old", "a directory"), ("inside", "a directory (a symlink)"), ("pipe", "a FIFO"),
                         ("more", "a symlink leaving the snapshot directory")):
        assert any(f"node-5/{entry}: skipped, {words}" in note for note in snapshot.notes), notes


def test_a_directory_of_node_directories_says_to_name_each(tmp_path: Path):
    shutil.copytree(INCIDENT_003, tmp_path / "snapshots" / "node-5")
    snapshot, problems = load_snapshot(str(tmp_path / "snapshots"))
    assert [p.message for p in problems] == [
        "the snapshot directory holds no dump files, only directories: give each node's directory as a snapshot "
        "(`snapshots/*`)"]


# --- symlinks out of the snapshot, and what a message may quote ----------------------------------

SECRET = "ghp_" + "S3cr3tT0k3n" * 4  # a token in a file next to the snapshot


def test_a_symlink_out_of_the_snapshot_is_not_followed_nor_quoted(tmp_path: Path):
    secret = tmp_path / "hosts.yml"
    secret.write_text(f"{SECRET}\n")
    hostile, other = two_nodes(tmp_path)
    (hostile / "crictl-pods").symlink_to(secret)
    result = run_node(str(hostile), str(other))
    assert "S3cr3t" not in result.output and result.stdout.count("KP805") == 2, result.output
    snapshot, problems = load_snapshot(str(hostile))
    assert not problems and "crictl-pods" not in {Path(f.path).name for f in snapshot.files}
    assert any("crictl-pods: skipped, a symlink leaving the snapshot directory" in note for note in snapshot.notes)
    assert not any("S3cr3t" in note or str(secret) in note for note in snapshot.notes)


def test_a_snapshot_file_named_directly_through_a_symlink_out_is_not_read(tmp_path: Path, monkeypatch):
    secret = tmp_path / "secret" / "token"
    secret.parent.mkdir()
    secret.write_text(f"tcp LISTEN 0 5 0.0.0.0:22 0.0.0.0:* {SECRET}\n")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "link").mkdir()
    (tmp_path / "work" / "link" / "ss").symlink_to(secret)
    monkeypatch.chdir(tmp_path / "work")
    snapshot, problems = load_snapshot("link/ss")
    assert not snapshot.files and [p.message for p in problems] == [
        "not read: a symlink to a file outside the current directory and its own"]


@pytest.mark.parametrize("name, line", [
    pytest.param("notes", "{secret}", id="not-a-dump"),
    pytest.param("rules", "*nat\n:PREROUTING ACCEPT [0:0]\n{secret}\nCOMMIT\n", id="iptables-line"),
    pytest.param("rules", "*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -m {secret} -j ACCEPT\nCOMMIT\n",
                 id="iptables-module"),
    pytest.param("nft", "table ip nat {{\n\t{secret}\n}}\n", id="nft-line"),
    pytest.param("ss.txt", "tcp LISTEN 0 5 0.0.0.0:{secret} 0.0.0.0:*\n", id="ss-address"),
    pytest.param("ipset", "Name: s\nType: hash:ip\nMembers:\n{secret}\n", id="ipset-member"),
    pytest.param("sysctl", "{secret}\n", id="sysctl-line"),
    pytest.param("ip-addr", "1: lo inet 127.0.0.1/8 scope host lo\n{secret}\n", id="ip-addr-line"),
    pytest.param("ipvsadm", "-A -t 10.96.0.1:443 -s rr\n{secret}\n", id="ipvsadm-line"),
    pytest.param("ipam", "/var/lib/cni/networks/cbr0/{secret}:aaaa\n", id="ipam-name"),
    pytest.param("nft.json", '{{"nftables": [{{"table": {{"family": "{json}", "name": "x"}}}}]}}', id="nft-json"),
    pytest.param("pods.json", '{{"items": [{{"id": "a", "state": "SANDBOX_READY"}}, '
                              '{{"id": "b", "state": "{json}"}}]}}',
                 id="crictl-state"),
])
def test_no_input_error_quotes_more_than_a_short_escaped_excerpt(tmp_path: Path, name: str, line: str):
    """40 characters at most, control characters escaped: the end of a long token never shows,
    nor does a raw escape sequence (a terminal control, a forged `::error::` line)."""
    token = "\x1b[2J" + "x" * 36 + "THE-REST-OF-THE-LINE-" * 20
    text = line.format(secret=token, json=json.dumps(token)[1:-1])
    result = run_node(*map(str, two_nodes(tmp_path, name, text.encode())))
    row = assert_input_error_and_other_nodes_kept(result, f"node-5/{name}:")
    assert "THE-REST" not in result.output and "\x1b" not in result.output, row
    assert "\\x1b[2J" in row or "\\u001b[2J" in row, row


# --- large ss and ipvsadm dumps (issue 31): a run of lines per match, records kept as columns ----

def ipvsadm_text(rng, services: int) -> str:
    """Mostly what ipvsadm prints for IPv4 services, and lines read field by field: IPv6, fwmark,
    odd spacing, a service declared twice, an `-a` line away from its service."""
    out, declared = [], []
    for index in range(services):
        flag = rng.choice(["-t"] * 8 + ["-u", "--tcp-service", "--sctp-service"])
        endpoint = rng.choice([f"10.96.{index // 250}.{index % 250}:{rng.choice([53, 80, 443])}"] * 12 + [
            f"[fd00::{index:x}]:80", f"10.0.{index % 250}.1%eth0:80", f"10.1.0.{index % 250}:080"])
        if declared and rng.random() < 0.03:
            flag, endpoint = rng.choice(declared)
        declared.append((flag, endpoint))
        out.append(rng.choice([f"-A {flag} {endpoint} -s rr", f"-A {flag} {endpoint}", f"-A {flag}\t{endpoint} -s rr"]))
        for _ in range(rng.choice([0, 0, 1, 2])):
            out.append(f"-a {flag} {endpoint} -r 10.244.0.{index % 250}:8080 -m -w 1")
        if rng.random() < 0.03:
            flag, endpoint = rng.choice(declared)
            out.append(rng.choice([f"-a {flag} {endpoint} -r 10.0.0.9:80 -m -w 1", "-A -f 12 -s rr", ""]))
    return "\n".join(out) + "\n"


def ss_text(rng, sockets: int) -> str:
    """Mostly `ss -Htlnup` lines of IPv4, `*` and `[::]` sockets with one process, and lines read
    field by field: a header, IPv6, several processes, no process, other Netids."""
    out = [rng.choice(["Netid State Recv-Q Send-Q Local Address:Port Peer Address:Port Process", ""])]
    for index in range(sockets):
        netid, state = rng.choice([("tcp ", "LISTEN"), ("udp ", "UNCONN"), ("", "LISTEN"), ("", "UNCONN")])
        local = rng.choice([f"10.0.{index // 250}.{index % 250}", "0.0.0.0", "*", "[::]"] * 5 + [
            "127.0.0.53%lo", "[::ffff:10.0.0.1]", "[fd00::1]"]) + f":{rng.randrange(65536)}"
        process = f'("{rng.choice(["nginx", "sshd", "a b"])}",pid={rng.randrange(1, 500)},fd={index % 90})'
        users = rng.choice([f" users:({process})"] * 8 + ["", f" users:({process},{process})"])
        out.append(rng.choice([f"{netid}{state} 0 128 {local} 0.0.0.0:*{users}"] * 9 + [
            f"{netid}{state}   0      128    {local}    *:*{users}", f"raw UNCONN 0 0 {local} *:*"]))
    return "\n".join(out) + "\n"


def read_field_by_field(reader: str, text: str):
    """What the dump says, each line read by the reader's field-by-field way."""
    from kubelint_ports.loading.snapshot import ipvsadm, ss
    from kubelint_ports.loading.snapshot.tables import Listeners
    from kubelint_ports.loading.snapshot.text import DumpProblem, lines

    services, listeners = ipvsadm.ServicesRead(), Listeners()
    try:
        for number, line in enumerate(lines(text), start=1):
            if reader == "ipvsadm":
                services.read_line(line, number)
            else:
                ss.read_line(line, number, listeners)
    except DumpProblem as problem:
        return [(problem.line, problem.column, problem.message)]
    return list(services.services if reader == "ipvsadm" else listeners)


@pytest.mark.parametrize("reader", ["ipvsadm", "ss"])
@pytest.mark.parametrize("run", [40, 400])
@pytest.mark.parametrize("seed", range(6))
def test_a_dump_read_a_run_of_lines_at_a_time_reads_as_each_line_field_by_field(monkeypatch, reader, run, seed):
    import random
    from functools import partial

    from kubelint_ports.loading.snapshot import ipvsadm, ss, text

    module = ipvsadm if reader == "ipvsadm" else ss
    monkeypatch.setattr(module, "line_runs", partial(text.line_runs, size=run))  # 40: a run breaks services
    rng = random.Random(seed)
    dump = (ipvsadm_text if reader == "ipvsadm" else ss_text)(rng, 600)
    if seed % 3 == 2:  # one line ss or ipvsadm would not print
        lines = dump.split("\n")
        lines[rng.randrange(len(lines) - 1)] = rng.choice(["-x 1", "tcp LISTEN 0 5 999.0.0.1:22 *:*", "junk"])
        dump = "\n".join(lines)
    records, problems = (ipvsadm.read_ipvsadm if reader == "ipvsadm" else ss.read_ss)(dump, "dump")
    expected = read_field_by_field(reader, dump)
    if problems:
        assert [(p.location.line, p.location.column, p.message) for p in problems] == expected
    else:
        assert list(records) == expected and len(expected) > 300


@pytest.mark.parametrize("reader", ["ipvsadm", "ss"])
def test_a_large_dump_is_kept_as_columns_and_the_node_state_makes_no_record_per_line(reader):
    """Measured with tracemalloc: a service or socket took ~470-600 bytes (its record and strings,
    then the model's record and DumpLine); kept as columns, one string each and numbers, ~100."""
    import tracemalloc

    from kubelint_ports.loading.snapshot import Snapshot, ipvsadm, ss
    from kubelint_ports.loading.snapshot.dump_records import SnapshotFile
    from kubelint_ports.model.node_state import build_node_state

    count = 20_000
    addresses = [f"10.{i // 60000}.{i // 250 % 240}.{i % 250}" for i in range(count)]
    lines = ([f"-A -t {a}:{80 + i % 3} -s rr\n-a -t {a}:{80 + i % 3} -r 10.244.0.1:8080 -m -w 1"
              for i, a in enumerate(addresses)] if reader == "ipvsadm" else
             [f'tcp LISTEN 0 4096 {a}:{1024 + i} 0.0.0.0:* users:(("nginx",pid={300 + i % 400},fd={i}))'
              for i, a in enumerate(addresses)])
    dump = "\n".join(lines) + "\n"
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        if reader == "ipvsadm":
            table, problems = ipvsadm.read_ipvsadm(dump, "ipvsadm")
            read = SnapshotFile("ipvsadm", "ipvsadm", virtual_servers=table)
        else:
            table, problems = ss.read_ss(dump, "ss")
            read = SnapshotFile("ss", "ss", listeners=table)
        read_at = tracemalloc.get_traced_memory()[0]
        state = build_node_state(Snapshot("node-1", "node-1", [read]))
        modelled_at = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert not problems and len(table) == count
    assert (read_at - before) / count < 200
    assert modelled_at - read_at < 20_000  # not per record: the node state refers to the table
    records = state.cluster_ips if reader == "ipvsadm" else state.listeners
    assert len(records) == count and records[7].place.line == (15 if reader == "ipvsadm" else 8)


def test_records_on_ports_are_the_records_with_those_ports():
    from kubelint_ports.loading.snapshot.ss import read_ss
    from kubelint_ports.loading.snapshot.tables import DumpRecords
    from kubelint_ports.model.node_state import Listening, listening

    table, _ = read_ss("tcp LISTEN 0 5 0.0.0.0:80 *:*\nudp UNCONN 0 0 *:80 *:*\ntcp LISTEN 0 5 [::]:443 *:*\n", "ss")
    records = DumpRecords()
    records.append(Listening("tcp", "10.0.0.1", 443, (), None))
    records.add(table, lambda socket: listening("ss", socket))
    records.append(Listening("udp", "10.0.0.2", 80, (), None))
    for keys in ({("tcp", 80)}, {("udp", 80), ("tcp", 443)}, {("sctp", 80)}, set()):
        assert list(records.on_ports(keys)) == [r for r in records if (r.protocol, r.port) in keys]
