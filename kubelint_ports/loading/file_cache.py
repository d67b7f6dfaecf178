"""The file cache: what loading and the model's reader made of each input file, kept on disk so
that a run reads again only the files that changed (docs/cache.md).

An entry is one file as read under one set of settings: its name is a hash of the tool (version
and the package's own files), the settings that change reading (the budgets, the Helm options a
`helm template` output maps with, the reader's role and custom kinds), the working directory and
the path as given; it records the SHA-256 and size of the bytes it describes, and is used only
when they are the file's bytes now. What it holds is `cache_codec`'s JSON of the documents (their
places, kept annotations and noted positions), diagnostics and skipped count the file gave, and
the reader's pieces (workloads, Services, nodes, network facts): what a worker process sends
back for its files (`loading.pool`), per file. The cross-object checks run over the whole model
as before: only reading is saved.

A file a walk found is not even read while its (device, inode, size, modification and change
times) are those it had when its entry's bytes were read, as ruff's cache and git's index decide
(`unread`): taken before the read, and never for a file changed in the last `RACY_SECONDS` (a
write in the same tick of the file system's clock leaves its times as they were, git's "racy
clean" case). The entry also says whether those bytes hold a suppression comment's mark
(`marked`), so the comment scan reads only such files. Any other file is read and its bytes'
SHA-256 decides; an entry whose hash still holds but whose status is stale (a `touch`, a checkout
writing the same bytes) is written again with the status now.

Trust: an entry is data (JSON, zlib-compressed), never code. One that is truncated, corrupted, of
another format or tool version, of the wrong shape, over `MAX_ENTRY_BYTES`, or whose hash is not
the file's, is ignored and written again. The directory is opened without following a symlink
(`O_NOFOLLOW`, then every entry relative to it), so neither a symlinked cache directory nor a
symlinked entry makes a run read or write outside it. Writes go to a temporary file in the
directory, then renamed over the entry (every file the tool writes is written whole or not at
all): a reader sees the old entry or the new one, and two runs at once never mix theirs. A
directory that cannot be written is read-only for the run: linting goes on, a note says so. Past
`MAX_TOTAL_BYTES` or `MAX_ENTRIES`, the oldest entries go.

Not cached here: standard input, files with `helm template` output (their documents map to a
chart's templates, other files), charts and Kustomize builds (their outputs are kept by
`build_cache`), and any run of `lint --fix` (its passes
read planned bytes).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kubelint_ports.loading import budgets, files, read_log
from kubelint_ports.loading.cache_codec import CodecError, Decoder, Encoder, dumps_body
from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading.yaml_files.documents import Document, LoadResult
from kubelint_ports.vocabulary import COMMENT_MARK

CACHE_DIRECTORY = ".kubelint-ports_cache"  # at the repository's top (sourceroot.find_source_root)
CACHE_ENV = "KUBELINT_PORTS_CACHE_DIR"
FORMAT = "kubelint-ports-cache/2"  # /1: the reader's custom kinds stored in every entry
BODY = "\0body"  # an entry's body, beside its header while read or written (never a key of the JSON)
MAX_ENTRY_BYTES = 64 * 2**20  # one entry, compressed; a bigger one is a planted one
MAX_TOTAL_BYTES = 256 * 2**20  # the directory: past it the oldest entries go
MAX_ENTRIES = 100_000
PRUNE_TO = 0.8  # of either bound, after pruning
# Entries a run fsyncs before renaming: an fsync costs ~3 ms here, 20 s for a cold run of 6,800
# files. Past these, entries are renamed unsynced: one that a crash leaves torn or empty fails its
# own checks (the zlib stream's end, JSON, the SHA-256 of the bytes it describes) and is read again.
FSYNC_ENTRIES = 32
STALE_TEMPORARY_SECONDS = 3600  # a temporary file a killed run left
ENTRY_SUFFIX = ".json.z"
RACY_SECONDS = 2  # a file changed this recently is read again however its times look
_MARK = COMMENT_MARK.encode()
GITIGNORE = b"# Automatically created by kubelint-ports.\n*\n"
CACHEDIR_TAG = (b"Signature: 8a477f597d28d172789f06886806bc55\n"
                b"# This file is a cache directory tag created by kubelint-ports.\n"
                b"# For information about cache directory tags see https://bford.info/cachedir/\n")
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | \
    getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


# What makes an entry: the readers (`loading/`), the model's (`model/`) and the words and records
# they are made of. The checks, the engine and the formatters run afresh on every run.
READING_CODE = ("loading", "model", "__init__.py", "records.py", "vocabulary.py", "workload_kinds.py")


def tool_fingerprint() -> str:
    """The tool's version and the files of its code that reads (names, sizes, modification
    times): an entry written by another version, or by a checkout edited since, is another tool's."""
    from kubelint_ports import __version__

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256(__version__.encode())
    for part in READING_CODE:
        top = os.path.join(package, part)
        walked = os.walk(top) if os.path.isdir(top) else [(package, [], [part])]
        for directory, subdirs, names in walked:
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            for name in sorted(names):
                if name.endswith(".py"):
                    path = os.path.join(directory, name)
                    try:
                        status = os.stat(path)
                    except OSError:
                        continue
                    digest.update(f"{os.path.relpath(path, package)}\0{status.st_size}\0{status.st_mtime_ns}\n"
                                  .encode())
    return f"{__version__}+{digest.hexdigest()[:16]}"


def status_of(path: str) -> tuple | None:
    """What says a file is unchanged without reading it, or None: not a regular file, not there, or
    changed too recently to tell."""
    try:
        found = os.stat(path, follow_symlinks=False)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(found.st_mode):
        return None
    now = time.time_ns()
    if now - max(found.st_mtime_ns, found.st_ctime_ns) < RACY_SECONDS * 1_000_000_000:
        return None
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


class FileCache:
    """The cache directory of one run (`applied`): entries read and written relative to its open
    descriptor. `notes`: what the run should say (a directory it could not use or write)."""

    def __init__(self, directory: str):
        self.directory = directory
        self.descriptor: int | None = None
        self.writable = True
        self.notes: list[str] = []
        self.tool = ""
        self.hits = self.misses = self.written = self.synced = 0
        self._settings: dict[tuple, tuple] = {}
        self.strings: dict[str, str] = {}  # equal strings of every entry read, shared
        self.status: dict[str, tuple] = {}  # this run's: a file's status, taken before it was read
        self.marks: dict[str, bool] = {}  # this run's: a file (as shown) -> whether its bytes hold the mark
        self._peeked: dict[str, dict] = {}  # entries `unread` read and could not use: `load` tries them
        self.unread_count = 0

    # --- the directory ------------------------------------------------------------------------

    def open(self) -> bool:
        """Open (creating it, with its `.gitignore`) the directory; False when it cannot be used."""
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.directory)) or ".", exist_ok=True)
            try:
                os.mkdir(self.directory, 0o755)
                created = True
            except FileExistsError:
                created = False
            self.descriptor = os.open(self.directory, _DIRECTORY_FLAGS)
        except OSError as error:
            if error.errno == errno.ELOOP or os.path.islink(self.directory):
                self.notes.append(f"cache directory {self.directory} is a symlink: not used (--no-cache to "
                                  "silence this)")
            else:
                self.notes.append(f"cache directory {self.directory} cannot be used: {error.strerror or error}")
            return False
        if created or not self._exists(".gitignore"):
            self._write_whole(".gitignore", GITIGNORE)
            self._write_whole("CACHEDIR.TAG", CACHEDIR_TAG)
        self.tool = tool_fingerprint()
        return True

    def close(self) -> None:
        if self.descriptor is not None:
            if self.writable:
                self.prune()
            os.close(self.descriptor)
            self.descriptor = None

    def _exists(self, name: str) -> bool:
        try:
            os.stat(name, dir_fd=self.descriptor, follow_symlinks=False)
            return True
        except OSError:
            return False

    # --- entries ------------------------------------------------------------------------------

    def key(self, path: str, settings: str) -> str:
        text = json.dumps([FORMAT, self.tool, settings, os.getcwd(), path])
        return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()

    def read_entry(self, name: str) -> dict | None:
        """The entry `name` as JSON, or None: missing, a symlink, not a regular file, too big,
        not zlib, not JSON, not an object."""
        text = inflated(self.descriptor, name, MAX_ENTRY_BYTES, 16)
        if text is None:
            return None
        header_text, newline, body = text.partition(b"\n")
        try:
            entry = json.loads(header_text)
        except (ValueError, RecursionError):
            return None
        if not isinstance(entry, dict) or not newline:
            return None
        entry[BODY] = body
        return entry

    def write_entry(self, name: str, entry: dict) -> None:
        """An entry is its header (JSON, one line: what it describes, its types and records), a
        line break and its body (`cache_codec.dumps_body`), zlib-compressed."""
        body = entry.pop(BODY)
        if isinstance(body, str):
            body = body.encode("utf-8", "surrogatepass")
        data = zlib.compress(json.dumps(entry, separators=(",", ":")).encode("ascii") + b"\n" + body, 1)
        if len(data) > MAX_ENTRY_BYTES:
            return
        if self._write_whole(name, data):
            self.written += 1

    def _write_whole(self, name: str, data: bytes) -> bool:
        """`data` as the entry `name`: a temporary file of the directory, fsynced, renamed over it."""
        if not self.writable or self.descriptor is None:
            return False
        temporary = f".tmp-{os.getpid()}-{os.urandom(6).hex()}"
        try:
            descriptor = os.open(temporary, _WRITE_FLAGS, 0o644, dir_fd=self.descriptor)
        except OSError as error:
            self._cannot_write(error)
            return False
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(descriptor, view):]
                if self.synced < FSYNC_ENTRIES:  # past it, an entry torn by a crash reads as no entry
                    self.synced += 1
                    os.fsync(descriptor)
            finally:
                os.close(descriptor)
            os.replace(temporary, name, src_dir_fd=self.descriptor, dst_dir_fd=self.descriptor)
            return True
        except OSError as error:
            try:
                os.unlink(temporary, dir_fd=self.descriptor)
            except OSError:
                pass
            self._cannot_write(error)
            return False

    def _cannot_write(self, error: OSError) -> None:
        self.writable = False
        self.notes.append(f"cache directory {self.directory} is not writable ({error.strerror or error}): "
                          "this run read every file; --no-cache to silence this")

    def prune(self) -> None:
        """The oldest entries removed while the directory holds more than its bounds; temporary
        files a killed run left, removed."""
        found: list[tuple[float, int, str]] = []
        now = time.time()
        try:
            with os.scandir(self.descriptor) as listing:
                for entry in listing:
                    try:
                        status = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if entry.name.startswith(".tmp-"):
                        if now - status.st_mtime > STALE_TEMPORARY_SECONDS:
                            self._remove(entry.name)
                    elif entry.name.endswith(ENTRY_SUFFIX):
                        found.append((status.st_mtime, status.st_size, entry.name))
        except OSError:
            return
        total = sum(size for _, size, _ in found)
        if total <= MAX_TOTAL_BYTES and len(found) <= MAX_ENTRIES:
            return
        found.sort()
        count = len(found)
        for _, size, name in found:
            if total <= MAX_TOTAL_BYTES * PRUNE_TO and count <= MAX_ENTRIES * PRUNE_TO:
                break
            self._remove(name)
            total -= size
            count -= 1

    def _remove(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self.descriptor)
        except OSError:
            pass

    # --- one file -----------------------------------------------------------------------------

    def settings(self, helm, reader) -> str | None:
        """The settings that change what reading a file gives, as text; None when one of them is
        not data this format holds (nothing is cached then)."""
        limits = budgets.current()
        token = (id(helm), id(reader), limits)
        known = self._settings.get(token, (None,))[0]
        if known is None:
            encoder = Encoder(canonical=True)
            try:
                fresh = reader.fresh() if reader is not None else None
                known = json.dumps([encoder.encode(limits), encoder.encode(helm), encoder.encode(fresh),
                                    encoder.types, encoder.objects], sort_keys=True)
            except (CodecError, RecursionError, TypeError, ValueError):
                known = ""
            self._settings[token] = (known, helm, reader)  # kept alive: their ids stay theirs
        return known or None

    def has_entry(self, path: str, helm, reader) -> bool:
        """Whether an entry for `path` exists (not whether it still describes the file): the pool
        leaves such files to this process, where reading an entry costs less than shipping it."""
        settings = self.settings(helm, reader)
        if settings is None or self.descriptor is None:
            return False
        return self._exists(self.key(path, settings) + ENTRY_SUFFIX)

    def unread(self, path: str, walked: bool, helm, result: LoadResult, reader) -> bool:
        """Whether `path` was taken into `result` and `reader` from its entry without reading it:
        only a file a walk found (regular, no symlink), outside `lint --fix` (its passes read
        planned bytes), whose status is the one its entry's bytes were read with. Else False, and
        the status is kept for `load`, which reads the file next. The run memo is told of the file
        (`read_log`): it never opens it, yet the run depends on it."""
        if not walked or files.PLANNED:
            return False
        settings = self.settings(helm, reader)
        if settings is None or self.descriptor is None:
            return False
        status = status_of(path)
        if status is None:
            return False
        self.status[path] = status
        entry = self.read_entry(self.key(path, settings) + ENTRY_SUFFIX)
        if entry is None:
            return False
        digest, marked = entry.get("sha256"), entry.get("marked")
        if entry.get("status") != list(status) or not isinstance(digest, str) or type(marked) is not bool:
            self._peeked[path] = entry  # the bytes' hash may still hold: `load` asks
            return False
        if not self._apply(entry, path, digest, status[2], result, reader, helm):
            return False
        del self.status[path]
        read_log.read_elsewhere((path,))
        read_log.bytes_known(path, status, digest)
        self.hits += 1
        self.unread_count += 1
        self.marks[display_path(path)] = marked
        return True

    def marked(self, path: str) -> bool | None:
        """Whether the bytes this run read of `path` (as a report shows it), or its entry vouched
        for, hold a suppression comment's mark; None when unknown (the comment scan reads it)."""
        return self.marks.get(path)

    def load(self, path: str, data: bytes, helm, result: LoadResult, reader,
             read: Callable[[LoadResult, object], None]) -> None:
        """The file `path` whose bytes are `data` into `result` and `reader`: from its entry when
        one describes these bytes, else by `read(result, reader)` (into fresh ones) and stored."""
        settings = self.settings(helm, reader)
        status = self.status.pop(path, None)  # taken before `data` was read (`unread`)
        peeked = self._peeked.pop(path, None)
        if settings is None or files.PLANNED:
            read(result, reader)
            return
        marked = _MARK in data
        self.marks[display_path(path)] = marked
        name = self.key(path, settings) + ENTRY_SUFFIX
        digest = hashlib.sha256(data).hexdigest()
        if status is not None:
            read_log.bytes_known(path, status, digest)
        entry = peeked if peeked is not None else self.read_entry(name)
        if entry is not None and self._apply(entry, path, digest, len(data), result, reader, helm):
            self.hits += 1
            if status is not None and (entry.get("status") != list(status) or entry.get("marked") is not marked):
                entry.update(status=list(status), marked=marked)  # the same bytes, vouched for by status next time
                self.write_entry(name, entry)
            return
        self.misses += 1
        fresh_result = LoadResult()
        fresh_reader = reader.fresh() if reader is not None else None
        read(fresh_result, fresh_reader)
        stored = self._entry(path, digest, len(data), fresh_result, fresh_reader)
        _absorb(result, fresh_result, reader, fresh_reader)
        if stored is not None:
            stored.update(status=list(status) if status is not None else None, marked=marked)
            self.write_entry(name, stored)

    def _entry(self, path: str, digest: str, size: int, result: LoadResult, reader) -> dict | None:
        if any(type(document) is not Document for document in result.documents):
            return None  # `helm template` output mapped to a chart's templates: other files
        charts = sorted({document.origin.split("/")[0] for document in result.documents if "/" in document.origin})
        encoder = Encoder(known=_known(reader))
        try:
            value = [encoder.encode(result.documents), encoder.encode(result.diagnostics), result.skipped,
                     encoder.encode(result.notes), encoder.encode(reader)]
            body = dumps_body(encoder, value)
        except (CodecError, RecursionError, ValueError):
            return None
        return {"format": FORMAT, "tool": self.tool, "path": path, "sha256": digest, "size": size,
                "charts": charts, "types": encoder.types, "records": encoder.records, BODY: body}

    def _apply(self, entry: dict, path: str, digest: str, size: int, result: LoadResult, reader, helm) -> bool:
        """The entry into `result` and `reader` if it describes these bytes and has the right shape."""
        if entry.get("format") != FORMAT or entry.get("tool") != self.tool or entry.get("path") != path \
                or entry.get("sha256") != digest or entry.get("size") != size:
            return False
        charts = entry.get("charts")
        if not (isinstance(charts, list) and all(isinstance(name, str) for name in charts)):
            return False
        if charts and not _no_chart_for(charts, helm):
            return False  # `helm template` output whose chart is here now: mapped to its templates
        try:
            body = Decoder(entry.get("types"), entry.get("records"), self.strings, _known(reader)).loads(entry[BODY])
        except (CodecError, RecursionError, TypeError, ValueError, AttributeError):
            return False
        if not (isinstance(body, list) and len(body) == 5 and type(body[2]) is int and body[2] >= 0):
            return False
        documents, diagnostics, notes, stored_reader = body[0], body[1], body[3], body[4]
        if not (isinstance(documents, list) and all(type(document) is Document for document in documents)
                and isinstance(diagnostics, list) and isinstance(notes, list)
                and (type(stored_reader) is type(reader))):
            return False
        fresh = LoadResult(documents=documents, diagnostics=diagnostics, skipped=body[2], notes=notes)
        sources = {id(document.text_source): document.text_source for document in documents}
        for source in sources.values():
            if source is not None and (source.file != path or source.data is not None):
                return False
        _absorb(result, fresh, reader, stored_reader)
        return True


def _known(reader) -> tuple:
    """What a reader is made with, stored as a reference and read back as this run's own object:
    `fresh()` hands the same custom kinds to every reader it makes (an uncached run shares them),
    and the entry's key holds them. Kept in every entry, they were 9 of its ~60 tagged values."""
    kinds = getattr(reader, "custom_kinds", None)
    return (kinds,) if kinds is not None else ()


def inflated(directory: int | None, name: str, limit: int, factor: int) -> bytes | None:
    """The zlib-compressed file `name` of the directory open as `directory`, inflated; None when it
    is missing, a symlink, not a regular file, over `limit` bytes, not zlib, truncated, or inflates
    past `limit * factor` (a bomb). Every reader of the cache directory reads through here."""
    if directory is None:
        return None
    try:
        descriptor = os.open(name, _READ_FLAGS, dir_fd=directory)
    except OSError:
        return None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode) or status.st_size > limit:
            return None
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(descriptor, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            return None
        inflater = zlib.decompressobj()
        text = inflater.decompress(b"".join(chunks), limit * factor)
        if inflater.unconsumed_tail or not inflater.eof:
            return None  # truncated, or inflating past any real entry
        return text
    except (OSError, zlib.error):
        return None
    finally:
        os.close(descriptor)


def _no_chart_for(names: list[str], helm) -> bool:
    """Whether `helm template` output of the charts `names` finds none of them to map to now (as
    when its entry was written: its documents then kept their own places)."""
    from kubelint_ports.loading.helm.chart import HelmOptions
    from kubelint_ports.loading.helm.template_output import chart_root_for

    options = helm or HelmOptions()
    return all(chart_root_for(name, options) is None for name in names)


def _absorb(result: LoadResult, fresh: LoadResult, reader, fresh_reader) -> None:
    result.absorb(fresh)
    result.notes += fresh.notes
    if reader is not None and fresh_reader is not None:
        reader.absorb(fresh_reader)


# --- the run's cache -------------------------------------------------------------------------------

_current: list[FileCache | None] = [None]


def active() -> FileCache | None:
    return _current[0]


@contextmanager
def kept(cache) -> Iterator:
    """Use `cache`, made by the caller and kept between its runs (the language server's, in
    memory: an object with FileCache's `load`, `unread`, `marked`, `has_entry` and `notes`), for
    every file read inside the block; `applied` then keeps it, as it keeps an outer load's."""
    previous, _current[0] = _current[0], cache
    try:
        yield cache
    finally:
        _current[0] = previous


@contextmanager
def applied(directory: str | None) -> Iterator[FileCache | None]:
    """Use the cache in `directory` for every file read inside the block (None: no cache); a
    cache already applied (an outer load) is kept."""
    if directory is None or _current[0] is not None:
        yield _current[0]
        return
    cache = FileCache(directory)
    if not cache.open():
        _current[0] = None
        try:
            yield cache
        finally:
            pass
        return
    _current[0] = cache
    try:
        yield cache
    finally:
        _current[0] = None
        cache.close()
