"""Code actions for the findings at a place: the finding's fix (`lint --fix`'s edits, as SARIF
carries them), a safe one marked preferred; and a suppression comment at the end of the
finding's line (docs/configuration.md, "Suppression comments")."""

from __future__ import annotations

from lsprotocol import types

from kubelint_ports.findings import Finding, Report
from kubelint_ports.server.diagnostics import Lines, uri_of

REASON = "reason"  # the placeholder the user replaces (`require-reason: true` wants a real one)


def overlaps(a: types.Range, b: types.Range) -> bool:
    return (a.start.line, a.start.character) <= (b.end.line, b.end.character) and \
        (b.start.line, b.start.character) <= (a.end.line, a.end.character)


def fix_action(finding: Finding, lines: Lines, absolute, diagnostics) -> types.CodeAction | None:
    fix = finding.fix
    if fix is None or fix.blocked or not fix.edits:
        return None
    changes: dict[str, list[types.TextEdit]] = {}
    for edit in fix.edits:
        path = absolute(edit.region.path)
        changes.setdefault(uri_of(path), []).append(types.TextEdit(lines.range(path, edit.region), edit.text))
    return types.CodeAction(
        title=f"{finding.rule_id}: {fix.description}" + ("" if fix.applicability == "safe" else " (unsafe)"),
        kind=types.CodeActionKind.QuickFix, diagnostics=diagnostics,
        is_preferred=fix.applicability == "safe", edit=types.WorkspaceEdit(changes=changes))


def suppress_action(finding: Finding, path: str, lines: Lines, diagnostics) -> types.CodeAction | None:
    """`# kubelint-ports: ignore KPnnn -- reason` at the end of the finding's line; on a line that
    holds a comment already, alone on the line above (which suppresses the line below); in a Helm
    template, the template comment `{{/* ... */}}` at the line's end."""
    number = finding.location.line - 1
    if number < 0:
        return None
    line = lines.line(path, number)
    words = f"kubelint-ports: ignore {finding.rule_id} -- {REASON}"
    end = types.Position(number, len(line.rstrip()) + sum(1 for c in line.rstrip() if ord(c) > 0xFFFF))
    if path.endswith(".tpl") or "{{" in line:
        edit = types.TextEdit(types.Range(end, end), f" {{{{/* {words} */}}}}")
    elif "#" in line:  # a comment there already (or a `#` inside a value): the line above
        indent = line[:len(line) - len(line.lstrip())]
        start = types.Position(number, 0)
        edit = types.TextEdit(types.Range(start, start), f"{indent}# {words}\n")
    else:
        edit = types.TextEdit(types.Range(end, end), f"  # {words}")
    return types.CodeAction(title=f"Suppress {finding.rule_id} on this line with a comment",
                            kind=types.CodeActionKind.QuickFix, diagnostics=diagnostics,
                            edit=types.WorkspaceEdit(changes={uri_of(path): [edit]}))


def code_actions(report: Report | None, path: str, wanted: types.Range, absolute, text_of,
                 diagnostics: list[types.Diagnostic]) -> list[types.CodeAction]:
    """The actions for the findings of `path` whose place overlaps `wanted`."""
    if report is None:
        return []
    lines = Lines(text_of)
    actions: list[types.CodeAction] = []
    for index, finding in enumerate(report.findings):
        if finding.suppressed or absolute(finding.location.path) != path:
            continue
        place = lines.range(path, finding.location)
        if not overlaps(place, wanted):
            continue
        mine = [d for d in diagnostics if isinstance(d.data, dict) and d.data.get("index") == index
                and not d.data.get("related")] or None
        for action in (fix_action(finding, lines, absolute, mine), suppress_action(finding, path, lines, mine)):
            if action is not None:
                actions.append(action)
    return actions
