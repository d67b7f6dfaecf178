"""What the command line names -> the inputs read: files, directories walked (only regular files,
no recursion), Helm charts (directories, and packaged charts named directly) and Kustomize
directories rendered, large inputs read by worker processes; every input within its time budget,
a bug on one input reported as an internal error.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from kubelint_ports.loading import budgets, file_cache, files
from kubelint_ports.loading.kustomize import KUSTOMIZATION_FILES, KUSTOMIZATION_FILES_SET
from kubelint_ports.loading.paths import STDIN, display_path
from kubelint_ports.loading.yaml_files.documents import DocumentReader, LoadResult, internal_error, read_guarded
from kubelint_ports.loading.yaml_files.manifests import load_file
from kubelint_ports.vocabulary import COMMAND_LINE, Diagnostic, Location

if TYPE_CHECKING:
    from kubelint_ports.loading.helm.chart import HelmOptions

    # Per chart (absolute path): its options, or the configuration's (chart, options) pairs.
    ChartOptions = Mapping[str, HelmOptions] | Sequence[tuple[str, HelmOptions]]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json", ".conflist")  # .conflist: a CNI network configuration list

SKIPPED_DIRECTORIES = frozenset(("node_modules", "__pycache__"))  # never manifests, often huge

CHART_FILE = "Chart.yaml"  # a directory holding it is a Helm chart

ARCHIVE_SUFFIXES = (".tgz", ".tar.gz")  # a packaged Helm chart, when named directly


def discover(paths: Iterable[str], notes: list[str] | None = None,
             walked_files: set[str] | None = None) -> Iterator[str]:
    """Files named directly, and manifest files below directories (sorted, hidden ones skipped).

    A Helm chart (a directory with `Chart.yaml`) is yielded as its directory, once, and not
    walked; a raw template file given directly yields its chart instead. So is a Kustomize
    directory, and a file given directly inside one (a patch, a base's resource) yields it. Below a
    directory only regular files are yielded, and symlinks only to targets inside it; what is passed
    over for that is said in `notes`.

    Each input is yielded once, at its first place, however often it is named (`lint k8s
    k8s/app.yaml`, a directory and its parent, a symlink and its target): by its real path.
    Regular files yielded from a directory walk that are no symlinks are added to `walked_files`:
    the caller need not ask the system again what they are.
    """
    seen: set[str] = set()
    kustomizations: dict[str, str | None] = {}  # directory -> its Kustomize directory, for files given
    notes = notes if notes is not None else []
    max_depth = budgets.current().max_depth

    def once(path: str, key: str | None = None) -> Iterator[str]:
        key = key or os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            yield path

    for path in paths:
        if path == STDIN:
            yield path
            continue
        if not os.path.isdir(path):
            unit = None if is_packaged_chart(path) else (
                _chart_of_template(path) or _kustomization_of(path, kustomizations))
            yield from once(unit or path)
            continue
        ignored = files.git_ignored(path)
        # A walked subdirectory is no symlink (the walk never follows one): its real path is its
        # parent's and its name, so only the top is resolved (realpath per directory: 0.15 s at 12k).
        real_of = {path: os.path.realpath(path)}
        for directory, subdirs, entries, walk_notes in files.walk_tree(path, max_depth):
            notes.extend(walk_notes)
            names = {entry.name for entry in entries}
            if (CHART_FILE in names or not KUSTOMIZATION_FILES_SET.isdisjoint(names)) and \
                    (directory == path or not ignored(directory, True)):
                subdirs[:] = []
                yield from once(directory)
                continue
            subdirs[:] = [d for d in subdirs if not d.startswith(".") and d not in SKIPPED_DIRECTORIES
                          and not files.is_virtualenv(os.path.join(directory, d))
                          and not ignored(os.path.join(directory, d), True)]
            real_directory = real_of.pop(directory, None) or os.path.realpath(directory)
            for name in subdirs:
                real_of[os.path.join(directory, name)] = os.path.join(real_directory, name)
            for entry in entries:
                if entry.name.endswith(MANIFEST_SUFFIXES) and not entry.name.startswith(".") and \
                        not ignored(entry.path, False):
                    problem = files.entry_problem(entry, path)
                    if problem is None:
                        if entry.is_symlink():
                            key = os.path.realpath(entry.path)
                        else:
                            key = os.path.join(real_directory, entry.name)
                        if walked_files is not None and not entry.is_symlink():
                            walked_files.add(entry.path)
                        yield from once(entry.path, key)
                    else:
                        notes.append(f"{display_path(entry.path)}: skipped, {problem}")


# --- hook: walks kept between runs by a caller that knows when the file tree changes ----------
_kept_walks: list[dict] = []


@contextmanager
def kept_walks(walks: dict) -> Iterator[dict]:
    """Inside the block, `discover` of the same paths (same budgets, same working directory) is
    answered from `walks` when it holds that walk, and the walk is kept there when not. The caller
    owns the rule of when the tree may have changed and empties `walks` then: the language server
    does on a save and on a watched-files notification (server/workspace.py), so a file created on
    disk is seen at the latest then. Walking 6,800 files again was 0.05 s of each edit's run."""
    _kept_walks.append(walks)
    try:
        yield walks
    finally:
        _kept_walks.pop()


def discover_kept(paths: Sequence[str], notes: list[str], walked_files: set[str]) -> list[str]:
    """`discover(paths, notes, walked_files)` as a list, from the kept walks when inside
    `kept_walks` (the notes it gave said again, its walked files added)."""
    if not _kept_walks:
        return list(discover(paths, notes, walked_files))
    walks = _kept_walks[-1]
    key = (tuple(paths), budgets.current().max_depth, os.getcwd())
    if key not in walks:
        own_notes: list[str] = []
        own_walked: set[str] = set()
        walks[key] = (list(discover(paths, own_notes, own_walked)), own_notes, frozenset(own_walked))
    found, own_notes, own_walked = walks[key]
    notes.extend(own_notes)
    walked_files.update(own_walked)
    return list(found)


def is_packaged_chart(path: str) -> bool:
    """A packaged Helm chart named directly, rendered like a chart directory: a file named like
    one (`helm package`'s `mychart-1.2.3.tgz`, `.tar.gz`; the archive reader says when it is not
    gzip), or any other file of gzip data, as `helm template` takes it. Files found in a directory
    walk are manifests by their names, never archives."""
    if path == STDIN or path.endswith(MANIFEST_SUFFIXES):
        return False
    try:
        if not os.path.isfile(path):  # never opened otherwise: a FIFO would block
            return False
        if path.endswith(ARCHIVE_SUFFIXES):
            return True
        with open(path, "rb") as handle:
            return handle.read(2) == b"\x1f\x8b"  # gzip (helm_archive.GZIP_MAGIC, not imported for this)
    except OSError:
        return False


def _chart_of_template(path: str) -> str | None:
    """The chart of a raw template file (`chart/templates/...`): cheap unless inside `templates/`."""
    directory = os.path.dirname(os.path.abspath(path))
    while os.path.dirname(directory) != directory:
        if os.path.basename(directory) == "templates" and os.path.isfile(
                os.path.join(os.path.dirname(directory), CHART_FILE)):
            from kubelint_ports.loading.helm.charts import chart_of_template

            return chart_of_template(path)
        directory = os.path.dirname(directory)
    return None


def is_kustomization(directory: str) -> bool:
    return any(os.path.isfile(os.path.join(directory, name)) for name in KUSTOMIZATION_FILES)


def _kustomization_of(path: str, known: dict[str, str | None]) -> str | None:
    """The Kustomize directory a file belongs to: the nearest one above it, within its repository."""
    directory = os.path.dirname(os.path.abspath(path))
    climbed: list[str] = []
    found = None
    while directory not in known:
        climbed.append(directory)
        if is_kustomization(directory):
            found = directory
            break
        parent = os.path.dirname(directory)
        if parent == directory or os.path.exists(os.path.join(directory, ".git")):
            break  # a kustomization above the repository is not this project's
        directory = parent
    else:
        found = known[directory]
    for seen in climbed:
        known[seen] = found
    if found is None:
        return None
    return found if os.path.isabs(path) else os.path.relpath(found)


def load(paths: Iterable[str], stdin=None, helm: HelmOptions | None = None, *,
         chart_helm: ChartOptions | None = None, exclude: Callable[[str], bool] | None = None,
         reader: DocumentReader | None = None, jobs: int = 1) -> LoadResult:
    """Read every input; `helm` renders charts (`chart_helm`: per chart directory, by absolute
    path; a chart given several values sets is rendered once per set, see `Loading`) and maps
    `helm template` output to its templates; `exclude` skips paths. `reader` reads
    each document while its tree is held; with `jobs` > 1 large inputs are read by that many
    worker processes (see `Loading` to share them between several loads).

    Each input is read within the `input-seconds` budget, and an unexpected failure on one input
    is an internal error naming it: the other inputs are still read."""
    if jobs > 1 and reader is not None:
        from kubelint_ports.loading.pool import Workers

        with Workers(jobs) as workers:
            return Loading(paths, stdin, helm, chart_helm=chart_helm, exclude=exclude, reader=reader,
                           workers=workers).finish()
    return Loading(paths, stdin, helm, chart_helm=chart_helm, exclude=exclude, reader=reader).finish()


class Loading:
    """One load in two steps: created, it hands its large inputs' files to `workers` (a
    `loading.pool.Workers`), in batches; `finish` reads the rest in this process and absorbs each
    batch at its place in the input, so the result is the same whatever the workers.

    `chart_helm` gives charts their own options: a mapping (chart's absolute path -> options), or
    the configuration's (chart, options) pairs, where a chart may come once per values set. Such a
    chart is set aside and, after the other inputs, rendered once per set, each set's objects in
    its own deployment unit (`Document.unit`, named by `helm.value_sets.value_set_units`); the
    result's `value_sets` says which unit each set is, with its values files."""

    def __init__(self, paths: Iterable[str], stdin=None, helm: HelmOptions | None = None, *,
                 chart_helm: ChartOptions | None = None, exclude: Callable[[str], bool] | None = None,
                 reader: DocumentReader | None = None, workers=None):
        self.stdin, self.helm, self.reader, self.workers = stdin, helm, reader, workers
        self.chart_helm: dict[str, HelmOptions] = {}
        self.value_sets: dict[str, list[HelmOptions]] = {}  # charts rendered once per values set
        self.set_aside: list[str] = []  # those among the inputs, in input order
        if chart_helm:  # only then: a run without charts never imports the Helm package
            from kubelint_ports.loading.helm.value_sets import chart_pairs, several_value_sets

            pairs = chart_pairs(chart_helm)
            self.chart_helm = dict(pairs)
            self.value_sets = several_value_sets(pairs)
        self.result = LoadResult()
        self.paths = tuple(paths)
        given = []
        for path in self.paths:
            if path == STDIN or os.path.exists(path):
                given.append(path)
            else:  # a path the user typed: point at the command line, not at a line of no file
                self.result.diagnostics.append(Diagnostic(Location(COMMAND_LINE, 0, 0),
                                                          f"no such file or directory {display_path(path)!r}"))
        self.walked_files: set[str] = set()  # regular files found walking: no directory nor symlink test
        self.entries = [path for path in discover_kept(given, self.result.notes, self.walked_files)
                        if path == STDIN or not self._excluded(path, exclude)]
        self.archives = {path for path in self.paths if is_packaged_chart(path)}
        # Charts render in this process: a packaged one is held back from the workers as stdin is.
        batched = [STDIN if path in self.archives else path for path in self.entries]
        self.batches = (workers.batches(batched, helm, reader, self.walked_files)
                        if workers is not None and reader else {})

    def _excluded(self, path: str, exclude: Callable[[str], bool] | None) -> bool:
        """Skipped (the config's `exclude`), or set aside: a chart rendered once per values set."""
        if exclude is not None and exclude(path):
            return True
        if self.value_sets and os.path.abspath(path) in self.value_sets:
            self.set_aside.append(path)
            return True
        return False

    def finish(self) -> LoadResult:
        with files.time_limits():  # each input's own budget below sets only its timer
            result = self._finish()
        if self.set_aside:
            self._render_value_sets(result)
        return result

    def _render_value_sets(self, result: LoadResult) -> None:
        """Each chart set aside rendered once per values set into `result` (and the reader), its
        objects in the set's unit (`Document.unit`); (unit, values files) of each in
        `result.value_sets`, so that the configuration's `units:` may place a set by its file."""
        from kubelint_ports.loading.helm.value_sets import value_set_units

        rendered = []
        for chart in self.set_aside:
            sets = self.value_sets[os.path.abspath(chart)]
            files_read = 0
            for unit, helm in zip(value_set_units(chart, sets), sets):
                one = Loading([chart], helm=helm, reader=self.reader, workers=self.workers).finish()
                for document in one.documents:
                    document.unit = unit
                files_read = max(files_read, one.files)  # the chart's files, read once per set
                one.files = 0
                result.absorb(one)
                result.notes += [note for note in one.notes if note not in result.notes]
                rendered.append((unit, tuple(helm.values)))
            result.files += files_read
        result.value_sets = tuple(rendered)

    def _finish(self) -> LoadResult:
        result = self.result
        entries, batches, reader = self.entries, self.batches, self.reader
        kustomizations: list[str] = []  # rendered after the files: which of them are bases needs them all
        # hook: a cache that hands walked files on unread, from memory (the language server's)
        unread_all = getattr(file_cache.active(), "unread_all", None)
        self._run_end = 0
        position = 0
        while position < len(entries):
            if position in batches:
                future, count = batches[position]
                worker_result, worker_reader, remembered = future.result()
                if remembered:  # hook: each file's pieces, for the cache kept in memory (memory_cache)
                    file_cache.active().adopt(remembered, self.helm, reader)
                result.absorb(worker_result)
                reader.absorb(worker_reader)
                position += count
                continue
            path = entries[position]
            if unread_all is not None and path in self.walked_files:
                handed = self._unread(unread_all, position)
                if handed:
                    position += handed
                    continue
            position += 1
            directory = path != STDIN and path not in self.walked_files and os.path.isdir(path)
            if directory and not os.path.isfile(os.path.join(path, CHART_FILE)):
                kustomizations.append(path)
                continue
            if path in self.archives or directory:
                from kubelint_ports.loading.helm.charts import load_chart

                options = self.chart_helm.get(os.path.abspath(path), self.helm)
                read_guarded(path, result, lambda: load_chart(path, options, result, reader, named=self.paths))
                continue
            read_guarded(path, result, lambda: load_file(path, result, stdin=self.stdin, helm=self.helm, reader=reader,
                                                         walked=path in self.walked_files))
        if kustomizations:
            from kubelint_ports.loading.kustomize.load import load_kustomizations

            try:
                read = load_kustomizations(kustomizations, self.paths, result, reader)
            except Exception as error:  # a bug: name the builds, keep what the other inputs gave
                result.diagnostics.append(internal_error(", ".join(map(display_path, kustomizations)), error))
            else:
                self._outside_builds(read, result, reader)
        return result

    def _unread(self, unread_all, position: int) -> int:
        """How many walked files from `position` on `unread_all` handed on, unread, from what the
        cache kept of them in memory (their status says they are unchanged), at once and outside
        the input's time limit: a timer set and cleared per file (two system calls) and the hand-on
        file by file were most of an edit's run in the language server, where nearly every file is
        handed on so. The run of walked files ends at a worker's batch. A failure (a bug) is left
        to the guarded read that follows."""
        entries = self.entries
        if position >= self._run_end:
            end = position
            while end < len(entries) and end not in self.batches and entries[end] in self.walked_files:
                end += 1
            self._run_end = end
        try:
            handed = unread_all(entries, position, self._run_end, self.helm, self.result, self.reader)
        except Exception:  # noqa: BLE001 (read again below, where a failure is reported by name)
            return 0
        self.result.files += handed  # as `load_file` counts each
        return handed

    def _outside_builds(self, read: dict[str, frozenset[str]], result: LoadResult, reader) -> None:
        """A file named on the command line stands for the Kustomize directory above it; when that
        build does not read it (a manifest beside a kustomization.yaml that does not list it), it is
        linted on its own, with a note, rather than dropped without a word."""
        known: dict[str, str | None] = {}
        builds = {os.path.realpath(directory): files for directory, files in read.items()}
        for path in self.paths:
            if path == STDIN or os.path.isdir(path) or path in self.archives or _chart_of_template(path):
                continue
            directory = _kustomization_of(path, known)
            files = builds.get(os.path.realpath(directory)) if directory else None
            if files is None or os.path.realpath(path) in files:
                continue
            result.notes.append(f"{display_path(path)}: not part of the Kustomize build of "
                                f"{display_path(directory)}; linted on its own")
            read_guarded(path, result, lambda: load_file(path, result, stdin=self.stdin, helm=self.helm, reader=reader,
                                                         walked=False))
