"""A fix worked out on a rendered Helm object, carried to the chart's own text.

Helm renders text, so the output is not what the user wrote. The template map (`loading.
templatemap`) already knows the template line that wrote a field and the values key it reads;
a fix follows it:

- the line reads one values key and writes nothing else (`nodePort: {{ .Values.web.nodePort }}`,
  maybe quoted or piped through `quote`/`int`), or a `toYaml` copies the key: the key is edited in
  the values file that supplies it (the one passed with `-f`, else the chart's `values.yaml`);
- the line writes the value literally (`containerPort: "8081"`): the literal is edited;
- a quoted port whose quotes are the template's own (`containerPort: "{{ .Values.port }}"`): the
  two quote characters are removed;
- anything else (a computed value, `| quote`, `include`, a removal, a value `--set` gave, a line
  inside `range` whose port would move for every item): no fix, and the finding says why.

The value found must be the rendered one (the values scalar, the literal's text), or the map
landed elsewhere and there is no fix. Nothing here writes.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

import yaml

from kubelint_ports.findings import Finding
from kubelint_ports.fixes.plan import Context, Plan
from kubelint_ports.fixes.source import (
    NoFix, SourceFile, Target, line_starts, line_value, scalar_span, scalar_text)
from kubelint_ports.loading import display_path

COPIES = re.compile(r"\b(toYaml|toJson|toPrettyJson|toRawJson)\b")
TRANSFORMS = re.compile(r"\b(include|template|tpl|printf|print|default|add|sub|mul|replace|trim\w*)\b")
QUOTING = ("quote", "squote")


def carry(document, target: Target, plan: Plan, finding: Finding, context: Context) -> tuple[Plan, Target]:
    """The plan on the rendered object -> the same change in the chart's values file or template,
    with the description saying where. Raises NoFix."""
    template = document.source
    if plan.splice is None:
        raise NoFix(f"the fix removes what the chart's template {document.path} writes; rendered output is not edited, "
                    f"so remove it in the template")
    if template is None or template.file is None:
        raise NoFix("the template is not a file here (inside a packaged chart, or output without --chart-root)")
    mapped = document.map(finding.field_path)
    if mapped is None or mapped.entry is None or mapped.entry.kind == "root":
        raise NoFix("the template line that writes it is not known")
    _, actions, outline_lines = template.outline
    number = mapped.entry.line
    text = context.sources.read(template.file, display_path(template.file))
    starts = line_starts(text.text) if text is not None else []
    if text is None or number >= len(starts) or number >= len(outline_lines) \
            or line_of(text.text, starts, number).rstrip("\r") != outline_lines[number]:
        raise NoFix(f"{document.path} cannot be read again as it was rendered")
    line = line_of(text.text, starts, number)
    where = f"{document.path}:{number + 1}"
    value = target.value
    start, end, new_value = plan.splice
    style_only = new_value == value.value  # KP001: the value stays, its quotes go
    on_line = [action for action in actions if action.line == number and not action.is_control]
    values = template.values
    if mapped.rest:
        path, where = generated_reference(mapped, actions, outline_lines, document.path)
        return from_values(values, path, value, plan, style_only, context, where, finding)
    if not on_line:
        span = line_value(line, mapped.entry.column)
        if span is None or line[span[0]:span[1]] != target.source.text[start:end]:
            raise NoFix(f"{where} does not write the rendered value literally")
        if not style_only and inside_range(actions, number):
            raise NoFix(f"{where} is inside a `range`: the port would move for every item")
        edited = Plan(plan.applicability, plan.description, port=plan.port)
        if not style_only:
            edited = context.once(edited, (text.path, starts[number] + span[0], starts[number] + span[1]), new_value,
                                  target.key.value, value.value)
        else:
            edited = replace(edited, splice=(starts[number] + span[0], starts[number] + span[1], new_value))
        return (replace(edited, description=f"{edited.description} (the template's literal, {where})"),
                Target(text, None, [], None, None, value))
    if len(on_line) != 1:
        raise NoFix(f"{where} holds {len(on_line)} template actions: no one value to edit")
    action = on_line[0]
    path = exact_reference(action, actions, mapped, outline_lines[number], where)
    if not style_only:
        return from_values(values, path, value, plan, style_only, context, where, finding)
    find_values(values, path, value, context, where)  # the line writes the key's value, quoted
    pipes = [part.split()[0] for part in action.body.split("|")[1:] if part.split()]
    quoting = [pipe for pipe in pipes if pipe in QUOTING]
    if quoting:
        raise NoFix(f"the template quotes it with `| {quoting[0]}` ({where}); remove that pipe")
    before, after = line[action.column - 1:action.column], line[action.column + action.end - action.start:][:1]
    if before not in ("'", '"') or after != before:
        raise NoFix(f"the quotes are not written at {where}")
    first = starts[number] + action.column - 1
    last = starts[number] + action.column + action.end - action.start + 1
    body = text.text[first + 1:last - 1]
    return (Plan(plan.applicability, f"remove the quotes around {body} ({where})", splice=(first, last, body)),
            Target(text, None, [], None, None, value))


def line_of(text: str, starts: list[int], number: int) -> str:
    end = starts[number + 1] - 1 if number + 1 < len(starts) else len(text)
    return text[starts[number]:end]


def exact_reference(action, actions, mapped, line: str, where: str) -> list:
    """The values path the action writes as the line's whole value (`{{ .Values.x }}`, maybe
    piped through quote or int); NoFix when it computes something else."""
    from kubelint_ports.loading.templatemap_values import template_context, values_references

    context = template_context(actions, action.line, mapped.range_index)
    references = list(values_references(action, context, line))
    if len(references) != 1:
        raise NoFix(f"{where} reads {len(references) or 'no'} values keys: no one key to edit")
    path, generator, exact = references[0]
    if generator or not exact or TRANSFORMS.search(action.body):
        raise NoFix(f"the template computes it (`{{{{ {action.body} }}}}` at {where}): there is no literal to edit")
    return path


def generated_reference(mapped, actions, lines: list[str], path: str) -> tuple[list, str]:
    """(values path, place) of a field a `toYaml .Values.x` wrote: the key under `x`."""
    from kubelint_ports.loading.templatemap_values import template_context, values_references

    entry = mapped.entry
    where = f"{path}:{entry.line + 1}"
    action = next((a for a in actions if a.line == entry.line and a.body == entry.value), None)
    if entry.kind != "gen" or action is None:
        raise NoFix(f"the template does not show the line that writes {'.'.join(map(str, mapped.rest))}")
    if not COPIES.search(action.body) or TRANSFORMS.search(action.body):
        raise NoFix(f"`{{{{ {action.body} }}}}` writes it: there is no literal to edit")
    context = template_context(actions, entry.line, mapped.range_index)
    paths = [path for path, _, _ in values_references(action, context, lines[entry.line])]
    if len(paths) != 1:
        raise NoFix(f"`{{{{ {action.body} }}}}` reads {len(paths) or 'no'} values keys: no one key to edit")
    return paths[0] + list(mapped.rest), where


def from_values(values, reference: list, value: yaml.ScalarNode, plan: Plan, style_only: bool, context: Context,
                where: str, finding: Finding) -> tuple[Plan, Target]:
    """The plan carried to the values key at `reference` (a values path), when that key holds the
    rendered value: its scalar replaced, in the quotes it had unless the quotes are the fix."""
    from kubelint_ports.fixes.plan import place

    source, key, node, named = find_values(values, reference, value, context, where)
    if style_only and node.style not in ("'", '"'):
        raise NoFix(f"{named} is not quoted, the template makes it a string ({where})")
    start, end = scalar_span(node)
    text = scalar_text(plan.splice[2], node.style, style_only)
    if not style_only and finding.rule_id == "KP203":
        here = (source.path, key.start_mark.line + 1, key.start_mark.column + 1)
        for other in context.findings:
            if (other is not finding and other.rule_id == "KP203" and other.port == finding.port
                    and other.subject != finding.subject and any(place(r) == here for r in other.related)):
                raise NoFix(f"{other.subject} takes its nodePort from {named} too: moving it moves both")
    shown = f"{source.path}:{key.start_mark.line + 1}"
    edited = Plan(plan.applicability, plan.description, splice=(start, end, text), port=plan.port)
    if not style_only:
        edited = context.once(edited, (source.path, start, end), text, named, value.value)
    return replace(edited, description=f"{edited.description} (set {named} in {shown})"), \
        Target(source, None, [], None, key, node)


def find_values(values, reference: list, value: yaml.ScalarNode, context: Context, where: str):
    """(values file, key node, value node, `.Values.x.y`) of the key that supplies `value`; NoFix
    when no values file this run read holds it with that value."""
    named = ".Values" + "".join(f"[{segment}]" if isinstance(segment, int) else f".{segment}" for segment in reference)
    located = values.find(reference, value.value) if values is not None else None
    if located is None:
        if values is not None and values.find(reference) is not None:
            raise NoFix(f"{where} reads {named}, which does not hold the rendered {value.value}: where that value "
                        f"is written is not known")
        raise NoFix(f"{named} ({where}) is not set in a values file this run read (--set, or the template's default)")
    location, _ = located
    layer = next((file.path for file, _ in values.layers if display_path(file.path) == location.path),
                 os.path.abspath(location.path))
    source: SourceFile | None = context.sources.read(layer, location.path)
    found = source.pair_at(location.line, location.column) if source is not None else None
    if found is None or not isinstance(found[1], yaml.ScalarNode) or found[1].value != value.value:
        raise NoFix(f"{named} in {location.path} does not hold the rendered value {value.value}")
    key, node = found
    if source.is_shared(node):
        raise NoFix(f"{named} in {location.path} is an anchor's value that aliases repeat")
    return source, key or node, node, named


def inside_range(actions, line: int) -> bool:
    """Whether `line` of a template is inside a `{{ range }}` block (its text repeats per item)."""
    open_blocks: list[str] = []
    for action in actions:
        if action.line >= line:
            break
        words = action.words
        if not words or action.is_comment:
            continue
        if words[0] in ("range", "with", "if", "define", "block"):
            open_blocks.append(words[0])
        elif words[0] == "end" and open_blocks:
            open_blocks.pop()
    return "range" in open_blocks
