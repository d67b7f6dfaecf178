"""The disk cache vouches for an unchanged file by its status, as ruff's cache and git's index do
(loading/file_cache.py `unread`, docs/cache.md): a file whose device, inode, size and
modification and change times are those its entry's bytes were read with is not read at all, nor
scanned for suppression comments unless those bytes held the mark. Any change to the file's
status (a write, even one that restores size and modification time; a touch) reads it again,
and the hash decides; a file changed moments ago is always read; an entry whose status fields
are not what this format writes is not trusted by status."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.loading import file_cache, files
from test_cache import COLLISION, OTHER, entries, lint_all_formats, read_entry, write_entry

ROOT = Path(__file__).resolve().parents[1]
COMMENTED = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: apps}
spec:
  containers:
    - name: web
      ports:
        - containerPort: 8080
          hostPort: 8080  # kubelint-ports: ignore KP101 -- the node's only web server
"""
QUIET = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: apps}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
        - name: api
          ports: [{containerPort: 8443}]
"""


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """Four manifests (one with a suppression comment, one without findings), the current directory; files count as
    settled at once (RACY_SECONDS 0; the real two seconds: `test_a_file_changed_moments_ago...`).
    `run()` lints with the cache; `reads()` counts the files read since its last call, by name."""
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "a.yaml").write_text(COLLISION)
    (tmp_path / "k8s" / "b.yaml").write_text(OTHER)
    (tmp_path / "k8s" / "c.yaml").write_text(COMMENTED)
    (tmp_path / "k8s" / "quiet.yaml").write_text(QUIET)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(file_cache, "RACY_SECONDS", 0)
    counted: dict[str, int] = {}
    real_read = files.read_file

    def counting(path, *args, **kwargs):
        counted[os.path.basename(path)] = counted.get(os.path.basename(path), 0) + 1
        return real_read(path, *args, **kwargs)

    monkeypatch.setattr(files, "read_file", counting)

    def run(cache: bool = True) -> list[str]:
        options = LintOptions(cache_dir=str(tmp_path / "cache") if cache else None, jobs=1)
        report = lint_paths(["k8s"], options)
        return [str(f) for f in report.findings] + [str(d) for d in report.diagnostics]

    def reads() -> dict[str, int]:
        found = dict(counted)
        counted.clear()
        return found

    return tmp_path, run, reads


def test_an_unchanged_file_is_not_read_and_only_a_marked_one_is_scanned_for_comments(tree):
    root, run, reads = tree
    plain = run(cache=False)
    assert any("KP201" in line for line in plain)
    assert any("c.yaml" in line and "'KP101'" in line and "inSource" in line for line in plain)  # silenced
    reads()
    assert run() == plain  # cold: every file read, its entry written with its status
    assert reads() == {"a.yaml": 1, "b.yaml": 1, "c.yaml": 2, "quiet.yaml": 1}  # loading; the comment scan: c
    assert all(read_entry(path)["status"] and isinstance(read_entry(path)["marked"], bool)
               for path in entries(root / "cache"))
    assert run() == plain
    assert reads() == {"c.yaml": 1}  # none loaded; the comment scan reads c.yaml, whose bytes hold the mark


def test_a_write_that_keeps_size_and_modification_time_is_read_again(tree):
    root, run, reads = tree
    run()
    other = root / "k8s" / "b.yaml"
    before = other.stat()
    other.write_text(OTHER.replace("31123", "31124"))  # same size: its change time and the hash tell
    os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (other.stat().st_size, other.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    reads()
    edited = run()
    assert reads() == {"b.yaml": 1, "c.yaml": 1}  # b.yaml loaded again
    assert edited == run(cache=False) and not any("b.yaml" in line and "31123" in line for line in edited)


def test_a_touched_file_is_read_once_then_vouched_for_by_its_new_status(tree):
    root, run, reads = tree
    expected = run()
    os.utime(root / "k8s" / "quiet.yaml")
    reads()
    assert run() == expected
    assert reads().get("quiet.yaml") == 1  # the hash held: the entry now records the new status
    assert run() == expected
    assert "quiet.yaml" not in reads()


def test_a_file_changed_moments_ago_is_read_on_every_run(tree, monkeypatch):
    root, run, reads = tree
    monkeypatch.setattr(file_cache, "RACY_SECONDS", 3600)  # every file is recent
    expected = run()
    reads()
    assert run() == expected
    assert reads().get("quiet.yaml") == 1


def _status_spoiled(entry: dict) -> None:
    entry["status"] = [str(value) for value in entry["status"]]


def _mark_spoiled(entry: dict) -> None:
    entry["marked"] = 0


def _body_spoiled(entry: dict) -> None:
    entry["body"] = '["not", "the shape"]'


def _hash_spoiled(entry: dict) -> None:  # the status holds: the entry is used, its hash is not asked
    entry["sha256"] = 7


@pytest.mark.parametrize("spoil", [_status_spoiled, _mark_spoiled, _body_spoiled, _hash_spoiled])
def test_an_entry_whose_status_fields_are_not_ours_is_not_trusted_by_status(tree, spoil):
    root, run, reads = tree
    expected = run()
    for path in entries(root / "cache"):
        entry = read_entry(path)
        spoil(entry)
        write_entry(path, entry)
    reads()
    assert run() == expected
    assert reads().get("quiet.yaml") == 1  # read, and the entries written again
    assert run() == expected
    assert "quiet.yaml" not in reads()


def test_a_file_named_directly_is_read_whatever_its_status(tree, monkeypatch):
    """Only a walk vouches that a path is a regular file and no symlink (`walked`)."""
    root, run, reads = tree
    options = LintOptions(cache_dir=str(root / "cache"), jobs=1)
    first = lint_paths(["k8s/quiet.yaml"], options).findings
    reads()
    assert lint_paths(["k8s/quiet.yaml"], options).findings == first
    assert reads().get("quiet.yaml") == 1


def test_every_format_is_byte_identical_when_files_are_vouched_for_by_status(tmp_path, monkeypatch):
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples", work / "examples", symlinks=True)
    monkeypatch.chdir(work)
    monkeypatch.setattr(file_cache, "RACY_SECONDS", 0)
    args = ["examples", "--nodes", "examples/inventory/nodes.yaml"]
    cache = ["--cache-dir", str(tmp_path / "cache")]
    plain = lint_all_formats(work, args, ["--no-cache"], "plain")
    assert lint_all_formats(work, args, cache, "cold") == plain
    assert lint_all_formats(work, args, cache, "warm") == plain
    edited = work / "examples" / "services.yaml"
    edited.write_text(edited.read_text() + "\n---\n" + OTHER)
    plain_edited = lint_all_formats(work, args, ["--no-cache"], "plain-edited")
    assert lint_all_formats(work, args, cache, "warm-edited") == plain_edited != plain
