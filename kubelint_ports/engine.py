"""The pipeline: load -> model -> checks -> report, with ids and severities stamped from policies.

One pipeline for every input: `lint_paths` (lint, ports) reads manifests, `--cluster` and
`--nodes` files; `lint_snapshots` (node) reads node dumps (loading.snapshot) and models them
(model.node_context) beside the same cluster model. Reading is loading's, meaning the model's;
here they are only put in order. The report carries the port map, a view of the model and the
findings made after the checks (`portmap`), for the formatters to write."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from kubelint_ports.checks import CHECKS, Hit, reads_of
from kubelint_ports.findings import Finding, Report
from kubelint_ports.records import record
from kubelint_ports.vocabulary import Diagnostic, Location, Message
from kubelint_ports.loading import Loading, LoadResult, budgets, changed_sources, display_path, file_cache, held
from kubelint_ports.model import Cluster, ClusterFacts
from kubelint_ports.model.build import INVENTORY, LINTED, LIVE, ModelReader, assemble, custom_workload_kinds, split_by_unit
from kubelint_ports.model.units import UnitRules
from kubelint_ports.policies import Policy, builtin_policies, enabled_by_default, node_daemon_ports, rules_run
from kubelint_ports.suppressions import (annotation_reason, apply_exemptions, apply_suppression_comments,
                                        require_annotation_reasons, unknown_rule_notes)

if TYPE_CHECKING:  # not imported at run time: plain manifests never load the Helm module
    from kubelint_ports.config import Exemption
    from kubelint_ports.loading.helm.charts import HelmOptions


@record(frozen=True, slots=True)
class UnitInputs:
    """What the configuration's `units:` states of one unit's own cluster; None: the run's."""

    node_files: tuple[str, ...] | None = None  # its node inventory
    cluster_files: tuple[str, ...] | None = None  # what already runs in it
    facts: ClusterFacts | None = None  # its stated facts (kube-proxy mode, CIDRs, datapath)


@record(frozen=True, slots=True)
class LintOptions:
    facts: ClusterFacts = ClusterFacts()
    node_files: tuple[str, ...] = ()  # --nodes: the inventory (`kubectl get nodes -o yaml`)
    cluster_files: tuple[str, ...] = ()  # --cluster: what already runs
    helm: HelmOptions | None = None  # how charts render (--values, --set, ...); None: Helm's defaults
    # per chart (absolute path), from the config; a chart named once per values set is rendered
    # once per set, each its own deployment unit (loading.inputs.Loading)
    chart_helm: tuple[tuple[str, HelmOptions], ...] = ()
    exclude: Callable[[str], bool] | None = None  # paths to skip (the config's `exclude` globs)
    exemptions: tuple[Exemption, ...] = ()  # accepted findings, from the config
    baseline: frozenset[str] = frozenset()  # fingerprints of findings accepted by --baseline
    limits: budgets.Limits = budgets.DEFAULT_LIMITS  # budgets against hostile input (--limit, `limits:`)
    jobs: int = 0  # processes that read large inputs; 0: one per free processor (loading.pool), 1: this process only
    say_workers: bool = False  # -v, --statistics: a note says how many worker processes read the input, and why
    units: UnitRules = UnitRules()  # deployment units: the config's `units:` (model.units)
    unit_inputs: tuple[tuple[str, UnitInputs], ...] = ()  # per unit name: its own inventory, running objects, facts
    # (port, daemon) of every node daemon the configuration knows (`settings.node_daemons`), whether
    # or not the node-reserved-port rule runs; None: the built-in ones and the run's policies' own.
    node_daemons: tuple[tuple[int, str], ...] | None = None
    # --- hook: the file cache (loading/file_cache.py, docs/cache.md): its directory; None: off ---
    cache_dir: str | None = None
    # The configuration's `require-reason: true`: a suppression comment or an ignore annotation
    # without a reason silences nothing (the unused-suppression rule says so at the comment).
    require_reason: bool = False
    # --- hook: the language server: whether a file's findings are shown (the files open in the
    # editor), by the path its documents carry; None: every file's. The rules that read one object
    # at a time (not `cross_object`: those `--scope object` runs on a subset of files) then look
    # only at the objects of shown files; the rules that compare objects still read them all.
    shown: Callable[[str], bool] | None = None


def lint_paths(paths: Sequence[str], options: LintOptions = LintOptions(), *, stdin=None,
               policies: Sequence[Policy] | None = None) -> Report:
    # The file cache stays applied past loading: the comment scan asks it which files' bytes hold
    # a suppression comment's mark (a file its entry vouched for is not read for that either).
    with collector_paused(), budgets.applied(options.limits), file_cache.applied(options.cache_dir):
        cluster, loaded, diagnostics = load_cluster(paths, options, stdin=stdin)
        policies = tuple(policies if policies is not None else enabled_by_default(builtin_policies()))
        daemons = node_daemons_of(policies, options)
        for each in (cluster, *(unit for _, unit in cluster.units)):
            each.node_daemons = daemons
        findings = run_checks_by_unit(cluster, policies, diagnostics, options.shown)
        annotation_notes = []
        if options.require_reason:
            findings, annotation_notes = require_annotation_reasons(findings)
        findings, comment_notes = apply_suppression_comments(findings, loaded.documents, known_policies(policies),
                                                             policies, require_reason=options.require_reason)
        comment_notes = annotation_notes + comment_notes
        if options.exemptions or options.baseline:
            findings = apply_exemptions(findings, options.exemptions, options.baseline)
    changed = changed_sources(loaded.documents)
    if changed:
        diagnostics = sorted(set(diagnostics) | {Diagnostic(
            Location(path, 0, 0), "the file changed while it was linted: its findings point at each object's "
                                  "first line; lint it again") for path in changed})
    return Report(
        findings=findings,
        diagnostics=diagnostics,
        rules=policies,
        files=loaded.files,
        objects=len(loaded.documents),
        skipped=loaded.skipped,
        cluster=cluster,
        notes=loaded.notes + unknown_rule_notes(loaded.documents, known_policies(policies)) + comment_notes,
        make_port_map=make_port_map,  # the map: a view of the model and the findings, made when asked
    )


def node_daemons_of(policies: Sequence[Policy], options: LintOptions) -> dict[int, str]:
    """port -> node daemon, the one list a free port avoids (`Cluster.node_daemons`): a fact about
    the nodes, so it does not depend on which rules run (`--select KP201` keeps the kubelet's ports)."""
    if options.node_daemons is not None:
        return dict(options.node_daemons)
    by_id = {policy.id: policy for policy in builtin_policies()}
    by_id.update((policy.id, policy) for policy in policies)
    return node_daemon_ports(by_id.values())


def make_port_map(report: Report):
    """The report's port map (`portmap.make_port_map`), imported when a formatter or `ports` asks
    for it: a `lint` that writes findings never loads the port map's module."""
    from kubelint_ports.portmap import make_port_map as make

    return make(report)


def known_policies(policies: Sequence[Policy]) -> list[Policy]:
    """Every rule a name may refer to: the built-in ones (on or off) and the run's own."""
    return [*builtin_policies(), *policies]


def load_cluster(paths: Sequence[str], options: LintOptions, *, stdin=None, live: ModelReader | None = None
                 ) -> tuple[Cluster, LoadResult, list[Diagnostic]]:
    """Every input read and modelled: linted manifests, running objects, the node inventory.
    Each document's tree is read once, by a model reader, and let go. `live`: the running objects
    when the caller has read the `--cluster` files already (the node command reads them itself).
    With several deployment units, each is modelled on its own too (`Cluster.units`), with the
    inventory, running objects and facts the configuration gives it, else the run's."""
    own_inputs = dict(options.unit_inputs)
    with collector_paused(), budgets.applied(options.limits), \
            file_cache.applied(options.cache_dir) as cache, workers_for(options.jobs) as workers:  # hook: file cache
        replacing = bool(options.cluster_files) or any(own.cluster_files for own in own_inputs.values())
        linted = ModelReader(LINTED, replacing=replacing,
                             custom_kinds=custom_workload_kinds(options.facts.pod_templates))
        running_reader = ModelReader(LIVE) if options.cluster_files and live is None else None
        live = live or running_reader
        inventory = ModelReader(INVENTORY) if options.node_files else None
        # Started in this order, so a big inventory (one `kind: List` file: one worker's job) is
        # not queued behind the manifests' batches; and finished in this order, so this process
        # reads what stays in-process while the workers read the manifests.
        pending = [Loading(files, reader=reader, workers=workers) if reader is not None else None
                   for files, reader in ((options.node_files, inventory), (options.cluster_files, running_reader))]
        # A chart the configuration gives several values sets comes back rendered once per set,
        # each set its own unit (`LoadResult.value_sets`): loading expands it, not this module.
        pending.append(Loading(paths, stdin, options.helm, chart_helm=options.chart_helm, exclude=options.exclude,
                               reader=linted, workers=workers))
        nodes, running, loaded = (loading.finish() if loading is not None else None for loading in pending)
        if cache is not None:  # hook: what the file cache has to say (a directory it could not use)
            loaded.notes += cache.notes
        if options.say_workers and workers is not None and (said := workers.summary()):
            loaded.notes.append(said)  # only where workers were weighed: a large input
        cluster, model_diagnostics = assemble(linted, live, inventory, options.facts)
        rules = UnitRules(options.units.configured, tuple(linted.gitops_targets), options.units.root,
                          loaded.value_sets)
        parts = split_by_unit(linted, rules)
        if len(parts) > 1 or not own_inputs.keys().isdisjoint(parts):
            own_files = UnitFiles(workers)
            for name, part in parts.items():
                own = own_inputs.get(name, UnitInputs())
                unit_live = live if own.cluster_files is None else own_files.read(own.cluster_files, LIVE)
                unit_inventory = inventory if own.node_files is None else own_files.read(own.node_files, INVENTORY)
                unit_cluster, unit_diagnostics = assemble(part, unit_live, unit_inventory, own.facts or options.facts)
                cluster.units.append((name, unit_cluster))
                model_diagnostics += unit_diagnostics
            model_diagnostics += own_files.diagnostics
    diagnostics = loaded.diagnostics + model_diagnostics
    for extra in (running, nodes):
        if extra is not None:
            diagnostics += extra.diagnostics
    if nodes is not None and not nodes.diagnostics:  # a missing file is its own error
        diagnostics += empty_inventory(options.node_files, cluster, inventory)
    return cluster, loaded, sorted(set(diagnostics))


def empty_inventory(node_files: Sequence[str], cluster: Cluster, inventory: ModelReader | None) -> list[Diagnostic]:
    """An error when the node inventory of `cluster` holds no Node at all (a wrong kind of file)."""
    if inventory is None or cluster.nodes or not node_files:
        return []
    return [Diagnostic(Location(display_path(node_files[0]), 0, 0), NO_NODES)]


NO_NODES = "the node inventory holds no Node objects (use `kubectl get nodes -o yaml`)"


class UnitFiles:
    """The node inventories and running objects that units of `units:` name for their own
    cluster: each list of files read once, however many units name it; what reading them found
    wrong (a missing file, an inventory without a Node) in `diagnostics`."""

    def __init__(self, workers):
        self.workers = workers
        self.read_files: dict[tuple[str, tuple[str, ...]], ModelReader] = {}
        self.diagnostics: list[Diagnostic] = []

    def read(self, files: tuple[str, ...], role: str) -> ModelReader | None:
        if not files:
            return None
        key = (role, files)
        if key not in self.read_files:
            reader = ModelReader(role)
            result = Loading(files, reader=reader, workers=self.workers).finish()
            self.diagnostics += result.diagnostics
            if role == INVENTORY and not reader.nodes and not result.diagnostics:  # a missing file: its own error
                self.diagnostics.append(Diagnostic(Location(display_path(files[0]), 0, 0), NO_NODES))
            self.read_files[key] = reader
        return self.read_files[key]


def workers_for(jobs: int):
    """Worker processes for large inputs, or none (`--jobs 1`, or a single processor). They start
    only when an input is large, and by default (`jobs` 0) only on processors that are free: the
    pool (loading.pool) decides then, and `Workers.summary()` says what it did."""
    if jobs == 1:
        return nullcontext()
    from kubelint_ports.loading.pool import Workers, default_jobs

    if jobs <= 0 and default_jobs() < 2:
        return nullcontext()
    return Workers(max(jobs, 0))


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


def run_checks_by_unit(cluster: Cluster, policies: Sequence[Policy], diagnostics: list[Diagnostic],
                       shown: Callable[[str], bool] | None = None) -> list[Finding]:
    """The checks within each deployment unit (model.units), or over the one cluster. A finding
    that several units give (an object of a base two overlays build) is reported once, naming
    every unit it is in. What a policy may spend (`rules_run`) is the run's, not each unit's.
    `shown`: `LintOptions.shown`."""
    with rules_run(policies, diagnostics):
        if not cluster.units:
            return run_checks(cluster, policies, diagnostics, shown=shown)
        found: dict[Finding, list[str]] = {}
        for name, unit_cluster in cluster.units:
            for finding in run_checks(unit_cluster, policies, diagnostics, shown=shown):
                found.setdefault(finding, []).append(name)
    return sorted(replace(finding, units=tuple(sorted(set(names)))) for finding, names in found.items())


def run_checks(cluster: Cluster, policies: Iterable[Policy], diagnostics: list[Diagnostic] | None = None,
               reads: str = "cluster", shown: Callable[[str], bool] | None = None) -> list[Finding]:
    """Findings of the policies whose check reads `reads` ("cluster": manifests; "node-snapshot":
    dumps). A check or a finding that fails unexpectedly (a bug) becomes an internal error in
    `diagnostics`, naming the rule or the input: the other rules still run. `shown`: see
    `LintOptions.shown`."""
    hits = []
    narrowed = None
    for policy in policies:
        if reads_of(policy.check) != reads:
            continue  # decided without importing the check's module (a `lint` never loads node rules)
        check = CHECKS[policy.check]
        target = cluster
        if shown is not None and not check.cross_object and reads == "cluster":
            narrowed = narrowed if narrowed is not None else narrowed_to(cluster, shown)
            target = narrowed
        hit = None
        try:
            for hit in check.function(target, policy.params):
                if not getattr(hit.subject, "live", False):  # running objects only appear as related
                    hits.append((hit, policy))
        except Exception as error:
            if diagnostics is None:
                raise
            where = hit.subject.document.path if hit is not None else f"rule {policy.id} ({policy.name})"
            diagnostics.append(Diagnostic(Location(where, 0, 0), (
                f"internal error in rule {policy.id} ({policy.name}): {type(error).__name__}: {str(error)[:500]}"),
                internal=True))
    places = positions(hits)
    return sorted({to_finding(hit, policy, places) for hit, policy in hits})


def narrowed_to(cluster: Cluster, shown: Callable[[str], bool]) -> Cluster:
    """The cluster with only the workloads and Services of shown files (its facts, nodes and
    network configuration kept; its views worked out again, over these)."""
    known: dict[str, bool] = {}

    def keep(subject) -> bool:
        path = subject.document.path
        if path not in known:
            known[path] = shown(path)
        return known[path]

    return replace(cluster, workloads=[w for w in cluster.workloads if keep(w)],
                   services=[s for s in cluster.services if keep(s)], allocation=None, _node_ports=None,
                   selection=None, units=[], derived={})


class FieldPosition(NamedTuple):
    """A field that findings name, resolved once for all of them."""

    location: Location
    values: tuple[Location, ...]  # where a rendered Helm object's value is set
    identity_path: str  # the field path with list items named (fingerprints)


def positions(hits) -> dict[tuple[int, str], FieldPosition]:
    """(id of document, field path) -> its FieldPosition, for every field a finding names.
    Documents keep no trees: each is composed once, here, one at a time (`loading.held`)."""
    wanted: dict[int, tuple[object, set[str]]] = {}
    for hit, _ in hits:
        for subject, field_path in ((hit.subject, hit.field_path),
                                    *((related.subject, related.field_path) for related in hit.related)):
            document = subject.document
            wanted.setdefault(id(document), (document, set()))[1].add(field_path)
    places = {}
    for document in held(document for document, paths in wanted.values() if needs_tree(document, paths)):
        for field_path in wanted[id(document)][1]:
            places[(id(document), field_path)] = field_position(document, field_path)
    for document, paths in wanted.values():
        for field_path in paths:
            if (id(document), field_path) not in places:
                places[(id(document), field_path)] = field_position(document, field_path)
    return places


def needs_tree(document, field_paths) -> bool:
    """False when loading noted every one of these places (`Document.note`)."""
    has_noted = getattr(document, "has_noted", None)
    return not (has_noted is not None and has_noted(field_paths))


def field_position(document, field_path: str) -> FieldPosition:
    return FieldPosition(document.location(field_path), value_locations(document, field_path),
                         identity_path(document, field_path))


def lint_snapshots(snapshots: Sequence[str], paths: Sequence[str] = (), options: LintOptions = LintOptions(), *,
                   node: str | None = None, policies: Sequence[Policy] | None = None) -> Report:
    """The `node` command: snapshot directories (one per node) diagnosed with the node-snapshot
    rules; manifests in `paths`, `--cluster` and `--nodes` say which Services and pods exist."""
    with collector_paused():
        context, files, diagnostics = load_snapshots(snapshots, paths, options, node)
        policies = tuple(policies if policies is not None else builtin_policies())
        findings = run_checks(context, policies, reads="node-snapshot")
        if options.exemptions or options.baseline:
            findings = apply_exemptions(findings, options.exemptions, options.baseline)
    return Report(findings=findings, diagnostics=diagnostics,
                  rules=tuple(p for p in policies if reads_of(p.check) == "node-snapshot"),
                  files=files, objects=len(context.nodes))


def load_snapshots(snapshots: Sequence[str], paths: Sequence[str], options: LintOptions, node: str | None):
    """(NodeSnapshots, files read, diagnostics): the node command's load -> model. Every snapshot
    read (loading.snapshot) and modelled (model.node_context), with the pods the `--cluster` files
    say run, and the Services and CIDRs of the manifests and `--cluster`/`--nodes` files."""
    from kubelint_ports.loading.snapshot.node_inputs import SnapshotsRead, read_running, read_snapshots
    from kubelint_ports.model.node_context import node_snapshots, node_states, running_pods_of_document
    from kubelint_ports.model.node_state import running_pods_from_rows

    read = SnapshotsRead()
    states, diagnostics = node_states(read_snapshots(snapshots, node, read))
    diagnostics += read.diagnostics
    files = read.files
    live = ModelReader(LIVE) if options.cluster_files else None
    with budgets.applied(options.limits):
        pods, problems = read_running(options.cluster_files, live, running_pods_from_rows, running_pods_of_document)
    diagnostics += problems
    cluster = None
    if paths or live is not None or options.node_files:
        cluster, loaded, problems = load_cluster(paths, options, live=live)
        diagnostics += problems
        files += loaded.files
    shown = display_path(options.cluster_files[0]) if options.cluster_files else ""
    context, problems = node_snapshots(states, pods, cluster, options.facts, shown)
    diagnostics += problems
    return context, files, sorted(set(diagnostics))


def value_locations(document, field_path: str) -> tuple[Location, ...]:
    """The values-file lines that set a rendered Helm object's field (none for plain manifests;
    documents that are not `loading.Document`s, such as embedded configs, have no such method)."""
    locate = getattr(document, "value_locations", None)
    return locate(field_path) if locate is not None else ()


def identity_path(document, field_path: str) -> str:
    """The field path with list items named (documents without the method keep theirs)."""
    name_items = getattr(document, "identity_path", None)
    return name_items(field_path) if name_items is not None and field_path else field_path


def partners(hit: Hit, places) -> tuple[str, ...]:
    """Who else the finding is about (the Service whose nodePort a hostPort takes), by identity:
    part of the fingerprint, so a new partner is a new finding. Nodes are facts, not partners."""
    others = set()
    for related in hit.related:
        ref = getattr(related.subject, "ref", None)
        if ref is None or ref == hit.subject.ref or ref.kind == "Node":
            continue
        where = places[(id(related.subject.document), related.field_path)].identity_path
        others.add(f"{ref.kind}/{ref.namespace}/{ref.name}/{where}")
    return tuple(sorted(others))


def to_finding(hit: Hit, policy: Policy, places) -> Finding:
    document = hit.subject.document
    reason = annotation_reason(document, policy.id, policy.name)
    place = places[(id(document), hit.field_path)]
    words = hit.message if isinstance(hit.message, Message) else Message.from_story(hit.message)
    return Finding(
        location=place.location,
        rule_id=policy.id,
        rule_name=policy.name,
        severity=policy.severity_for(hit.variant),
        message=words.full,
        words=words,
        subject=hit.subject.ref,
        field_path=hit.field_path,
        related=tuple(replace(places[(id(r.subject.document), r.field_path)].location, message=r.message)
                      for r in hit.related) + place.values,
        template=document.origin,
        port=hit.port,
        suppressed=reason,
        suppressed_by="inSource" if reason else "",
        identity_path=place.identity_path,
        partners=partners(hit, places),
        traffic=hit.traffic,
        nodes=hit.nodes,
    )
