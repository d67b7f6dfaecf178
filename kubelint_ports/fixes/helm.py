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
landed elsewhere and there is no fix. A move has three more rules (docs/fix.md, "What a move may
do"): the same text in two `if` branches the values do not decide is no place to edit; a values
key the chart's templates read anywhere but as ports of the same object is not moved
(`other_uses`), and the description names every field it changes; a key only a chart's own
`values.yaml` holds is added to the user's (the last -f file, else the top chart's) rather than
edited in a vendored chart (`add_to_values`). Nothing here writes.
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
from kubelint_ports.loading.yaml_files import yamltree as yt

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
    if mapped.twin is not None:
        raise NoFix(f"{document.path}:{mapped.twin.line + 1} writes the same text in another branch of an `if` "
                    f"whose condition is not known here: which one Helm rendered cannot be told, so neither is edited")
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
        through = document.map_through(finding.field_path)
        if through is not None and through.source is not template and through.source is not None \
                and not through.rest and through.entry is not None and through.entry.kind != "root":
            return from_define(document, mapped, through, value, plan, style_only, context, finding)
        path, where = generated_reference(mapped, actions, outline_lines, document.path)
        return from_values(values, path, value, plan, style_only, context, where, finding, (document, number))
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
        return from_values(values, path, value, plan, style_only, context, where, finding, (document, number))
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


def exact_reference(action, actions, mapped, line: str, where: str, top=None) -> list:
    """The values path the action writes as the line's whole value (`{{ .Values.x }}`, maybe
    piped through quote or int); NoFix when it computes something else. `top`: `.` at the top (a
    `define`'s: what the `include` passed)."""
    from kubelint_ports.loading.helm.templatemap_values import ROOT, template_context, values_references

    context = template_context(actions, action.line, mapped.range_index, ROOT if top is None else top)
    references = list(values_references(action, context, line))
    if len(references) != 1:
        raise NoFix(f"{where} reads {len(references) or 'no'} values keys: no one key to edit")
    path, generator, exact = references[0]
    if generator or not exact or TRANSFORMS.search(action.body):
        raise NoFix(f"the template computes it (`{{{{ {action.body} }}}}` at {where}): there is no literal to edit")
    return path


def generated_reference(mapped, actions, lines: list[str], path: str) -> tuple[list, str]:
    """(values path, place) of a field a `toYaml .Values.x` wrote: the key under `x`."""
    from kubelint_ports.loading.helm.templatemap_values import template_context, values_references

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
                where: str, finding: Finding, read_at: tuple | None = None) -> tuple[Plan, Target]:
    """The plan carried to the values key at `reference` (a values path), when that key holds the
    rendered value: its scalar replaced, in the quotes it had unless the quotes are the fix.
    `read_at`: (rendered document, template line) that reads the key, and (from a `define`) the
    places it reads the key through and the ports the key writes there; a move says the other
    rendered fields the key writes (`other_uses`)."""
    from kubelint_ports.fixes.plan import place

    if values is not None:
        reference = values.keyed(reference)  # `ports[1]` of a range over a map is `ports.otlp`
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
    also = other_uses(read_at[0], read_at[1], reference, where, finding, *read_at[2:]) \
        if read_at is not None and not style_only else ""
    shown = f"{source.path}:{key.start_mark.line + 1}"
    owner = None if style_only else values.users_layer()
    if owner is not None and chart_default(values, source.file):
        file, prefix, passed = owner
        if os.path.realpath(file.path) != os.path.realpath(source.file):  # a vendored chart's, or -f was given
            return add_to_values(file, prefix, passed, reference, value, plan, context, named, shown, also)
        defaults = "; this edits the chart's defaults: pass your own values file with -f to keep the move"
    else:
        defaults = ""
    edited = Plan(plan.applicability, plan.description, splice=(start, end, text), port=plan.port)
    if not style_only:
        edited = context.once(edited, (source.path, start, end), text, named, value.value)
    return replace(edited, description=f"{edited.description}{defaults} (set {named} in {shown}{also})"), \
        Target(source, None, [], None, key, node)


def chart_default(values, file: str) -> bool:
    """Whether `file` is one of the charts' own `values.yaml` among the template's values layers."""
    chart_layers = values.layers[len(values.layers) - values.chart_layers():]
    return any(os.path.realpath(layer.path) == os.path.realpath(file) for layer, _ in chart_layers)


SIMPLE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def add_to_values(file, prefix: tuple, passed: bool, reference: list, value: yaml.ScalarNode, plan: Plan,
                  context: Context, named: str, default_at: str, also: str) -> tuple[Plan, Target]:
    """The moved port set in the user's values file (the last -f one, else the top chart's own)
    when the key is only in a chart's defaults: added under the deepest mapping the file already
    has on the key's way, as block lines at that mapping's indentation, with the file's line ends."""
    wanted = list(reference) if reference[:1] == ["global"] else [*prefix, *reference]
    shown = display_path(file.path)
    which = "the values file passed with -f" if passed else "the top chart's values.yaml"
    source = context.sources.read(file.path, shown)
    roots = source.documents() if source is not None else None
    if source is None or roots is None or len(roots) > 1 or (not roots and source.text.strip()):
        raise NoFix(f"{named} is only in the chart's defaults ({default_at}), and {shown} ({which}) cannot be read "
                    f"as one YAML document to add it")
    root = roots[0] if roots else None
    key_node, parent, depth = yt.descend(root, wanted) if root is not None else (None, None, 0)
    missing = wanted[depth:]
    if depth == len(wanted) or not all(isinstance(segment, str) and SIMPLE_KEY.fullmatch(segment)
                                       for segment in missing):
        raise NoFix(f"{named} is only in the chart's defaults ({default_at}); adding it to {shown} ({which}) needs "
                    f"{'a list item' if depth < len(wanted) else 'another value'}: set it there by hand")
    if parent is not None and (not isinstance(parent, yaml.MappingNode) or parent.flow_style or not parent.value):
        raise NoFix(f"{named} is only in the chart's defaults ({default_at}); in {shown} ({which}) "
                    f"{'.'.join(map(str, wanted[:depth])) or 'the document'} is no block mapping to add it to")
    text = source.text
    newline = "\r\n" if "\r\n" in text else "\n"
    if parent is None:
        indent, at = 0, len(text)
    else:
        indent = parent.value[0][0].start_mark.column
        at = parent.value[-1][1].end_mark.index
        if at > 0 and text[at - 1] != "\n":  # after a scalar: the end of its line
            line_end = text.find("\n", at)
            at = len(text) if line_end < 0 else line_end + 1
    lead = newline if at == len(text) and text and not text.endswith("\n") else ""
    port = plan.splice[2]
    lines = [f"{' ' * (indent + 2 * level)}{segment}:" for level, segment in enumerate(missing)]
    lines[-1] += f" {port}"
    added = lead + newline.join(lines) + newline
    place = (source.path, at, at)
    if context.carried.setdefault(place, added) != added:  # the same lines twice are one edit (TCP and UDP)
        context.give_back(plan)
        raise NoFix(f"another fix of this run adds other lines to {shown} at the same place: run --fix again for "
                    f"this one")
    written = named if wanted == list(reference) else f"{'.'.join(map(str, wanted))} ({named} of the subchart)"
    defaults = "" if passed else ": the chart's defaults, pass your own values file with -f to keep the move"
    description = (f"{plan.description} (add {written}: {port} to {shown}, {which}{defaults}; the vendored default "
                   f"stays at {default_at}{also})" if not passed else
                   f"{plan.description} (add {written}: {port} to {shown}, {which}; the chart's default stays at "
                   f"{default_at}{also})")
    return (Plan(plan.applicability, description, splice=(at, at, added), port=plan.port),
            Target(source, root, [], None, None, value))


def find_values(values, reference: list, value: yaml.ScalarNode, context: Context, where: str):
    """(values file, key node, value node, `.Values.x.y`) of the key that supplies `value`; NoFix
    when no values file this run read holds it with that value."""
    if values is not None:
        reference = values.keyed(reference)
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


PORT_KEYS = frozenset(("hostPort", "containerPort", "port", "targetPort", "nodePort"))
LINE_KEY = re.compile(r"^\s*(?:-\s+)*([A-Za-z]+)\s*:")
MAX_TEMPLATES = 2_000  # a chart's template files read to find a values key's other uses


def other_uses(document, own_line: int, reference: list, where: str, finding: Finding,
               through: frozenset = frozenset(), also: tuple = ()) -> str:
    """Where else the chart's templates read the values key at `reference`, as the words the
    fix's description adds ("; it also sets containerPort at ..."). A key read anywhere but as a
    port of the same object (a flag, a config file, a checksum, another object, a `toYaml` of a
    map holding it) would move that too: NoFix, naming those places. `through`: (real file, line)
    of the lines that read it on the way (a `define`'s, the `include` passing it), `also` the
    ports they write (`from_define`)."""
    from kubelint_ports.loading.helm.templatemap_values import template_context, values_references

    template = document.source
    templates = chart_templates(template.file)
    if templates is None:
        raise NoFix(f"the chart's templates cannot all be read to see where else {dotted(reference)} is used")
    own_doc = template.document_for(document.ordinal, document.root)
    own_index = next((index for index, doc in enumerate(template.outline[0]) if doc is own_doc), None)
    own_file = os.path.realpath(template.file)
    ports, elsewhere = list(also), []
    names = {segment for segment in reference if isinstance(segment, str)}
    for file, (docs, actions, lines) in templates:
        shown = display_path(file)
        for action in actions:
            if action.is_control or (file == own_file and action.line == own_line) or (file, action.line) in through:
                continue
            if not action.generates_block and not any(name in action.body for name in names):
                continue  # cheap: a reference to the key names one of its segments, or copies a map
            text = lines[action.line] if action.line < len(lines) else ""
            context = template_context(actions, action.line, None)
            for used, generator, exact in values_references(action, context, text):
                if reference[:len(used)] != used:
                    continue
                key = LINE_KEY.match(text)
                place = f"{shown}:{action.line + 1}"
                if (file == own_file and exact and not generator and key is not None and key.group(1) in PORT_KEYS
                        and own_index is not None and outline_document(docs, action.line) == own_index):
                    ports.append(f"{key.group(1)} at {place}")
                else:
                    elsewhere.append(f"{place} (`{{{{ {action.body} }}}}`)")
                break
    if elsewhere:
        more = f" and {len(elsewhere) - 3} more" if len(elsewhere) > 3 else ""
        raise NoFix(f"{dotted(reference)}, which {where} reads, is also read at {', '.join(elsewhere[:3])}{more}: not "
                    f"as a port of {finding.subject}, so moving the key would change that too")
    return f"; the key also sets {', '.join(ports)}" if ports else ""


def dotted(reference: list) -> str:
    return ".Values" + "".join(f"[{segment}]" if isinstance(segment, int) else f".{segment}" for segment in reference)


def outline_document(docs, line: int) -> int | None:
    """Which outlined document of a template holds `line` (the last one starting at or before it)."""
    found = None
    for index, doc in enumerate(docs):
        first = doc.first or (doc.root.children[0] if doc.root.children else None)
        if first is not None and first.line <= line:
            found = index
    return found


_OUTLINES: dict[tuple[str, int, int], tuple] = {}  # (template, mtime, size) -> its outline, for every fix of a run


def chart_templates(template_file: str | None) -> list[tuple[str, tuple]] | None:
    """(real path, outline) of every template file of the chart that holds `template_file` (its
    `templates/` directory, subcharts' own apart), or None when they cannot all be read."""
    from kubelint_ports.loading import budgets, files
    from kubelint_ports.loading.helm.templatemap import parse_outline

    if template_file is None:
        return None
    directory = os.path.dirname(os.path.realpath(template_file))
    while os.path.basename(directory) != "templates":
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent
    found = []
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in sorted(names):
            file = os.path.join(root, name)
            if len(found) >= MAX_TEMPLATES:
                return None
            try:
                status = os.stat(file)
                key = (file, status.st_mtime_ns, status.st_size)
                if key not in _OUTLINES:
                    data = files.read_file(file, budgets.current().max_file_bytes)
                    _OUTLINES[key] = parse_outline(data.decode("utf-8-sig", "replace").replace("\r\n", "\n"))
            except (OSError, ValueError):
                return None
            found.append((file, _OUTLINES[key]))
    return found


def from_define(document, include, mapped, value, plan: Plan, style_only: bool, context: Context,
                finding: Finding) -> tuple[Plan, Target]:
    """The plan carried to the values key a `define`'s line writes (`hostPort: {{ .Values.x }}`,
    or `{{ .port }}` of an `include "name" (dict "port" .Values.x ...)`), the `include` on
    `include`'s line placing it: the key is edited, never the `define`, which every `include`
    shares. A key the `define` reads from the root, when another line includes it too, is not
    moved (that object's port would move as well). Raises NoFix."""
    from kubelint_ports.loading.helm.templatemap import _CALL, included_source
    from kubelint_ports.loading.helm.templatemap_values import ROOT, template_context, values_references

    body, template = mapped.source, document.source
    _, actions, lines = body.outline
    number = mapped.entry.line
    where = f"{body.path}:{number + 1}"
    if included_source(template, include.entry, include.range_index) is not body:
        raise NoFix(f"{where} is in a `define` that another `define` includes: where else it is used is not "
                    f"followed, so the key is not moved")
    if mapped.twin is not None:
        raise NoFix(f"{body.path}:{mapped.twin.line + 1} writes the same text in another branch of an `if` "
                    f"whose condition is not known here: which one Helm rendered cannot be told, so neither is edited")
    on_line = [action for action in actions if action.line == number and not action.is_control]
    if not on_line:
        raise NoFix(f"{where} writes it literally inside a `define`, which every `include` of it shares: "
                    f"edit it there by hand")
    if len(on_line) != 1:
        raise NoFix(f"{where} holds {len(on_line)} template actions: no one value to edit")
    reference = exact_reference(on_line[0], actions, mapped, lines[number], where, body.top)
    calls = [call for action in template.outline[1] if action.line == include.entry.line and not action.is_control
             for call in _CALL.finditer(action.body)]
    name = calls[0].group(1) if len(calls) == 1 else "?"
    own_file = os.path.realpath(template.file)
    direct = True  # read from the root: the same key for every `include` of the `define`
    if body.top is not None and body.top != ROOT:
        try:
            direct = reference == exact_reference(on_line[0], actions, mapped, lines[number], where, ROOT)
        except NoFix:
            direct = False  # read from what the `include` passed (`.port`)
    body_file = os.path.realpath(body.body_file) if body.body_file else None
    templates = chart_templates(template.file)
    if templates is None or body_file is None:
        raise NoFix(f"the chart's templates cannot all be read to see where else `define \"{name}\"` is used")
    if direct:
        for file, (_, other_actions, _) in templates:
            for action in other_actions:
                if (file, action.line) != (own_file, include.entry.line) and not action.is_comment and any(
                        call.group(1) == name for call in _CALL.finditer(action.body)):
                    raise NoFix(f"{where} is in `define \"{name}\"`, which {display_path(file)}:{action.line + 1} "
                                f"includes too: moving {dotted(reference)} would move that port as well")
    through = {(body_file, number)} | ({(own_file, include.entry.line)} if not direct else set())
    also = []
    for action in actions:  # the `define`'s other lines reading the key: ports of this object, or no move
        if action.is_control or action.line == number:
            continue
        text = lines[action.line] if action.line < len(lines) else ""
        scope = template_context(actions, action.line, mapped.range_index, body.top)
        for used, generator, exact in values_references(action, scope, text):
            if reference[:len(used)] != used:
                continue
            key = LINE_KEY.match(text)
            through.add((body_file, action.line))
            if not exact or generator or key is None or key.group(1) not in PORT_KEYS:
                raise NoFix(f"{dotted(reference)}, which {where} reads, is also read at {body.path}:{action.line + 1} "
                            f"(`{{{{ {action.body} }}}}`): not as a port, so moving the key would change that too")
            also.append(f"{key.group(1)} at {body.path}:{action.line + 1}")
            break
    return from_values(template.values, reference, value, plan, style_only, context, where, finding,
                       (document, include.entry.line, frozenset(through), tuple(also)))
