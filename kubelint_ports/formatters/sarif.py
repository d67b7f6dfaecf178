"""SARIF 2.1.0 for GitHub code scanning and other readers, built with sarif-om.

sarif-om's usual serializer (`jschema_to_python.to_json`) drops every value equal to its attrs
default, so `Result(level="warning")` would lose its level and readers would fall back to the
rule's level; it also prints sets as `"{'a'}"`. `to_sarif_dict` below is our own small walker.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

import attr
import sarif_om as om

from kubelint_ports import __version__
from kubelint_ports.docs import rule_markdown
from kubelint_ports.findings import Finding, Location, Report, Severity
from kubelint_ports.formatters import FormatOptions
from kubelint_ports.policies import Policy

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFORMATION_URI = "https://github.com/kubelint-ports/kubelint-ports"
SRCROOT = "%SRCROOT%"
FINGERPRINT_KEY = "kubeLintPorts/v1"
MAX_RESULTS = 25_000  # GitHub rejects runs with more results than this
MAX_DESCRIPTION = 1024  # GitHub truncates fullDescription.text beyond this
MAX_TAGS = 20  # GitHub keeps at most 20 tags per rule
STDIN_NAME = "<stdin>"

LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}
# GitHub's `problem.severity` words for non-security alerts.
PROBLEM_SEVERITIES = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "recommendation"}
# SARIF readers apply the rule's level when a result has none, so `level` is written even when it
# equals the attrs default. Every other default is left out: the spec gives absence that meaning.
ALWAYS_WRITTEN = frozenset({"level"})


def to_sarif_dict(value: Any) -> Any:
    """sarif-om objects -> JSON data, by SARIF property names; None skipped, sets sorted."""
    if attr.has(type(value)):
        data = {}
        for field in attr.fields(type(value)):
            item = getattr(value, field.name)
            if item is None:
                continue
            default = field.default.factory() if isinstance(field.default, attr.Factory) else field.default
            if field.name not in ALWAYS_WRITTEN and default is not attr.NOTHING and item == default:
                continue
            data[field.metadata["schema_property_name"]] = to_sarif_dict(item)
        return data
    if isinstance(value, dict):
        return {str(key): to_sarif_dict(item) for key, item in value.items() if item is not None}
    if isinstance(value, (set, frozenset)):
        return sorted(to_sarif_dict(item) for item in value)
    if isinstance(value, (list, tuple)):
        return [to_sarif_dict(item) for item in value]
    return value


def artifact_location(path: str) -> om.ArtifactLocation:
    """Relative paths resolve against %SRCROOT% (GitHub needs that); others become absolute URIs."""
    if path == STDIN_NAME:
        return om.ArtifactLocation(uri="stdin")
    if os.path.isabs(path):
        return om.ArtifactLocation(uri=Path(path).as_uri())
    return om.ArtifactLocation(uri=quote(path.replace(os.sep, "/")), uri_base_id=SRCROOT)


def region(location: Location) -> om.Region | None:
    if location.line < 1:
        return None  # e.g. an unreadable file: there is no place inside it to point at
    column = max(location.column, 1)
    return om.Region(
        start_line=location.line,
        start_column=column,
        end_line=location.end_line or location.line,
        end_column=location.end_column or column + 1,
    )


def sarif_location(location: Location, location_id: int | None = None) -> om.Location:
    return om.Location(
        id=location_id,
        physical_location=om.PhysicalLocation(artifact_location=artifact_location(location.path),
                                              region=region(location)),
        message=om.Message(text=location.message) if location.message else None,
    )


def plain_help(policy: Policy) -> str:
    docs = policy.docs
    return "\n\n".join([policy.summary, docs["what"].strip(), docs["why"].strip(), "Fix:\n" + docs["fix"].rstrip()])


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def rule_descriptor(policy: Policy) -> om.ReportingDescriptor:
    return om.ReportingDescriptor(
        id=policy.id,
        name=policy.name,
        short_description=om.MultiformatMessageString(text=policy.summary),
        full_description=om.MultiformatMessageString(text=truncate(policy.docs["what"].strip(), MAX_DESCRIPTION)),
        help=om.MultiformatMessageString(text=plain_help(policy), markdown=rule_markdown(policy)),
        default_configuration=om.ReportingConfiguration(level=LEVELS[policy.severity]),
        # No `security-severity`: it would turn these into security alerts, and they are not.
        properties={"tags": list(policy.tags[:MAX_TAGS]), "precision": "high",
                    "problem.severity": PROBLEM_SEVERITIES[policy.severity]},
    )


def result(finding: Finding, rule_index: dict[str, int]) -> om.Result:
    subject = finding.subject
    return om.Result(
        rule_id=finding.rule_id,
        rule_index=rule_index.get(finding.rule_id),
        level=LEVELS[finding.severity],
        message=om.Message(text=finding.message),
        locations=[om.Location(
            physical_location=sarif_location(finding.location).physical_location,
            logical_locations=[om.LogicalLocation(name=subject.name, fully_qualified_name=str(subject),
                                                  kind="resource")],
        )],
        related_locations=[sarif_location(related, number)
                           for number, related in enumerate(finding.related, start=1)] or None,
        partial_fingerprints={FINGERPRINT_KEY: finding.fingerprint},
        suppressions=[om.Suppression(kind=finding.suppressed_by or "external", justification=finding.suppressed)]
        if finding.suppressed else None,
        properties={"traffic": finding.traffic} if finding.traffic is not None else None,
    )


def kept_findings(findings: list[Finding]) -> list[Finding]:
    """At most MAX_RESULTS, preferring standing and severe findings, in the report's order."""
    if len(findings) <= MAX_RESULTS:
        return findings
    ranked = sorted(range(len(findings)), key=lambda i: (bool(findings[i].suppressed), -findings[i].severity))
    keep = set(ranked[:MAX_RESULTS])
    return [finding for i, finding in enumerate(findings) if i in keep]


def notification(level: str, text: str, location: Location | None = None) -> om.Notification:
    return om.Notification(level=level, message=om.Message(text=text),
                           locations=[sarif_location(location)] if location else None)


def sarif_log(report: Report, options: FormatOptions) -> om.SarifLog:
    rules = list(report.rules)
    rule_index = {policy.id: index for index, policy in enumerate(rules)}
    findings = kept_findings(report.findings)
    notifications = [notification("error", d.message, d.location) for d in report.diagnostics]
    if len(findings) < len(report.findings):
        notifications.append(notification("warning", (
            f"{len(report.findings) - len(findings)} of {len(report.findings)} findings were left out: "
            f"a SARIF run holds at most {MAX_RESULTS:,} results for GitHub code scanning. "
            f"Use --format json to see them all.")))
    cwd_uri = Path.cwd().as_uri()
    run = om.Run(
        tool=om.Tool(driver=om.ToolComponent(
            name="kubelint-ports",
            version=__version__,
            semantic_version=__version__,
            information_uri=INFORMATION_URI,
            rules=[rule_descriptor(policy) for policy in rules],
        )),
        results=[result(finding, rule_index) for finding in findings],
        original_uri_base_ids={SRCROOT: om.ArtifactLocation(uri=cwd_uri if cwd_uri.endswith("/") else cwd_uri + "/")},
        invocations=[om.Invocation(execution_successful=not report.diagnostics,
                                   tool_execution_notifications=notifications or None)],
        automation_details=om.RunAutomationDetails(id=options.sarif_category) if options.sarif_category else None,
        column_kind="unicodeCodePoints",
    )
    return om.SarifLog(schema_uri=SCHEMA_URI, version="2.1.0", runs=[run])


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    out.write(json.dumps(to_sarif_dict(sarif_log(report, options)), indent=2, sort_keys=True))
    out.write("\n")
