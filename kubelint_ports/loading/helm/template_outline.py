"""A Helm template's outline: its `{{ }}` actions (`Action`, masked out of the text by
`mask_actions`) and its YAML lines by indent (`Entry`: keys, list items and the actions that write
YAML), one `OutlineDoc` per document (`parse_outline`). The template map (`templatemap`) walks it
with a rendered field path; the values side (`templatemap_values`) reads its actions.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from kubelint_ports.loading.yaml_files import yamltree as yt

# The words of Go template actions that write nothing (`if`, `range`, ...), and `$var := ...`.
CONTROL_WORDS = frozenset(("if", "else", "end", "range", "with", "define", "block", "break", "continue"))
ASSIGN = re.compile(r"^\s*(\$\w+)\s*:?=\s*(.*)$", re.DOTALL)
_ACTION = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_MASK = "\x01"
_GENERATORS = re.compile(r"\b(include|template|toYaml|toJson|tpl|toPrettyJson|nindent|indent)\b")
_INDENT_HINT = re.compile(r"\bn?indent\s+([0-9]{1,4})\b")
_KEY = re.compile(r"""("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"\[\]{}][^#]*?)\s*:(?=\s|$)""")
_BLOCK_SCALAR = re.compile(r"^[|>][-+0-9]*\s*(#.*)?$")
_DOC_SEPARATOR = re.compile(r"^---(\s|$)")
_INCLUDED = re.compile(r'\b(?:include|template)\s+"([^"]+)"')
@dataclass(slots=True)
class Action:
    start: int  # offsets in the template text
    end: int
    line: int  # 0-based line of `{{`
    column: int
    body: str  # between `{{` and `}}`, trim markers removed

    @property
    def words(self) -> list[str]:
        return self.body.split()

    @property
    def is_comment(self) -> bool:
        return self.body.startswith("/*")

    @property
    def is_control(self) -> bool:
        words = self.words
        return (not words or self.is_comment or words[0] in CONTROL_WORDS
                or bool(ASSIGN.match(self.body)))

    @property
    def generates_block(self) -> bool:
        return bool(_GENERATORS.search(self.body))


@dataclass(slots=True, eq=False)
class Entry:
    """A line of the template's outline: a key, a list item, or an action that writes YAML."""

    kind: str  # "root" | "key" | "item" | "gen"
    line: int  # 0-based
    indent: int
    column: int = 0  # 0-based column where the entry starts (key, `-`, or `{{`)
    key: str | None = None  # None: a templated key
    value: str = ""  # the literal text after `key:` (actions masked), for matching items; a gen's action
    children: list["Entry"] = field(default_factory=list)

    def key_child(self, key: str) -> Entry | None:
        for child in self.children:
            if child.kind == "key" and child.key == key:
                return child
        return None

    def items(self) -> list[Entry]:
        return [child for child in self.children if child.kind == "item"]

    def generator(self, rendered: yt.Node | None = None) -> Entry | None:
        """The action that wrote this block's content; of several (`containers:` followed by one
        `include` per container), the one whose named template is called after the rendered
        item's `name` (`include "container-trace-agent"` for `name: trace-agent`), else the first."""
        generators = [child for child in self.children if child.kind == "gen"]
        name = yt.get(rendered, "name") if isinstance(rendered, yt.MappingNode) and len(generators) > 1 else None
        if isinstance(name, yt.ScalarNode) and name.value:
            named = [(len(included) - len(name.value), index, generator)
                     for index, generator in enumerate(generators)
                     for included in _INCLUDED.findall(generator.value)
                     if included == name.value or included.endswith(("-" + name.value, "." + name.value))]
            if named:
                return min(named)[2]  # `container-agent`, not `container-trace-agent`, for `agent`
        return generators[0] if generators else None


@dataclass(slots=True, eq=False)
class OutlineDoc:
    root: Entry
    first: Entry | None  # the object's first line in the template


def mask_actions(text: str) -> tuple[str, list[Action]]:
    """The text with every `{{ }}` action overwritten (newlines kept), and the actions."""
    actions: list[Action] = []
    pieces: list[str] = []
    position = 0
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    for match in _ACTION.finditer(text):
        body = match.group(1)
        body = body[1:] if body.startswith("-") else body
        body = body[:-1] if body.endswith("-") and not body.endswith("--") else body
        line = bisect.bisect_right(line_starts, match.start()) - 1
        actions.append(Action(match.start(), match.end(), line, match.start() - line_starts[line], body.strip()))
        pieces.append(text[position:match.start()])
        pieces.append(re.sub(r"[^\n]", _MASK, match.group(0)))
        position = match.end()
    pieces.append(text[position:])
    return "".join(pieces), actions


def parse_outline(text: str) -> tuple[list[OutlineDoc], list[Action], list[str]]:
    """Outline every YAML document of a template (documents with no line of their own dropped)."""
    masked, actions = mask_actions(text)
    lines = text.splitlines()
    masked_lines = masked.splitlines()
    actions_by_line: dict[int, list[Action]] = {}
    for action in actions:
        actions_by_line.setdefault(action.line, []).append(action)

    docs: list[OutlineDoc] = []
    stack: list[Entry] = []
    current: OutlineDoc | None = None
    block_indent: int | None = None  # inside a block scalar deeper than this indent

    def new_doc() -> OutlineDoc:
        root = Entry("root", -1, -1)
        stack[:] = [root]
        return OutlineDoc(root, None)

    def add(entry: Entry) -> None:
        while len(stack) > 1:
            top = stack[-1]
            if top.indent > entry.indent or (top.indent == entry.indent and not opens_block(top, entry)):
                stack.pop()
            else:
                break
        stack[-1].children.append(entry)
        if current.first is None and entry.kind != "gen":
            current.first = entry
        stack.append(entry)

    current = new_doc()
    for number, masked_line in enumerate(masked_lines):
        content = masked_line.replace(_MASK, " ").strip()
        if block_indent is not None:  # a block scalar's text ends at a line indented no deeper
            if not content or _line_indent(masked_line) > block_indent:
                continue
            block_indent = None
        if _DOC_SEPARATOR.match(masked_line):
            if current.root.children:
                docs.append(current)
            current = new_doc()
            continue
        if not content:
            starting = [a for a in actions_by_line.get(number, ()) if not a.is_control]
            if starting:
                action = starting[0]
                hint = _INDENT_HINT.search(action.body)
                gen_indent = int(hint.group(1)) if hint else action.column
                add(Entry("gen", number, gen_indent, action.column, value=action.body))
            continue
        if content.startswith("#"):
            continue
        column = len(masked_line) - len(masked_line.lstrip())
        rest = masked_line[column:]
        while rest.startswith("-") and (len(rest) == 1 or rest[1] in " \t"):
            add(Entry("item", number, column, column))
            skipped = len(rest) - len(rest[1:].lstrip())
            column += skipped
            rest = rest[skipped:]
        match = _KEY.match(rest)
        if match:
            raw_key = match.group(1)
            key = None if _MASK in raw_key else _unquote(raw_key)
            value = rest[match.end():].strip()
            add(Entry("key", number, column, column, key, value))
            if _BLOCK_SCALAR.match(value):
                block_indent = column
        elif rest and _MASK in rest and not rest.replace(_MASK, "").strip():
            starting = [a for a in actions_by_line.get(number, ()) if not a.is_control]
            if starting:
                add(Entry("gen", number, column, column, value=starting[0].body))
    if current.root.children:
        docs.append(current)
    return docs, actions, lines


def opens_block(key: Entry, entry: Entry) -> bool:
    """Whether `entry`, at the indent of `key`, is its content: YAML lets a list sit at its key's
    indent (`containers:` then `- name: a`), and an action writing one, `{{- include "c" . |
    nindent 6 }}` under a `containers:` at 6, does the same when the key has no value of its own
    (keys the action wrote would make that key null, which templates do not mean)."""
    if key.kind != "key":
        return False
    if entry.kind == "item":
        return True
    return (entry.kind == "gen" and not key.value
            and all(child.kind in ("gen", "item") and child.indent == key.indent for child in key.children))


def _line_indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _unquote(key: str) -> str:
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "\"'":
        return key[1:-1]
    return key.strip()


_COMMENT_START = re.compile(r"(?<=\s)#")  # one character behind: linear on any line


def without_comment(text: str) -> str:
    """`text` without a YAML comment at its end (` # ...`), blanks before it dropped. One pass:
    `\\s+#.*$` took seconds on a line of many blanks and no `#` (input)."""
    if "\n" in text.removesuffix("\n"):  # several lines (none of the callers' values): the pattern's own reading
        return re.sub(r"\s+#.*$", "", text)
    found = _COMMENT_START.search(text)
    if found is None:
        return text
    return text[:found.start()].rstrip() + ("\n" if text.endswith("\n") else "")


def literal_value(value: str) -> str | None:
    """A key's literal scalar value, or None when an action or a collection writes it."""
    if not value or _MASK in value or value[0] in "[{|>&*!":
        return None
    value = without_comment(value).strip()
    return _unquote(value)
