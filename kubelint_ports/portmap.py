"""The port map: per node, each host port, who holds it, and what the rules found there.

A view of one lint run, never a second computation. Which nodes a claim sits on comes from the
shared allocation (the nodes each workload may use, exactly as the rules see them); every mark
comes from a finding of the same run, placed on the claim the finding points at (and on the
running objects and listeners it names as related) on the nodes the rule names (`Finding.nodes`).
So the map cannot call something a conflict that `lint` does not report.

The engine makes it after the checks, for the report (`Report.port_map`); formatters only write
it (`formatters.port_map_writer`, `formatters.html`). What a finding makes of the port it lands on is its
policy's `port-map` (conflict, capture, reserved), data like the rest of the rule.

Beside the grid, the map carries what the HTML page shows around it, worked out here so the page
only writes it: each node's labels and taints, the free ports, and what the map was made from
(`inputs`, and the commit of the repository they are in, read when first asked). The free ports
are one view with two faces: each unit's runs are worked out once (`model.free_ports.free_runs_of`)
and both the page (`PortMap.free_view`) and `ports --free` (`free_ports_of`, `PortMap.free_ports`)
read them, from the same unit models and the same node daemons.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubelint_ports.findings import Finding, Report
from kubelint_ports.loading import held
from kubelint_ports.model import Cluster, Workload
from kubelint_ports.model.allocation import allocate, unconstrained_daemonset
from kubelint_ports.model.free_ports import FreePorts, free_ports, free_runs_of, node_port_scope
from kubelint_ports.model.objects import WILDCARD_HOST_IP
from kubelint_ports.model.placement import pinned_node
from kubelint_ports.model.port_holders import datapath_of, is_the_daemon, node_destination, reserved_ports
from kubelint_ports.model.selection import has_endpoints
from kubelint_ports.sourceroot import checked_out_object, git_work_tree
from kubelint_ports.vocabulary import NOT_FILES, Location, ObjectRef

ANY_NODE = "(any node)"  # without an inventory: a pod that may run on any node
EVERY_NODE = "(every node)"  # nodePorts: kube-proxy opens them on every node
RUNS, MAY_RUN = "runs", "may run"

# A finding's state on its port: its policy's `port-map` (policies/*.yaml). Findings of the other
# rules (a plain hostPort warning, a range warning) are listed on the port but leave its state.
CONFLICT, CAPTURE, RESERVED = "conflict", "capture", "reserved"
# Strongest first: a port both in conflict and captured shows as a conflict.
STATES = (CONFLICT, CAPTURE, RESERVED, RUNS, MAY_RUN)
KIND_ORDER = {"hostPort": 0, "hostNetwork": 1, "sidecarHostPort": 2, "nodePort": 3, "healthCheckNodePort": 4,
              "node daemon": 5}


@dataclass(frozen=True, slots=True)
class Mark:
    """A finding on a holder; `nodes` None: on every node the holder is on."""

    finding: Finding
    state: str  # conflict | capture | reserved | "" (listed only)
    nodes: frozenset[str] | None = None

    def applies_on(self, node: str) -> bool:
        return self.nodes is None or node in self.nodes


@dataclass(slots=True)
class Holder:
    """Something that takes a host port on a set of nodes: a pod's hostPort, a hostNetwork pod's
    port (declared, or a listener it does not declare), a Service's nodePort, a node daemon."""

    port: int
    protocol: str
    host_ip: str
    kind: str  # hostPort | hostNetwork | nodePort | healthCheckNodePort | node daemon
    owner: str  # ns/Kind/name, or the daemon's name
    namespace: str
    pods: str  # "2 pods", "one pod per eligible node"; "" for Services and daemons
    placement: str  # RUNS (DaemonSet, running or pinned pod, nodePort, daemon) or MAY_RUN
    nodes: tuple[str, ...]
    location: Location | None  # the key the user edits; None for a node daemon
    note: str = ""  # "running", "undeclared: --web.listen-address", "node-reserved-port list"
    subject: ObjectRef | None = None
    field_path: str = ""
    origin: Any = field(default=None, repr=False)  # the Workload or Service it comes from
    index: int = -1  # its place in the map's sorted holders
    marks: list[Mark] = field(default_factory=list)

    def marks_on(self, node: str) -> list[Mark]:
        return [mark for mark in self.marks if mark.applies_on(node)]

    def state_on(self, node: str) -> str:
        """The strongest standing mark's state on this node, else RUNS or MAY_RUN."""
        states = {mark.state for mark in self.marks_on(node) if mark.state and not mark.finding.suppressed}
        return next((state for state in STATES[:3] if state in states), self.placement)

    def sort_key(self) -> tuple:
        return (self.port, self.protocol, KIND_ORDER.get(self.kind, 9), self.owner,
                self.location or Location("", 0, 0), self.note)


@dataclass(frozen=True, slots=True)
class Receiver:
    """Who receives a packet that a pod or another machine sends to this port of the node, as the
    datapath model answers it."""

    winner: str  # the owner that gets it, "nobody", ...; "depends" when unknown facts decide
    role: str  # the model's receiver: hostport, service, host-process, rejected, nothing, undefined, depends
    certain: bool
    text: str  # the model's sentence: winner and loser, or what each outcome depends on


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """What the inventory says about a node that decides where pods go: its labels and taints."""

    labels: tuple[tuple[str, str], ...]  # sorted by key
    taints: tuple[str, ...]  # as kubectl writes them: key=value:Effect, key:Effect
    unschedulable: bool = False  # cordoned


@dataclass(frozen=True, slots=True)
class FreeHostPorts:
    """One node's free host ports: from 1024 up, outside the node-port and ephemeral ranges."""

    node: str  # "" without an inventory: every node alike
    free: tuple[tuple[int, int], ...]  # runs (first, last), lowest first
    count: int


@dataclass(frozen=True, slots=True)
class FreeView:
    """`ports --free` for the page: the node-port range's occupancy and each node's free host ports."""

    node_port_range: tuple[int, int]
    ephemeral_port_range: tuple[int, int]
    node_ports_free: tuple[tuple[int, int], ...]  # runs
    node_ports_free_count: int
    node_ports_taken: tuple[tuple[int, tuple[str, ...]], ...]  # (nodePort, who holds it), in the range
    host_ports: tuple[FreeHostPorts, ...]


@dataclass(slots=True)
class PortMap:
    nodes: list[str]  # inventory nodes (or pinned names and ANY_NODE), then EVERY_NODE
    holders: list[Holder]
    findings: list[Finding]  # every finding of the run, in the report's order
    with_inventory: bool
    # Findings of the conflict/capture/reserved rules that found no holder on the map: always
    # empty unless the map and the rules disagree (tests assert it).
    unplaced: list[Finding] = field(default_factory=list)
    # (protocol, port, indices of the holders there) -> who receives the packet. Nodes holding
    # the same port the same way share one answer; nodePorts count on every node.
    receivers: dict[tuple[str, int, tuple[int, ...]], Receiver] = field(default_factory=dict)
    # The facts the answers rest on, each with its source: {name: {"value", "source"}}.
    datapath_facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    node_info: dict[str, NodeInfo] = field(default_factory=dict)  # inventory nodes: labels, taints
    # The files the map's objects, findings and input errors come from: (role, path), role one of
    # INPUT_ROLES; set by `make_port_map` from the report.
    inputs: tuple[tuple[str, str], ...] = ()
    # The commit of the one git checkout holding `inputs`, "" when there is none; None until
    # `source_commit` reads it (a git process: only the page asks).
    commit: str | None = None
    cluster: Cluster | None = field(default=None, repr=False)  # the model the map views
    reserved: dict[int, str] = field(default_factory=dict)  # node daemons' ports, as `ports --free` counts them
    free: FreeView | None = field(default=None, repr=False)  # made by `free_view` when first asked
    unit: str = ""  # the deployment unit the map is of ("": the run's one unnamed unit)
    # Several units: the map of each (`unit_maps`), this one showing them side by side.
    units: list["PortMap"] = field(default_factory=list)

    def by_node(self) -> dict[str, list[Holder]]:
        """Node -> its holders, sorted by port; every node of `nodes`, empty ones too."""
        table: dict[str, list[Holder]] = {node: [] for node in self.nodes}
        for holder in self.holders:
            for node in holder.nodes:
                table[node].append(holder)
        return table

    def ports_by_node(self) -> Iterator[tuple[str, dict[tuple[str, int], list[Holder]]]]:
        """Each node with its (protocol, port) -> the holders there, in port order: made one node at
        a time (500 nodes x 700 ports held at once measured 60 MiB)."""
        for node, holders in self.by_node().items():
            ports: dict[tuple[str, int], list[Holder]] = {}
            for holder in holders:
                ports.setdefault((holder.protocol, holder.port), []).append(holder)
            yield node, ports

    def receiver_at(self, protocol: str, port: int, holders: list[Holder]) -> Receiver | None:
        return self.receivers.get(receiver_key(protocol, port, holders))

    def free_view(self) -> FreeView | None:
        """The free nodePorts and host ports of the map's model (None: a map without one)."""
        if self.free is None and self.cluster is not None:
            self.free = free_view(self.cluster, self.reserved)
        return self.free

    def free_ports(self, near: int | None = None, count: int = 5) -> FreePorts | None:
        """`ports --free`'s answer for the map's model: the runs `free_view` shows, with who holds
        the taken ports (and, with `near`, the `count` free ones nearest it). None: no model."""
        if self.cluster is None:
            return None
        return free_ports(self.cluster, self.reserved, near, count)

    def source_commit(self) -> str:
        """The commit the inputs are at ("" outside a git checkout), read once."""
        if self.commit is None:
            self.commit = repository_commit(path for _, path in self.inputs)
        return self.commit


def receiver_key(protocol: str, port: int, holders: list[Holder]) -> tuple[str, int, tuple[int, ...]]:
    return protocol, port, tuple(sorted(holder.index for holder in holders))


def port_map_of(report: Report) -> PortMap:
    """The report's map: the one the engine made (`Report.port_map`), else made now."""
    return report.port_map if report.port_map is not None else make_port_map(report)


def make_port_map(report: Report) -> PortMap:
    """The map of a lint run: its model, its findings, the policies that ran. The engine hands
    this to the report (`Report.make_port_map`); a report without a model has an empty map."""
    if report.cluster is None:
        port_map = empty_port_map(report.findings)
    elif report.cluster.units:
        port_map = unit_maps(report.cluster.units, report.findings, report.rules)
    else:
        port_map = build_port_map(report.cluster, report.findings, report.rules)
    port_map.inputs = inputs_of(report)
    return port_map


def unit_maps(units: Sequence[tuple[str, Cluster]], findings: Sequence[Finding], policies: Iterable) -> PortMap:
    """Each deployment unit's map, from its own cluster and the findings found in it; several are
    shown side by side (`units`) in one map whose nodes are named with their unit (`[prod] a`),
    so no unit's port is ever beside another's. Its facts: those every unit shares."""
    policies = tuple(policies)
    maps = []
    for name, cluster in units:
        maps.append(build_port_map(cluster, [f for f in findings if name in f.units], policies))
        maps[-1].unit = name
    if len(maps) == 1:
        return maps[0]
    shown = PortMap([], [], list(findings), any(m.with_inventory for m in maps), units=maps, reserved=maps[0].reserved,
                    datapath_facts={name: fact for name, fact in maps[0].datapath_facts.items()
                                    if all(m.datapath_facts.get(name) == fact for m in maps)})
    for unit_map in maps:
        named = {node: unit_node_name(unit_map.unit, node) for node in unit_map.nodes}
        offset = len(shown.holders)
        shown.nodes += named.values()
        shown.holders += [replace(h, nodes=tuple(named[n] for n in h.nodes), index=offset + h.index, marks=[
            replace(m, nodes=None if m.nodes is None else frozenset(named[n] for n in m.nodes)) for m in h.marks])
            for h in unit_map.holders]
        shown.receivers.update({(protocol, port, tuple(offset + i for i in indices)): answer
                                for (protocol, port, indices), answer in unit_map.receivers.items()})
        shown.node_info.update({named[node]: info for node, info in unit_map.node_info.items()})
        shown.unplaced += unit_map.unplaced
    return shown


def unit_node_name(unit: str, node: str) -> str:
    """A node of one of several units, as a map of them names it: `[prod] node-a`; `[prod] ` with
    "" (every node of a unit without an inventory, in its free host ports)."""
    return f"[{unit}] {node}"


def empty_port_map(findings: Sequence[Finding] = ()) -> PortMap:
    """The map of a run without manifests (the node command's): no node, no holder."""
    return PortMap([], [], list(findings), False)


def build_port_map(cluster: Cluster, findings: Sequence[Finding] = (), policies: Iterable = ()) -> PortMap:
    policies = tuple(policies)  # read twice: node daemons, then each rule's state
    allocation = allocate(cluster)
    holders: list[Holder] = []
    where = claim_locations([
        *((workload, claim.field_path) for workload, claim in cluster.host_claims()),
        *((workload, silent.field_path) for workload in cluster.workloads for silent in workload.silent_ports),
        *((service, claim.field_path) for service in cluster.services if service.has_node_ports
          for claim in service.node_port_claims)])
    for workload, claim in cluster.host_claims():
        nodes, placement = placements(allocation, workload)
        if nodes:
            holders.append(Holder(
                claim.port, claim.protocol, claim.host_ip, claim.via, str(workload.ref), workload.ref.namespace,
                workload.pods, placement, nodes, where[(id(workload.document), claim.field_path)],
                "running" if workload.live else "", workload.ref, claim.field_path, workload))
    for workload in cluster.workloads:
        if workload.silent_ports:
            nodes, placement = placements(allocation, workload)
            for silent in workload.silent_ports if nodes else ():
                holders.append(Holder(
                    silent.port, "TCP", silent.address or WILDCARD_HOST_IP, "hostNetwork", str(workload.ref),
                    workload.ref.namespace, workload.pods, placement, nodes,
                    where[(id(workload.document), silent.field_path)], f"undeclared: {silent.source}", workload.ref,
                    silent.field_path, workload))
    holders += daemon_holders(cluster, holders, policies)
    for service in cluster.services:
        if service.has_node_ports:
            for claim in service.node_port_claims:
                holders.append(Holder(
                    claim.port, claim.protocol, WILDCARD_HOST_IP, claim.label, str(service.ref),
                    service.ref.namespace, "", RUNS, (EVERY_NODE,), where[(id(service.document), claim.field_path)],
                    "running" if service.live else "", service.ref, claim.field_path, service))
    holders.sort(key=Holder.sort_key)
    for index, holder in enumerate(holders):
        holder.index = index
    port_map = PortMap(node_order(cluster, holders), holders, list(findings), cluster.nodes is not None,
                       node_info={node.name: node_info(node) for node in cluster.nodes or ()}, cluster=cluster,
                       reserved=cluster.node_daemons)
    place_findings(port_map, {policy.id: policy.port_map for policy in policies})
    answer_receivers(port_map, cluster)
    return port_map


def placements(allocation, workload: Workload) -> tuple[tuple[str, ...], str]:
    """The nodes a workload's pods hold their ports on, as the rules see them, and whether they
    run there (DaemonSet, running or pinned pod) or may run there."""
    fixed = workload.is_daemonset or workload.live
    if allocation.cluster.nodes is not None:
        return allocation.eligible(workload), RUNS if fixed or workload.scheduling.node_name else MAY_RUN
    pinned = pinned_node(workload.scheduling)
    if pinned:
        return (pinned,), RUNS
    return (ANY_NODE,), RUNS if unconstrained_daemonset(workload) else MAY_RUN


def daemon_holders(cluster: Cluster, holders: list[Holder], policies: Iterable) -> list[Holder]:
    """Node daemons (the lists of the rules whose ports are reserved: node-reserved-port) on the
    ports pods claim beside them."""
    reserved: dict[tuple[str, int], str] = {}
    for policy in policies:
        if policy.port_map == RESERVED:
            reserved.update(reserved_ports(policy.params))
    if not reserved:
        return []
    claims = {(str(w.ref), c.field_path): (w, c) for w, c in cluster.host_claims()}
    nodes_of: dict[tuple[str, str, int], set[str]] = defaultdict(set)
    present: dict[tuple[str, str, int], set[str]] = defaultdict(set)  # nodes where the daemon's own pod is
    for holder in holders:
        daemon = reserved.get((holder.protocol, holder.port))
        if not daemon:
            continue
        key = (daemon, holder.protocol, holder.port)
        claim = claims.get((holder.owner, holder.field_path))
        # An undeclared listener (no claim) is the daemon when its pod is named after it.
        own = is_the_daemon(*claim, daemon) if claim else daemon.lower() in holder.owner.lower()
        if own:
            present[key].update(holder.nodes)
        elif claim:
            nodes_of[key].update(holder.nodes)
    daemons = []
    for (daemon, protocol, port), nodes in nodes_of.items():
        nodes -= present[(daemon, protocol, port)]
        if nodes:
            daemons.append(Holder(port, protocol, WILDCARD_HOST_IP, "node daemon", daemon, "", "", RUNS,
                                  tuple(sorted(nodes)), None, "node-reserved-port list"))
    return daemons


def claim_locations(claims) -> dict[tuple[int, str], Location]:
    """Where each (owner, field path) is, each document composed once (`loading.held`)."""
    wanted: dict[int, tuple[object, set[str]]] = {}
    for owner, field_path in claims:
        wanted.setdefault(id(owner.document), (owner.document, set()))[1].add(field_path)
    return {(id(document), path): document.location(path)
            for document in held(document for document, _ in wanted.values()) for path in wanted[id(document)][1]}


def node_order(cluster: Cluster, holders: list[Holder]) -> list[str]:
    if cluster.nodes is not None:
        names = sorted(node.name for node in cluster.nodes)
    else:
        names = sorted({node for holder in holders for node in holder.nodes} - {ANY_NODE, EVERY_NODE})
        if any(ANY_NODE in holder.nodes for holder in holders):
            names.append(ANY_NODE)
    if any(holder.nodes == (EVERY_NODE,) for holder in holders):
        names.append(EVERY_NODE)
    return names


def place_findings(port_map: PortMap, state_of: dict[str, str]) -> None:
    """Each finding lands on the holder it points at, on the nodes its rule names; a conflict or
    capture also lands on the holders it names as related that have no finding of their own (a
    running pod, an undeclared listener, the nodePort that loses its traffic)."""
    by_subject: dict[tuple, list[Holder]] = defaultdict(list)
    by_location: dict[tuple, list[Holder]] = defaultdict(list)
    for holder in port_map.holders:
        if holder.location is not None:
            by_subject[(holder.subject, holder.field_path, holder.location.path)].append(holder)
            by_location[(holder.location.path, holder.location.line, holder.location.column)].append(holder)
    own_rules: dict[int, set[str]] = defaultdict(set)
    marked: list[tuple[Finding, str]] = []
    for finding in port_map.findings:
        state = state_of.get(finding.rule_id, "")
        targets = [h for h in by_subject.get((finding.subject, finding.field_path, finding.location.path), ())
                   if finding.port in (None, h.port)]
        placed = False
        for holder in targets:
            if mark(holder, finding, state):
                own_rules[id(holder)].add(finding.rule_id)
                placed = True
        if state:
            marked.append((finding, state))
            if not placed:
                port_map.unplaced.append(finding)
    for finding, state in marked:
        if state == RESERVED:
            continue
        for related in finding.related:
            for holder in by_location.get((related.path, related.line, related.column), ()):
                if holder.port == finding.port and finding.rule_id not in own_rules[id(holder)]:
                    mark(holder, finding, state)


def mark(holder: Holder, finding: Finding, state: str) -> bool:
    """Mark the holder on the finding's nodes it is on; False when it is on none of them."""
    if not finding.nodes or holder.nodes == (EVERY_NODE,):
        holder.marks.append(Mark(finding, state))
        return True
    nodes = frozenset(finding.nodes).intersection(holder.nodes)
    if nodes:
        holder.marks.append(Mark(finding, state, nodes))
    return bool(nodes)


def answer_receivers(port_map: PortMap, cluster: Cluster) -> None:
    """Ask the datapath model, once per way of holding a port, who receives its packets."""
    datapath = datapath_of(cluster)
    port_map.datapath_facts = datapath.facts.shown()
    node_ports: dict[tuple[str, int], list[Holder]] = defaultdict(list)
    for holder in port_map.holders:
        # A healthCheckNodePort is kube-proxy's own listening socket, not a DNAT: a process (receiver()).
        if holder.nodes == (EVERY_NODE,) and holder.kind != "healthCheckNodePort":
            node_ports[(holder.protocol, holder.port)].append(holder)
    endpoints: dict[int, bool | None] = {}
    by_port: dict[tuple[str, int], list[Holder]] = {}
    for holder in port_map.holders:
        by_port.setdefault((holder.protocol, holder.port), []).append(holder)
    for (protocol, port), holders in by_port.items():
        for together in held_together(holders):
            key = receiver_key(protocol, port, together)
            if key not in port_map.receivers:
                services = node_ports.get((protocol, port), [])
                port_map.receivers[key] = receiver(datapath, cluster, protocol, port, together, services, endpoints)


def held_together(holders: list[Holder]) -> list[list[Holder]]:
    """The different sets of these holders (of one port) that some node has all of, each in the
    holders' order: what a node's cell shows. Found per port, not node by node (2,500 nodes x
    3,500 ports would be 9 million cells)."""
    if len(holders) == 1:
        return [holders] if holders[0].nodes else []
    on_node: dict[str, list[Holder]] = {}
    for holder in holders:
        for node in holder.nodes:
            on_node.setdefault(node, []).append(holder)
    return list({tuple(h.index for h in group): group for group in on_node.values()}.values())


def receiver(datapath, cluster: Cluster, protocol: str, port: int, holders: list[Holder], services: list[Holder],
             endpoints: dict[int, bool | None]) -> Receiver:
    """Who gets a packet from a pod or another machine to the node's address (the hostIP, for a
    hostPort bound to one), with everything that holds the port there."""
    from kubelint_ports.model.datapath import FROM_POD, HOST_PROCESS, HOSTPORT, SERVICE, PortUse, summary, who

    host_ports = [h for h in holders if h.kind == "hostPort"]
    processes = [h for h in holders if h.kind in ("hostNetwork", "node daemon", "healthCheckNodePort")]
    for service in services:
        if id(service.origin) not in endpoints:
            endpoints[id(service.origin)] = has_endpoints(cluster, service.origin)
    known = {endpoints[id(service.origin)] for service in services}
    host_ip = WILDCARD_HOST_IP if not host_ports or any(h.host_ip == WILDCARD_HOST_IP for h in host_ports) \
        else host_ports[0].host_ip
    use = PortUse(host_port_ip=host_ip if host_ports else None, host_process=bool(processes),
                  node_port=bool(services), endpoints=known.pop() if len(known) == 1 else None)
    parties = {role: " or ".join(dict.fromkeys(h.owner for h in group))
               for role, group in ((HOSTPORT, host_ports), (SERVICE, services), (HOST_PROCESS, processes)) if group}
    answer = datapath.deliver(FROM_POD, node_destination(host_ip), use, port, protocol)
    winner = who(answer.receiver, parties) if answer.certain else "depends"
    return Receiver(winner, answer.receiver, answer.certain, summary(answer, parties))


# --- what the HTML page shows beside the grid ------------------------------------------------------

def node_info(node) -> NodeInfo:
    taints = tuple(f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in node.taints)
    return NodeInfo(tuple(sorted(node.labels.items())), taints, bool(node.unschedulable))


def reserved_for_free_ports(policies: Iterable) -> dict[int, str]:
    """port -> node daemon: what `ports --free` and the page keep off the free list."""
    from kubelint_ports.policies import node_daemon_ports

    return node_daemon_ports(policies)


def free_view(cluster: Cluster, reserved: dict[int, str]) -> FreeView:
    """`ports --free`'s answer (`model.free_ports.free_runs_of`, the runs it prints), shaped for
    the page: the node-port range's taken ports name the node daemons there too."""
    runs = free_runs_of(cluster, reserved)
    low, high = cluster.node_port_range
    taken = {port: set(holders) for port, holders in node_port_scope(cluster, reserved).held.items()}
    for port, daemon in reserved.items():
        if low <= port <= high:
            taken.setdefault(port, set()).add(f"{daemon} (node daemon)")
    return FreeView(cluster.node_port_range, cluster.ephemeral_port_range, runs.node_ports, runs.node_port_count,
                    tuple((port, tuple(sorted(taken[port]))) for port in sorted(taken)),
                    tuple(FreeHostPorts(node, free, count) for node, free, count in runs.host_ports))


def free_ports_of(report: Report, near: int | None = None, count: int = 5) -> tuple[tuple[str, FreePorts], ...]:
    """`ports --free`: (unit, its answer) for each model the report's map views (`map_units`), each
    with its own node daemons, as the map's `PortMap.free_ports` answers; the runs are the page's
    (`free_view`), worked out once. The grid is not made for it: the free ports do not need it."""
    return tuple((name, free_ports(cluster, cluster.node_daemons, near, count))
                 for name, cluster in map_units(report.cluster))


def map_units(cluster: Cluster | None) -> list[tuple[str, Cluster]]:
    """The models a report's map views (`make_port_map`): each deployment unit's, named, else the
    run's one cluster, unnamed; none without a model."""
    if cluster is None:
        return []
    return list(cluster.units) or [("", cluster)]


# Where an input came from, in the order the page lists them.
LINTED, RUNNING, INVENTORY = "linted", "running (--cluster)", "inventory (--nodes)"
INPUT_ROLES = (LINTED, RUNNING, INVENTORY)


def inputs_of(report: Report) -> tuple[tuple[str, str], ...]:
    """(role, path) of each file the report's objects, findings and input errors come from, by
    role, then path. Files only: standard input and the command line are no place to look up."""
    found: set[tuple[str, str]] = set()
    cluster = report.cluster
    for model in ((cluster, *(unit for _, unit in cluster.units)) if cluster is not None else ()):
        for thing in (*model.workloads, *model.services):
            found.add((RUNNING if thing.live else LINTED, thing.document.path))
        found.update((INVENTORY, document.path) for document in model.node_documents.values())
    found.update((LINTED, finding.location.path) for finding in report.findings)
    found.update((LINTED, diagnostic.location.path) for diagnostic in report.diagnostics)
    found = {(role, path) for role, path in found if path and path not in NOT_FILES}
    # A file read as an inventory or running objects that also holds a finding is listed once.
    named = {path for role, path in found if role != LINTED}
    return tuple(sorted(((role, path) for role, path in found if role != LINTED or path not in named),
                        key=lambda entry: (INPUT_ROLES.index(entry[0]), entry[1])))


COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256 object names


def repository_commit(paths: Iterable[str]) -> str:
    """The commit checked out in the one git work tree holding every path ("" when they are in
    none, in several, or its HEAD names no commit): read from `HEAD`, the branch's ref or
    `packed-refs` of that tree's own repository (`sourceroot.checked_out_object`). No git runs:
    it would run the repository's configuration (`core.fsmonitor`) and, in a partial clone whose
    HEAD commit is absent, fetch it. A detached HEAD (a pull request checked out by CI) gives its
    id; git's environment variables (a hook's GIT_DIR) play no part."""
    directories = {os.path.dirname(os.path.realpath(path)) for path in paths if path not in NOT_FILES}
    tops = {git_work_tree(directory) for directory in directories}  # per directory: 35,000 files share 5,000
    if len(tops) != 1 or None in tops:
        return ""
    commit = checked_out_object(tops.pop())
    return commit if COMMIT.fullmatch(commit) else ""
