"""Every policy in `policies/*.yaml`: valid data, documented examples that behave, and fixtures.

Fixture folders, one per policy: `tests/policies/<ID>/`
  fail-*.yaml   realistic manifests that must trigger the rule
  pass-*.yaml   manifests that must not trigger it (other rules may fire: a hostPort always
                fires KP101) and must produce no input diagnostics
  expected.txt  golden output of the fail fixtures (see below)
  options.json  optional options for every run of the folder, e.g.
                {"node_port_range": [20000, 22767]} (what `--node-port-range 20000-22767` sets).
                Keys naming a LintOptions field go to LintOptions, the others to its cluster
                facts ({"proxy_mode": "ipvs"}); the CLI test passes them as the matching flags.
                `node_files` (a node inventory, `--nodes`) and `cluster_files` (objects already
                running, `--cluster`) list files kept in the folder, named so that the fail-*/
                pass-* globs skip them: `nodes.inventory.yaml`, `running.cluster.yaml`.

Cases: options.json applies to a whole folder, so a policy whose fixtures need different
options (with and without a node inventory, two kube-proxy modes) splits them into case
subfolders `tests/policies/<ID>/<case>/` (`[a-z0-9-]+`, one level deep). A case folder is a
fixture folder like the one above: its own fail-*/pass-* runs, expected.txt (when it has fail
fixtures) and options.json; it may hold only pass fixtures. Fixtures kept directly in the policy
folder are one more case (the only one, for most policies). Across its cases a policy needs at
least one fail and one pass fixture. The fixture tests run once per case (ids `KP301`,
`KP301-inventory`), and paths in findings are relative to the case folder.

Scheme: all fail-*.yaml files of a folder are linted together in ONE run, so a collision
between two files (a Deployment here, the Service there) is a fail fixture like any other.
The pass-*.yaml files are likewise linted together in one run, so "the same Service declared in
a base file and in an overlay" is a real pass case. Runs happen inside the folder, so paths
in findings are bare file names.

expected.txt holds, sorted as the linter sorts, one line per finding of the folder's rule:
    fail-x.yaml:LINE:COL: severity ID (name) [ns/Kind/name]
(never the message, so wording can improve without churn; `golden_line` writes it).
Each line's position is the key the user edits (`hostPort:`, `nodePort:`, `containerPort:` of
a hostNetwork pod, ...); `test_fail_findings_point_at_port_keys` re-reads the fixture at every
position, and also asserts that the message names the port number written there.

To rewrite the golden files after an intended change, run
    KUBELINT_UPDATE_GOLDEN=1 python -m pytest tests/test_policies.py
then read the diff: every new line must point at the offending key of its fixture.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
from pathlib import Path

import pytest

from kubelint_ports.checks import CHECKS
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.findings import Finding, Report
from kubelint_ports.policies import Policy, load_policies, read_policy_file

REPO = Path(__file__).resolve().parents[1]
POLICY_DIR = REPO / "policies"
FIXTURE_DIR = Path(__file__).resolve().parent / "policies"
ALL_POLICY_FILES = sorted(POLICY_DIR.glob("*.yaml"))
# Node-snapshot policies (KP8xx) read dumps, not manifests: tests/test_node_policies.py tests them.
POLICY_FILES = [path for path in ALL_POLICY_FILES if CHECKS[read_policy_file(path)["check"]].reads == "cluster"]
UPDATE_GOLDEN = os.environ.get("KUBELINT_UPDATE_GOLDEN") == "1"

PORT_KEYS = ("containerPort", "hostPort", "port", "targetPort", "nodePort", "healthCheckNodePort")
# Keys whose written value (a port name, an address, a type, a flag's value) the message must name.
VALUE_KEYS = ("name", "hostIP", "type", "hostNetwork", "value")
# Keys holding a mapping or a list: the position is right, the message names what is inside (or
# that it lacks something: a Service's `spec` without `ports`, or its empty `ports`).
BLOCK_KEYS = ("selector", "httpGet", "tcpSocket", "grpc", "spec", "ports")
# A command-line flag in a list item: `- --service-node-port-range=30000-39999`.
FLAG_AT = re.compile(r"--[a-z0-9-]+[= ](?P<value>\S+)")
RANGE_FLAGS = ("node_port_range", "ephemeral_port_range")
YAML_TRUE = ("true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y")
# `key: value` at a finding's position; the value may be quoted ("8080") or negative.
PORT_AT = re.compile(r"(?P<key>[A-Za-z]+)\s*:\s*(?P<value>\"[^\"]*\"|'[^']*'|[^\s,}#]+)")
INTEGER = re.compile(r"[-+]?\d[\d_]*")


def policy_param(path: Path):
    return pytest.param(path, id=path.stem.split("-", 1)[0])


POLICY_PARAMS = [policy_param(path) for path in POLICY_FILES]
CASE_NAME = re.compile(r"[a-z0-9-]+")
FIXTURE_NAME = re.compile(r"(fail|pass)-[a-z0-9-]+\.yaml|expected\.txt|options\.json|messages\.snap")


@functools.cache
def all_policies() -> tuple[Policy, ...]:
    return tuple(load_policies(POLICY_DIR))


def policy_for(path: Path) -> Policy:
    for policy in all_policies():
        if Path(policy.path).resolve() == path.resolve():
            return policy
    raise AssertionError(f"{path} was not loaded by load_policies")


@contextlib.contextmanager
def working_directory(path: Path):
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def folder_settings(folder: Path) -> dict:
    """options.json as data: lists become tuples (`node_port_range`, `node_files`)."""
    options_file = folder / "options.json"
    if not options_file.is_file():
        return {}
    data = json.loads(options_file.read_text(encoding="utf-8"))
    return {key: tuple(value) if isinstance(value, list) else value for key, value in data.items()}


def folder_options(folder: Path) -> LintOptions:
    """LintOptions for a folder. Keys naming a LintOptions field go there (`node_files`); the others
    are cluster facts (`node_port_range`, `proxy_mode`, ...), as the CLI flags set them."""
    settings = folder_settings(folder)
    lint_fields = {field.name for field in dataclasses.fields(LintOptions)}
    direct = {key: value for key, value in settings.items() if key in lint_fields}
    facts = {key: value for key, value in settings.items() if key not in lint_fields}
    if facts:
        from kubelint_ports.model import ClusterFacts

        direct["facts"] = ClusterFacts(**facts)
    return LintOptions(**direct)


def cli_flags(folder: Path) -> list[str]:
    """options.json as `lint` flags: node_port_range [a, b] -> --node-port-range a-b, and so on."""
    flags = []
    for key, value in folder_settings(folder).items():
        flag = "--" + key.replace("_", "-")
        if key in RANGE_FLAGS:
            flags += [flag, "{}-{}".format(*value)]
        elif isinstance(value, tuple):
            flag = {"node_files": "--nodes", "cluster_files": "--cluster"}.get(key, flag)
            for item in value:
                flags += [flag, str(item)]
        else:
            flags += [flag, str(value)]
    return flags


def support_files(folder: Path) -> set[str]:
    """Files options.json names (a node inventory, say): allowed in the folder, never linted."""
    names = set()
    for value in folder_settings(folder).values():
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, str) and (folder / item).is_file():
                names.add(item)
    return names


def fixture_files(folder: Path, kind: str) -> tuple[str, ...]:
    return tuple(sorted(path.name for path in folder.glob(f"{kind}-*.yaml")))


def fixture_cases(folder: Path) -> tuple[str, ...]:
    """A policy folder's cases, relative to it: "" when fixtures sit in the folder itself, then
    each case subfolder."""
    if not folder.is_dir():
        return ()
    own = ("",) if fixture_files(folder, "fail") or fixture_files(folder, "pass") else ()
    return own + tuple(sorted(path.name for path in folder.iterdir()
                              if path.is_dir() and not path.name.startswith((".", "_"))))


def case_params(kind: str | None = None, *, with_options: bool = False) -> list:
    """(policy file, case) pairs; `kind`: only cases with such fixtures. A policy without fixtures
    keeps one pair, skipped at run time (test_policy_has_fixtures reports it)."""
    params = []
    for path in POLICY_FILES:
        policy_id = path.stem.split("-", 1)[0]
        folder = FIXTURE_DIR / policy_id
        cases = fixture_cases(folder)
        if not cases and not with_options:
            params.append(pytest.param(path, "", id=policy_id))
        for case in cases:
            if kind and not fixture_files(folder / case, kind):
                continue
            if with_options and not (folder / case / "options.json").is_file():
                continue
            params.append(pytest.param(path, case, id=f"{policy_id}-{case}" if case else policy_id))
    return params


@functools.cache
def lint_fixtures(folder: Path, kind: str, use_options: bool = True) -> Report:
    """All `kind`-*.yaml files of a folder linted in one run, from inside the folder."""
    files = fixture_files(folder, kind)
    assert files, f"{folder} has no {kind}-*.yaml fixtures"
    with working_directory(folder):
        return lint_paths(list(files), folder_options(folder) if use_options else LintOptions(),
                          policies=all_policies())


def fixture_folder(policy: Policy, case: str = "") -> Path:
    """A case folder of the policy; when the policy has none, test_policy_has_fixtures is the one
    failure."""
    if case not in fixture_cases(FIXTURE_DIR / policy.id):
        pytest.skip(f"no fixtures for {policy.id} (reported by test_policy_has_fixtures)")
    return FIXTURE_DIR / policy.id / case


def lint_text(tmp_path: Path, name: str, text: str, options: LintOptions = LintOptions()) -> Report:
    (tmp_path / name).write_text(text, encoding="utf-8")
    with working_directory(tmp_path):
        return lint_paths([name], options, policies=all_policies())


def docs_options(policy: Policy) -> LintOptions:
    """A docs example cannot carry its nodes: node-aware rules run theirs with the node inventory
    their fixture folder's own options.json names (other options stay out of the docs)."""
    folder = FIXTURE_DIR / policy.id
    node_files = folder_settings(folder).get("node_files", ())
    return LintOptions(node_files=tuple(str(folder / name) for name in node_files))


def of_rule(report: Report, rule_id: str) -> list[Finding]:
    return [finding for finding in report.findings if finding.rule_id == rule_id]


def golden_line(file: str, line: int, column: int, severity: str, rule_id: str, rule_name: str, subject: str) -> str:
    """expected.txt's line: where, how bad, which rule, on what (never the message, so wording can
    improve without churn)."""
    return f"{file}:{line}:{column}: {severity} {rule_id} ({rule_name}) [{subject}]"


def golden_lines(report: Report, rule_id: str) -> list[str]:
    return [golden_line(f.location.path, f.location.line, f.location.column, str(f.severity), f.rule_id, f.rule_name,
                        str(f.subject)) for f in of_rule(report, rule_id) if not f.suppressed]


def show(findings) -> str:
    return "\n".join(f"{f.location}: {f.rule_id} {f.message}" for f in findings) or "(none)"


# (a) meta-tests: policies are valid data and every one of them is tested ------------------------

def test_every_policy_validates_against_schema_and_registry():
    validated = load_policies(POLICY_DIR, validate=True)  # raises PolicyError on the first bad file
    assert [Path(p.path).name for p in validated] == [path.name for path in ALL_POLICY_FILES]


def test_policy_ids_and_names_are_unique():
    policies = all_policies()
    ids = [p.id for p in policies]
    names = [p.name for p in policies]
    assert len(ids) == len(set(ids)), ids
    assert len(names) == len(set(names)), names


def test_fixture_folders_belong_to_policies():
    ids = {p.id for p in all_policies()}
    folders = {path.name for path in FIXTURE_DIR.iterdir() if path.is_dir() and not path.name.startswith((".", "_"))}
    assert folders <= ids, f"fixture folders without a policy: {sorted(folders - ids)}"


@pytest.mark.parametrize("path", POLICY_PARAMS)
def test_policy_file_name_and_check(path: Path):
    data = read_policy_file(path)
    assert path.name == f"{data['id']}-{data['name']}.yaml"
    assert data["check"] in CHECKS, f"check {data['check']!r} is not registered"


@pytest.mark.parametrize("path", POLICY_PARAMS)
def test_policy_has_fixtures(path: Path):
    policy = policy_for(path)
    folder = FIXTURE_DIR / policy.id
    assert folder.is_dir(), f"missing fixture folder {folder}"
    cases = [folder / case for case in fixture_cases(folder)]
    assert any(fixture_files(case, "fail") for case in cases), f"{folder} needs at least one fail-*.yaml"
    assert any(fixture_files(case, "pass") for case in cases), f"{folder} needs at least one pass-*.yaml"
    for case in dict.fromkeys([folder, *cases]):
        has_fail = bool(fixture_files(case, "fail"))
        assert has_fail or fixture_files(case, "pass") or case == folder, f"case folder {case} holds no fixtures"
        assert (case / "expected.txt").is_file() or not has_fail or UPDATE_GOLDEN, f"{case} needs an expected.txt"
        assert has_fail or not (case / "expected.txt").is_file(), f"{case}: expected.txt without fail-*.yaml"
        unknown = sorted(p.name for p in case.iterdir() if p.name not in support_files(case)
                         and not (p.is_file() and FIXTURE_NAME.fullmatch(p.name))
                         and not (p.is_dir() and case == folder and CASE_NAME.fullmatch(p.name)))
        assert not unknown, (f"unexpected files in {case} (fixtures are fail-*.yaml / pass-*.yaml, "
                             f"cases [a-z0-9-]+ subfolders of the policy folder): {unknown}")


# (b) the documented examples behave as documented ------------------------------------------------

@pytest.mark.parametrize("path", POLICY_PARAMS)
def test_docs_example_fails(path: Path, tmp_path: Path):
    policy = policy_for(path)
    report = lint_text(tmp_path, "example.yaml", policy.docs["example"], docs_options(policy))
    assert not report.diagnostics, report.diagnostics
    assert of_rule(report, policy.id), f"docs.example of {policy.id} yields no {policy.id} finding"


@pytest.mark.parametrize("path", POLICY_PARAMS)
def test_docs_fix_passes(path: Path, tmp_path: Path):
    policy = policy_for(path)
    report = lint_text(tmp_path, "fix.yaml", policy.docs["fix"], docs_options(policy))
    assert not report.diagnostics, report.diagnostics
    assert not of_rule(report, policy.id), show(of_rule(report, policy.id))


# (c) golden output of the fail fixtures ----------------------------------------------------------

@pytest.mark.parametrize("path, case", case_params("fail"))
def test_fail_fixtures_match_golden(path: Path, case: str):
    policy = policy_for(path)
    folder = fixture_folder(policy, case)
    report = lint_fixtures(folder, "fail")
    assert not report.diagnostics, f"fail fixtures must be valid input: {report.diagnostics}"
    actual = golden_lines(report, policy.id)
    expected_file = folder / "expected.txt"
    if UPDATE_GOLDEN:
        expected_file.write_text("".join(line + "\n" for line in actual), encoding="utf-8")
    expected = expected_file.read_text(encoding="utf-8").splitlines()
    assert actual == expected


@pytest.mark.parametrize("path, case", case_params("fail"))
def test_every_fail_fixture_triggers_the_rule(path: Path, case: str):
    policy = policy_for(path)
    folder = fixture_folder(policy, case)
    findings = of_rule(lint_fixtures(folder, "fail"), policy.id)
    # A fail file may hold only the Service half of a cross-file collision: the finding is then
    # in its partner file, and this file must at least be one of the finding's related places.
    involved = {f.location.path for f in findings} | {r.path for f in findings for r in f.related}
    unused = [name for name in fixture_files(folder, "fail") if name not in involved]
    assert not unused, f"fail fixtures that play no part in a {policy.id} finding: {unused}"


def points_at_cidr_settings(param) -> bool:
    """CIDR rules point at CIDR settings, not port keys: tests/test_network.py checks those."""
    return CHECKS[policy_for(param.values[0]).check].function.__module__.endswith(".network_config")


def points_at_comments(param) -> bool:
    """KP005 (unused-suppression) points at a suppression comment, not a port key: the position
    must be the comment's first character, checked here, and its own tests in
    tests/test_unused_suppressions.py."""
    return policy_for(param.values[0]).check == "unused-suppression"


@pytest.mark.parametrize("path, case", [param for param in case_params("fail") if points_at_comments(param)])
def test_comment_findings_point_at_the_comment(path: Path, case: str):
    from kubelint_ports.suppressions import comment_in

    policy = policy_for(path)
    folder = fixture_folder(policy, case)
    findings = of_rule(lint_fixtures(folder, "fail"), policy.id)
    assert findings
    for finding in findings:
        location = finding.location
        line = (folder / location.path).read_text(encoding="utf-8").splitlines()[location.line - 1]
        found = comment_in(line)
        assert found is not None and found[0] + 1 == location.column, f"{location}: not at a comment: {line!r}"


@pytest.mark.parametrize("path, case", [param for param in case_params("fail")
                                        if not points_at_cidr_settings(param) and not points_at_comments(param)])
def test_fail_findings_point_at_port_keys(path: Path, case: str):
    """Each position is a port key (or, for an incomplete entry, the entry itself), and the
    message names the number written there; a port name, an address, a type or a flag's value
    must be named the same way."""
    policy = policy_for(path)
    folder = fixture_folder(policy, case)
    findings = of_rule(lint_fixtures(folder, "fail"), policy.id)
    assert findings
    for finding in findings:
        location = finding.location
        line = (folder / location.path).read_text(encoding="utf-8").splitlines()[location.line - 1]
        before, at = line[:location.column - 1], line[location.column - 1:]
        if flag := FLAG_AT.match(at.strip("\"'")):
            value = flag["value"].strip("\"'")
            assert value in finding.message, f"{location}: message does not name {value}: {finding.message}"
            continue
        # KP001 and KP002 on an entry that lacks its port or name: the position is the list item.
        entry = policy.id in ("KP001", "KP002") and finding.field_path.endswith("]") and \
            re.search(r"-\s*\{?\s*$", before)
        block = re.match(r"([A-Za-z]+)\s*:", at)
        if block and block[1] in BLOCK_KEYS:
            continue
        match = PORT_AT.match(at)
        assert match or entry, f"{location}: no `key: value` at the position: {line!r}"
        key, value = (match["key"], match["value"].strip("\"'")) if match else ("", "")
        if key in PORT_KEYS and INTEGER.fullmatch(value):
            assert re.search(rf"(?<!\d){re.escape(value)}(?!\d)", finding.message), \
                f"{location}: message does not name {key} {value}: {finding.message}"
        elif entry:
            continue
        else:
            assert key in PORT_KEYS or key in VALUE_KEYS, f"{location}: position is not at a port key: {line!r}"
            if value in YAML_TRUE:
                value = "true"  # hostNetwork: yes is true to the API (YAML 1.1)
            assert value in finding.message, f"{location}: message does not name {key} {value}: {finding.message}"


# (d) pass fixtures --------------------------------------------------------------------------------

@pytest.mark.parametrize("path, case", case_params("pass"))
def test_pass_fixtures_do_not_trigger_the_rule(path: Path, case: str):
    policy = policy_for(path)
    report = lint_fixtures(fixture_folder(policy, case), "pass")
    assert not report.diagnostics, report.diagnostics
    assert not of_rule(report, policy.id), show(of_rule(report, policy.id))


@pytest.mark.parametrize("path, case", case_params(with_options=True))
def test_options_json_matters(path: Path, case: str):
    """A folder's options.json must change the outcome, or the fixtures do not test the option.
    (KP204's folder does both: its pass fixtures fail and its golden differs without it.)"""
    policy = policy_for(path)
    folder = fixture_folder(policy, case)
    has_fail, has_pass = fixture_files(folder, "fail"), fixture_files(folder, "pass")  # a case may lack one
    without_fail = has_fail and golden_lines(lint_fixtures(folder, "fail", use_options=False), policy.id)
    without_pass = has_pass and of_rule(lint_fixtures(folder, "pass", use_options=False), policy.id)
    with_fail = has_fail and golden_lines(lint_fixtures(folder, "fail"), policy.id)
    assert without_pass or without_fail != with_fail, "the fixtures give the same result without options.json"


@pytest.mark.parametrize("path, case", case_params("fail"))
def test_cli_reports_the_golden_findings_in_json_and_text(path: Path, case: str, tmp_path: Path):
    """The golden files are what `kubelint-ports lint --format json` reports (options.json as CLI
    flags; a policy that is off by default turned on by a configuration file, as a user would),
    and the text output shows each of them under its file at its line and column."""
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    policy = policy_for(path)
    folder = fixture_folder(policy, case)
    config = tmp_path / "kubelint-ports.yaml"
    config.write_text(f"rules:\n  {policy.id}: on\n", encoding="utf-8")
    args = ["lint", "--format", "json", "--config", str(config), *cli_flags(folder), *fixture_files(folder, "fail")]
    with working_directory(folder):
        result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    lines = [golden_line(f["file"], f["line"], f["column"], f["severity"], f["rule"], f["name"],
                         "/".join(filter(None, (f["object"]["namespace"], f["object"]["kind"], f["object"]["name"]))))
             for f in json.loads(result.stdout)["findings"] if f["rule"] == policy.id and not f["suppressed"]]
    assert lines == (folder / "expected.txt").read_text(encoding="utf-8").splitlines()
    with working_directory(folder):
        text = CliRunner().invoke(app, ["lint", "--format", "text", *args[3:]]).output
    shown = {(match[1], int(match[2]), int(match[3]), match[4], match[5])
             for match in re.finditer(r"^(\S+):(\d+):(\d+): (\w+) +(KP\d+) ", text, re.M)}
    for f in json.loads(result.stdout)["findings"]:
        if f["rule"] == policy.id and not f["suppressed"]:
            assert (f["file"], f["line"], f["column"], f["severity"], f["rule"]) in shown, (f, text)


# Known gaps: the package does not (yet) do what its docs say. Strict, so a fix turns them red
# and the marker gets removed.

def test_quoted_numeric_target_port_is_invalid(tmp_path: Path):
    report = lint_text(tmp_path, "service.yaml", """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  selector: {app: web}
  ports:
    - {name: http, port: 80, targetPort: "8080"}
""")
    assert [str(f.location) for f in of_rule(report, "KP001")] == ["service.yaml:7:30"]


def test_host_port_without_container_port_names_the_port(tmp_path: Path):
    report = lint_text(tmp_path, "pod.yaml", """\
apiVersion: v1
kind: Pod
metadata: {name: agent, namespace: monitoring}
spec:
  containers:
    - name: agent
      image: datadog/agent:7
      ports:
        - hostPort: 8126
""")
    findings = of_rule(report, "KP001")
    assert [str(f.location) for f in findings] == ["pod.yaml:9:11"]
    assert "8126" in findings[0].message
