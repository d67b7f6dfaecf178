"""Issue 31: a hostile file hung every plain `lint`. Its annotations were a merge-key alias bomb
within the max-aliases budget, and 3,000 quoted ports each had a fix to describe; working out
whether each finding had one walked the alias-expanded tree once per finding (600 ports: 64 s, 3,000
ports: 784 s). Now whatever the describer needs of a document is worked out once per document, and
a finding costs the path it names.

The reproducer does not time anything: it counts the reads of a node's `value`, which every walk of
a tree makes for each node it enters, and bounds them by the nodes written in the document plus the
findings, whatever the aliases expand to. The bomb is built near the max-aliases limit in force
(lowered here so that loading it stays quick; the count is what the tree is, not how big).
"""

from __future__ import annotations

import dataclasses
import io
from contextlib import contextmanager
from pathlib import Path

import pytest
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.fixes import SHOWN_IN, describe
from kubelint_ports.fixes.run import ROUND_TRIPS_PER_DOCUMENT
from kubelint_ports.formatters import FORMATTERS, FormatOptions, get_formatter
from kubelint_ports.loading import ManifestLoader, budgets
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.policies import builtin_policies

LIMITS = budgets.Limits(max_aliases=200_000)
READS_PER_NODE = 8  # a node's value is read a few times per document (composing, one walk, the fixes)


def bomb(levels: int, width: int, keys: int) -> str:
    """A flow mapping whose merge keys (`<<: [*a, *a, ...]` of `<<: [*b, *b, ...]`) expand to about
    2 x keys x width**levels nodes, though only a few hundred are written."""
    text = "{" + ", ".join(f'k{index}: "v"' for index in range(keys)) + "}"
    for level in range(1, levels + 1):
        text = f"{{<<: [&a{level} {text}" + f", *a{level}" * (width - 1) + f'], x{level}: "v"}}'
    return text


def pod(ports: int, annotations: str) -> str:
    lines = ["apiVersion: v1", "kind: Pod", "metadata:", "  name: hostile", f"  annotations: {annotations}",
             "spec:", "  containers:", "  - name: app", "    image: app", "    ports:"]
    lines += [f'    - containerPort: "{1000 + index}"' for index in range(ports)]  # KP001, whose fix is safe
    return "\n".join(lines) + "\n"


HOSTILE_ANNOTATIONS = bomb(3, 10, 60)
# Past yamltree.to_plain's budget of 100,000 values once expanded, within the default max-aliases.
LARGE_TREE = bomb(3, 10, 120)


class TooManyReads(AssertionError):
    pass


@contextmanager
def node_reads(limit: int):
    """Count every read of a node's `value` inside the block; past `limit` the walk under test is
    the bug, and is stopped there (so the reproducer fails in a second instead of hanging)."""
    reads = [0]

    def read(node):
        reads[0] += 1
        if reads[0] > limit:
            raise TooManyReads(f"more than {limit:,} reads of a node's value")
        return node.__dict__["value"]

    def write(node, value):
        node.__dict__["value"] = value

    counted = property(read, write)  # a data descriptor: it comes before the instance's own value
    for kind in (ScalarNode, SequenceNode, MappingNode):
        kind.value = counted
    try:
        yield reads
    finally:
        for kind in (ScalarNode, SequenceNode, MappingNode):
            del kind.value


def children(node) -> list:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value) if isinstance(node, SequenceNode) else []


def written_and_expanded(root) -> tuple[int, int]:
    """(distinct nodes, nodes once aliases are expanded) of a composed tree, sizes memoised."""
    sizes: dict[int, int] = {}
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        below = children(node)
        if children_done:
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in below)
        elif id(node) not in sizes:
            stack.append((node, True))
            stack.extend((child, False) for child in below if id(child) not in sizes)
    return len(sizes), sizes[id(root)]


def lint_file(tmp_path: Path, text: str, name: str = "pod.yaml", limits: budgets.Limits = LIMITS):
    path = tmp_path / name
    path.write_text(text)
    report = lint_paths([str(path)], LintOptions(limits=limits, jobs=1), policies=builtin_policies())
    assert not report.diagnostics, report.diagnostics
    return report


def fixes_of(report) -> list[tuple]:
    """Each finding's fix as the formats show it, edits by line and column."""
    shown = []
    for finding in report.findings:
        fix = finding.fix
        shown.append((finding.rule_id, finding.location.line, finding.location.column, None if fix is None else (
            fix.applicability, fix.description, fix.blocked,
            [(edit.region.line, edit.region.column, edit.region.end_line, edit.region.end_column, edit.text)
             for edit in fix.edits])))
    return shown


@pytest.mark.parametrize("ports", [600, 3000])
def test_describing_fixes_reads_each_node_a_bounded_number_of_times(ports, tmp_path):
    text = pod(ports, HOSTILE_ANNOTATIONS)
    with budgets.applied(LIMITS):
        written, expanded = written_and_expanded(budgets.compose(text, loader=ManifestLoader))
    assert expanded > LIMITS.max_aliases // 2, "the bomb is near the limit, and accepted"
    report = lint_file(tmp_path, text)
    assert sum(finding.rule_id == "KP001" for finding in report.findings) == ports
    bound = READS_PER_NODE * (written + len(report.findings))
    assert bound < expanded  # one walk of the expanded tree would already be past it
    for edits in (False, True):  # text and JSON, then SARIF, --diff and --fix
        with node_reads(bound) as reads:
            describe(report, edits=edits)
        assert reads[0] <= bound
        assert all(finding.fix is not None and finding.fix.applicability == "safe" and bool(finding.fix.edits) == edits
                   for finding in report.findings if finding.rule_id == "KP001")


def test_the_alias_bomb_changes_no_described_fix(tmp_path):
    """The same ports under plain annotations get the same fixes, at the same lines and columns."""
    hostile = describe(lint_file(tmp_path, pod(50, HOSTILE_ANNOTATIONS), "hostile.yaml"), edits=True)
    plain = describe(lint_file(tmp_path, pod(50, '{note: "plain"}'), "plain.yaml"), edits=True)
    assert fixes_of(hostile) == fixes_of(plain)
    assert sum(fix is not None for *_, fix in fixes_of(plain)) == 50


SMALL = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  initContainers:
  - name: setup
    image: busybox
    ports:
    - containerPort: 9000
      hostPort: 9000
  containers:
  - name: app
    image: nginx
    ports:
    - containerPort: "8080"
    - containerPort: 8443
      hostPort: 30080
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  type: NodePort
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 8080
    nodePort: 30080
  - port: 80
    targetPort: 8080
    nodePort: 30080
  - port: 443
    nodePort: 40443
"""

# What the describer said of SMALL before issue 31's change (and says now): findings without a fix
# are left out.
SMALL_FIXES = [
    ("KP104", 12, 7, ("safe", "remove hostPort 9000 of the init container (never mapped)", "", [(12, 1, 13, 1, "")])),
    ("KP001", 17, 7, ("safe", "remove the quotes: containerPort: 8080", "", [(17, 22, 17, 28, "8080")])),
    ("KP201", 19, 7, ("unsafe", "move hostPort 30080 to 29999, the free host port nearest 30080 on any node (no "
                                "inventory), outside the node-port range 30000-32767 and the ephemeral range "
                                "32768-60999; clients of the node's port 30080 must follow", "",
                      [(19, 17, 19, 22, "29999")])),
    ("KP003", 32, 5, ("safe", "remove spec.ports[1], a copy of spec.ports[0]", "", [(32, 1, 35, 1, "")])),
    ("KP203", 34, 5, ("unsafe", "move nodePort 30080 to 30000, the lowest nodePort of 30000-32767 that no Service or "
                                "pod of the inputs claims; clients of port 30080 must follow", "",
                      [(34, 15, 34, 20, "30000")])),
    ("KP204", 36, 5, ("unsafe", "move nodePort 40443 to 30001, the lowest nodePort of 30000-32767 that no Service or "
                                "pod of the inputs claims and no other move of this run takes; clients of port 40443 "
                                "must follow", "", [(36, 15, 36, 20, "30001")])),
]


def test_a_small_file_is_described_as_before(tmp_path):
    report = describe(lint_file(tmp_path, SMALL), edits=True)
    assert [entry for entry in fixes_of(report) if entry[3] is not None] == SMALL_FIXES


ALIASED = """\
apiVersion: v1
kind: Pod
metadata:
  name: aliased
spec:
  containers:
  - name: a
    image: a
    ports:
    - containerPort: &quoted "8080"
    - &entry {containerPort: "8081"}
    - <<: {containerPort: "8082"}
    - containerPort: "8083"
  - name: b
    image: b
    ports:
    - containerPort: *quoted
    - *entry
    - &key containerPort: "8084"
    - *key : "8085"
"""


def test_only_fields_written_once_where_the_finding_points_get_a_fix(tmp_path):
    """An anchored value that aliases repeat (8080, 8081) and a merged-in field (8082) get none; a
    key's anchor is its first place (8084), not the alias of it (8085)."""
    report = describe(lint_file(tmp_path, ALIASED), edits=True)
    fixed = {fix[1] for *_, fix in fixes_of(report) if fix is not None}
    assert fixed == {"remove the quotes: containerPort: 8083", "remove the quotes: containerPort: 8084"}
    assert sum(finding.rule_id == "KP001" for finding in report.findings) == 8


def test_a_service_port_entry_aliases_make_large_gets_no_fix(tmp_path):
    """KP003's fix compares entries as data: an entry with a large aliased tree in it was read whole
    for each duplicate, past yamltree's budget (exit 3)."""
    text = f"""\
apiVersion: v1
kind: Service
metadata:
  name: dup
  annotations: &tree {LARGE_TREE}
spec:
  selector: {{app: x}}
  ports:
  - {{port: 80, x: *tree}}
""" + "".join(f"  - {{port: 80, targetPort: {1000 + index}}}\n" for index in range(20))
    report = describe(lint_file(tmp_path, text, limits=budgets.DEFAULT_LIMITS), edits=True)
    kp003 = [finding for finding in report.findings if finding.rule_id == "KP003"]
    assert len(kp003) == 20 and all(finding.fix is None for finding in kp003)


def test_kube_proxy_fix_compares_other_documents_without_expanding_them(tmp_path):
    """KP401's check that an edit leaves the file's other documents alone read each as plain data,
    past yamltree's budget for a large aliased one (exit 3); it compares what is written."""
    source = Path(__file__).parent / "fix" / "kp401" / "configmap-flannel.yaml"
    text = source.read_text() + f"""---
apiVersion: v1
kind: ConfigMap
metadata: {{name: other, annotations: {LARGE_TREE}}}
data: {{a: b}}
"""
    report = describe(lint_file(tmp_path, text, limits=budgets.DEFAULT_LIMITS), edits=True)
    [kp401] = [finding for finding in report.findings if finding.rule_id == "KP401"]
    assert kp401.fix.available and kp401.fix.edits and kp401.fix.edits[0].text.strip() == "clusterCIDR: 10.42.0.0/16"


def test_removals_past_the_round_trip_budget_of_a_document_wait(tmp_path):
    """Each removal's edit is checked by a ruamel.yaml round trip of its whole document: an object
    with thousands cost thousands of documents (200 init hostPorts in SARIF: 128 s)."""
    count = ROUND_TRIPS_PER_DOCUMENT + 4
    lines = ["apiVersion: v1", "kind: Pod", "metadata: {name: init}", "spec:", "  containers:",
             "  - {name: app, image: app}", "  initContainers:"]
    for index in range(count):
        lines += [f"  - name: init{index}", "    image: x", "    ports:", f"    - containerPort: {1000 + index}",
                  f"      hostPort: {1000 + index}"]
    report = lint_file(tmp_path, "\n".join(lines) + "\n")
    described = [finding.fix for finding in describe(report).findings if finding.rule_id == "KP104"]
    assert len(described) == count and all(fix is not None and fix.available for fix in described)
    edited = [finding.fix for finding in describe(report, edits=True).findings if finding.rule_id == "KP104"]
    assert sum(bool(fix.edits) for fix in edited) == ROUND_TRIPS_PER_DOCUMENT
    assert all("wait for the next run" in fix.blocked for fix in edited if not fix.edits)


def test_the_formats_that_show_fixes_are_those_fixes_are_described_for(tmp_path):
    """`lint` works fixes out only for a report that shows them (fixes.SHOWN_IN)."""
    report = describe(lint_file(tmp_path, SMALL), edits=True)
    bare = dataclasses.replace(report, findings=[dataclasses.replace(finding, fix=None) for finding in report.findings])

    def written(one, name: str) -> str:
        out = io.StringIO()
        get_formatter(name)(one, out, FormatOptions(source_root=str(tmp_path)))
        return out.getvalue()

    assert {name for name in FORMATTERS if written(report, name) != written(bare, name)} == SHOWN_IN


def test_a_format_that_shows_no_fix_needs_none_described(tmp_path):
    """Every format says whether a finding has a fix (the CI formats too: "(fixable with --fix)"),
    so each needs them described; a run whose outputs show none (a format added later that shows
    no fix) needs none worked out."""
    from kubelint_ports.fixes import fixable

    report = lint_file(tmp_path, SMALL)
    assert fixable(report) and fixable(report, {"github", "sarif"})
    assert fixable(report, {"github", "markdown", "junit", "gitlab"})
    assert not fixable(report, {"a-format-without-fixes"})


def test_nested_merge_keys_are_indexed_for_what_is_written(tmp_path):
    """The model reads `metadata.annotations` of the bomb: indexing its keys merged each source
    again for every path to it (a million pairs); now each mapping a merge key reaches once."""
    with budgets.applied(LIMITS):
        root = budgets.compose(pod(10, HOSTILE_ANNOTATIONS), loader=ManifestLoader)
    written, expanded = written_and_expanded(root)
    annotations = yt.at(root, "metadata.annotations")
    with node_reads(READS_PER_NODE * written) as reads:
        assert yt.get(annotations, "k59") is not None and yt.get(annotations, "x1") is not None
        assert yt.field_path_to(root, yt.child(root, "spec")[0]) == "spec"  # past the whole bomb
    assert reads[0] <= READS_PER_NODE * written < expanded


@pytest.mark.parametrize("text", [SMALL, ALIASED, pod(20, bomb(2, 10, 20))], ids=["small", "aliased", "bomb"])
def test_the_fuzzers_fix_oracle_holds(text, tmp_path):
    """tests/fuzzing_fix.py's oracle, strict: `--fix` and `--fix --unsafe-fixes` end in files that
    still compose, and a second `--fix` changes nothing."""
    from fuzzing_fix import check_fix  # tests/ is on sys.path (pytest's rootdir)

    check_fix(text.encode(), tmp_path, strict=True)
