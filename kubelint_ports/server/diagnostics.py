"""A report's findings and input problems as LSP diagnostics, per file (lsprotocol's types).

A finding is a diagnostic at its place: severity mapped (error, warning, note -> information),
`code` the rule id, `codeDescription.href` the rule's page (as SARIF's `helpUri`), the message
its five-second words (headline, effect, fix), the full analysis in `data`, and its other places
as `relatedInformation`. Each of those other places in an open file gets a diagnostic too, of
severity information, pointing back: the Service whose nodePort a hostPort takes shows it where
its nodePort is written."""

from __future__ import annotations

from urllib.parse import quote, unquote, urlparse

from lsprotocol import types

from kubelint_ports.findings import Finding, Report
from kubelint_ports.vocabulary import Location, Severity

SOURCE = "kubelint-ports"
SEVERITIES = {Severity.ERROR: types.DiagnosticSeverity.Error, Severity.WARNING: types.DiagnosticSeverity.Warning,
              Severity.NOTE: types.DiagnosticSeverity.Information}


def path_of(uri: str) -> str | None:
    """The file a `file:` URI names; None for any other scheme (an untitled buffer)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return unquote(parsed.path)


def uri_of(path: str) -> str:
    return "file://" + quote(path)


def utf16_column(line: str, column: int) -> int:
    """A 0-based code-point column of `line` as LSP counts it (UTF-16 code units)."""
    head = line[:column]
    return len(head) + sum(1 for char in head if ord(char) > 0xFFFF)


class Lines:
    """The texts a run read, line by line, to place ranges (UTF-16 columns, a line's end)."""

    def __init__(self, text_of):
        self.text_of = text_of
        self.lines: dict[str, list[str]] = {}

    def line(self, path: str, number: int) -> str:
        if path not in self.lines:
            text = self.text_of(path)
            self.lines[path] = text.splitlines() if text is not None else []
        lines = self.lines[path]
        return lines[number] if 0 <= number < len(lines) else ""

    def range(self, path: str, where: Location) -> types.Range:
        """`where` (1-based, `end_column` after the last character) as an LSP range; a place without
        an end runs to its line's end; a whole-file place (line 0) is the first line."""
        if where.line < 1:
            return types.Range(types.Position(0, 0), types.Position(0, len(self.line(path, 0))))
        line = self.line(path, where.line - 1)
        start = types.Position(where.line - 1, utf16_column(line, max(where.column - 1, 0)))
        if where.end_line >= where.line and where.end_column:
            end_text = line if where.end_line == where.line else self.line(path, where.end_line - 1)
            end = types.Position(where.end_line - 1, utf16_column(end_text, where.end_column - 1))
        else:
            end = types.Position(where.line - 1, utf16_column(line, len(line.rstrip())))
        if (end.line, end.character) <= (start.line, start.character):
            end = types.Position(start.line, start.character + 1)
        return types.Range(start, end)


def help_uris(report: Report) -> dict[str, str]:
    from kubelint_ports.formatters.rule_links import help_uri, project_url

    repository = project_url()
    return {policy.id: uri for policy in report.rules if (uri := help_uri(policy, repository))}


def finding_diagnostic(finding: Finding, path: str, lines: Lines, absolute, links: dict[str, str],
                       index: int) -> types.Diagnostic:
    href = links.get(finding.rule_id)
    related = [types.DiagnosticRelatedInformation(
        types.Location(uri_of(absolute(place.path)), lines.range(absolute(place.path), place)),
        place.message or "related place") for place in finding.related]
    words = finding.short_words
    return types.Diagnostic(
        range=lines.range(path, finding.location), message=words.short,
        severity=SEVERITIES.get(finding.severity, types.DiagnosticSeverity.Information),
        code=finding.rule_id, code_description=types.CodeDescription(href=href) if href else None,
        source=SOURCE, related_information=related or None,
        data={"index": index, "rule": finding.rule_name, "fingerprint": finding.fingerprint,
              "analysis": finding.message, "fix": finding.fix.description if finding.fix else None})


def related_diagnostic(finding: Finding, place: Location, path: str, lines: Lines, absolute,
                       links: dict[str, str], index: int) -> types.Diagnostic:
    href = links.get(finding.rule_id)
    origin = absolute(finding.location.path)
    return types.Diagnostic(
        range=lines.range(path, place),
        message=f"{place.message or 'this place'}: {finding.headline} ({finding.rule_id} at {finding.location})",
        severity=types.DiagnosticSeverity.Information, code=finding.rule_id,
        code_description=types.CodeDescription(href=href) if href else None, source=SOURCE,
        related_information=[types.DiagnosticRelatedInformation(
            types.Location(uri_of(origin), lines.range(origin, finding.location)), finding.headline)],
        data={"index": index, "related": True})


def by_file(report: Report | None, wanted: set[str], absolute, text_of,
            problem: str | None = None, problem_path: str | None = None) -> dict[str, list[types.Diagnostic]]:
    """Every path of `wanted` (absolute) -> its diagnostics (an empty list clears old ones).
    `problem`: a run that could not start (a configuration error), said at `problem_path`."""
    found: dict[str, list[types.Diagnostic]] = {path: [] for path in wanted}
    lines = Lines(text_of)
    if problem is not None:
        target = problem_path if problem_path in found else None
        for path in ([target] if target else found):
            found[path].append(types.Diagnostic(
                range=types.Range(types.Position(0, 0), types.Position(0, 1)), severity=types.DiagnosticSeverity.Error,
                source=SOURCE, code="configuration", message=f"not linted: {problem}"))
        return found
    if report is None:
        return found
    links = help_uris(report)
    for index, finding in enumerate(report.findings):
        if finding.suppressed:
            continue
        path = absolute(finding.location.path)
        if path in found:
            found[path].append(finding_diagnostic(finding, path, lines, absolute, links, index))
        for place in finding.related:
            other = absolute(place.path)
            if other in found and (other, place.line) != (path, finding.location.line):
                found[other].append(related_diagnostic(finding, place, other, lines, absolute, links, index))
    for problem_ in report.diagnostics:
        path = absolute(problem_.location.path)
        if path in found:
            found[path].append(types.Diagnostic(
                range=lines.range(path, problem_.location), message=problem_.message, source=SOURCE,
                severity=types.DiagnosticSeverity.Error, code="internal-error" if problem_.internal else "input-error"))
    return found
