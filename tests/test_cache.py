"""The file cache (issue 37, docs/cache.md): findings byte for byte the same with and without it,
in every format, cold, warm and warm after an edit; and every hostile entry or directory ignored,
never trusted, never a way out of the cache directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.loading import file_cache
from kubelint_ports.loading.cache_codec import CodecError, Decoder, Encoder, dumps_body

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
REPORTS = ("json", "sarif", "github", "markdown", "junit", "gitlab")

COLLISION = """\
apiVersion: v1
kind: Pod
metadata: {name: agent, namespace: ops}
spec:
  containers:
    - name: agent
      ports:
        - containerPort: 31123
          hostPort: 31123
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: ops}
spec:
  type: NodePort
  ports: [{port: 80, nodePort: 31123}]
"""
OTHER = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: exporter, namespace: mon}
spec:
  selector: {matchLabels: {app: e}}
  template:
    metadata: {labels: {app: e}}
    spec:
      containers:
        - name: e
          ports: [{containerPort: 31123, hostPort: 31123}]
"""


def lint_all_formats(where: Path, args: list[str], cache: list[str], tag: str) -> dict[str, bytes]:
    """One run writing text on standard output and every other format as a report file; each
    format's bytes, the exit code and standard error."""
    out = where.parent / f"out-{tag}"
    out.mkdir()
    reports = [f"--report={kind}:{out / kind}" for kind in REPORTS]
    result = runner.invoke(app, ["lint", *args, *reports, *cache], catch_exceptions=False)
    found = {kind: (out / kind).read_bytes() for kind in REPORTS if (out / kind).exists()}
    found["text"] = result.stdout.encode()
    found["stderr"] = result.stderr.encode()
    found["exit"] = str(result.exit_code).encode()
    return found


SOURCES = {
    "examples": (ROOT / "examples", ["examples", "--nodes", "examples/inventory/nodes.yaml"], "examples/services.yaml"),
    "policies": (ROOT / "tests" / "policies", ["policies"], None),
    "charts": (ROOT / "tests" / "charts", ["charts"], "charts/web-rendered.yaml"),
    "kustomize": (ROOT / "tests" / "kustomize", ["kustomize"], None),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_findings_are_byte_identical_cold_warm_and_after_an_edit(name, tmp_path, monkeypatch):
    source, args, edited = SOURCES[name]
    work = tmp_path / "work"
    shutil.copytree(source, work / args[0], symlinks=True)
    monkeypatch.chdir(work)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    plain = lint_all_formats(work, args, ["--no-cache"], "plain")
    cold = lint_all_formats(work, args, cache, "cold")
    assert bool(entries(tmp_path / "cache")) == (name != "kustomize")  # a build's output: no file of its own
    warm = lint_all_formats(work, args, cache, "warm")
    assert cold == plain
    assert warm == plain
    if edited is None:  # the first YAML file of the tree that holds an object
        edited = next(str(path.relative_to(work)) for path in sorted((work / args[0]).rglob("*.yaml"))
                      if "kind:" in path.read_text(errors="replace") and "templates" not in path.parts)
    path = work / edited
    path.write_text(path.read_text() + "\n---\n" + OTHER)
    plain_edited = lint_all_formats(work, args, ["--no-cache"], "plain-edited")
    warm_edited = lint_all_formats(work, args, cache, "warm-edited")
    assert warm_edited == plain_edited
    assert plain_edited != plain or name == "charts"


# --- the entries: hostile ones are ignored and written again ---------------------------------


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A small tree of manifests, the current directory, and its run: (findings as text, cache)."""
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "a.yaml").write_text(COLLISION)
    (tmp_path / "k8s" / "b.yaml").write_text(OTHER)
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "cache"

    def run(directory: Path | None = cache):
        report = lint_paths(["k8s"], LintOptions(cache_dir=str(directory) if directory else None, jobs=1))
        return [str(f) for f in report.findings], [str(d) for d in report.diagnostics], report.notes

    return run, cache


def entries(cache: Path) -> list[Path]:
    """The per-file entries: named by their key alone (a chart's render, a Kustomize build and the
    run memo keep theirs beside them, under a prefix: loading/build_cache.py, run_memo.py)."""
    return sorted(path for path in cache.iterdir()
                  if re.fullmatch(r"[0-9a-f]{64}" + re.escape(file_cache.ENTRY_SUFFIX), path.name))


def read_entry(path: Path) -> dict:
    """The entry's header, its body as text under "body"."""
    header, _, body = zlib.decompress(path.read_bytes()).partition(b"\n")
    return {**json.loads(header), "body": body.decode()}


def write_entry(path: Path, entry) -> None:
    if isinstance(entry, dict) and "body" in entry:
        body = entry.pop("body")
        path.write_bytes(zlib.compress(json.dumps(entry).encode() + b"\n" + body.encode()))
    else:
        path.write_bytes(zlib.compress(json.dumps(entry).encode()))


def test_a_warm_run_reads_no_yaml(tree, monkeypatch):
    run, cache = tree
    expected = run(None)
    assert run() == expected
    assert len(entries(cache)) == 2 and (cache / ".gitignore").read_text().endswith("*\n")
    from kubelint_ports.loading.yaml_files import manifests

    def no_reading(*args, **kwargs):
        raise AssertionError("a file was read again")

    monkeypatch.setattr(manifests, "load_bytes", no_reading)
    assert run() == expected


def hostile_cases():
    def truncated(path):
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    def garbage(path):
        path.write_bytes(b"\x00not zlib at all")

    def other_version(path):
        entry = read_entry(path)
        entry["tool"] = "0.0.1+0000000000000000"
        write_entry(path, entry)

    def wrong_hash(path):
        entry = read_entry(path)
        entry["sha256"] = "0" * 64
        write_entry(path, entry)

    def wrong_shape(path):
        write_entry(path, ["a", "list", {"not": "an entry"}])

    def wrong_body(path):
        entry = read_entry(path)
        entry["body"] = json.dumps([[{"o": 10**9}, [], 0, [], None], json.loads(entry["body"])[1]])
        write_entry(path, entry)

    def wrong_records(path):
        entry = read_entry(path)
        entry["records"] = entry["records"][:-1]
        write_entry(path, entry)

    def no_body(path):
        entry = read_entry(path)
        del entry["body"]
        write_entry(path, entry)

    def foreign_type(path):  # a name outside the package: never imported, never called
        entry = read_entry(path)
        entry["types"][0][0] = "os:system"
        write_entry(path, entry)

    def not_a_record(path):  # a class of the package that is no record
        entry = read_entry(path)
        entry["types"][0][0] = "kubelint_ports.loading.file_cache:FileCache"
        write_entry(path, entry)

    def other_fields(path):
        entry = read_entry(path)
        entry["types"][0][1] = entry["types"][0][1][:-1]
        write_entry(path, entry)

    def deep_nesting(path):  # past the parser's recursion limit: ignored, never a crash
        entry = read_entry(path)
        entry["body"] = '[{"t": ' * 100_000 + "[]" + "}]" * 100_000
        write_entry(path, entry)

    def huge(path):  # sparse: over the bound without writing it
        with open(path, "r+b") as handle:
            handle.truncate(file_cache.MAX_ENTRY_BYTES + 1)

    def bomb(path):  # a few KiB that inflate past any real entry
        path.write_bytes(zlib.compress(b" " * (file_cache.MAX_ENTRY_BYTES * 16 + 10), 9))

    return [truncated, garbage, other_version, wrong_hash, wrong_shape, wrong_body, wrong_records, no_body,
            foreign_type, not_a_record, other_fields, deep_nesting, huge, bomb]


@pytest.mark.parametrize("spoil", hostile_cases(), ids=lambda f: f.__name__)
def test_a_hostile_entry_is_ignored_and_written_again(tree, spoil, monkeypatch):
    run, cache = tree
    if spoil.__name__ == "bomb":  # the same bound, smaller: compressing 1 GiB of blanks took 14 s
        monkeypatch.setattr(file_cache, "MAX_ENTRY_BYTES", 2**20)
    expected = run(None)
    run()
    for path in entries(cache):
        spoil(path)
    assert run() == expected
    for path in entries(cache):  # rewritten: valid again
        assert read_entry(path)["format"] == file_cache.FORMAT
    assert run() == expected


def test_every_entry_is_written_whole_new_or_replacing(tree, monkeypatch):
    """Every entry, new or replacing a stale one, is written aside and renamed over its name (a
    reader sees no entry or a whole one); no temporary file is left."""
    run, cache = tree
    renamed: list[str] = []
    real_replace = file_cache.os.replace

    def replace(source, target, *args, **kwargs):
        renamed.append(str(target))
        return real_replace(source, target, *args, **kwargs)

    monkeypatch.setattr(file_cache.os, "replace", replace)
    expected = run(None)
    assert run() == expected
    assert sorted(name for name in renamed if name.endswith(file_cache.ENTRY_SUFFIX)) == \
        sorted(path.name for path in entries(cache))
    renamed.clear()
    for path in entries(cache):
        entry = read_entry(path)
        entry["sha256"] = "0" * 64
        write_entry(path, entry)
    assert run() == expected
    replaced = sorted(name for name in renamed if name.endswith(file_cache.ENTRY_SUFFIX))
    assert replaced == [path.name for path in entries(cache)]
    assert not [path for path in cache.iterdir() if path.name.startswith(".tmp-")]


def test_an_entry_describes_the_bytes_it_was_made_from(tree, tmp_path):
    """The file changed, same size, same name: its entry is not used."""
    run, cache = tree
    run()
    path = tmp_path / "k8s" / "a.yaml"
    path.write_text(COLLISION.replace("31123", "31124"))
    assert run() == run(None)


def test_a_symlinked_cache_directory_is_not_used(tree, tmp_path):
    run, cache = tree
    outside = tmp_path / "outside"
    outside.mkdir()
    cache.symlink_to(outside, target_is_directory=True)
    findings, diagnostics, notes = run()
    assert (findings, diagnostics) == run(None)[:2]
    assert list(outside.iterdir()) == []
    assert any("symlink" in note for note in notes)


def test_a_symlinked_entry_never_leads_outside(tree, tmp_path):
    run, cache = tree
    expected = run(None)
    run()
    outside = tmp_path / "secret"
    outside.write_text("do not touch\n")
    for path in entries(cache):
        path.unlink()
        path.symlink_to(outside)
    assert run() == expected
    assert outside.read_text() == "do not touch\n"
    assert all(not path.is_symlink() for path in entries(cache))


def test_a_read_only_cache_directory_is_noted_not_fatal(tree, monkeypatch):
    run, cache = tree
    expected = run(None)
    cache.mkdir()
    real_open = os.open

    def read_only(path, flags, *args, **kwargs):
        if flags & os.O_CREAT:
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(file_cache.os, "open", read_only)
    findings, diagnostics, notes = run()
    assert (findings, diagnostics) == expected[:2]
    assert any("not writable" in note for note in notes)


def test_two_runs_at_once_never_corrupt_it(tmp_path):
    (tmp_path / "k8s").mkdir()
    for index in range(40):
        (tmp_path / "k8s" / f"m{index}.yaml").write_text(COLLISION.replace("agent", f"agent{index}"))
    command = [sys.executable, "-m", "kubelint_ports", "lint", "k8s", "--format", "json", "--jobs", "1",
               "--cache-dir", str(tmp_path / "cache")]
    plain = subprocess.run([*command[:-2], "--no-cache"], cwd=tmp_path, capture_output=True)
    for _ in range(2):
        runs = [subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for _ in range(4)]
        outputs = [run.communicate() for run in runs]
        assert all(output == (plain.stdout, plain.stderr) for output in outputs)
    assert len(entries(tmp_path / "cache")) == 40
    assert not [path for path in (tmp_path / "cache").iterdir() if path.name.startswith(".tmp-")]
    for path in entries(tmp_path / "cache"):
        assert read_entry(path)["format"] == file_cache.FORMAT


def test_the_cache_is_bounded(tree, monkeypatch):
    run, cache = tree
    monkeypatch.setattr(file_cache, "MAX_ENTRIES", 1)
    run()
    assert len(entries(cache)) <= 1


def test_no_cache_writes_nothing(tree, tmp_path):
    run, cache = tree
    result = runner.invoke(app, ["lint", "k8s", "--no-cache", "--cache-dir", str(cache)])
    assert result.exit_code == 1
    assert not cache.exists()


def test_the_environment_names_the_directory(tree, tmp_path, monkeypatch):
    run, cache = tree
    monkeypatch.setenv(file_cache.CACHE_ENV, str(tmp_path / "from-env"))
    result = runner.invoke(app, ["lint", "k8s"])
    assert result.exit_code == 1
    assert entries(tmp_path / "from-env")


def test_a_repository_config_keeps_its_cache_inside(tmp_path, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(file_cache.CACHE_ENV, raising=False)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "a.yaml").write_text(COLLISION)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".kubelint-ports.yaml").write_text("cache-dir: ../elsewhere\n")
    result = runner.invoke(app, ["lint", "a.yaml"])
    assert result.exit_code == 2 and "outside the repository" in result.stderr
    assert not (tmp_path.parent / "elsewhere").exists()
    (tmp_path / ".kubelint-ports.yaml").write_text("cache-dir: .cache/kp\n")
    result = runner.invoke(app, ["lint", "a.yaml"])
    assert result.exit_code == 1 and entries(tmp_path / ".cache" / "kp")
    (tmp_path / ".kubelint-ports.yaml").write_text("fail-on: error\n")
    result = runner.invoke(app, ["lint", "a.yaml"])
    assert result.exit_code == 1 and not (tmp_path / file_cache.CACHE_DIRECTORY).exists()  # asked for, not assumed


def test_no_cache_by_default_in_ci(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "a.yaml").write_text(COLLISION)
    (tmp_path / ".kubelint-ports.yaml").write_text("cache-dir: planted\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(file_cache.CACHE_ENV, raising=False)
    monkeypatch.setenv("CI", "true")
    assert runner.invoke(app, ["lint", "a.yaml"]).exit_code == 1
    assert not (tmp_path / "planted").exists() and not (tmp_path / file_cache.CACHE_DIRECTORY).exists()


def test_no_cache_outside_a_repository(tmp_path, monkeypatch):
    (tmp_path / "a.yaml").write_text(COLLISION)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(file_cache.CACHE_ENV, raising=False)
    result = runner.invoke(app, ["lint", "a.yaml"])
    assert result.exit_code == 1
    assert not (tmp_path / file_cache.CACHE_DIRECTORY).exists()


# --- the format --------------------------------------------------------------------------------


def test_the_codec_refuses_what_it_does_not_hold():
    with pytest.raises(CodecError):
        Encoder().encode(object())
    with pytest.raises(CodecError):
        Encoder().encode(lambda: None)
    for types in ([["builtins:eval", []]], [["kubelint_ports.loading.file_cache:FileCache", []]],
                  [["kubelint_ports.nothing_here:X", []]], [["kubelint_ports.loading.budgets:Limits", ["x"]]],
                  [["kubelint_ports.loading.budgets:Limits", [["a list"]]]]):
        with pytest.raises(CodecError):
            Decoder(types, [])
    with pytest.raises(CodecError):  # an enum is no record
        Decoder([["kubelint_ports.vocabulary:Severity", []]], [0])
    for body in ('[{"k": 1}, []]', '[{"k": -1}, []]', '[{"k": "0"}, []]'):  # a known value the run has not
        with pytest.raises(CodecError):
            Decoder([], [], known=({},)).loads(body)
    kinds = {("g", "K"): ("spec", "spec.replicas")}  # the run's own object back, never a copy
    encoder = Encoder(known=(kinds,))
    body = dumps_body(encoder, encoder.encode([kinds, dict(kinds)]))
    decoded = Decoder(encoder.types, encoder.records, known=(kinds,)).loads(body)
    assert decoded[0] is kinds and decoded[1] == kinds and decoded[1] is not kinds


def test_the_codec_round_trips_shared_records():
    from kubelint_ports.vocabulary import Location, Severity

    shared = Location("a.yaml", 1, 2)
    value = [shared, shared, (1, "x"), {"k": frozenset({1})}, b"\x00\xff", Severity.ERROR, None, 1.5]
    encoder = Encoder()
    body = dumps_body(encoder, encoder.encode(value))
    decoded = Decoder(json.loads(json.dumps(encoder.types)), list(encoder.records)).loads(body)
    assert decoded == value
    assert decoded[0] is decoded[1]




def test_the_codec_keeps_a_slot_never_set_and_tags_each_kind_the_same_way_every_time():
    """The encoder decides once per kind that it is a record (`_RECORD_KINDS`) and stores plain
    JSON values without a call: a record met again, in a list, a tuple or a dict's value (a record
    as a key cannot be read back: hashed before it is filled), and an enum after a record, are written exactly as a first meeting writes them; a slot
    never set reads back never set, not None."""
    from kubelint_ports.vocabulary import Location, Severity

    partial = object.__new__(Location)
    object.__setattr__(partial, "path", "a.yaml")
    full = Location("b.yaml", 3, 4)
    value = [partial, [full, 1, "s", None, True, 2.5], (full, "t"), {"k": (1, full), 7: [full]}, Severity.WARNING]
    bodies = []
    for _ in range(2):  # the second encoder meets Location as a kind already decided
        encoder = Encoder()
        bodies.append((dumps_body(encoder, encoder.encode(value)), encoder.types, encoder.records))
    assert bodies[0] == bodies[1]
    body, types, records = bodies[1]
    assert [name for name, _ in types] == ["kubelint_ports.vocabulary:Location", "kubelint_ports.vocabulary:Severity"]
    decoded = Decoder(json.loads(json.dumps(types)), list(records)).loads(body)
    assert decoded[0].path == "a.yaml" and not hasattr(decoded[0], "line")
    assert decoded[1:] == value[1:]
    assert decoded[1][0] is decoded[2][0] is decoded[3]["k"][1] is decoded[3][7][0]
# --- the language server's memory (loading/memory_cache.py): a file unchanged by its status is not read ---

STALE_COMMENT = OTHER.replace("name: e\n", "name: e  # kubelint-ports: ignore KP999 -- no such rule\n")


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A workspace (the server's `Workspace`, in this process) of two manifests, a third holding a
    suppression comment; `reads()` counts the files read since the last call, by name."""
    pytest.importorskip("lsprotocol")
    from kubelint_ports.loading import files
    from kubelint_ports.server.workspace import Workspace

    root = tmp_path / "ws"
    root.mkdir()
    (root / "collision.yaml").write_text(COLLISION)
    (root / "other.yaml").write_text(OTHER)
    (root / "commented.yaml").write_text(STALE_COMMENT)
    monkeypatch.chdir(root)
    monkeypatch.setattr(file_cache, "RACY_SECONDS", 0)  # the files were written just now
    counted: dict[str, int] = {}
    real_read = files.read_file

    def counting(path, *args, **kwargs):
        name = os.path.basename(path)
        counted[name] = counted.get(name, 0) + 1
        return real_read(path, *args, **kwargs)

    monkeypatch.setattr(files, "read_file", counting)

    def reads() -> dict[str, int]:
        found = dict(counted)
        counted.clear()
        return found

    return root, Workspace(str(root)), reads


def shown(report) -> list[tuple]:
    return sorted((f.rule_id, f.location.path, f.location.line, f.message, bool(f.suppressed)) for f in report.findings)


def test_the_server_reads_again_only_files_whose_status_changed(served):
    root, workspace, reads = served
    cold = shown(workspace.lint())
    assert reads().keys() >= {"collision.yaml", "other.yaml", "commented.yaml"}
    assert any(rule == "KP005" for rule, *_ in cold)  # the comment naming no rule
    warm = shown(workspace.lint())
    assert warm == cold
    read = reads()
    assert "collision.yaml" not in read and "other.yaml" not in read  # neither loaded nor scanned for comments
    assert read.get("commented.yaml", 0) <= 2  # the comment scan and its KP005 finding's line, not the loader
    assert workspace.cache.unread_count == 3

    # Rewritten with the same size and a new modification time: read again, its findings new.
    other = root / "other.yaml"
    before = other.stat()
    other.write_text(OTHER.replace("31123", "31124"))
    os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    assert other.stat().st_size == before.st_size
    edited = shown(workspace.lint())
    assert reads().get("other.yaml") == 1
    assert edited != cold
    import dataclasses

    from kubelint_ports.engine import lint_paths

    # As `lint` with the same options, the editor's open files (none) among them: the rules that
    # read one object at a time look at shown files only (tests/test_shown_files.py).
    options = dataclasses.replace(workspace.settings.options, shown=workspace.shown())
    assert edited == shown(lint_paths(workspace.settings.paths, options, policies=workspace.settings.policies))


def test_an_open_editor_text_is_always_read_whatever_the_file_status(served):
    root, workspace, reads = served
    cold = shown(workspace.lint())
    workspace.set_text(str(root / "other.yaml"), OTHER.replace("31123", "31124"))
    opened = shown(workspace.lint())
    assert opened != cold and not any(path == "other.yaml" and line == 11 and rule == "KP201"
                                      for rule, path, line, *_ in opened)
    workspace.set_text(str(root / "other.yaml"), None)  # closed: the file counts again
    reads()
    assert shown(workspace.lint()) == cold
    assert reads().get("other.yaml") == 1


def test_a_file_changed_moments_ago_is_read_on_every_run(served, monkeypatch):
    root, workspace, reads = served
    monkeypatch.setattr(file_cache, "RACY_SECONDS", 3600)  # every file is recent
    workspace.lint()
    reads()
    workspace.lint()
    read = reads()
    assert read.get("collision.yaml") == 1 and read.get("other.yaml") == 1
    assert workspace.cache.unread_count == 0
