"""The run memo: a `lint` whose every input is as it was gives the report it gave, without
linting again (docs/cache.md, "A run with nothing changed").

With the cache on, a `lint` run from the command line records, beside the file cache's entries,
what it printed (standard output and error, in order), the SHA-256 of each report file it wrote
(`-o`, `--report`) and its exit code, keyed by everything else that decides them: the tool (its version and every file of the
package and its policies), Python and the YAML library, the working directory, the command line,
the environment variables the tool reads, and whether each stream is a terminal. It lists what
the run depended on: every file this process opened to read (a Python audit hook sees them all:
manifests, configuration, baseline, policies, .gitignore files, git's HEAD), every file handed to
a worker process (`loading.read_log`), every directory listed while walking (its entries), and,
up every directory the run started from, whether the names the tool looks for there
(`.kubelint-ports.yaml`, `pyproject.toml`, `.git`, `Chart.yaml`, a kustomization) exist. The next
run with the same key replays the record when every one of those is as recorded (a file by its
size, times, inode and device, else by its SHA-256; a directory by its entries) and each report
file still holds its report (deleted or edited, the run lints again and writes it).

When nothing is recorded: a run of `--fix`, `--diff`, `--watch` or `--write-baseline`, standard
input, a run that started a child program (a chart rendered, a Kustomize build: their reads are
not this process's), an input that changed during the run or in the two seconds before it (a
timestamp that coarse cannot vouch for the bytes), a report written anywhere but a regular file.

Trust is the file cache's: the record is data (zlib-compressed JSON); one of another format, of
the wrong shape or over its bounds is ignored; replaying writes no file and prints only text.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

FORMAT = "kubelint-ports-run/1"
PREFIX = "run-"
SETTLED_NS = 2 * 10**9  # an input changed this close to the run is not vouched for by its times
MAX_RECORD_BYTES = 64 * 2**20  # compressed; inflated at most 4x that
# The environment the tool reads (a test lists the package's reads and checks they are here).
ENVIRONMENT = ("CI", "PRE_COMMIT", "NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS", "HOME", "XDG_CONFIG_HOME",
               "PATH", "LANG", "LANGUAGE", "USERPROFILE")
ENVIRONMENT_PREFIXES = ("KUBELINT_PORTS_", "LC_", "GIT_", "GITHUB_", "PYTHON")
ENTRY_SUFFIX = ".json.z"  # the file cache's entries and these records
_NOT_INPUTS = ("/proc/", "/sys/", "/dev/")
_FOLLOWING_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | \
    getattr(os, "O_CLOEXEC", 0)

_recorder: list[Recorder | None] = [None]
_hooked = [False]


def signature(path: str) -> list:
    """What a path is now: [kind, size, mtime, ctime, inode, device], or ["missing", error]."""
    try:
        status = os.stat(path)
    except OSError as error:
        return ["missing", error.errno or 0]
    return [stat.S_IFMT(status.st_mode), status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino,
            status.st_dev]


def content_hash(path: str, size: int) -> str | None:
    """The SHA-256 of a regular file's bytes (None when it cannot be read, or is not `size` long).
    A symlink is followed, as `signature` follows it (a program on PATH often is one)."""
    try:
        descriptor = os.open(path, _FOLLOWING_FLAGS)
    except OSError:
        return None
    digest, read = hashlib.sha256(), 0
    try:
        while chunk := os.read(descriptor, 1 << 20):
            digest.update(chunk)
            read += len(chunk)
            if read > size:
                return None
    except OSError:
        return None
    finally:
        os.close(descriptor)
    return digest.hexdigest() if read == size else None


def listing(directory: str) -> str | None:
    """A directory's entries (names, and which are directories) as a digest; None if unreadable."""
    try:
        with os.scandir(directory) as entries:
            names = sorted(f"{entry.name}\0{int(entry.is_dir(follow_symlinks=False))}" for entry in entries)
    except OSError:
        return None
    return hashlib.sha256("\n".join(names).encode("utf-8", "surrogateescape")).hexdigest()


def probed_names() -> tuple[str, ...]:
    """The names the tool looks for up every directory a run starts from."""
    from kubelint_ports.config import CONFIG_NAME, PYPROJECT
    from kubelint_ports.loading import CHART_FILE, KUSTOMIZATION_FILES

    return (CONFIG_NAME, PYPROJECT, ".git", CHART_FILE, *KUSTOMIZATION_FILES)


def ancestors(path: str) -> Iterator[str]:
    directory = os.path.abspath(path)
    while True:
        yield directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return
        directory = parent


# --- the key ---------------------------------------------------------------------------------------

def tool_identity() -> list:
    """The package's files and policies (names, sizes, times), Python, the YAML library's files."""
    import importlib.util

    from kubelint_ports import __version__
    from kubelint_ports.policy_data import builtin_policy_dir

    package = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    for top in (package, str(builtin_policy_dir())):
        for directory, subdirectories, names in os.walk(top):
            subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
            for name in sorted(names):
                digest.update(f"{os.path.join(directory, name)}\0{signature(os.path.join(directory, name))[1:4]}\n"
                              .encode("utf-8", "surrogateescape"))
    libraries = []
    for module in ("yaml", "_yaml"):
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
        libraries.append([module, origin, signature(origin)[1:4] if origin else None])
    return [__version__, digest.hexdigest(), sys.version, sys.executable, libraries]


def memo_key(args: list[str], outputs: list[str]) -> str:
    environment = sorted((name, value) for name, value in os.environ.items()
                         if name in ENVIRONMENT or name.startswith(ENVIRONMENT_PREFIXES) or name.endswith("_COMPLETE"))
    terminals = []
    for stream in (sys.stdout, sys.stderr):
        try:
            terminals.append(bool(stream.isatty()))
        except (AttributeError, ValueError, OSError):
            terminals.append(None)
    text = json.dumps([FORMAT, tool_identity(), os.getcwd(), args, outputs, environment, terminals])
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


# --- replaying ---------------------------------------------------------------------------------------

def read_record(directory: str, name: str) -> dict | None:
    """The record `name` of the cache directory, or None: missing, a symlink (the directory or
    the record), not a regular file, over its bounds, not zlib, not a JSON object."""
    from kubelint_ports.loading.file_cache import inflated

    try:
        folder = os.open(directory, _DIRECTORY_FLAGS)
    except OSError:
        return None
    try:
        text = inflated(folder, name, MAX_RECORD_BYTES, 4)
        record = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return None
    finally:
        os.close(folder)
    return record if isinstance(record, dict) else None


def _rows(value, size: int) -> bool:
    """A list of lists of `size` items each (a record's table, before its cells are checked)."""
    return isinstance(value, list) and all(isinstance(item, list) and len(item) == size for item in value)


def still_true(record: dict, key: str, outputs: list[str]) -> bool:
    """Whether `record` is this command's and everything it depended on is as it recorded."""
    if record.get("format") != FORMAT or record.get("key") != key or record.get("outputs_named") != outputs:
        return False
    files, missing, directories, probes = (record.get(name) for name in ("files", "missing", "directories", "probes"))
    if not (_rows(files, 3) and _rows(missing, 2) and _rows(directories, 3) and _rows(probes, 2)):
        return False
    for path, was, digest in files:
        if not (isinstance(path, str) and isinstance(was, list)):
            return False
        now = signature(path)
        if now != was and (now[0] != stat.S_IFREG or len(was) < 2 or now[1] != was[1]
                           or content_hash(path, now[1]) != digest):
            return False
    for path, error in missing:
        if not isinstance(path, str) or signature(path) != ["missing", error]:
            return False
    for path, was, digest in directories:  # a directory's times change with its entries
        if not isinstance(path, str) or (signature(path) != was and listing(path) != digest):
            return False
    for path, kind in probes:
        if not isinstance(path, str) or signature(path)[0] != kind:
            return False
    return True


def replayed(directory: str, key: str, outputs: list[str], streams) -> int | None:
    """The exit code after replaying the memo `key` to `streams` (standard output and error), or
    None (no memo applies)."""
    record = read_record(directory, f"{PREFIX}{key}.json.z")
    if record is None or not still_true(record, key, outputs):
        return None
    printed, written, code = record.get("printed"), record.get("written"), record.get("code")
    if not (_rows(printed, 2) and _rows(written, 3) and type(code) is int
            and [path for path, _, _ in written] == outputs
            and all(stream in (1, 2) and isinstance(text, str) for stream, text in printed)):
        return None
    for path, size, digest in written:  # the report files hold the reports still: nothing to write
        if not (type(size) is int and isinstance(digest, str) and not os.path.islink(path)
                and content_hash(path, size) == digest):
            return None
    for stream, text in printed:
        streams[stream - 1].write(text)
    return code


# --- recording ---------------------------------------------------------------------------------------

class Tee:
    """A text stream that keeps what is written to it, in the order of both streams."""

    def __init__(self, stream, number: int, printed: list):
        self._stream, self._number, self._printed = stream, number, printed

    def write(self, text: str) -> int:
        self._printed.append([self._number, text])
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class Recorder:
    """One run's inputs, as the audit hook and the read log see them, and what it printed."""

    def __init__(self, args: list[str]):
        from kubelint_ports.loading.read_log import ReadLog  # not at import: `--help` loads no loading

        self.args = args
        self.started = time.time_ns()
        self.opened: dict[str, list] = {}  # path -> its signature when opened
        self.listed: dict[str, list] = {}  # directory -> its signature when listed
        self.log = ReadLog()
        self.printed: list[list] = []
        self.directory: str | None = None  # the cache directory, once the run knows it may be memoised
        self.outputs: list[str] = []  # the report files the command line names
        self.key = ""
        self.tried: str | None = None  # the directory whose memo was tried before the settings
        self.streams: tuple = (sys.stdout, sys.stderr)  # the real ones, under the tees
        self.unsure = False  # the hook failed: the inputs are not all known
        self.ignored = tuple(os.path.join(os.path.abspath(prefix), "") for prefix in {
            sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.abspath(__file__))})

    def saw(self, event: str, args: tuple) -> None:
        if event == "open":
            path, _, flags = args
            if isinstance(flags, int) and flags & os.O_ACCMODE != os.O_RDONLY:
                return  # a write: the report, a temporary file, a cache entry
            table = self.opened
        elif event in ("os.listdir", "os.scandir"):
            path = args[0]
            table = self.listed
        else:
            return
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        elif not isinstance(path, str):
            path = os.fspath(path) if hasattr(path, "__fspath__") else None
            if not isinstance(path, str):
                return  # a descriptor (a cache entry, read relative to its directory)
        if not os.path.isabs(path) and path.endswith(ENTRY_SUFFIX):
            return  # a file cache entry, opened relative to the cache directory
        path = os.path.abspath(path or ".")
        if path + os.sep in self.ignored or path.startswith(self.ignored) or path.startswith(_NOT_INPUTS) or path.endswith((".py", ".pyc", ".so")):
            return
        if path not in table:
            table[path] = signature(path)


def _forget_in_child() -> None:
    """A forked worker (loading.pool) inherits the hook and the recorder: what it reads, the
    parent lists itself (`loading.read_log`), so the child records nothing."""
    _recorder[0] = None


os.register_at_fork(after_in_child=_forget_in_child)


def _hook(event: str, args: tuple) -> None:
    recorder = _recorder[0]
    if recorder is not None and event in ("open", "os.listdir", "os.scandir"):
        try:
            recorder.saw(event, args)
        except Exception:  # noqa: BLE001 (a hook must never break the run; the record says unsure)
            recorder.unsure = True


def given_directory(given: dict) -> str | None:
    """The cache directory when the command line or the environment name it (the first steps of
    `settings.cache_directory`); None: none, or the configuration's `cache-dir` may (known only
    once the run's settings are read, `decide`)."""
    from kubelint_ports.loading.file_cache import CACHE_ENV

    if given.get("no_cache", True):
        return None
    return given.get("cache_dir") or os.environ.get(CACHE_ENV) or None


def named_outputs(given: dict) -> list[str]:
    """The report files a `lint` command line names: --output, then each --report FORMAT:FILE."""
    from kubelint_ports.cli_options import parse_report

    reports = [parse_report(text)[1] for text in given.get("reports") or ()]
    return [str(path) for path in (given.get("output"), *reports) if path]


@contextmanager
def recording(args: list[str], given: dict, wanted: bool = True) -> Iterator[None]:
    """Run the block (a `lint` read from the command line `args`, its parsed options `given`),
    watching what it reads and prints (unless not `wanted`: another command). When the command
    line names the cache directory, a memo that still holds is replayed at once (exit with its
    code); else `decide`, once the run knows its directory, does. On the way out, the record is
    kept when the run may be memoised."""
    early = given_directory(given) if wanted else None
    if not wanted or given.get("no_cache") or (early is None and os.environ.get("CI", "").strip().lower() in (
            "1", "true", "yes")):  # no cache for this run, whatever the configuration says
        yield
        return
    recorder = Recorder(args)
    recorder.outputs = named_outputs(given)
    if early is not None:
        recorder.tried = early
        recorder.key = memo_key(args, recorder.outputs)
        code = replayed(early, recorder.key, recorder.outputs, (sys.stdout, sys.stderr))
        if code is not None:
            raise SystemExit(code)
    if not _hooked[0]:
        sys.addaudithook(_hook)  # cannot be removed: it does nothing once the recorder is gone
        _hooked[0] = True
    streams = recorder.streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Tee(sys.stdout, 1, recorder.printed), Tee(sys.stderr, 2, recorder.printed)
    _recorder[0] = recorder
    code = None
    from kubelint_ports.loading.read_log import logged

    try:
        with logged(recorder.log):
            yield
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else None
        if code is None or recorder.directory is None:
            raise
        # The run's frames (its model, its report) are done with: let them go before the record is
        # made, so a cold run's peak memory is the run's, not the run's plus the record's.
        import traceback

        traceback.clear_frames(exit_.__traceback__)
    finally:
        _recorder[0] = None
        sys.stdout, sys.stderr = streams
    if code is None:
        return  # the run ended without an exit code: nothing to replay
    record = make_record(recorder, code)
    if record is not None:
        from kubelint_ports.loading.file_cache import FileCache

        keep(FileCache(recorder.directory), f"{PREFIX}{record['key']}.json.z", record)
    raise SystemExit(code)


def decide(directory: str | None, paths, writes: bool) -> None:
    """In a run being recorded, once its settings are read: replay the memo of this command line
    and exit with its code when one applies (unless tried already); else go on recording when the
    run may be memoised (a cache directory, no standard input among `paths`, nothing written but
    reports: `writes` is --fix, --diff, --watch or --write-baseline), or stop."""
    from kubelint_ports.loading import STDIN

    recorder = _recorder[0]
    if recorder is None:
        return
    if directory is None or writes or STDIN in paths:
        _recorder[0] = None
        sys.stdout, sys.stderr = recorder.streams
        return
    recorder.directory = directory
    recorder.ignored += (os.path.join(os.path.abspath(directory), ""),)
    if recorder.tried == directory:
        return
    recorder.key = memo_key(recorder.args, recorder.outputs)
    code = replayed(directory, recorder.key, recorder.outputs, recorder.streams)
    if code is not None:
        recorder.directory = None  # replayed: nothing new to keep
        raise SystemExit(code)


def make_record(recorder: Recorder, code: int) -> dict | None:
    """The run's record, or None when it cannot vouch for its inputs."""
    outputs = recorder.outputs
    if recorder.log.children or recorder.unsure:
        return None
    recent = recorder.started - SETTLED_NS
    files, missing, directories = [], [], []
    opened = dict(recorder.opened)
    for path in recorder.log.elsewhere:
        opened.setdefault(os.path.abspath(path), None)
    hashed = {os.path.abspath(path): known for path, known in recorder.log.hashed.items()}
    for path, was in sorted(opened.items()):
        now = signature(path)
        if was is not None and now != was:
            return None  # changed during the run
        if now[0] == "missing":
            missing.append([path, now[1]])
        elif now[0] == stat.S_IFDIR:
            if max(now[2], now[3]) >= recent:
                return None
            directories.append([path, now, listing(path)])
        elif now[0] != stat.S_IFREG or max(now[2], now[3]) >= recent:
            return None  # a FIFO or device; or too recent for its times to vouch for its bytes
        else:
            status, digest = hashed.get(path, ((), None))
            if tuple(status) != (now[5], now[4], now[1], now[2], now[3]):  # not the bytes the cache hashed
                digest = content_hash(path, now[1])
            if digest is None:
                return None
            files.append([path, now, digest])
    for path, was in sorted(recorder.listed.items()):
        if signature(path) != was or (was[0] != "missing" and max(was[2], was[3]) >= recent):
            return None
        directories.append([path, was, listing(path)])
    names = probed_names()
    listed = {path for path, _, _ in directories}
    above: set[str] = set()
    for start in {os.getcwd(), *(os.path.dirname(path) for path, _, _ in files), *listed}:
        for ancestor in ancestors(start):
            if ancestor in above:
                break
            above.add(ancestor)
    probes = sorted([os.path.join(ancestor, name), signature(os.path.join(ancestor, name))[0]]
                    for ancestor in above - listed for name in names)
    written = []
    for path in outputs:
        try:
            status = os.lstat(path)  # a symlinked report is written through; a replay would replace it
        except OSError:
            return None
        digest = content_hash(path, status.st_size) if stat.S_ISREG(status.st_mode) else None
        if digest is None:
            return None
        written.append([path, status.st_size, digest])
    return {"format": FORMAT, "key": recorder.key, "outputs_named": outputs,
            "files": files, "missing": missing, "directories": directories, "probes": probes,
            "printed": recorder.printed, "written": written, "code": code}


def keep(cache, name: str, record: dict) -> None:
    """The record into the cache directory, whole (the file cache's write: temporary file, rename)."""
    data = zlib.compress(json.dumps(record, separators=(",", ":")).encode("utf-8", "surrogatepass"), 1)
    if len(data) > MAX_RECORD_BYTES or not cache.open():
        return
    try:
        cache._write_whole(name, data)
    finally:
        if cache.descriptor is not None:
            os.close(cache.descriptor)
            cache.descriptor = None
