"""How the inputs name a path to the user: `STDIN` ("-", standard input on the command line) and
`display_path`, the path as the user will click it."""

from __future__ import annotations

import os

from kubelint_ports.vocabulary import STDIN_NAME

STDIN = "-"


def display_path(path: str) -> str:
    """Paths as the user will click them: relative to the working directory when inside it."""
    if path == STDIN:
        return STDIN_NAME
    if not path:
        return "''"  # an empty argument: reported as unreadable, never read as the current directory
    if not os.path.isabs(path):
        # relpath is lexical: a relative path that stays inside the working directory is its
        # normal form (and relpath would ask the system for the directory twice per file).
        relative = os.path.normpath(path)
        if not relative.startswith(".."):
            return relative.replace(os.sep, "/")
    relative = os.path.relpath(path)
    shown = path if relative.startswith("..") else relative
    return shown.replace(os.sep, "/")
