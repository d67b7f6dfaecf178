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
    SERVICE,
    WILDCARD,
    PortUse,
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
        if claim.host_ip == WILDCARD:
            paths.append(("from the node to 127.0.0.1", datapath.deliver(FROM_NODE, LOCALHOST, use, claim.port,
                                                                        claim.protocol)))
            service_use = PortUse(host_port_ip=claim.host_ip, service_port=True, endpoints=True)
            paths.append(("to any ClusterIP on that port", datapath.deliver(
                FROM_POD, CLUSTER_IP, service_use, claim.port, claim.protocol).focus(HOSTPORT)))
        names = {HOSTPORT: f"{workload.ref} (container '{claim.container}')"}
        yield Hit(workload, claim.field_path, host_port_message(claim, node, paths, words), port=claim.port,
                  traffic=traffic.data(node, names, paths))


def host_port_message(claim, node, paths, words) -> str:
    where = "every address of its node (127.0.0.1 included)" if claim.host_ip == WILDCARD else \
        f"{claim.host_ip} of its node (only there)"
    head = f"container '{claim.container}' claims hostPort {claim.port}/{claim.protocol}"
    if not node.possible(HOSTPORT):
        return (f"{head}, but nothing forwards it: {traffic.explain(node, words)}. Remove the hostPort, or "
                f"chain the portmap plugin in the CNI configuration.")
    extra = ""
    for label, answer in paths:
        if answer.possible(HOSTPORT) and "ClusterIP" in label:
            extra += f" Pods connecting {label}: {traffic.summary_short(answer, words)}."
    return (f"{head}: the hostPort rule sends port {claim.port} on {where} to this pod"
            f"{traffic.fact_note(node)}. No listening socket shows it to netstat or ss, and only "
            f"one such pod fits per node.{extra} Expose it through a Service instead, or keep the hostPort and "
            f"document which traffic it takes.")


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
