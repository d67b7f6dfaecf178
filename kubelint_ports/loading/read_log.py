"""What a run read where this process cannot see it: the files worker processes read, and
whether a child program (Helm, kubectl, git) ran. The run memo (`run_memo`, above the engine)
lists every file a run depends on; the files this process opens it sees itself (an audit hook),
these it is told here. Nothing is logged unless a log is open (`logged`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager


class ReadLog:
    def __init__(self) -> None:
        self.elsewhere: list[str] = []  # files handed to worker processes, as given
        self.children: list[str] = []  # programs run as child processes (their reads are unknown)


_current: list[ReadLog | None] = [None]


def read_elsewhere(paths: Iterable[str]) -> None:
    log = _current[0]
    if log is not None:
        log.elsewhere.extend(paths)


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
