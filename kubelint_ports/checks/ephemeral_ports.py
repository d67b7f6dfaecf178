"""Ports inside the nodes' ephemeral range (net.ipv4.ip_local_port_range, Linux default
32768-60999): the kernel hands those numbers out as source ports of outgoing connections, so a
listener there can find its port taken, and a DNAT on it can meet replies meant for a node process.
The range is a cluster fact (`--ephemeral-port-range`, else Linux's default)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.model import Cluster, HostClaim, Workload
from kubelint_ports.model.objects import DEFAULT_EPHEMERAL_PORT_RANGE


def in_range(port: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= port <= bounds[1]


def range_origin(cluster: Cluster) -> str:
    default = cluster.ephemeral_port_range == DEFAULT_EPHEMERAL_PORT_RANGE
    return f"{cluster.ephemeral_port_range_text} ({'Linux default ' if default else ''}net.ipv4.ip_local_port_range)"


def claims_in_range(cluster: Cluster, via: str) -> Iterator[tuple[Workload, HostClaim, str]]:
    for workload, claim, source in cluster.held_ports(via):
        if in_range(claim.port, cluster.ephemeral_port_range):
            yield workload, claim, source


@register("host-network-port-in-ephemeral-range")
def host_network_port_in_ephemeral_range(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    for workload, claim, source in claims_in_range(cluster, "hostNetwork"):
        how = f", undeclared, {source}" if source else ""
        yield Hit(workload, claim.field_path, (
            f"hostNetwork port {claim.port}/{claim.protocol} (container '{claim.container}'{how}) is in the ephemeral "
            f"range: the node's kernel gives ports in {range_origin(cluster)} to outgoing connections of any "
            f"node process, so when one holds {claim.port} the pod's bind() fails with 'address already in "
            f"use' and it crash-loops on that node until the connection closes. Use a port below "
            f"{cluster.ephemeral_port_range[0]}, or list it in the nodes' net.ipv4.ip_local_reserved_ports."),
            port=claim.port)


@register("host-port-in-ephemeral-range")
def host_port_in_ephemeral_range(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    for workload, claim, _ in claims_in_range(cluster, "hostPort"):
        yield Hit(workload, claim.field_path, (
            f"hostPort {claim.port}/{claim.protocol} (container '{claim.container}') is in the ephemeral range: "
            f"node processes get source ports from {range_origin(cluster)}, so packets answering a node's "
            f"outgoing connection from port {claim.port} arrive on the hostPort's number. With the CNI portmap "
            f"plugin conntrack keeps those replies out of the DNAT; datapaths that match them without "
            f"conntrack (eBPF hostPort implementations) can hand them to the pod. Prefer a port below "
            f"{cluster.ephemeral_port_range[0]}, or reserve it in net.ipv4.ip_local_reserved_ports."),
            port=claim.port)


@register("node-port-range-overlaps-ephemeral-range", cross_object=True)
def node_port_range_overlaps_ephemeral_range(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    low, high = cluster.ephemeral_port_range
    network = cluster.network
    for setting in (network.node_port_range_settings if network is not None else ()):
        first, last = setting.range
        if setting.owner.live or last < low or first > high:
            continue
        overlap = f"{max(first, low)}-{min(last, high)}"
        yield Hit(setting.owner, setting.field_path, (
            f"node-port range {first}-{last} overlaps the ephemeral range in {overlap}: {setting.label} sets "
            f"it, nodes hand ports {range_origin(cluster)} to outgoing connections, and kube-proxy's rules for a "
            f"nodePort in "
            f"{overlap} can take the replies of node processes whose source port it is (connections from the node "
            f"time out, kubernetes#111682). Keep the node-port range below {low} (the default is 30000-32767), or "
            f"reserve it in the nodes' net.ipv4.ip_local_reserved_ports."), port=first)
    for service in cluster.services:
        if not service.has_node_ports:
            continue
        for claim in service.node_port_claims:
            if in_range(claim.port, (low, high)) and cluster.in_node_port_range(claim.port):
                yield Hit(service, claim.field_path, (
                    f"{claim.label} {claim.port} is in the nodes' ephemeral range: the kernel hands ports "
                    f"{range_origin(cluster)} to outgoing connections of node processes, and kube-proxy's rule for "
                    f"{claim.port} can take the replies of one that got {claim.port} as its source port (its "
                    f"connection times out, kubernetes#111682). Pick a nodePort below {low}."), port=claim.port)
