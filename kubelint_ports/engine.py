"""The pipeline: load -> model -> checks -> findings, with ids and severities stamped from policies."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubelint_ports.checks import CHECKS, Hit
from kubelint_ports.findings import Diagnostic, Finding, Location, Report
from kubelint_ports.loading import LoadResult, budgets, display_path, load
from kubelint_ports.model import Cluster, ClusterFacts, build_cluster
from kubelint_ports.policies import Policy, builtin_policies
from kubelint_ports.suppressions import annotation_reason, apply_exemptions

if TYPE_CHECKING:  # not imported at run time: plain manifests never load the Helm module
    from kubelint_ports.config import Exemption
    from kubelint_ports.loading.helm import HelmOptions


@dataclass(frozen=True, slots=True)
class LintOptions:
    facts: ClusterFacts = ClusterFacts()
    node_files: tuple[str, ...] = ()  # --nodes: the inventory (`kubectl get nodes -o yaml`)
    cluster_files: tuple[str, ...] = ()  # --cluster: what already runs
    helm: HelmOptions | None = None  # how charts render (--values, --set, ...); None: Helm's defaults
    chart_helm: tuple[tuple[str, HelmOptions], ...] = ()  # per chart (absolute path), from the config
    exclude: Callable[[str], bool] | None = None  # paths to skip (the config's `exclude` globs)
    exemptions: tuple[Exemption, ...] = ()  # accepted findings, from the config
    baseline: frozenset[str] = frozenset()  # fingerprints of findings accepted by --baseline
    limits: budgets.Limits = budgets.DEFAULT_LIMITS  # budgets against hostile input (--limit, `limits:`)


def lint_paths(paths: Sequence[str], options: LintOptions = LintOptions(), *, stdin=None,
               policies: Sequence[Policy] | None = None) -> Report:
    with collector_paused(), budgets.applied(options.limits):
        cluster, loaded, diagnostics = load_cluster(paths, options, stdin=stdin)
        policies = tuple(policies if policies is not None else builtin_policies())
        findings = run_checks(cluster, policies, diagnostics)
        if options.exemptions or options.baseline:
            findings = apply_exemptions(findings, options.exemptions, options.baseline)
    return Report(
        findings=findings,
        diagnostics=diagnostics,
        rules=policies,
        files=loaded.files,
        objects=len(loaded.documents),
        skipped=loaded.skipped,
        notes=loaded.notes,
    )


def load_cluster(paths: Sequence[str], options: LintOptions, *, stdin=None
                 ) -> tuple[Cluster, LoadResult, list[Diagnostic]]:
    """Every input read and modelled: linted manifests, running objects, the node inventory."""
    with collector_paused(), budgets.applied(options.limits):
        loaded = load(paths, stdin=stdin, helm=options.helm, chart_helm=dict(options.chart_helm),
                      exclude=options.exclude)
        live = load(options.cluster_files) if options.cluster_files else None
        inventory = load(options.node_files) if options.node_files else None
        cluster, model_diagnostics = build_cluster(
            loaded.documents, options.facts,
            live_documents=live.documents if live else (),
            node_documents=inventory.documents if inventory else None)
    diagnostics = loaded.diagnostics + model_diagnostics
    for extra in (live, inventory):
        if extra is not None:
            diagnostics += extra.diagnostics
    if inventory is not None and not cluster.nodes:
        diagnostics.append(Diagnostic(Location(display_path(options.node_files[0]), 0, 0),
                                      "the node inventory holds no Node objects (use `kubectl get nodes -o yaml`)"))
    return cluster, loaded, sorted(set(diagnostics))


@contextmanager
def collector_paused():
    """Loading builds many long-lived, acyclic node objects; the cyclic GC would rescan them all
    on every collection (measured: compose time x3 on the 1,000-workload corpus). Nothing in the
    pipeline makes reference cycles, so pausing it loses nothing; on the way out the objects move
    to the permanent generation (`gc.freeze`), so later collections skip them too (reference
    counting still frees them)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def run_checks(cluster: Cluster, policies: Iterable[Policy], diagnostics: list[Diagnostic] | None = None
               ) -> list[Finding]:
    """Findings of every policy. A check or a finding that fails unexpectedly (a bug) becomes an
    internal error in `diagnostics`, naming the rule or the input: the other rules still run."""
    findings: set[Finding] = set()
    for policy in policies:
        check = CHECKS[policy.check]
        hit = None
        try:
            for hit in check.function(cluster, policy.params):
                if not getattr(hit.subject, "live", False):  # running objects only appear as related
                    findings.add(to_finding(hit, policy))
        except Exception as error:
            if diagnostics is None:
                raise
            where = hit.subject.document.path if hit is not None else f"rule {policy.id} ({policy.name})"
            diagnostics.append(Diagnostic(Location(where, 0, 0), (
                f"internal error in rule {policy.id} ({policy.name}): {type(error).__name__}: {str(error)[:500]}"),
                internal=True))
    return sorted(findings)


def value_locations(document, field_path: str) -> tuple[Location, ...]:
    """The values-file lines that set a rendered Helm object's field (none for plain manifests;
    documents that are not `loading.Document`s, such as embedded configs, have no such method)."""
    locate = getattr(document, "value_locations", None)
    return locate(field_path) if locate is not None else ()


def to_finding(hit: Hit, policy: Policy) -> Finding:
    document = hit.subject.document
    reason = annotation_reason(document, policy.id, policy.name)
    return Finding(
        location=document.location(hit.field_path),
        rule_id=policy.id,
        rule_name=policy.name,
        severity=policy.severity_for(hit.variant),
        message=hit.message,
        subject=hit.subject.ref,
        field_path=hit.field_path,
        related=tuple(r.subject.document.location(r.field_path, r.message) for r in hit.related)
        + value_locations(document, hit.field_path),
        template=document.origin,
        port=hit.port,
        suppressed=reason,
        suppressed_by="inSource" if reason else "",
    )
