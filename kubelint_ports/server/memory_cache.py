"""What each file read gave, kept in memory between the language server's runs: the file cache's
role (loading/file_cache.py) without the disk, the JSON or the decoding. An entry is the
documents, diagnostics and model reader's pieces one file's bytes gave under one set of reading
settings; a run hands the same objects on (they are not changed after reading: the checks never
change the model), so a run after an edit reads again only the files whose bytes changed."""

from __future__ import annotations

import hashlib

from kubelint_ports.loading.file_cache import FileCache
from kubelint_ports.loading.yaml_files.documents import Document, LoadResult

MAX_ENTRIES = 200_000  # past it the whole memory is dropped (a workspace that big re-reads once)


class MemoryCache(FileCache):
    """FileCache's `load` and `has_entry` (loading/file_cache.py) over a dict; `loading.file_cache.kept`
    applies it to a run. Unlike the disk cache it is used when buffers are laid over the files
    (`files.PLANNED`): an entry is keyed by the bytes read, whoever gave them."""

    def __init__(self) -> None:
        super().__init__("")
        self.directory = None  # workers (none: the server reads in-process) get no cache
        self.tool = "memory"
        self.entries: dict[tuple[str, str], tuple[bytes, LoadResult, object]] = {}
        self.seen: set[tuple[str, str]] = set()

    def start_run(self) -> None:
        """Before a run: forget the last run's settings (they hold its reader, the whole model) and
        count afresh; after it, `prune` drops the entries of files no longer read."""
        self._settings = {}
        self.notes = []
        self.hits = self.misses = 0
        self.seen = set()

    def prune(self) -> None:
        for key in [key for key in self.entries if key not in self.seen]:
            del self.entries[key]

    def has_entry(self, path: str, helm, reader) -> bool:
        settings = self.settings(helm, reader)
        return settings is not None and (path, settings) in self.entries

    def load(self, path: str, data: bytes, helm, result: LoadResult, reader, read) -> None:
        settings = self.settings(helm, reader)
        if settings is None:
            read(result, reader)
            return
        key = (path, settings)
        self.seen.add(key)
        digest = hashlib.sha256(data).digest()
        entry = self.entries.get(key)
        if entry is not None and entry[0] == digest:
            self.hits += 1
            _hand_on(result, entry[1], reader, entry[2])
            return
        self.misses += 1
        fresh_result = LoadResult()
        fresh_reader = reader.fresh() if reader is not None else None
        read(fresh_result, fresh_reader)
        if all(type(document) is Document for document in fresh_result.documents):
            if len(self.entries) >= MAX_ENTRIES:
                self.entries.clear()
            self.entries[key] = (digest, fresh_result, fresh_reader)  # not `helm template` output mapped to a chart
        else:
            self.entries.pop(key, None)
        _hand_on(result, fresh_result, reader, fresh_reader)


def _hand_on(result: LoadResult, kept: LoadResult, reader, kept_reader) -> None:
    """`kept` added to the run's `result` and `reader` without changing `kept` (it serves again)."""
    result.documents += kept.documents
    result.diagnostics += kept.diagnostics
    result.files += kept.files
    result.skipped += kept.skipped
    result.notes += kept.notes
    if reader is not None and kept_reader is not None:
        reader.absorb(kept_reader)
