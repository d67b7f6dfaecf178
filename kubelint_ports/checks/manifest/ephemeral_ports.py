"""Ports inside the nodes' ephemeral range (net.ipv4.ip_local_port_range, Linux default
32768-60999): the kernel hands those numbers out as source ports of outgoing connections, so a
listener there can find its port taken, and a DNAT on it can meet replies meant for a node process.
The range is a cluster fact (`--ephemeral-port-range`, else Linux's default)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.checks.manifest import phrases
from kubelint_ports.checks.manifest.host_ports import HOLDER_PARAMS
from kubelint_ports.model import Cluster, HostClaim
from kubelint_ports.model.objects import DEFAULT_EPHEMERAL_PORT_RANGE
from kubelint_ports.vocabulary import Message


def in_range(port: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= port <= bounds[1]


def range_origin(cluster: Cluster) -> str:
    default = cluster.ephemeral_port_range == DEFAULT_EPHEMERAL_PORT_RANGE
    return f"{cluster.ephemeral_port_range_text} ({'Linux default ' if default else ''}net.ipv4.ip_local_port_range)"


@register("host-port-in-ephemeral-range", params_schema=HOLDER_PARAMS)
def host_port_in_ephemeral_range(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    """A hostNetwork pod's bind() fails while an outgoing connection of the node holds its port; a
    hostPort's DNAT can take the replies of such a connection."""
    for workload, claim, source in cluster.held_ports(params["holder"]):
        if not in_range(claim.port, cluster.ephemeral_port_range):
            continue
        if claim.via == "hostNetwork":
            message = bind_may_fail(cluster, claim, source)
        else:
            message = phrases.ephemeral_host_port(claim.port, claim.protocol, claim.container,
                                                  range_origin(cluster), cluster.ephemeral_port_range[0])
        yield Hit(workload, claim.field_path, message, port=claim.port)


def bind_may_fail(cluster: Cluster, claim: HostClaim, source: str) -> Message:
    how = f", undeclared, {source}" if source else ""
    return phrases.ephemeral_host_network_port(f"hostNetwork port {claim.port}/{claim.protocol}", claim.port,
                                               claim.container, how, range_origin(cluster),
                                               cluster.ephemeral_port_range[0])


@register("node-port-range-overlaps-ephemeral-range")
def node_port_range_overlaps_ephemeral_range(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    low, high = cluster.ephemeral_port_range
    network = cluster.network
    for setting in (network.node_port_range_settings if network is not None else ()):
        first, last = setting.range
        if setting.owner.live or last < low or first > high:
            continue
        overlap = f"{max(first, low)}-{min(last, high)}"
        yield Hit(setting.owner, setting.field_path, phrases.ephemeral_node_port_range(
            first, last, overlap, setting.label, range_origin(cluster), low), port=first)
    for service in cluster.services:
        if not service.has_node_ports:
            continue
        for claim in service.node_port_claims:
            if in_range(claim.port, (low, high)) and cluster.in_node_port_range(claim.port):
                yield Hit(service, claim.field_path, phrases.ephemeral_node_port(
                    claim.label, claim.port, range_origin(cluster), low), port=claim.port)
