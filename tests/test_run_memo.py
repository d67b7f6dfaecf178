"""The run memo (issue 37, docs/cache.md "A run with nothing changed"): a `lint` whose inputs are
all as they were replays what it printed, wrote and exited with; any change to anything the run
read, listed or looked for makes it lint again; a run that cannot vouch for its inputs keeps no
memo; a planted memo is ignored and never writes outside the files the command line names."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from kubelint_ports import cli, engine, run_memo
from kubelint_ports.loading.read_log import ReadLog
from test_cache import COLLISION, OTHER  # the Pod whose hostPort is the Service's nodePort; a DaemonSet
from test_cache_status import QUIET  # a Deployment without findings

ROOT = Path(__file__).resolve().parents[1]
FORMATS = ("text", "json", "sarif", "github", "markdown", "junit", "gitlab")
NEIGHBOUR = OTHER.replace("31123", "9100")  # a DaemonSet holding hostPort 9100


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A small repository, the working directory; inputs count as settled at once (SETTLED_NS 0:
    the real two seconds are tested once, in a fresh process, below)."""
    root = tmp_path / "repo"
    (root / "apps" / "mon").mkdir(parents=True)
    (root / "apps" / "ops.yaml").write_text(COLLISION)
    (root / "apps" / "mon" / "exporter.yaml").write_text(NEIGHBOUR)
    (root / ".git").mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setattr(run_memo, "SETTLED_NS", 0)
    for name in list(os.environ):
        if name.startswith("KUBELINT_PORTS_") or name in ("CI", "NO_COLOR", "FORCE_COLOR"):
            monkeypatch.delenv(name)
    return root


class Runs:
    """`kubelint-ports ARGS` run as the console script runs it (`cli.main`), in this process:
    exit code, standard output and error, and whether the engine linted (False: replayed)."""

    def __init__(self, monkeypatch, capsys):
        self.monkeypatch, self.capsys = monkeypatch, capsys
        self.linted = 0
        real = engine.lint_paths

        def counting(*args, **kwargs):
            self.linted += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(engine, "lint_paths", counting)

    def __call__(self, *args: str) -> tuple[int, str, str, bool]:
        before = self.linted
        self.monkeypatch.setattr(sys, "argv", ["kubelint-ports", *args])
        with pytest.raises(SystemExit) as exit_:
            cli.main()
        out, err = self.capsys.readouterr()
        return exit_.value.code, out, err, self.linted > before


@pytest.fixture
def runs(monkeypatch, capsys, tree):
    return Runs(monkeypatch, capsys)


LINT = ("lint", "apps", "--cache-dir", ".cache")


def records(root: Path) -> list[Path]:
    return sorted((root / ".cache").glob(f"{run_memo.PREFIX}*"))


def test_nothing_changed_replays_what_the_run_printed_and_wrote(tree, runs):
    first = runs(*LINT, "--report", "sarif:out.sarif")
    assert first[3] and first[0] == 1 and "KP" in first[1]
    written = (tree / "out.sarif").read_bytes()
    assert len(records(tree)) == 1
    second = runs(*LINT, "--report", "sarif:out.sarif")
    assert not second[3], "nothing changed: the memo is replayed, nothing linted"
    assert second[:3] == first[:3]
    assert (tree / "out.sarif").read_bytes() == written


@pytest.mark.parametrize("change", ["deleted", "edited"])
def test_a_report_file_no_longer_holding_its_report_is_written_again(tree, runs, change):
    first = runs(*LINT, "--format", "json", "-o", "out.json")
    written = (tree / "out.json").read_bytes()
    if change == "deleted":
        (tree / "out.json").unlink()
    else:
        (tree / "out.json").write_bytes(written.replace(b"KP", b"XX"))
    again = runs(*LINT, "--format", "json", "-o", "out.json")
    assert again[3] and again[:3] == first[:3] and (tree / "out.json").read_bytes() == written


@pytest.mark.parametrize("output_format", FORMATS)
def test_a_replay_is_byte_for_byte_the_run_in_every_format(tree, runs, output_format):
    args = (*LINT, "--format", output_format, "-o", "report.out")
    first = runs(*args)
    report = (tree / "report.out").read_bytes()
    second = runs(*args)
    assert not second[3]
    assert second[:3] == first[:3] and (tree / "report.out").read_bytes() == report
    plain = runs("lint", "apps", "--no-cache", "--format", output_format, "-o", "plain.out")
    assert plain[3] and (tree / "plain.out").read_bytes() == report


def edit_keeping_size_and_times(path: Path) -> None:
    """New bytes of the same length, the modification time put back: only the inode's change
    time (which no user call sets) and the bytes say it changed."""
    status = path.stat()
    text = path.read_text()
    path.write_text(text.replace("31123", "31124"))
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


CHANGES = {
    "a file's bytes, same size and mtime": lambda root: edit_keeping_size_and_times(root / "apps" / "ops.yaml"),
    "a file appended": lambda root: (root / "apps" / "ops.yaml").write_text(COLLISION + "---\n" + NEIGHBOUR),
    "a new file in a walked directory": lambda root: (root / "apps" / "mon" / "b.yaml").write_text(
        NEIGHBOUR.replace("exporter", "other")),
    "a file removed": lambda root: (root / "apps" / "mon" / "exporter.yaml").unlink(),
    "a configuration file created": lambda root: (root / ".kubelint-ports.yaml").write_text(
        "rules:\n  KP201: off\n"),
    "a configuration file created above the repository": lambda root: (root.parent / ".kubelint-ports.yaml")
    .write_text("rules:\n  KP201: off\n"),
    "a new directory": lambda root: (root / "apps" / "more").mkdir(),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_any_change_to_what_the_run_read_lints_again(tree, runs, change):
    runs(*LINT)
    assert not runs(*LINT)[3]
    CHANGES[change](tree)
    again = runs(*LINT)
    assert again[3], f"{change}: linted again"
    assert again[:2] == runs("lint", "apps", "--no-cache")[:2]


def test_a_file_the_cache_vouched_for_by_its_status_is_an_input(tree, runs, monkeypatch):
    """The file cache does not even open a file whose status is its entry's (file_cache.unread):
    the run memo, which sees the files a run opens, is told of it, so editing it lints again."""
    from kubelint_ports.loading import file_cache, files

    monkeypatch.setattr(file_cache, "RACY_SECONDS", 0)
    quiet = tree / "apps" / "quiet.yaml"  # no findings: nothing else opens it (a finding's place might)
    quiet.write_text(QUIET)
    runs(*LINT)
    (tree / "apps" / "ops.yaml").write_text(COLLISION + "---\n" + NEIGHBOUR.replace("9100", "9200"))
    opened: list[str] = []
    real_read = files.read_file
    monkeypatch.setattr(files, "read_file", lambda path, *a, **k: opened.append(os.path.basename(path))
                        or real_read(path, *a, **k))
    edited = runs(*LINT)
    assert edited[3] and "quiet.yaml" not in opened  # vouched for by its status: not opened
    assert not runs(*LINT)[3]  # that run's memo holds
    quiet.write_text(QUIET.replace("containerPort: 8443", "containerPort: 8443, hostPort: 31123"))
    again = runs(*LINT)
    assert again[3], "an input the cache vouched for, never opened, changed: linted again"
    assert again[:2] == runs("lint", "apps", "--no-cache")[:2] and "quiet.yaml" in again[1]


@pytest.mark.parametrize("same_status", [True, False])
def test_the_memo_takes_the_file_cache_digest_only_for_the_status_it_was_taken_with(tree, runs, monkeypatch,
                                                                                    same_status):
    """The file cache tells the memo the SHA-256 of the bytes it read (or its entry vouched for)
    with the file's status then; the memo records it without reading the file again only while
    the file's status is that one. A false digest told with another status is not recorded."""
    import hashlib

    from kubelint_ports.loading import file_cache, read_log

    monkeypatch.setattr(file_cache, "RACY_SECONDS", 0)
    real = read_log.bytes_known

    def told(path, status, digest):
        if path.endswith("exporter.yaml"):
            status = status if same_status else (*status[:4], status[4] + 1)
            digest = "0" * 64
        real(path, status, digest)

    monkeypatch.setattr(read_log, "bytes_known", told)
    runs(*LINT)
    exporter = str(tree / "apps" / "mon" / "exporter.yaml")
    record = json.loads(zlib.decompress(records(tree)[0].read_bytes()))
    digest = {path: digest for path, _, digest in record["files"]}[exporter]
    real_digest = hashlib.sha256(Path(exporter).read_bytes()).hexdigest()
    assert digest == ("0" * 64 if same_status else real_digest)


def test_a_touched_file_with_the_same_bytes_still_replays(tree, runs):
    runs(*LINT)
    path = tree / "apps" / "ops.yaml"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert not runs(*LINT)[3], "same bytes (its SHA-256): the memo holds"


def test_node_inventory_and_config_files_are_inputs(tree, runs):
    inventory = tree / "nodes.yaml"
    inventory.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
    runs(*LINT, "--nodes", "nodes.yaml")
    assert not runs(*LINT, "--nodes", "nodes.yaml")[3]
    inventory.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n2}\n")
    assert runs(*LINT, "--nodes", "nodes.yaml")[3]


def test_the_command_line_and_environment_are_the_key(tree, runs, monkeypatch):
    runs(*LINT)
    assert runs(*LINT, "--select", "KP201")[3]
    assert not runs(*LINT)[3]
    monkeypatch.setenv("NO_COLOR", "1")
    assert runs(*LINT)[3]
    monkeypatch.setenv("KUBELINT_PORTS_CACHE_DIR", ".cache")
    assert runs("lint", "apps")[3] and not runs("lint", "apps")[3], "the environment's cache directory replays"


def test_the_configuration_cache_dir_replays_after_reading_the_settings(tree, runs):
    (tree / ".kubelint-ports.yaml").write_text("cache-dir: .cache\npaths: [apps]\n")
    first = runs("lint")
    second = runs("lint")
    assert first[3] and not second[3] and second[:3] == first[:3]


@pytest.mark.parametrize("extra", [("--fix",), ("--diff",), ("--write-baseline", "base.json"), ("-",)])
def test_runs_that_write_or_read_standard_input_keep_no_memo(tree, runs, extra, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(COLLISION.encode())))
    args = ("lint", "-", "--cache-dir", ".cache") if extra == ("-",) else (*LINT, *extra)
    runs(*args)
    assert records(tree) == []


def test_no_memo_without_a_cache_or_from_python(tree, runs, monkeypatch):
    runs("lint", "apps", "--no-cache")
    monkeypatch.setenv("CI", "true")
    runs("lint", "apps")
    assert not (tree / ".cache").exists()
    monkeypatch.delenv("CI")
    from typer.testing import CliRunner

    CliRunner().invoke(cli.app, list(LINT))  # called from Python: no command line of its own
    assert records(tree) == []


def test_inputs_too_recent_for_their_times_keep_no_memo(tree, runs, monkeypatch):
    monkeypatch.setattr(run_memo, "SETTLED_NS", 3600 * 10**9)  # every input changed within the hour
    runs(*LINT)
    assert records(tree) == []


def recorder_with(tree: Path, **changes) -> run_memo.Recorder:
    recorder = run_memo.Recorder(["lint", "apps"])
    recorder.directory, recorder.key = str(tree / ".cache"), "k"
    recorder.opened[str(tree / "apps" / "ops.yaml")] = run_memo.signature(str(tree / "apps" / "ops.yaml"))
    for name, value in changes.items():
        setattr(recorder, name, value)
    return recorder


def test_a_child_program_or_a_file_changed_during_the_run_keeps_no_memo(tree):
    assert run_memo.make_record(recorder_with(tree), 0) is not None
    log = ReadLog()
    log.children.append("helm")
    assert run_memo.make_record(recorder_with(tree, log=log), 0) is None
    changed = recorder_with(tree)
    (tree / "apps" / "ops.yaml").write_text(COLLISION + "\n")
    assert run_memo.make_record(changed, 0) is None
    assert run_memo.make_record(recorder_with(tree, unsure=True), 0) is None


def test_files_read_by_worker_processes_are_inputs(tree):
    from kubelint_ports.loading import read_log

    log = ReadLog()

    with read_log.logged(log):
        read_log.read_elsewhere(["apps/mon/exporter.yaml"])
    record = run_memo.make_record(recorder_with(tree, log=log), 0)
    assert str(tree / "apps" / "mon" / "exporter.yaml") in [path for path, _, _ in record["files"]]


def plant(tree: Path, record: dict | bytes) -> Path:
    name = records(tree)[0].name
    data = record if isinstance(record, bytes) else zlib.compress(json.dumps(record).encode())
    path = tree / ".cache" / name
    path.unlink()
    path.write_bytes(data)
    return path


def stored(tree: Path) -> dict:
    return json.loads(zlib.decompress(records(tree)[0].read_bytes()))


HOSTILE = {
    "not zlib": lambda record: b"{}",
    "zlib of garbage": lambda record: zlib.compress(b"\xff" * 100),
    "not an object": lambda record: zlib.compress(b"[1, 2]"),
    "another format": lambda record: {**record, "format": "kubelint-ports-run/0"},
    "files of the wrong shape": lambda record: {**record, "files": [["a", 1]]},
    "a file's size a string": lambda record: {**record, "files": [[p, [s[0], "1", *s[2:]], h]
                                                                    for p, s, h in record["files"]]},
    "printed to a third stream": lambda record: {**record, "printed": [[3, "x"]]},
    "exit code a string": lambda record: {**record, "code": "0"},
    "a report file the command line does not name": lambda record: {
        **record, "written": [["../escaped.txt", 5, "0" * 64]]},
    "deeply nested": lambda record: zlib.compress(b"[" * 100000 + b"]" * 100000),
    "an inflating bomb": lambda record: zlib.compress(b" " * (2**20 * 4 + 10), 9),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_planted_or_broken_memo_is_ignored(tree, runs, kind, monkeypatch):
    monkeypatch.setattr(run_memo, "MAX_RECORD_BYTES", 2**20)  # the same bound, cheaper to plant a bomb past
    first = runs(*LINT)
    plant(tree, HOSTILE[kind](stored(tree)))
    again = runs(*LINT)
    assert again[3] and again[:3] == first[:3]
    assert not (tree.parent / "escaped.txt").exists()


def test_a_symlinked_memo_is_not_followed(tree, runs, tmp_path):
    first = runs(*LINT)
    path = records(tree)[0]
    outside = tmp_path / "outside.json.z"
    outside.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(outside)
    assert runs(*LINT)[3]


def test_every_environment_variable_the_package_reads_is_in_the_key():
    read = set()
    for path in (ROOT / "kubelint_ports").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        read |= set(re.findall(r"environ(?:\.get)?\(\s*\"([A-Z_]+)\"", text))
        read |= set(re.findall(r"environ\[\s*\"([A-Z_]+)\"\s*\]", text))
        read |= set(re.findall(r"getenv\(\s*\"([A-Z_]+)\"", text))
    read.discard("KUBELINT_PORTS_CACHE_DIR")  # its own: the key holds the prefix
    missing = {name for name in read if name not in run_memo.ENVIRONMENT
               and not name.startswith(run_memo.ENVIRONMENT_PREFIXES)}
    assert read and not missing, f"read by the package, not in the run memo's key: {sorted(missing)}"


@pytest.mark.slow
def test_a_fresh_process_replays_after_the_inputs_settle(tmp_path):
    """The console script, its real two seconds: a run right after the files (and the cache
    directory) appear keeps no memo; once they are seconds old one does, and the next run
    replays it without linting (the memo is not written again)."""
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "examples", root)
    command = [sys.executable, "-m", "kubelint_ports", "lint", ".", "--cache-dir", ".cache", "--format", "json"]
    environment = {name: value for name, value in os.environ.items() if name != "CI"}
    results = [subprocess.run(command, cwd=root, capture_output=True, env=environment, timeout=120)]
    assert records(root) == []
    time.sleep(run_memo.SETTLED_NS / 1e9 + 0.2)
    results.append(subprocess.run(command, cwd=root, capture_output=True, env=environment, timeout=120))
    memo = records(root)
    assert len(memo) == 1
    inode = memo[0].stat().st_ino
    results.append(subprocess.run(command, cwd=root, capture_output=True, env=environment, timeout=120))
    assert len({(r.returncode, r.stdout, r.stderr) for r in results}) == 1
    assert records(root)[0].stat().st_ino == inode, "replayed: the memo was not written again"


def test_a_symlinked_report_keeps_no_memo_and_a_missing_report_directory_is_said(tree, runs, tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text("")
    (tree / "linked.json").symlink_to(target)
    runs(*LINT, "--format", "json", "-o", "linked.json")
    assert records(tree) == [] and target.read_text().startswith("{")
    (tree / "out").mkdir()
    runs(*LINT, "--format", "json", "-o", "out/report.json")
    assert len(records(tree)) == 1
    shutil.rmtree(tree / "out")  # the report's directory gone: no replay, the run says why
    code, _, err, _ = runs(*LINT, "--format", "json", "-o", "out/report.json")
    assert code == 2 and "cannot write out/report.json" in err, "the run says why, as without a memo"
