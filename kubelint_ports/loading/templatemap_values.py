"""Where the `.Values` a template line reads are set: values files composed with positions, the
layers a template's values come from, and the references (`.Values.x.y`, `$.Values`, `index
.Values "x"`, `with`/`range` contexts, `$var := .Values.x`) an action makes at a line.

Split from `templatemap.py`, which maps rendered fields to template lines and asks this module for
the values locations of those lines.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import yaml

from kubelint_ports.findings import Location
from kubelint_ports.loading import ManifestLoader, budgets, display_path, files
from kubelint_ports.loading import yamltree as yt

if TYPE_CHECKING:
    from kubelint_ports.loading.templatemap import Action

Segment = str | int
CONTROL_WORDS = frozenset(("if", "else", "end", "range", "with", "define", "block", "break", "continue"))
ASSIGN = re.compile(r"^\s*(\$\w+)\s*:?=\s*(.*)$", re.DOTALL)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|`[^`]*`')
_INDEX = re.compile(r'\bindex\s+(\$?\.Values(?:\.\w+)*|\$\w+(?:\.\w+)*)((?:\s+"[^"]*")+)')
_FIELD_CHAIN = re.compile(r"(?<![\w)\].$])(?:(\$\w*)((?:\.[A-Za-z_]\w*)*)|((?:\.[A-Za-z_]\w*)+|\.(?![\w.])))")
_BUILTINS = frozenset(("Release", "Chart", "Capabilities", "Template", "Files", "Subcharts"))


# --- values files ----------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class ValuesFile:
    """A values file, composed once with marks (only when a finding needs it)."""

    path: str  # absolute: shown relative to wherever the run is
    _root: object = None
    _loaded: bool = False

    def __post_init__(self) -> None:
        self.path = os.path.abspath(self.path)

    @property
    def root(self) -> yt.Node | None:
        if not self._loaded:
            self._loaded = True
            try:
                self._root = budgets.compose(files.read_file(self.path, budgets.current().max_file_bytes),
                                             loader=ManifestLoader)
            except (OSError, yaml.YAMLError):
                self._root = None
        return self._root

    def locate(self, segments: list[Segment]) -> tuple[int, Location | None]:
        depth, location, _ = self.resolve(segments)
        return depth, location

    def resolve(self, segments: list[Segment]) -> tuple[int, Location | None, yt.Node | None]:
        """How many segments resolve, the place of the deepest one, and its value node."""
        node = self.root
        key_node = value_node = None
        depth = 0
        for segment in segments:
            if isinstance(segment, int):
                if not isinstance(node, yt.SequenceNode) or segment >= len(node.value):
                    break
                key_node, node = None, node.value[segment]
            else:
                pair = yt.child(node, segment)
                if pair is None:
                    break
                key_node, node = pair
            value_node = node
            depth += 1
        if depth == 0:
            return 0, None, None
        start = (key_node or value_node).start_mark
        end = value_node.end_mark if isinstance(value_node, yt.ScalarNode) or key_node is None else key_node.end_mark
        return depth, Location(display_path(self.path), start.line + 1, start.column + 1,
                               end.line + 1, end.column + 1), value_node


@dataclass(slots=True, eq=False)
class ValuesSource:
    """Where a template's `.Values` come from, highest precedence first: (file or None for
    `--set`, key prefix in that file). `set_paths` are the keys given with --set/--set-string."""

    layers: list[tuple[ValuesFile, tuple[str, ...]]]
    set_paths: list[list[Segment]] = field(default_factory=list)
    set_prefix: tuple[str, ...] = ()

    def locate(self, segments: list[Segment]) -> Location | None:
        found = self.find(segments)
        return found[0] if found else None

    def find(self, segments: list[Segment], expect: str | None = None) -> tuple[Location, list[Segment]] | None:
        """The place that sets `.Values.<segments>` and its key in that file: the highest layer
        holding the whole key, else the one holding most of it. With `expect` (the rendered
        scalar), a layer whose value differs is not the source: the value came from elsewhere
        (a file or --set this run does not know), so no place is claimed."""
        if not segments:
            return None
        scoped = segments[0] == "global"  # globals are read at the top of every file
        for set_path in self.set_paths:
            full = ([] if scoped else list(self.set_prefix)) + list(segments)
            if full[:len(set_path)] == set_path:
                return None  # set on the command line: no file holds it
        best: tuple[int, Location, list[Segment]] | None = None
        for values_file, prefix in self.layers:
            wanted = list(segments) if scoped else [*prefix, *segments]
            depth, location, node = values_file.resolve(wanted)
            depth -= len(wanted) - len(segments)  # only segments of the reference itself count
            if location is not None and depth == len(segments):
                if expect is not None and isinstance(node, yt.ScalarNode) and node.value != expect:
                    return None
                return location, wanted
            if location is not None and depth > 0 and (best is None or depth > best[0]):
                best = (depth, location, wanted)
        return (best[1], best[2]) if best else None



# --- `.Values` references ----------------------------------------------------------------------


@dataclass(slots=True)
class Context:
    dot: list[Segment] | None  # what `.` is, as a values path; None when it is not in .Values
    variables: dict[str, list[Segment]]
    conditions: list[tuple[list[Segment], int]]  # values tested by the enclosing `if`s, with their line


def template_context(actions: list[Action], line: int, range_index: int | None) -> Context:
    """`.`, `$variables` and enclosing `if` conditions as they stand at `line`."""
    stack: list[tuple[str, list[Segment] | None, int]] = []  # (kind, values path, line)
    variables: dict[str, list[Segment]] = {}

    def dot() -> list[Segment] | None:
        for kind, path, _ in reversed(stack):
            if kind in ("with", "range", "define"):
                return path
        return []  # the top: `.` is the root context, `.Values` is absolute

    for action in actions:
        if action.line >= line:
            break
        if action.is_comment:
            continue
        words = action.words
        if not words:
            continue
        head = words[0]
        assignment = ASSIGN.match(action.body) if head not in CONTROL_WORDS else None
        if assignment:
            path = _resolve_expression(assignment.group(2), dot(), variables)
            if path is not None:
                variables[assignment.group(1)] = path
        elif head in ("if", "with", "range"):
            expression = action.body[len(head):]
            if head == "range":
                binding = re.match(r"\s*(\$\w+)\s*(?:,\s*(\$\w+)\s*)?:=(.*)$", expression, re.DOTALL)
                expression = binding.group(3) if binding else expression
                path = _resolve_expression(expression, dot(), variables)
                element = path + [range_index] if path is not None and range_index is not None else None
                if binding and element is not None:
                    variables[binding.group(2) or binding.group(1)] = element
                stack.append(("range", element, action.line))
            elif head == "with":
                stack.append(("with", _resolve_expression(expression, dot(), variables), action.line))
            else:
                stack.append(("if", _first_reference(expression, dot(), variables), action.line))
        elif head in ("define", "block"):
            stack.append(("define", None, action.line))
        elif head == "end" and stack:
            stack.pop()
    conditions = [(path, where) for kind, path, where in stack if kind == "if" and path]
    return Context(dot(), variables, conditions)


def _resolve_expression(expression: str, dot: list[Segment] | None, variables) -> list[Segment] | None:
    """The values path an expression like `.Values.x`, `.y` (in a values context) or `$v.z` names,
    when it is nothing but that reference (maybe piped through a function)."""
    expression = expression.strip()
    if expression.startswith("("):
        expression = expression.strip("()").strip()
    head = expression.split("|")[0].strip()
    references = list(_references(head, dot, variables))
    if len(references) == 1 and len(head.split()) == 1:
        return references[0]
    return None


def _first_reference(expression: str, dot, variables) -> list[Segment] | None:
    return next(iter(_references(expression, dot, variables)), None)


def _references(body: str, dot: list[Segment] | None, variables) -> Iterator[list[Segment]]:
    for match in _INDEX.finditer(body):
        base = [] if match.group(1) in (".Values", "$.Values") else _chain(match.group(1), dot, variables)
        if base is not None:
            yield base + re.findall(r'"([^"]*)"', match.group(2))
    body = _STRING.sub('""', _INDEX.sub("", body))
    for match in _FIELD_CHAIN.finditer(body):
        text = match.group(3) if match.group(3) is not None else match.group(1) + match.group(2)
        path = _chain(text, dot, variables)
        if path is not None:
            yield path


def _chain(text: str, dot: list[Segment] | None, variables) -> list[Segment] | None:
    """The values path of `.Values.a.b`, `$.Values.a`, `$var.b` or `.b` (in a values context)."""
    if text.startswith("$"):
        variable, _, rest = text.partition(".")
        fields = [f for f in rest.split(".") if f]
        if variable == "$":  # the root context
            return fields[1:] if fields[:1] == ["Values"] and len(fields) > 1 else None
        base = variables.get(variable)
        return base + fields if base is not None else None
    fields = [f for f in text[1:].split(".") if f]
    if fields[:1] == ["Values"]:  # the root context: at the top, or passed to a `define`
        return fields[1:] or None
    if not dot or (fields and fields[0] in _BUILTINS):
        return None
    return dot + fields


_EXACT = re.compile(r"^\S+(\s*\|\s*(quote|squote|int|int64|toString))*$")
_BEFORE_VALUE = re.compile(r"""^\s*(-\s+)*([^#:{]+:\s+)?["']?$""")
_AFTER_VALUE = re.compile(r"""^["']?\s*(#.*)?$""")


def values_references(action: Action, context: Context, line: str) -> Iterator[tuple[list[Segment], bool, bool]]:
    """Per reference: (values path, whether the action writes a block (`toYaml`, `include`...),
    whether the line's value is exactly that value (`key: {{ .Values.x }}`, maybe quoted))."""
    generator = action.generates_block
    before, after = line[:action.column], line[action.column + action.end - action.start:]
    exact = (not generator and bool(_EXACT.match(action.body))
             and bool(_BEFORE_VALUE.match(before)) and bool(_AFTER_VALUE.match(after)))
    seen: set[tuple] = set()
    for path in _references(action.body, context.dot, context.variables):
        if path and tuple(path) not in seen:
            seen.add(tuple(path))
            yield path, generator, exact
