"""Node-snapshot rule on the node's listening sockets (KP805): a process on the node (`ss`) whose
port a hostPort DNAT or a Service's nodePort takes, so its clients reach a pod instead.

The listener meets only rules of its own address family and, bound to loopback, only what the
node itself sends to 127.0.0.1; the datapath model says who receives each packet.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.checks.node import phrases
from kubelint_ports.checks.node.dump_context import ask, describe_entry, node_port_on, related, subject
from kubelint_ports.model.datapath import (
    FROM_NODE,
    FROM_OUTSIDE,
    FROM_POD,
    HOST_PROCESS,
    HOSTPORT,
    LOCALHOST,
    NODE_IP,
    SERVICE,
    WILDCARD,
    PortUse,
    traffic_data,
)
from kubelint_ports.model.node_state import HostPortEntry, NodeSnapshots, host_ports_text, same_family
from kubelint_ports.model.port_holders import node_destination

KUBE_PROXY_PROCESSES = frozenset(("kube-proxy", "hyperkube"))


def covers(listener_address: str, host_ip: str) -> bool:
    if not host_ip:
        return True
    return listener_address in ("*", "0.0.0.0", "::", host_ip)


@register("host-process-loses-port")
def host_process_loses_port(context: NodeSnapshots, params: Mapping[str, Any]) -> Iterator[Hit]:
    for node in context.nodes:
        node_ports: dict[tuple[str, int], list] = {}
        for rule in node.node_ports:
            node_ports.setdefault((rule.protocol, rule.port), []).append(rule)
        # A listener only meets rules of its own address family: IPv4 nat never sees an IPv6
        # packet (`[::]:30080` is an IPv6-only socket; ss prints a dual-stack one as `*:30080`).
        host_ports: dict[tuple[str, int], list[HostPortEntry]] = {}
        for entry in node.host_ports:
            host_ports.setdefault((entry.protocol, entry.port), []).append(entry)
        services = {(claim.protocol.lower(), claim.port): service for service in context.services
                    if service.has_node_ports for claim in service.node_port_claims}
        # Only a socket on a port that a DNAT or a nodePort takes can lose it (a node may list 800,000)
        for listener in node.listeners.on_ports(host_ports.keys() | node_ports.keys()):
            if any(name in KUBE_PROXY_PROCESSES for name, _ in listener.processes):
                continue  # kube-proxy <= 1.23 holds its own nodePorts open
            key = (listener.protocol, listener.port)
            entries = [e for e in host_ports.get(key, ()) if same_family(listener.family, e.family)
                       and covers(listener.address, e.host_ip)]
            shown = host_ports_text(listener.address, listener.port)
            if entries:
                entry = min(entries, key=lambda e: e.order)
                use = PortUse(host_port_ip=entry.host_ip or WILDCARD, host_process=True,
                              node_port=node_port_on(node, listener.protocol, listener.port))
                # A hostIP-bound entry sees only packets to its hostIP, which the listener covers;
                # a loopback listener only what the node sends to 127.0.0.1.
                client, destination = listener_packet(listener.address, node_destination(use.host_port_ip))
                answer = ask(node, destination, use, listener.port, listener.protocol, client)
                if not answer.possible(HOSTPORT):
                    continue
                parties = {HOSTPORT: f"the pod at {entry.pod_ip}:{entry.pod_port}", HOST_PROCESS: listener.process_text}
                yield Hit(subject(node, listener.place), f"listener {listener.protocol}/{listener.port}",
                          phrases.process_loses_to_host_port(listener.process_text, shown, listener.protocol,
                                                             describe_entry(entry), node.name, answer, parties,
                                                             pod=entry.pod_ip, port=listener.port),
                          (related(node, entry.jump, f"hostPort DNAT {describe_entry(entry)}"),), port=listener.port,
                          traffic=traffic_data(answer, parties))
                continue
            rules = [rule for rule in node_ports.get(key, ()) if same_family(listener.family, rule.family)]
            if not rules:
                continue
            rule = next((r for r in rules if r.action == "reject"), rules[0])
            service = rule.service or (f"{services[key].ref.namespace}/{services[key].ref.name}" if key in services
                                       else "a Service")
            use = PortUse(host_process=True, node_port=True, endpoints=rule.action != "reject")
            # Clients outside the node are what a nodePort is for; a loopback listener only meets the
            # node's own packets to 127.0.0.1 (IPVS and nftables mode serve no NodePort there).
            client, destination = listener_packet(listener.address, NODE_IP, FROM_OUTSIDE)
            answer = ask(node, destination, use, listener.port, listener.protocol, client)
            if answer.always(HOST_PROCESS):
                continue
            parties = {HOST_PROCESS: listener.process_text, SERVICE: service}
            paths = [] if destination == LOCALHOST else [
                ("pods", ask(node, destination, use, listener.port, listener.protocol, FROM_POD))]
            yield Hit(subject(node, listener.place), f"listener {listener.protocol}/{listener.port}",
                      phrases.process_loses_to_node_port(listener.process_text, shown, listener.protocol,
                                                         listener.port, service, answer, parties, paths,
                                                         node=node.name),
                      (related(node, rule.place, f"nodePort {listener.port} of {service}"),), port=listener.port,
                      traffic=traffic_data(answer, parties, paths))


def listener_packet(address: str, destination: str, client: str = FROM_POD) -> tuple[str, str]:
    """The packet a listening socket on `address` would take: a loopback socket only gets what the
    node itself sends to it, any other one the packets to the node's address."""
    if address.startswith("127.") or address == "::1":
        return FROM_NODE, LOCALHOST
    return client, destination
