"""`lint --fix`, `--unsafe-fixes`, `--diff`: what a finding's fix is, and the files it gives.

Stage 4, beside the engine: it reads a run's Report (findings and the model) and the files the
findings point at, and works out edits; the command line writes them or prints them as a diff.

- `describe(report, edits=False)` sets each fixable finding's `fix` (findings.Fix): safe or
  unsafe, and what it does. With `edits=True` it also works out the exact edits (a structural
  fix runs ruamel.yaml's round trip then, and a fix whose round trip would touch other lines is
  kept with `blocked` saying why).
- `changes(report, unsafe)` applies the available fixes of a described report to the files'
  texts in memory and returns each changed file's old and new bytes.

Everything outside an edit is kept byte for byte: a scalar's fix is a splice at its exact span
(the marks the finding's position came from), a removal replaces whole lines that only the
removed node spanned. Rendered Helm objects and Kustomize builds get no fix yet (their text is
not the text the user wrote).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

from kubelint_ports.findings import Edit, Finding, Fix, Report
from kubelint_ports.fixes.rules import FIXES, Context, Plan, node_ports_kept
from kubelint_ports.fixes.source import SourceFile, read_source, region, split_lines, target_of
from kubelint_ports.loading import Document

__all__ = ["FIXES", "FileChange", "changes", "describe", "fixable_rules", "reserved_ports_of", "unified_diff"]


def reserved_ports_of(policies) -> frozenset[int]:
    """The node daemons' ports the run's node-reserved-port policies list (a moved nodePort avoids them)."""
    from kubelint_ports.model.port_holders import reserved_ports

    ports: set[int] = set()
    for policy in policies:
        if policy.check == "node-reserved-port":
            ports.update(port for _, port in reserved_ports(policy.params))
    return frozenset(ports)


def fixable_rules() -> tuple[str, ...]:
    return tuple(sorted(FIXES))


def describe(report: Report, edits: bool = False, reserved=frozenset()) -> Report:
    """The report with every fixable finding's `fix` set (in place, and returned). `reserved`: the
    node daemons' ports, which a moved nodePort avoids."""
    cluster = report.cluster
    if cluster is None or not any(f.rule_id in FIXES for f in report.findings):
        return report
    documents = plain_documents(cluster)
    context = Context(cluster, frozenset(reserved), keeps_port=node_ports_kept(report.findings))
    sources: dict[str, SourceFile | None] = {}
    findings = []
    for finding in report.findings:
        fix = None
        fixer = FIXES.get(finding.rule_id)
        document = documents.get((finding.subject, finding.location.path))
        if fixer is not None and document is not None and not finding.suppressed:
            file = document.text_source.file
            if file not in sources:
                sources[file] = read_source(file, finding.location.path)
            source = sources[file]
            target = target_of(finding, document, source) if source is not None else None
            plan = fixer(target, finding, context) if target is not None else None
            if plan is not None:
                fix = to_fix(plan, target, edits)
        findings.append(replace(finding, fix=fix) if fix is not None else finding)
    report.findings = findings
    return report


def plain_documents(cluster) -> dict:
    """(object, shown path) -> its Document, for the objects a fix may edit: plain manifests read
    from a file (not standard input, not a rendered chart or a Kustomize build)."""
    found = {}
    for item in [*cluster.workloads, *cluster.services]:
        document = item.document
        if (not item.live and type(document) is Document and document.text_source is not None
                and document.text_source.file is not None):
            found.setdefault((item.ref, document.path), document)
    return found


def to_fix(plan: Plan, target, edits: bool) -> Fix:
    fix = Fix(plan.applicability, plan.description)
    if not edits:
        return fix
    source = target.source
    if plan.splice is not None:
        start, end, text = plan.splice
    else:
        from kubelint_ports.fixes.structure import Refused, removal

        segments, lines = plan.remove
        try:
            start, end, text = removal(source.text, target.root, segments, lines)
        except Refused as refused:
            return replace(fix, blocked=str(refused))
    return replace(fix, edits=(Edit(region(source.text, start, end, source.path), start, end, text),))


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str  # as findings show it
    file: str  # on disk
    old: bytes
    new: bytes
    fixed: tuple[Finding, ...]  # the findings whose fixes it holds


def chosen(finding: Finding, unsafe: bool) -> bool:
    fix = finding.fix
    return (fix is not None and fix.available and bool(fix.edits)
            and (fix.applicability == "safe" or unsafe))


def changes(report: Report, unsafe: bool = False) -> list[FileChange]:
    """Each file's new bytes with the chosen fixes applied: edits in order of place, an edit that
    overlaps one before it left for the next pass. Files by path, so the result is deterministic."""
    by_file: dict[str, list[Finding]] = {}
    for finding in report.findings:
        if chosen(finding, unsafe):
            by_file.setdefault(finding.location.path, []).append(finding)
    result = []
    documents = plain_documents(report.cluster) if by_file else {}
    for path in sorted(by_file):
        finding = by_file[path][0]
        text_source = documents[(finding.subject, path)].text_source
        source = read_source(text_source.file, path)
        if source is None or zlib.crc32(source.bytes_for(source.text)) != text_source.digest:
            continue  # the file changed since it was linted: its edits would land elsewhere
        text, fixed, end = [], [], 0
        for finding in sorted(by_file[path], key=lambda f: (f.fix.edits[0].start, f.fix.edits[0].end)):
            edit = finding.fix.edits[0]
            if edit.start < end:
                continue  # overlaps an edit already taken: the next pass sees it again
            text += [source.text[end:edit.start], edit.text]
            end = edit.end
            fixed.append(finding)
        text.append(source.text[end:])
        old = source.bytes_for(source.text)
        new = source.bytes_for("".join(text))
        if new != old:
            result.append(FileChange(path, text_source.file, old, new, tuple(fixed)))
    return result


def unified_diff(change: FileChange) -> str:
    """The change as `diff -u` prints it (lines keep their own ends, CRLF included)."""
    import difflib

    old = split_lines(change.old.decode("utf-8-sig"))
    new = split_lines(change.new.decode("utf-8-sig"))
    lines = difflib.unified_diff(old, new, f"a/{change.path}", f"b/{change.path}")
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
