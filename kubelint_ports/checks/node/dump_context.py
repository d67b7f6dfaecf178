"""What the node-snapshot rules share, and no rule of its own: a finding's subject (a dump line of
a node, `subject`, `related`), the datapath model's answer for a packet to that node with the facts
its dumps establish (`ask`), and the names a message or a drift key gives a hostPort entry or a
Service rule (`describe_entry`, `node_port_label`, `cluster_ip_label`, `listed`).
"""
from __future__ import annotations

from dataclasses import dataclass

from kubelint_ports.checks import Related
from kubelint_ports.loading.snapshot import DumpLine
from kubelint_ports.model.datapath import FROM_POD, Answer, Datapath, PortUse
from kubelint_ports.model.datapath.node import node_facts
from kubelint_ports.model.node_state import HostPortEntry, NodeState, host_ports_text
from kubelint_ports.vocabulary import ObjectRef

MAX_LISTED = 5


@dataclass(frozen=True, slots=True)
class DumpSubject:
    """A finding's subject: a dump line of a node (`document` is where; `ref` names the node)."""

    document: DumpLine
    ref: ObjectRef


def subject(node: NodeState, where: DumpLine) -> DumpSubject:
    return DumpSubject(where, ObjectRef("v1", "Node", "", node.name))


def related(node: NodeState, where: DumpLine, message: str) -> Related:
    return Related(subject(node, where), "", message)


def listed(items: list[str]) -> str:
    """The first few items of a list a message names, and how many more there are."""
    more = f" and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else ""
    return ", ".join(items[:MAX_LISTED]) + more


def describe_entry(entry: HostPortEntry) -> str:
    who = f"sandbox {entry.short_id}" if entry.sandbox_id else entry.short_id
    return f"{entry.chain} ({who}, {host_ports_text(entry.pod_ip, entry.pod_port)})"


def node_port_label(port: int, protocol: str, service: str) -> str:
    """A Service's nodePort as messages and drift keys name it: `nodePort 30080/tcp of shop/web`."""
    return f"nodePort {port}/{protocol}" + (f" of {service}" if service else "")


def cluster_ip_label(address: str, port: int, protocol: str, service: str) -> str:
    """A Service's ClusterIP port as messages and drift keys name it: `10.96.0.10:53/udp (kube-system/kube-dns)`."""
    return f"{host_ports_text(address, port)}/{protocol}" + (f" ({service})" if service else "")


def ask(node: NodeState, destination: str, use: PortUse, port: int, protocol: str, client: str = FROM_POD) -> Answer:
    """The datapath model's answer for a packet to this node, with the facts its dumps establish."""
    return Datapath(node_facts(node)).deliver(client, destination, use, port, protocol.upper())


def node_port_on(node: NodeState, protocol: str, port: int) -> bool:
    """Whether kube-proxy's rules on this node serve a nodePort of this number and protocol."""
    return any(rule.protocol == protocol and rule.port == port for rule in node.node_ports)
