"""Worker processes and threads (loading/pool.py). A fork copies only the forking thread: a lock
another thread held then stays held in the worker, and a worker closes standard input, whose
buffer's lock a thread blocked reading it holds (the language server reads its input so). So a
process running other threads forks no workers, unless it allows a fork server (the language
server does: `allow_fork_server`), whose workers are forked from a process with one thread. The
language server's memory adopts what its workers read, file by file, so its next run reads none
of those files again."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A process whose standard input is a pipe another thread is blocked reading (the language
# server's shape), linting the examples with two workers (their input treated as large).
THREADED = """\
import io, os, sys, threading, time
from kubelint_ports.loading import pool
from kubelint_ports.engine import LintOptions, lint_paths


def main():
    read_end, write_end = os.pipe()
    sys.stdin = io.TextIOWrapper(os.fdopen(read_end, "rb"))
    reading = threading.Thread(target=lambda: sys.stdin.buffer.read(1), daemon=True)
    reading.start()
    time.sleep(0.2)  # the thread now holds the buffer's lock
    if sys.argv[1] == "allowed":
        pool.allow_fork_server()
    pool.POOL_MIN_BYTES, pool.MIN_BATCH_BYTES = 0, 1
    nodes = ("examples/inventory/nodes.yaml",)
    report = lint_paths(["examples"], LintOptions(node_files=nodes, jobs=2, say_workers=True))
    alone = lint_paths(["examples"], LintOptions(node_files=nodes, jobs=1))
    print(next(note for note in report.notes if note.startswith("input read")))
    print(report.findings == alone.findings and bool(report.findings))
    os.write(write_end, b"x")  # the reading thread lets go of standard input before the end
    reading.join()


if __name__ == "__main__":  # a worker started from a fork server imports this module
    main()
"""


@pytest.mark.parametrize("mode", ["allowed", "not allowed"])
def test_a_process_running_threads_never_forks_its_workers(mode, tmp_path):
    script = tmp_path / "threaded.py"
    script.write_text(THREADED)
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script), mode], cwd=ROOT, env=environment, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    note, same = done.stdout.splitlines()[-2:]
    assert same == "True"
    if mode == "allowed":
        assert note == "input read by 2 worker processes (--jobs 2)"  # from the fork server
    else:
        assert note == "input read in this process (this process runs other threads: it forks no workers)"


# A process with one thread whose run has two large inputs (the node inventory, the manifests):
# the pool the first starts runs a thread of its own, which must not keep the second from it.
TWO_LOADS = """\
from kubelint_ports.loading import pool
from kubelint_ports.engine import LintOptions, lint_paths


def main():
    pool.POOL_MIN_BYTES, pool.MIN_BATCH_BYTES = 0, 1
    batched = []
    real = pool.Workers.batches
    pool.Workers.batches = lambda self, *args: batched.append(len(real(self, *args))) or real(self, *args)
    lint_paths(["examples"], LintOptions(node_files=("examples/inventory/nodes.yaml",), jobs=2))
    print(batched)


if __name__ == "__main__":
    main()
"""


def test_every_large_input_of_a_run_is_read_by_the_pool_its_first_started(tmp_path):
    script = tmp_path / "two_loads.py"
    script.write_text(TWO_LOADS)
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    batched = eval(done.stdout.splitlines()[-1])  # noqa: S307 (a list of ints this test's script printed)
    assert len(batched) >= 2 and all(count > 0 for count in batched), batched


def test_the_fork_start_is_kept_for_a_process_with_one_thread(monkeypatch):
    from kubelint_ports.loading import pool

    monkeypatch.setattr(pool, "threads_forbid_fork", lambda: False)
    assert pool._context().get_start_method() == "fork"
    monkeypatch.setattr(pool, "threads_forbid_fork", lambda: True)
    assert pool._context().get_start_method() == "forkserver"


def test_the_language_server_keeps_what_its_workers_read_file_by_file(tmp_path, monkeypatch):
    pytest.importorskip("lsprotocol")
    from kubelint_ports.engine import lint_paths
    from kubelint_ports.loading import file_cache, pool
    from kubelint_ports.loading.memory_cache import MemoryCache
    from kubelint_ports.server.workspace import Workspace
    from test_cache import COLLISION, OTHER
    from test_cache_status import QUIET

    root = tmp_path / "ws"
    (root / "k8s").mkdir(parents=True)
    for index, text in enumerate((COLLISION, OTHER, QUIET) * 4):
        (root / "k8s" / f"{index:02}.yaml").write_text(text.replace("name: ", f"name: n{index}-"))
    monkeypatch.chdir(root)
    monkeypatch.setattr(file_cache, "RACY_SECONDS", 0)
    monkeypatch.setattr(pool, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "MIN_BATCH_BYTES", 1)
    monkeypatch.setattr(pool, "default_jobs", lambda: 2)
    monkeypatch.setattr(pool.Workers, "workers_wanted", lambda self: 2)
    monkeypatch.setattr(pool, "_FORK_SERVER", [True])  # as the server command allows
    adopted: list[int] = []
    real_adopt = MemoryCache.adopt
    monkeypatch.setattr(MemoryCache, "adopt", lambda self, entries, *rest: adopted.append(len(entries))
                        or real_adopt(self, entries, *rest))

    workspace = Workspace(str(root))
    first = workspace.lint()
    assert sum(adopted) == 12 and len(adopted) > 1  # every file, read by workers, batch by batch

    def plain() -> list[str]:  # as `lint --jobs 1` with the server's options (shown files: none open)
        options = dataclasses.replace(workspace.settings.options, jobs=1, shown=workspace.shown())
        return [str(f) for f in lint_paths(workspace.settings.paths, options, policies=workspace.settings.policies)
                .findings]

    assert [str(f) for f in first.findings] == plain() and first.findings
    second = workspace.lint()
    assert workspace.cache.unread_count == 12 and sum(adopted) == 12  # none read again, nor sent to workers
    assert second.findings == first.findings
    edited = root / "k8s" / "01.yaml"
    edited.write_text(edited.read_text().replace("31123", "31200"))
    third = workspace.lint()
    assert workspace.cache.unread_count == 11
    assert [str(f) for f in third.findings] == plain()
    assert third.findings != first.findings
