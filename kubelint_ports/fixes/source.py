"""A file as a fix sees it: its exact text, and the node a finding names, found by the same marks
the finding's position came from. Nothing here writes.

A plain manifest's node is trusted only when its marks are the finding's line and column
exactly: a file that changed since it was linted, or a field path that lands elsewhere, gives no
fix rather than a wrong one. A rendered object (a Helm chart's, a Kustomize build's) is read
from the kept output (`rendered_source`): its fix is worked out there, then carried to the text
the user wrote (`fixes.helm`, `fixes.kustomize`). Every file read for a fix is recorded with its
CRC32 (`read_digest`), so a file that changed before the fix is written is left alone."""

from __future__ import annotations

import os
import re
import zlib
from bisect import bisect_left

import yaml

from kubelint_ports.findings import Finding
from kubelint_ports.loading import Document, ManifestLoader, budgets, decoded_text
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.records import record
from kubelint_ports.vocabulary import Location

BOM = b"\xef\xbb\xbf"
# The CRC32 of each file's bytes when a fix last read it (absolute path -> digest): a file that no
# longer has them when the fix is written has changed, and its edits would land elsewhere.
_READ_DIGESTS: dict[str, int] = {}


class NoFix(Exception):
    """This finding's fix cannot be carried to the text the user wrote: the message says why."""


@record(frozen=True, slots=True)
class FileEdit:
    """A replacement in a file the user wrote: characters `start` to `end` of its decoded text."""

    file: str  # on disk
    path: str  # as findings show it
    start: int
    end: int
    text: str


@record(slots=True)
class SourceFile:
    """A file's bytes as text: `text` is what libyaml indexed (a leading BOM left out), so a
    node's mark indexes it; `bytes_for` puts the BOM back."""

    file: str  # the path on disk
    path: str  # as findings show it
    text: str
    bom: bool
    roots: list | None = None  # every YAML document's root node, composed once
    spans: dict | None = None  # (ordinal, start, end) -> that document's root, composed alone
    padded: int = 0  # characters of padding composed so far, ahead of the stretches
    places: dict | None = None  # (line, column) -> (key, value) of `pair_at`, made once
    blocks: list | None = None  # (first line, last line) of each literal block scalar, made once
    breaks: list | None = None  # `line_breaks(text)`, made once for the edits' regions

    def bytes_for(self, text: str) -> bytes:
        return (BOM if self.bom else b"") + text.encode("utf-8")

    def documents(self) -> list:
        if self.roots is None:
            try:
                self.roots = list(budgets.compose_all(self.text, loader=ManifestLoader))
            except (yaml.YAMLError, ValueError):
                self.roots = []
        return self.roots

    def document(self, ordinal: int, span: tuple[int, int, int, int] | None):
        """The `ordinal`-th document's root. With its `span` (start, end, line, column), only that
        stretch is composed, its marks those of the whole file: a finding in a file of a thousand
        objects composes one of them (the whole file when the stretch does not compose alone:
        an alias of an anchor outside it, a %TAG directive, a file that changed). The padding
        that keeps its marks is as long as the text before it, so once the stretches of one file
        would have scanned more than the file itself, the whole file is composed, once."""
        if span is not None and self.roots is None and self.padded + span[0] <= len(self.text):
            start, end, line, column = span
            key = (ordinal, start, end)
            if self.spans is None:
                self.spans = {}
            if key not in self.spans:
                self.padded += start
                self.spans[key] = self._compose_span(start, end, line, column)
            if self.spans[key] is not None:
                return self.spans[key]
        roots = self.documents()
        return roots[ordinal] if ordinal < len(roots) else None

    def region(self, start: int, end: int) -> Location:
        """`region` of characters `start` to `end`, the text's line breaks found once."""
        if self.breaks is None:
            self.breaks = line_breaks(self.text)
        return region(self.text, start, end, self.path, self.breaks)

    def pair_at(self, line: int, column: int) -> tuple[yaml.Node | None, yaml.Node] | None:
        """The (key, value) whose key starts at 1-based (line, column), or (None, item) for a
        scalar list item that starts there; None when no node of the file's documents does.

        Every place is indexed in one walk of the documents that enters each node once (an
        alias's target where it is first reached), in the order a search from the last document
        down would meet them, so that of two nodes at one place the one it would find wins."""
        if self.places is None:
            self.places = {}
            for node in yt.written_once(root for root in self.documents() if root is not None):
                if isinstance(node, yaml.MappingNode):
                    for key, value in node.value:
                        self.places.setdefault((key.start_mark.line, key.start_mark.column), (key, value))
                elif isinstance(node, yaml.SequenceNode):
                    for item in node.value:
                        if isinstance(item, yaml.ScalarNode):
                            self.places.setdefault((item.start_mark.line, item.start_mark.column), (None, item))
        return self.places.get((line - 1, column - 1))

    def is_shared(self, node: yaml.Node) -> bool:
        """Whether aliases repeat `node` in its document (an anchor's value, or inside one)."""
        return any(id(node) in yt.shared_nodes(root) for root in self.documents() if root is not None)

    def in_literal_block(self, line: int) -> bool:
        """Whether 0-based `line` is inside a literal block scalar (`|`), past its first line."""
        if self.blocks is None:
            self.blocks = []
            entered: set[int] = set()
            stack = [root for root in self.documents() if root is not None]
            while stack:
                node = stack.pop()
                if id(node) in entered:
                    continue
                entered.add(id(node))
                if isinstance(node, yaml.ScalarNode):
                    if node.style == "|":
                        self.blocks.append((node.start_mark.line, node.end_mark.line))
                else:
                    stack.extend(yt.children_of(node))
        return any(first < line < last for first, last in self.blocks)

    def _compose_span(self, start: int, end: int, line: int, column: int):
        # Padding that puts the stretch at its own index, line and column: a comment of the
        # characters the lines before held, the line breaks, then the indentation.
        filler = start - line - column
        if filler < 0 or (filler and not line) or not 0 <= start <= end <= len(self.text):
            return None
        padding = ("#" * filler if filler else "") + "\n" * line + " " * column
        try:
            root = next(budgets.compose_all(padding + self.text[start:end], loader=ManifestLoader), None)
        except (yaml.YAMLError, ValueError):
            return None
        if root is None or (root.start_mark.index, root.end_mark.index, root.start_mark.line,
                            root.start_mark.column) != (start, end, line, column):
            return None
        return root


def read_source(file: str, path: str) -> SourceFile | None:
    """The file as a fix sees it: while `--fix` plans its passes, the bytes an earlier pass planned
    for it (`loading.files.PLANNED`), as the lint of that pass read them."""
    from kubelint_ports.loading import files

    data = files.PLANNED.get(os.path.realpath(file)) if files.PLANNED else None
    if data is None:
        try:
            with open(file, "rb") as stream:
                data = stream.read()
        except OSError:
            return None
    text = decoded_text(data)
    if text is None:
        return None
    _READ_DIGESTS[os.path.abspath(file)] = zlib.crc32(data)
    return SourceFile(file, path, text, data.startswith(BOM))


def read_digest(file: str) -> int | None:
    """The CRC32 of `file`'s bytes when a fix last read it; None when no fix read it."""
    return _READ_DIGESTS.get(os.path.abspath(file))


def rendered_source(document: Document) -> SourceFile | None:
    """The kept output a rendered object (Helm, Kustomize) was read from, as a fix reads a file."""
    text_source = document.text_source
    text = text_source.text() if text_source is not None else None
    if text is None:
        return None
    return SourceFile("", document.path, text, False)


class Sources:
    """The files and rendered outputs one `describe` reads, each read and composed once while in
    use: the most recent `KEPT` of each are kept (findings come file by file), so a run with fixes
    in thousands of files never holds all their texts and trees (50k corpus: 80 MiB)."""

    KEPT = 32

    def __init__(self) -> None:
        self.files: dict[str, SourceFile | None] = {}
        self.outputs: dict[int, SourceFile | None] = {}

    def read(self, file: str, path: str) -> SourceFile | None:
        return _recent(self.files, os.path.abspath(file), lambda: read_source(file, path), self.KEPT)

    def rendered(self, document: Document) -> SourceFile | None:
        return _recent(self.outputs, id(document.text_source), lambda: rendered_source(document), self.KEPT)


def _recent(kept: dict, key, read, limit: int):
    """`kept[key]`, read if absent, as the most recently used; the least recently used go beyond `limit`."""
    if key in kept:
        value = kept.pop(key)
    else:
        value = read()
        while len(kept) >= limit:
            del kept[next(iter(kept))]
    kept[key] = value
    return value


@record(slots=True)
class Target:
    """The place a finding names in its file: the document's root (the file's ordinal-th), the
    path from it to the object (`items[3].` for a `kind: List` member) and the nodes at the field."""

    source: SourceFile
    root: yaml.Node  # the YAML document's root
    prefix: list  # path segments from the root to the object
    obj: yaml.Node  # the object's mapping
    key: yaml.Node | None
    value: yaml.Node


def target_of(finding: Finding, document: Document, source: SourceFile, placed: bool = True) -> Target | None:
    """The nodes `finding` names in `source`; `placed`: the key's marks must be the finding's line
    and column (False for rendered output, whose positions are the template's or the patch's)."""
    ordinal, start, end, line, column = document.span
    return target_in(source, ordinal, document.items, (start, end), finding.field_path,
                     finding.location if placed else None, None if document.items else (start, end, line, column))


def target_placed(finding: Finding, source: SourceFile) -> Target | None:
    """The nodes `finding` names in `source`, in whichever document (or `kind: List` member) holds
    its field at its line and column: for a file the finding points into but was not read from
    (a Kustomize resource)."""
    line = finding.location.line - 1
    for ordinal, root in enumerate(source.documents()):
        if root is None or not root.start_mark.line <= line <= root.end_mark.line:
            continue  # the field is written inside its object: an object elsewhere cannot hold it
        members = yt.get(root, "items") if isinstance(root, yaml.MappingNode) else None
        holding = [(index,) for index, member in enumerate(members.value)
                   if member.start_mark.line <= line <= member.end_mark.line] \
            if isinstance(members, yaml.SequenceNode) else []
        for items in [(), *holding]:
            target = target_in(source, ordinal, items, None, finding.field_path, finding.location)
            if target is not None:
                return target
    return None


def target_in(source: SourceFile, ordinal: int, members: tuple[int, ...], span: tuple[int, int] | None,
              field_path: str, location: Location | None,
              root_span: tuple[int, int, int, int] | None = None) -> Target | None:
    """The nodes at `field_path` of the object in document `ordinal` (its `kind: List` members
    `members`), when the object spans `span` (None: anywhere) and, with `location`, the field's
    key starts there. `root_span`: where the document's root is (start, end, line, column), so
    that only it is composed."""
    root = obj = source.document(ordinal, root_span)
    if root is None:
        return None
    prefix: list = []
    for item in members:
        items = yt.get(obj, "items")
        if not isinstance(items, yaml.SequenceNode) or item >= len(items.value):
            return None
        prefix += ["items", item]
        obj = items.value[item]
    if span is not None and (obj.start_mark.index, obj.end_mark.index) != span:
        return None  # the file is not what was linted
    if not isinstance(obj, yaml.MappingNode):
        return None
    key, value = yt.resolve(obj, field_path) if field_path else (None, obj)
    segments = prefix + yt.parse_field_path(field_path)
    written = yt.written_at(root, segments)  # the path followed, not a walk of the document
    if written is None or written[0] is not key or written[1] is not value:
        return None  # the field is absent (the finding names where it would go) or a merge key's
    mark = (key or value).start_mark
    if location is not None and (mark.line + 1, mark.column + 1) != (location.line, location.column):
        return None
    shared = yt.shared_nodes(root)  # one walk per document, kept: not one per finding
    if id(value) in shared:
        return None  # an anchor's value that aliases repeat: an edit would change them too
    if key is not None and id(key) in shared and \
            yt.format_field_path(yt.first_places(root)[id(key)]) != yt.format_field_path(segments):
        return None  # an alias of a key: the finding is about the place the anchor is written
    return Target(source, root, prefix, obj, key, value)


LINE_BREAK = re.compile(r"\n|\r(?!\n)")  # a CRLF's break is its LF


def line_breaks(text: str) -> list[int]:
    """The offsets of the characters that end lines as libyaml counts them (LF, CRLF, CR)."""
    return [match.start() for match in LINE_BREAK.finditer(text)]


def region(text: str, start: int, end: int, path: str, breaks: list[int] | None = None) -> Location:
    """Offsets -> a Location (1-based lines and columns, the end column after the last character),
    counting lines as libyaml does for the breaks these files hold (LF, CRLF, CR). `breaks`: the
    text's `line_breaks`, worked out once for all the edits in one file (`SourceFile.region`)."""
    if breaks is None:
        breaks = line_breaks(text)

    def line_column(offset: int) -> tuple[int, int]:
        before = bisect_left(breaks, offset)  # the lines that end before `offset`
        last = breaks[before - 1] if before else -1
        if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
            before, last = before + 1, offset - 1  # between a CRLF's two characters: past its CR
        return before + 1, offset - last

    start_line, start_column = line_column(start)
    end_line, end_column = line_column(end)
    return Location(path, start_line, start_column, end_line, end_column)


def scalar_span(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.index, node.end_mark.index


def split_lines(text: str) -> list[str]:
    """Lines with their ends, split at LF only (a CRLF stays whole): `str.splitlines` would also
    split at form feeds and Unicode separators, which YAML keeps inside a line."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def line_starts(text: str) -> list[int]:
    """Offsets where each line starts, lines ending at LF (a CRLF's CR stays on its line)."""
    return [0] + [match.end() for match in re.finditer("\n", text)]


def offset_of(text: str, starts: list[int], line: int, column: int) -> int | None:
    """The offset of a 1-based (line, column), or None when the text has no such place."""
    if not 1 <= line <= len(starts):
        return None
    end = starts[line] - 1 if line < len(starts) else len(text)
    offset = starts[line - 1] + column - 1
    return offset if column >= 1 and offset <= end else None


LINE_KEY = re.compile(r"""("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"\[\]{},][^#:]*?)\s*:[ \t]+""")
COMMENT = re.compile(r"[ \t]+#.*$|[ \t]+$")


def line_value(line: str, column: int) -> tuple[int, int] | None:
    """(start, end) in `line` of the one-line scalar value of the key that starts at `column`
    (`  containerPort: "8080"   # note` -> the span of `"8080"`), or None when the value is not a
    scalar written on that line (a block, a flow collection, an anchor, an action)."""
    match = LINE_KEY.match(line, column)
    if match is None:
        return None
    rest = line[match.end():].rstrip("\r\n")
    value = quoted_prefix(rest) if rest[:1] in ("'", '"') else COMMENT.sub("", rest)
    if not value or value[0] in "[{|>&*!%@`" or "{{" in value:
        return None
    return match.end(), match.end() + len(value)


def quoted_prefix(text: str) -> str:
    """The quoted scalar `text` starts with, when nothing but a comment follows it."""
    quote = text[0]
    index = 1
    while index < len(text):
        if text[index] == quote:
            if quote == "'" and text[index + 1:index + 2] == "'":
                index += 2
                continue
            tail = text[index + 1:]
            return text[:index + 1] if not tail.strip() or re.match(r"[ \t]+#", tail) else ""
        index += 2 if quote == '"' and text[index] == "\\" else 1
    return ""


def scalar_text(value: str, style: str | None, style_only: bool) -> str:
    """What replaces a scalar written with `style` so that it reads `value`: unquoted when the fix
    is only about its quotes (`style_only`), else in the quotes it had."""
    if style_only or style not in ("'", '"'):
        return value
    return f"{style}{value}{style}"
