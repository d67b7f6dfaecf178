"""Node-snapshot rule across nodes (KP806): a hostPort DNAT or a Service rule that some nodes
have and others lack, so a packet's fate depends on the node it lands on.

Rules are compared by what they do (protocol, port, Service), never by their dump line; the
minority side is reported, and a node missing Service rules is told what takes their packets
there instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.checks.node import phrases
from kubelint_ports.checks.node.dump_context import ask, cluster_ip_label, listed, node_port_label, subject
from kubelint_ports.loading.snapshot import DumpLine
from kubelint_ports.model.datapath import (
    CLUSTER_IP,
    HOST_PROCESS,
    HOSTPORT,
    NODE_IP,
    SERVICE,
    WILDCARD,
    Answer,
    PortUse,
    explain,
    traffic_data,
)
from kubelint_ports.model.node_state import ClusterIpRule, NodePortRule, NodeSnapshots, NodeState


def fact_keys(node: NodeState, rules: dict | None = None) -> dict[tuple[str, ...], DumpLine]:
    """Rules that should match across nodes, keyed by what they do (first place kept); `rules`,
    when given, collects the Service rule behind each Service key."""
    keys: dict[tuple[str, ...], DumpLine] = {}
    for entry in node.host_ports:
        keys.setdefault(("host-port", entry.protocol, str(entry.port)), entry.jump)
    services = [(node_port_label(rule.port, rule.protocol, rule.service), rule) for rule in node.node_ports]
    services += [(cluster_ip_label(rule.address, rule.port, rule.protocol, rule.service), rule)
                 for rule in node.cluster_ips]
    for label, rule in services:
        keys.setdefault(("service", label), rule.place)
        if rules is not None:
            rules.setdefault(("service", label), rule)
    return keys


def missing_rule_answer(node: NodeState, rule: NodePortRule | ClusterIpRule, label: str
                        ) -> tuple[Answer, dict[str, str]]:
    """Who gets a packet for a Service rule this node lacks: what else holds the port here decides."""
    if isinstance(rule, NodePortRule):
        listening = next(node.listeners.on_ports({(rule.protocol, rule.port)}), None) is not None
        dnat = next((entry for entry in node.host_ports
                     if entry.protocol == rule.protocol and entry.port == rule.port), None)
        use = PortUse(host_port_ip=(dnat.host_ip or WILDCARD) if dnat else None, host_process=listening)
        answer = ask(node, NODE_IP, use, rule.port, rule.protocol)
    else:
        use = PortUse()
        answer = ask(node, CLUSTER_IP, use, rule.port, rule.protocol)
    parties = {SERVICE: "the Service"}
    if use.host_port_ip is not None:
        parties[HOSTPORT] = "the hostPort pod"
    if use.host_process:
        parties[HOST_PROCESS] = "the process listening on the node"
    return answer, parties


@register("node-drift")
def node_drift(context: NodeSnapshots, params: Mapping[str, Any]) -> Iterator[Hit]:
    nodes = [node for node in context.nodes if node.entry_jumps or node.node_ports or node.cluster_ips]
    if len(nodes) < 2:
        return
    rules: dict[tuple[str, ...], NodePortRule | ClusterIpRule] = {}
    keys = {node.name: fact_keys(node, rules) for node in nodes}
    every = sorted({key for facts in keys.values() for key in facts})
    missing_on: dict[str, list[str]] = {}
    for key in every:
        having = [node for node in nodes if key in keys[node.name]]
        lacking = [node for node in nodes if key not in keys[node.name]]
        if not lacking:
            continue
        what = phrases.drift_what(key[0], key[1], key[2] if len(key) > 2 else "")
        if len(having) <= len(lacking):
            for node in having:
                traffic = None
                if key[0] == "host-port":
                    answer = ask(node, NODE_IP, PortUse(host_port_ip=WILDCARD), int(key[2]), key[1])
                    traffic = traffic_data(answer, {HOSTPORT: "the hostPort pod"})
                yield Hit(subject(node, keys[node.name][key]), f"drift {' '.join(key)}", phrases.drift_present(
                    what, node.name, listed([n.name for n in lacking]), key[0] == "host-port"),
                    variant=key[0], traffic=traffic)
        elif key[0] == "service":
            for node in lacking:
                missing_on.setdefault(node.name, []).append(key[1])
    for node in nodes:
        missing = missing_on.get(node.name)
        if missing and node.services_anchor is not None:
            first = missing[0]
            answer, parties = missing_rule_answer(node, rules[("service", first)], first)
            yield Hit(subject(node, node.services_anchor), "drift missing services", phrases.drift_missing(
                node.name, len(missing), listed(missing), first, explain(answer, parties), answer=answer,
                parties=parties), variant="service", traffic=traffic_data(answer, parties))
