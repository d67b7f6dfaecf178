"""Who holds a node's port, as both the rules and the port map read it: the node daemons a
node-reserved-port policy lists, and the cluster's datapath model with the address a hostPort's
traffic arrives at. Facts about the cluster, so they live in the model: the checks and the port
map (a view made after the checks) ask the same functions and cannot disagree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubelint_ports.model.objects import Cluster, Workload
from kubelint_ports.model.datapath.facts import HOST_IP, NODE_IP, WILDCARD
from kubelint_ports.model.datapath.answer import Datapath
from kubelint_ports.model.objects import HostClaim


def reserved_ports(params: Mapping[str, Any]) -> dict[tuple[str, int], str]:
    """(protocol, port) -> the node daemon that uses it, from a node-reserved-port policy's params."""
    reserved: dict[tuple[str, int], str] = {}
    for entry in [*params.get("ports", ()), *params.get("extra_ports", ())]:
        reserved[(entry.get("protocol", "TCP"), entry["port"])] = entry["daemon"]
    return reserved


def is_the_daemon(workload: Workload, claim: HostClaim, daemon: str) -> bool:
    """node-exporter's own DaemonSet may use 9100: recognised by workload or container name."""
    name = daemon.lower()
    return name in workload.ref.name.lower() or name in claim.container.lower()


def datapath_of(cluster: Cluster) -> Datapath:
    """The cluster's datapath model (every plausible setup when the inputs state no fact)."""
    return cluster.datapath if cluster.datapath is not None else Datapath()


def node_destination(host_ip: str) -> str:
    """Where a hostPort's traffic arrives: its hostIP when bound to one, else the node's address."""
    return NODE_IP if host_ip == WILDCARD else HOST_IP
