"""Single-object host port rules: a hostPort at all, and host ports inside the node-port range.

A pod holds a port of its node in one of two ways, and a rule about such ports serves both with
the `holder` param of its policy: `hostPort` (a container's hostPort: a DNAT to the pod) or
`hostNetwork` (a port of a hostNetwork pod, declared or listened on without declaring it: a socket
of the node). One check, two policies with their own id, name and severity (KP102 and KP103, KP105
and KP106, KP201 and KP202).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.checks.manifest import phrases
from kubelint_ports.checks.manifest import traffic
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
    traffic_data,
)

# The params of a check that serves both holders: which one its policy reports. Imported by the
# other families of such checks (node_ports, ephemeral_ports).
HOLDER_PARAMS = {
    "type": "object",
    "additionalProperties": False,
    "required": ["holder"],
    "properties": {"holder": {"enum": ["hostPort", "hostNetwork"]}},
}
HOLDER_NOUNS = {"hostPort": "hostPort", "hostNetwork": "hostNetwork port"}


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
        message = phrases.host_port(head, claim.port, claim.host_ip, claim.host_ip == WILDCARD, node, localhost,
                                    other_addresses, paths, words, claim.container)
        yield Hit(workload, claim.field_path, message, port=claim.port, traffic=traffic_data(node, names, paths))


@register("host-port-in-node-port-range", params_schema=HOLDER_PARAMS)
def host_port_in_node_port_range(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    noun = HOLDER_NOUNS[params["holder"]]
    for workload, claim, source in cluster.held_ports(params["holder"]):
        if cluster.in_node_port_range(claim.port):
            how = f", undeclared, {source}" if source else ""
            yield Hit(workload, claim.field_path, phrases.host_port_in_node_port_range(
                f"{noun} {claim.port}/{claim.protocol}", claim.port, claim.container, how, cluster.node_port_range_text,
                cluster.node_port_range[0]), port=claim.port)
