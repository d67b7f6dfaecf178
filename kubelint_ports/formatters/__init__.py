"""Formatters by `--format` name. Modules load on demand: SARIF needs sarif-om, text needs nothing."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from kubelint_ports.findings import Report
from kubelint_ports.records import record


@record(frozen=True, slots=True)
class FormatOptions:
    color: bool = False
    show_suppressed: bool = False
    sarif_category: str = ""
    link_base: str = ""  # markdown and html: prefix that turns a relative path into a link (a blob URL)
    # What machine-read paths are relative to (SARIF %SRCROOT%, annotations, GitLab, links): the
    # repository's top level; "" finds it from the current directory (sourceroot.find_source_root).
    source_root: str = ""
    explain: bool = False  # text: each finding's explanation, object and related places under it
    quiet: bool = False  # text: findings only, no summary
    statistics: bool = False  # text and json: counts per rule instead of findings
    unsafe_fixes: bool = False  # `--unsafe-fixes`: an unsafe fix is one `--fix` applies (`[*]`, "fixable with --fix")
    sarif_full_rules: bool = False  # SARIF: every rule that ran, with its full docs (default: the rules with results)


Formatter = Callable[[Report, TextIO, FormatOptions], None]

FORMATTERS: dict[str, str] = {
    "text": "kubelint_ports.formatters.text",
    "concise": "kubelint_ports.formatters.concise",
    "json": "kubelint_ports.formatters.json_format",
    "sarif": "kubelint_ports.formatters.sarif",
    "github": "kubelint_ports.formatters.github",
    "markdown": "kubelint_ports.formatters.markdown",
    "junit": "kubelint_ports.formatters.junit",
    "gitlab": "kubelint_ports.formatters.gitlab",
    "html": "kubelint_ports.formatters.html",
}


def get_formatter(name: str) -> Formatter:
    # `__import__` (not importlib's `import_module`), so the import shows in `python -X importtime`.
    __import__(FORMATTERS[name])
    return sys.modules[FORMATTERS[name]].format_report


# C0 and C1 controls, DEL, and the Unicode line separators and bidirectional overrides: raw in a
# terminal or a CI log they move the cursor, recolour, start a new line (a forged `::error::` or
# `::add-mask::` workflow command) or reorder what is read. Tab stays. Each is written as its
# escape, through one `str.translate` table (no pattern to compile at import).
_UNPRINTABLE = (*range(0x00, 0x09), *range(0x0a, 0x20), *range(0x7f, 0xa0), 0x2028, 0x2029, *range(0x202a, 0x202f),
                *range(0x2066, 0x206a))
_ESCAPES = {code: {"\n": "\\n", "\r": "\\r"}.get(chr(code)) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
            for code in _UNPRINTABLE}


def printable(text: str) -> str:
    """`text` with every control character written as an escape (`\\n`, `\\x1b`, `\\u2028`)."""
    return text.translate(_ESCAPES)
