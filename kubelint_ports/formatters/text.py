"""Text for people: input errors, then findings grouped by file, one headline each that fits 120
columns (line:column, severity, rule id, the short claim), then a summary.

A finding's message reads "<short claim>: <explanation>" (findings.split_message); `--explain`
(`-v`) prints the explanation, the rule's name, the object and the related places under each
headline, and `kubelint-ports explain ID` the rule's full docs.
"""

from __future__ import annotations

import itertools
import textwrap
from typing import TextIO

from kubelint_ports.findings import Finding, Report, Severity
from kubelint_ports.formatters import FormatOptions, printable

COLORS = {Severity.ERROR: "\033[31m", Severity.WARNING: "\033[33m", Severity.NOTE: "\033[36m"}
BOLD, DIM, RESET = "\033[1m", "\033[2m", "\033[0m"
WIDTH = 120  # a headline never runs past it: fixed, so output is the same on every terminal
SEVERITY_WIDTH = max(len(str(severity)) for severity in Severity)
DETAIL_INDENT = " " * 6
ELLIPSIS = "…"
HINT = "Run with -v for why and how to fix each finding; `kubelint-ports explain ID` prints a rule's docs."


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    """Every text that comes from the inputs (paths, names, messages) is written through
    `printable`: a manifest cannot put a control character or a new line on the terminal."""
    def paint(text: str, code: str) -> str:
        return f"{code}{text}{RESET}" if options.color else text

    for diagnostic in report.diagnostics:
        label = "internal-error" if diagnostic.internal else "input-error"
        out.write(f"{paint(printable(str(diagnostic.location)), BOLD)}: {paint(label, BOLD + COLORS[Severity.ERROR])} "
                  f"{printable(diagnostic.message)}\n")
    shown = [finding for finding in report.findings if not finding.suppressed or options.show_suppressed]
    if options.statistics:
        write_statistics(report, out, paint)
    else:
        for index, (path, group) in enumerate(itertools.groupby(shown, key=lambda f: f.location.path)):
            if index or report.diagnostics:
                out.write("\n")
            write_group(path, list(group), out, options, paint)
    if options.quiet:
        return
    if shown or report.diagnostics:
        out.write("\n")
    out.write(summary_line(report) + "\n")
    if shown and not options.explain and not options.statistics:
        out.write(HINT + "\n")


def write_group(path: str, findings: list[Finding], out: TextIO, options: FormatOptions, paint) -> None:
    out.write(paint(printable(path), BOLD) + "\n")
    width = max(len(place(finding)) for finding in findings)
    for finding in findings:
        prefix_length = 2 + width + 2 + SEVERITY_WIDTH + 2 + len(finding.rule_id) + 2
        suffix = (f" [{unit_label(finding.units)}]" if finding.units else "") + (" (suppressed)" if finding.suppressed else "")
        claim, cut = fit(printable(finding.headline), WIDTH - prefix_length - len(suffix))
        severity = paint(f"{str(finding.severity):<{SEVERITY_WIDTH}}", COLORS[finding.severity])
        out.write(f"  {place(finding):<{width}}  {severity}  {paint(finding.rule_id, BOLD)}  {claim}{suffix}\n")
        if options.explain:
            write_details(finding, finding.message if cut else finding.explanation, out, paint)


def unit_label(units: tuple[str, ...]) -> str:
    """The deployment units a finding is in, short: an overlay's directory by its last name (the
    full path is in the details, `-v`)."""
    return ", ".join(printable(unit.rstrip("/").rsplit("/", 1)[-1] or unit) for unit in units)


def place(finding: Finding) -> str:
    location = finding.location
    return f"{location.line}:{location.column}" if location.line >= 1 else "-"


def fit(text: str, room: int) -> tuple[str, bool]:
    """`text` cut to at most `room` characters with an ellipsis, at a word's end when one is near;
    whether it was cut."""
    room = max(room, 20)
    if len(text) <= room:
        return text, False
    cut = text[: room - len(ELLIPSIS) + 1]
    space = cut.rfind(" ")
    cut = cut[:space] if space >= len(cut) - 20 else cut[:-1]
    return cut.rstrip(" ,;:") + ELLIPSIS, True


def write_details(finding: Finding, explanation: str, out: TextIO, paint) -> None:
    def wrapped(text: str) -> str:
        return textwrap.fill(text, WIDTH, initial_indent=DETAIL_INDENT, subsequent_indent=DETAIL_INDENT,
                             break_long_words=False, break_on_hyphens=False)

    if explanation:
        out.write(wrapped(printable(explanation)) + "\n")
    origin = f" (from {finding.template})" if finding.template else ""
    units = f" in unit {', '.join(finding.units)}" if finding.units else ""
    out.write(paint(wrapped(printable(f"{finding.rule_id} {finding.rule_name} on {finding.subject}{origin}{units}")),
                    DIM) + "\n")
    for related in finding.related:
        out.write(f"{DETAIL_INDENT}{paint(printable(str(related)), DIM)}: {printable(related.message)}\n")
    if finding.suppressed:
        out.write(wrapped(printable(f"suppressed: {finding.suppressed}")) + "\n")


def write_statistics(report: Report, out: TextIO, paint) -> None:
    """`--statistics`: one line per rule that found something, most findings first."""
    for count, rule_id, rule_name, severity in report.rule_counts():
        out.write(f"{count:>6}  {paint(rule_id, BOLD)}  "
                  f"{paint(f'{str(severity):<{SEVERITY_WIDTH}}', COLORS[severity])}  {rule_name}\n")


def summary_line(report: Report) -> str:
    counts = report.counts()
    parts = [f"{counts[name]} {name}{'s' if counts[name] != 1 else ''}" for name in counts]
    text = (f"{', '.join(parts)} in {report.objects} object{'s' if report.objects != 1 else ''} "
            f"from {report.files} file{'s' if report.files != 1 else ''}")
    extras = []
    if report.skipped:
        extras.append(f"{report.skipped} non-Kubernetes documents skipped")
    suppressed = sum(1 for f in report.findings if f.suppressed)
    if suppressed:
        extras.append(f"{suppressed} suppressed")
    if report.diagnostics:
        extras.append(f"{len(report.diagnostics)} input error{'s' if len(report.diagnostics) != 1 else ''}")
    return text + (f" ({'; '.join(extras)})" if extras else "")
