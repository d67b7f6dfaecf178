"""Report files (`lint -o`, `--report FORMAT:FILE`, `ports -o`), written whole or not at all.

A report goes to a temporary file beside its path and is renamed over it once written: a full
disk, a bug in a formatter or Ctrl-C leaves the old report (or none), never half of a new one.
What is not a regular file is written as it is (`-o /dev/stdout`, a FIFO a CI step reads), and
so is a symlink (written through, as before: renaming would replace the link). A new file gets
the mode `open()` gives (0666 less the umask); a replaced one keeps its own."""

from __future__ import annotations

import os
import stat
import tempfile


class ReportFile:
    """A text stream for a report: `close()` puts it in place, `discard()` drops it."""

    def __init__(self, path) -> None:
        self.path = os.fspath(path)
        self.temporary: str | None = None
        try:
            status = os.lstat(self.path)
        except FileNotFoundError:
            status = None
        if status is not None and not stat.S_ISREG(status.st_mode):  # a device, a FIFO, a symlink
            self.stream = open(self.path, "w", encoding="utf-8", newline="\n")
            return
        directory = os.path.dirname(os.path.abspath(self.path))
        handle, self.temporary = tempfile.mkstemp(prefix=".kubelint-ports-report-", dir=directory)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self.temporary, stat.S_IMODE(status.st_mode) if status is not None else 0o666 & ~umask)
        self.stream = os.fdopen(handle, "w", encoding="utf-8", newline="\n")

    def write(self, text: str) -> int:
        return self.stream.write(text)

    def __getattr__(self, name: str):  # flush, isatty, encoding ...: the stream's
        return getattr(self.stream, name)

    def close(self) -> None:
        """The report in place (renamed over its path), or, when writing it failed, dropped."""
        try:
            self.stream.close()
        except BaseException:
            self.discard()
            raise
        if self.temporary is not None:
            try:
                os.replace(self.temporary, self.path)
            except BaseException:
                self.discard()
                raise
            self.temporary = None

    def discard(self) -> None:
        if self.temporary is not None:
            try:
                self.stream.close()
            except (OSError, ValueError):
                pass
            try:
                os.unlink(self.temporary)
            except OSError:
                pass
            self.temporary = None

    def __enter__(self) -> "ReportFile":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()
        else:
            self.discard()
