"""Per-node host port allocation: which pods need which host port on which nodes, and whether
the scheduler can place them all.

Claims are indexed by (protocol, port); only the pods inside one index entry are ever compared.
With a node inventory, feasibility is a max-flow problem (replica slots -> eligible nodes, one
pod per node and host port); without one, only what the manifests prove is used: pods pinned to
the same node, and DaemonSets with no node constraint, which run on every node.

Nothing here is pairwise. A port with one claimant (most of them) needs no comparison at all:
its pending pods are its replicas minus its eligible nodes. Claimants of one port are grouped by
shared nodes in one pass over their node lists, and max flow runs only where two or more meet.
Eligible nodes are computed once per distinct set of scheduling constraints, and only among the
nodes an index of names and labels leaves possible (`NodeIndex`); the exact placement test
(`placement.eligible`) still decides every node.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import field

from kubelint_ports.model import placement
from kubelint_ports.model.objects import WILDCARD_HOST_IP, Cluster, HostClaim, Workload
from kubelint_ports.records import record

ANY_NODE = "*"  # without an inventory: a pod that may run anywhere


@record(frozen=True, slots=True)
class Claimant:
    workload: Workload
    claim: HostClaim


@record(slots=True)
class Conflict:
    """Claimants of one host port that cannot all be placed; `pending` pods stay Pending."""

    protocol: str
    port: int
    host_ip: str
    claimants: list[Claimant]
    nodes: list[str]  # the contested nodes (pinned names without an inventory)
    pending: int
    demand: int  # pods that need the port on these nodes
    provable_without_inventory: bool = False


class NodeIndex:
    """The inventory by name and by label, to narrow the nodes a scheduling constraint may select
    before the exact test: a pinned pod looks at one node, a selected one at its label's nodes."""

    def __init__(self, nodes: list[placement.Node]):
        self.nodes = nodes
        self.by_name: dict[str, list[int]] = {}
        self.by_label: dict[tuple[str, str], list[int]] = {}
        for position, node in enumerate(nodes):
            self.by_name.setdefault(node.name, []).append(position)
            for label in node.labels.items():
                self.by_label.setdefault(label, []).append(position)

    def candidates(self, scheduling: placement.Scheduling) -> list[placement.Node]:
        """A superset of the nodes `scheduling` may select, in inventory order."""
        possible: set[int] | None = None
        if scheduling.node_name:
            possible = set(self.by_name.get(scheduling.node_name, ()))
        for label in scheduling.node_selector.items():
            possible = self._narrow(possible, self.by_label.get(label, ()))
        if scheduling.required_terms is not None:
            # A node must match one term; a term narrows only through its `In` requirements.
            union: set[int] = set()
            for term in scheduling.required_terms:
                term_nodes = self.term_candidates(term)
                if term_nodes is None:
                    union = None
                    break
                union |= term_nodes
            if union is not None:
                possible = self._narrow(possible, union)
        if possible is None:
            return self.nodes
        return [self.nodes[position] for position in sorted(possible)]

    def term_candidates(self, term: placement.NodeSelectorTerm) -> set[int] | None:
        """Nodes a term may match (None: it does not narrow them)."""
        possible: set[int] | None = None
        for requirement in term.match_expressions:
            if requirement.operator == "In":
                found = [p for value in requirement.values for p in self.by_label.get((requirement.key, value), ())]
                possible = self._narrow(possible, found)
        for requirement in term.match_fields:
            if requirement.key == placement.NAME_FIELD and requirement.operator == "In" and \
                    len(requirement.values) == 1:
                possible = self._narrow(possible, self.by_name.get(requirement.values[0], ()))
        return possible

    @staticmethod
    def _narrow(possible: set[int] | None, found) -> set[int]:
        return set(found) if possible is None else possible.intersection(found)


@record(slots=True)
class Allocation:
    cluster: Cluster
    groups: dict[tuple[str, int], list[Claimant]] = field(default_factory=dict)
    _eligible: dict[int, tuple[str, ...]] = field(default_factory=dict)
    _by_constraints: dict[tuple, tuple[str, ...]] = field(default_factory=dict)
    _index: NodeIndex | None = None

    def eligible(self, workload: Workload) -> tuple[str, ...]:
        """Names of the nodes the workload's pods can run on; needs an inventory."""
        key = id(workload)
        if key not in self._eligible:
            nodes = self.cluster.nodes or []
            if workload.live and workload.scheduling.node_name:
                names = tuple(n.name for n in nodes if n.name == workload.scheduling.node_name)
            else:
                # Workloads share constraints (a pool's nodeSelector, none at all): one answer each.
                constraints = (workload.scheduling, workload.is_daemonset)
                if self._index is None:
                    self._index, self._by_constraints = inventory_answers(nodes)
                names = self._by_constraints.get(constraints)
                if names is None:
                    names = tuple(n.name for n in placement.eligible_nodes(
                        workload.scheduling, self._index.candidates(workload.scheduling),
                        daemonset=workload.is_daemonset))
                    self._by_constraints[constraints] = names
            self._eligible[key] = names
        return self._eligible[key]

    def may_share_node(self, a: Workload, b: Workload) -> bool:
        if self.cluster.nodes is not None:
            return not set(self.eligible(a)).isdisjoint(self.eligible(b))
        return placement.may_share_node(a.scheduling, b.scheduling)

    def shared_nodes(self, a: Workload, b: Workload) -> list[str]:
        if self.cluster.nodes is None:
            return []
        names = set(self.eligible(b))
        return [name for name in self.eligible(a) if name in names]


# The last inventory's index and answers (constraints -> eligible node names), with its Node
# objects kept alive so that their identities stay theirs. A long-lived process (the language
# server) models the same inventory run after run, its Node objects handed on unchanged: the
# answers, worked out over 500 nodes per set of constraints (0.02 s a run on the 10k corpus),
# still hold, since Node and Scheduling are frozen and an answer depends on nothing else.
_last_inventory: list = [(), None, {}]


def inventory_answers(nodes: list[placement.Node]) -> tuple[NodeIndex, dict[tuple, tuple[str, ...]]]:
    """The index of `nodes` and the answers known for them: the last inventory's when these are
    its Node objects, in its order; else new ones, kept as the last."""
    kept, index, answers = _last_inventory
    if index is None or len(kept) != len(nodes) or any(a is not b for a, b in zip(kept, nodes)):
        kept, index, answers = tuple(nodes), NodeIndex(nodes), {}
        _last_inventory[:] = [kept, index, answers]
    return index, answers


def allocate(cluster: Cluster) -> Allocation:
    """The cluster's allocation, built once and shared by every rule that needs it."""
    if cluster.allocation is None:
        allocation = Allocation(cluster)
        for workload, claim in cluster.host_claims():
            allocation.groups.setdefault((claim.protocol, claim.port), []).append(Claimant(workload, claim))
        cluster.allocation = allocation
    return cluster.allocation


def cliques(claimants: list[Claimant]) -> Iterator[tuple[str, list[Claimant]]]:
    """Sets of claimants that all overlap: one per specific hostIP (with the 0.0.0.0 claims), or
    the wildcard claims alone. Each workload appears once per set."""
    by_ip: dict[str, list[Claimant]] = defaultdict(list)
    for claimant in claimants:
        by_ip[claimant.claim.host_ip].append(claimant)
    wildcard = by_ip.pop(WILDCARD_HOST_IP, [])
    if not by_ip:
        yield WILDCARD_HOST_IP, unique_workloads(wildcard)
    for host_ip in sorted(by_ip):
        yield host_ip, unique_workloads(by_ip[host_ip] + wildcard)


def unique_workloads(claimants: list[Claimant]) -> list[Claimant]:
    seen: set[int] = set()
    unique = []
    for claimant in claimants:
        if id(claimant.workload) not in seen:
            seen.add(id(claimant.workload))
            unique.append(claimant)
    return unique


def pods_wanted(workload: Workload) -> int:
    return 1 if workload.replicas is None else workload.replicas


def conflicts(allocation: Allocation) -> Iterator[Conflict]:
    cluster = allocation.cluster
    for (protocol, port), claimants in sorted(allocation.groups.items(), key=lambda item: item[0]):
        if len(claimants) == 1 and (claimants[0].workload.replicas or 0) <= 1:
            continue  # one pod, or one DaemonSet: nothing to compete with
        for host_ip, clique in cliques(claimants):
            if cluster.nodes is None:
                yield from conflicts_without_inventory(protocol, port, host_ip, clique)
            else:
                yield from conflicts_on_nodes(allocation, protocol, port, host_ip, clique)


def unconstrained_daemonset(workload: Workload) -> bool:
    scheduling = workload.scheduling
    return (workload.is_daemonset and not scheduling.node_name and not placement.constraining(scheduling.node_selector)
            and placement.runs_on_every_ordinary_node(scheduling))


def covers(daemonset: Workload, other: Workload) -> bool:
    """Without an inventory: the DaemonSet provably runs on every node `other` may use.

    True when the DaemonSet is limited only by a nodeSelector that `other`'s nodeSelector repeats
    (or is stricter than; labels nearly every node has do not count: placement.UBIQUITOUS_LABELS)
    and by node affinity that only excludes labelled nodes `other` does not ask for, and either
    `other` is a DaemonSet too or it tolerates no taint the DaemonSet does not (so no tainted
    node is open to `other` alone).

    A toleration never keeps a pod off a node: two such DaemonSets both run on every untainted
    node `other` selects, whatever else either tolerates (issue 34). Only another workload's
    replicas can go elsewhere, to tainted nodes that it alone tolerates."""
    ds, scheduling = daemonset.scheduling, other.scheduling
    if not daemonset.is_daemonset or ds.node_name or not placement.runs_on_every_ordinary_node(ds, scheduling):
        return False
    if any(scheduling.node_selector.get(key) != value for key, value in placement.constraining(ds.node_selector).items()):
        return False
    if not placement.may_share_node(ds, scheduling):
        return False  # a ubiquitous label (kubernetes.io/os: linux) that `other` asks to differ
    if other.is_daemonset and not scheduling.node_name:
        return True
    return placement.tolerations_within(scheduling.tolerations, ds.tolerations + placement.DAEMONSET_TOLERATIONS)


def conflicts_without_inventory(protocol: str, port: int, host_ip: str, clique: list[Claimant]) -> Iterator[Conflict]:
    covered: dict[int, list[Claimant]] = {}  # claimant index -> the DaemonSets that cover it
    for index, claimant in enumerate(clique):
        daemonsets = [d for d in clique if d is not claimant and covers(d.workload, claimant.workload)]
        if daemonsets:
            covered[index] = daemonsets
    if covered:
        involved = unique_workloads([c for i in sorted(covered) for c in (clique[i], *covered[i])])
        # Counted per node: each DaemonSet wants one pod there, each covered workload all of its
        # pods, and only one of them can hold the port.
        demand = sum(1 if c.workload.is_daemonset else pods_wanted(c.workload) for c in involved)
        pending = demand - 1
        yield Conflict(protocol, port, host_ip, involved, [ANY_NODE], pending, demand, True)
        return
    pinned: dict[str, list[Claimant]] = defaultdict(list)
    for claimant in clique:
        node = placement.pinned_node(claimant.workload.scheduling)
        if node:
            pinned[node].append(claimant)
    for node, on_node in sorted(pinned.items()):
        demand = sum(pods_wanted(c.workload) for c in on_node)
        if demand > 1:
            yield Conflict(protocol, port, host_ip, on_node, [node], demand - 1, demand, True)


def conflicts_on_nodes(allocation: Allocation, protocol: str, port: int, host_ip: str,
                       clique: list[Claimant]) -> Iterator[Conflict]:
    """Max flow per connected group of claimants: DaemonSet and running pods are fixed to their
    nodes; other workloads' replicas go to any eligible node left free."""
    for component in connected(allocation, clique):
        if len(component) == 1:
            yield from lone_claimant(allocation, protocol, port, host_ip, component)
            continue
        fixed_count: dict[str, int] = defaultdict(int)
        flexible: list[Claimant] = []
        for claimant in component:
            workload = claimant.workload
            if workload.is_daemonset or workload.live:
                for name in allocation.eligible(workload):
                    fixed_count[name] += 1
            elif pods_wanted(workload) > 0 and allocation.eligible(workload):
                # A workload with no eligible node is Pending whatever its ports: not counted here.
                flexible.append(claimant)
        fixed_pending = sum(count - 1 for count in fixed_count.values() if count > 1)
        demand = sum(fixed_count.values()) + sum(pods_wanted(c.workload) for c in flexible)
        placed = max_placement(allocation, flexible, set(fixed_count))
        pending = fixed_pending + sum(pods_wanted(c.workload) for c in flexible) - placed
        if pending > 0:
            yield Conflict(protocol, port, host_ip, component, contested_nodes(allocation, component), pending, demand)


def lone_claimant(allocation: Allocation, protocol: str, port: int, host_ip: str,
                  component: list[Claimant]) -> Iterator[Conflict]:
    """One workload alone on its port: its replicas beyond its eligible nodes stay Pending (a
    DaemonSet or a running pod holds one pod per node, which always fits)."""
    workload = component[0].workload
    if workload.is_daemonset or workload.live:
        return
    wanted = pods_wanted(workload)
    nodes = allocation.eligible(workload)
    if nodes and wanted > len(nodes):
        yield Conflict(protocol, port, host_ip, component, sorted(nodes), wanted - len(nodes), wanted)


def contested_nodes(allocation: Allocation, component: list[Claimant]) -> list[str]:
    """Nodes more than one claimant may use (for a lone workload, all of its nodes)."""
    counts: dict[str, int] = defaultdict(int)
    for claimant in component:
        for name in allocation.eligible(claimant.workload):
            counts[name] += 1
    if len(component) == 1:
        return sorted(counts)
    return sorted(name for name, count in counts.items() if count > 1) or sorted(counts)


def connected(allocation: Allocation, clique: list[Claimant]) -> list[list[Claimant]]:
    """Claimants grouped by shared eligible nodes: one pass over their node lists, each node
    joining its claimants to the first claimant that listed it (union-find over claimants)."""
    if len(clique) == 1:
        return [clique] if pods_wanted(clique[0].workload) > 1 else []
    parent = list(range(len(clique)))

    def find(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    first_claimant: dict[str, int] = {}
    for index, claimant in enumerate(clique):
        for name in allocation.eligible(claimant.workload):
            other = first_claimant.setdefault(name, index)
            if other != index:
                root, other_root = find(index), find(other)
                if root != other_root:
                    parent[root] = other_root
    groups: dict[int, list[Claimant]] = defaultdict(list)
    for index, claimant in enumerate(clique):
        groups[find(index)].append(claimant)
    return [group for group in groups.values() if len(group) > 1 or pods_wanted(group[0].workload) > 1]


SMALL_ASSIGNMENT = 20_000  # edges (workload, free node): below, augmenting paths here beat importing networkx


def max_placement(allocation: Allocation, flexible: list[Claimant], taken: set[str]) -> int:
    """How many of the flexible workloads' pods fit, one per free eligible node."""
    free = [[name for name in allocation.eligible(c.workload) if name not in taken] for c in flexible]
    wanted = [pods_wanted(c.workload) for c in flexible]
    if len(flexible) <= 1:
        return min(wanted[0], len(free[0])) if flexible else 0
    union = set().union(*free)
    if all(w <= len(f) for w, f in zip(wanted, free)) and sum(wanted) <= len(union) and \
            all(set(f) == union for f in free):
        return sum(wanted)  # everyone may use every free node: enough nodes is enough
    if sum(len(f) for f in free) <= SMALL_ASSIGNMENT:
        return augmenting_placement(wanted, free)
    import networkx  # heavy (60 ms to import): loaded only for a large assignment problem

    graph = networkx.DiGraph()
    for index, (names, count) in enumerate(zip(free, wanted)):
        graph.add_edge("source", ("workload", index), capacity=count)
        for name in names:
            graph.add_edge(("workload", index), ("node", name), capacity=1)
    for name in union:
        graph.add_edge(("node", name), "sink", capacity=1)
    if "sink" not in graph:
        return 0
    return int(networkx.maximum_flow_value(graph, "source", "sink"))


def augmenting_placement(wanted: list[int], free: list[list[str]]) -> int:
    """The same maximum as the flow, by augmenting paths (Kuhn's algorithm, one pod at a time):
    a pod takes a free node, or a node whose holder can move to another of its nodes, and so on.
    A workload one of whose pods finds no such path places no more (none appears later)."""
    holder: dict[str, int] = {}  # node -> the workload whose pod holds it
    placed = 0
    for workload, count in enumerate(wanted):
        for _ in range(count):
            reached_from: dict[str, int] = {}  # node -> the workload that would take it
            moved_off: dict[int, str] = {}  # workload -> the node it would give up
            queue, end = [workload], None
            for current in queue:
                for name in free[current]:
                    if name in reached_from:
                        continue
                    reached_from[name] = current
                    other = holder.get(name)
                    if other is None:
                        end = name
                        break
                    if other != workload and other not in moved_off:
                        moved_off[other] = name
                        queue.append(other)
                if end is not None:
                    break
            if end is None:
                break
            name = end
            while True:  # shift each holder along the path; the first workload gains one node
                taker = reached_from[name]
                holder[name] = taker
                if taker == workload:
                    break
                name = moved_off[taker]
            placed += 1
    return placed
