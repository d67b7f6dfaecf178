"""The directory that report paths are relative to when a machine reads them (SARIF `%SRCROOT%`,
GitHub annotations, GitLab Code Quality, Markdown links): the repository's top level, whatever
the current directory. Text and JSON keep paths as the user typed them, relative to where they are.
"""

from __future__ import annotations

import os

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
