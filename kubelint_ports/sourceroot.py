"""The directory that report paths are relative to when a machine reads them (SARIF `%SRCROOT%`,
GitHub annotations, GitLab Code Quality, Markdown links): the repository's top level, whatever
the current directory. Text and JSON keep paths as the user typed them, relative to where they are.
"""

from __future__ import annotations

import errno
import os
import stat

from kubelint_ports.vocabulary import NOT_FILES


def git_work_tree(path: str) -> str | None:
    """The git work tree holding `path`: the nearest directory at or above it that holds `.git`
    (a directory or, in worktrees and submodules, a file); None outside one. No `git` process:
    walking up costs microseconds and needs no git installed. `path` is taken as given (callers
    that must not be fooled by symlinks pass a resolved path)."""
    directory = os.path.abspath(path)
    while True:
        if os.path.exists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


GIT_FILE_BYTES = 4096  # `.git` as a file, `commondir`, `HEAD`, a loose ref: one short line each
PACKED_REFS_BYTES = 32 * 2**20  # every branch and tag of a large repository: a few MiB
MAX_SYMBOLIC_HOPS = 5  # git's own limit (SYMREF_MAXDEPTH)
PER_WORKTREE_REFS = ("refs/bisect/", "refs/worktree/", "refs/rewritten/")  # in a worktree's own git directory
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_BAD_REF_CHARACTERS = frozenset(" ~^:?*[\\\x7f") | {chr(code) for code in range(32)}


def read_bounded(path: str, limit: int, *, follow: bool = True) -> bytes | None:
    """A regular file's bytes, None when it holds more than `limit`; OSError when it cannot be
    opened or is no regular file (a FIFO is opened without waiting, then refused). Without
    `follow`, a symlink is refused (ELOOP)."""
    flags = _READ_FLAGS | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    descriptor = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(descriptor, min(limit + 1 - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return None if size > limit else b"".join(chunks)
    finally:
        os.close(descriptor)


def _first_line(path: str) -> str | None:
    try:
        data = read_bounded(path, GIT_FILE_BYTES)
    except (OSError, ValueError):  # ValueError: a NUL in a path read from a file
        return None
    if data is None or b"\0" in data:
        return None
    return data.decode("utf-8", "surrogateescape").split("\n", 1)[0].rstrip("\r")


def git_directories(top: str) -> tuple[str, str] | None:
    """The git directory of the work tree `top` and its common directory (where `refs/`,
    `packed-refs` and `info/` are: the main repository's for a linked worktree), read from files
    as git finds them, never by running git: `.git` itself, or the directory a `.git` file names
    (`gitdir: PATH`, relative to `top`: worktrees, submodules), then its `commondir`. None when no
    `HEAD` is there. Nothing from the repository's configuration is read."""
    git_dir = os.path.join(top, ".git")
    if not os.path.isdir(git_dir):
        line = _first_line(git_dir)
        if line is None or not line.startswith("gitdir:") or not line[len("gitdir:"):].strip():
            return None
        git_dir = os.path.join(top, line[len("gitdir:"):].strip())
    common = _first_line(os.path.join(git_dir, "commondir"))
    common_dir = os.path.normpath(os.path.join(git_dir, common.strip())) if common and common.strip() else git_dir
    try:
        if not (os.path.isfile(os.path.join(git_dir, "HEAD")) and os.path.isdir(common_dir)):
            return None
    except ValueError:
        return None
    return git_dir, common_dir


def _ref_path(name: str, git_dir: str, common_dir: str) -> str | None:
    """Where the loose ref `name` (`refs/heads/main`) is stored, if the name is one git allows and
    its file stays inside the git directory (no `..`, no absolute name, no symlink out)."""
    parts = name.split("/")
    if parts[0] != "refs" or len(parts) < 2 or not _BAD_REF_CHARACTERS.isdisjoint(name) or "@{" in name \
            or any(not part or part.startswith(".") or part.endswith(".lock") for part in parts) or name.endswith("."):
        return None
    directory = git_dir if name.startswith(PER_WORKTREE_REFS) else common_dir
    path = os.path.join(directory, *parts)
    real_directory = os.path.realpath(directory)
    return path if os.path.realpath(path).startswith(real_directory.rstrip(os.sep) + os.sep) else None


def _packed_ref(name: str, common_dir: str) -> str:
    """The object name `packed-refs` gives `name` ("" when none, or the file is over its bound)."""
    try:
        data = read_bounded(os.path.join(common_dir, "packed-refs"), PACKED_REFS_BYTES)
    except OSError:
        return ""
    wanted = name.encode("utf-8", "surrogateescape")
    for line in (data or b"").split(b"\n"):
        if line.startswith((b"#", b"^")):  # the header; a tag's peeled object
            continue
        object_name, _, ref = line.rstrip(b"\r").partition(b" ")
        if ref == wanted:
            return object_name.decode("ascii", "replace")
    return ""


def checked_out_object(top: str) -> str:
    """What `HEAD` of the work tree `top` names, read from files and never by running git (which
    would run the repository's configuration, and in a partial clone fetch): a detached HEAD's
    object name, or the branch's, from its loose ref or `packed-refs`, symbolic refs followed a
    few hops. "" when there is no repository, no such branch yet, or anything is malformed or
    leaves the git directory. The caller checks the text is an object name."""
    directories = git_directories(top)
    if directories is None:
        return ""
    git_dir, common_dir = directories
    content = _first_line(os.path.join(git_dir, "HEAD"))
    for _ in range(MAX_SYMBOLIC_HOPS):
        if content is None:
            return ""
        if not content.startswith("ref:"):
            return content.strip()
        name = content[len("ref:"):].strip()
        path = _ref_path(name, git_dir, common_dir)
        if path is None:
            return ""
        if not os.path.isfile(path):  # no loose ref (a broken one gives no commit, as git gives none)
            return _packed_ref(name, common_dir)
        content = _first_line(path)
    return ""


def find_source_root(config_path: str = "", start: str | None = None) -> str:
    """The git top level, else the configuration file's directory, else the current directory.
    Absolute."""
    top = git_work_tree(start or os.getcwd())
    if top is not None:
        return top
    if config_path:
        return os.path.dirname(os.path.abspath(config_path))
    return os.path.abspath(start or os.getcwd())


def relative_to_root(path: str, root: str) -> str:
    """A reported path (relative to the current directory, or absolute) relative to `root`, with
    `/` separators; standard input and the command line as they are; a file outside the root
    stays absolute (no relative form would point at it)."""
    if path in NOT_FILES or not path:
        return path
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute, root) if os.path.splitdrive(absolute)[0] == os.path.splitdrive(root)[0] \
        else ".."
    if relative == ".." or relative.startswith(".." + os.sep):
        return absolute.replace(os.sep, "/")
    return relative.replace(os.sep, "/")
