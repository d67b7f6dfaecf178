"""A Markdown report: every finding in one table, errors first (for GitHub job summaries, where
annotations stop after 10 per type)."""

from __future__ import annotations

import dataclasses
from typing import TextIO
from urllib.parse import quote

from kubelint_ports.findings import Location, Report
from kubelint_ports.formatters import FormatOptions
from kubelint_ports.formatters.text import summary_line
from kubelint_ports.sourceroot import find_source_root, relative_to_root

MAX_BYTES = 900 * 1024  # GitHub takes at most 1 MiB of summary per step


def cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", "<br>")


def link(location: Location, options: FormatOptions, root: str) -> str:
    """The location relative to the repository's top level (what a blob URL continues with)."""
    path = relative_to_root(location.path, root)
    label = cell(str(dataclasses.replace(location, path=path)))
    if not options.link_base or not location.is_file or path.startswith("/") or ":" in path.split("/")[0]:
        return f"`{label}`"
    anchor = f"#L{location.line}" if location.line else ""
    return f"[{label}]({options.link_base.rstrip('/')}/{quote(path)}{anchor})"


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    root = options.source_root or find_source_root()
    lines = ["## kubelint-ports", "", summary_line(report), ""]
    rows = []
    for diagnostic in report.diagnostics:
        rows.append(f"| input error | | {link(diagnostic.location, options, root)} | | {cell(diagnostic.message)} |")
    findings = sorted((f for f in report.findings if not f.suppressed or options.show_suppressed),
                      key=lambda f: (-f.severity, f))
    for finding in findings:
        state = f" (suppressed: {cell(finding.suppressed)})" if finding.suppressed else ""
        rows.append(f"| {finding.severity}{state} | {finding.rule_id} {finding.rule_name} | "
                    f"{link(finding.location, options, root)} | {cell(str(finding.subject))} | {cell(finding.message)} |")
    if rows:
        lines += ["| severity | rule | location | object | message |", "|---|---|---|---|---|"]
        size = sum(len(line) + 1 for line in lines)
        for index, row in enumerate(rows):
            size += len(row.encode("utf-8")) + 1
            if size > MAX_BYTES:
                lines.append("")
                lines.append(f"*{len(rows) - index} more rows left out to stay under GitHub's summary limit; "
                             f"see the SARIF or JSON report.*")
                break
            lines.append(row)
    out.write("\n".join(lines) + "\n")
