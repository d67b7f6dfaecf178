"""The node command's model: every snapshot's node state (`node_state`), with what the cluster says
about the nodes: the pods the `--cluster` files list, and the Services and CIDRs of the manifests,
`--cluster` and `--nodes` (a `Cluster`) or of the options. What the node-snapshot checks read."""

from __future__ import annotations

from collections.abc import Iterable

from kubelint_ports.loading.cluster.cidrs import parse_cidrs
from kubelint_ports.loading.snapshot import Snapshot
from kubelint_ports.model.node_state import (
    NodeSnapshots,
    NodeState,
    RunningPod,
    build_node_state,
    running_pods_from_documents,
    unmatched_nodes,
)
from kubelint_ports.model.objects import Cluster, ClusterFacts
from kubelint_ports.vocabulary import Diagnostic, Location


def node_states(snapshots: Iterable[Snapshot]) -> tuple[list[NodeState], list[Diagnostic]]:
    """Each snapshot's node state (built as each is read), and two snapshots of one name as an error."""
    states = [build_node_state(snapshot) for snapshot in snapshots]
    names = [state.name for state in states]
    diagnostics = [Diagnostic(Location(states[names.index(name)].path, 0, 0),
                              f"two snapshots are both named {name!r} (from their directory names)")
                   for name in sorted({n for n in names if names.count(n) > 1})]
    return states, diagnostics


def running_pods_of_document(document) -> list[RunningPod]:
    """A `--cluster` file's Kubernetes object as running pods (none unless a Pod on a node), for
    `loading.snapshot.inputs.read_running`, beside `node_state.running_pods_from_rows`."""
    return running_pods_from_documents((document,))


def node_snapshots(states: list[NodeState], pods: list[RunningPod] | None, cluster: Cluster | None,
                   facts: ClusterFacts, cluster_file: str = "") -> tuple[NodeSnapshots, list[Diagnostic]]:
    """What the node-snapshot checks read: the node states with the pods running (None: unknown),
    and the Services and CIDRs of `cluster` (manifests, `--cluster`, `--nodes`), else the CIDRs
    the options state. `cluster_file`: the first `--cluster` file as shown, for its problems."""
    context = NodeSnapshots(states, pods)
    diagnostics = unmatched_nodes(context, cluster_file)
    if cluster is not None:
        context.services = [service for service in cluster.services]
        network = cluster.network
        context.service_cidrs = tuple(n for source in network.service_ranges for n in source.networks)
        context.pod_cidrs = tuple(n for source in network.pod_ranges if source.cluster_wide for n in source.networks)
        context.node_pod_cidrs = {n.name: n.pod_cidrs for n in cluster.nodes or ()}
    else:
        context.service_cidrs = parse_cidrs(facts.service_cidr)[0] if facts.service_cidr else ()
        context.pod_cidrs = parse_cidrs(facts.pod_cidr)[0] if facts.pod_cidr else ()
    return context, diagnostics
