"""What each file read gave, kept in memory between the language server's runs: the file cache's
role (loading/file_cache.py) without the disk, the JSON or the decoding. An entry is the
documents, diagnostics and model reader's pieces one file's bytes gave under one set of reading
settings; a run hands the same objects on (they are not changed after reading: the checks never
change the model), so a run after an edit reads again only the files whose bytes changed.

A file is not even read again while its (device, inode, size, modification and change times) are
those it had when its entry's bytes were read, as ruff's cache does (`unread`): taken before the
read, and not at all for a file changed in the last `file_cache.RACY_SECONDS` (a write in the
same tick of the file system's clock leaves its times as they were, git's "racy clean" case), nor
for an open editor's file (its text is always the editor's, `files.PLANNED`). Any other file is read and its
bytes' SHA-256 decides. The disk cache (`--cache-dir`) decides alike (`FileCache.unread`).

The run also learns, per file, whether the bytes it read hold a suppression comment's mark
(`marked`): the comment scan (suppressions.read_comments) reads only those files again."""

from __future__ import annotations

import hashlib
import os

from kubelint_ports.loading import files
from kubelint_ports.loading.file_cache import FileCache, status_of
from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading.yaml_files.documents import Document, LoadResult
from kubelint_ports.vocabulary import COMMENT_MARK

MAX_ENTRIES = 200_000  # past it the whole memory is dropped (a workspace that big re-reads once)
_MARK = COMMENT_MARK.encode()


class Entry:
    """One file's bytes (their digest), what reading them gave, the file's status when they were
    read from it (None: not known to be the file's, as an editor's text), and whether they hold the
    suppression comments' mark."""

    __slots__ = ("digest", "result", "reader", "status", "marked", "shown", "path")

    def __init__(self, digest: bytes, result: LoadResult, reader, status, marked: bool, shown: str,
                 path: str = "") -> None:
        self.digest, self.result, self.reader, self.status, self.marked = digest, result, reader, status, marked
        self.shown, self.path = shown, path


class MemoryCache(FileCache):
    """FileCache's `load`, `unread` and `has_entry` (loading/file_cache.py) over a dict;
    `loading.file_cache.kept` applies it to a run. Unlike the disk cache it is used when buffers are
    laid over the files (`files.PLANNED`): an entry is keyed by the bytes read, whoever gave them."""

    def __init__(self) -> None:
        super().__init__("")
        self.directory = None  # no disk cache in the workers: they hand each file back (`adopt`)
        self.tool = "memory"
        self.entries: dict[tuple[str, str], Entry] = {}
        self.seen: set[tuple[str, str]] = set()
        self.status: dict[str, tuple] = {}  # this run's: a file's status, taken before it was read
        self.marks: dict[str, bool] = {}  # this run's: a file (as shown) -> whether its bytes hold the mark
        self.planned_names: frozenset[str] = frozenset()
        self.runs: dict[tuple, Run] = {}
        self.kept_runs: dict[tuple, Run] = {}
        self.unread_count = 0

    def start_run(self) -> None:
        """Before a run: forget the last run's settings (they hold its reader, the whole model) and
        count afresh; after it, `prune` drops the entries of files no longer read."""
        self._settings = {}
        self.notes = []
        self.hits = self.misses = self.unread_count = 0
        self.seen = set()
        self.status = {}
        self.marks = {}
        self.planned_names = frozenset(os.path.basename(path) for path in files.PLANNED)
        self.runs, self.kept_runs = self.kept_runs, {}  # the last run's runs of files, for this one

    def prune(self) -> None:
        for key in [key for key in self.entries if key not in self.seen]:
            del self.entries[key]

    def has_entry(self, path: str, helm, reader) -> bool:
        settings = self.settings(helm, reader)
        return settings is not None and (path, settings) in self.entries

    def adopt(self, entries: list[Entry], helm, reader) -> None:
        """What a worker process read of its batch, file by file (`pool.read_batch`), kept as if
        read here; the batch's result, which holds the same objects, is handed on by the caller."""
        settings = self.settings(helm, reader)
        if settings is None:
            return
        if len(self.entries) + len(entries) > MAX_ENTRIES:
            self.entries.clear()
        for entry in entries:
            key = (entry.path, settings)
            self.entries[key] = entry
            self.seen.add(key)
            self.marks[entry.shown] = entry.marked
        self.misses += len(entries)

    def planned(self, path: str) -> bool:
        """Whether `path` is read from an editor's text (the real path only asked for when one of
        those texts has its name: a walked file is no symlink, nor is any directory below the top)."""
        return os.path.basename(path) in self.planned_names and os.path.realpath(path) in files.PLANNED

    def unread(self, path: str, walked: bool, helm, result: LoadResult, reader) -> bool:
        """What the file `path` gave last time into `result` and `reader`, without reading it, when
        its status is the one it had then; else False, and the status is kept for `load`. Only for a
        file a walk found (regular, no symlink) that no editor has open."""
        if not walked:
            return False
        settings = self.settings(helm, reader)
        if settings is None or (files.PLANNED and self.planned(path)):
            return False
        status = status_of(path)
        if status is None:
            return False
        key = (path, settings)
        entry = self.entries.get(key)
        if entry is None or entry.status != status:
            self.status[path] = status
            return False
        self.seen.add(key)
        self.hits += 1
        self.unread_count += 1
        self.marks[entry.shown] = entry.marked
        _hand_on(result, entry.result, reader, entry.reader)
        return True

    def unread_all(self, paths, start: int, end: int, helm, result: LoadResult, reader) -> int:
        """`unread` of `paths[start:end]` (files a walk found), one after the other while each is
        unchanged: how many were handed on. They are handed on at once, as one piece per run of
        files that the last run handed on alike (`Run`): an edit hands 6,800 files' pieces on in
        a few list extensions, not file by file."""
        settings = self.settings(helm, reader)
        if settings is None:
            return 0
        entries, planned = self.entries, files.PLANNED and self.planned
        handed: list[Entry] = []
        for position in range(start, end):
            path = paths[position]
            if planned and planned(path):
                break
            status = status_of(path)
            if status is None:
                break
            entry = entries.get((path, settings))
            if entry is None or entry.status != status:
                self.status[path] = status  # for `load`, which reads it next
                break
            handed.append(entry)
        if not handed:
            return 0
        key = (id(handed[0]), len(handed))  # the entries themselves are compared (`holds`): ids are a hint
        run = self.runs.get(key)
        if run is None or not run.holds(handed):
            run = Run(handed, settings, reader)
        self.kept_runs[key] = run
        self.seen.update(run.keys)
        self.hits += len(handed)
        self.unread_count += len(handed)
        self.marks.update(run.marks)
        _hand_on(result, run.result, reader, run.reader)
        return len(handed)

    def marked(self, path: str) -> bool | None:
        """Whether the bytes this run read of `path` (as a report shows it) hold a suppression
        comment's mark; None when this run did not read it through here."""
        return self.marks.get(path)

    def load(self, path: str, data: bytes, helm, result: LoadResult, reader, read) -> None:
        settings = self.settings(helm, reader)
        marked, shown = _MARK in data, display_path(path)
        self.marks[shown] = marked
        status = self.status.pop(path, None)  # taken before `data` was read from the file (not planned)
        if settings is None:
            read(result, reader)
            return
        key = (path, settings)
        self.seen.add(key)
        digest = hashlib.sha256(data).digest()
        entry = self.entries.get(key)
        if entry is not None and entry.digest == digest:
            self.hits += 1
            entry.status = status
            _hand_on(result, entry.result, reader, entry.reader)
            return
        self.misses += 1
        fresh_result = LoadResult()
        fresh_reader = reader.fresh() if reader is not None else None
        read(fresh_result, fresh_reader)
        if all(type(document) is Document for document in fresh_result.documents):
            if len(self.entries) >= MAX_ENTRIES:
                self.entries.clear()
            # not `helm template` output mapped to a chart
            self.entries[key] = Entry(digest, fresh_result, fresh_reader, status, marked, shown, path)
        else:
            self.entries.pop(key, None)
        _hand_on(result, fresh_result, reader, fresh_reader)


class Run:
    """What a run of consecutive files handed on gave, joined: one LoadResult and one reader, kept
    for the next run, which hands the same files on alike (every edit but the edited file's
    neighbours). Joining copies the pieces' lists, never the objects in them."""

    __slots__ = ("entries", "keys", "marks", "result", "reader")

    def __init__(self, entries: list[Entry], settings: str, reader) -> None:
        self.entries = entries
        self.keys = [(entry.path, settings) for entry in entries]
        self.marks = {entry.shown: entry.marked for entry in entries}
        self.result = LoadResult()
        self.reader = reader.fresh() if reader is not None else None
        for entry in entries:
            _hand_on(self.result, entry.result, self.reader, entry.reader)

    def holds(self, entries: list[Entry]) -> bool:
        """Whether these are this run's entries, the same objects in the same order."""
        return len(entries) == len(self.entries) and all(a is b for a, b in zip(entries, self.entries))


def _hand_on(result: LoadResult, kept: LoadResult, reader, kept_reader) -> None:
    """`kept` added to the run's `result` and `reader` without changing `kept` (it serves again)."""
    result.documents += kept.documents
    result.diagnostics += kept.diagnostics
    result.files += kept.files
    result.skipped += kept.skipped
    result.notes += kept.notes
    if reader is not None and kept_reader is not None:
        reader.absorb(kept_reader)
