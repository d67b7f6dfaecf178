"""Rendered charts and Kustomize builds, kept in the file cache's directory (docs/cache.md).

A chart renders, and a Kustomize directory builds, in a child process on every run (Helm's
engine or `kustomize`/`kubectl`: 0.3 to 1 s each). With the cache on, the output is kept: keyed
by the tool, the program or engine that made it (its path, size and times), the options, and the
SHA-256 of every file it reads (a chart's whole tree, followed through the symlinks the chart
checks allowed, and its values files; the files a Kustomize build reads, as its guard listed
them). What is kept is the output only (the template -> text map, the build's YAML); reading it
into documents, positions and the model is done afresh, as after a render.

Trust is the file cache's: an entry is zlib-compressed JSON of exactly the shape its kind
returns, read without following a symlink, bounded; anything else is ignored and the chart
rendered again. Never used while `lint --fix` plans (the planned bytes are not the files'), nor
by the language server's in-memory cache (it has no directory)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zlib
from collections.abc import Callable, Iterable

from kubelint_ports.loading import budgets, file_cache, files, read_log

FORMAT = "kubelint-ports-build/1"
MAX_ENTRY_BYTES = 64 * 2**20  # compressed; inflated at most 4x that


def program_identity(path: str | None) -> list:
    """A program or library file as a key part: its path, size and modification time."""
    if not path:
        return [None]
    try:
        status = os.stat(path)
    except OSError:
        return [path, None]
    return [path, status.st_size, status.st_mtime_ns]


def file_hash(path: str) -> str | None:
    """The SHA-256 of a regular file within the file-size budget, else None (nothing is kept)."""
    limit = budgets.current().max_file_bytes
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        digest, size = hashlib.sha256(), 0
        while chunk := os.read(descriptor, 1 << 20):
            size += len(chunk)
            if size > limit:
                return None
            digest.update(chunk)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    return digest.hexdigest()


def tree_files(top: str) -> list[str] | None:
    """Every regular file below `top`, symlinked directories followed once (the chart checks have
    refused links that leave the chart's roots or loop), in a stable order; None past the depth
    budget or on an unreadable directory (nothing is kept then)."""
    found: list[str] = []
    walked = {os.path.realpath(top)}
    pending = [top]
    while pending:
        for directory, subdirs, entries, notes in files.walk_tree(pending.pop(0), budgets.current().max_depth):
            if notes:
                return None
            for entry in entries:
                try:
                    is_directory = entry.is_symlink() and os.path.isdir(entry.path)
                except OSError:
                    return None
                if is_directory:
                    if os.path.realpath(entry.path) not in walked:
                        walked.add(os.path.realpath(entry.path))
                        pending.append(entry.path)
                else:
                    found.append(entry.path)
    return sorted(found)


def kept_output(kind: str, parts: list, programs: list[str | None], inputs: Iterable[str],
                make: Callable[[], object], shape: Callable[[object], bool]) -> object:
    """`make()`'s output, from the cache when an entry of `kind` holds it for these `parts` (the
    options, as JSON), `programs` (the files of the program or engine that makes it) and the
    bytes of `inputs` now; else made and kept. `shape`: whether a value read back is one `make`
    returns (JSON keeps dicts, lists and strings: `make` returns only those)."""
    cache = file_cache.active()
    descriptor = getattr(cache, "descriptor", None)
    if descriptor is None or files.PLANNED:
        return make()
    hashes = []
    for path in sorted(set(inputs)):
        digest = file_hash(path)
        if digest is None:
            return make()
        hashes.append([path, digest])
    text = json.dumps([FORMAT, kind, getattr(cache, "tool", ""), parts, [program_identity(p) for p in programs],
                       os.getcwd(), hashes])
    name = f"{kind}-{hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()}.json.z"
    value = _read(descriptor, name)
    if value is not None and shape(value):
        read_log.read_elsewhere([program for program in programs if program])  # the run memo's inputs too
        return value
    value = make()
    try:
        data = zlib.compress(json.dumps(value, separators=(",", ":")).encode("utf-8", "surrogatepass"), 1)
    except (TypeError, ValueError):
        return value
    if len(data) <= MAX_ENTRY_BYTES:
        cache._write_whole(name, data)
    return value


def _read(directory: int, name: str):
    text = file_cache.inflated(directory, name, MAX_ENTRY_BYTES, 4)
    try:
        return json.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return None


def is_text_map(value) -> bool:
    """A chart's render: {template path: rendered text}."""
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def is_build(value) -> bool:
    """A Kustomize build: [its YAML, the directory its origin paths are relative to]."""
    return isinstance(value, list) and len(value) == 2 and all(isinstance(part, str) for part in value)
