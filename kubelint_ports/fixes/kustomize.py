"""A fix worked out on an object a Kustomize build made, carried to the file the finding names.

A Kustomize finding's position is already the place that wrote the field (`loading.
kustomize_positions`): the last patch that set it (a strategic-merge patch, a JSON 6902
operation's `value`, an inline patch in a literal block of the kustomization) or the resource
file. The fix edits there:

- a scalar (a quoted port, a nodePort) is replaced at its exact span, in the patch or resource
  file, or on its line inside an inline patch, once the text there is checked to hold the built
  value;
- a removal (a duplicate Service port, an init container's hostPort) is made in the resource file
  only, when no patch of the build touched the object: a patch's line removed would leave the
  base's value, and list positions shift under a patch;
- a file outside the built kustomization's own directory (a base, a component) is read by every
  overlay that builds on it: its fix changes them all, so it is unsafe, applied with
  `--unsafe-fixes` only, and the description says which overlays of the inputs read the file;
  but an edit that renders the same value (quotes removed, KP001) keeps its own applicability,
  as it would in a plain manifest.
"""

from __future__ import annotations

import os
from dataclasses import replace

import yaml

from kubelint_ports.findings import Finding
from kubelint_ports.fixes.plan import UNSAFE, Context, Plan
from kubelint_ports.fixes.source import (
    NoFix, SourceFile, Target, line_starts, line_value, scalar_span, scalar_text, target_placed)
from kubelint_ports.loading import KUSTOMIZATION_FILES
from kubelint_ports.loading.yaml_files import yamltree as yt


def carry(document, target: Target, plan: Plan, finding: Finding, context: Context) -> tuple[Plan, Target]:
    """The plan on the built object -> the same change in the file the finding names, unsafe when
    that file is a base other overlays read. Raises NoFix."""
    location = finding.location
    if document.generator:
        raise NoFix(f"the object is made by a {document.generator}: there is no field to edit")
    if location.line < 1:
        raise NoFix("the finding has no line in a file")
    file = os.path.abspath(location.path)
    source = context.sources.read(file, location.path)
    if source is None:
        raise NoFix(f"{location.path} cannot be read again")
    if plan.splice is None:
        carried, file_target = removal_in_resource(document, source, finding, context)
    else:
        carried, file_target = splice_in_file(source, target, plan, finding, context)
    base = shared_note(document, file, location.path, context)
    if base:
        # Quotes removed from a value that stays the same render the same in every overlay: such an
        # edit keeps its own applicability, as in a plain manifest; any other changes them all.
        neutral = plan.splice is not None and plan.splice[2] == target.value.value
        carried = Plan(carried.applicability if neutral else UNSAFE, f"{carried.description}; {base}",
                       carried.splice, carried.remove, carried.port)
    return carried, file_target


def splice_in_file(source: SourceFile, target: Target, plan: Plan, finding: Finding,
                   context: Context) -> tuple[Plan, Target]:
    value = target.value
    new_value = plan.splice[2]
    style_only = new_value == value.value
    location = finding.location
    where = f"{location.path}:{location.line}"
    found = source.pair_at(location.line, location.column)
    if found is not None:
        key, node = found
        if not isinstance(node, yaml.ScalarNode) or node.value != value.value:
            raise NoFix(f"{where} does not hold the built value {value.value}")
        if source.is_shared(node):
            raise NoFix(f"{where} is an anchor's value that aliases repeat")
        if style_only and node.style not in ("'", '"'):
            raise NoFix(f"{where} is not quoted: the quotes come from elsewhere")
        start, end = scalar_span(node)
        text, style = scalar_text(new_value, node.style, style_only), node.style
    else:
        start, end, style = inline_value(source, location.line, location.column, value, where)
        if style_only and style not in ("'", '"'):
            raise NoFix(f"{where} is not quoted: the quotes come from elsewhere")
        text = scalar_text(new_value, style, style_only)
    carried = Plan(plan.applicability, plan.description, splice=(start, end, text), port=plan.port)
    if not style_only:  # one base value two overlays report moves once
        carried = context.once(carried, (location.path, start, end), text, target.key.value if target.key else "port",
                               value.value)
    return replace(carried, description=f"{carried.description} ({where})"), Target(source, None, [], None, None, value)


def inline_value(source: SourceFile, line: int, column: int, value: yaml.ScalarNode, where: str
                 ) -> tuple[int, int, str | None]:
    """(start, end, style) of the value on `line` of an inline patch: a literal block of the
    kustomization keeps its lines, so the patch's `key: value` is there as written."""
    starts = line_starts(source.text)
    if not source.in_literal_block(line - 1) or line > len(starts):
        raise NoFix(f"{where} is not a value in a file or in a literal block")
    end_of_line = starts[line] - 1 if line < len(starts) else len(source.text)
    text = source.text[starts[line - 1]:end_of_line]
    span = line_value(text, column - 1)
    if span is None:
        raise NoFix(f"{where} does not write the value on its line")
    token = text[span[0]:span[1]]
    try:
        written = yaml.compose(token, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        written = None
    if not isinstance(written, yaml.ScalarNode) or written.value != value.value:
        raise NoFix(f"{where} does not hold the built value {value.value}")
    return starts[line - 1] + span[0], starts[line - 1] + span[1], written.style


def removal_in_resource(document, source: SourceFile, finding: Finding, context: Context) -> tuple[Plan, Target]:
    """A removal made in the resource file, through the same fix run on the file's object."""
    location = finding.location
    if os.path.realpath(source.file) != os.path.realpath(document.source_file):
        raise NoFix(f"a patch writes it ({location.path}): removing it there would leave what the base writes; "
                    f"remove it by hand")
    segments = yt.parse_field_path(finding.field_path)
    for end in range(1, len(segments)):
        if isinstance(segments[end], int) and document.location(yt.format_field_path(segments[:end])).path != location.path:
            raise NoFix(f"a patch of {document.unit} writes {yt.format_field_path(segments[:end])}: list positions in "
                        f"{location.path} may not be the built ones; remove it by hand")
    file_target = target_placed(finding, source)
    from kubelint_ports.fixes.rules import FIXES

    plan = FIXES[finding.rule_id](file_target, finding, context) if file_target is not None else None
    if plan is None:
        raise NoFix(f"{location.path} does not hold the field at line {location.line} as the build shows it")
    return Plan(plan.applicability, f"{plan.description} ({location.path}:{location.line})",
                plan.splice, plan.remove, plan.port), file_target


def shared_note(document, file: str, shown: str, context: Context) -> str:
    """"" when `file` is the built kustomization's own; else why its fix is unsafe: a base or a
    component, and which overlays of the inputs read it."""
    overlay = os.path.realpath(os.path.abspath(document.unit or document.origin))
    directory = os.path.dirname(os.path.realpath(file))
    while directory.startswith(overlay + os.sep):
        if any(os.path.isfile(os.path.join(directory, name)) for name in KUSTOMIZATION_FILES):
            break  # a kustomization of its own inside the overlay's directory
        directory = os.path.dirname(directory)
    if directory == overlay:
        return ""
    readers = sorted({other.unit for other in overlays_reading(file, context) if other.unit})
    others = [unit for unit in readers if unit != document.unit]
    who = f"that {', '.join(others)} also build{'s' if len(others) == 1 else ''} on" if others else \
        "that other overlays may build on"
    return f"{shown} is a base of {document.unit} {who}: the edit reaches every overlay that reads it"


def overlays_reading(file: str, context: Context):
    """The built objects of the inputs whose resource file or one of whose patches is `file`."""
    real = os.path.realpath(file)
    cluster = context.whole_run or context.cluster
    for item in [*cluster.workloads, *cluster.services]:
        document = item.document
        if not hasattr(document, "source_file") or item.live:
            continue
        if os.path.realpath(document.source_file) == real or any(
                os.path.realpath(os.path.abspath(patch.path)) == real for patch, _ in document.applied):
            yield document
