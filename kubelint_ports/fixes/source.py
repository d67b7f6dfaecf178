"""A file as a fix sees it: its exact text, and the node a finding names, found by the same marks
the finding's position came from. Nothing here writes.

A fix edits a plain manifest only (a `loading.Document` read from a file on disk): a rendered
Helm object or a Kustomize build is not the text the user wrote, so it gets no fix here. The
node is trusted only when its marks are the finding's line and column exactly: a file that
changed since it was linted, or a field path that lands elsewhere, gives no fix rather than a
wrong one."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from kubelint_ports.findings import Finding, Location
from kubelint_ports.loading import Document, ManifestLoader, budgets, decoded_text
from kubelint_ports.loading import yamltree as yt

BOM = b"\xef\xbb\xbf"


@dataclass(slots=True)
class SourceFile:
    """A file's bytes as text: `text` is what libyaml indexed (a leading BOM left out), so a
    node's mark indexes it; `bytes_for` puts the BOM back."""

    file: str  # the path on disk
    path: str  # as findings show it
    text: str
    bom: bool
    roots: list | None = None  # every YAML document's root node, composed once

    def bytes_for(self, text: str) -> bytes:
        return (BOM if self.bom else b"") + text.encode("utf-8")

    def documents(self) -> list:
        if self.roots is None:
            try:
                self.roots = list(budgets.compose_all(self.text, loader=ManifestLoader))
            except (yaml.YAMLError, ValueError):
                self.roots = []
        return self.roots


def read_source(file: str, path: str) -> SourceFile | None:
    try:
        with open(file, "rb") as stream:
            data = stream.read()
    except OSError:
        return None
    text = decoded_text(data)
    if text is None:
        return None
    return SourceFile(file, path, text, data.startswith(BOM))


@dataclass(slots=True)
class Target:
    """The place a finding names in its file: the document's root (the file's ordinal-th), the
    path from it to the object (`items[3].` for a `kind: List` member) and the nodes at the field."""

    source: SourceFile
    root: yaml.Node  # the YAML document's root
    prefix: list  # path segments from the root to the object
    obj: yaml.Node  # the object's mapping
    key: yaml.Node | None
    value: yaml.Node


def target_of(finding: Finding, document: Document, source: SourceFile) -> Target | None:
    ordinal, start, end, _, _ = document.span
    roots = source.documents()
    if ordinal >= len(roots) or roots[ordinal] is None:
        return None
    root = obj = roots[ordinal]
    prefix: list = []
    for item in document.items:
        items = yt.get(obj, "items")
        if not isinstance(items, yaml.SequenceNode) or item >= len(items.value):
            return None
        prefix += ["items", item]
        obj = items.value[item]
    if obj.start_mark.index != start or obj.end_mark.index != end:
        return None  # the file is not what was linted
    key, value = yt.resolve(obj, finding.field_path) if finding.field_path else (None, obj)
    if yt.format_field_path(prefix + yt.parse_field_path(finding.field_path)) != path_to(root, key, value):
        return None  # the field is absent: the finding names where it would go
    mark = (key or value).start_mark
    if (mark.line + 1, mark.column + 1) != (finding.location.line, finding.location.column):
        return None
    if id(value) in shared_nodes(root):
        return None  # an anchor's value that aliases repeat: an edit would change them too
    return Target(source, root, prefix, obj, key, value)


def shared_nodes(root) -> set[int]:
    """Ids of the nodes reachable more than once (an alias and everything under its anchor)."""
    seen: set[int] = set()
    shared: set[int] = set()

    def mark_all(node) -> None:
        shared.add(id(node))
        for child in children(node):
            if id(child) not in shared:
                mark_all(child)

    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            mark_all(node)
            continue
        seen.add(id(node))
        stack.extend(children(node))
    return shared


def children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def path_to(root, key, value) -> str | None:
    return yt.field_path_to(root, value if key is None else key)


def region(text: str, start: int, end: int, path: str) -> Location:
    """Offsets -> a Location (1-based lines and columns, the end column after the last character),
    counting lines as libyaml does for the breaks these files hold (LF, CRLF, CR)."""
    def line_column(offset: int) -> tuple[int, int]:
        head = text[:offset]
        line = head.count("\n") + head.count("\r") - head.count("\r\n")
        last = max(head.rfind("\n"), head.rfind("\r"))
        return line + 1, offset - last

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
