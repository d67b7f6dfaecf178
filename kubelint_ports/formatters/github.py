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


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    root = options.source_root or find_source_root()
    for diagnostic in report.diagnostics:
        properties = {**position(diagnostic.location, root, with_end=False), "title": INTERNAL_ERROR_TITLE if diagnostic.internal else INPUT_ERROR_TITLE}
        message = diagnostic.message if diagnostic.location.is_file else f"{diagnostic.location}: {diagnostic.message}"
        out.write(command("error", properties, message))
    standing = [finding for finding in report.findings if not finding.suppressed]
    for finding in sorted(standing, key=lambda f: -f.severity):  # stable: report order within a level
        properties = {**position(finding.location, root), "title": f"{finding.rule_id} ({finding.rule_name})"}
        message = f"{finding.message} [{finding.subject}]"
        if finding.template:
            message += f" (from {finding.template})"
        hint = fix_hint(finding, options.unsafe_fixes)
        if hint:
            message += f" ({hint})"
        for related in finding.related:  # an annotation has one place; name the others in its text
            message += f"\n{relative_to_root(related.path, root)}:{related.line}:{related.column}: {related.message}"
        out.write(command(COMMANDS[finding.severity], properties, message))
    out.write(summary_line(report) + "\n")
