"""Large inputs: documents keep no trees, big `kind: List` files are composed a run of items at a
time, and positions stay those of the file (speed and memory are benchmarks, never asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubelint_ports import loading
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.loading import LoadResult, ManifestLoader, load, load_bytes
from kubelint_ports.loading import yamltree as yt

ROOT = Path(__file__).resolve().parents[1]

NODE = """\
- apiVersion: v1
  kind: Node
  metadata:
    name: node-{n}
    labels:
      kubernetes.io/hostname: node-{n}
      note: |
        - not an item: a block scalar line
  spec:
    podCIDR: "10.{a}.{b}.0/24"
    taints:
    - key: dedicated
      value: "x"
      effect: NoSchedule
"""


def node_list(count: int, indent: str = "") -> str:
    items = "".join(NODE.format(n=n, a=n // 256, b=n % 256) for n in range(count))
    items = "".join(indent + line if line else line for line in items.splitlines(keepends=True))
    return f"apiVersion: v1\n# the inventory\nitems:\n{items}kind: List\nmetadata:\n  resourceVersion: \"\"\n"


def whole_items(text: str):
    return yt.get(yaml.compose(text, Loader=ManifestLoader), "items").value


FIELDS = ("metadata.name", "metadata.labels.note", "spec.podCIDR", "spec.taints[0].effect", "spec.missing.deeper", "")


def assert_same_positions(documents, items) -> None:
    assert len(documents) == len(items)
    for document, item in zip(documents, items):
        assert document._root is None  # the tree was let go after loading
        for field_path in FIELDS:
            key, value = yt.resolve(item, field_path) if field_path else (None, item)
            start = (key or value).start_mark
            location = document.location(field_path)
            assert (location.line, location.column) == (start.line + 1, start.column + 1), (document.items, field_path)


@pytest.mark.parametrize("indent", ["", "  "])
def test_big_list_is_read_in_runs_with_the_files_own_positions(monkeypatch, indent):
    monkeypatch.setattr(loading, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(loading, "SPLIT_CHUNK_CHARS", 700)  # several runs
    text = node_list(40, indent)
    composed = []
    original = loading._split_documents

    def counting(*args):
        for piece in original(*args):
            composed.append(piece)
            yield piece

    monkeypatch.setattr(loading, "_split_documents", counting)
    result = LoadResult()
    load_bytes(text.encode(), "nodes.yaml", result)
    assert len(composed) > 3  # the List, then runs of items: never one tree of them all
    assert not result.diagnostics
    assert_same_positions(result.documents, whole_items(text))
    assert [document.items for document in result.documents] == [(n,) for n in range(40)]


@pytest.mark.parametrize("change", [
    lambda text: text.replace("\n", "\r\n"),  # CRLF: line counting differs, compose whole
    lambda text: text.replace("value: \"x\"", "value: &x \"x\"", 1).replace("effect: NoSchedule", "effect: *x", 1),
    lambda text: "---\n" + text,
    lambda text: text.replace("items:\n", "items:\n# a comment\n"),
])
def test_big_list_variants_keep_whole_file_positions(monkeypatch, change):
    monkeypatch.setattr(loading, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(loading, "SPLIT_CHUNK_CHARS", 700)
    text = change(node_list(12))
    result = LoadResult()
    load_bytes(text.encode(), "nodes.yaml", result)
    assert_same_positions(result.documents, whole_items(text))


def test_big_list_with_an_error_reports_it_like_a_whole_compose(monkeypatch):
    text = node_list(12).replace("name: node-7\n", "name: node-7\n  broken: [unclosed\n")
    expected = LoadResult()
    load_bytes(text.encode(), "nodes.yaml", expected)
    monkeypatch.setattr(loading, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(loading, "SPLIT_CHUNK_CHARS", 700)
    result = LoadResult()
    load_bytes(text.encode(), "nodes.yaml", result)
    assert result.diagnostics == expected.diagnostics and result.diagnostics
    assert len(result.documents) == len(expected.documents)


def test_a_wrongly_typed_item_stops_the_list_as_a_whole_compose_does(monkeypatch):
    text = node_list(12).replace("  kind: Node\n", "  kind: [Node]\n", 5)  # the first five items
    expected = LoadResult()
    load_bytes(text.encode(), "nodes.yaml", expected)
    monkeypatch.setattr(loading, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(loading, "SPLIT_CHUNK_CHARS", 700)
    result = LoadResult()
    load_bytes(text.encode(), "nodes.yaml", result)
    assert result.diagnostics == expected.diagnostics and len(result.diagnostics) == 1
    assert len(result.documents) == len(expected.documents) == 0


def test_positions_of_documents_in_a_multi_document_file_after_the_trees_are_gone(tmp_path):
    first = "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  ports: [{port: 80, nodePort: 30080}]\n"
    second = "# between\n\n\u00e9t\u00e9: \"\u00fcnicode\"\napiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n" \
             "spec:\n  containers:\n  - name: c\n    ports:\n    - {containerPort: 80, hostPort: 80}\n"
    path = tmp_path / "m.yaml"
    path.write_text("\ufeff" + first + "---\n" + second, encoding="utf-8")
    loaded = load([str(path)])
    service, pod = loaded.documents
    assert service._root is None and pod._root is None
    roots = list(yaml.compose_all(path.read_bytes(), Loader=ManifestLoader))
    for document, root, field_path in ((service, roots[0], "spec.ports[0].nodePort"),
                                       (pod, roots[1], "spec.containers[0].ports[0].hostPort")):
        key, value = yt.resolve(root, field_path)
        location = document.location(field_path)
        assert (location.line, location.column, location.end_line, location.end_column) == (
            key.start_mark.line + 1, key.start_mark.column + 1, value.end_mark.line + 1, value.end_mark.column + 1)
    assert pod.location("spec.containers[0].ports[0].hostPort").line == 18

def test_a_file_changed_while_linted_is_reported_and_its_findings_keep_a_line(tmp_path, monkeypatch):
    path = tmp_path / "m.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
                    "    ports: [{containerPort: 80, hostPort: 80}]\n", encoding="utf-8")
    from kubelint_ports import engine

    original = engine.run_checks

    def edit_then_check(cluster, policies):
        path.write_text("# edited\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
        return original(cluster, policies)

    monkeypatch.setattr(engine, "run_checks", edit_then_check)
    report = lint_paths([str(path)])
    [finding] = [f for f in report.findings if f.rule_id == "KP101"]
    assert (finding.location.line, finding.location.column) == (1, 1)  # the object's first line, as read
    assert any("changed while it was linted" in d.message for d in report.diagnostics)


def test_checks_never_need_a_tree(monkeypatch, tmp_path):
    """Every rule reads the model: linting the examples composes again only documents that have
    findings, and each of them once."""
    composed = []
    original = loading.Document.compose_again

    def counting(self):
        composed.append(id(self))
        return original(self)

    monkeypatch.setattr(loading.Document, "compose_again", counting)
    report = lint_paths([str(ROOT / "examples")], LintOptions(node_files=(str(ROOT / "examples/inventory/nodes.yaml"),)))
    assert report.findings
    assert len(composed) == len(set(composed))
    subjects = {(f.location.path, f.subject) for f in report.findings}
    assert len(set(composed)) <= len(subjects) + sum(len(f.related) for f in report.findings)


def test_the_cli_exits_normally_so_a_profile_is_written(tmp_path):
    profile = tmp_path / "lint.prof"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "kubelint_ports", "lint",
                           str(ROOT / "examples" / "clean.yaml")], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert profile.stat().st_size > 0
    import pstats

    assert any("lint_paths" in name for _, _, name in pstats.Stats(str(profile)).stats)
