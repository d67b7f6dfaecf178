"""Accepted findings: annotations in manifests, exemptions in the config, and a baseline file.

A suppressed finding is kept with its reason (JSON `suppressed`, SARIF `suppressions`) and hidden
from text output; it never affects the exit code.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Sequence

from kubelint_ports.findings import FINGERPRINT_VERSION, Finding
from kubelint_ports.records import record
from kubelint_ports.vocabulary import Location

IGNORE_ANNOTATION = "kubelint-ports.io/ignore"
REASON_ANNOTATION = "kubelint-ports.io/ignore-reason"
EVERY_RULE = frozenset(("*", "all"))
# A baseline's version is the fingerprint version it records. Version 1 keyed list items by index
# (`containers[0]`): its keys are still matched, by each finding's legacy fingerprint.
BASELINE_VERSION = FINGERPRINT_VERSION
READABLE_BASELINE_VERSIONS = (1, BASELINE_VERSION)


def annotations(document) -> dict[str, str]:
    """The object's own annotations (loading keeps the ones under `kubelint-ports.io/`)."""
    return dict(getattr(document, "annotations", None) or {})


def annotation_reason(document, rule_id: str, rule_name: str) -> str:
    """The reason an object's `kubelint-ports.io/ignore` annotation gives for this rule, or ""."""
    values = annotations(document)
    listed = {token.strip() for token in values.get(IGNORE_ANNOTATION, "").split(",") if token.strip()}
    if not listed or not (listed & EVERY_RULE or rule_name in listed or rule_id in {t.upper() for t in listed}):
        return ""
    return values.get(REASON_ANNOTATION, "").strip() or ANNOTATION_WITHOUT_REASON


def unknown_rule_notes(documents, policies) -> list[str]:
    """ruff warns about a `# noqa` code it does not know: a typo in an ignore annotation would
    otherwise suppress nothing without a word."""
    known = {name for policy in policies for name in (policy.id, policy.name)} | EVERY_RULE
    notes = []
    for document in documents:
        if not getattr(document, "annotations", None):
            continue  # nearly every object: no annotation kept, none copied (7,000 a run in the server)
        listed = annotations(document).get(IGNORE_ANNOTATION, "")
        unknown = [token.strip() for token in listed.split(",")
                   if token.strip() and token.strip() not in known and token.strip().upper() not in known]
        if unknown:
            where = annotation_location(document)
            names = ", ".join(repr(token) for token in unknown)
            notes.append(f"{where.path}:{where.line}:{where.column}: {IGNORE_ANNOTATION} names {names}, which "
                         f"{'is no rule' if len(unknown) == 1 else 'are no rules'} (see `kubelint-ports rules`)")
    return notes


ANNOTATION_WITHOUT_REASON = f"{IGNORE_ANNOTATION} annotation"  # what `annotation_reason` says without a reason


def require_annotation_reasons(findings: Iterable[Finding]) -> tuple[list[Finding], list[str]]:
    """`require-reason: true`: an ignore annotation without `kubelint-ports.io/ignore-reason`
    silences nothing; a note names each object whose annotation lacks one."""
    result, objects = [], {}
    for finding in findings:
        if finding.suppressed_by == "inSource" and finding.suppressed == ANNOTATION_WITHOUT_REASON:
            finding = dataclasses.replace(finding, suppressed="", suppressed_by="")
            objects.setdefault(finding.subject, finding.location.path)
        result.append(finding)
    notes = [f"{path}: {subject}: the {IGNORE_ANNOTATION} annotation gives no {REASON_ANNOTATION}, which the "
             f"configuration requires (`require-reason: true`); it silences nothing"
             for subject, path in objects.items()]
    return result, notes


def annotation_location(document):
    """Where the ignore annotation's key is (its name holds dots: no field path reaches it)."""
    from kubelint_ports.loading.yaml_files import yamltree

    with document.held() as root:
        annotations_node = yamltree.at(root, "metadata.annotations")
        for key, _ in yamltree.pairs(annotations_node) if isinstance(annotations_node, yamltree.MappingNode) else ():
            if getattr(key, "value", None) == IGNORE_ANNOTATION:
                return document.node_location(key)
        return document.location("metadata.annotations")


def apply_exemptions(findings: Iterable[Finding], exemptions: Sequence, baseline: frozenset[str] = frozenset()
                     ) -> list[Finding]:
    """Mark findings matched by a config exemption or recorded in the baseline."""
    result = []
    for finding in findings:
        if not finding.suppressed:
            exemption = next((e for e in exemptions if e.matches(finding.rule_id, finding.rule_name, finding.subject)),
                             None)
            if exemption is not None:
                finding = dataclasses.replace(finding, suppressed=exemption.reason, suppressed_by="external")
            elif finding.fingerprint in baseline or (
                    getattr(baseline, "version", BASELINE_VERSION) == 1 and finding.legacy_fingerprint in baseline):
                finding = dataclasses.replace(finding, suppressed="in the baseline", suppressed_by="external")
        result.append(finding)
    return result


def write_baseline(findings: Iterable[Finding], path: str) -> int:
    """Record today's standing findings; returns how many."""
    entries = sorted(({"fingerprint": f.fingerprint, "rule": f.rule_id, "name": f.rule_name,
                       "object": str(f.subject), "fieldPath": f.identity_path or f.field_path, "port": f.port}
                      for f in findings if not f.suppressed), key=lambda e: (e["rule"], e["object"], e["fieldPath"],
                                                                             e["fingerprint"]))
    unique = list({entry["fingerprint"]: entry for entry in entries}.values())
    from kubelint_ports.policies import write_whole  # whole or not at all: a temporary file, renamed

    write_whole(path, json.dumps({"version": BASELINE_VERSION, "tool": "kubelint-ports", "findings": unique},
                                 indent=2, sort_keys=True) + "\n")
    return len(unique)


class BaselineError(ValueError):
    pass


class Baseline(frozenset):
    """The fingerprints a baseline file records, and the version of its keys."""

    version: int = BASELINE_VERSION

    @classmethod
    def of(cls, fingerprints, version: int) -> "Baseline":
        baseline = cls(fingerprints)
        baseline.version = version
        return baseline


def read_baseline(path: str) -> Baseline:
    from kubelint_ports.loading import budgets, files

    try:
        try:
            data = json.loads(files.read_file(path, budgets.current().max_file_bytes).decode("utf-8"))
        except RecursionError:  # the C decoder stops at Python's recursion limit
            raise BaselineError(f"{path}: not a kubelint-ports baseline (nested too deeply)") from None
        version = data.get("version")
        if version not in READABLE_BASELINE_VERSIONS:
            raise BaselineError(f"{path}: unsupported baseline version {version!r} (this kubelint-ports reads "
                                f"{' and '.join(map(str, READABLE_BASELINE_VERSIONS))}; a newer one wrote it?)")
        fingerprints = [entry["fingerprint"] for entry in data["findings"]]
        if not all(isinstance(fingerprint, str) for fingerprint in fingerprints):
            raise BaselineError(f"{path}: not a kubelint-ports baseline (a fingerprint is not a string)")
        return Baseline.of(fingerprints, version)
    except OSError as error:
        raise BaselineError(f"{path}: cannot read the baseline: {error.strerror}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        if isinstance(error, BaselineError):
            raise
        raise BaselineError(f"{path}: not a kubelint-ports baseline ({error})") from None


# --- suppression comments: read in `suppression_comments`, applied here ---------------------------

from kubelint_ports.suppression_comments import (  # noqa: E402  (the comments' reader, re-exported)
    _VERB,
    COMMENT_MARK,
    DEFAULT_COMMENT_REASON,
    SuppressionComment,
    comment_in,
    comment_only,
    comments_of_text,
    parse_body,
    read_comments,
)


def names_rule_token(token: str, rule_id: str, rule_name: str) -> bool:
    return token in EVERY_RULE or token == rule_name or token.upper() == rule_id


def names_rule(comment: SuppressionComment, rule_id: str, rule_name: str) -> bool:
    return any(names_rule_token(token, rule_id, rule_name) for token in comment.rules)


def covers(comment: SuppressionComment, where: Location) -> bool:
    return where.path == comment.path and comment.applies_from <= where.line <= comment.applies_to


@record(slots=True)
class CommentRun:
    """What a run's suppression comments did: the findings, the comments read, which of them silenced
    a finding, and the ones that cannot count (cannot be read, no reason where one is required),
    with the names in them that are no rule."""

    findings: list
    comments: list
    used: dict  # id of a comment -> the rules it names that silenced a finding
    notes: list
    refused: list = dataclasses.field(default_factory=list)  # (comment, why it silences nothing)
    unknown: dict = dataclasses.field(default_factory=dict)  # id of a comment -> the names in it that are no rule


def comment_paths(findings: Sequence[Finding], documents) -> list[str]:
    """Every file a suppression comment of the run may stand in: the findings' places and every
    linted file (a plain manifest, a chart's template and values files, a Kustomize resource and its
    patches), so a stale comment in a file without findings is read too (a byte search for the mark
    before any parsing: `read_comments`)."""
    from kubelint_ports.loading.paths import display_path
    from kubelint_ports.loading.yaml_files.documents import Document

    paths = dict.fromkeys(where.path for finding in findings
                          for where in (finding.location, *finding.related) if where.is_file and where.line > 0)
    for document in documents:
        if type(document) is Document:  # a plain manifest (most): none of the sources below, asked for at a cost
            if getattr(document.text_source, "file", None):
                paths[document.path] = None
            continue
        if getattr(getattr(document, "text_source", None), "file", None):
            paths[getattr(document, "path", "")] = None
        source = getattr(document, "source", None)  # a Helm template, and the values files it reads
        if getattr(source, "file", None):
            paths[source.path] = None
        for values_file, _ in getattr(getattr(source, "values", None), "layers", ()):
            if getattr(values_file, "data", None) is None and getattr(values_file, "path", ""):
                paths[display_path(values_file.path)] = None
        if getattr(document, "source_file", ""):  # a Kustomize build's resource file and its patches
            paths[display_path(document.source_file)] = None
            for patch, _ in getattr(document, "applied", ()):
                paths[getattr(patch, "path", "")] = None
    paths.pop("", None)
    return [path for path in paths if Location(path, 0, 0).is_file]


def apply_comments(findings: Iterable[Finding], documents=(), policies=(), *, require_reason: bool = False,
                   reader: Callable[[str], list[SuppressionComment]] = read_comments) -> CommentRun:
    """Mark each finding a suppression comment silences: a line comment at its location or at one of
    its related locations (a Helm values key), an object comment in its location's YAML document.
    Every comment that covers a finding counts as used (a template line's and its values key's).
    The files read are those the findings point at and every linted file (`comment_paths`)."""
    findings = list(findings)
    comments = [comment for path in comment_paths(findings, documents) for comment in reader(path)]
    known = {name for policy in policies for name in (policy.id, policy.name)} | EVERY_RULE
    notes, usable, refused, unknown_of = [], [], [], {}
    for comment in comments:
        unknown = [token for token in comment.rules if token not in known and token.upper() not in known]
        where = f"{comment.path}:{comment.line}:{comment.column}"
        if comment.problem or not comment.rules:
            why = comment.problem or "names no rule"
            notes.append(f"{where}: the suppression comment {why}; it silences nothing")
            refused.append((comment, why))
        elif require_reason and not comment.reason:
            notes.append(f"{where}: the suppression comment gives no reason (`-- why`), which the configuration "
                         f"requires; it silences nothing")
            refused.append((comment, "no-reason"))
        else:
            if unknown and policies:
                names = ", ".join(repr(token) for token in unknown)
                notes.append(f"{where}: the suppression comment names {names}, which "
                             f"{'is no rule' if len(unknown) == 1 else 'are no rules'} (see `kubelint-ports rules`)")
                unknown_of[id(comment)] = tuple(unknown)
            usable.append(comment)
    used: dict[int, set[str]] = {}
    result = []
    for finding in findings:
        line_places = [where for where in (finding.location, *finding.related) if where.line > 0]
        matches = [comment for comment in usable
                   if names_rule(comment, finding.rule_id, finding.rule_name)
                   and (covers(comment, finding.location) if comment.scope == "object"
                        else any(covers(comment, where) for where in line_places))]
        for comment in matches:
            used.setdefault(id(comment), set()).update(
                token for token in comment.rules if names_rule_token(token, finding.rule_id, finding.rule_name))
        if matches and not finding.suppressed:
            comment = matches[0]
            reason = comment.reason or f"`{comment.kind}` comment at {comment.path}:{comment.line}"
            finding = dataclasses.replace(finding, suppressed=reason, suppressed_by="inSource")
        result.append(finding)
    return CommentRun(result, usable, used, notes, refused, unknown_of)


def unused_rules(run: CommentRun, known=(), policies=()) -> list[tuple[SuppressionComment, tuple[str, ...]]]:
    """(comment, the rules it names that silenced nothing) for each comment with such rules (ruff's
    RUF100). A rule that did not run (`--select`, a rule that is off, `--scope object`) is left
    alone, and so is `all` unless every rule that runs by default ran; a name that is no rule is
    reported on its own (`CommentRun.unknown`)."""
    known = {name for policy in known for name in (policy.id, policy.name)}
    ran = {name for policy in policies for name in (policy.id, policy.name)}
    every_rule_ran = every_default_rule_ran(policies)
    found = []
    for comment in run.comments:
        matched = run.used.get(id(comment), set())
        idle = tuple(token for token in comment.rules if token not in matched
                     and ((token in EVERY_RULE and every_rule_ran)
                          or (token not in EVERY_RULE and (token in ran or token.upper() in ran)
                              and (token in known or token.upper() in known))))
        if idle:
            found.append((comment, idle))
    return found


def every_default_rule_ran(policies) -> bool:
    """Whether the run's rules hold every built-in manifest rule on by default: only then can a
    comment naming `all` be said to silence nothing."""
    from kubelint_ports.checks import reads_of
    from kubelint_ports.policies import builtin_policies

    ran = {policy.id for policy in policies}
    return all(policy.id in ran for policy in builtin_policies()
               if policy.enabled and reads_of(policy.check) == "cluster")


def unused_notes(run: CommentRun, known=(), policies=()) -> list[str]:
    """A note for each comment that names a rule that silenced nothing in the run."""
    notes = []
    for comment, idle in unused_rules(run, known, policies):
        whole = len(idle) == len(comment.rules)
        notes.append(f"{comment.path}:{comment.line}:{comment.column}: the `{comment.kind}` comment silenced no "
                     f"{', '.join(idle)} finding; remove {'it' if whole else 'that rule from it'}")
    return notes


UNUSED_SUPPRESSION_CHECK = "unused-suppression"  # the check whose policy reports the comments (KP005)


def apply_suppression_comments(findings: Iterable[Finding], documents, known, ran, *, require_reason: bool = False
                               ) -> tuple[list[Finding], list[str]]:
    """The engine's step: findings with the comments applied, and the notes on the comments. When
    the unused-suppression rule runs, what the notes would say are its findings, at the comments
    (`comment_findings`); else the comments that cannot count keep their notes, and an unused one
    is judged by no one (as ruff says nothing of RUF100 when it is not selected)."""
    run = apply_comments(findings, documents, known, require_reason=require_reason)
    policy = next((policy for policy in ran if policy.check == UNUSED_SUPPRESSION_CHECK), None)
    if policy is None:
        return run.findings, run.notes
    return run.findings + comment_findings(run, policy, unused_rules(run, known, ran)), []


# --- the unused-suppression rule's findings, at the comments -------------------------------------

def rule_spans(line: str, start: int, end: int) -> list[tuple[str, int, int]]:
    """(rule as written, start, end) of each rule the suppression comment at `start`..`end` of `line`
    (0-based offsets, as `comment_in` gives them) names, offsets in the line."""
    at = line.find(COMMENT_MARK, start, end)
    if at < 0:
        return []
    closing = line.rfind("*/", at, end) if line[start:start + 2] == "{{" else -1
    body_start = at + len(COMMENT_MARK)
    text = line[body_start:closing if closing >= 0 else end]
    match = _VERB.match(text.lstrip())
    if not match:
        return []
    offset = body_start + len(text) - len(text.lstrip()) + match.start("rest")
    rest = match.group("rest").partition("--")[0]
    return [(token.group(), offset + token.start(), offset + token.end()) for token in re.finditer(r"[^,\s]+", rest)]


def comment_line(comment: SuppressionComment) -> str:
    """The comment's line as the file holds it now (its rules' columns for related places)."""
    from kubelint_ports.loading import budgets, files

    try:
        data = files.read_file(comment.path, budgets.current().max_file_bytes)
    except (OSError, ValueError):
        return ""
    lines = data.decode("utf-8", errors="replace").removeprefix("\ufeff").split("\n")
    return lines[comment.line - 1].rstrip("\r") if comment.line <= len(lines) else ""


def comment_findings(run: CommentRun, policy, unused: list) -> list[Finding]:
    """The unused-suppression rule's findings (ruff's RUF100): at each comment that silences
    nothing in this run, or names rules that did not (`unused`), or names no rule (`run.unknown`),
    or cannot count (`run.refused`: unreadable, no reason where the configuration requires one).
    Each names the rules at issue as related places (their columns in the comment), which its fix
    (`fixes.comments`) takes out."""
    from kubelint_ports.model.datapath.phrases import story

    idle_of = {id(comment): idle for comment, idle in unused}
    found = []
    for comment in run.comments:
        unknown = run.unknown.get(id(comment), ())
        idle = idle_of.get(id(comment), ())
        if not unknown and not idle:
            continue
        spans = rule_spans(comment_line(comment), comment.column - 1, comment.end_column - 1)
        related = tuple(Location(comment.path, comment.line, start + 1, comment.line, end + 1,
                                 message="no rule" if token in unknown else "silenced no finding")
                        for token, start, end in spans if token in unknown or token in idle)
        whole = len(set(unknown) | set(idle)) == len(set(comment.rules))
        parts = []
        if unknown:
            parts.append(f"{', '.join(unknown)}, which {'is no rule' if len(unknown) == 1 else 'are no rules'}")
        if idle:
            parts.append(f"{', '.join(idle)}, which silenced no finding" if unknown else ", ".join(idle))
        claim = (f"the `{comment.kind}` comment names {' and '.join(parts)}" if unknown
                 else f"the `{comment.kind}` comment silences no {' or '.join(idle)} finding")
        why = ("a name that is no rule silences nothing, and the finding it meant stays" if unknown and not idle
               else f"this run found no {' or '.join(idle)} finding on the "
                    f"{'object' if comment.scope == 'object' else 'line'} it covers, so it would only hide a new one "
                    f"unseen")
        remedy = (f"Remove {'the comment' if whole else ', '.join((*unknown, *idle)) + ' from it'} (`--fix`)"
                  + (", or write a name `kubelint-ports rules` lists." if unknown else "."))
        found.append(comment_finding(comment, policy, story(claim, why, remedy), related,
                                     ("unknown:" + ",".join(unknown) if unknown else "")
                                     + ("unused:" + ",".join(idle) if idle else "")))
    for comment, why in run.refused:
        if why == "no-reason":
            message = story(f"the `{comment.kind}` comment gives no reason",
                            "the configuration sets `require-reason: true`, so a suppression comment without "
                            "`-- reason` silences nothing",
                            "Say why after its rules: `-- the node agent needs it`.")
        else:
            message = story("the suppression comment cannot be read",
                            f"it {why}, so it silences nothing",
                            "Write `ignore RULES -- reason` or `ignore-object RULES -- reason`.")
        found.append(comment_finding(comment, policy, message, (), why))
    return sorted(found)


def comment_finding(comment: SuppressionComment, policy, message: str, related: tuple, case: str) -> Finding:
    """A finding at a comment. Its subject is the file (a comment may stand in a template or a
    values file, which hold no object); its identity (baselines, `--fix`'s passes) is the comment's
    words and what is wrong with them, not its line, which edits above it move. The file is named
    from the top of its own repository: the same name from any directory, so the same fingerprint."""
    import os

    from kubelint_ports.sourceroot import find_source_root, relative_to_root
    from kubelint_ports.vocabulary import ObjectRef

    name = relative_to_root(comment.path, find_source_root(start=os.path.dirname(os.path.abspath(comment.path))))
    return Finding(location=comment.location, rule_id=policy.id, rule_name=policy.name,
                   severity=policy.severity_for(""), message=message, subject=ObjectRef("", "File", "", name),
                   related=related,
                   identity_path=f"{comment.kind} {','.join(comment.rules)} -- {comment.reason} [{case}]")
