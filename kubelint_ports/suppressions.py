"""Accepted findings: annotations in manifests, exemptions in the config, and a baseline file.

A suppressed finding is kept with its reason (JSON `suppressed`, SARIF `suppressions`) and hidden
from text output; it never affects the exit code.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from kubelint_ports.findings import FINGERPRINT_VERSION, Finding

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
    return values.get(REASON_ANNOTATION, "").strip() or f"{IGNORE_ANNOTATION} annotation"


def unknown_rule_notes(documents, policies) -> list[str]:
    """ruff warns about a `# noqa` code it does not know: a typo in an ignore annotation would
    otherwise suppress nothing without a word."""
    known = {name for policy in policies for name in (policy.id, policy.name)} | EVERY_RULE
    notes = []
    for document in documents:
        listed = annotations(document).get(IGNORE_ANNOTATION, "")
        unknown = [token.strip() for token in listed.split(",")
                   if token.strip() and token.strip() not in known and token.strip().upper() not in known]
        if unknown:
            where = annotation_location(document)
            names = ", ".join(repr(token) for token in unknown)
            notes.append(f"{where.path}:{where.line}:{where.column}: {IGNORE_ANNOTATION} names {names}, which "
                         f"{'is no rule' if len(unknown) == 1 else 'are no rules'} (see `kubelint-ports rules`)")
    return notes


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
    Path(path).write_text(json.dumps({"version": BASELINE_VERSION, "tool": "kubelint-ports", "findings": unique},
                                     indent=2, sort_keys=True) + "\n", encoding="utf-8")
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
