"""Which ports are free: the nodePorts no Service of the inputs claims, and each node's host ports
no pod, hostNetwork process or node daemon holds, outside the ephemeral range. A fact about the
cluster, so it lives in the model, and in one place: `ports --free` prints it, the HTML page shows
it (`portmap.free_view`), `lint --unsafe-fixes` moves a colliding port to it (`fixes.rules`), and
the collision rules' messages name it (`free_node_port`, `free_host_port_for`); all must agree.

Free ports are worked out as runs (first, last) from the taken ports, never by walking the 64,000
ports of each node: nodes whose pods are the same share one answer, so 500 nodes cost about as
much as the handful of node pools they form.

"Free" means free as far as the inputs say: objects not given (no `--cluster`) cannot be seen.
Everything here is deterministic: lowest port first, or nearest first with ties to the lower."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Iterable, Iterator, Mapping

from kubelint_ports.model.objects import Cluster, Workload
from kubelint_ports.records import record

MAX_PORT = 65535
# A host port is only suggested from the registered range up: below 1024 a container needs
# CAP_NET_BIND_SERVICE, and a well-known port is rarely what the user wants moved to.
FIRST_SUGGESTED_HOST_PORT = 1024

Runs = tuple[tuple[int, int], ...]  # (first, last) runs of free ports, lowest first


# --- runs ------------------------------------------------------------------------------------------------

def free_runs(taken: Iterable[int], ranges: Iterable[tuple[int, int]] = (), first: int = FIRST_SUGGESTED_HOST_PORT,
              last: int = MAX_PORT) -> Runs:
    """The runs of ports from `first` to `last` that are neither `taken` nor in one of `ranges`."""
    runs: list[tuple[int, int]] = []
    start = first
    blocked = sorted((low, high) for low, high in ranges if low <= high)  # a few; the taken ports stay numbers
    ports = sorted(taken)
    at = 0  # the next range of `blocked`
    for port in ports:
        while at < len(blocked) and blocked[at][0] <= port:
            low, high = blocked[at]
            if low > start:
                runs.append((start, min(low - 1, last)))
            start = max(start, high + 1)
            at += 1
        if port > start:
            runs.append((start, min(port - 1, last)))
        if port >= start:
            start = port + 1
        if start > last:
            break
    for low, high in blocked[at:]:
        if start > last:
            break
        if low > start:
            runs.append((start, min(low - 1, last)))
        start = max(start, high + 1)
    if start <= last:
        runs.append((start, last))
    return tuple(run for run in runs if run[0] <= run[1])


def run_ports(runs: Iterable[tuple[int, int]]) -> Iterator[int]:
    """The ports of `runs`, lowest first."""
    for first, last in runs:
        yield from range(first, last + 1)


def run_count(runs: Iterable[tuple[int, int]]) -> int:
    return sum(last - first + 1 for first, last in runs)


def nearest_in_runs(runs: Runs, near: int, count: int) -> list[int]:
    """`nearest(run_ports(runs), near, count)` without listing every port: the `count` nearest are
    among the `count` highest ports up to `near` and the `count` lowest above it."""
    below: list[int] = []
    above: list[int] = []
    split = bisect_right(runs, (near, MAX_PORT + 1))  # runs[:split] start at or below `near`
    for first, last in reversed(runs[:split]):
        for port in range(min(last, near), first - 1, -1):
            if len(below) == count:
                break
            below.append(port)
        if len(below) == count:
            break
    if split and runs[split - 1][1] > near:  # the run holding `near` goes on above it
        above.extend(range(near + 1, min(runs[split - 1][1], near + count) + 1))
    for first, last in runs[split:]:
        if len(above) >= count:
            break
        above.extend(range(first, min(last, first + count - len(above) - 1) + 1))
    return nearest(below + above[:count], near, count)


def nearest(ports: Iterable[int], near: int, count: int) -> list[int]:
    """The `count` ports closest to `near`, nearest first, the lower one first on a tie."""
    return sorted(ports, key=lambda port: (abs(port - near), port))[:count]


def free_ranges(ports: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted ports -> (first, last) runs, for a short listing."""
    runs: list[tuple[int, int]] = []
    for port in ports:
        if runs and runs[-1][1] == port - 1:
            runs[-1] = (runs[-1][0], port)
        else:
            runs.append((port, port))
    return runs


# --- nodePorts -------------------------------------------------------------------------------------------

def node_port_holders(cluster: Cluster) -> dict[int, list[str]]:
    """nodePort number -> who claims it: Services (linted and running), and pods holding the same
    number as a host port (kube-proxy's rule and theirs would collide, KP201/KP202)."""
    holders: dict[int, list[str]] = {}
    for number, claims in cluster.node_ports_by_number().items():
        holders.setdefault(number, []).extend(sorted({str(service.ref) for service, _ in claims}))
    for workload, claim, _ in cluster.held_ports():
        if cluster.in_node_port_range(claim.port):
            holders.setdefault(claim.port, []).append(f"{workload.ref} ({claim.via})")
    return holders


def node_ports_held(cluster: Cluster) -> frozenset[int]:
    """The numbers `node_port_holders` names, worked out once per cluster: the fixes ask for each
    nodePort they move (100 moves on the 50k corpus walked 490,000 claims)."""
    if "node_ports_held" not in cluster.derived:
        cluster.derived["node_ports_held"] = frozenset(cluster.node_ports_by_number()) | frozenset(
            claim.port for _, claim, _ in cluster.held_ports() if cluster.in_node_port_range(claim.port))
    return cluster.derived["node_ports_held"]


def free_node_port_runs(cluster: Cluster, reserved: Iterable[int] = (), taken: Iterable[int] = ()) -> Runs:
    """The node-port range's free runs: claimed by no Service and held by no pod of the inputs, not
    a node daemon's (`reserved`) and not in `taken` (ports already handed out)."""
    low, high = cluster.node_port_range
    return free_runs({*node_ports_held(cluster), *reserved, *taken}, (), low, high)


def free_node_ports(cluster: Cluster, reserved: Iterable[int] = (), taken: Collection[int] = ()) -> Iterator[int]:
    """The node-port range's free ports (`free_node_port_runs`), lowest first."""
    return run_ports(free_node_port_runs(cluster, reserved, taken))


def free_node_port(cluster: Cluster, reserved: Iterable[int] = ()) -> int | None:
    """The lowest free nodePort of the range: where `lint --unsafe-fixes` moves a colliding or
    out-of-range nodePort (the first it moves; each next one takes the next free port)."""
    return next(free_node_ports(cluster, reserved), None)


# --- host ports ----------------------------------------------------------------------------------------

def node_names(cluster: Cluster) -> list[str]:
    """The inventory's nodes by name, or [""] (every node alike) when there is none."""
    if not cluster.nodes:
        return [""]
    return sorted(node.name for node in cluster.nodes)


def host_port_holders_by_node(cluster: Cluster, reserved: Mapping[int, str],
                              nodes: Iterable[str] | None = None) -> dict[str, Mapping[int, tuple[str, ...]]]:
    """Node -> {port: who holds it there}, for `nodes` (default: every node of `node_names`; ""
    means any node, every pod counted): pods that may run there with a hostPort or hostNetwork
    port, every nodePort (kube-proxy opens them on every node) and node daemons (`reserved`, from
    the node-reserved-port policy). Nodes the same pods may run on share one mapping."""
    names = node_names(cluster) if nodes is None else list(nodes)
    allocation = None
    if cluster.nodes is not None and names != [""]:
        from kubelint_ports.model.allocation import allocate

        allocation = allocate(cluster)
    everywhere: dict[int, set[str]] = {}
    for number, claims in cluster.node_ports_by_number().items():
        everywhere.setdefault(number, set()).update(f"{service.ref} (nodePort)" for service, _ in claims)
    for port, daemon in reserved.items():
        everywhere.setdefault(port, set()).add(f"{daemon} (node daemon)")
    pods: list[tuple[int, str]] = []  # (port, holder) of each pod's claim
    pods_on: dict[str, list[int]] = {name: [] for name in names}  # node -> indexes into `pods`
    for workload, claim, _ in cluster.held_ports():
        pods.append((claim.port, f"{workload.ref} ({claim.via})"))
        for name in names if allocation is None else allocation.eligible(workload):
            if name in pods_on:
                pods_on[name].append(len(pods) - 1)
    shared: dict[tuple[int, ...], Mapping[int, tuple[str, ...]]] = {}
    holders_by_node = {}
    for name in names:
        key = tuple(pods_on[name]) if name else tuple(range(len(pods)))  # "": any node, every pod
        if key not in shared:
            held = {port: set(holders) for port, holders in everywhere.items()}
            for index in key:
                port, holder = pods[index]
                held.setdefault(port, set()).add(holder)
            shared[key] = {port: tuple(sorted(held[port])) for port in sorted(held)}
        holders_by_node[name] = shared[key]
    return holders_by_node


def host_port_holders(cluster: Cluster, node: str, reserved: Mapping[int, str]) -> Mapping[int, tuple[str, ...]]:
    """port -> who holds it on `node` ("": on any node), as `host_port_holders_by_node` says."""
    return host_port_holders_by_node(cluster, reserved, [node])[node]


def blocked_host_ranges(cluster: Cluster) -> tuple[tuple[int, int], ...]:
    """What no pod should take as a host port: the node-port range (kube-proxy's) and the ephemeral
    range (the kernel hands those to outgoing connections)."""
    return cluster.node_port_range, cluster.ephemeral_port_range


def free_host_port_runs(cluster: Cluster, held: Iterable[int]) -> Runs:
    """Host ports a pod may take: from 1024 up, not held, outside `blocked_host_ranges`."""
    return free_runs(held, blocked_host_ranges(cluster))


def free_host_ports(cluster: Cluster, held: Iterable[int]) -> Iterator[int]:
    """The ports of `free_host_port_runs`, lowest first."""
    return run_ports(free_host_port_runs(cluster, held))


def nearest_free_host_port(cluster: Cluster, held: Iterable[int], near: int) -> int | None:
    """The free host port nearest `near` (the lower on a tie): what `ports --free --near` lists
    first, `nearest_in_runs(free_host_port_runs(cluster, held), near, 1)`. Searched outward from
    `near`, stepping over the blocked ranges, instead of working out every free run: the collision
    rules ask it once per finding (400 findings against 3,500 held ports took 2 s as runs)."""
    taken = held if isinstance(held, (set, frozenset, dict)) else set(held)
    blocked = [(low, high) for low, high in blocked_host_ranges(cluster) if low <= high]

    def first_free(port: int, step: int) -> int | None:
        while FIRST_SUGGESTED_HOST_PORT <= port <= MAX_PORT:
            inside = next(((low, high) for low, high in blocked if low <= port <= high), None)
            if inside is not None:
                port = inside[0] - 1 if step < 0 else inside[1] + 1
            elif port in taken:
                port += step
            else:
                return port
        return None

    found = [port for port in (first_free(min(near, MAX_PORT), -1), first_free(max(near + 1, FIRST_SUGGESTED_HOST_PORT), 1))
             if port is not None]
    return min(found, key=lambda port: (abs(port - near), port)) if found else None


def workload_nodes(cluster: Cluster, workload: Workload) -> list[str]:
    """The nodes the workload's pods may run on, sorted; [""] without an inventory (any node)."""
    if not cluster.nodes:
        return [""]
    from kubelint_ports.model.allocation import allocate

    return sorted(allocate(cluster).eligible(workload))


@record(frozen=True, slots=True)
class HeldHostPorts:
    """The host ports held on the nodes (the ports of `host_port_holders_by_node`, without naming
    the holders): `everywhere` on every node (nodePorts, node daemons), and `groups`, the pods'
    ports by the nodes they may run on (workloads with the same scheduling constraints share one
    group). Kept so, not node by node: with 10,000 workloads on 500 nodes a set per node held
    half a million ports."""

    everywhere: frozenset[int]
    groups: tuple[tuple[frozenset[str], frozenset[int]], ...]

    def on(self, nodes: Iterable[str]) -> set[int]:
        """The ports held on any of `nodes` ("": any node, without an inventory)."""
        wanted = set(nodes)
        held = set(self.everywhere)
        for group_nodes, ports in self.groups:
            if not group_nodes.isdisjoint(wanted):
                held |= ports
        return held


def held_host_ports(cluster: Cluster, reserved: Mapping[int, str]) -> HeldHostPorts:
    """`HeldHostPorts` of the cluster, worked out once per cluster and reserved ports: several
    checks and the fixes ask for it."""
    key = ("held_host_ports", frozenset(reserved))
    if key not in cluster.derived:
        cluster.derived[key] = _held_host_ports(cluster, reserved)
    return cluster.derived[key]


def _held_host_ports(cluster: Cluster, reserved: Mapping[int, str]) -> HeldHostPorts:
    names = node_names(cluster)
    allocation = None
    if cluster.nodes is not None and names != [""]:
        from kubelint_ports.model.allocation import allocate

        allocation = allocate(cluster)
    every = tuple(names)
    # The allocation hands workloads with the same constraints the same tuple of names: group by it.
    groups: dict[int, tuple[tuple[str, ...], set[int]]] = {}
    for workload, claim, _ in cluster.held_ports():
        nodes = every if allocation is None else allocation.eligible(workload)
        groups.setdefault(id(nodes), (nodes, set()))[1].add(claim.port)
    return HeldHostPorts(frozenset(cluster.node_ports_by_number()) | frozenset(reserved),
                         tuple((frozenset(nodes), frozenset(ports)) for nodes, ports in groups.values()))


def free_host_port_for(cluster: Cluster, workload: Workload, near: int, held: HeldHostPorts) -> int | None:
    """The host port nearest `near` that is free on every node the workload may run on (what
    `lint --unsafe-fixes` moves a colliding hostPort to); None when it may run on no node.
    `held`: `held_host_ports`, worked out once per run."""
    nodes = workload_nodes(cluster, workload)
    if not nodes:
        return None
    return nearest_free_host_port(cluster, held.on(nodes), near)


# --- `ports --free` ----------------------------------------------------------------------------------------

@record(frozen=True, slots=True)
class FreeScope:
    """The free ports of one scope: the node-port range (`node` is None), or one node's host ports
    ("": every node alike, no inventory)."""

    node: str | None
    free: Runs
    count: int
    held: Mapping[int, tuple[str, ...]]  # the taken ports of the scope and who holds them
    suggested: tuple[int, ...] = ()  # nearest to `near`, when asked


@record(frozen=True, slots=True)
class FreePorts:
    node_port_range: tuple[int, int]
    ephemeral_port_range: tuple[int, int]
    scopes: tuple[FreeScope, ...]
    near: int | None = None


@record(frozen=True, slots=True)
class FreeRuns:
    """One cluster's free ports as runs, worked out once (`free_runs_of`): the one answer that
    `ports --free` prints (`free_ports`) and the page shows (`portmap.free_view`)."""

    node_ports: Runs  # the node-port range's free runs
    node_port_count: int
    host_ports: tuple[tuple[str, Runs, int], ...]  # (node, its free host port runs, their count), by node name


def free_runs_of(cluster: Cluster, reserved: Mapping[int, str]) -> FreeRuns:
    """The cluster's `FreeRuns` with these node daemons' ports taken, worked out once per cluster
    and reserved ports: whoever asks first (`ports --free`, the page), the other reads the same."""
    key = ("free_runs", frozenset(reserved))
    if key not in cluster.derived:
        node_ports = free_node_port_runs(cluster, reserved)
        counts: dict[int, int] = {}  # nodes alike share their runs (`free_host_port_runs_by_node`): counted once
        cluster.derived[key] = FreeRuns(node_ports, run_count(node_ports), tuple(
            (node, runs, counts.get(id(runs)) or counts.setdefault(id(runs), run_count(runs)))
            for node, runs in free_host_port_runs_by_node(cluster, reserved).items()))
    return cluster.derived[key]


def suggestions(runs: Runs, near: int | None, count: int) -> tuple[int, ...]:
    """The `count` free ports of `runs` nearest `near` (none without `near`)."""
    return tuple(nearest_in_runs(runs, near, count)) if near is not None else ()


def free_ports(cluster: Cluster, reserved: Mapping[int, str], near: int | None = None, count: int = 5) -> FreePorts:
    """`ports --free`: the nodePorts no Service or pod of the inputs claims, then each node's host
    ports no pod that may run there, no nodePort and no node daemon holds, outside the ephemeral
    and node-port ranges; with `near`, the `count` free ones closest to it. The runs are
    `free_runs_of`'s, the page's; this adds who holds the taken ports."""
    scopes = [node_port_scope(cluster, reserved, near, count)]
    held_by_node = host_port_holders_by_node(cluster, reserved)
    for node, runs, free_count in free_runs_of(cluster, reserved).host_ports:
        scopes.append(FreeScope(node, runs, free_count, held_by_node[node], suggestions(runs, near, count)))
    return FreePorts(cluster.node_port_range, cluster.ephemeral_port_range, tuple(scopes), near)


def free_ports_by_unit(cluster: Cluster, reserved: Mapping[int, str], near: int | None = None,
                       count: int = 5) -> tuple[tuple[str, FreePorts], ...]:
    """`free_ports` per deployment unit, each from its own cluster (its objects, nodes and port
    ranges: another cluster's ports are never taken here), as (unit name, answer); a run of one
    unnamed unit gives ("", the run's answer). `ports --free` asks the port map's module
    (`portmap.free_ports_of`), which takes each unit's own node daemons as the map does."""
    units = cluster.units or [("", cluster)]
    return tuple((name, free_ports(unit, reserved, near, count)) for name, unit in units)


def node_port_scope(cluster: Cluster, reserved: Mapping[int, str], near: int | None = None,
                    count: int = 5) -> FreeScope:
    """The node-port range's free runs (`free_runs_of`) and who holds its taken ports (`free_ports`'
    first scope)."""
    low, high = cluster.node_port_range
    holders = {port: tuple(names) for port, names in sorted(node_port_holders(cluster).items()) if low <= port <= high}
    runs = free_runs_of(cluster, reserved)
    return FreeScope(None, runs.node_ports, runs.node_port_count, holders, suggestions(runs.node_ports, near, count))


def free_host_port_runs_by_node(cluster: Cluster, reserved: Mapping[int, str]) -> dict[str, Runs]:
    """Node -> its free host ports, as `free_ports` counts them, without naming who holds the
    taken ones (what the page shows): from `held_host_ports`, so that nodes in the same groups
    share one answer and no node gets a table of holders (500 nodes x 700 ports measured 35 MiB)."""
    held = held_host_ports(cluster, reserved)
    runs_of: dict[tuple[int, ...], Runs] = {}
    by_node: dict[str, Runs] = {}
    same_run: dict[tuple[int, int], tuple[int, int]] = {}  # nodes differ in a few runs: one tuple per run
    groups_of: dict[str, list[int]] = {}
    for index, (nodes, _) in enumerate(held.groups):
        for node in nodes:
            groups_of.setdefault(node, []).append(index)
    for name in node_names(cluster):
        key = tuple(groups_of.get(name, ()))
        if key not in runs_of:
            ports = set(held.everywhere)
            for index in key:
                ports |= held.groups[index][1]
            runs_of[key] = tuple(same_run.setdefault(run, run) for run in free_host_port_runs(cluster, ports))
        by_node[name] = runs_of[key]
    return by_node
