"""`path:line:col: severity KPnnn (name) message [ns/Kind/name]`, then a one-line summary."""

from __future__ import annotations

from typing import TextIO

from kubelint_ports.findings import Report, Severity
from kubelint_ports.formatters import FormatOptions, printable

COLORS = {Severity.ERROR: "\033[31m", Severity.WARNING: "\033[33m", Severity.NOTE: "\033[36m"}
BOLD, DIM, RESET = "\033[1m", "\033[2m", "\033[0m"


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    """Every text that comes from the inputs (paths, names, messages) is written through
    `printable`: a manifest cannot put a control character or a new line on the terminal."""
    def paint(text: str, code: str) -> str:
        return f"{code}{text}{RESET}" if options.color else text

    for diagnostic in report.diagnostics:
        label = "internal-error" if diagnostic.internal else "input-error"
        out.write(f"{paint(printable(str(diagnostic.location)), BOLD)}: {paint(label, BOLD + COLORS[Severity.ERROR])} "
                  f"{printable(diagnostic.message)}\n")
    previous_path = None
    for finding in report.findings:
        if finding.suppressed and not options.show_suppressed:
            continue
        if options.color and previous_path not in (None, finding.location.path):
            out.write("\n")  # on a terminal, a blank line groups findings by file
        previous_path = finding.location.path
        severity = paint(str(finding.severity), COLORS[finding.severity])
        rule = paint(f"{finding.rule_id} ({finding.rule_name})", BOLD)
        origin = f" (from {finding.template})" if finding.template else ""
        suppressed = f" [suppressed: {finding.suppressed}]" if finding.suppressed else ""
        out.write(f"{paint(printable(str(finding.location)), BOLD)}: {severity} {rule} "
                  f"{printable(f'{finding.message} [{finding.subject}]{origin}{suppressed}')}\n")
        for related in finding.related:
            out.write(f"    {paint(printable(str(related)), DIM)}: {printable(related.message)}\n")
    out.write(summary_line(report) + "\n")


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
