"""A document of the inputs: where a Kubernetes object is (file or kept bytes, character span,
first line and column), never its tree once the model has read it; `location(field_path)` composes
the span again to find any field. Also `LoadResult`, what a load gives, and `read_guarded`, one
input read within its time budget.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import field, fields, replace
from typing import Protocol

import yaml

from kubelint_ports.records import record
from kubelint_ports.vocabulary import Diagnostic, Location
from kubelint_ports.loading import budgets, files
from kubelint_ports.loading.paths import STDIN, display_path
from kubelint_ports.loading.yaml_files import yamltree
from kubelint_ports.loading.yaml_files.loader import ManifestLoader
from kubelint_ports.loading.yaml_files.yamltree import MappingNode, Node, SequenceNode

# Empty standard input is an input error: `helm template ... | kubelint-ports lint -` whose first
# command failed must not pass as "nothing found".
EMPTY_STDIN = "standard input is empty: nothing was linted (did the command before the pipe fail?)"

# Annotations kept on every document: the pipeline's own (suppressions) and Helm's (test hooks).
KEPT_ANNOTATION_PREFIXES = ("kubelint-ports.io/", "helm.sh/")

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


@record(slots=True, eq=False)
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
        return decoded_text(self.read())

    @contextmanager
    def held(self):
        """Read and decode once for every document composed inside."""
        if self._held is not None:
            yield
            return
        data = self.read()
        self._held = (data, decoded_text(data))
        try:
            yield
        finally:
            self._held = None


def decoded_text(data: bytes | None) -> str | None:
    if data is None or data[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16: indexes differ, compose it whole
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text[1:] if text.startswith("\ufeff") else text


@record(slots=True, eq=False)
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
    # Where an object without metadata.namespace lands, when the input says: a chart's release
    # namespace (`--namespace`, per-chart `namespace:`), as `helm install -n` would place it.
    namespace: str = ""
    # The deployment unit the object lands in when the input says (a Kustomize overlay's build);
    # "": decided by the model (the config's `units:`, GitOps objects) or the run's one unit.
    unit: str = ""

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
            return location if not message else replace(location, message=message)
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


@record(slots=True)
class LoadResult:
    documents: list[Document] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: int = 0
    skipped: int = 0  # YAML documents that are not Kubernetes objects
    notes: list[str] = field(default_factory=list)  # what was passed over and why (not errors)
    # Charts rendered once per values set (`inputs.Loading`): (the set's unit, its values files).
    value_sets: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def absorb(self, other: "LoadResult") -> None:
        self.documents += other.documents
        self.diagnostics += other.diagnostics
        self.files += other.files
        self.skipped += other.skipped


def internal_error(where: str, error: BaseException) -> Diagnostic:
    """An unexpected exception, reported against the input that caused it (exit code 3)."""
    return Diagnostic(Location(where, 0, 0), f"internal error (a bug in kubelint-ports; please report it): {type(error).__name__}: "
                                             f"{files.shortened(str(error)[:500])}", internal=True)


def read_bytes(path: str, stdin, *, no_symlink: bool = False) -> bytes:
    limit = budgets.current().max_file_bytes
    if path == STDIN:
        import sys

        stream = stdin if stdin is not None else sys.stdin.buffer
        return stream.read(limit + 1)
    return files.read_file(path, limit, pipes=True, no_symlink=no_symlink)


def node_location(path: str, node: Node) -> Location:
    mark = node.start_mark
    return Location(path, mark.line + 1, mark.column + 1)


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


def forget_input(result: LoadResult, before: tuple[int, int, int, int]) -> None:
    """Drop what a failed input added, but count it as read."""
    documents, diagnostics, files_read, skipped = before
    del result.documents[documents:], result.diagnostics[diagnostics:]
    result.files, result.skipped = files_read + 1, skipped
