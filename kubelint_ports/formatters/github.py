"""GitHub Actions workflow commands (`::error file=...::message`), which become PR annotations.

GitHub shows only 10 errors and 10 warnings per step, so errors come first; the summary line at
the end counts everything.
"""

from __future__ import annotations

from typing import TextIO

from kubelint_ports.findings import Report
from kubelint_ports.formatters import FormatOptions, printable
from kubelint_ports.formatters.text import fix_hint, summary_line
from kubelint_ports.sourceroot import find_source_root, relative_to_root
from kubelint_ports.vocabulary import Location, Severity

COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}
INPUT_ERROR_TITLE = "kubelint-ports input error"
INTERNAL_ERROR_TITLE = "kubelint-ports internal error"
MESSAGE_LIMIT = 300  # effect and fix; the object, the fix hint and the rule's page follow


def escape_data(text: str) -> str:
    """A workflow-command value: `%`, CR and LF as GitHub decodes them, then every other control
    character escaped, so no input can end the command early or start another."""
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def escape_property(text: str) -> str:
    # `,` separates properties and `:` ends them: both would cut the value short.
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, properties: dict[str, object], message: str) -> str:
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{name} {props}::{escape_data(message)}\n"


def position(location: Location, root: str, *, with_end: bool = True) -> dict[str, object]:
    """file/line/col properties, the file relative to the repository's top level (GitHub matches
    it to the checkout); none for stdin and the command line (nothing to annotate), no line when
    unknown."""
    if not location.is_file:
        return {}
    properties: dict[str, object] = {"file": relative_to_root(location.path, root)}
    if location.line >= 1:
        properties["line"] = location.line
        if location.column >= 1:
            properties["col"] = location.column
            if with_end:
                properties["endLine"] = location.end_line or location.line
                properties["endColumn"] = location.end_column or location.column + 1
    return properties


def rule_pages(report: Report) -> dict[str, str]:
    """Each built-in rule's docs page, by id (none for a user's own policies)."""
    from kubelint_ports.formatters.rule_links import help_uri, project_url

    repository = project_url()
    pages = {}
    for policy in report.rules:
        uri = help_uri(policy, repository) if repository else None
        if uri:
            pages[policy.id] = uri
    return pages


def cut(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word with an ellipsis (an annotation's box shows
    about that much without scrolling; the full analysis is one click away)."""
    if len(text) <= limit:
        return text
    return text[:limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    root = options.source_root or find_source_root()
    for diagnostic in report.diagnostics:
        properties = {**position(diagnostic.location, root, with_end=False), "title": INTERNAL_ERROR_TITLE if diagnostic.internal else INPUT_ERROR_TITLE}
        message = diagnostic.message if diagnostic.location.is_file else f"{diagnostic.location}: {diagnostic.message}"
        out.write(command("error", properties, message))
    standing = [finding for finding in report.findings if not finding.suppressed]
    pages = rule_pages(report)
    for finding in sorted(standing, key=lambda f: -f.severity):  # stable: report order within a level
        words = finding.short_words
        properties = {**position(finding.location, root), "title": f"{finding.rule_id} {words.headline}"}
        message = cut(" ".join(part for part in (words.effect, words.fix) if part), MESSAGE_LIMIT)
        hint = fix_hint(finding, options.unsafe_fixes)
        where = f"{finding.subject}" + (f" (from {finding.template})" if finding.template else "")
        message += f"\n{where}" + (f" ({hint})" if hint else "")
        if finding.rule_id in pages:
            message += f" · {finding.rule_id}: {pages[finding.rule_id]}"
        for related in finding.related:  # an annotation has one place; name the others in its text
            message += f"\n{relative_to_root(related.path, root)}:{related.line}:{related.column}: {related.message}"
        out.write(command(COMMANDS[finding.severity], properties, message))
    out.write(summary_line(report) + "\n")
