"""SARIF 2.1.0 for GitHub code scanning and other readers, built with sarif-om.

sarif-om's usual serializer (`jschema_to_python.to_json`) drops every value equal to its attrs
default, so `Result(level="warning")` would lose its level and readers would fall back to the
rule's level; it also prints sets as `"{'a'}"`. `to_sarif_dict` below is our own small walker.

The rules table (`tool.driver.rules`) holds only the rules that have a result, a suppressed one
included, each with its summary (`shortDescription`, `fullDescription`, `help`) and `helpUri`, its
page under docs/rules/: the full docs of every rule made a log of one finding 220 KB (issue 35).
`--sarif-full-rules` (`FormatOptions.sarif_full_rules`) writes every rule that ran with its full docs instead.
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
from kubelint_ports.findings import FINGERPRINT_VERSION, Finding, Report
from kubelint_ports.formatters import FormatOptions
from kubelint_ports.formatters.rule_links import help_uri, project_url
from kubelint_ports.policies import Policy
from kubelint_ports.sourceroot import find_source_root, relative_to_root
from kubelint_ports.vocabulary import COMMAND_LINE, STDIN_NAME, Location, Severity

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
FINGERPRINT_KEY = f"kubeLintPorts/v{FINGERPRINT_VERSION}"  # changes when what the fingerprint hashes does
MAX_RESULTS = 25_000  # GitHub rejects runs with more results than this
MAX_DESCRIPTION = 1024  # GitHub truncates fullDescription.text beyond this
MAX_TAGS = 20  # GitHub keeps at most 20 tags per rule

MARKDOWN_SPECIAL = frozenset("\\`*_{}[]()<>#+-.!|~")  # CommonMark's backslash-escapable punctuation, in part
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


def artifact_location(path: str, root: str) -> om.ArtifactLocation:
    """Files under the source root resolve against %SRCROOT% (GitHub needs that); files outside it
    become absolute URIs."""
    if path == STDIN_NAME:
        return om.ArtifactLocation(uri="stdin")
    relative = relative_to_root(path, root)
    if os.path.isabs(relative):
        return om.ArtifactLocation(uri=Path(relative).as_uri())
    return om.ArtifactLocation(uri=quote(relative), uri_base_id=SRCROOT)


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


def sarif_location(location: Location, root: str, location_id: int | None = None) -> om.Location:
    return om.Location(
        id=location_id,
        physical_location=om.PhysicalLocation(artifact_location=artifact_location(location.path, root),
                                              region=region(location)),
        message=om.Message(text=location.message) if location.message else None,
    )


def plain_help(policy: Policy) -> str:
    docs = policy.docs
    return "\n\n".join([policy.summary, docs["what"].strip(), docs["why"].strip(), "Fix:\n" + docs["fix"].rstrip()])


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short_help_markdown(policy: Policy, uri: str | None) -> str:
    """The rule's summary and where its docs are: its page, else (a policy of your own) the option
    that carries them."""
    if uri:
        return f"{policy.summary}\n\n[{policy.id} {policy.name}]({uri}): what it checks, why, an example and the fix."
    return f"{policy.summary}\n\nA policy of your own: `--sarif-full-rules` carries its docs in the SARIF log."


def rule_descriptor(policy: Policy, repository: str, full: bool = False) -> om.ReportingDescriptor:
    """The rule's entry in the rules table: short help and a link, or (`full`) its whole docs."""
    uri = help_uri(policy, repository)
    if full:
        description = om.MultiformatMessageString(text=truncate(policy.docs["what"].strip(), MAX_DESCRIPTION))
        rule_help = om.MultiformatMessageString(text=plain_help(policy), markdown=rule_markdown(policy))
    else:
        # GitHub's rules want a fullDescription (the multitool's GH2012): the summary again.
        description = om.MultiformatMessageString(text=policy.summary)
        rule_help = om.MultiformatMessageString(text=policy.summary, markdown=short_help_markdown(policy, uri))
    return om.ReportingDescriptor(
        id=policy.id,
        name=policy.name,
        help_uri=uri,
        short_description=om.MultiformatMessageString(text=policy.summary),
        full_description=description,
        help=rule_help,
        default_configuration=om.ReportingConfiguration(level=LEVELS[policy.severity]),
        # No `security-severity`: it would turn these into security alerts, and they are not.
        properties={"tags": list(policy.tags[:MAX_TAGS]), "precision": "high",
                    "problem.severity": PROBLEM_SEVERITIES[policy.severity]},
    )


def result(finding: Finding, rule_index: dict[str, int], root: str) -> om.Result:
    subject = finding.subject
    return om.Result(
        rule_id=finding.rule_id,
        rule_index=rule_index.get(finding.rule_id),
        level=LEVELS[finding.severity],
        # The headline and its effect for the alert's list; the full analysis as markdown.
        message=om.Message(text=finding.short_words.alert, markdown=markdown_text(finding.message)),
        locations=[om.Location(
            physical_location=sarif_location(finding.location, root).physical_location,
            logical_locations=[om.LogicalLocation(name=subject.name, fully_qualified_name=str(subject),
                                                  kind="resource")],
        )],
        related_locations=[sarif_location(related, root, number)
                           for number, related in enumerate(finding.related, start=1)] or None,
        partial_fingerprints={FINGERPRINT_KEY: finding.fingerprint},
        suppressions=[om.Suppression(kind=finding.suppressed_by or "external", justification=finding.suppressed)]
        if finding.suppressed else None,
        properties={key: value for key, value in (("traffic", finding.traffic), ("units", list(finding.units)),
                                                  ("fix", fix_properties(finding)))
                    if value} or None,
        fixes=sarif_fixes(finding, root),
    )


def markdown_text(text: str) -> str:
    """Plain words as markdown that shows them as written: every character markdown or HTML reads
    as markup is escaped, backticks included. No code span is kept: a backtick from an input (a
    container's argument) could otherwise end one early and let the rest be read as markup."""
    return "".join(f"\\{char}" if char in MARKDOWN_SPECIAL else char for char in text).replace("&", "&amp;")


def fix_properties(finding: Finding) -> dict | None:
    """Whether a fix exists and how safe it is (SARIF's `fix` object has no such word)."""
    fix = finding.fix
    if fix is None:
        return None
    return {"applicability": fix.applicability, **({"notApplied": fix.blocked} if fix.blocked else {})}


def sarif_fixes(finding: Finding, root: str) -> list[om.Fix] | None:
    """`lint --fix`'s edits as SARIF `fixes`: one artifactChange per file, replacements with the
    deleted region and the inserted text (an edit that is not applied is not offered)."""
    fix = finding.fix
    if fix is None or not fix.edits or fix.blocked:
        return None
    by_file: dict[str, list] = {}
    for edit in fix.edits:
        by_file.setdefault(edit.region.path, []).append(om.Replacement(
            deleted_region=om.Region(start_line=edit.region.line, start_column=edit.region.column,
                                     end_line=edit.region.end_line, end_column=edit.region.end_column),
            inserted_content=om.ArtifactContent(text=edit.text)))
    return [om.Fix(description=om.Message(text=f"{fix.description} ({fix.applicability})"),
                   artifact_changes=[om.ArtifactChange(artifact_location=artifact_location(path, root),
                                                       replacements=replacements)
                                     for path, replacements in sorted(by_file.items())])]


def kept_findings(findings: list[Finding]) -> list[Finding]:
    """At most MAX_RESULTS, preferring standing and severe findings, in the report's order."""
    if len(findings) <= MAX_RESULTS:
        return findings
    ranked = sorted(range(len(findings)), key=lambda i: (bool(findings[i].suppressed), -findings[i].severity))
    keep = set(ranked[:MAX_RESULTS])
    return [finding for i, finding in enumerate(findings) if i in keep]


def notification(level: str, text: str, root: str, location: Location | None = None) -> om.Notification:
    if location is not None and location.path == COMMAND_LINE:
        text, location = f"{COMMAND_LINE}: {text}", None  # not a file: no location to give
    return om.Notification(level=level, message=om.Message(text=text),
                           locations=[sarif_location(location, root)] if location else None)


def table_rules(report: Report, findings: list[Finding], full: bool) -> list[Policy]:
    """The rules the table holds, in the report's order: those with a result among `findings` (a
    suppressed result is a result: GitHub shows it as a dismissed alert of its rule); `full`: all
    that ran. Results index into this list (`ruleIndex`)."""
    if full:
        return list(report.rules)
    used = {finding.rule_id for finding in findings}
    return [policy for policy in report.rules if policy.id in used]


def sarif_log(report: Report, options: FormatOptions) -> om.SarifLog:
    findings = kept_findings(report.findings)
    full = options.sarif_full_rules
    rules = table_rules(report, findings, full)
    rule_index = {policy.id: index for index, policy in enumerate(rules)}
    root = options.source_root or find_source_root()
    notifications = [notification("error", d.message, root, d.location) for d in report.diagnostics]
    if len(findings) < len(report.findings):
        notifications.append(notification("warning", (
            f"{len(report.findings) - len(findings)} of {len(report.findings)} findings were left out: "
            f"a SARIF run holds at most {MAX_RESULTS:,} results for GitHub code scanning. "
            f"Use --format json to see them all."), root))
    root_uri = Path(root).as_uri()
    repository = project_url()
    run = om.Run(
        tool=om.Tool(driver=om.ToolComponent(
            name="kubelint-ports",
            version=__version__,
            semantic_version=__version__,
            information_uri=repository or None,
            rules=[rule_descriptor(policy, repository, full) for policy in rules],
        )),
        results=[result(finding, rule_index, root) for finding in findings],
        original_uri_base_ids={SRCROOT: om.ArtifactLocation(uri=root_uri if root_uri.endswith("/") else root_uri + "/")},
        invocations=[om.Invocation(execution_successful=not report.diagnostics,
                                   tool_execution_notifications=notifications or None)],
        automation_details=om.RunAutomationDetails(id=options.sarif_category) if options.sarif_category else None,
        column_kind="unicodeCodePoints",
    )
    return om.SarifLog(schema_uri=SCHEMA_URI, version="2.1.0", runs=[run])


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    out.write(json.dumps(to_sarif_dict(sarif_log(report, options)), indent=2, sort_keys=True))
    out.write("\n")
