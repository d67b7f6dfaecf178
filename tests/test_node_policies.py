"""Node-snapshot policies (KP8xx): their docs run as tests, and their fixtures.

Fixtures, one folder per policy: `tests/policies/<ID>/`
  fail-NAME/, pass-NAME/   one run each of `kubelint-ports node`: every subdirectory is a node's
                           snapshot (named after the node); `cluster.txt` / `cluster.yaml` is
                           passed as --cluster, `nodes.yaml` as --nodes, other *.yaml files as
                           manifests.
  expected.txt             the fail runs' findings of the policy, fixture by fixture, as the text
                           formatter prints them without the message:
                           `fail-x/node-1/iptables-save:LINE:COL: severity ID (name) [Node/node-1]`
  messages.snap            the same findings in full: claim, explanation, related places and the
                           `traffic` data (every policy has one, manifest policies too; see
                           `test_message_snapshots` below), so a story never changes unseen.

A policy's docs `example` and `fix` are console transcripts: a `[NODE]$ COMMAND` line starts a
file of NODE's snapshot (default `node`) holding the lines up to the next prompt.

To rewrite the golden files after an intended change, run
    KUBELINT_UPDATE_GOLDEN=1 python -m pytest tests/test_node_policies.py
then read the diff: every line must point at the rule, socket or lease at fault.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest

from kubelint_ports.checks import CHECKS
from kubelint_ports.engine import LintOptions, lint_snapshots
from kubelint_ports.findings import Report
from kubelint_ports.formatters import FormatOptions, get_formatter
from kubelint_ports.policies import Policy, load_policies

from test_policies import POLICY_DIR, UPDATE_GOLDEN, golden_line, golden_lines, working_directory

FIXTURE_DIR = Path(__file__).resolve().parent / "policies"
NODE_POLICIES = tuple(p for p in load_policies(POLICY_DIR) if CHECKS[p.check].reads == "node-snapshot")
PROMPT = re.compile(r"^(?P<node>[A-Za-z0-9._-]*)\$ (?P<command>.+)$")
HOLE = "\x00message\x00"


def policy_params():
    return [pytest.param(policy, id=policy.id) for policy in NODE_POLICIES]


def fixtures(policy: Policy, kind: str) -> list[str]:
    folder = FIXTURE_DIR / policy.id
    return sorted(path.name for path in folder.glob(f"{kind}-*") if path.is_dir()) if folder.is_dir() else []


def fixture_params(kind: str):
    return [pytest.param(policy, name, id=f"{policy.id}-{name}") for policy in NODE_POLICIES
            for name in fixtures(policy, kind)]


def run_fixture(policy_folder: Path, name: str) -> Report:
    """One fixture folder run from inside the policy folder, as the CLI would run it."""
    folder = policy_folder / name
    snapshots = sorted(f"{name}/{path.name}" for path in folder.iterdir() if path.is_dir())
    cluster = tuple(f"{name}/{path.name}" for path in sorted(folder.glob("cluster.*")))
    nodes = tuple(f"{name}/{path.name}" for path in sorted(folder.glob("nodes.yaml")))
    manifests = [f"{name}/{path.name}" for path in sorted(folder.glob("*.yaml"))
                 if path.name not in ("cluster.yaml", "nodes.yaml")]
    with working_directory(policy_folder):
        return lint_snapshots(snapshots, manifests, LintOptions(cluster_files=cluster, node_files=nodes),
                              policies=NODE_POLICIES)


def cli_args(policy_folder: Path, name: str) -> list[str]:
    folder = policy_folder / name
    args = ["node", "--format", "json"] + sorted(f"{name}/{p.name}" for p in folder.iterdir() if p.is_dir())
    for path in sorted(folder.glob("cluster.*")):
        args += ["--cluster", f"{name}/{path.name}"]
    return args


def golden(report: Report, policy: Policy) -> list[str]:
    return golden_lines(report, policy.id)


def write_transcript(text: str, directory: Path) -> list[str]:
    """A docs console transcript -> snapshot directories; returns them."""
    files: dict[tuple[str, str], list[str]] = {}
    current = None
    for line in text.splitlines():
        prompt = PROMPT.match(line)
        if prompt:
            node = prompt["node"] or "node"
            slug = re.sub(r"[^a-z0-9]+", "-", prompt["command"].lower()).strip("-")
            current = (node, slug)
            files[current] = []
        elif current is not None:
            files[current].append(line)
        else:
            raise AssertionError(f"text before the first `$ COMMAND` line: {line!r}")
    for (node, slug), lines in files.items():
        (directory / node).mkdir(parents=True, exist_ok=True)
        (directory / node / slug).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return sorted({node for node, _ in files})


def run_transcript(text: str, tmp_path: Path) -> Report:
    nodes = write_transcript(text, tmp_path)
    with working_directory(tmp_path):
        return lint_snapshots(nodes, policies=NODE_POLICIES)


# --- the policies themselves ----------------------------------------------------------------------

def test_node_policies_use_their_id_range():
    assert [p.id for p in NODE_POLICIES] == ["KP801", "KP802", "KP803", "KP804", "KP805", "KP806"]
    assert all(p.docs.get("language") == "console" for p in NODE_POLICIES)


@pytest.mark.parametrize("policy", policy_params())
def test_policy_has_fixtures(policy: Policy):
    folder = FIXTURE_DIR / policy.id
    assert fixtures(policy, "fail"), f"{folder} needs a fail-NAME/ fixture"
    assert fixtures(policy, "pass"), f"{folder} needs a pass-NAME/ fixture"
    assert (folder / "expected.txt").is_file() or UPDATE_GOLDEN
    unknown = [p.name for p in folder.iterdir() if p.name not in ("expected.txt", "messages.snap") and not (
        p.is_dir() and re.fullmatch(r"(fail|pass)-[a-z0-9-]+", p.name))]
    assert not unknown, f"unexpected entries in {folder}: {unknown}"


@pytest.mark.parametrize("policy", policy_params())
def test_docs_example_fails(policy: Policy, tmp_path: Path):
    report = run_transcript(policy.docs["example"], tmp_path)
    assert not report.diagnostics, report.diagnostics
    assert any(f.rule_id == policy.id for f in report.findings), f"docs.example of {policy.id} yields no finding"


@pytest.mark.parametrize("policy", policy_params())
def test_docs_fix_passes(policy: Policy, tmp_path: Path):
    report = run_transcript(policy.docs["fix"], tmp_path)
    assert not report.diagnostics, report.diagnostics
    assert not [f for f in report.findings if f.rule_id == policy.id], [f.message for f in report.findings]


# --- fixtures -------------------------------------------------------------------------------------

@pytest.mark.parametrize("policy", policy_params())
def test_fail_fixtures_match_golden(policy: Policy):
    folder = FIXTURE_DIR / policy.id
    actual = []
    for name in fixtures(policy, "fail"):
        report = run_fixture(folder, name)
        assert not report.diagnostics, f"{name}: fail fixtures must be valid input: {report.diagnostics}"
        lines = golden(report, policy)
        assert lines, f"{name} triggers no {policy.id} finding"
        actual += lines
    expected_file = folder / "expected.txt"
    if UPDATE_GOLDEN:
        expected_file.write_text("".join(line + "\n" for line in actual), encoding="utf-8")
    assert actual == expected_file.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("policy, name", fixture_params("fail"))
def test_findings_point_at_the_dump_line(policy: Policy, name: str):
    """Each finding opens its dump at a rule, socket or lease line (never a header, never line 0),
    and a finding about a port names that port, which the line holds."""
    folder = FIXTURE_DIR / policy.id
    for finding in run_fixture(folder, name).findings:
        if finding.rule_id != policy.id:
            continue
        location = finding.location
        assert location.line >= 1 and location.column >= 1, location
        text = (folder / location.path).read_text(encoding="utf-8").splitlines()[location.line - 1]
        assert not text.startswith(("#", "*", "COMMIT")), f"{location} points at a header: {text!r}"
        if finding.port is not None:
            assert str(finding.port) in finding.message
            assert str(finding.port) in text or "CNI-HOSTPORT-DNAT" in text or ":" in text, (location, text)
        for related in finding.related:
            assert related.line >= 1


@pytest.mark.parametrize("policy, name", fixture_params("pass"))
def test_pass_fixtures_do_not_trigger_the_rule(policy: Policy, name: str):
    report = run_fixture(FIXTURE_DIR / policy.id, name)
    assert not report.diagnostics, report.diagnostics
    assert not [f for f in report.findings if f.rule_id == policy.id], [f.message for f in report.findings]


@pytest.mark.parametrize("policy", policy_params())
def test_cli_text_output_matches_golden(policy: Policy):
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    folder = FIXTURE_DIR / policy.id
    lines = []
    for name in fixtures(policy, "fail"):
        with working_directory(folder):
            result = CliRunner().invoke(app, cli_args(folder, name))
        assert result.exit_code in (0, 1), result.output
        lines += [golden_line(f["file"], f["line"], f["column"], f["severity"], f["rule"], f["name"],
                              "/".join(filter(None, (f["object"]["namespace"], f["object"]["kind"],
                                                     f["object"]["name"]))))
                  for f in json.loads(result.stdout)["findings"] if f["rule"] == policy.id and not f["suppressed"]]
    assert lines == (folder / "expected.txt").read_text(encoding="utf-8").splitlines()


def test_sarif_region_points_into_the_dump():
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    folder = FIXTURE_DIR / "KP801"
    with working_directory(folder):
        result = CliRunner().invoke(app, cli_args(folder, "fail-incident-001") + ["--format", "sarif"])
    assert result.exit_code == 1, result.output
    run = json.loads(result.stdout)["runs"][0]
    located = [r["locations"][0]["physicalLocation"] for r in run["results"] if r["ruleId"] == "KP801"]
    assert {(p["artifactLocation"]["uri"], p["region"]["startLine"]) for p in located} == {
        # relative to the repository root, as code scanning wants them
        ("tests/policies/KP801/fail-incident-001/node-26/iptables-save", 120),
        ("tests/policies/KP801/fail-incident-001/node-26/iptables-save", 121)}
    # the rules table holds the rules with a result (issue 35), all of them node rules
    assert {rule["id"] for rule in run["tool"]["driver"]["rules"]} == {r["ruleId"] for r in run["results"]}
    assert {r["ruleId"] for r in run["results"]} <= {p.id for p in NODE_POLICIES}


def test_json_output_names_node_and_line():
    folder = FIXTURE_DIR / "KP805"
    report = run_fixture(folder, "fail-incident-003")
    out = io.StringIO()
    get_formatter("json")(report, out, FormatOptions())
    findings = json.loads(out.getvalue())["findings"]
    assert [(f["file"], f["line"], f["object"]["name"]) for f in findings] == [
        ("fail-incident-003/node-5/ss", 2, "node-5")]
    assert "nginx" in findings[0]["message"] and "default/nginx" in findings[0]["message"]


def test_lint_ignores_node_policies(tmp_path: Path):
    from kubelint_ports.engine import lint_paths

    (tmp_path / "pod.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: []\n")
    with working_directory(tmp_path):
        report = lint_paths(["pod.yaml"])
    assert not [f for f in report.findings if f.rule_id.startswith("KP8")]
    assert os.getcwd() != str(tmp_path)


def test_examples_show_every_node_rule_firing():
    """examples/node-snapshots/incident-*/: the README's node examples, every KP8xx rule among them."""
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    examples = Path(__file__).resolve().parents[1] / "examples" / "node-snapshots"
    fired = set()
    for incident in sorted(examples.iterdir()):
        args = ["node", "--format", "json", *sorted(str(p) for p in incident.iterdir() if p.is_dir())]
        for extra in sorted(incident.glob("pods-wide.txt")):
            args += ["--cluster", str(extra)]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1, result.output
        data = json.loads(result.stdout)
        assert data["errors"] == []
        fired |= {f["rule"] for f in data["findings"]}
    assert fired == {p.id for p in NODE_POLICIES}


@pytest.mark.parametrize("policy, name", [param for param in fixture_params("fail")
                                          if param.values[0].id in ("KP801", "KP802", "KP803", "KP805")])
def test_findings_carry_the_datapath_answer(policy: Policy, name: str):
    """Who receives the packet is the datapath model's answer, with the node's observed facts."""
    findings = [f for f in run_fixture(FIXTURE_DIR / policy.id, name).findings if f.rule_id == policy.id]
    assert findings
    for finding in findings:
        assert finding.traffic is not None and finding.traffic["certain"], finding.message
        if finding.rule_id != "KP805" or "hostPort" in finding.message:
            assert finding.traffic["facts"]["hostport"]["value"] in ("portmap", "crio")
        assert "receives it" in finding.message or "never sees it" in finding.message, finding.message


def test_a_lagging_kube_proxy_says_what_happens_to_the_missing_service():
    """Three nodes, one without kube-proxy's rules for shop/web: the datapath model answers for
    that node (no rule, no listener: nothing takes the packet)."""
    [finding] = [f for f in run_fixture(FIXTURE_DIR / "KP806", "fail-lagging-kube-proxy").findings
                 if f.rule_id == "KP806"]
    assert finding.location.path.endswith("node-c/iptables-save") and finding.location.line == 11
    assert "node-c lacks 2 kube-proxy rules" in finding.message
    assert "no rule and no listener on the node takes it, and the Service never sees it" in finding.message
    assert finding.traffic["receiver"] == "nothing" and finding.traffic["certain"]


def test_node_command_has_lints_text_habits(tmp_path: Path):
    """-v explains (who receives the packet), --select/--ignore pick rules, --statistics counts,
    -q drops the summary, --report writes a second format: the same habits as `lint`."""
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    folder = FIXTURE_DIR / "KP806" / "fail-lagging-kube-proxy"
    nodes = [str(folder / name) for name in ("node-a", "node-b", "node-c")]
    runner = CliRunner()
    headline = runner.invoke(app, ["node", *nodes, "--select", "KP806", "--no-color"])
    explained = runner.invoke(app, ["node", *nodes, "--select", "KP806", "-v", "--no-color"])
    assert headline.exit_code == explained.exit_code == 0, headline.output
    assert "never sees it" not in headline.stdout and "never sees it" in explained.stdout
    assert "KP804" not in headline.stdout
    ignored = runner.invoke(app, ["node", *nodes, "--ignore", "KP804,KP806", "-q", "--no-color"])
    assert ignored.exit_code == 0 and ignored.stdout == ""
    sarif = tmp_path / "node.sarif"
    counted = runner.invoke(app, ["node", *nodes, "--statistics", "--report", f"sarif:{sarif}", "--no-color"])
    assert re.search(r"1\s+KP806\s+warning\s+node-drift", counted.stdout), counted.stdout
    assert re.search(r"2\s+KP804", counted.stdout), counted.stdout
    assert {r["ruleId"] for r in json.loads(sarif.read_text())["runs"][0]["results"]} == {"KP804", "KP806"}


# --- regressions: which rules a listener meets, and partial shadowing ------------------------------

QA = Path(__file__).resolve().parent / "snapshots" / "qa"
KP805 = next(p for p in NODE_POLICIES if p.id == "KP805")
KP802 = next(p for p in NODE_POLICIES if p.id == "KP802")


def findings_of(policy: Policy, *snapshots: Path) -> list:
    report = lint_snapshots([str(s) for s in snapshots], policies=(policy,))
    assert not report.diagnostics, report.diagnostics
    return report.findings


def test_kp805_a_listener_on_the_host_ports_host_ip_loses_it():
    """`-d 192.168.1.10/32 --dport 9090 -j DNAT` and a process on 192.168.1.10:9090: packets to that
    address are DNATed to the pod (seen on a real node). The model is asked about the hostIP."""
    findings = findings_of(KP805, QA / "hostip-listener" / "node-k5")
    assert [(f.location.path.rsplit("/", 1)[-1], f.location.line) for f in findings] == [("ss", 1)]
    assert "192.168.1.10:9090/tcp" in findings[0].message and findings[0].traffic["receiver"] == "hostport"


def test_kp805_matches_listeners_to_rules_of_their_address_family(tmp_path: Path):
    """IPv4 nat never sees IPv6 packets: `[::]:30080` (IPv6-only), `[::1]:8080` and `[fd00::10]:30080`
    keep their port against iptables' rules; only 127.0.0.1:30080 loses it. Against ip6tables'
    rules the IPv6 sockets do, and their addresses print bracketed."""
    findings = findings_of(KP805, QA / "ipv6-listeners" / "node-v6")
    assert [f.location.line for f in findings] == [4]
    dump = (QA / "ipv6-listeners" / "node-v6" / "iptables-save").read_text(encoding="utf-8")
    node = tmp_path / "node-v6"
    node.mkdir()
    (node / "ip6tables-save").write_text(dump.replace("iptables-save v1.8.9", "ip6tables-save v1.8.9"), encoding="utf-8")
    (node / "ss").write_text((QA / "ipv6-listeners" / "node-v6" / "ss").read_text(encoding="utf-8"), encoding="utf-8")
    messages = {f.location.line: f.message for f in findings_of(KP805, node)}
    assert 4 not in messages  # 127.0.0.1 is IPv4: ip6tables' rules never see it
    assert "[::]:30080/tcp" in messages[1] and "[fd00::10]:30080/tcp" in messages[3]


def test_kp802_a_host_ip_entry_ahead_of_a_wildcard_one_takes_that_address():
    """192.168.1.10:9090 -> 10.244.1.6 before *:9090 -> 10.244.1.7: the wildcard pod gets nothing
    sent to 192.168.1.10 (first_dnat's rule: the first matching DNAT of a chain wins)."""
    findings = findings_of(KP802, QA / "partial-shadow" / "node-802")
    assert [f.location.line for f in findings] == [88]
    assert "for 192.168.1.10" in findings[0].message and findings[0].related[0].line == 87
    assert findings[0].traffic["destination"] == "host-ip" and findings[0].traffic["receiver"] == "hostport"


# --- message snapshots: every rule's full story, reviewed -------------------------------------------

SNAPSHOT = "messages.snap"


def snapshot_entry(finding) -> str:
    """One finding in full: where, how bad, the three parts a reviewer reads (headline, effect,
    fix), the analysis `-v` prints, related places and the datapath model's answer (`traffic`),
    as the text and JSON formats give them."""
    words = finding.short_words
    lines = [f"{finding.location.path}:{finding.location.line}:{finding.location.column}: {finding.severity} "
             f"{finding.rule_id} [{finding.subject}]",
             f"  headline: {words.headline}"]
    lines += [f"  {name}: {text}" for name, text in (("effect", words.effect), ("fix", words.fix)) if text]
    if words.unknown:
        lines.append(f"  unknown: {', '.join(words.unknown)}")
    if finding.explanation:
        lines.append(f"  analysis: {finding.explanation}")
    lines += [f"  related: {related.path}:{related.line}: {related.message}" for related in finding.related]
    if finding.traffic is not None:
        lines.append("  traffic: " + json.dumps(finding.traffic, sort_keys=True, indent=2).replace("\n", "\n  "))
    return "\n".join(lines)


def message_snapshot(policy: Policy) -> str:
    """Every fail fixture's findings of the policy, case by case (manifest policies) or fixture by
    fixture (node policies)."""
    import test_policies

    folder = FIXTURE_DIR / policy.id
    sections = []
    if CHECKS[policy.check].reads == "node-snapshot":
        runs = [(name, run_fixture(folder, name)) for name in fixtures(policy, "fail")]
    else:
        runs = [(case or "(policy folder)", test_policies.lint_fixtures(folder / case, "fail"))
                for case in test_policies.fixture_cases(folder) if test_policies.fixture_files(folder / case, "fail")]
    for name, report in runs:
        findings = [f for f in report.findings if f.rule_id == policy.id and not f.suppressed]
        sections.append(f"## {name}\n\n" + "\n\n".join(snapshot_entry(f) for f in findings))
    return f"# {policy.id} {policy.name}: full messages of the fail fixtures (KUBELINT_UPDATE_GOLDEN=1 rewrites)\n\n" \
        + "\n\n".join(sections) + "\n"


ALL_POLICIES = tuple(load_policies(POLICY_DIR))


@pytest.mark.parametrize("policy", [pytest.param(p, id=p.id) for p in ALL_POLICIES])
def test_message_snapshots(policy: Policy):
    """ruff's snapshots for our findings: the full story of every rule and case, reviewed in the
    diff; any change of wording or of the model's answer fails until the snapshot is rewritten."""
    path = FIXTURE_DIR / policy.id / SNAPSHOT
    actual = message_snapshot(policy)
    if UPDATE_GOLDEN:
        path.write_text(actual, encoding="utf-8")
    assert path.is_file(), f"{path} is missing: run KUBELINT_UPDATE_GOLDEN=1 python -m pytest tests/test_node_policies.py"
    assert actual == path.read_text(encoding="utf-8"), f"{policy.id}'s messages changed: review, then rewrite {path}"


def test_kp805_a_loopback_listener_keeps_its_port_on_an_ipvs_node(tmp_path: Path):
    """IPVS serves NodePorts on the node's addresses but never on 127.0.0.1 (kube-proxy's
    `isValidForSet` leaves loopback out of the NodePort addresses, pkg/proxy/ipvs/netlink_linux.go):
    a process bound to 127.0.0.1:30080 keeps it; one on 0.0.0.0:30080 loses it to IPVS. The rule
    asks the model about the node's own packets to 127.0.0.1 (it used to ask about a pod's packets
    to the node's address, and reported the loopback listener)."""
    node = tmp_path / "node-ipvs"
    node.mkdir()
    (node / "ipset").write_text(
        "Name: KUBE-NODE-PORT-TCP\nType: bitmap:port\nRevision: 3\nHeader: range 0-65535\nSize in memory: 8264\n"
        "References: 1\nNumber of entries: 1\nMembers:\n30080\n", encoding="utf-8")
    (node / "ss").write_text(
        'tcp LISTEN 0 128 127.0.0.1:30080 0.0.0.0:* users:(("debug-agent",pid=100,fd=3))\n'
        'tcp LISTEN 0 128 0.0.0.0:30080 0.0.0.0:* users:(("web",pid=200,fd=3))\n', encoding="utf-8")
    findings = findings_of(KP805, node)
    assert [f.location.line for f in findings] == [2], [f.message for f in findings]
    assert "IPVS takes it at local delivery" in findings[0].message
