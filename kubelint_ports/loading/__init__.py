"""Files, directories, standard input and Helm charts -> Kubernetes object documents with positions.

libyaml's C composer (PyYAML `CSafeLoader`) builds the node tree: it keeps line/column marks,
constructs no Python objects (so no tag can run code) and is the fastest marked path measured
here (see README, design notes). Aliases are shared nodes, never copied, and a document whose
aliases would expand past a budget is rejected before anything walks it.

A directory holding `Chart.yaml` is a Helm chart: it is rendered (`loading.helm`, imported only
then) and its raw `templates/` are never read as YAML. A directory holding a kustomization is
rendered the same way (`loading.kustomize`): its patches are fragments, not objects.

Trees are read once and let go. A `Document` keeps where it is, not its tree: the file (or the
bytes, for standard input and rendered charts), the character span of its root and the line and
column where it starts. Loading hands each document, its tree held, to a `reader` (the model's
extraction: `model.build.ModelReader`), then drops the tree: whatever the rules need must be
read into the model then. `Document.root` still works afterwards: it composes the document's span
again (the span padded with as many line breaks and spaces as precede it, so every mark is the
file's own), and `Document.location(field_path)` keeps its meaning for ANY field path, exact
path else deepest ancestor present. So a new field path in the model needs no bookkeeping to be
positionable; but a check that reads `document.root` pays a compose per call. Where positions are
wanted in bulk (findings), `held(documents)` composes each file's text once and each document
once, one at a time. A file that changed since it was read is noticed (CRC32 of its bytes); its
documents then point at their first recorded line, and `changed_sources` names it.

Large inputs are read by a process pool (`loading.pool`): each worker composes whole files and
runs the reader, and only the documents and the reader's pieces travel back, never trees.
"""

from __future__ import annotations

import bisect
import operator
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Protocol

import yaml

from kubelint_ports.findings import COMMAND_LINE, STDIN_NAME, Diagnostic, Location
from kubelint_ports.loading import budgets, files, yamltree
from kubelint_ports.loading.yamltree import MappingNode, Node, ScalarNode, SequenceNode

if TYPE_CHECKING:
    from kubelint_ports.loading.helm import HelmOptions

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json", ".conflist")  # .conflist: a CNI network configuration list
SKIPPED_DIRECTORIES = frozenset(("node_modules", "__pycache__"))  # never manifests, often huge
STDIN = "-"
# Empty standard input is an input error: `helm template ... | kubelint-ports lint -` whose first
# command failed must not pass as "nothing found".
EMPTY_STDIN = "standard input is empty: nothing was linted (did the command before the pipe fail?)"
CHART_FILE = "Chart.yaml"  # a directory holding it is a Helm chart
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")  # a Kustomize directory
KUSTOMIZATION_FILES_SET = frozenset(KUSTOMIZATION_FILES)

_SOURCE_LINE = re.compile(rb"# Source: ([^\r\n]+?)[ \t]*\r?")


class ManifestLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """Composes without implicit typing: the readers in `yamltree` type the few fields they read.

    PyYAML's resolver runs a Python regex per scalar, which costs more than libyaml's parsing.
    The composer also calls two resolver hooks per node that only path resolvers use (none here):
    C builtins that do nothing take their place (10% of compose time measured on the 10k corpus;
    `resolve` itself stays Python: replacing it with a C builtin measured no gain).
    """

    descend_resolver = operator.is_  # called as (parent, index): two arguments, no effect
    ascend_resolver = tuple  # called with none: returns the empty tuple singleton

    def resolve(self, kind, value, implicit):
        if kind is ScalarNode:
            return yamltree.PLAIN if implicit[0] else yamltree.STR
        return yamltree.SEQ if kind is SequenceNode else yamltree.MAP


# Annotations kept on every document: the pipeline's own (suppressions) and Helm's (test hooks).
KEPT_ANNOTATION_PREFIXES = ("kubelint-ports.io/", "helm.sh/")


@dataclass(slots=True, eq=False)
class SourceText:
    """Where a document's YAML can be read again: a file on disk, or bytes kept in memory
    (standard input, rendered Helm output). `digest` is the CRC32 of the bytes first composed."""

    file: str | None = None
    data: bytes | None = None
    digest: int = 0
    changed: bool = False  # the file no longer holds the bytes that were linted
    _held: tuple | None = None  # (bytes, text) while held

    def read(self) -> bytes | None:
        """The bytes that were composed, or None when the file cannot give them any more."""
        if self._held is not None:
            return self._held[0]
        data = self.data
        if data is None and self.file is not None:
            try:
                data = read_bytes(self.file, None)
            except OSError:
                data = None
        if data is None or zlib.crc32(data) != self.digest:
            self.changed = True
            return None
        return data

    def text(self) -> str | None:
        """The bytes as libyaml indexes them: characters of UTF-8, a leading BOM not counted."""
        if self._held is not None:
            return self._held[1]
        return _decoded(self.read())

    @contextmanager
    def held(self):
        """Read and decode once for every document composed inside."""
        if self._held is not None:
            yield
            return
        data = self.read()
        self._held = (data, _decoded(data))
        try:
            yield
        finally:
            self._held = None


def _decoded(data: bytes | None) -> str | None:
    if data is None or data[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16: indexes differ, compose it whole
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text[1:] if text.startswith("\ufeff") else text


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


@dataclass(slots=True, eq=False)
class Document:
    """One Kubernetes object: where it is (file, span) and, for Helm output, its template.

    The tree is held only while the model reads it (`_root`); afterwards `root` composes the
    document's span again. A Document built with a root (tests, embedded configs) keeps it.
    """

    path: str
    _root: MappingNode | None = None
    origin: str = ""  # `# Source:` template path of `helm template` output
    text_source: SourceText | None = None
    # (ordinal of the YAML document in its file, start index, end index, start line, start column)
    span: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)
    items: tuple[int, ...] = ()  # a `kind: List` member: its index in `items`, from the outer List down
    annotations: Mapping[str, str] | None = None  # those under KEPT_ANNOTATION_PREFIXES (None: none)
    # Places noted while the tree was held (`note`): field path -> (location, identity path).
    noted: dict[str, tuple[Location, str]] | None = None

    @property
    def root(self) -> MappingNode | None:
        if self._root is not None:
            return self._root
        return self.compose_again()

    @contextmanager
    def held(self):
        """Keep the tree for the calls inside (one compose for many positions)."""
        if self._root is not None:
            yield self._root
            return
        self._root = self.compose_again()
        try:
            yield self._root
        finally:
            self._root = None

    def compose_again(self) -> MappingNode | None:
        """The document's tree, composed from its span (or, failing that, from its whole file);
        None when the file no longer holds it."""
        source = self.text_source
        if source is None:
            return None
        ordinal, start, end, line, column = self.span
        text = source.text()
        if text is not None:
            padding = "\n" * line + " " * column
            try:
                root = next(budgets.compose_all(padding + text[start:end], loader=ManifestLoader), None)
            except yaml.YAMLError:
                root = None  # a %TAG directive or an alias from outside the span: compose the file
            if self._same(root, len(padding) - start):
                return root
        data = source.read()
        if data is None:
            return None
        try:
            for index, root in enumerate(budgets.compose_all(data, loader=ManifestLoader)):
                if index == ordinal:
                    for item in self.items:
                        root = yamltree.get(root, "items").value[item]
                    return root if self._same(root, 0) else None
        except (yaml.YAMLError, AttributeError, IndexError):
            pass
        return None

    def __reduce__(self):
        """Between processes a document travels as its place, never with its tree."""
        cls = type(self)
        names = _FIELD_NAMES.get(cls) or _FIELD_NAMES.setdefault(cls, tuple(f.name for f in fields(cls)))
        return cls, tuple(None if name == "_root" else getattr(self, name) for name in names)

    def _same(self, root: Node | None, shift: int) -> bool:
        _, start, end, line, column = self.span
        return (isinstance(root, MappingNode) and root.start_mark.line == line and root.start_mark.column == column
                and root.start_mark.index - shift == start and root.end_mark.index - shift == end)

    def note(self, field_path: str) -> None:
        """Keep the place of a field most likely to be reported (every hostPort is a finding), so
        positions need not compose this document again for it. Only a cache: `location` gives
        the same answer from a tree composed again."""
        if self._root is not None and type(self) is Document:
            if self.noted is None:
                self.noted = {}
            self.noted[field_path] = (self.location(field_path), self.identity_path(field_path))

    def has_noted(self, field_paths: Iterable[str]) -> bool:
        return self.noted is not None and all(path in self.noted for path in field_paths)

    def location(self, field_path: str = "", message: str = "") -> Location:
        if self.noted is not None and field_path in self.noted:
            location = self.noted[field_path][0]
            return location if not message else Location(location.path, location.line, location.column,
                                                         location.end_line, location.end_column, message)
        root = self.root
        if root is None:  # the file changed since it was linted: the object's first line
            _, _, _, line, column = self.span
            return Location(self.path, line + 1, column + 1, message=message)
        key_node, value_node = yamltree.resolve(root, field_path) if field_path else (None, root)
        start = (key_node or value_node).start_mark
        end = value_node.end_mark
        if isinstance(value_node, (MappingNode, SequenceNode)) and key_node is not None:
            end = key_node.end_mark  # a whole block would span many lines; the key is the place
        return Location(self.path, start.line + 1, start.column + 1, end.line + 1, end.column + 1, message)

    def identity_path(self, field_path: str) -> str:
        """`field_path` with list items named instead of counted (what fingerprints hash)."""
        if self.noted is not None and field_path in self.noted:
            return self.noted[field_path][1]
        return yamltree.identity_path(self.root, field_path)

    def node_location(self, node: Node) -> Location:
        """Where a node of this document is (a rendered Helm object maps it to its template)."""
        return node_location(self.path, node)

    def value_locations(self, field_path: str) -> tuple[Location, ...]:
        """Where the value at `field_path` is set when not in this file: the values-file lines of a
        rendered Helm object. Plain manifests hold their values themselves."""
        return ()


def held(documents: Iterable) -> Iterator:
    """Each document once, its tree held while the caller works on it, grouped by the text it
    comes from so each file is read and decoded once; one tree alive at a time. Places that are
    not documents (a line of a node's dump) pass through as they are."""
    by_source: dict[int, tuple[SourceText | None, dict[int, object]]] = {}
    for document in documents:
        source = getattr(document, "text_source", None)
        by_source.setdefault(id(source), (source, {}))[1].setdefault(id(document), document)
    for source, group in by_source.values():
        with source.held() if source is not None else nullcontext():
            for document in group.values():
                hold = getattr(document, "held", None)
                with hold() if hold is not None else nullcontext():
                    yield document


def changed_sources(documents: Iterable) -> list[str]:
    """Files that changed while being linted (their findings point at each object's first line)."""
    seen: dict[int, SourceText] = {}
    for document in documents:
        source = getattr(document, "text_source", None)
        if source is not None and source.changed:
            seen.setdefault(id(source), source)
    return sorted({display_path(source.file) for source in seen.values() if source.file})


class DocumentReader(Protocol):
    """What loading hands each document to while its tree is held (the model's extraction)."""

    def __call__(self, document: Document) -> None: ...

    def fresh(self) -> "DocumentReader":
        """An empty reader of the same kind, for a worker process."""

    def absorb(self, other: "DocumentReader") -> None:
        """Append what a worker's reader read, in input order."""


@dataclass(slots=True)
class LoadResult:
    documents: list[Document] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: int = 0
    skipped: int = 0  # YAML documents that are not Kubernetes objects
    notes: list[str] = field(default_factory=list)  # what was passed over and why (not errors)

    def absorb(self, other: "LoadResult") -> None:
        self.documents += other.documents
        self.diagnostics += other.diagnostics
        self.files += other.files
        self.skipped += other.skipped


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


def discover(paths: Iterable[str], notes: list[str] | None = None) -> Iterator[str]:
    """Files named directly, and manifest files below directories (sorted, hidden ones skipped).

    A Helm chart (a directory with `Chart.yaml`) is yielded as its directory, once, and not
    walked; a raw template file given directly yields its chart instead. So is a Kustomize
    directory, and a file given directly inside one (a patch, a base's resource) yields it. Below a
    directory only regular files are yielded, and symlinks only to targets inside it; what is passed
    over for that is said in `notes`.
    """
    charts: set[str] = set()
    kustomizations: dict[str, str | None] = {}  # directory -> its Kustomize directory, for files given
    notes = notes if notes is not None else []
    max_depth = budgets.current().max_depth

    def chart_once(directory: str) -> Iterator[str]:
        key = os.path.abspath(directory)
        if key not in charts:
            charts.add(key)
            yield directory

    for path in paths:
        if path == STDIN:
            yield path
            continue
        if not os.path.isdir(path):
            unit = _chart_of_template(path) or _kustomization_of(path, kustomizations)
            yield from chart_once(unit) if unit else (path,)
            continue
        for directory, subdirs, entries, walk_notes in files.walk_tree(path, max_depth):
            notes.extend(walk_notes)
            names = {entry.name for entry in entries}
            if CHART_FILE in names or not KUSTOMIZATION_FILES_SET.isdisjoint(names):
                subdirs[:] = []
                yield from chart_once(directory)
                continue
            subdirs[:] = [d for d in subdirs if not d.startswith(".") and d not in SKIPPED_DIRECTORIES]
            for entry in entries:
                if entry.name.endswith(MANIFEST_SUFFIXES) and not entry.name.startswith("."):
                    problem = files.entry_problem(entry, path)
                    if problem is None:
                        yield entry.path
                    else:
                        notes.append(f"{display_path(entry.path)}: skipped, {problem}")


def _chart_of_template(path: str) -> str | None:
    """The chart of a raw template file (`chart/templates/...`): cheap unless inside `templates/`."""
    directory = os.path.dirname(os.path.abspath(path))
    while os.path.dirname(directory) != directory:
        if os.path.basename(directory) == "templates" and os.path.isfile(
                os.path.join(os.path.dirname(directory), CHART_FILE)):
            from kubelint_ports.loading.helm import chart_of_template

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
         chart_helm: Mapping[str, HelmOptions] | None = None, exclude: Callable[[str], bool] | None = None,
         reader: DocumentReader | None = None, jobs: int = 1) -> LoadResult:
    """Read every input; `helm` renders charts (`chart_helm`: per chart directory, by absolute
    path) and maps `helm template` output to its templates; `exclude` skips paths. `reader` reads
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
    batch at its place in the input, so the result is the same whatever the workers."""

    def __init__(self, paths: Iterable[str], stdin=None, helm: HelmOptions | None = None, *,
                 chart_helm: Mapping[str, HelmOptions] | None = None, exclude: Callable[[str], bool] | None = None,
                 reader: DocumentReader | None = None, workers=None):
        self.stdin, self.helm, self.chart_helm, self.reader = stdin, helm, chart_helm or {}, reader
        self.result = LoadResult()
        self.paths = tuple(paths)
        given = []
        for path in self.paths:
            if path == STDIN or os.path.exists(path):
                given.append(path)
            else:  # a path the user typed: point at the command line, not at a line of no file
                self.result.diagnostics.append(Diagnostic(Location(COMMAND_LINE, 0, 0),
                                                          f"no such file or directory {display_path(path)!r}"))
        self.entries = [path for path in discover(given, self.result.notes)
                        if exclude is None or path == STDIN or not exclude(path)]
        self.batches = workers.batches(self.entries, helm, reader) if workers is not None and reader else {}

    def finish(self) -> LoadResult:
        result = self.result
        entries, batches, reader = self.entries, self.batches, self.reader
        kustomizations: list[str] = []  # rendered after the files: which of them are bases needs them all
        position = 0
        while position < len(entries):
            if position in batches:
                future, count = batches[position]
                worker_result, worker_reader = future.result()
                result.absorb(worker_result)
                reader.absorb(worker_reader)
                position += count
                continue
            path = entries[position]
            position += 1
            if path != STDIN and os.path.isdir(path) and not os.path.isfile(os.path.join(path, CHART_FILE)):
                kustomizations.append(path)
                continue
            if path != STDIN and os.path.isdir(path):
                from kubelint_ports.loading.helm import load_chart

                options = self.chart_helm.get(os.path.abspath(path), self.helm)
                read_guarded(path, result, lambda: load_chart(path, options, result, reader))
                continue
            read_guarded(path, result, lambda: load_file(path, result, stdin=self.stdin, helm=self.helm, reader=reader))
        if kustomizations:
            from kubelint_ports.loading.kustomize import load_kustomizations

            try:
                load_kustomizations(kustomizations, self.paths, result, reader)
            except Exception as error:  # a bug: name the builds, keep what the other inputs gave
                result.diagnostics.append(internal_error(", ".join(map(display_path, kustomizations)), error))
        return result


def read_guarded(path: str, result: LoadResult, read: Callable[[], None]) -> None:
    """`read()` one input within the `input-seconds` budget; past it, or on an unexpected failure
    (a bug), what it added is dropped and the input is reported by name: the others still count."""
    seconds = budgets.current().input_seconds
    before = (len(result.documents), len(result.diagnostics), result.files, result.skipped)
    try:
        with files.time_limit(seconds):
            read()
    except files.InputTimeout:
        forget_input(result, before)
        result.diagnostics.append(Diagnostic(Location(display_path(path), 0, 0), (
            f"reading it took longer than {seconds:g} s (limit input-seconds); not linted")))
    except Exception as error:  # a bug: name the input, keep the others
        forget_input(result, before)
        result.diagnostics.append(internal_error(display_path(path), error))


def load_file(path: str, result: LoadResult, *, stdin=None, helm: HelmOptions | None = None,
              reader: DocumentReader | None = None) -> None:
    """One manifest file (or standard input); `helm template` output maps to its chart."""
    shown = display_path(path)
    result.files += 1
    escape = files.symlink_escape(path) if path != STDIN else None
    if escape:
        result.diagnostics.append(Diagnostic(Location(shown, 0, 0), (
            f"not read: a symlink to {escape}, outside the current directory and its own")))
        return
    try:
        data = read_bytes(path, stdin)
    except OSError as error:
        result.diagnostics.append(Diagnostic(Location(shown, 0, 0), f"cannot read: {error.strerror or error}"))
        return
    limit = budgets.current().max_file_bytes
    if len(data) > limit:
        result.diagnostics.append(Diagnostic(
            Location(shown, 0, 0), f"file is over the {limit // 2**20} MiB limit (limit max-file-mib); not linted"))
        return
    if path == STDIN and not data.strip():
        result.diagnostics.append(Diagnostic(Location(shown, 0, 0), EMPTY_STDIN))
        return
    source = SourceText(file=None if path == STDIN else path, data=data if path == STDIN else None,
                        digest=zlib.crc32(data))
    mapper = None

    def mapped(document: Document) -> Document:
        nonlocal mapper
        if not document.origin:
            return document
        if mapper is None:
            from kubelint_ports.loading.helm import TemplateOutput

            mapper = TemplateOutput(helm)
        return mapper(document)

    load_bytes(data, shown, result, reader=reader, source=source, wrap=mapped,
               finish=lambda: mapper.finish() if mapper is not None else None)


def forget_input(result: LoadResult, before: tuple[int, int, int, int]) -> None:
    """Drop what a failed input added, but count it as read."""
    documents, diagnostics, files_read, skipped = before
    del result.documents[documents:], result.diagnostics[diagnostics:]
    result.files, result.skipped = files_read + 1, skipped


def internal_error(where: str, error: BaseException) -> Diagnostic:
    """An unexpected exception, reported against the input that caused it (exit code 3)."""
    return Diagnostic(Location(where, 0, 0), f"internal error (a bug in kubelint-ports; please report it): {type(error).__name__}: "
                                             f"{str(error)[:500]}", internal=True)


def read_bytes(path: str, stdin) -> bytes:
    limit = budgets.current().max_file_bytes
    if path == STDIN:
        import sys

        stream = stdin if stdin is not None else sys.stdin.buffer
        return stream.read(limit + 1)
    return files.read_file(path, limit, pipes=True)


def load_bytes(data: bytes, path: str, result: LoadResult, *, reader: DocumentReader | None = None,
               source: SourceText | None = None, wrap: Callable[[Document], Document | None] | None = None,
               finish: Callable[[], None] | None = None) -> None:
    """Parse one file's documents into `result`; a YAML error keeps the documents before it.

    Each document goes through `wrap` (None drops it), into `result`, and to `reader` while its
    tree is held; then the tree is let go. A document `wrap` replaced (a rendered Helm object)
    is read after `finish`, once the whole file is known (its template is matched by count).
    """
    if source is None:
        source = SourceText(data=data, digest=zlib.crc32(data))
    origins = source_comments(data)
    has_aliases = budgets.may_have_aliases(data)
    previous_end = -1
    deferred: list[Document] = []
    pieces, stopped = None, False
    if len(data) >= SPLIT_MIN_BYTES and not has_aliases and not origins[0] and b"\nitems:" in data:
        pieces = split_list(data)
    try:
        for ordinal, root, shift in pieces if pieces is not None else (
                (ordinal, root, 0) for ordinal, root in enumerate(
                    budgets.compose_all(data, loader=ManifestLoader, expand_check=False))):
            found: list[Document] = []
            if ordinal < 0:  # a run of items of a split List: each is a document
                if stopped:
                    break
                try:
                    for index, item in enumerate(root.value):
                        add_document(item, path, "", result, found, source=source, items=(-ordinal - 1 + index,),
                                     shift=shift)
                except (budgets.LimitError, yamltree.FieldTypeError) as error:  # as when composed whole: the List stops there
                    result.diagnostics.append(Diagnostic(node_location(path, error.node), str(error)))
                    stopped = True
            else:
                start_line = root.start_mark.line
                origin = origin_for(origins, previous_end, start_line)
                previous_end = root.end_mark.line
                try:
                    if has_aliases:
                        budgets.check_expansion(root)
                    add_document(root, path, origin, result, found, source=source, ordinal=ordinal)
                except (budgets.LimitError, yamltree.FieldTypeError) as error:
                    result.diagnostics.append(Diagnostic(node_location(path, error.node), str(error)))
            for document in found:
                kept = wrap(document) if wrap is not None else document
                if kept is not None:
                    result.documents.append(kept)
                    if kept is not document and reader is not None:
                        deferred.append(kept)  # keeps its tree until the file is done
                        continue
                    if reader is not None:
                        reader(kept)
                    kept._root = None
                document._root = None
    except budgets.LimitError as error:  # over a budget before composing: the place the scan found
        mark = error.problem_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        result.diagnostics.append(Diagnostic(Location(path, line, column), str(error)))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = " ".join(filter(None, (error.context, error.problem)))
        result.diagnostics.append(Diagnostic(Location(path, line, column), f"invalid YAML: {problem}"))
    except yaml.YAMLError as error:  # reader errors: bad encoding, control characters
        position = getattr(error, "position", 0) or 0
        line = data.count(b"\n", 0, position) + 1
        reason = getattr(error, "reason", "") or str(error)
        result.diagnostics.append(Diagnostic(Location(path, line, 1), f"unreadable YAML: {reason}"))
    if finish is not None:
        finish()
    for document in deferred:
        reader(document)
        document._root = None


SPLIT_MIN_BYTES = 1024 * 1024
SPLIT_CHUNK_CHARS = 256 * 1024
_ITEMS_LINE = re.compile(r"^items:[ \t]*$", re.MULTILINE)
_DOCUMENT_MARKERS = re.compile(r"^(---|\.\.\.|%)", re.MULTILINE)
_CONTENT_LINE = re.compile(r"^( *)([^ \n#])", re.MULTILINE)  # the first line that is neither blank nor a comment


def split_list(data: bytes):
    """A big `kind: List` file (`kubectl get nodes -o yaml`: one YAML document) composed a run of
    items at a time, so no tree of the whole inventory is ever built (5,000 nodes: 24 MB of YAML,
    ~700 MB as one tree).

    Returns what the whole-file compose would give, as (ordinal, root, shift): first the List
    without its items (the items block left as blank lines, so every other mark stays the
    file's), then, per run of items, (-1 - index of its first item, the sequence node, index
    shift). A run is composed from the file's own text padded with the line breaks before it, so
    its marks are exact, and `shift` turns its character indexes into the file's. None when the
    file is not one plain List with a block `items:` sequence, or a run does not parse on its own:
    it is then composed whole, as any other file."""
    text = _decoded(data)
    if text is None or any(c in text for c in "\r\x85\u2028\u2029") or _DOCUMENT_MARKERS.search(text):
        return None
    found = list(_ITEMS_LINE.finditer(text))
    if len(found) != 1:
        return None
    items_line = found[0]
    block_start = items_line.end() + 1
    first_item = _CONTENT_LINE.search(text, block_start)
    if first_item is None or first_item.group(2) != "-":
        return None
    indent = len(first_item.group(1))
    if indent == 0:
        block_end_pattern = re.compile(r"^(?:[^\s#-]|-[^ \n])", re.MULTILINE)
    else:
        block_end_pattern = re.compile(rf"^ {{0,{indent - 1}}}[^ \n#]", re.MULTILINE)
    end_match = block_end_pattern.search(text, block_start)
    block_end = end_match.start() if end_match else len(text)
    if indent and re.compile(rf"^ {{{indent}}}(?:[^ \n#-]|-[^ \n])", re.MULTILINE).search(text, block_start, block_end):
        return None  # something at the items' indentation that is not an item
    starts = [match.start() for match in
              re.compile(rf"^ {{{indent}}}-(?: |$)", re.MULTILINE).finditer(text, block_start, block_end)]
    skeleton = (text[:items_line.start()] + "items: []" + "\n" * text.count("\n", items_line.end(), block_end)
                + text[block_end:])
    bounds: list[int] = []
    for start in starts:
        if not bounds or start - bounds[-1] >= SPLIT_CHUNK_CHARS:
            bounds.append(start)
    chunks = list(zip(bounds, bounds[1:] + [block_end]))
    try:  # the List around the items, and every run, parse alone: else compose the file whole
        for piece in (skeleton, *(text[start:end] for start, end in chunks)):
            budgets.check_text(piece)  # each run is a document's worth: the budgets apply per run
            ManifestLoader(piece).raw_parse()
        outline = next(yaml.compose_all(skeleton, Loader=ManifestLoader))
    except yaml.YAMLError:
        return None
    kind = yamltree.get(outline, "kind")
    if not (isinstance(kind, ScalarNode) and kind.value.endswith("List") and yamltree.get(outline, "apiVersion")):
        return None
    return _split_documents(text, outline, chunks)


def _split_documents(text: str, outline: MappingNode, chunks: list[tuple[int, int]]):
    yield 0, outline, 0
    first, lines, counted = 0, 0, 0
    for start, end in chunks:
        lines += text.count("\n", counted, start)
        counted = start
        padding = "\n" * lines
        run = next(yaml.compose_all(padding + text[start:end], Loader=ManifestLoader))
        yield -1 - first, run, start - len(padding)
        first += len(run.value)


def node_location(path: str, node: Node) -> Location:
    mark = node.start_mark
    return Location(path, mark.line + 1, mark.column + 1)


def source_comments(data: bytes) -> tuple[list[int], list[str]]:
    """Line numbers (0-based) and paths of `# Source:` comments written by `helm template`
    (found with `bytes.find`: a multi-line regex over every line of a big file cost 0.1 s here)."""
    lines: list[int] = []
    sources: list[str] = []
    line, position = 0, 0
    start = data.find(b"# Source:")
    while start != -1:
        end = data.find(b"\n", start)
        end = len(data) if end == -1 else end
        if start == 0 or data[start - 1] == 0x0A:  # at a line start
            match = _SOURCE_LINE.fullmatch(data, start, end)
            if match:
                line += data.count(b"\n", position, start)
                position = start
                lines.append(line)
                sources.append(match.group(1).decode("utf-8", "replace"))
        start = data.find(b"# Source:", end)
    return lines, sources


def origin_for(origins: tuple[list[int], list[str]], previous_end: int, start_line: int) -> str:
    lines, sources = origins
    index = bisect.bisect_right(lines, start_line) - 1
    if index >= 0 and lines[index] >= previous_end:
        return sources[index]
    return ""


def add_document(root: Node, path: str, origin: str, result: LoadResult, found: list[Document], *,
                 source: SourceText | None = None, ordinal: int = 0, items: tuple[int, ...] = (),
                 shift: int = 0) -> None:
    """The Kubernetes objects of one composed document (`kind: List` members each) into `found`,
    their trees held."""
    if yamltree.is_null(root):
        return  # an empty document between `---` separators
    if not isinstance(root, MappingNode):
        result.diagnostics.append(Diagnostic(
            node_location(path, root), f"document is {yamltree.describe(root)}, not a Kubernetes object mapping"))
        return
    api_version = yamltree.get(root, "apiVersion")
    kind = yamltree.get(root, "kind")
    if api_version is None or kind is None:
        if yamltree.get(root, "cniVersion") is not None and yamltree.get(root, "plugins") is not None:
            add_found(root, path, origin, found, source, ordinal, items, shift)  # a CNI conflist: the model reads facts
            return
        result.skipped += 1
        return
    kind_text = yamltree.as_str(kind)
    list_items = yamltree.get(root, "items")
    if kind_text.endswith("List") and list_items is not None:
        for index, item in enumerate(yamltree.items(list_items, "items")):
            add_document(item, path, origin, result, found, source=source, ordinal=ordinal, items=(*items, index),
                         shift=shift)
        return
    add_found(root, path, origin, found, source, ordinal, items, shift)


def add_found(root: MappingNode, path: str, origin: str, found: list[Document], source: SourceText | None,
              ordinal: int, items: tuple[int, ...], shift: int) -> None:
    start, end = root.start_mark, root.end_mark
    found.append(Document(path, root, origin, source, (ordinal, start.index + shift, end.index + shift, start.line,
                                                       start.column), items, kept_annotations(root)))


def kept_annotations(root: MappingNode) -> Mapping[str, str] | None:
    """The annotations the pipeline reads later (suppressions, Helm hooks), as plain text."""
    node = yamltree.get(yamltree.get(root, "metadata"), "annotations")
    if not isinstance(node, MappingNode):
        return None
    kept = {key.value: value.value for key, value in yamltree.pairs(node)
            if isinstance(key, ScalarNode) and isinstance(value, ScalarNode)
            and isinstance(key.value, str) and key.value.startswith(KEPT_ANNOTATION_PREFIXES)}
    return kept or None
