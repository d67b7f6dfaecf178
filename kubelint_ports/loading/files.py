"""Reading input files safely: regular files (and pipes named directly) only, a size cap, a
deadline, no symlink leaving the tree it was found in, and directory walks without recursion.

A FIFO named `x.yaml` inside a directory would block `open()` forever and a device would never
end; both are skipped with a note. A pipe named directly (`<(helm template ...)`) is read, but
never past the input's deadline. A symlink is followed only to a target inside the tree it was
found in (the directory walked, or for a path named directly the current directory or the
link's own directory), so a committed `evil.yaml -> ~/.ssh/id_rsa` is never read, let alone
quoted in a report.
"""

from __future__ import annotations

import os
import re
import select
import signal
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


class InputTimeout(BaseException):
    """An input took longer than its `input-seconds` budget. A BaseException, as KeyboardInterrupt
    is: the timer fires wherever the reader is, and a reader's `except Exception` that keeps other
    objects after a bug must not turn the deadline into an internal error."""


class NotRegular(OSError):
    """A path that is not a file to read (a device, a socket, a directory)."""


def kind_of(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def inside(root: str, path: str) -> bool:
    """Whether `path` (resolved) lies in the directory `root` (resolved)."""
    root = os.path.realpath(root)
    target = os.path.realpath(path)
    return target == root or target.startswith(root.rstrip(os.sep) + os.sep)


EXCERPT_CHARS = 40  # characters of input text a message may quote


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """A short quote of input text for a message: at most `limit` characters, every control
    character escaped. A message about a file must never carry the file (a secret read by mistake,
    a terminal escape); `repr` escapes all that `formatters.printable` does, and this layer
    cannot import the formatters (the pipeline's imports run one way)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


MAX_MESSAGE_CHARS = 1500  # a message about input is a few sentences (a list of known names), never a page of it

# A token a message quotes as Python does (PyYAML's `%r`, jsonschema's `{instance!r}`); an
# apostrophe inside a word opens none. Compiled by `re` when a message is first shortened.
_QUOTED = r"(?<!\w)'(?:[^'\\\n]|\\.)*(?:'|$)" r'|(?<!\w)"(?:[^"\\\n]|\\.)*(?:"|$)'


def shortened(message: str, limit: int = EXCERPT_CHARS) -> str:
    """`message` with each quoted token cut to `limit` characters, control characters escaped and
    the whole cut to MAX_MESSAGE_CHARS: for messages built by libraries (PyYAML, jsonschema) that
    quote whatever value they were given, a whole file's worth when it is one scalar."""

    def cut(match: re.Match) -> str:
        token = match.group()
        if len(token) <= limit + 2:
            return token
        return f"{token[:limit + 1]}{token[0]}..."

    text = re.sub(_QUOTED, cut, message[:MAX_MESSAGE_CHARS * 30])  # a library's repr of a big value: cut first
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + "..."


_LINE_BREAK = re.compile(r"\s*\n\s*")


def one_line(message: str) -> str:
    """A tool's message (Helm's, kustomize's) on one line of a report: each line break, with the
    blanks around it, becomes one space."""
    return _LINE_BREAK.sub(" ", message.strip())


def symlink_escape(path: str) -> str | None:
    """For a path named directly: the target of a symlink leaving both the current directory and
    the link's own directory, else None."""
    if not os.path.islink(path):
        return None
    if inside(os.curdir, path) or inside(os.path.dirname(os.path.abspath(path)), path):
        return None
    return os.path.realpath(path)


# `lint --fix` works out every pass before it writes (`fixes.apply`): while it lints again, a file
# an earlier pass changed reads as its planned bytes. Real path -> bytes; empty but then.
PLANNED: dict[str, bytes] = {}


def read_file(path: str, limit: int, deadline: float | None = None, *, pipes: bool = False,
              no_symlink: bool = False) -> bytes:
    """At most `limit` + 1 bytes of a regular file, or with `pipes` of a pipe (an input named
    directly: `<(helm template ...)`); OSError (NotRegular for FIFOs unless `pipes`, devices,
    sockets, directories) when it cannot be read, InputTimeout when a pipe outlives `deadline`."""
    if PLANNED and (planned := PLANNED.get(os.path.realpath(path))) is not None:
        return planned[:limit + 1]
    # `no_symlink`: a file a walk found to be none stays none (O_NOFOLLOW: ELOOP if swapped for one since).
    descriptor = os.open(path, _READ_FLAGS | (getattr(os, "O_NOFOLLOW", 0) if no_symlink else 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISREG(mode):
            return _read_regular(descriptor, limit)
        if stat.S_ISFIFO(mode) and pipes:
            return read_stream(descriptor, limit, deadline)
        raise NotRegular(0, f"{kind_of(mode)}, not a file to read")
    finally:
        os.close(descriptor)


def _read_regular(descriptor: int, limit: int) -> bytes:
    chunks = []
    remaining = limit + 1
    while remaining > 0:
        chunk = os.read(descriptor, min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_stream(descriptor: int, limit: int, deadline: float | None = None) -> bytes:
    """A pipe until its end, `limit` + 1 bytes, or the deadline (InputTimeout). A FIFO that no
    writer holds open reads as empty at once (waiting for one could be forever)."""
    os.set_blocking(descriptor, False)
    chunks = []
    size = 0
    while size <= limit:
        try:
            chunk = os.read(descriptor, min(limit + 1 - size, 1 << 20))
        except BlockingIOError:  # a writer, nothing written yet
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                raise InputTimeout() from None
            select.select([descriptor], [], [], wait)
            continue
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def walk_tree(top: str, max_depth: int) -> Iterator[tuple[str, list[str], list[os.DirEntry], list[str]]]:
    """`os.walk` top-down without recursion and without following symlinked directories:
    (directory, subdirectory names (prune in place), other entries, notes). Directories deeper
    than `max_depth` below `top` are not entered (a note says so)."""
    stack: list[tuple[str, int]] = [(top, 0)]
    while stack:
        directory, depth = stack.pop()
        notes: list[str] = []
        subdirs: list[str] = []
        entries: list[os.DirEntry] = []
        try:
            with os.scandir(directory) as listing:
                found = sorted(listing, key=lambda entry: entry.name)
        except OSError as error:
            yield directory, [], [], [f"cannot read directory {directory}: {error.strerror or error}"]
            continue
        for entry in found:
            try:
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry.name)
                    continue
            except OSError:
                pass
            entries.append(entry)
        yield directory, subdirs, entries, notes
        if subdirs and depth + 1 > max_depth:
            yield directory, [], [], [f"{directory}: directories nested deeper than {max_depth} levels are not walked"]
            continue
        for name in reversed(subdirs):
            stack.append((os.path.join(directory, name), depth + 1))


def is_virtualenv(directory: str) -> bool:
    """A Python virtualenv (`pyvenv.cfg` at its top): packages' test data, never the project's
    manifests. Walked only when named."""
    return os.path.isfile(os.path.join(directory, "pyvenv.cfg"))


def git_ignored(top: str):
    """`ignored(path, is_dir)`: whether git ignores a path below `top` (.gitignore, the repository's
    exclude file and the user's excludes, as `git status` does; ruff skips the same). Everything
    is kept where `top` is in no git work tree. Decided from those files alone (`gitignore.py`):
    running git would run the linted tree's own configuration."""
    from kubelint_ports.loading.gitignore import ignore_rules

    rules = ignore_rules(top)
    if rules is not None:
        return rules

    def nothing(path: str, is_dir: bool) -> bool:
        return False

    return nothing


def entry_problem(entry: os.DirEntry, root: str) -> str | None:
    """Why a directory entry is not read as a file: not regular, or a symlink leaving `root`."""
    try:
        if entry.is_file(follow_symlinks=False):  # the directory listing says regular: no system call
            return None
        if entry.is_symlink():
            if not inside(root, entry.path):
                return f"a symlink to {os.path.realpath(entry.path)}, outside {root}"
            mode = os.stat(entry.path).st_mode
        else:
            mode = entry.stat(follow_symlinks=False).st_mode
    except OSError as error:
        return f"cannot read: {error.strerror or error}"
    if not stat.S_ISREG(mode):
        return kind_of(mode)
    return None


# --- JSON Schema references ---------------------------------------------------------------------

# Meta-schemas validators ship built in: naming one in `$schema` fetches nothing.
KNOWN_META_SCHEMAS = frozenset(
    f"{scheme}://json-schema.org/{path}{end}" for scheme in ("http", "https") for end in ("", "#")
    for path in ("schema", "draft-04/schema", "draft-06/schema", "draft-07/schema", "draft/2019-09/schema",
                 "draft/2020-12/schema"))
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")


def schema_reference_problem(schema, max_depth: int) -> str | None:
    """Why a JSON Schema would make a validator fetch or read something outside it: a reference
    that is not a `#...` fragment of the document (a URL of any scheme or case, a file, a name
    resolved against an `$id`), or a `$schema` that is not a built-in meta-schema. Iterative."""
    stack = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return f"is nested deeper than {max_depth} levels (limit max-depth)"
        if isinstance(node, dict):
            for key, value in node.items():
                if key in _REFERENCES and isinstance(value, str) and not value.startswith("#"):
                    return (f"refers to the schema {value}, outside it, which a validator would fetch or read: "
                            "kubelint-ports never uses the network nor reads outside its inputs; put the "
                            "definition in the schema's `$defs` and refer to it as \"#/$defs/...\"")
                if key == "$schema" and isinstance(value, str) and value not in KNOWN_META_SCHEMAS:
                    return (f"names the meta-schema {value}, which a validator would fetch: use a standard one "
                            "(https://json-schema.org/draft-07/schema#, .../draft/2020-12/schema)")
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node)
    return None


# --- the per-input deadline ----------------------------------------------------------------------

def _expire(signum, frame):
    raise InputTimeout()


_handler_thread: list[int] = []  # the thread whose SIGALRM handler is `_expire` (`time_limits`), if any


@contextmanager
def time_limit(seconds: float | None):
    """Raise InputTimeout in the block after `seconds`, where a timer signal can (the main thread
    on POSIX); elsewhere the block runs unbounded but for the cooperative checks (pipes, Helm).
    Inside `time_limits` only the timer is set: installing a handler per input cost more than
    reading a small file."""
    if not (seconds and hasattr(signal, "setitimer")):
        yield
        return
    if _handler_thread and _handler_thread[-1] == threading.get_ident():
        previous_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, *(previous_timer if previous_timer[0] else (0,)))
        return
    with time_limits():
        if not _handler_thread or _handler_thread[-1] != threading.get_ident():  # not the main thread
            yield
            return
        with time_limit(seconds):
            yield


@contextmanager
def time_limits():
    """Install the SIGALRM handler of `time_limit` once for the many inputs read inside (the
    previous one restored after); off the main thread, where no signal arrives, nothing."""
    if not hasattr(signal, "setitimer"):
        yield
        return
    try:
        previous_handler = signal.signal(signal.SIGALRM, _expire)
    except ValueError:  # not the main thread, the only one Python delivers signals to
        yield
        return
    _handler_thread.append(threading.get_ident())
    try:
        yield
    finally:
        _handler_thread.pop()
        signal.signal(signal.SIGALRM, previous_handler)
