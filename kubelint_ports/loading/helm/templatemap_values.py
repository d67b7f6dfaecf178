"""Where the `.Values` a template line reads are set: values files composed with positions, the
layers a template's values come from, and the references (`.Values.x.y`, `$.Values`, `index
.Values "x"`, `with`/`range` contexts, `$var := .Values.x`) an action makes at a line; and which
`if`/`with` branches those values take, where their conditions are references, `not`, `and`, `or`.

Split from `templatemap.py`, which maps rendered fields to template lines and asks this module for
the values locations of those lines.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import yaml

from kubelint_ports.loading.yaml_files.loader import ManifestLoader
from kubelint_ports.loading import budgets, files
from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.helm.template_outline import ASSIGN, CONTROL_WORDS
from kubelint_ports.vocabulary import Location

if TYPE_CHECKING:
    from kubelint_ports.loading.helm.template_outline import Action, Entry

Segment = str | int
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|`[^`]*`')
_INDEX = re.compile(r'\bindex\s+(\$?\.Values(?:\.\w+)*|\$\w+(?:\.\w+)*)((?:\s+"[^"]*")+)')
_FIELD_CHAIN = re.compile(r"(?<![\w)\].$])(?:(\$\w*)((?:\.[A-Za-z_]\w*)*)|((?:\.[A-Za-z_]\w*)+|\.(?![\w.])))")
_BUILTINS = frozenset(("Release", "Chart", "Capabilities", "Template", "Files", "Subcharts"))


# --- values files ----------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class ValuesFile:
    """A values file, composed once with marks (only when a finding needs it). `data`: its text
    when it is no file of its own (`<archive>:<member>` of a packaged chart)."""

    path: str  # absolute: shown relative to wherever the run is
    _root: object = None
    _loaded: bool = False
    data: bytes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.path = os.path.abspath(self.path)

    @property
    def root(self) -> yt.Node | None:
        if not self._loaded:
            self._loaded = True
            try:
                data = self.data if self.data is not None else files.read_file(
                    self.path, budgets.current().max_file_bytes)
                self._root = budgets.compose(data, loader=ManifestLoader)
            except (OSError, yaml.YAMLError):
                self._root = None
        return self._root

    def locate(self, segments: list[Segment]) -> tuple[int, Location | None]:
        depth, location, _ = self.resolve(segments)
        return depth, location

    def resolve(self, segments: list[Segment]) -> tuple[int, Location | None, yt.Node | None]:
        """How many segments resolve, the place of the deepest one, and its value node."""
        key_node, value_node, depth = yt.descend(self.root, segments)
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
        if not segments or self.set_on_command_line(segments):
            return None  # set on the command line: no file holds it
        segments = self.keyed(segments)
        scoped = segments[0] == "global"  # globals are read at the top of every file
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

    def keyed(self, segments: list[Segment]) -> list[Segment]:
        """`segments` with each item number that a `range` over a map gave (the template map counts
        a range's items, `ports[1]`) replaced by that map's key: Go ranges over a map's keys in
        sorted order, and the map is every layer's keys merged (`ports.otlp`)."""
        keyed: list[Segment] = []
        for segment in segments:
            if isinstance(segment, int):
                keys = self.map_keys(keyed)
                if keys is not None and 0 <= segment < len(keys):
                    segment = keys[segment]
            keyed.append(segment)
        return keyed

    def map_keys(self, segments: list[Segment]) -> list[str] | None:
        """The sorted keys of the map at `.Values.<segments>`, merged over the layers; None when no
        layer holds a map there."""
        keys: set[str] | None = None
        scoped = segments[:1] == ["global"]
        for values_file, prefix in self.layers:
            wanted = list(segments) if scoped else [*prefix, *segments]
            depth, _, node = values_file.resolve(wanted) if wanted else (0, None, values_file.root)
            if (depth == len(wanted) or not wanted) and isinstance(node, yt.MappingNode):
                keys = (keys or set()) | {key.value for key, _ in node.value if isinstance(key, yt.ScalarNode)}
        return sorted(keys) if keys is not None else None

    def set_on_command_line(self, segments: list[Segment]) -> bool:
        full = ([] if segments[:1] == ["global"] else list(self.set_prefix)) + list(segments)
        return any(full[:len(set_path)] == set_path for set_path in self.set_paths)

    def chart_layers(self) -> int:
        """How many of the last layers are charts' own `values.yaml` (a file beside a Chart.yaml, or
        an archive's member): the rest, before them, are the files passed with -f."""
        count = 0
        for values_file, _ in reversed(self.layers):
            directory = os.path.dirname(values_file.path)
            if values_file.data is None and not (os.path.basename(values_file.path) == "values.yaml"
                                                 and os.path.isfile(os.path.join(directory, "Chart.yaml"))):
                break
            count += 1
        return count

    def users_layer(self) -> tuple[ValuesFile, tuple[str, ...], bool] | None:
        """(file, key prefix, passed with -f) where a fix sets a key: the values file passed last
        with -f (Helm reads it last, so its keys win), else the top chart's own `values.yaml` (a
        subchart's under `charts/` is vendored: the next `helm dependency update` overwrites it);
        None when neither is a file here."""
        users = len(self.layers) - self.chart_layers()
        if users:
            return (*self.layers[0], True)
        if self.layers and self.layers[users][0].data is None:
            return (*self.layers[users], False)
        return None

    def lookup(self, segments: list[Segment]) -> tuple[bool, yt.Node | None]:
        """(known, value node) of `.Values.<segments>`: the highest layer holding the whole key
        gives it; held by none, it is null; set on the command line, it is not known here."""
        if not segments or self.set_on_command_line(segments):
            return False, None
        segments = self.keyed(segments)
        scoped = segments[0] == "global"
        for values_file, prefix in self.layers:
            wanted = list(segments) if scoped else [*prefix, *segments]
            depth, _, node = values_file.resolve(wanted)
            if depth == len(wanted):
                return True, node
        return True, None

    def truth(self, segments: list[Segment]) -> bool | None:
        """Whether `{{ if .Values.<segments> }}` takes its branch (Go templates: false, 0, null
        and empty are false), or None when the value is not known here."""
        known, node = self.lookup(segments)
        if not known:
            return None
        if node is None:
            return False
        if not isinstance(node, yt.ScalarNode):
            return bool(node.value)  # an empty map or list is false
        kind = yt.scalar_type(node)
        if kind in (yt.NULL, yt.BOOL):
            return yt.as_bool(node)  # null: false
        if kind in (yt.INT, yt.FLOAT):
            return _nonzero(node.value)
        return node.value != ""



def _nonzero(text: str) -> bool:
    """A YAML number as Go's templates test it: anything but zero (NaN and infinities too)."""
    number = yt.parse_int(text)
    if number is not None:
        return number != 0
    try:
        return float(text.replace("_", "")) != 0
    except ValueError:  # `.inf`, `.nan`
        return True


# --- `.Values` references ----------------------------------------------------------------------


@dataclass(slots=True)
class Context:
    dot: list[Segment] | None  # what `.` is, as a values path; None when it is not in .Values
    variables: dict[str, list[Segment]]
    conditions: list[tuple[list[Segment], int]]  # values tested by the enclosing `if`s, with their line


RangeIndex = int | dict[int, int] | None  # the element of each `range` (`template_context`)
ROOT: list[Segment] = []  # `.` at a template's top: the root context, where `.Values` is absolute


class Fields(dict):
    """`.` inside a `define` an `include` passed a `dict "port" .Values.a.port "ctx" $`: per key,
    the values path of its value (ROOT for the root context); a key it lacks is no values path."""

    def key(self) -> tuple:
        return tuple(sorted((name, tuple(path)) for name, path in self.items()))


def template_context(actions: list[Action], line: int, range_index: RangeIndex,
                     top: list[Segment] | None = ROOT) -> Context:
    """`.`, `$variables` and enclosing `if` conditions as they stand at `line`. `top`: what `.` is
    at the top (a `define`'s body: what the `include` passed it; None when not a values path).
    `range_index`: which element each `range` is at, by the line of its action (one number: every
    `range` at that one; None, or a line the map lacks: not known)."""
    stack: list[tuple[str, list[Segment] | None, int]] = []  # (kind, values path, line)
    variables: dict[str, list[Segment]] = {}

    def dot() -> list[Segment] | None:
        for kind, path, _ in reversed(stack):
            if kind in ("with", "range", "define"):
                return path
        return top  # the top: the root context (`.Values` is absolute), or what an include passed

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
                index = range_index.get(action.line) if isinstance(range_index, dict) else range_index
                element = path + [index] if path is not None and index is not None else None
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
    if isinstance(dot, Fields):  # a `dict` passed to a `define`: `.port`, `.ctx.Values.x`
        base = dot.get(fields[0]) if fields else None
        if base is None:
            return None
        if not base:  # the root context: `.ctx` is it, `.ctx.Values.x` a key
            return [] if len(fields) == 1 else (fields[2:] or None) if fields[1:2] == ["Values"] else None
        return base + fields[1:]
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


# --- which `if` branches the values take --------------------------------------------------------

_BLOCKS = frozenset(("if", "with", "range", "define", "block"))
_MAX_CONDITION_DEPTH = 16  # nested `not`/`and`/`or`/parentheses read; deeper is not known


def branch_taken(actions: list[Action], line: int, values: ValuesSource, range_index: RangeIndex,
                 top: list[Segment] | None = ROOT) -> bool | None:
    """Whether the values take every `if`/`with` branch enclosing `line` (an `else if` is taken
    when the conditions before it are false and its own is true): False when one is known not to
    be, True when all are known to be, None when a condition cannot be read here."""
    taken: bool | None = True
    for kind, branches in open_blocks(actions, line):
        if kind not in ("if", "with"):
            continue
        for index, (condition, at) in enumerate(branches):
            truth = True if condition is None else condition_truth(
                condition, template_context(actions, at, range_index, top), values)
            taken = _all([taken, truth if index == len(branches) - 1 else _not(truth)])
        if taken is False:
            return False
    return taken


def open_blocks(actions: list[Action], line: int) -> list[tuple[str, list[tuple[str | None, int]]]]:
    """The blocks (`if`, `with`, `range`, `define`, `block`) open at `line`, outermost first: their
    kind and, per branch so far (`else if`, `else`), its condition (None for `else`) and line."""
    blocks: list[tuple[str, list[tuple[str | None, int]]]] = []
    for action in actions:
        if action.line >= line:
            break
        words = action.words
        if action.is_comment or not words:
            continue
        if words[0] in _BLOCKS:
            blocks.append((words[0], [(action.body[len(words[0]):], action.line)]))
        elif words[0] == "else" and blocks:
            chained = len(words) > 2 and words[1] in ("if", "with")
            blocks[-1][1].append((action.body.split(None, 2)[2] if chained else None, action.line))
        elif words[0] == "end" and blocks:
            blocks.pop()
    return blocks


def condition_truth(expression: str, context: Context, values: ValuesSource, depth: int = 0) -> bool | None:
    """The truth of an `if` condition made of `.Values` references, `not`, `and`, `or` and
    parentheses; None for anything else (a comparison, a function, a pipeline, a built-in)."""
    terms = _terms(expression)
    if terms is None or not terms or depth > _MAX_CONDITION_DEPTH:
        return None
    if terms[0] == "not" and len(terms) == 2:
        return _not(condition_truth(terms[1], context, values, depth + 1))
    if terms[0] in ("and", "or") and len(terms) > 2:
        truths = [condition_truth(term, context, values, depth + 1) for term in terms[1:]]
        return _all(truths) if terms[0] == "and" else _not(_all([_not(truth) for truth in truths]))
    if len(terms) != 1:
        return None
    if terms[0].startswith("("):
        return condition_truth(terms[0][1:-1], context, values, depth + 1)
    path = _resolve_expression(terms[0], context.dot, context.variables)
    return values.truth(path) if path else None


def _terms(expression: str) -> list[str] | None:
    """An expression's words at the top level (a parenthesised group is one word); None when it
    holds a pipeline or a string, which this reading does not evaluate."""
    terms: list[str] = []
    depth, start = 0, None
    for index, char in enumerate(expression):
        if char in "\"'`|":
            return None
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return None
        if char.isspace() and depth == 0:
            if start is not None:
                terms.append(expression[start:index])
                start = None
        elif start is None:
            start = index
    if depth != 0:
        return None
    if start is not None:
        terms.append(expression[start:])
    return terms


def _not(truth: bool | None) -> bool | None:
    return None if truth is None else not truth


def _all(truths: list[bool | None]) -> bool | None:
    """`and` where some truths are not known: false if one is false, true if all are true."""
    if any(truth is False for truth in truths):
        return False
    return True if all(truth is True for truth in truths) else None


# --- the branch that rendered -------------------------------------------------------------------


def rendered_branches(parent: Entry, actions: list[Action], values: ValuesSource | None,
                      range_index: RangeIndex, else_lines: list[int]) -> Entry:
    """`parent` without the list items in an `if`/`else` branch the values are known not to take:
    Helm never rendered them, so they wrote no rendered item (`{{ if .Values.legacy }}` and
    `{{ else }}` holding the same `- name: metrics` item must not be told apart by order). Only a
    list with an `else` among its items is looked at: the hot path of every finding's place."""
    items = parent.items()
    if values is None or len(items) < 2 or not _else_between(else_lines, items[0].line, items[-1].line):
        return parent
    kept = [child for child in parent.children
            if child.kind != "item" or branch_taken(actions, child.line, values, range_index) is not False]
    return parent if len(kept) == len(parent.children) else replace(parent, children=kept)


def twin_of(chosen: Entry, parent: Entry, source, range_index: RangeIndex) -> Entry | None:
    """Another child of `parent` that writes the same text as `chosen` across an `else`, in a branch
    the values may take, when they do not tell that `chosen`'s branch is the one taken: either may
    be what Helm rendered, so the place is a guess and no fix may edit it."""
    if chosen.kind not in ("key", "item"):
        return None
    _, actions, lines = source.outline
    siblings = [other for other in parent.children if other is not chosen and other.kind == chosen.kind
                and _line_text(other, lines) == _line_text(chosen, lines)
                and _else_between(source.else_lines, min(other.line, chosen.line), max(other.line, chosen.line))]
    if not siblings:
        return None
    values = source.values
    if values is not None and branch_taken(actions, chosen.line, values, range_index) is True:
        return None
    text = _written(chosen, lines)
    for other in siblings:
        if _written(other, lines) == text and (
                values is None or branch_taken(actions, other.line, values, range_index) is not False):
            return other
    return None


def _else_between(else_lines: list[int], first: int, last: int) -> bool:
    import bisect

    index = bisect.bisect_right(else_lines, first)
    return index < len(else_lines) and else_lines[index] < last


def _line_text(entry: Entry, lines: list[str]) -> str:
    return lines[entry.line].strip() if 0 <= entry.line < len(lines) else ""


def _written(entry: Entry, lines: list[str], depth: int = 0) -> tuple:
    """The template text an outline entry and its children write (actions and all)."""
    if depth > 20:
        return ()
    return entry.kind, _line_text(entry, lines), tuple(_written(child, lines, depth + 1) for child in entry.children)
