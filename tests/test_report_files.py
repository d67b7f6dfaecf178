"""Report files (`-o`, `--report`, `ports -o`) and baselines are written whole or not at all
(kubelint_ports/report_files.py): a full disk or a failing formatter leaves the old file and no
temporary one; a device, a FIFO or a symlink is written through as before."""

from __future__ import annotations

import os
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kubelint_ports.report_files import ReportFile

ROOT = Path(__file__).resolve().parents[1]


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.startswith(".kubelint-ports-")]


def test_a_report_that_fails_midway_leaves_the_old_one(tmp_path):
    report = tmp_path / "report.json"
    report.write_text("old report\n")
    with pytest.raises(RuntimeError):
        with ReportFile(report) as stream:
            stream.write("half of a new")
            raise RuntimeError("a formatter's bug")
    assert report.read_text() == "old report\n" and leftovers(tmp_path) == []
    with ReportFile(report) as stream:
        stream.write("new report\n")
    assert report.read_text() == "new report\n" and leftovers(tmp_path) == []


def test_modes_new_and_kept(tmp_path):
    umask = os.umask(0o022)
    try:
        with ReportFile(tmp_path / "new.txt") as stream:
            stream.write("x")
        assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o644
        kept = tmp_path / "kept.txt"
        kept.write_text("old")
        kept.chmod(0o600)
        with ReportFile(kept) as stream:
            stream.write("y")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and kept.read_text() == "y"
    finally:
        os.umask(umask)


def test_a_symlink_and_a_fifo_are_written_through(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("")
    (tmp_path / "link.txt").symlink_to(target)
    with ReportFile(tmp_path / "link.txt") as stream:
        stream.write("through")
    assert (tmp_path / "link.txt").is_symlink() and target.read_text() == "through"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    with ReportFile(fifo) as stream:
        stream.write("to a reader\n")
    assert reader.communicate(timeout=30)[0] == b"to a reader\n" and stat.S_ISFIFO(fifo.stat().st_mode)


def limited_to_one_block():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))


@pytest.mark.parametrize("args", [("--format", "json", "-o", "report.json"),
                                  ("--report", "sarif:report.json"),
                                  ("--write-baseline", "report.json")])
def test_a_full_disk_leaves_the_old_report_or_baseline_whole(tmp_path, args):
    (tmp_path / "report.json").write_text('{"old": true}\n')
    done = subprocess.run([sys.executable, "-m", "kubelint_ports", "lint", str(ROOT / "examples"), "--no-cache",
                           *args], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          preexec_fn=limited_to_one_block)
    assert done.returncode != 0 and ("File too large" in done.stderr or "EFBIG" in done.stderr
                                     or "errno 27" in done.stderr.lower()), done.stderr[-2000:]
    assert (tmp_path / "report.json").read_text() == '{"old": true}\n' and leftovers(tmp_path) == []
