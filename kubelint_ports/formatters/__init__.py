"""Formatters by `--format` name. Modules load on demand: SARIF needs sarif-om, text needs nothing."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from kubelint_ports.findings import Report


@dataclass(frozen=True, slots=True)
class FormatOptions:
    color: bool = False
    show_suppressed: bool = False
    sarif_category: str = ""
    link_base: str = ""  # markdown: prefix that turns a relative path into a link (a blob URL)


Formatter = Callable[[Report, TextIO, FormatOptions], None]

FORMATTERS: dict[str, str] = {
    "text": "kubelint_ports.formatters.text",
    "json": "kubelint_ports.formatters.json_format",
    "sarif": "kubelint_ports.formatters.sarif",
    "github": "kubelint_ports.formatters.github",
    "markdown": "kubelint_ports.formatters.markdown",
    "html": "kubelint_ports.formatters.html",
}


def get_formatter(name: str) -> Formatter:
    return importlib.import_module(FORMATTERS[name]).format_report
