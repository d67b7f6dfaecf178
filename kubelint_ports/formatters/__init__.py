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
    # What machine-read paths are relative to (SARIF %SRCROOT%, annotations, GitLab, links): the
    # repository's top level; "" finds it from the current directory (sourceroot.find_source_root).
    source_root: str = ""
    explain: bool = False  # text: each finding's explanation, object and related places under it
    quiet: bool = False  # text: findings only, no summary
    statistics: bool = False  # text and json: counts per rule instead of findings


Formatter = Callable[[Report, TextIO, FormatOptions], None]

FORMATTERS: dict[str, str] = {
    "text": "kubelint_ports.formatters.text",
    "json": "kubelint_ports.formatters.json_format",
    "sarif": "kubelint_ports.formatters.sarif",
    "github": "kubelint_ports.formatters.github",
    "markdown": "kubelint_ports.formatters.markdown",
    "junit": "kubelint_ports.formatters.junit",
    "gitlab": "kubelint_ports.formatters.gitlab",
    "html": "kubelint_ports.formatters.html",
}


def get_formatter(name: str) -> Formatter:
    return importlib.import_module(FORMATTERS[name]).format_report
