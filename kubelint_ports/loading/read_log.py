"""What a run read where this process cannot see it: the files worker processes read, the files
the file cache vouched for by their status without opening them, and whether a child program
(Helm, kubectl, git) ran. The run memo (`run_memo`, above the engine) lists every file a run
depends on; the files this process opens it sees itself (an audit hook), these it is told here.
It is also told the SHA-256 the file cache knows for a file's bytes with a given status, so it
need not read the file again to record it. Nothing is logged unless a log is open (`logged`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager


class ReadLog:
    def __init__(self) -> None:
        self.elsewhere: list[str] = []  # files handed to worker processes, as given
        self.children: list[str] = []  # programs run as child processes (their reads are unknown)
        # path as given -> (its status (device, inode, size, mtime ns, ctime ns) when its bytes were
        # read, their SHA-256): the memo uses the digest only while the file's status is that one
        self.hashed: dict[str, tuple[tuple, str]] = {}


_current: list[ReadLog | None] = [None]


def read_elsewhere(paths: Iterable[str]) -> None:
    log = _current[0]
    if log is not None:
        log.elsewhere.extend(paths)


def bytes_known(path: str, status: tuple, digest: str) -> None:
    log = _current[0]
    if log is not None:
        log.hashed[path] = (status, digest)


def child_ran(program: str) -> None:
    log = _current[0]
    if log is not None:
        log.children.append(program)


@contextmanager
def logged(log: ReadLog) -> Iterator[ReadLog]:
    previous, _current[0] = _current[0], log
    try:
        yield log
    finally:
        _current[0] = previous
