"""`--format concise`: one line per finding (`path:line:column: severity RULE claim`) and the
summary, as ruff's concise format: for editors' problem matchers and grep."""

from __future__ import annotations

from typing import TextIO

from kubelint_ports.findings import Report
from kubelint_ports.formatters import FormatOptions
from kubelint_ports.formatters import text


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    text.format_report(report, out, options, concise=True)
