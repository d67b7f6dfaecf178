"""`{"findings": [...], "errors": [...], "summary": {...}}`, keys sorted so output is byte-stable."""

from __future__ import annotations

import json
from typing import Any, TextIO

from kubelint_ports.findings import Finding, Fix, Report
from kubelint_ports.formatters import FormatOptions
from kubelint_ports.vocabulary import Location

SCHEMA_VERSION = 1


def location_dict(location: Location) -> dict[str, Any]:
    data = {"file": location.path, "line": location.line, "column": location.column,
            "endLine": location.end_line, "endColumn": location.end_column}
    if location.message:
        data["message"] = location.message
    return data


def short_dict(finding: Finding) -> dict[str, str]:
    """The five-second words: headline, effect and fix (`message` is the full analysis)."""
    words = finding.short_words
    return {"headline": words.headline, "effect": words.effect, "fix": words.fix}


def finding_dict(finding: Finding) -> dict[str, Any]:
    subject = finding.subject
    extra = {"traffic": finding.traffic} if finding.traffic is not None else {}
    if finding.units:
        extra["units"] = list(finding.units)
    if finding.fix is not None:
        extra["fix"] = fix_dict(finding.fix)
    return {
        "rule": finding.rule_id,
        "name": finding.rule_name,
        "severity": str(finding.severity),
        "message": finding.message,
        "short": short_dict(finding),
        **location_dict(finding.location),
        "fieldPath": finding.field_path,
        "template": finding.template or None,
        "object": {"apiVersion": subject.api_version, "kind": subject.kind,
                   "namespace": subject.namespace or None, "name": subject.name},
        "related": [location_dict(related) for related in finding.related],
        "suppressed": finding.suppressed or None,
        **extra,
    }


def fix_dict(fix: Fix) -> dict[str, Any]:
    """`{"applicability": "safe"|"unsafe", "description": ...}`, with the edits when worked out
    (--fix, --diff) and why it is not applied when it is not."""
    data: dict[str, Any] = {"applicability": fix.applicability, "description": fix.description}
    if fix.edits:
        data["edits"] = [{**location_dict(edit.region), "content": edit.text} for edit in fix.edits]
    if fix.blocked:
        data["notApplied"] = fix.blocked
    return data


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    document = {
        "version": SCHEMA_VERSION,
        **({"statistics": [{"rule": rule_id, "name": name, "severity": str(severity), "count": count}
                           for count, rule_id, name, severity in report.rule_counts()]} if options.statistics else
           {"findings": [finding_dict(finding) for finding in report.findings]}),
        "errors": [{**location_dict(d.location), "message": d.message, "internal": d.internal}
                   for d in report.diagnostics],
        "summary": {**report.counts(), "suppressed": sum(1 for f in report.findings if f.suppressed),
                    "inputErrors": sum(1 for d in report.diagnostics if not d.internal),
                    "internalErrors": sum(1 for d in report.diagnostics if d.internal), "files": report.files,
                    "objects": report.objects, "skipped": report.skipped},
    }
    json.dump(document, out, indent=2, sort_keys=True)
    out.write("\n")
