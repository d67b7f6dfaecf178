"""Which template entry wrote each item of a rendered list, told for the whole list at once.

A list's template writes literal items (`- name: http`), items repeated by a `range` (one per
element of the values it ranges over), items behind an `if`, and items an action generates
(`toYaml`, `include`). Rendered items come out in template order, so the items are a sequence of
runs, one run per template entry: `assign_items` finds the runs. Each entry may write between
`multiplicity` items (a literal one: exactly one, or none behind an `if` the values do not take;
a `range`: as many as its values hold, when they are known here; an action: any number), and each
rendered item fits an entry more or less (`fit`: a literal `containerPort: 80` or `protocol: UDP`
that differs rules the entry out, a templated `name: {{ $key }}-tcp` whose literal text is not in
the rendered value counts against it). The best split under those bounds is the answer, and with
it each item's place in its run: the `range` iteration that wrote it (so the values element it
read) or its number in the generated list. Two identical `range` loops over `.Values.tcp` and
`.Values.udp` are told apart by how many elements each ranges over, not by their (same) text.

None when no split fits (values this run does not know, a template this reading cannot follow):
the caller falls back to matching the items one by one.
"""

from __future__ import annotations

import re

from kubelint_ports.loading.helm.template_outline import Action, Entry, literal_value, without_comment
from kubelint_ports.loading.helm.templatemap_values import (
    RangeIndex, ValuesSource, _resolve_expression, condition_truth, open_blocks, template_context)
from kubelint_ports.loading.yaml_files import yamltree as yt

MAX_ITEMS = 120  # rendered items split as a whole; a longer list is matched item by item
_MANY = 1 << 30  # no upper bound
_INCLUDED = re.compile(r'\b(?:include|template)\s+"([^"]+)"')
_RANGE_BINDING = re.compile(r"\s*(\$\w+)\s*(?:,\s*(\$\w+)\s*)?:=(.*)$", re.DOTALL)
_ACTION_TEXT = re.compile(r"\{\{.*?\}\}")
_CONTROL_TEXT = re.compile(r"\{\{-?\s*(?:if|else|end|with|range)\b")

Run = tuple[Entry, int]  # (entry that wrote the item, the item's place in that entry's run)


def assign_items(parent: Entry, rendered: yt.Node | None, actions: list[Action], values: ValuesSource | None,
                 range_index: RangeIndex, lines: list[str], top=None) -> list[Run] | None:
    """Per rendered item of the list `rendered` (written under `parent`): the entry that wrote it and
    its place in that entry's run; None when no split of the items over the entries fits."""
    if not isinstance(rendered, yt.SequenceNode):
        return None
    children = [child for child in parent.children if child.kind in ("item", "gen")]
    items = rendered.value
    if not children or not items or len(items) > MAX_ITEMS:
        return None
    bounds = [multiplicity(child, parent, actions, values, range_index, top) for child in children]
    fits = [[fit(child, item, lines) for item in items] for child in children]
    count = len(items)
    impossible = float("-inf")
    # best[j][i]: the best score of the first i items written by the first j entries.
    best = [[impossible] * (count + 1) for _ in range(len(children) + 1)]
    taken = [[0] * (count + 1) for _ in range(len(children) + 1)]
    best[0][0] = 0
    for j, child in enumerate(children):
        low, high = bounds[j]
        for i in range(count + 1):
            if best[j][i] == impossible:
                continue
            score = best[j][i]
            for run in range(0, min(high, count - i) + 1):
                if run:
                    score_item = fits[j][i + run - 1]
                    if score_item is None:
                        break
                    score += score_item
                if run < low:
                    continue
                # Ties go to the earlier entries' longer runs (the first of two `if`/`else` twins).
                if score > best[j + 1][i + run] or (score == best[j + 1][i + run] and run < taken[j + 1][i + run]):
                    best[j + 1][i + run] = score
                    taken[j + 1][i + run] = run
    if best[len(children)][count] == impossible:
        return None
    runs: list[Run] = []
    i = count
    for j in range(len(children), 0, -1):
        run = taken[j][i]
        runs[:0] = [(children[j - 1], offset) for offset in range(run)]
        i -= run
    return runs


def multiplicity(child: Entry, parent: Entry, actions: list[Action], values: ValuesSource | None,
                 range_index: RangeIndex, top=None) -> tuple[int, int]:
    """How many rendered items `child` may have written (low, high), from the blocks opened around
    it inside `parent`: a `range` multiplies by its element count (when the values tell it), an
    `if`/`with` the values do not take makes it none, one they may not take makes it optional."""
    low, high = (0, _MANY) if child.kind == "gen" else (1, 1)
    in_range = False
    for kind, branches in open_blocks(actions, child.line):
        if branches[0][1] <= parent.line:
            continue  # opened before the list: it rendered, or the list would not have
        if kind == "range":
            elements = None if in_range or len(branches) > 1 else range_count(
                actions, branches[0], values, range_index, top)
            if elements is None:
                low, high = 0, _MANY
            else:
                low, high = low * elements, min(_MANY, high * elements)
            in_range = True
        elif kind in ("if", "with"):
            if in_range:  # decided per element: not known here
                low = 0
                continue
            truth = _branch_truth(actions, branches, values, range_index, top)
            if truth is False:
                return 0, 0
            if truth is None:
                low = 0
    return low, high


def range_count(actions, opening: tuple[str | None, int], values: ValuesSource | None, range_index, top) -> int | None:
    """How many elements `range <expression>` goes over, when the values tell it."""
    expression, line = opening
    if values is None or expression is None:
        return None
    binding = _RANGE_BINDING.match(expression)
    expression = binding.group(3) if binding else expression
    context = template_context(actions, line, range_index, top)
    path = _resolve_expression(expression, context.dot, context.variables)
    if not path or values.set_on_command_line(path):
        return None
    known, node = values.lookup(path)
    if not known:
        return None
    if node is None:
        return 0
    if isinstance(node, yt.MappingNode):
        keys = values.map_keys(path)  # Helm merges maps over the values files
        return len(keys) if keys is not None else len(node.value)
    if isinstance(node, yt.SequenceNode):
        return len(node.value)
    if isinstance(node, yt.ScalarNode) and yt.scalar_type(node) == yt.NULL:
        return 0
    return None


def _branch_truth(actions, branches: list[tuple[str | None, int]], values: ValuesSource | None,
                  range_index, top) -> bool | None:
    """Whether the values take the last branch of one `if`/`else if`/`else` block."""
    if values is None:
        return None
    taken: bool | None = True
    for index, (condition, at) in enumerate(branches):
        truth = True if condition is None else condition_truth(
            condition, template_context(actions, at, range_index, top), values)
        if index < len(branches) - 1:
            truth = None if truth is None else not truth
        if truth is False:
            return False
        if truth is None:
            taken = None
    return taken


def fit(child: Entry, item: yt.Node, lines: list[str]) -> int | None:
    """How well the rendered list item `item` fits the entry `child`; None when it cannot be the
    entry's (a literal value the template writes is another one)."""
    if child.kind == "gen":
        name = yt.get(item, "name") if isinstance(item, yt.MappingNode) else None
        if not isinstance(name, yt.ScalarNode) or not name.value:
            return 0
        # Named after the item: `container-agent` fits `agent` better than `container-trace-agent`;
        # or passed its name: `include "x.port" (dict "name" "metrics" ...)`.
        extra = [len(re.split(r"[-.]", included)) - len(re.split(r"[-.]", name.value))
                 for included in _INCLUDED.findall(child.value)
                 if included == name.value or included.endswith(("-" + name.value, "." + name.value))]
        named = 3 if f'"{name.value}"' in child.value else 0  # `(dict "name" "metrics" ...)`
        return max(1, 4 - min(extra), named) if extra else named
    if not isinstance(item, yt.MappingNode):
        return 0
    score = 0
    open_ended = any(grandchild.kind == "gen" or (grandchild.kind == "key" and grandchild.key is None)
                     for grandchild in child.children)
    written: set[str] = set()
    for key_node, value in item.value:
        if not isinstance(key_node, yt.ScalarNode):
            continue
        key = key_node.value
        written.add(key)
        candidates = [grandchild for grandchild in child.children
                      if grandchild.kind == "key" and grandchild.key == key]
        if not candidates:
            score -= 0 if open_ended else 2
            continue
        if not isinstance(value, yt.ScalarNode):
            score += 1
            continue
        literals = [literal_value(candidate.value) for candidate in candidates]
        if value.value in literals:
            score += 3
            continue
        if all(literal is not None for literal in literals):
            return None
        patterns = [_pattern(lines[candidate.line], candidate) for candidate in candidates
                    if literal_value(candidate.value) is None and candidate.line < len(lines)]
        if any(pattern is None or pattern.fullmatch(value.value) for pattern in patterns):
            score += 1 if any(pattern is not None for pattern in patterns) else 0
        else:
            score -= 2
    for grandchild in child.children:
        if grandchild.kind == "key" and grandchild.key is not None and grandchild.key not in written:
            score -= 1
    return score


def _pattern(line: str, key: Entry) -> re.Pattern | None:
    """The rendered values a templated `key: text{{ action }}text` line may write, as a pattern
    (`{{ $key }}-tcp` -> `.*-tcp`); None when the line has nothing literal to tell."""
    start = line.find(":", key.column) + 1
    text = line[start:].strip() if start > 0 else ""
    if _CONTROL_TEXT.search(text):  # `{{ if .x }}prefix-{{ end }}`: what is written depends
        return None
    text = without_comment(text)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    pieces = _ACTION_TEXT.split(text)
    if not "".join(pieces).strip():
        return None
    return re.compile(".*".join(re.escape(piece) for piece in pieces), re.DOTALL)
