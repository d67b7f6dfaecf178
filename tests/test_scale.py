"""Large inputs: documents keep no trees, big `kind: List` files are composed a run of items at a
time, and positions stay those of the file (speed and memory are benchmarks, never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubelint_ports import loading
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.loading import LoadResult, ManifestLoader, load, load_bytes
from kubelint_ports.loading.yaml_files import manifests
from kubelint_ports.loading.yaml_files import yamltree as yt

pytestmark = pytest.mark.slow  # large generated inputs: not in the quick subset

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
    monkeypatch.setattr(manifests, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(manifests, "SPLIT_CHUNK_CHARS", 700)  # several runs
    text = node_list(40, indent)
    composed = []
    original = manifests._split_documents

    def counting(*args):
        for piece in original(*args):
            composed.append(piece)
            yield piece

    monkeypatch.setattr(manifests, "_split_documents", counting)
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
    monkeypatch.setattr(manifests, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(manifests, "SPLIT_CHUNK_CHARS", 700)
    text = change(node_list(12))
    result = LoadResult()
    load_bytes(text.encode(), "nodes.yaml", result)
    assert_same_positions(result.documents, whole_items(text))


def whole_then_split(text: str, monkeypatch) -> tuple[LoadResult, LoadResult]:
    """The file loaded as it is (too small to split), then split into runs of a few items."""
    whole, split = LoadResult(), LoadResult()
    load_bytes(text.encode(), "nodes.yaml", whole)
    monkeypatch.setattr(manifests, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(manifests, "SPLIT_CHUNK_CHARS", 700)
    load_bytes(text.encode(), "nodes.yaml", split)
    return whole, split


def test_big_list_with_an_error_reports_it_like_a_whole_compose(monkeypatch):
    expected, result = whole_then_split(
        node_list(12).replace("name: node-7\n", "name: node-7\n  broken: [unclosed\n"), monkeypatch)
    assert result.diagnostics == expected.diagnostics and result.diagnostics
    assert len(result.documents) == len(expected.documents)


def test_a_wrongly_typed_item_stops_the_list_as_a_whole_compose_does(monkeypatch):
    expected, result = whole_then_split(  # the first five items have a list as their kind
        node_list(12).replace("  kind: Node\n", "  kind: [Node]\n", 5), monkeypatch)
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
                    "    ports: [{containerPort: 80, hostPort: 80}, {containerPort: \"81\"}]\n", encoding="utf-8")
    from kubelint_ports import engine

    original = engine.run_checks

    def edit_then_check(cluster, policies, *args, **kwargs):
        path.write_text("# edited\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
        return original(cluster, policies, *args, **kwargs)

    monkeypatch.setattr(engine, "run_checks", edit_then_check)
    report = lint_paths([str(path)])
    [invalid] = [f for f in report.findings if f.rule_id == "KP001"]
    assert (invalid.location.line, invalid.location.column) == (1, 1)  # the object's first line, as read
    assert any("changed while it was linted" in d.message for d in report.diagnostics)
    [host_port] = [f for f in report.findings if f.rule_id == "KP101"]
    assert host_port.location.line == 7  # noted while the file was read: still its line as linted


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
    assert done.stdout.splitlines()[-1] == "0 errors, 0 warnings, 0 notes in 3 objects from 1 file"
    import pstats

    # Written only when the interpreter ends normally (an os._exit would leave no profile).
    calls = {name: stats[1] for (_, _, name), stats in pstats.Stats(str(profile)).stats.items()}
    assert calls.get("lint_paths") == 1


# --- the worker pool ---------------------------------------------------------------------------

def generate_corpus(root: Path, workloads: int = 240) -> None:
    """A small corpus of the shapes big ones have: multi-document files, one-object files,
    `helm template` output, a `kind: List`, CRLF, planted conflicts; deterministic."""
    import random

    rng = random.Random(42)
    (root / "manifests" / "helm").mkdir(parents=True)
    (root / "cluster").mkdir()
    names = [f"node-{n}" for n in range(12)]
    (root / "cluster" / "nodes.yaml").write_text(
        "apiVersion: v1\nitems:\n" + "".join(
            f"- apiVersion: v1\n  kind: Node\n  metadata:\n    name: {name}\n    labels:\n"
            f"      kubernetes.io/hostname: {name}\n      pool: {'gpu' if n % 3 == 0 else 'web'}\n"
            f"  spec:\n    podCIDR: 10.244.{n}.0/24\n" for n, name in enumerate(names)) + "kind: List\n")
    helm_parts = []
    for index in range(workloads):
        kind = rng.choice(["Deployment", "DaemonSet", "StatefulSet", "Pod"])
        host_port = rng.choice([None, None, 8000 + index % 50, 31000 + index % 40])
        node_port = rng.choice([None, None, 30000 + index % 60])
        ports = f"- containerPort: {80 + index % 7}" + (f"\n              hostPort: {host_port}" if host_port else "")
        spec = (f"spec:\n  containers:\n    - name: c{index}\n      image: app:{index}\n      ports:\n"
                f"        {ports.replace(chr(10) + '              ', chr(10) + '          ')}\n")
        if rng.random() < 0.3:
            spec += f"  nodeSelector:\n    pool: {rng.choice(['gpu', 'web'])}\n"
        if rng.random() < 0.1:
            spec += f"  nodeName: {rng.choice(names)}\n"
        indented = "".join("    " + line + "\n" for line in spec.splitlines())
        if kind == "Pod":
            body = f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: w{index}\n  namespace: ns{index % 5}\n{spec}"
        else:
            body = (f"apiVersion: apps/v1\nkind: {kind}\nmetadata:\n  name: w{index}\n  namespace: ns{index % 5}\n"
                    f"spec:\n  replicas: {rng.randint(1, 20)}\n  template:\n{indented}").replace(
                "  replicas", "  replicas" if kind != "DaemonSet" else "  minReadySeconds")
        service = (f"apiVersion: v1\nkind: Service\nmetadata:\n  name: s{index}\n  namespace: ns{index % 5}\n"
                   f"spec:\n  type: {'NodePort' if node_port else 'ClusterIP'}\n  ports:\n"
                   f"    - port: {host_port or 80}\n" + (f"      nodePort: {node_port}\n" if node_port else ""))
        shape = index % 4
        if shape == 0:
            helm_parts.append(f"---\n# Source: app/templates/w{index}.yaml\n{body}---\n# Source: app/templates/s{index}.yaml\n"
                              f"{service}")
        elif shape == 1:
            (root / "manifests" / f"app{index}.yaml").write_text(body + "---\n" + service)
        elif shape == 2:
            (root / "manifests" / f"app{index}.yml").write_bytes((body + "---\n" + service).replace("\n", "\r\n")
                                                                 .encode())
        else:
            folder = root / "manifests" / f"split{index}"
            folder.mkdir()
            (folder / "workload.yaml").write_text(body)
            (folder / "service.yaml").write_text(service)
        if len(helm_parts) == 20:
            (root / "manifests" / "helm" / f"release{index}.yaml").write_text("".join(helm_parts))
            helm_parts = []
    (root / "manifests" / "helm" / "last.yaml").write_text("".join(helm_parts))
    running = "".join(  # pods already on nodes, some owned by linted workloads, and Services
        f"- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: r{index}-abc\n    namespace: ns{index % 5}\n"
        f"    ownerReferences:\n    - {{kind: ReplicaSet, name: w{index}-5d8f}}\n  spec:\n    nodeName: {names[index % 12]}\n"
        f"    containers:\n    - name: r\n      ports:\n      - {{containerPort: 80, hostPort: {8000 + index % 50}}}\n"
        f"  status: {{phase: Running}}\n"
        f"- apiVersion: v1\n  kind: Service\n  metadata: {{name: rs{index}, namespace: ns{index % 5}}}\n"
        f"  spec:\n    type: NodePort\n    ports: [{{port: 80, nodePort: {30000 + index % 60}}}]\n"
        for index in range(0, workloads, 3))
    (root / "cluster" / "running.yaml").write_text(f"apiVersion: v1\nkind: List\nitems:\n{running}")
    (root / "manifests" / "broken.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n")


def json_report(paths, options) -> str:
    import io

    from kubelint_ports.formatters import FormatOptions, get_formatter

    stream = io.StringIO()
    get_formatter("json")(lint_paths(paths, options), stream, FormatOptions())
    return stream.getvalue()


@pytest.mark.parametrize("corpus", ["examples", "generated"])
def test_output_is_the_same_whatever_the_number_of_workers(tmp_path, monkeypatch, corpus):
    from kubelint_ports.loading import pool

    options = {}
    if corpus == "examples":
        paths, nodes = [str(ROOT / "examples")], (str(ROOT / "examples" / "inventory" / "nodes.yaml"),)
    else:
        generate_corpus(tmp_path)
        paths, nodes = [str(tmp_path / "manifests")], (str(tmp_path / "cluster" / "nodes.yaml"),)
        options = dict(cluster_files=(str(tmp_path / "cluster" / "running.yaml"),))
    started = []
    original = pool.Workers.batches

    def counting(self, *args):
        batches = original(self, *args)
        started.append(len(batches))
        return batches

    monkeypatch.setattr(pool.Workers, "batches", counting)
    monkeypatch.setattr(pool, "_FORK_SERVER", [True])  # under xdist this process runs threads too
    monkeypatch.setattr(pool, "POOL_MIN_BYTES", 0)  # these inputs are small: use the pool anyway
    monkeypatch.setattr(pool, "MIN_BATCH_BYTES", 1)
    alone = json_report(paths, LintOptions(node_files=nodes, jobs=1, **options))
    assert not started
    together = json_report(paths, LintOptions(node_files=nodes, jobs=2, **options))
    assert max(started) > 2  # several batches were read by workers
    assert together == alone
    assert json.loads(alone)["findings"]
    if corpus == "generated":
        assert json.loads(alone)["errors"]  # the broken file is reported by a worker like in-process


def test_small_inputs_never_start_workers(monkeypatch):
    from kubelint_ports.loading import pool

    def refuse(*args, **kwargs):
        raise AssertionError("a pool was started")

    monkeypatch.setattr("concurrent.futures.ProcessPoolExecutor", refuse)
    report = lint_paths([str(ROOT / "examples")], LintOptions(jobs=4))
    assert report.findings and pool.POOL_MIN_BYTES > sum(
        p.stat().st_size for p in (ROOT / "examples").rglob("*") if p.is_file())


def test_a_process_awake_for_a_moment_does_not_count_as_a_busy_processor(monkeypatch):
    """`running_others` takes the fewest runnable processes of a few looks: a sampling thread that
    woke for one look is not a second busy processor; a spinning job is seen at every look."""
    import io

    from kubelint_ports.loading import pool

    def looks(*counts):
        texts = iter(f"0.52 0.40 0.31 {count}/312 4242\n" for count in counts)
        monkeypatch.setattr(pool, "open", lambda *args, **kwargs: io.StringIO(next(texts)), raising=False)

    looks(2, 1, 2)  # this run, and another one for a moment
    assert pool.running_others(interval=0) == 0
    looks(2, 2, 2)  # this run and a job that keeps a processor busy
    assert pool.running_others(interval=0) == 1
    looks(3, 4, 3)
    assert pool.running_others(interval=0) == 2


def test_default_workers_start_only_on_a_free_second_processor(monkeypatch):
    """By default (`--jobs 0`) a large input is read by workers only when the load average leaves
    a second processor idle; `--jobs N` asks for N whatever the load. The run says which (a note
    under -v/--statistics), and the output is the same either way."""
    from kubelint_ports.loading import pool

    assert pool.free_processors(2, 1.3) == 1 and pool.free_processors(2, 0.2) == 2
    assert pool.free_processors(4, 9.0) == 1 and pool.free_processors(8, None) == 8
    monkeypatch.setattr(pool, "POOL_MIN_BYTES", 0)  # these inputs are small: treat them as large
    monkeypatch.setattr(pool, "MIN_BATCH_BYTES", 1)
    monkeypatch.setattr(pool, "default_jobs", lambda: 2)
    monkeypatch.setattr(pool, "_FORK_SERVER", [True])  # under xdist this process runs threads too
    paths, nodes = [str(ROOT / "examples")], (str(ROOT / "examples" / "inventory" / "nodes.yaml"),)
    outputs, notes = [], []
    # (load average, others running now, --jobs): a busy machine; an idle one; a load average
    # left by an earlier run on a machine idle now; --jobs 2 on a busy one; --jobs 1
    for load, now, jobs in ((1.4, 1, 0), (0.1, None, 0), (1.3, 0, 0), (1.4, 1, 2), (None, None, 1)):
        monkeypatch.setattr(pool, "load_average", lambda load=load: load)
        monkeypatch.setattr(pool, "running_others", lambda now=now: now)
        report = lint_paths(paths, LintOptions(node_files=nodes, jobs=jobs, say_workers=True))
        notes.append(next((note for note in report.notes if note.startswith("input read")), ""))
        outputs.append(json_report(paths, LintOptions(node_files=nodes, jobs=jobs)))
    assert notes == [
        "input read in this process (no second processor free: 2 processors, load average 1.40, 1 runnable besides this run)",
        "input read by 2 worker processes (2 of 2 processors free, load average 0.10)",
        "input read by 2 worker processes (2 of 2 processors free, load average 1.30, 0 runnable besides this run)",
        "input read by 2 worker processes (--jobs 2)",
        ""]  # --jobs 1: the user chose; nothing to say
    assert all(output == outputs[0] for output in outputs)
    assert not any("worker" in note for note in lint_paths(paths, LintOptions(node_files=nodes)).notes)
    monkeypatch.setattr(pool, "POOL_MIN_BYTES", 4 * 2**20)  # a small input: no note, even under -v
    assert not any(note.startswith("input read")
                   for note in lint_paths(paths, LintOptions(node_files=nodes, say_workers=True)).notes)


# --- linear cross-object checks ----------------------------------------------------------------

def test_augmenting_paths_place_as_many_pods_as_max_flow():
    import random

    import networkx

    from kubelint_ports.model.allocation import augmenting_placement

    rng = random.Random(3)
    for _ in range(300):
        nodes = [f"n{i}" for i in range(rng.randint(1, 9))]
        free = [rng.sample(nodes, rng.randint(0, len(nodes))) for _ in range(rng.randint(2, 6))]
        wanted = [rng.randint(0, 5) for _ in free]
        graph = networkx.DiGraph()
        for index, (names, count) in enumerate(zip(free, wanted)):
            graph.add_edge("source", ("w", index), capacity=count)
            for name in names:
                graph.add_edge(("w", index), ("n", name), capacity=1)
                graph.add_edge(("n", name), "sink", capacity=1)
        expected = int(networkx.maximum_flow_value(graph, "source", "sink")) if "sink" in graph else 0
        assert augmenting_placement(wanted, free) == expected, (wanted, free)


def test_places_noted_while_loading_are_those_composed_again():
    """`Document.note` is a cache: the examples' claims give the same place and identity path
    from the noted entry and from a tree composed again."""
    from kubelint_ports.engine import load_cluster

    cluster, _, _ = load_cluster([str(ROOT / "examples")], LintOptions(jobs=1))
    checked = 0
    for owner, field_path in [*((w, c.field_path) for w, c in cluster.host_claims()),
                              *((s, c.field_path) for s in cluster.services for c in s.node_port_claims)]:
        document = owner.document
        if document.noted is None or field_path not in document.noted:
            continue
        noted = document.noted.pop(field_path)
        with document.held():
            assert noted == (document.location(field_path), document.identity_path(field_path))
        checked += 1
    assert checked > 10


def test_nodes_read_from_the_parts_placement_uses():
    """node_as_data keeps every field node_from_object reads: the same Node as from all the data."""
    from kubelint_ports.model.build import node_as_data
    from kubelint_ports.model.placement import node_from_object

    documents = load([str(ROOT / "examples" / "inventory" / "nodes.yaml")]).documents
    cordoned = yaml.compose(node_list(1).replace("  spec:\n", "  spec:\n    unschedulable: true\n"),
                            Loader=ManifestLoader)
    roots = [document.root for document in documents] + list(yt.get(cordoned, "items").value)
    roots[-1].value.append((yaml.ScalarNode(yt.STR, "status"), yaml.compose(
        "addresses: [{type: InternalIP, address: 10.0.0.9}]\nimages: [{names: [a]}]", Loader=ManifestLoader)))
    assert len(roots) > 2
    for root in roots:
        assert node_from_object(node_as_data(root)) == node_from_object(yt.to_plain(root))
    assert node_from_object(node_as_data(roots[-1])).addresses == (("InternalIP", "10.0.0.9"),)
