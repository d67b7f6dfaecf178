"""One run's fixes: each fixable finding's `fix` described (`describe`), and the files the chosen
fixes change (`changes`, `unified_diff`). The package's front (`kubelint_ports.fixes`) imports this
module only when a finding of a fixable rule is there to describe."""

from __future__ import annotations

import os
import sys
import zlib
from dataclasses import replace

from kubelint_ports.findings import Edit, Finding, Fix, Report
from kubelint_ports.records import record
from kubelint_ports.fixes.plan import Choices, Context, Plan
from kubelint_ports.fixes.rules import FIXES, node_ports_kept
from kubelint_ports.fixes.source import (
    NoFix, read_digest, read_source, split_lines, target_of)
from kubelint_ports.loading import Document


def describe(report: Report, edits: bool = False, reserved=frozenset(), choices: Choices = Choices()) -> Report:
    """The report with every fixable finding's `fix` set (in place, and returned). `reserved`: the
    node daemons' ports, which a moved port avoids; `choices`: the configuration's `fix:` section."""
    cluster = report.cluster
    if cluster is None or not any(f.rule_id in FIXES for f in report.findings):
        return report
    places = Places(cluster)
    context = Context(cluster, frozenset(reserved), keeps_port=node_ports_kept(report.findings, places.origins),
                      findings=report.findings, choices=choices)
    units = dict(cluster.units)
    unit_contexts: dict[str, Context] = {}
    findings = []
    for finding in report.findings:
        fix = None
        if finding.rule_id in FIXES and not finding.suppressed:
            fix = fix_of(finding, places, unit_context(finding, context, units, unit_contexts), edits)
        findings.append(replace(finding, fix=fix) if fix is not None else finding)
    report.findings = findings
    return report


def unit_context(finding: Finding, context: Context, units: dict, made: dict[str, Context]) -> Context:
    """A finding of one deployment unit is fixed within that unit's cluster: its objects, nodes
    and port ranges, as its message and `ports --free` answer. One of several units (a file they
    share) is fixed within the whole run's, where a port free in all of them is free. The ports
    handed out, the files read and the kept ports stay the run's."""
    if len(finding.units) != 1 or finding.units[0] not in units:
        return context
    name = finding.units[0]
    if name not in made:
        made[name] = replace(context, cluster=units[name], workloads=None, whole_run=context.cluster)
    return made[name]


def fix_of(finding: Finding, places: Places, context: Context, edits: bool) -> Fix | None:
    fixer = FIXES[finding.rule_id]
    if getattr(fixer, "whole_run", False):  # KP401: its own places (configurations, flags)
        return fixer(finding, context, edits)
    document = places.plain.get((finding.subject, finding.location.path))
    if document is not None:
        source = context.sources.read(document.text_source.file, finding.location.path)
        target = target_of(finding, document, source) if source is not None else None
        plan = fixer(target, finding, context) if target is not None else None
        return to_fix(plan, target, edits, context) if plan is not None else None
    document = places.rendered_for(finding)
    if document is None:
        return None
    source = context.sources.rendered(document)
    target = target_of(finding, document, source, placed=False) if source is not None else None
    plan = fixer(target, finding, context) if target is not None else None
    if plan is None:
        return None
    try:
        if rendering(document) == "helm":
            from kubelint_ports.fixes.helm import carry
        else:
            from kubelint_ports.fixes.kustomize import carry
        plan, target = carry(document, target, plan, finding, context)
    except NoFix as reason:
        context.give_back(plan)
        return Fix(plan.applicability, plan.description, blocked=str(reason))
    return to_fix(plan, target, edits, context)


def rendering(document) -> str:
    """"helm" for an object rendered from a chart, "kustomize" for one a build made, else "". The
    classes are looked up where loading put them, never imported: a run that read no chart and no
    kustomization has none and must not pay for their modules."""
    templates = sys.modules.get("kubelint_ports.loading.helm.templatemap")
    if templates is not None and isinstance(document, templates.TemplateDocument):
        return "helm"
    builds = sys.modules.get("kubelint_ports.loading.kustomize.positions")
    if builds is not None and isinstance(document, builds.KustomizeDocument):
        return "kustomize"
    return ""


class Places:
    """Where the objects a fix may edit were read: plain manifests from a file, by (object, shown
    path); objects rendered from a Helm chart or built by Kustomize, by object. Standard input and
    the running cluster (`--cluster`) are never edited."""

    def __init__(self, cluster) -> None:
        self.plain: dict = {}
        self.rendered: dict = {}
        for item in [*cluster.workloads, *cluster.services]:
            document = item.document
            if item.live or document is None or document.text_source is None:
                continue
            if type(document) is Document:
                if document.text_source.file is not None:
                    self.plain.setdefault((item.ref, document.path), document)
            elif rendering(document):
                self.rendered.setdefault(item.ref, []).append(document)

    def origins(self, finding: Finding) -> tuple:
        """Where a rendered finding's value is set (a chart's values keys), among its related places."""
        document = self.rendered_for(finding)
        if document is None or rendering(document) != "helm":
            return ()
        return document.value_locations(finding.field_path)

    def rendered_for(self, finding: Finding):
        """The rendered document a finding is about: of one object built by several overlays, the
        one of the finding's unit, then the one whose position is the finding's."""
        candidates = self.rendered.get(finding.subject, [])
        if len(candidates) > 1 and finding.units:
            candidates = [document for document in candidates if document.unit in finding.units] or candidates
        if len(candidates) > 1:
            candidates = [document for document in candidates
                          if document.location(finding.field_path) == finding.location] or candidates[:1]
        return candidates[0] if candidates else None


# A removal's edit is checked by a round trip of its whole document through ruamel.yaml (pure
# Python: some 40 KB a second), so an object with thousands of removals would cost thousands of
# documents. Past this many in one document, or this many characters in one run, a removal's edit
# waits for the next run (`--fix` makes several passes).
ROUND_TRIPS_PER_DOCUMENT = 16
ROUND_TRIP_CHARACTERS = 1 << 18


def to_fix(plan: Plan, target, edits: bool, context: Context) -> Fix:
    fix = Fix(plan.applicability, plan.description)
    if not edits:
        return fix
    source = target.source
    if plan.splice is not None:
        start, end, text = plan.splice
    else:
        from kubelint_ports.fixes.structure import Refused, removal

        trips, document = context.round_trips, (source.file, source.path, target.root.start_mark.index)
        done = trips.documents.get(document, 0)
        size = target.root.end_mark.index - target.root.start_mark.index
        if done >= ROUND_TRIPS_PER_DOCUMENT:
            return replace(fix, blocked=f"its document has more than {ROUND_TRIPS_PER_DOCUMENT} removals, each checked "
                                        f"on the whole document: the others wait for the next run")
        if trips.characters + size > ROUND_TRIP_CHARACTERS:
            return replace(fix, blocked=f"checking it would take this run's removals past {ROUND_TRIP_CHARACTERS:,} "
                                        f"characters of YAML, each checked on its whole document: it waits for the "
                                        f"next run")
        trips.documents[document] = done + 1
        trips.characters += size
        segments, lines = plan.remove
        try:
            start, end, text = removal(source.text, target.root, segments, lines)
        except Refused as refused:
            return replace(fix, blocked=str(refused))
    return replace(fix, edits=(Edit(source.region(start, end), start, end, text),))


@record(frozen=True, slots=True)
class FileChange:
    path: str  # as findings show it
    file: str  # on disk
    old: bytes
    new: bytes
    fixed: tuple[Finding, ...]  # the findings whose fixes it holds
    # The replacements made, (start, end, text) in `old`'s decoded text, in order: what `fixes.apply`
    # checks the new text against (every other character kept). Empty for a change of several passes.
    edits: tuple[tuple[int, int, str], ...] = ()


def chosen(finding: Finding, unsafe: bool) -> bool:
    """Whether `--fix` (with `--unsafe-fixes`: `unsafe`) applies this finding's fix."""
    fix = finding.fix
    return (fix is not None and fix.available and bool(fix.edits)
            and (fix.applicability == "safe" or unsafe))


def changes(report: Report, unsafe: bool = False) -> list[FileChange]:
    """Each file's new bytes with the chosen fixes applied: edits in order of place, an edit that
    overlaps one before it left for the next pass (the same edit twice is made once). Files by
    path, so the result is deterministic. A file that changed since it was linted (a plain
    manifest) or read for its fix (a values file, a template, a patch) is left alone."""
    by_file: dict[str, list[Finding]] = {}
    for finding in report.findings:
        if chosen(finding, unsafe):
            by_file.setdefault(finding.fix.edits[0].region.path, []).append(finding)
    result = []
    linted = {document.path: document.text_source for document in Places(report.cluster).plain.values()} \
        if by_file else {}
    for path in sorted(by_file):
        text_source = linted.get(path)
        file = text_source.file if text_source is not None else os.path.abspath(path)
        expected = text_source.digest if text_source is not None else read_digest(file)
        source = read_source(file, path)
        if source is None or zlib.crc32(source.bytes_for(source.text)) != expected:
            continue  # the file changed: its edits would land elsewhere
        text, fixed, end, last, made = [], [], 0, None, []
        for finding in sorted(by_file[path], key=lambda f: (f.fix.edits[0].start, f.fix.edits[0].end)):
            edit = finding.fix.edits[0]
            if last is not None and (edit.start, edit.end, edit.text) == last:
                fixed.append(finding)  # the same edit, asked for by another finding (one values key)
                continue
            if edit.start < end:
                continue  # overlaps an edit already taken: the next pass sees it again
            text += [source.text[end:edit.start], edit.text]
            end = edit.end
            last = (edit.start, edit.end, edit.text)
            made.append(last)
            fixed.append(finding)
        text.append(source.text[end:])
        old = source.bytes_for(source.text)
        new = source.bytes_for("".join(text))
        if new != old:
            result.append(FileChange(path, file, old, new, tuple(fixed), tuple(made)))
    return result


def unified_diff(change: FileChange, base: str | None = None) -> str:
    """The change as `diff -u` prints it (lines keep their own ends, CRLF included), its paths
    relative to `base` (`fixes.apply.diff_base`: where `git apply` or `patch -p1` takes it), else
    as findings show it. A BOM stays on the first line, so a hunk there applies to the file."""
    import difflib

    old = split_lines(change.old.decode("utf-8"))
    new = split_lines(change.new.decode("utf-8"))
    name = change.path if base is None else os.path.relpath(os.path.realpath(change.file), base).replace(os.sep, "/")
    lines = difflib.unified_diff(old, new, f"a/{name}", f"b/{name}")
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
