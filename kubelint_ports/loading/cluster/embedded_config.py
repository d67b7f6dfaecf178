"""YAML or JSON held in a ConfigMap value (kube-proxy's `config.conf`, kubeadm's
`ClusterConfiguration`, flannel's `net-conf.json`), composed on its own under loading's budgets.

`EmbeddedDocument` maps the embedded text's marks back into the file, so a finding points at
`clusterCIDR:` inside a `config.conf: |` block. When the value's style does not keep lines and
columns (folded, escaped, or the file cannot be read again), positions fall back to the value's key.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from kubelint_ports.loading.yaml_files.documents import Document
from kubelint_ports.loading.yaml_files.loader import ManifestLoader
from kubelint_ports.loading import budgets, files
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.records import record
from kubelint_ports.vocabulary import STDIN_NAME, Diagnostic, Location

MAX_EMBEDDED_CHARS = 1024 * 1024


@record(eq=False, slots=True)
class EmbeddedDocument:
    """A YAML or JSON document held in a ConfigMap value, located inside the file that holds it.

    Field paths under `prefix` (`data."config.conf".clusterCIDR`) resolve inside the embedded
    text; any other path resolves in the ConfigMap itself. When the value's style does not keep
    lines and columns (folded, escaped, or the file cannot be read again), positions fall back to
    the value's key.
    """

    outer: Document
    prefix: str
    root: yt.Node | None
    first_line: int = -1  # 0-based file line of the embedded text's line 0; -1: fall back to the key
    column: int = 0  # 0-based file column of the embedded text's column 0
    block: bool = False  # a literal block: every line is shifted by `column`, not only line 0

    @property
    def path(self) -> str:
        return self.outer.path

    @property
    def origin(self) -> str:
        return self.outer.origin

    @property
    def text_source(self):
        return self.outer.text_source

    def held(self):
        """The ConfigMap's tree, for positions outside the embedded text (its own tree is kept)."""
        return self.outer.held()

    @property
    def mapped(self) -> bool:
        return self.root is not None and self.first_line >= 0

    def location(self, field_path: str = "", message: str = "") -> Location:
        inner = self.inner_path(field_path)
        if inner is None:
            return self.outer.location(field_path, message)
        if not self.mapped:
            return self.outer.location(self.prefix, message)
        key_node, value_node = yt.resolve(self.root, inner) if inner else (None, self.root)
        start = (key_node or value_node).start_mark
        end = value_node.end_mark
        if isinstance(value_node, (yt.MappingNode, yt.SequenceNode)) and key_node is not None:
            end = key_node.end_mark  # as Document.location: the key, not the whole block
        line, column = self.file_position(start)
        end_line, end_column = self.file_position(end, end=True)
        return Location(self.path, line, column, end_line, end_column, message)

    def inner_path(self, field_path: str) -> str | None:
        if field_path == self.prefix:
            return ""
        if field_path.startswith(self.prefix + "."):
            return field_path[len(self.prefix) + 1:]
        return None

    def file_position(self, mark, end: bool = False) -> tuple[int, int]:
        """1-based (line, column) in the file of a mark in the embedded text."""
        # A block shifts every line by its indentation, a one-line scalar only line 0; an end mark
        # at column 0 (just after the line before) stays at column 0.
        shift = self.column if (self.block and not (end and mark.column == 0)) or mark.line == 0 else 0
        return self.first_line + mark.line + 1, mark.column + shift + 1

    def node_location(self, node: yt.Node) -> Location:
        if not self.mapped:
            return self.outer.location(self.prefix)
        line, column = self.file_position(node.start_mark)
        return Location(self.path, line, column)


class SourceLines:
    """A file's lines, read when first wanted: a block scalar's indentation is not in the
    composer's marks. None for standard input and for files that cannot be read again."""

    def __init__(self, path: str):
        self.path = path
        self.read = False
        self.lines: list[str] | None = None

    def get(self) -> list[str] | None:
        if not self.read:
            self.read = True
            if self.path != STDIN_NAME:
                try:  # a regular file only: a pipe read once is empty now, a FIFO would block
                    self.lines = files.read_file(self.path, budgets.current().max_file_bytes).decode(
                        "utf-8-sig", "replace").splitlines()
                except OSError:
                    self.lines = None
        return self.lines


def compose_embedded(document: Document, prefix: str, key_node: yt.ScalarNode, value: yt.ScalarNode,
                     lines: SourceLines, diagnostics: list[Diagnostic], *,
                     json_text: bool = False) -> EmbeddedDocument | None:
    """Compose a ConfigMap value; an unreadable one is an input error inside the value."""
    try:
        root = budgets.compose(value.value, loader=ManifestLoader)
    except yaml.YAMLError as error:
        if json_text and not isinstance(error, budgets.LimitError):
            try:
                data = json.loads(value.value)
            except (ValueError, RecursionError):
                data = None
            if data is not None:  # valid JSON that YAML 1.1 cannot read (tabs): no inner positions
                return EmbeddedDocument(document, prefix, _json_node(data))
        embedded = EmbeddedDocument(document, prefix, None)
        locate_embedded(embedded, key_node, value, lines.get())
        mark = getattr(error, "problem_mark", None)
        problem = " ".join(filter(None, (getattr(error, "context", None), getattr(error, "problem", None))))
        where = embedded.location(prefix)
        if mark is not None and embedded.first_line >= 0:
            line, column = embedded.file_position(mark)
            where = Location(document.path, line, column)
        diagnostics.append(Diagnostic(where, f"invalid {'JSON' if json_text else 'YAML'} in {prefix}: "
                                             f"{problem or error}"))
        return None
    embedded = EmbeddedDocument(document, prefix, root)
    locate_embedded(embedded, key_node, value, lines.get())
    return embedded


def locate_embedded(embedded: EmbeddedDocument, key_node: yt.ScalarNode, value: yt.ScalarNode,
                    lines: list[str] | None) -> None:
    """Learn where the embedded text's line 0, column 0 is in the file, if its style keeps positions.

    A literal block (`|`) keeps lines as they are, shifted by the block's indentation; a one-line
    plain scalar, or a quoted one without escapes, shifts only columns. Anything else (folded,
    escaped, multi-line quoted) keeps the key as the position.
    """
    start, end = value.start_mark, value.end_mark
    text = value.value
    if value.style == "|":
        first = start.line + 1  # content starts on the line after the `|` header
        indent = block_indent(text, lines, first) if lines is not None else None
        if indent is not None:
            embedded.first_line, embedded.column, embedded.block = first, indent, True
        return
    if "\n" in text or start.line != end.line:
        return
    if not value.style:
        offset = 0
    elif value.style in ("'", '"') and end.column - start.column == len(text) + 2:
        offset = 1  # no escapes: the text starts one column after the opening quote
    else:
        return
    embedded.first_line, embedded.column = start.line, start.column + offset


def block_indent(text: str, lines: list[str], first: int) -> int | None:
    """The indentation of a literal block whose content starts at file line `first` (0-based), checked
    against every content line, or None when the file does not match the scalar."""
    indent = None
    for offset, inner in enumerate(text.split("\n")):
        if not inner.strip():
            continue
        if first + offset >= len(lines):
            return None
        line = lines[first + offset]
        if indent is None:
            if not line.endswith(inner):
                return None
            indent = len(line) - len(inner)
            if line[:indent].strip(" "):
                return None
        elif line[indent:] != inner or line[:indent].strip(" "):
            return None
    return indent


def _json_node(data: Any) -> yt.Node:
    """Valid JSON that YAML could not compose, as nodes without useful marks (positions use the key)."""
    mark = yaml.Mark("<json>", 0, 0, 0, None, None)
    if isinstance(data, dict):
        return yt.MappingNode(yt.MAP, [(yt.ScalarNode(yt.STR, str(k), mark, mark), _json_node(v))
                                       for k, v in data.items()], mark, mark)
    if isinstance(data, list):
        return yt.SequenceNode(yt.SEQ, [_json_node(v) for v in data], mark, mark)
    text = "" if data is None else json.dumps(data) if not isinstance(data, str) else data
    return yt.ScalarNode(yt.STR, text, mark, mark)
