"""A Markdown report: every finding in one table, errors first (for GitHub job summaries, where
annotations stop after 10 per type).

Every value in it comes from someone's manifests or policies (file names, object names, messages
quoting values, rule names) and is read by someone else on GitHub, which renders Markdown and
HTML: a name like `<details open>` or `![x](https://...)` would fold the summary or load an image.
So each such value goes through `text` or `code` below and comes out as the characters it is,
never as markup; the only markup in the report is the table, the links and the `<br>` this module
writes itself.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TextIO
from urllib.parse import quote

from kubelint_ports.findings import Report
from kubelint_ports.formatters import FormatOptions, printable
from kubelint_ports.formatters.text import fix_hint, summary_line
from kubelint_ports.sourceroot import find_source_root, relative_to_root
from kubelint_ports.vocabulary import Location

MAX_BYTES = 900 * 1024  # GitHub takes at most 1 MiB of summary per step

# Every ASCII punctuation character: CommonMark makes each one literal after a backslash, so with
# all of them escaped no HTML tag, entity, link, image, autolink (`https\:`, `www\.`), emphasis,
# code span or table cell (`\|`, which GFM's table parser honours inside spans too) can start.
# All of them rather than a chosen few: the rendered text is the same, and none can be forgotten.
_PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# What ends a code span early or a table cell inside it: backslash escapes do not work in a code
# span, and GitHub's table parser ends a cell at a `|` after an escaped backslash (`\\|`).
_CODE_BREAKING = re.compile(r"[`|\\]")


def text(value: object) -> str:
    """A value from the inputs as literal text in a table cell: lines joined with `<br>`, control
    characters as escapes (`\\x1b`), every punctuation character backslash-escaped."""
    lines = _LINE_BREAK.split(str(value))
    return "<br>".join(_PUNCTUATION.sub(r"\\\g<0>", printable(line)) for line in lines)


def code(value: object) -> str:
    """A value from the inputs as inline code: a code span when nothing in it can end the span or
    the cell (a file path, nearly always), else the same characters escaped inside <code>."""
    shown = printable(str(value))
    if shown and not _CODE_BREAKING.search(shown) and shown.strip() == shown:
        return f"`{shown}`"
    return f"<code>{text(value)}</code>"


def link(location: Location, options: FormatOptions, root: str) -> str:
    """The location relative to the repository's top level (what a blob URL continues with)."""
    path = relative_to_root(location.path, root)
    label = str(dataclasses.replace(location, path=path))
    if not options.link_base or not location.is_file or path.startswith("/") or ":" in path.split("/")[0]:
        return code(label)
    anchor = f"#L{location.line}" if location.line else ""
    # quote() leaves only letters, digits, `_.-~` and `/`: nothing that could end the URL.
    return f"[{text(label)}]({options.link_base.rstrip('/')}/{quote(path)}{anchor})"


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    root = options.source_root or find_source_root()
    lines = ["## kubelint-ports", "", summary_line(report), ""]
    rows = []
    for diagnostic in report.diagnostics:
        kind = "internal error" if diagnostic.internal else "input error"
        rows.append(f"| {kind} | | {link(diagnostic.location, options, root)} | | {text(diagnostic.message)} |")
    findings = sorted((f for f in report.findings if not f.suppressed or options.show_suppressed),
                      key=lambda f: (-f.severity, f))
    for finding in findings:
        state = f" (suppressed: {text(finding.suppressed)})" if finding.suppressed else ""
        hint = fix_hint(finding, options.unsafe_fixes)
        fixable = f" {text(f'({hint})')}" if hint else ""
        rows.append(f"| {finding.severity}{state} | {text(finding.rule_id)} {text(finding.rule_name)} | "
                    f"{link(finding.location, options, root)} | {text(finding.subject)} | {text(finding.short_words.short)}{fixable} |")
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
