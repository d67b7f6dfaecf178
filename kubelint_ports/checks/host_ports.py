"""Single-object host port rules: a hostPort at all, and host ports inside the node-port range."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.model import Cluster


@register("host-port")
def host_port(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    for workload, claim in cluster.host_claims():
        if claim.via != "hostPort":
            continue
        where = "on every local address of its node" if claim.host_ip == "0.0.0.0" else f"on {claim.host_ip} of its node"
        yield Hit(workload, claim.field_path, (
            f"container '{claim.container}' claims hostPort {claim.port}/{claim.protocol}: the CNI portmap plugin "
            f"DNATs that port {where} (in IPVS mode also Service IPs and NodePorts), with no listening socket "
            f"that netstat or ss would show, and only one such pod fits per node. Expose it through a Service "
            f"instead, or keep the hostPort and document which traffic it takes."), port=claim.port)


def _in_range(cluster: Cluster, via: str, noun: str) -> Iterator[Hit]:
    for workload, claim in cluster.host_claims():
        if claim.via == via and cluster.in_node_port_range(claim.port):
            yield Hit(workload, claim.field_path, (
                f"{noun} {claim.port}/{claim.protocol} (container '{claim.container}') lies inside the node-port "
                f"range {cluster.node_port_range_text}: a Service that gets nodePort {claim.port} later, even one "
                f"allocated at random, collides with it on every node this pod runs on. Use a port below "
                f"{cluster.node_port_range[0]}."), port=claim.port)


@register("host-port-in-node-port-range")
def host_port_in_node_port_range(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    return _in_range(cluster, "hostPort", "hostPort")


@register("host-network-port-in-node-port-range")
def host_network_port_in_node_port_range(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    return _in_range(cluster, "hostNetwork", "hostNetwork port")
