"""Node-snapshot rules on a node's hostPort DNAT entries (KP801-KP803): entries left behind by a
pod that is gone, entries another entry of the chain shadows, and hostPort jumps that run ahead
of kube-proxy's.

An entry is the portmap (or Calico, or Cilium) DNAT for one pod's hostPort, found in the node's
iptables or nftables dump; whether its pod is gone is what the runtime (`crictl pods`), the IPAM
leases and `--cluster` say, and which of two entries a packet meets first is the datapath
model's `first_dnat`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from kubelint_ports.checks import Hit, Related, register
from kubelint_ports.checks.node import phrases
from kubelint_ports.checks.node.dump_context import (
    ask,
    cluster_ip_label,
    describe_entry,
    listed,
    node_port_label,
    node_port_on,
    related,
    subject,
)
from kubelint_ports.loading.snapshot import DumpLine
from kubelint_ports.model.datapath import (
    CLUSTER_IP,
    FROM_OUTSIDE,
    HOSTPORT,
    KUBE_PROXY_FIRST,
    NODE_IP,
    SERVICE,
    WILDCARD,
    Answer,
    Datapath,
    Fact,
    PortUse,
    explain,
    first_dnat,
    traffic_data,
)
from kubelint_ports.model.datapath.node import node_facts
from kubelint_ports.model.node_state import READY, HostPortEntry, NodeSnapshots, NodeState, host_ports_text
from kubelint_ports.model.port_holders import node_destination


# --- which entry a packet meets -------------------------------------------------------------------

def host_port_answer(node: NodeState, entry: HostPortEntry, receiver_name: str) -> tuple[Answer, dict]:
    """Who gets a packet to the entry's port on the node (its hostIP, when it is bound to one),
    told with `receiver_name` as the hostPort side: the answer and its parties."""
    use = PortUse(host_port_ip=entry.host_ip or WILDCARD, node_port=node_port_on(node, entry.protocol, entry.port))
    answer = ask(node, node_destination(use.host_port_ip), use, entry.port, entry.protocol)
    parties = {HOSTPORT: receiver_name}
    if use.node_port:
        parties[SERVICE] = f"nodePort {entry.port}"
    return answer, parties


def one_chain(entries: list[HostPortEntry], entry: HostPortEntry) -> list[HostPortEntry]:
    """The entries `first_dnat` may order against `entry`: those of its own dump file and address
    family. Rule positions in another file (iptables-legacy against iptables-nft) or family
    (iptables against ip6tables) say nothing about which DNAT a packet meets first."""
    return [other for other in entries if other.jump.path == entry.jump.path and other.family == entry.family]


def winner_of(entries: list[HostPortEntry], entry: HostPortEntry) -> HostPortEntry | None:
    return first_dnat(one_chain(entries, entry), entry)


def shadowed_by(entries: list[HostPortEntry], winner: HostPortEntry) -> list[HostPortEntry]:
    return [entry for entry in entries if entry is not winner and winner_of(entries, entry) is winner]


def partly_shadowed(entries: list[HostPortEntry], entry: HostPortEntry) -> list[HostPortEntry]:
    """Earlier entries bound to a hostIP that take that address's packets from a later wildcard
    `entry` (which still gets the node's other addresses). Told by `first_dnat` itself: the
    winner for the wildcard entry's packets to one hostIP is the winner for an entry bound there."""
    if entry.host_ip:
        return []
    chain = one_chain(entries, entry)
    addresses = sorted({other.host_ip for other in chain if other.host_ip and other.order < entry.order
                        and other.overlaps(entry)})
    found = []
    for address in addresses:
        winner = first_dnat(chain, replace(entry, host_ip=address))
        if winner is not None and winner.host_ip == address:
            found.append(winner)
    return found


# --- evidence that a sandbox is gone --------------------------------------------------------------

def dead_reasons(entry: HostPortEntry, node: NodeState, context: NodeSnapshots) -> tuple[list[str], list[Related]]:
    reasons: list[str] = []
    evidence: list[Related] = []
    if entry.sandbox_id and node.sandboxes is not None:
        sandbox = node.sandboxes.get(entry.sandbox_id)
        if sandbox is not None and sandbox.state == READY:
            # The runtime itself says the sandbox is alive: a lease or --cluster that disagrees is
            # out of date or elsewhere, and deleting the rules would cut a live pod off.
            return [], []
        if sandbox is None:
            reasons.append(f"no sandbox {entry.short_id} runs on {node.name} (crictl pods)")
        elif sandbox.state != READY:
            reasons.append(f"sandbox {entry.short_id} is {sandbox.state} (crictl pods)")
            evidence.append(related(node, sandbox.place, f"sandbox {entry.short_id} is {sandbox.state}"))
    on_node = context.pods_on(node.name)
    if on_node is not None:
        if entry.pod_ip not in on_node:
            reasons.append(f"no running pod on {node.name} has {entry.pod_ip} (--cluster)")
    network_leases = [lease for lease in node.leases if not entry.network or lease.network == entry.network]
    if entry.sandbox_id and network_leases:
        lease = node.lease_of(entry.pod_ip)
        if lease is None:
            reasons.append(f"host-local IPAM holds no lease for {entry.pod_ip}")
        elif lease.container_id != entry.sandbox_id:
            reasons.append(f"the IPAM lease for {entry.pod_ip} belongs to {lease.container_id[:12]}")
            evidence.append(related(node, lease.place, f"lease of {entry.pod_ip}: container {lease.container_id[:12]}"))
    return reasons, evidence


def is_live(entry: HostPortEntry, node: NodeState, context: NodeSnapshots) -> bool | None:
    """True/False when the snapshot or the cluster says; None when nothing does."""
    known = (entry.sandbox_id and node.sandboxes is not None) or context.pods_on(node.name) is not None or (
        entry.sandbox_id and node.leases)
    if not known:
        return None
    return not dead_reasons(entry, node, context)[0]


# --- stale and shadowed entries (KP801, KP802) ----------------------------------------------------

def by_jump(entries: list[HostPortEntry]) -> dict[DumpLine, list[HostPortEntry]]:
    """Entries grouped by the rule that jumps to them (one portmap rule carries up to 15 ports)."""
    groups: dict[DumpLine, list[HostPortEntry]] = {}
    for entry in entries:
        groups.setdefault(entry.jump, []).append(entry)
    return groups


def port_list(entries: list[HostPortEntry]) -> str:
    protocol = entries[0].protocol
    ports = [str(entry.port) for entry in entries]
    return f"{protocol}/{listed(ports)}" if len(ports) > 1 else f"{protocol}/{ports[0]}"


def first_ports(entries: list[HostPortEntry]) -> str:
    """The ports a headline names: the first, and how many more."""
    return phrases.first_ports(entries[0].protocol, [entry.port for entry in entries])


@register("stale-host-port-dnat")
def stale_host_port_dnat(context: NodeSnapshots, params: Mapping[str, Any]) -> Iterator[Hit]:
    for node in context.nodes:
        for jump, entries in by_jump(node.host_ports).items():
            entry = entries[0]
            reasons, evidence = dead_reasons(entry, node, context)
            if not reasons:
                continue
            ports = port_list(entries)
            victims: dict[DumpLine, HostPortEntry] = {}
            for stale in entries:
                for loser in shadowed_by(node.host_ports, stale):
                    if is_live(loser, node, context):
                        victims.setdefault(loser.jump, loser)
            winners = [winner for winner in (winner_of(node.host_ports, stale) for stale in entries) if winner]
            answer, parties = host_port_answer(node, entry, f"{entry.pod_ip} (the stale entry, where nothing answers)")
            sentence, traffic = explain(answer, parties), traffic_data(answer, parties)
            if victims:
                victim = next(iter(victims.values()))
                outcome = phrases.stale_outcome_shadowing(entry.protocol, entry.port, sentence,
                                                          describe_entry(victim), victim.jump.line, ports,
                                                          entry.backend)
                evidence += [related(node, loser.jump, f"live entry shadowed: {describe_entry(loser)}")
                             for loser in victims.values()]
                words = phrases.stale_effect(entry.protocol, entry.port, answer, parties, victim_ip=victim.pod_ip)
            elif len(winners) == len(entries):
                outcome = phrases.stale_outcome_shadowed(describe_entry(winners[0]), winners[0].jump.line,
                                                         entry.backend)
                words = phrases.stale_effect(entry.protocol, entry.port, answer, parties,
                                             winner_line=winners[0].jump.line)
            else:
                outcome = phrases.stale_outcome(entry.protocol, entry.port, sentence)
                words = phrases.stale_effect(entry.protocol, entry.port, answer, parties)
            hash_note = phrases.chain_name_mismatch(entry.network) if entry.chain_name_matches is False else ""
            udp_ports = sorted({e.port for e in entries if e.protocol == "udp"})
            fix = phrases.stale_fix(entry.backend, entry.chain, udp_ports)
            yield Hit(subject(node, jump), f"hostPort {ports} {entry.chain}", phrases.stale_entry(
                describe_entry(entry), ports, "; ".join(reasons), outcome, hash_note, fix, chain=entry.chain,
                pod_ip=entry.pod_ip, headline_ports=first_ports(entries), words=words,
                action=phrases.stale_fix_action(entry.backend, entry.chain, node.name, bool(udp_ports))),
                tuple([related(node, entry.dnat, f"DNAT to {entry.pod_ip}:{entry.pod_port}")] + evidence),
                port=entry.port, traffic=traffic)


@register("shadowed-host-port")
def shadowed_host_port(context: NodeSnapshots, params: Mapping[str, Any]) -> Iterator[Hit]:
    for node in context.nodes:
        for jump, entries in by_jump(node.host_ports).items():
            pairs: dict[DumpLine, list[HostPortEntry]] = {}
            winners: dict[DumpLine, HostPortEntry] = {}
            partial: dict[DumpLine, list[HostPortEntry]] = {}  # wildcard entries losing one hostIP's packets
            for entry in entries:
                winner = winner_of(node.host_ports, entry)
                if winner is not None:
                    pairs.setdefault(winner.jump, []).append(entry)
                    winners.setdefault(winner.jump, winner)
                    continue
                for winner in partly_shadowed(node.host_ports, entry):
                    partial.setdefault(winner.jump, []).append(entry)
                    winners.setdefault(winner.jump, winner)
            for winner_jump, lost in partial.items():
                winner, entry = winners[winner_jump], lost[0]
                answer, parties = host_port_answer(node, winner, describe_entry(winner))
                sentence, traffic = explain(answer, parties), traffic_data(answer, parties)
                words = phrases.shadowed_effect(pod_of(entry), pod_of(winner), entry.protocol, entry.port, answer,
                                                parties, address=winner.host_ip)
                yield Hit(subject(node, jump), f"hostPort {port_list(lost)} {entry.chain} on {winner.host_ip}",
                          phrases.shadowed_for_address(port_list(lost), node.name, winner.host_ip,
                                                       describe_entry(winner), winner_jump.line,
                                                       describe_entry(entry), entry.protocol, entry.port, sentence,
                                                       headline_ports=first_ports(lost), names=(winner.host_ip,),
                                                       words=words),
                    (related(node, winner_jump, f"winner for {winner.host_ip}: {describe_entry(winner)}"),),
                    port=entry.port, traffic=traffic)
            for winner_jump, lost in pairs.items():
                winner, entry = winners[winner_jump], lost[0]
                host = f" on {entry.host_ip}" if entry.host_ip else ""
                answer, parties = host_port_answer(node, winner, describe_entry(winner))
                sentence, traffic = explain(answer, parties), traffic_data(answer, parties)
                words = phrases.shadowed_effect(pod_of(entry), pod_of(winner), entry.protocol, entry.port, answer,
                                                parties)
                yield Hit(subject(node, jump), f"hostPort {port_list(lost)} {entry.chain}", phrases.shadowed(
                    port_list(lost), host, node.name, describe_entry(winner), winner_jump.line, describe_entry(entry),
                    entry.protocol, entry.port, sentence, winner.backend, headline_ports=first_ports(lost),
                    words=words),
                    (related(node, winner_jump, f"winner: {describe_entry(winner)}"),), port=entry.port,
                    traffic=traffic)


def pod_of(entry: HostPortEntry) -> str:
    """The pod address an entry DNATs to, as messages show it (`10.187.2.34:443`)."""
    return host_ports_text(entry.pod_ip, entry.pod_port)


# --- hostPort jumps ahead of kube-proxy's (KP803) -------------------------------------------------

def captured_services(node: NodeState, entries: list[HostPortEntry], context: NodeSnapshots
                      ) -> list[tuple[str, Answer]]:
    """Service ports equal to a hostPort here that the datapath model says the hostPort pod takes."""
    ports = {(entry.protocol, entry.port) for entry in entries if not entry.host_ip}
    candidates: dict[str, tuple[str, PortUse, int, str]] = {}
    for rule in node.node_ports:
        if (rule.protocol, rule.port) in ports:
            label = node_port_label(rule.port, rule.protocol, rule.service)
            candidates.setdefault(label, (NODE_IP, PortUse(host_port_ip=WILDCARD, node_port=True), rule.port,
                                          rule.protocol))
    for service in context.services:
        for claim in service.node_port_claims if service.has_node_ports else ():
            if (claim.protocol.lower(), claim.port) in ports:
                label = node_port_label(claim.port, claim.protocol.lower(),
                                        f"{service.ref.namespace}/{service.ref.name}")
                candidates.setdefault(label, (NODE_IP, PortUse(host_port_ip=WILDCARD, node_port=True), claim.port,
                                              claim.protocol.lower()))
        for port in service.ports:
            if port.port and (port.protocol.lower(), port.port) in ports and service.cluster_ip not in ("", "None"):
                label = cluster_ip_label(service.cluster_ip, port.port, port.protocol.lower(),
                                         f"{service.ref.namespace}/{service.ref.name}")
                candidates.setdefault(label, (CLUSTER_IP, PortUse(host_port_ip=WILDCARD, service_port=True), port.port,
                                              port.protocol.lower()))
    for rule in node.cluster_ips.on_ports(ports):
        label = cluster_ip_label(rule.address, rule.port, rule.protocol, rule.service)
        candidates.setdefault(label, (CLUSTER_IP, PortUse(host_port_ip=WILDCARD, service_port=True), rule.port,
                                      rule.protocol))
    captured = []
    for label, (destination, use, port, protocol) in candidates.items():
        answer = ask(node, destination, use, port, protocol)
        if answer.possible(HOSTPORT):
            captured.append((label, answer))
    return captured


@register("host-ports-ahead-of-kube-proxy")
def host_ports_ahead_of_kube_proxy(context: NodeSnapshots, params: Mapping[str, Any]) -> Iterator[Hit]:
    for node in context.nodes:
        for hook in ("PREROUTING", "OUTPUT"):
            jumps = [jump for jump in node.entry_jumps if jump.hook == hook]
            for jump in jumps:
                # Only kube-proxy's jump in the same dump and table: positions in another backend's
                # (or family's) table say nothing about which runs first.
                proxy = next((other for other in jumps if other.leads_to == "kube-proxy"
                              and other.source == jump.source), None)
                if jump.leads_to != "host-ports" or proxy is None or jump.index > proxy.index:
                    continue
                entries = [entry for entry in node.host_ports if entry.jump.path == jump.place.path]
                captured = captured_services(node, entries, context)
                traffic = None
                if captured:
                    label, answer = captured[0]
                    parties = {HOSTPORT: "the hostPort pod", SERVICE: label}
                    outcome = phrases.ahead_captures(label, answer, parties, [name for name, _ in captured[1:]])
                    traffic = traffic_data(answer, parties)
                    words = phrases.ahead_effect(label, answer, parties, len(captured) - 1)
                else:
                    outcome = phrases.AHEAD_NOTHING_YET
                    words = phrases.AHEAD_NOTHING_YET_EFFECT
                yield Hit(subject(node, jump.place), f"nat {hook} {jump.chain}", phrases.ahead_of_kube_proxy(
                    hook, jump.chain, jump.index, proxy.index, outcome, node_ports_stay_taken(node), node=node.name,
                    words=words),
                    (related(node, proxy.place, "kube-proxy's jump, which comes later"),), traffic=traffic)


def node_ports_stay_taken(node: NodeState) -> bool:
    """After the repair (the hostPort jump behind kube-proxy's), does a hostPort still take a
    nodePort with its number? (IPVS mode: kube-proxy only marks NodePort packets.)"""
    facts = replace(node_facts(node), hostport_order=Fact(KUBE_PROXY_FIRST, "the repair"))
    answer = Datapath(facts).deliver(FROM_OUTSIDE, NODE_IP, PortUse(host_port_ip=WILDCARD, node_port=True,
                                                                   endpoints=True), 0)
    return answer.possible(HOSTPORT)
