"""GitLab Code Quality (`artifacts: reports: codequality:`): a JSON array of Code Climate issues
with the fields GitLab reads (description, check_name, fingerprint, severity, location.path,
location.lines.begin). Paths are relative to the repository's top level; suppressed findings are
left out; an input error in a file is a `critical` issue on that file."""

from __future__ import annotations

import json
from typing import Any, TextIO

from kubelint_ports.findings import Report
from kubelint_ports.formatters import FormatOptions
from kubelint_ports.formatters.text import fix_hint
from kubelint_ports.sourceroot import find_source_root, relative_to_root
from kubelint_ports.vocabulary import Location, Severity

# GitLab's words: info, minor, major, critical, blocker (the ESLint formatter's mapping).
SEVERITIES = {Severity.ERROR: "major", Severity.WARNING: "minor", Severity.NOTE: "info"}
INPUT_ERROR = "input-error"


def issue(description: str, check_name: str, fingerprint: str, severity: str, location: Location,
          root: str) -> dict[str, Any]:
    begin = max(location.line, 1)
    return {
        "type": "issue",
        "description": description,
        "check_name": check_name,
        "fingerprint": fingerprint,
        "severity": severity,
        "categories": ["Bug Risk"],
        "location": {"path": relative_to_root(location.path, root),
                     "lines": {"begin": begin, "end": max(location.end_line, begin)}},
    }


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    import hashlib

    root = options.source_root or find_source_root()
    issues = []
    for diagnostic in report.diagnostics:
        if diagnostic.location.is_file:  # the command line and stdin have no file to show it on
            key = hashlib.sha256(f"{INPUT_ERROR}\0{diagnostic.location}\0{diagnostic.message}".encode()).hexdigest()
            issues.append(issue(diagnostic.message, INPUT_ERROR, key, "critical", diagnostic.location, root))
    for finding in report.findings:
        if not finding.suppressed:
            hint = fix_hint(finding, options.unsafe_fixes)
            description = f"{finding.short_words.short} [{finding.subject}]" + (f" ({hint})" if hint else "")
            issues.append(issue(description, finding.rule_id, finding.fingerprint,
                                SEVERITIES[finding.severity], finding.location, root))
    seen: dict[str, int] = {}
    for entry in issues:  # GitLab drops repeated fingerprints: number the repeats
        count = seen.get(entry["fingerprint"], 0)
        seen[entry["fingerprint"]] = count + 1
        if count:
            entry["fingerprint"] = hashlib.sha256(f"{entry['fingerprint']}\0{count}".encode()).hexdigest()
    json.dump(issues, out, indent=2, sort_keys=True, ensure_ascii=False)
    out.write("\n")
