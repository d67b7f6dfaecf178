"""Fixes that add or remove structure (a key, a list item) go through ruamel.yaml's round trip,
on the one YAML document that holds them, and are checked: the new text may differ from the old
only on the lines the fix names (a removed node's lines; for an insertion, none: only new lines
where they belong). Anything else (ruamel re-indenting a list, re-quoting a value, re-flowing a
comment) and the fix is refused with the reason, never applied.

ruamel.yaml is imported here only, and this module only when a fix's edit is worked out
(`--fix`, `--diff`, SARIF): a lint run that only reports pays nothing for it.
"""

from __future__ import annotations

import difflib
import io
from collections import Counter

import yaml

from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.fixes.source import split_lines

WIDTH = 1 << 30  # never re-wrap a long line


class Refused(Exception):
    """The round trip would change more than the fix: the message says what."""


def removal(text: str, root: yaml.Node, segments: list, node_lines: tuple[int, int]) -> tuple[int, int, str]:
    """(start, end, replacement) in `text` (whole lines) that remove the key or list item at
    `segments` from the document `root`; `node_lines` (0-based, inclusive) are the lines the
    removed node spans, the only ones allowed to change. Raises Refused."""
    def remove(container):
        del container[segments[-1]]

    start, end, replacement = round_trip_edit(text, root, segments[:-1], remove, node_lines)
    if not only_deletes(text[start:end], replacement):
        # ruamel.yaml rewrote what stays on the node's lines (`[{port: 80}]` as `[port: 80]`, a
        # tag or a comment dropped): a removal may only take characters out, in one stretch.
        raise Refused("the round trip would also rewrite what stays on the removed entry's lines")
    return start, end, replacement


def only_deletes(old: str, new: str) -> bool:
    """Whether `new` is `old` with one contiguous stretch taken out."""
    if len(new) > len(old):
        return False
    prefix = 0
    while prefix < len(new) and new[prefix] == old[prefix]:
        prefix += 1
    return old.endswith(new[prefix:])


def insertion(text: str, root: yaml.Node, container_path: list, entry: tuple[str, str, str] | str,
              after_line: int) -> tuple[int, int, str]:
    """(start, end, replacement) in `text` that add to the container at `container_path` of the
    document `root`: `entry` (key, value, the key it follows) to a mapping, or a string appended to
    a list. The only change allowed is new lines after 0-based line `after_line`. Raises Refused."""
    def add(container):
        if isinstance(entry, str):
            container.append(entry)
        else:
            key, value, follows = entry
            container.insert(list(container).index(follows) + 1, key, value)

    return round_trip_edit(text, root, container_path, add, (after_line + 1, after_line))


def round_trip_edit(text: str, root: yaml.Node, container_path: list, change, allowed_lines: tuple[int, int]
                    ) -> tuple[int, int, str]:
    """Run `change` on the ruamel.yaml container at `container_path` of the document `root`, and
    return (start, end, replacement) in `text` covering the changed lines. Only the 0-based lines
    `allowed_lines` (inclusive; an empty range `(n + 1, n)` allows only insertions after line n)
    may change. Raises Refused."""
    first_line = root.start_mark.line
    segment_start = max(text.rfind("\n", 0, root.start_mark.index), text.rfind("\r", 0, root.start_mark.index)) + 1
    if text[segment_start:root.start_mark.index].strip(" \t\ufeff"):
        # The document starts on its marker's line (`--- {kind: Service, ...}`): the marker is
        # not ruamel.yaml's to write again, so the round trip starts at the node and the edit
        # never covers the `--- ` before it.
        segment_start = root.start_mark.index
    segment_end = root.end_mark.index
    old = text[segment_start:segment_end]
    crlf = "\r\n" in old
    if "\r" in old.replace("\r\n", ""):
        raise Refused("the document ends lines with a lone CR, which ruamel.yaml would rewrite")
    plain = old.replace("\r\n", "\n") if crlf else old
    new = round_trip(plain, container_path, change, root)
    if plain and not plain.endswith("\n") and new.endswith("\n"):
        new = new[:-1]
    allowed = (allowed_lines[0] - first_line, allowed_lines[1] - first_line)
    old_lines, new_lines = split_lines(plain), split_lines(new)
    if plain and not plain.endswith("\n") and len(new_lines) > len(old_lines) and allowed[0] >= len(old_lines):
        raise Refused("the document's last line has no line end to add a line after")
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    changed = [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]
    if not changed:
        raise Refused("ruamel.yaml's round trip left the document as it was")
    for i1, i2, _, _ in changed:
        if i1 < allowed[0] or i2 > allowed[1] + 1:
            line = first_line + (i1 if i1 < allowed[0] else i2 - 1) + 1
            raise Refused(f"the round trip would also change line {line}, outside the fix")
    i1, i2 = changed[0][0], changed[-1][1]
    j1, j2 = changed[0][2], changed[-1][3]
    replacement = "".join(new_lines[j1:j2])
    if crlf:
        replacement = replacement.replace("\n", "\r\n")
    old_crlf_lines = split_lines(old)
    start = segment_start + sum(len(line) for line in old_crlf_lines[:i1])
    end = start + sum(len(line) for line in old_crlf_lines[i1:i2])
    return start, end, replacement


def round_trip(plain: str, container_path: list, change, root: yaml.Node) -> str:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    mapping, sequence, offset = detect_indent(root)
    reader = YAML(typ="rt")
    reader.preserve_quotes = True
    reader.width = WIDTH
    reader.allow_duplicate_keys = True
    reader.indent(mapping=mapping, sequence=sequence, offset=offset)
    try:
        data = reader.load(plain)
        container = data
        for segment in container_path:
            container = container[segment]
        change(container)
        out = io.StringIO()
        reader.dump(data, out)
    except (YAMLError, KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
        raise Refused(f"ruamel.yaml could not edit the document ({type(error).__name__})") from None
    return out.getvalue()


def detect_indent(root: yaml.Node) -> tuple[int, int, int]:
    """The document's own block indentation, as ruamel.yaml's `indent()` takes it: a nested
    mapping's step, a list item's content column and its dash's column, each relative to the key
    that holds it; the most common one wins (2, 2, 0 when the document has none). Each mapping is
    counted once, as written (an alias repeats none), and the answer kept on the root: the
    removals of many findings in one document walk it once."""
    try:
        return root._indent
    except AttributeError:
        pass
    mappings: Counter[int] = Counter()
    sequences: Counter[tuple[int, int]] = Counter()
    for node in yt.written_once([root]):
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                step = value.start_mark.column - key.start_mark.column
                if isinstance(value, yaml.MappingNode) and not value.flow_style and value.start_mark.line > key.start_mark.line:
                    mappings[step] += 1
                elif isinstance(value, yaml.SequenceNode) and not value.flow_style and value.value:
                    item = value.value[0]
                    sequences[(item.start_mark.column - key.start_mark.column, step)] += 1
    mapping = mappings.most_common(1)[0][0] if mappings else 2
    sequence, offset = sequences.most_common(1)[0][0] if sequences else (2, 0)
    root._indent = (mapping, max(sequence, offset + 2), offset)
    return root._indent


def node_lines(start: yaml.Node, end: yaml.Node) -> tuple[int, int]:
    """The 0-based lines from `start`'s first character to `end`'s last (a block collection's end
    mark stands at the start of the line after it)."""
    mark = end.end_mark
    last = mark.line - 1 if mark.column == 0 and mark.line > start.start_mark.line else mark.line
    return start.start_mark.line, last
