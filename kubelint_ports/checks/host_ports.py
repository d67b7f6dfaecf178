"""Single-object host port rules: a hostPort at all, and host ports inside the node-port range."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register, traffic
from kubelint_ports.model import Cluster
from kubelint_ports.model.datapath import (
    CLUSTER_IP,
    FROM_NODE,
    FROM_POD,
    HOSTPORT,
    LOCALHOST,
    OTHERWISE,
    SECONDARY_IP,
    SERVICE,
    WILDCARD,
    PortUse,
    phrases_rules,
    traffic_data,
)


@register("host-port")
def host_port(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    datapath = traffic.datapath_of(cluster)
    for workload, claim in cluster.host_claims():
        if claim.via != "hostPort":
            continue
        use = PortUse(host_port_ip=claim.host_ip)
        node = datapath.deliver(FROM_POD, traffic.node_destination(claim.host_ip), use, claim.port, claim.protocol)
        words = {HOSTPORT: "this pod", SERVICE: "the Service", OTHERWISE: "otherwise the Service keeps it"}
        paths = []
        localhost = other_addresses = None
        if claim.host_ip == WILDCARD:
            localhost = datapath.deliver(FROM_NODE, LOCALHOST, use, claim.port, claim.protocol)
            paths.append(("localhost", localhost))
            service_use = PortUse(host_port_ip=claim.host_ip, service_port=True, endpoints=True)
            paths.append(("any-cluster-ip", datapath.deliver(
                FROM_POD, CLUSTER_IP, service_use, claim.port, claim.protocol).focus(HOSTPORT)))
        else:
            other_addresses = datapath.deliver(FROM_POD, SECONDARY_IP, use, claim.port, claim.protocol)
            paths.append(("other-addresses", other_addresses))
        names = {HOSTPORT: f"{workload.ref} (container '{claim.container}')"}
        head = f"container '{claim.container}' claims hostPort {claim.port}/{claim.protocol}"
        message = phrases_rules.host_port(head, claim.port, claim.host_ip, claim.host_ip == WILDCARD, node, localhost,
                                          other_addresses, paths, words)
        yield Hit(workload, claim.field_path, message, port=claim.port, traffic=traffic_data(node, names, paths))


def _in_range(cluster: Cluster, via: str, noun: str) -> Iterator[Hit]:
    for workload, claim, source in cluster.held_ports(via):
        if cluster.in_node_port_range(claim.port):
            how = f", undeclared, {source}" if source else ""
            yield Hit(workload, claim.field_path, (
                f"{noun} {claim.port}/{claim.protocol} (container '{claim.container}'{how}) lies inside the node-port "
                f"range {cluster.node_port_range_text}: a Service that gets nodePort {claim.port} later, even one "
                f"allocated at random, collides with it on every node this pod runs on. Use a port below "
                f"{cluster.node_port_range[0]}."), port=claim.port)


@register("host-port-in-node-port-range")
def host_port_in_node_port_range(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    return _in_range(cluster, "hostPort", "hostPort")


@register("host-network-port-in-node-port-range")
def host_network_port_in_node_port_range(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    return _in_range(cluster, "hostNetwork", "hostNetwork port")
