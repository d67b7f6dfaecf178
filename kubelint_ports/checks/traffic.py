"""What the node-traffic rules ask the datapath model, and how its answers read in a finding.

The rules name the parties (which pod, which Service, which process); the model decides who
receives the packet and why. Nothing here knows a packet's fate: it only phrases answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubelint_ports.model import Cluster
from kubelint_ports.model.datapath import (
    FROM_NODE,
    FROM_POD,
    HOST_IP,
    LOCALHOST,
    NODE_IP,
    WILDCARD,
    Answer,
    Datapath,
    PortUse,
    fact_sources,
    summary,
    who,
)

def datapath_of(cluster: Cluster) -> Datapath:
    return cluster.datapath if cluster.datapath is not None else Datapath()


def node_destination(host_ip: str) -> str:
    """Where a hostPort's traffic arrives: its hostIP when bound to one, else any node address."""
    return NODE_IP if host_ip == WILDCARD else HOST_IP


def node_paths(datapath: Datapath, use: PortUse, port: int, protocol: str, host_ip: str) -> list[tuple[str, Answer]]:
    """The other ways into the same port: from the node itself, to 127.0.0.1 (kube-proxy treats it
    apart: localhostNodePorts), and to the node's other addresses when a hostIP binds the hostPort."""
    destination = node_destination(host_ip)
    paths = [("from the node itself", datapath.deliver(FROM_NODE, destination, use, port, protocol)),
             ("from the node to 127.0.0.1", datapath.deliver(FROM_NODE, LOCALHOST, use, port, protocol))]
    if destination == HOST_IP:
        paths.append(("to the node's other addresses", datapath.deliver(FROM_POD, NODE_IP, use, port, protocol)))
    return paths


def explain(answer: Answer, parties: Mapping[str, str], others: Sequence[tuple[str, Answer]] = ()) -> str:
    """The model's sentence, the facts it rests on, and any other path where the winner differs."""
    text = summary(answer, parties) + fact_sources(answer, relevant_facts(answer))
    for label, other in others:
        if other.receiver != answer.receiver:
            text += f"; {label}: {summary_short(other, parties)}"
    return text


def summary_short(answer: Answer, parties: Mapping[str, str]) -> str:
    if answer.certain:
        return f"{who(answer.receiver, parties)} gets it"
    return summary(answer, parties)


def fact_note(answer: Answer) -> str:
    return fact_sources(answer, relevant_facts(answer))


def relevant_facts(answer: Answer) -> list[str]:
    """Known facts that decide this answer (unknown ones are named in the outcome clauses)."""
    return answer.deciding_facts()


def data(answer: Answer, parties: Mapping[str, str], others: Sequence[tuple[str, Answer]] = ()) -> dict[str, Any]:
    """The finding's `traffic` property: the main answer, plus the other paths asked."""
    result = answer.data(parties)
    if others:
        result["paths"] = [{"client": other.client, "destination": other.destination, "label": label,
                            "receiver": other.receiver, "certain": other.certain,
                            "possible": sorted({r for o in other.outcomes for r in o.route.receivers})}
                           for label, other in others]
    return result
