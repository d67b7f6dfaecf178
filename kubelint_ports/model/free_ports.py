"""Which ports are free: the nodePorts no Service of the inputs claims, and each node's host ports
no pod, hostNetwork process or node daemon holds, outside the ephemeral range. A fact about the
cluster, so it lives in the model: `ports --free` shows it and `lint --unsafe-fixes` moves a
colliding nodePort to the lowest one, and both must agree.

"Free" means free as far as the inputs say: objects not given (no `--cluster`) cannot be seen.
Everything here is deterministic: lowest port first, or nearest first with ties to the lower."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from kubelint_ports.model.objects import Cluster

MAX_PORT = 65535
# A host port is only suggested from the registered range up: below 1024 a container needs
# CAP_NET_BIND_SERVICE, and a well-known port is rarely what the user wants moved to.
FIRST_SUGGESTED_HOST_PORT = 1024


@dataclass(frozen=True, slots=True)
class NodeFree:
    """One node's host ports (TCP) as the inputs say: who holds which, and the ranges no pod should take."""

    node: str  # "" when there is no inventory: every node alike
    held: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # port -> holders ("ns/Kind/name", daemons)


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


def free_node_ports(cluster: Cluster, reserved: Iterable[int] = (), taken: Collection[int] = ()) -> Iterator[int]:
    """The node-port range's free ports, lowest first: claimed by no Service and held by no pod of
    the inputs, not a node daemon's (`reserved`) and not in `taken` (ports already handed out)."""
    low, high = cluster.node_port_range
    used = set(node_port_holders(cluster)) | set(reserved) | set(taken)
    return (port for port in range(low, high + 1) if port not in used)


def host_port_holders(cluster: Cluster, node: str, reserved: Mapping[int, str]) -> dict[int, list[str]]:
    """port -> who holds it on `node` ("" : on any node, when there is no inventory): pods that may
    run there with a hostPort or hostNetwork port, every nodePort (kube-proxy opens them on every
    node), and node daemons (`reserved`, from the node-reserved-port policy)."""
    holders: dict[int, list[str]] = {}
    allocation = None
    if node and cluster.nodes is not None:
        from kubelint_ports.model.allocation import allocate

        allocation = allocate(cluster)
    for workload, claim, _ in cluster.held_ports():
        if allocation is not None and node not in allocation.eligible(workload):
            continue
        holders.setdefault(claim.port, []).append(f"{workload.ref} ({claim.via})")
    for number, claims in cluster.node_ports_by_number().items():
        holders.setdefault(number, []).extend(sorted({f"{service.ref} (nodePort)" for service, _ in claims}))
    for port, daemon in reserved.items():
        holders.setdefault(port, []).append(f"{daemon} (node daemon)")
    return {port: sorted(set(names)) for port, names in holders.items()}


def free_host_ports(cluster: Cluster, held: Collection[int]) -> Iterator[int]:
    """Host ports a pod may take: from 1024 up, not held, not in the node-port range (kube-proxy's)
    nor the ephemeral range (the kernel hands those to outgoing connections), lowest first."""
    node_low, node_high = cluster.node_port_range
    eph_low, eph_high = cluster.ephemeral_port_range
    for port in range(FIRST_SUGGESTED_HOST_PORT, MAX_PORT + 1):
        if port in held or node_low <= port <= node_high or eph_low <= port <= eph_high:
            continue
        yield port


def nearest(ports: Iterable[int], near: int, count: int) -> list[int]:
    """The `count` ports closest to `near`, nearest first, the lower one first on a tie."""
    return sorted(ports, key=lambda port: (abs(port - near), port))[:count]


def node_names(cluster: Cluster) -> list[str]:
    """The inventory's nodes by name, or [""] (every node alike) when there is none."""
    if not cluster.nodes:
        return [""]
    return sorted(node.name for node in cluster.nodes)


def free_ranges(ports: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted ports -> (first, last) runs, for a short listing."""
    runs: list[tuple[int, int]] = []
    for port in ports:
        if runs and runs[-1][1] == port - 1:
            runs[-1] = (runs[-1][0], port)
        else:
            runs.append((port, port))
    return runs


@dataclass(frozen=True, slots=True)
class FreeScope:
    """The free ports of one scope: the node-port range (`node` is None), or one node's host ports
    ("": every node alike, no inventory)."""

    node: str | None
    free: tuple[tuple[int, int], ...]  # runs of free ports
    count: int
    held: Mapping[int, tuple[str, ...]]  # the taken ports of the scope and who holds them
    suggested: tuple[int, ...] = ()  # nearest to `near`, when asked


@dataclass(frozen=True, slots=True)
class FreePorts:
    node_port_range: tuple[int, int]
    ephemeral_port_range: tuple[int, int]
    scopes: tuple[FreeScope, ...]
    near: int | None = None


def free_ports(cluster: Cluster, reserved: Mapping[int, str], near: int | None = None, count: int = 5) -> FreePorts:
    """`ports --free`: the nodePorts no Service or pod of the inputs claims, then each node's host
    ports no pod that may run there, no nodePort and no node daemon holds, outside the ephemeral
    and node-port ranges; with `near`, the `count` free ones closest to it."""
    scopes = []
    low, high = cluster.node_port_range
    holders = {port: tuple(names) for port, names in sorted(node_port_holders(cluster).items()) if low <= port <= high}
    free = list(free_node_ports(cluster, reserved))
    scopes.append(FreeScope(None, tuple(free_ranges(free)), len(free), holders,
                            tuple(nearest(free, near, count)) if near is not None else ()))
    for node in node_names(cluster):
        held = host_port_holders(cluster, node, reserved)
        free = list(free_host_ports(cluster, held))
        scopes.append(FreeScope(node, tuple(free_ranges(free)), len(free),
                                {port: tuple(names) for port, names in sorted(held.items())},
                                tuple(nearest(free, near, count)) if near is not None else ()))
    return FreePorts(cluster.node_port_range, cluster.ephemeral_port_range, tuple(scopes), near)
