"""`lint --fix`, `--unsafe-fixes`, `--diff` (docs/fix.md): every byte outside a fix is kept, a fix
makes no new finding, and each finding says whether a fix exists (text, JSON, SARIF)."""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.engine import lint_paths
from kubelint_ports.fixes import FIXES, changes, describe
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.helm.charts import in_process_engine

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ROOT / "tests" / "policies"
runner = CliRunner()
needs_engine = pytest.mark.skipif(in_process_engine() is None and shutil.which("helm") is None,
                                  reason="no Helm engine (helm-python-sdk) nor `helm` binary here")


def run(*args: str):
    return runner.invoke(app, list(args))


def changed_lines(old: bytes, new: bytes) -> set[int]:
    """1-based lines of `old` that a diff to `new` deletes or replaces (an insertion counts the line
    it goes before)."""
    lines = set()
    matcher = difflib.SequenceMatcher(None, old.split(b"\n"), new.split(b"\n"), autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag != "equal":
            lines.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    return lines


def fix_lines(report, unsafe: bool) -> dict[str, set[int]]:
    """Per file, the lines the chosen fixes' edits cover (their deleted regions)."""
    lines: dict[str, set[int]] = {}
    for finding in report.findings:
        fix = finding.fix
        if fix is None or fix.blocked or not fix.edits or (fix.applicability == "unsafe" and not unsafe):
            continue
        for edit in fix.edits:
            last = edit.region.end_line - (1 if edit.region.end_column == 1 and edit.region.end_line > edit.region.line else 0)
            lines.setdefault(edit.region.path, set()).update(range(edit.region.line, last + 1))
    return lines


def fingerprints(report) -> dict[str, object]:
    return {finding.fingerprint: finding for finding in report.findings if not finding.suppressed}


FIX_FIXTURES = ROOT / "tests" / "fix"


def fixable_fixtures() -> list[Path]:
    """Every fail fixture of a rule with a fix, the fix fixtures that are one file, and the examples."""
    found = [path for rule in sorted(FIXES) for path in sorted((POLICIES / rule).glob("fail-*.yaml"))]
    return found + sorted(FIX_FIXTURES.glob("*/*.yaml")) + sorted((ROOT / "examples").glob("*.yaml"))


# Trees a fix edits across files: (what to copy, what to lint in the copy, Helm values files).
FIXABLE_TREES = {
    "fix-chart": ("tests/fix/charts/shop", ["shop"], ()),
    "fix-chart-user-values": ("tests/fix/charts/shop", ["shop"], ("shop/values-prod.yaml",)),
    "test-chart-web": ("tests/charts/web", ["web"], ("web/values-hostports.yaml",)),
    "fix-kustomize": ("tests/fix/kustomize", ["kustomize/overlays"], ()),
    "test-kustomize-shop": ("tests/kustomize/shop", ["shop"], ()),
}


def is_chart(source: str) -> bool:
    """A tree Helm renders: without an engine its lint is an input error and there is nothing to fix."""
    return (ROOT / source / "Chart.yaml").is_file()


def lint_tree(paths: list[str], values: tuple[str, ...]):
    from kubelint_ports.engine import LintOptions
    from kubelint_ports.loading.helm.charts import HelmOptions

    return lint_paths(paths, LintOptions(helm=HelmOptions(values=values) if values else None))


def fixed_copy(tmp_path: Path, source: Path, unsafe: bool, monkeypatch):
    """The fixture copied, described, fixed in one pass; (report before, the files' changes)."""
    target = tmp_path / source.name
    shutil.copyfile(source, target)
    monkeypatch.chdir(tmp_path)
    report = describe(lint_paths([source.name]), edits=True)
    return report, changes(report, unsafe=unsafe), target


def assert_fixes_touch_only_their_lines_and_make_no_new_finding(before, found, unsafe: bool, relint) -> None:
    """Each change touches only its fixes' lines; written, the fixed findings are gone and no
    finding is new, but those a fix uncovered or carried along on its own field: a quoted port the
    API server rejected hid what the port means (a hostPort's KP101), and a moved port's own
    findings (KP101 "claims hostPort N") name the new port."""
    allowed = fix_lines(before, unsafe)
    for change in found:
        assert change.old == Path(change.file).read_bytes()
        assert changed_lines(change.old, change.new) <= allowed[change.path], f"a fix touched other lines of {change.path}"
    for change in found:
        Path(change.file).write_bytes(change.new)
    after = relint()
    fixed = {finding.fingerprint for change in found for finding in change.fixed}
    remaining = fingerprints(after)
    assert not fixed & set(remaining), "a fixed finding is still reported"
    edited = {(f.subject, f.field_path) for change in found for f in change.fixed}
    unquoted = {(f.subject, f.field_path) for change in found for f in change.fixed if f.rule_id == "KP001"}
    reported = {(f.rule_id, f.subject, f.field_path) for f in before.findings}
    new = [f for key, f in remaining.items() if key not in fingerprints(before)
           and (f.subject, f.field_path) not in unquoted
           and not ((f.subject, f.field_path) in edited and (f.rule_id, f.subject, f.field_path) in reported)]
    assert not new, f"the fix made new findings: {[f'{f.location} {f.rule_id} {f.message[:80]}' for f in new]}"


def fixture_name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


# What one pass of `--fix` fixes in each fixture of fixable_fixtures(), linted alone: the rules of
# the findings it fixes without --unsafe-fixes, then with it. Stated, not worked out from a run, so
# a fix that stops applying fails here instead of turning its case into a mere re-lint.
FIXED_RULES: dict[str, tuple[set[str], set[str]]] = {
    "KP001/fail-probe-and-init-ports.yaml": ({"KP001"}, {"KP001"}),
    "KP001/fail-quoted-ports.yaml": ({"KP001"}, {"KP001"}),
    "KP003/fail-host-ports.yaml": ({"KP104"}, {"KP104"}),
    "KP003/fail-service-duplicates.yaml": (set(), {"KP003"}),
    "KP104/fail-init-containers.yaml": ({"KP104"}, {"KP104"}),
    "KP201/fail-health-check-and-udp.yaml": (set(), {"KP201"}),
    "KP203/fail-within-one-service.yaml": (set(), {"KP203"}),
    "KP204/fail-below-range.yaml": (set(), {"KP204"}),
    "KP204/fail-default-range-ports.yaml": (set(), {"KP204"}),
    "KP303/fail-agents-conflict-on-the-kubelet-port.yaml": (set(), {"KP301", "KP303"}),
    "KP303/fail-debug-agent-kubelet-port.yaml": (set(), {"KP303"}),
    "host-ports/collisions.yaml": (set(), {"KP201", "KP301", "KP303"}),
    "kp401/configmap-flannel.yaml": (set(), {"KP401"}),
    "kp401/configmap-kubeadm.yaml": ({"KP401"}, {"KP401"}),
    "kp401/flags-static-pod.yaml": ({"KP401"}, {"KP401"}),
    "kp401/standalone-controller-manager.yaml": ({"KP401"}, {"KP401"}),
    "move-rules/gossip.yaml": (set(), {"KP301"}),
    "examples/host-port-pitfalls.yaml": ({"KP104"}, {"KP104"}),
    "examples/invalid-ports.yaml": ({"KP001"}, {"KP001"}),
    "examples/nginx-hostport-nodeport.yaml": (set(), {"KP201"}),
    "examples/node-agents.yaml": (set(), {"KP301", "KP303"}),
    "examples/port-names.yaml": (set(), {"KP003"}),
    "examples/services.yaml": (set(), {"KP203", "KP204"}),
    "examples/unused-suppression.yaml": ({"KP005"}, {"KP005"}),
    "KP005/fail-stale-file.yaml": ({"KP005"}, {"KP005"}),
    "KP005/fail-unused-suppression.yaml": ({"KP005"}, {"KP005"}),
}

# Why `--fix` changes nothing in the other fixtures (and, without --unsafe-fixes, in those above
# whose fixes are all unsafe).
NOTHING_FOUND_ALONE = "linted alone it has no finding: its findings need its directory's other files, or it is clean"
NO_FIX_OFFERED = "none of its findings has a fix: the value to choose is its author's"
FIX_BLOCKED = "its fix is blocked: no input states the pod CIDR, and the fix never guesses it"
ONLY_UNSAFE_FIXES = "its fixes are all unsafe and --unsafe-fixes is not given"
NOT_FIXED: dict[str, str] = {
    "KP001/fail-incomplete.yaml": NO_FIX_OFFERED,
    "KP001/fail-out-of-range.yaml": NO_FIX_OFFERED,
    "KP003/fail-container-port-names.yaml": NO_FIX_OFFERED,
    "KP201/fail-nginx-31123-deployment.yaml": NO_FIX_OFFERED,  # its KP201 needs the Service of the other file
    "KP201/fail-nginx-31123-service.yaml": NOTHING_FOUND_ALONE,
    "KP203/fail-monitoring.yaml": NOTHING_FOUND_ALONE,
    "KP203/fail-shop.yaml": NOTHING_FOUND_ALONE,
    "KP303/fail-apiserver-lb-host-network.yaml": NO_FIX_OFFERED,
    "KP303/fail-host-metrics-host-network.yaml": NO_FIX_OFFERED,
    "KP401/fail-incident-configmap.yaml": FIX_BLOCKED,
    "KP401/fail-iptables-daemonset.yaml": FIX_BLOCKED,
    "KP401/fail-standalone-nftables.yaml": FIX_BLOCKED,
    "KP401/fail-static-pod-flags.yaml": FIX_BLOCKED,
    "examples/.kubelint-ports.yaml": NOTHING_FOUND_ALONE,  # the examples' configuration, no manifest
    "examples/clean.yaml": NOTHING_FOUND_ALONE,
    "examples/hostnetwork-web.yaml": NO_FIX_OFFERED,
    "examples/mysql-hostport.yaml": NO_FIX_OFFERED,
    "examples/node-addresses.yaml": NO_FIX_OFFERED,
    "examples/org-policies.yaml": NOTHING_FOUND_ALONE,  # its findings need the examples' policies
    "examples/service-routing.yaml": NO_FIX_OFFERED,
    "examples/service-without-ports.yaml": NO_FIX_OFFERED,
}


def fixing_cases() -> list:
    """(fixture, unsafe, rules it fixes) for every fixture and mode where --fix changes something."""
    return [pytest.param(source, unsafe, rules, id=f"{fixture_name(source)}-{'unsafe' if unsafe else 'safe'}")
            for source in fixable_fixtures()
            for unsafe, rules in zip((False, True), FIXED_RULES.get(fixture_name(source), (set(), set())))
            if rules]


def not_fixing_cases() -> list:
    """(fixture, unsafe, why) for every fixture and mode where --fix changes nothing."""
    cases = []
    for source in fixable_fixtures():
        name = fixture_name(source)
        for unsafe in (False, True):
            if name in NOT_FIXED:
                why = NOT_FIXED[name]
            elif name in FIXED_RULES and not FIXED_RULES[name][unsafe]:
                why = ONLY_UNSAFE_FIXES
            else:
                continue
            cases.append(pytest.param(source, unsafe, why, id=f"{name}-{'unsafe' if unsafe else 'safe'}"))
    return cases


def test_every_fixable_fixture_states_what_fix_does_with_it():
    """A new fixture is listed in FIXED_RULES or NOT_FIXED, so no case of the tests below is a
    mere re-lint that passes whatever --fix does."""
    names = [fixture_name(source) for source in fixable_fixtures()]
    assert not set(FIXED_RULES) & set(NOT_FIXED)
    assert sorted(set(FIXED_RULES) | set(NOT_FIXED)) == sorted(names)
    assert all(unsafe_rules >= safe_rules and unsafe_rules for safe_rules, unsafe_rules in FIXED_RULES.values())


@pytest.mark.parametrize("source, unsafe, rules", fixing_cases())
def test_fix_changes_only_its_lines_and_makes_no_new_finding(source, unsafe, rules, tmp_path, monkeypatch):
    before, found, target = fixed_copy(tmp_path, source, unsafe, monkeypatch)
    assert found, f"--fix changed nothing; it should fix {sorted(rules)}"
    assert all(Path(change.file).resolve() == target.resolve() and change.new != change.old for change in found)
    assert {finding.rule_id for change in found for finding in change.fixed} == rules
    # ... and, written, those findings are gone (checked below with every other finding).
    assert_fixes_touch_only_their_lines_and_make_no_new_finding(before, found, unsafe, lambda: lint_paths([source.name]))


@pytest.mark.parametrize("source, unsafe, why", not_fixing_cases())
def test_fix_changes_nothing_where_it_has_nothing_to_apply(source, unsafe, why, tmp_path, monkeypatch):
    before, found, _ = fixed_copy(tmp_path, source, unsafe, monkeypatch)
    assert found == [], f"--fix changed {[change.path for change in found]} though {why}"
    findings = list(fingerprints(before).values())
    fixes = [finding.fix for finding in findings if finding.fix is not None]
    if why == NOTHING_FOUND_ALONE:
        assert not findings
    elif why == NO_FIX_OFFERED:
        assert findings and not fixes
    elif why == FIX_BLOCKED:
        assert fixes and all("no input states the pod CIDR" in fix.blocked for fix in fixes)
    else:
        assert why == ONLY_UNSAFE_FIXES and not unsafe
        assert fixes and all(fix.applicability == "unsafe" and not fix.blocked for fix in fixes)


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("tree", [pytest.param(tree, marks=needs_engine if is_chart(FIXABLE_TREES[tree][0]) else ())
                                  for tree in sorted(FIXABLE_TREES)])
def test_fix_of_a_chart_or_a_kustomization_changes_only_its_lines_and_makes_no_new_finding(
        tree, unsafe, tmp_path, monkeypatch):
    source, paths, values = FIXABLE_TREES[tree]
    shutil.copytree(ROOT / source, tmp_path / Path(paths[0]).parts[0])
    monkeypatch.chdir(tmp_path)
    before = describe(lint_tree(paths, values), edits=True)
    found = changes(before, unsafe=unsafe)
    assert found or not unsafe, "the tree has a finding to fix"
    assert_fixes_touch_only_their_lines_and_make_no_new_finding(before, found, unsafe, lambda: lint_tree(paths, values))


def test_every_fixable_rule_fixes_something_in_its_fixtures(tmp_path, monkeypatch):
    fixed_rules = set()
    sources = [path for rule in sorted(FIXES) for path in sorted((POLICIES / rule).glob("fail-*.yaml"))]
    for source in [*sources, *sorted(FIX_FIXTURES.glob("*/*.yaml"))]:
        case = tmp_path / source.parent.name / source.stem
        case.mkdir(parents=True)
        _, found, _ = fixed_copy(case, source, True, monkeypatch)
        fixed_rules |= {finding.rule_id for change in found for finding in change.fixed}
    assert fixed_rules == set(FIXES)


def fix_text(tmp_path, monkeypatch, text: str | bytes, *args: str, name: str = "m.yaml"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    monkeypatch.chdir(tmp_path)
    result = run("lint", "--fix", *args, name)
    return result, path.read_bytes()


COMMENTED = """\
# The web tier.   Comments, odd spacing and quoting stay as they are.
apiVersion: v1
kind: Service
metadata:
  name: web        # the public name
  namespace: "shop"
  annotations: {team: 'payments', note: "keep me"}
spec:
  type: NodePort
  selector: {app: web}
  ports:
    # first
    - name: http
      port: 80
      targetPort: "8080"   # was templated
    - name: http
      port: 80
      targetPort: 8080
    - name: https
      port: 443
      targetPort: 8443
...
---
# second document, untouched
apiVersion: v1
kind: ConfigMap
metadata: {name: other}
data:
  key: 'value'   # quoted
"""


def test_comments_quoting_flow_style_and_separators_are_kept(tmp_path, monkeypatch):
    result, fixed = fix_text(tmp_path, monkeypatch, COMMENTED)
    expected = COMMENTED.replace('targetPort: "8080"   # was', 'targetPort: 8080   # was').replace(
        "    - name: http\n      port: 80\n      targetPort: 8080\n", "")
    assert fixed.decode() == expected, result.output


def test_crlf_and_bom_are_kept(tmp_path, monkeypatch):
    text = COMMENTED.replace("\n", "\r\n").encode("utf-8")
    result, fixed = fix_text(tmp_path, monkeypatch, b"\xef\xbb\xbf" + text)
    expected = COMMENTED.replace('targetPort: "8080"   # was', 'targetPort: 8080   # was').replace(
        "    - name: http\n      port: 80\n      targetPort: 8080\n", "").replace("\n", "\r\n")
    assert fixed == b"\xef\xbb\xbf" + expected.encode("utf-8"), result.output


INIT = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: ops}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      initContainers:
      - name: check
        image: busybox
        ports:
        - containerPort: 2020
          hostPort: 2020   # copied from the main container
          protocol: TCP
      containers:
      - name: agent
        image: busybox
        ports: [{containerPort: 2020, protocol: TCP}]
"""


def test_structural_fix_keeps_a_zero_offset_list_style(tmp_path, monkeypatch):
    result, fixed = fix_text(tmp_path, monkeypatch, INIT)
    assert fixed.decode() == INIT.replace("          hostPort: 2020   # copied from the main container\n", ""), \
        result.output


def test_a_fix_whose_round_trip_touches_other_lines_is_refused(tmp_path, monkeypatch):
    # ruamel.yaml writes a one-key flow mapping inside a flow list as `[containerPort: 2020]`: line
    # 19 would change, so the fix is refused, the file left as it was, and the finding says why.
    mixed = INIT.replace("[{containerPort: 2020, protocol: TCP}]", "[{containerPort: 2020}]")
    result, fixed = fix_text(tmp_path, monkeypatch, mixed)
    assert fixed.decode() == mixed
    assert "m.yaml:14:11: KP104 fix not applied: the round trip would also change line 19, outside the fix" \
        in result.output
    assert "KP104 [*]" not in result.output
    shown = run("lint", "-v", "--format", "json", "m.yaml")
    fix = next(f["fix"] for f in json.loads(shown.stdout)["findings"] if f["rule"] == "KP104")
    assert fix["applicability"] == "safe"


def test_a_value_an_alias_repeats_gets_no_fix(tmp_path, monkeypatch):
    text = """\
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: ops}
spec:
  containers:
    - name: a
      ports:
        - &port {containerPort: "8080"}
    - name: b
      ports:
        - *port
"""
    result, fixed = fix_text(tmp_path, monkeypatch, text)
    assert fixed.decode() == text
    assert "KP001 [*]" not in run("lint", "m.yaml").stdout


def test_multi_document_stream_and_list_members(tmp_path, monkeypatch):
    text = """\
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Service
    metadata: {name: a, namespace: ops}
    spec:
      type: NodePort
      ports: [{port: 80, nodePort: '30080'}]
---
apiVersion: v1
kind: Service
metadata: {name: b, namespace: ops}
spec:
  ports:
    - port: 81
      targetPort: "9090"
"""
    result, fixed = fix_text(tmp_path, monkeypatch, text)
    assert fixed.decode() == text.replace("nodePort: '30080'", "nodePort: 30080").replace(
        'targetPort: "9090"', "targetPort: 9090"), result.output


COLLIDING_NODE_PORTS = """\
apiVersion: v1
kind: Service
metadata: {name: a, namespace: ops}
spec:
  type: NodePort
  ports: [{name: a, port: 80, nodePort: 30000}, {name: b, port: 81, nodePort: 30002}]
---
apiVersion: v1
kind: Service
metadata: {name: b, namespace: ops}
spec:
  type: NodePort
  ports:
    - name: a
      port: 80
      nodePort: 30000   # collides with a
    - name: b
      port: 90
      nodePort: 8080    # outside the range
"""


def test_unsafe_fix_moves_a_node_port_to_the_lowest_free_one(tmp_path, monkeypatch):
    text = COLLIDING_NODE_PORTS
    result, fixed = fix_text(tmp_path, monkeypatch, text)
    assert fixed.decode() == text, "nodePort moves are unsafe: --fix alone leaves them"
    assert "0 fixable with --fix (2 more with --unsafe-fixes)" in result.output
    result, fixed = fix_text(tmp_path, monkeypatch, text, "--unsafe-fixes")
    assert fixed.decode() == text.replace("30000   # collides", "30001   # collides").replace(
        "8080    # outside", "30003    # outside"), result.output
    assert result.exit_code == 0, result.output


def test_diff_prints_and_writes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "m.yaml"
    path.write_text(COMMENTED)
    monkeypatch.chdir(tmp_path)
    result = run("lint", "--diff", "m.yaml")
    assert result.exit_code == 1
    assert path.read_text() == COMMENTED
    assert '\n-      targetPort: "8080"   # was templated\n' in result.stdout
    assert '\n+      targetPort: 8080   # was templated\n' in result.stdout
    assert result.stdout.startswith("--- a/m.yaml\n+++ b/m.yaml\n")
    run("lint", "--fix", "m.yaml")
    again = run("lint", "--diff", "m.yaml")
    assert again.exit_code == 0 and again.stdout == ""


def test_findings_say_whether_a_fix_exists(tmp_path, monkeypatch):
    path = tmp_path / "m.yaml"
    path.write_text(COMMENTED)
    monkeypatch.chdir(tmp_path)
    text = run("lint", "m.yaml").stdout
    assert "m.yaml:15:7: error   KP001 [*] targetPort '8080' is neither a port number" in text
    assert "from 1 file; 2 fixable with --fix\n" in text
    findings = json.loads(run("lint", "--format", "json", "m.yaml").stdout)["findings"]
    fixes = {f["rule"]: f.get("fix") for f in findings}
    assert fixes["KP001"] == {"applicability": "safe", "description": "remove the quotes: targetPort: 8080"}
    assert fixes["KP003"]["applicability"] == "safe"


def test_sarif_fixes_are_schema_valid(tmp_path, monkeypatch):
    from test_sarif import validate

    path = tmp_path / "m.yaml"
    path.write_text(COMMENTED)
    monkeypatch.chdir(tmp_path)
    log = json.loads(run("lint", "--format", "sarif", "m.yaml").stdout)
    validate(log)
    fixes = [result["fixes"][0] for result in log["runs"][0]["results"] if "fixes" in result]
    assert len(fixes) == 2
    replacement = fixes[0]["artifactChanges"][0]["replacements"][0]
    assert replacement == {"deletedRegion": {"startLine": 15, "startColumn": 19, "endLine": 15, "endColumn": 25},
                           "insertedContent": {"text": "8080"}}
    removal = fixes[1]["artifactChanges"][0]["replacements"][0]
    assert removal == {"deletedRegion": {"startLine": 16, "startColumn": 1, "endLine": 19, "endColumn": 1},
                       "insertedContent": {"text": ""}}


def test_plain_lint_never_imports_ruamel(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(COMMENTED)
    code = ("import sys; from kubelint_ports.cli import main; sys.argv=['kubelint-ports','lint','-q',%r]\n"
            "try: main()\nexcept SystemExit: pass\nprint('ruamel' in ' '.join(sys.modules), file=sys.stderr)") % str(path)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stderr.strip().endswith("False"), done.stderr


def test_helm_and_stdin_objects_get_no_fix():
    result = runner.invoke(app, ["lint", "--format", "json", "-"], input=COMMENTED)
    assert all("fix" not in finding for finding in json.loads(result.stdout)["findings"])


def test_a_finding_composes_only_its_document_with_the_files_marks(tmp_path):
    """A fix composes the stretch of its document alone (a file of a thousand objects would
    otherwise be composed whole per fix), and its marks are those of the whole file."""
    from kubelint_ports.fixes.source import read_source
    from kubelint_ports.loading import ManifestLoader

    text = ("# héllo wörld\r\n---\r\napiVersion: v1\r\nkind: Service\r\nmetadata: {name: a}\r\n"
            "--- # ünïcode\r\napiVersion: v1\r\nkind: Service\r\nmetadata:\r\n  name: b\r\n"
            "spec: {ports: [{port: 80, targetPort: \"9090\"}]}\r\n")
    path = tmp_path / "m.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    whole = list(yaml.compose_all(text, Loader=ManifestLoader))
    source = read_source(str(path), "m.yaml")
    for ordinal, root in enumerate(whole):
        span = (root.start_mark.index, root.end_mark.index, root.start_mark.line, root.start_mark.column)
        alone = source.document(ordinal, span)
        assert alone is not root and yaml.serialize(alone) == yaml.serialize(root)
        port = yt.at(alone, "spec.ports") if ordinal else yt.get(alone, "metadata")
        expected = yt.at(root, "spec.ports") if ordinal else yt.get(root, "metadata")
        assert (port.start_mark.index, port.start_mark.line, port.start_mark.column, port.end_mark.index) == (
            expected.start_mark.index, expected.start_mark.line, expected.start_mark.column, expected.end_mark.index)
    assert source.roots is None  # the whole file was never composed
    # A stretch that is not where the file has it is not trusted: the whole file answers.
    assert source.document(1, (0, 10, 0, 0)) is source.documents()[1]


def test_many_findings_in_one_big_file_compose_it_whole_once(tmp_path):
    """Each stretch is padded with the text before it, so a file with findings in many of its
    documents is composed whole once the padding would outgrow it, never once per document."""
    from kubelint_ports.fixes.source import read_source
    from kubelint_ports.loading import ManifestLoader

    text = "".join(f"---\napiVersion: v1\nkind: Service\nmetadata: {{name: s{index}}}\n" for index in range(40))
    path = tmp_path / "many.yaml"
    path.write_text(text)
    roots = list(yaml.compose_all(text, Loader=ManifestLoader))
    source = read_source(str(path), "many.yaml")
    for ordinal, root in enumerate(roots):
        span = (root.start_mark.index, root.end_mark.index, root.start_mark.line, root.start_mark.column)
        found = source.document(ordinal, span)
        assert yaml.serialize(found) == yaml.serialize(root) and found.start_mark.index == span[0]
    assert source.roots is not None and len(source.spans) < len(roots)  # the rest came from the whole file
    assert source.padded <= len(text)
