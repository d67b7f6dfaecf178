"""Writing `--fix`'s files all or nothing (docs/fix.md, "What --fix promises", 4).

Each new text goes to a temporary file beside its target (same directory, so the rename is one
directory entry swapped, never a copy across file systems), made with O_EXCL, given the target's
mode and owner, written whole and flushed to the disk; only when every temporary file is complete
are they renamed over their targets. A failure before the renames (a full disk, `ulimit -f`, a
read-only directory, a target that changed since it was read) removes every temporary file: no
target is touched. A rename can still fail half way (the disk went away): then the error names the
files written and those not.

A symlinked target is written through to the file it points at (the link stays a link); where
that file may be is `fixes.apply`'s rule (inside the run's root), checked before this runs.
"""

from __future__ import annotations

import os
import secrets
import stat

from kubelint_ports.records import record

_CREATE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
                 | getattr(os, "O_BINARY", 0))


class WriteFailure(Exception):
    """Some files could not be written: the message says which were and which were not."""


@record(frozen=True, slots=True)
class Pending:
    """One file to replace: `target` (real path) gets `data`; `shown` is the path findings show;
    `expected` the bytes it must still hold (it was planned from them)."""

    target: str
    shown: str
    data: bytes
    expected: bytes


def write_changes(changes) -> None:
    """Write a plan's changes (`fixes.apply.FixPlan.changes`), every file or none."""
    write_all([Pending(os.path.realpath(change.file), change.path, change.new, change.old) for change in changes])


def write_all(pending: list[Pending]) -> None:
    """Replace every target with its data, or none (WriteFailure)."""
    temporaries: list[tuple[str, Pending]] = []
    try:
        for item in pending:
            temporaries.append((write_beside(item), item))
    except _Failed as failed:
        for name, _ in temporaries:
            _remove(name)
        names = ", ".join(item.shown for item in pending)
        raise WriteFailure(f"cannot write {failed.shown}: {failed.reason}; nothing was written "
                           f"(not written: {names})") from None
    done: list[str] = []
    for index, (name, item) in enumerate(temporaries):
        try:
            os.replace(name, item.target)
        except OSError as error:
            for left, _ in temporaries[index:]:
                _remove(left)
            rest = [other.shown for _, other in temporaries[index:]]
            raise WriteFailure(f"cannot replace {item.shown}: {error.strerror or error}; "
                               f"written: {', '.join(done) or 'none'}; not written: {', '.join(rest)}") from None
        done.append(item.shown)
    for directory in sorted({os.path.dirname(item.target) for item in pending}):
        _sync_directory(directory)  # the renames themselves on disk (best effort)


class _Failed(Exception):
    def __init__(self, shown: str, reason: str) -> None:
        super().__init__(reason)
        self.shown, self.reason = shown, reason


def write_beside(item: Pending) -> str:
    """The temporary file holding `item.data`, beside its target, with its mode and owner."""
    try:
        with open(item.target, "rb") as stream:
            now = stream.read(len(item.expected) + 1)
            status = os.fstat(stream.fileno())
    except OSError as error:
        raise _Failed(item.shown, error.strerror or str(error)) from None
    if now != item.expected:
        raise _Failed(item.shown, "it changed since it was read")
    if not stat.S_ISREG(status.st_mode):
        raise _Failed(item.shown, "not a regular file")
    directory, base = os.path.split(item.target)
    name = os.path.join(directory, f".{base}.kubelint-ports-{secrets.token_hex(4)}.tmp")
    try:
        descriptor = os.open(name, _CREATE_FLAGS, 0o600)
    except OSError as error:
        raise _Failed(item.shown, f"cannot create a temporary file in {directory or '.'}: "
                                  f"{error.strerror or error}") from None
    try:
        try:
            view = memoryview(item.data)
            while view:
                view = view[os.write(descriptor, view):]
            if hasattr(os, "fchown") and (status.st_uid, status.st_gid) != _owner_of(descriptor):
                os.fchown(descriptor, status.st_uid, status.st_gid)
            if hasattr(os, "fchmod"):
                os.fchmod(descriptor, stat.S_IMODE(status.st_mode))
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
    except OSError as error:
        _remove(name)
        raise _Failed(item.shown, error.strerror or str(error)) from None
    return name


def _owner_of(descriptor: int) -> tuple[int, int]:
    status = os.fstat(descriptor)
    return status.st_uid, status.st_gid


def _remove(name: str) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass


def _sync_directory(directory: str) -> None:
    try:
        descriptor = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
