"""JUnit XML (the Ant/Surefire dialect Jenkins, GitLab and Azure read): one test suite per file,
one test case per finding; a standing finding is a `failure`, an input error an `error`, a
suppressed finding `skipped`. Paths are relative to the repository's top level."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from typing import TextIO

from kubelint_ports.findings import Finding, Report
from kubelint_ports.formatters import FormatOptions
from kubelint_ports.formatters.text import fix_hint
from kubelint_ports.sourceroot import find_source_root, relative_to_root
from kubelint_ports.vocabulary import NOT_FILES

SUITE_NAME = "kubelint-ports"
# Characters XML 1.0 cannot hold at all (a YAML double-quoted "\x01" reaches messages as one).
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def finding_case(finding: Finding, path: str, root: str, unsafe_fixes: bool = False) -> ET.Element:
    place = f"{finding.location.line}:{finding.location.column}" if finding.location.line >= 1 else path
    # Named by what the finding is about, never by its line: a CI's test history follows a test by
    # name, and lines move with every edit above them. The place is in the failure's text.
    case = ET.Element("testcase", name=xml_text(case_name(finding)), classname=xml_text(path))
    if finding.suppressed:
        ET.SubElement(case, "skipped", message=xml_text(f"suppressed: {finding.suppressed}"))
        return case
    details = [finding.short_words.short, f"{path}:{place}" if finding.location.line >= 1 else path,
               f"object: {finding.subject}" + (f" (from {finding.template})" if finding.template else "")]
    details += [f"{relative_to_root(related.path, root)}:{related.line}:{related.column}: {related.message}"
                for related in finding.related]
    hint = fix_hint(finding, unsafe_fixes)
    if hint:
        details.append(f"{hint}: {finding.fix.description}")
    failure = ET.SubElement(case, "failure", type=finding.rule_id,
                            message=xml_text(f"{finding.severity}: {finding.headline}"))
    failure.text = xml_text("\n".join(details))
    return case


def case_name(finding: Finding) -> str:
    """Rule, object, the field by the names of the items on its way, and who else it is about."""
    field = finding.identity_path or finding.field_path
    others = "".join(f" with {partner.rsplit('/', 1)[0]}" for partner in finding.partners)
    return f"{finding.rule_id} {finding.rule_name} {finding.subject}" + (f" {field}" if field else "") + others


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    root = options.source_root or find_source_root()
    cases: list[tuple[str, ET.Element]] = []
    for diagnostic in report.diagnostics:
        path = relative_to_root(diagnostic.location.path, root)
        case = ET.Element("testcase", name=xml_text(f"input {diagnostic.location}"), classname=xml_text(path))
        error = ET.SubElement(case, "error", type="input-error", message=xml_text(diagnostic.message))
        error.text = xml_text(f"{diagnostic.location}: {diagnostic.message}")
        cases.append((path, case))
    for finding in report.findings:
        path = relative_to_root(finding.location.path, root)
        cases.append((path, finding_case(finding, path, root, options.unsafe_fixes)))
    suites = ET.Element("testsuites", name=SUITE_NAME)
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for path, group in itertools.groupby(sorted(cases, key=lambda item: item[0]), key=lambda item: item[0]):
        members = [case for _, case in group]
        counts = {"tests": len(members),
                  "failures": sum(1 for case in members if case.find("failure") is not None),
                  "errors": sum(1 for case in members if case.find("error") is not None),
                  "skipped": sum(1 for case in members if case.find("skipped") is not None)}
        suite = ET.SubElement(suites, "testsuite", name=xml_text(path), **{k: str(v) for k, v in counts.items()})
        if path not in NOT_FILES:
            suite.set("file", xml_text(path))
        suite.extend(members)
        for key in totals:
            totals[key] += counts[key]
    for key, value in totals.items():
        suites.set(key, str(value))
    ET.indent(suites)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write(ET.tostring(suites, encoding="unicode"))
    out.write("\n")
