"""Node-snapshot rules (KP8xx): a live node diagnosed from its own dumps (incidents 000-003).

Each check reads `model.node_state.NodeSnapshots` and points at the dump line of the rule,
socket or lease at fault. Who receives a packet is the datapath model's answer
(`model.datapath`), given the facts the node's own dumps establish (`node_state.datapath_facts`:
kube-proxy's mode, how hostPorts are implemented, the observed jump order), and which of two
hostPort entries of one chain wins too (`datapath.first_dnat`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kubelint_ports.checks import Hit, Related, register
from kubelint_ports.checks.traffic import node_destination
from kubelint_ports.findings import ObjectRef
from kubelint_ports.loading.snapshot import Place
from kubelint_ports.model.datapath import (
    CLUSTER_IP,
    FROM_NODE,
    FROM_OUTSIDE,
    FROM_POD,
    HOST_PROCESS,
    HOSTPORT,
    KUBE_PROXY_FIRST,
    LOCALHOST,
    NODE_IP,
    SERVICE,
    WILDCARD,
    Answer,
    Datapath,
    Fact,
    PortUse,
    explain,
    first_dnat,
    masquerade_gap,
    phrases_node,
    traffic_data,
)
from kubelint_ports.model.datapath.node import node_facts
from kubelint_ports.model.node_state import (
    READY,
    ClusterIpRule,
    HostPortEntry,
    NodePortRule,
    NodeSnapshots,
    NodeState,
    host_ports_text,
    same_family,
)

MAX_LISTED = 5
KUBE_PROXY_PROCESSES = frozenset(("kube-proxy", "hyperkube"))


@dataclass(frozen=True, slots=True)
class DumpSubject:
    """A finding's subject: a dump line of a node (`document` is where; `ref` names the node)."""

    document: Place
    ref: ObjectRef


def subject(node: NodeState, where: Place) -> DumpSubject:
    return DumpSubject(where, ObjectRef("v1", "Node", "", node.name))


def related(node: NodeState, where: Place, message: str) -> Related:
    return Related(subject(node, where), "", message)


def listed(items: list[str]) -> str:
    more = f" and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else ""
    return ", ".join(items[:MAX_LISTED]) + more


def describe_entry(entry: HostPortEntry) -> str:
    who = f"sandbox {entry.short_id}" if entry.sandbox_id else entry.short_id
    return f"{entry.chain} ({who}, {host_ports_text(entry.pod_ip, entry.pod_port)})"


# --- who receives the packet --------------------------------------------------------------------

def ask(node: NodeState, destination: str, use: PortUse, port: int, protocol: str, client: str = FROM_POD) -> Answer:
    """The datapath model's answer for a packet to this node, with the facts its dumps establish."""
    return Datapath(node_facts(node)).deliver(client, destination, use, port, protocol.upper())


def node_port_on(node: NodeState, protocol: str, port: int) -> bool:
    return any(rule.protocol == protocol and rule.port == port for rule in node.node_ports)


def host_port_answer(node: NodeState, entry: HostPortEntry, receiver_name: str) -> tuple[str, dict]:
    """Who gets a packet to the entry's port on the node (its hostIP, when it is bound to one),
    told with `receiver_name` as the hostPort side."""
    use = PortUse(host_port_ip=entry.host_ip or WILDCARD, node_port=node_port_on(node, entry.protocol, entry.port))
    answer = ask(node, node_destination(use.host_port_ip), use, entry.port, entry.protocol)
    parties = {HOSTPORT: receiver_name}
    if use.node_port:
        parties[SERVICE] = f"nodePort {entry.port}"
    return explain(answer, parties), traffic_data(answer, parties)


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


def by_jump(entries: list[HostPortEntry]) -> dict[Place, list[HostPortEntry]]:
    """Entries grouped by the rule that jumps to them (one portmap rule carries up to 15 ports)."""
    groups: dict[Place, list[HostPortEntry]] = {}
    for entry in entries:
        groups.setdefault(entry.jump, []).append(entry)
    return groups


def port_list(entries: list[HostPortEntry]) -> str:
    protocol = entries[0].protocol
    ports = [str(entry.port) for entry in entries]
    return f"{protocol}/{listed(ports)}" if len(ports) > 1 else f"{protocol}/{ports[0]}"


@register("stale-host-port-dnat", reads="node-snapshot")
def stale_host_port_dnat(context: NodeSnapshots, params: Mapping[str, Any]) -> Iterator[Hit]:
    for node in context.nodes:
        for jump, entries in by_jump(node.host_ports).items():
            entry = entries[0]
            reasons, evidence = dead_reasons(entry, node, context)
            if not reasons:
                continue
            ports = port_list(entries)
            victims: dict[Place, HostPortEntry] = {}
            for stale in entries:
                for loser in shadowed_by(node.host_ports, stale):
                    if is_live(loser, node, context):
                        victims.setdefault(loser.jump, loser)
            winners = [winner for winner in (winner_of(node.host_ports, stale) for stale in entries) if winner]
            sentence, traffic = host_port_answer(node, entry, f"{entry.pod_ip} (the stale entry, where nothing answers)")
            if victims:
                victim = next(iter(victims.values()))
                outcome = phrases_node.stale_outcome_shadowing(entry.protocol, entry.port, sentence,
                                                               describe_entry(victim), victim.jump.line, ports,
                                                               entry.backend)
                evidence += [related(node, loser.jump, f"live entry shadowed: {describe_entry(loser)}")
                             for loser in victims.values()]
            elif len(winners) == len(entries):
                outcome = phrases_node.stale_outcome_shadowed(describe_entry(winners[0]), winners[0].jump.line,
                                                              entry.backend)
            else:
                outcome = phrases_node.stale_outcome(entry.protocol, entry.port, sentence)
            hash_note = phrases_node.chain_name_mismatch(entry.network) if entry.chain_name_matches is False else ""
            udp_ports = sorted({e.port for e in entries if e.protocol == "udp"})
            fix = phrases_node.stale_fix(entry.backend, entry.chain, udp_ports)
            yield Hit(subject(node, jump), f"hostPort {ports} {entry.chain}", phrases_node.stale_entry(
                describe_entry(entry), ports, "; ".join(reasons), outcome, hash_note, fix),
                tuple([related(node, entry.dnat, f"DNAT to {entry.pod_ip}:{entry.pod_port}")] + evidence),
                port=entry.port, traffic=traffic)


@register("shadowed-host-port", reads="node-snapshot")
def shadowed_host_port(context: NodeSnapshots, params: Mapping[str, Any]) -> Iterator[Hit]:
    for node in context.nodes:
        for jump, entries in by_jump(node.host_ports).items():
            pairs: dict[Place, list[HostPortEntry]] = {}
            winners: dict[Place, HostPortEntry] = {}
            partial: dict[Place, list[HostPortEntry]] = {}  # wildcard entries losing one hostIP's packets
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
                sentence, traffic = host_port_answer(node, winner, describe_entry(winner))
                yield Hit(subject(node, jump), f"hostPort {port_list(lost)} {entry.chain} on {winner.host_ip}",
                          phrases_node.shadowed_for_address(port_list(lost), node.name, winner.host_ip,
                                                            describe_entry(winner), winner_jump.line,
                                                            describe_entry(entry), entry.protocol, entry.port, sentence),
                    (related(node, winner_jump, f"winner for {winner.host_ip}: {describe_entry(winner)}"),),
                    port=entry.port, traffic=traffic)
            for winner_jump, lost in pairs.items():
                winner, entry = winners[winner_jump], lost[0]
                host = f" on {entry.host_ip}" if entry.host_ip else ""
                sentence, traffic = host_port_answer(node, winner, describe_entry(winner))
                yield Hit(subject(node, jump), f"hostPort {port_list(lost)} {entry.chain}", phrases_node.shadowed(
                    port_list(lost), host, node.name, describe_entry(winner), winner_jump.line, describe_entry(entry),
                    entry.protocol, entry.port, sentence, winner.backend),
                    (related(node, winner_jump, f"winner: {describe_entry(winner)}"),), port=entry.port,
                    traffic=traffic)


def captured_services(node: NodeState, entries: list[HostPortEntry], context: NodeSnapshots
                      ) -> list[tuple[str, Answer]]:
    """Service ports equal to a hostPort here that the datapath model says the hostPort pod takes."""
    ports = {(entry.protocol, entry.port) for entry in entries if not entry.host_ip}
    candidates: dict[str, tuple[str, PortUse, int, str]] = {}
    for rule in node.node_ports:
        if (rule.protocol, rule.port) in ports:
            label = f"nodePort {rule.port}/{rule.protocol}{' of ' + rule.service if rule.service else ''}"
            candidates.setdefault(label, (NODE_IP, PortUse(host_port_ip=WILDCARD, node_port=True), rule.port,
                                          rule.protocol))
    for service in context.services:
        for claim in service.node_port_claims if service.has_node_ports else ():
            if (claim.protocol.lower(), claim.port) in ports:
                label = f"nodePort {claim.port}/{claim.protocol.lower()} of {service.ref.namespace}/{service.ref.name}"
                candidates.setdefault(label, (NODE_IP, PortUse(host_port_ip=WILDCARD, node_port=True), claim.port,
                                              claim.protocol.lower()))
        for port in service.ports:
            if port.port and (port.protocol.lower(), port.port) in ports and service.cluster_ip not in ("", "None"):
                label = f"{host_ports_text(service.cluster_ip, port.port)}/{port.protocol.lower()} ({service.ref.namespace}/{service.ref.name})"
                candidates.setdefault(label, (CLUSTER_IP, PortUse(host_port_ip=WILDCARD, service_port=True), port.port,
                                              port.protocol.lower()))
    for rule in node.cluster_ips:
        if (rule.protocol, rule.port) in ports:
            label = f"{host_ports_text(rule.address, rule.port)}/{rule.protocol}{' (' + rule.service + ')' if rule.service else ''}"
            candidates.setdefault(label, (CLUSTER_IP, PortUse(host_port_ip=WILDCARD, service_port=True), rule.port,
                                          rule.protocol))
    captured = []
    for label, (destination, use, port, protocol) in candidates.items():
        answer = ask(node, destination, use, port, protocol)
        if answer.possible(HOSTPORT):
            captured.append((label, answer))
    return captured


@register("host-ports-ahead-of-kube-proxy", reads="node-snapshot")
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
                    outcome = phrases_node.ahead_captures(label, answer, parties, [name for name, _ in captured[1:]])
                    traffic = traffic_data(answer, parties)
                else:
                    outcome = phrases_node.AHEAD_NOTHING_YET
                yield Hit(subject(node, jump.place), f"nat {hook} {jump.chain}", phrases_node.ahead_of_kube_proxy(
                    hook, jump.chain, jump.index, proxy.index, outcome, node_ports_stay_taken(node)),
                    (related(node, proxy.place, "kube-proxy's jump, which comes later"),), traffic=traffic)


def node_ports_stay_taken(node: NodeState) -> bool:
    """After the repair (the hostPort jump behind kube-proxy's), does a hostPort still take a
    nodePort with its number? (IPVS mode: kube-proxy only marks NodePort packets.)"""
    facts = replace(node_facts(node), hostport_order=Fact(KUBE_PROXY_FIRST, "the repair"))
    answer = Datapath(facts).deliver(FROM_OUTSIDE, NODE_IP, PortUse(host_port_ip=WILDCARD, node_port=True,
                                                                   endpoints=True), 0)
    return answer.possible(HOSTPORT)


def cidr_of(text: str):
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def pod_addresses(node: NodeState, context: NodeSnapshots) -> list[tuple[str, str]]:
    """(pod IP or range, where it comes from) that the masquerade rule's CIDR must contain."""
    found = [(lease.address, f"IPAM lease line {lease.place.line}") for lease in node.leases[:50]]
    found += [(cidr, f"podCIDR of Node {node.name}") for cidr in context.node_pod_cidrs.get(node.name, ())]
    on_node = context.pods_on(node.name)
    if on_node is not None:
        found += [(ip, f"pod {pod.namespace}/{pod.name}") for ip, pod in list(on_node.items())[:50]]
    found += [(str(cidr), "the cluster's pod CIDR") for cidr in context.pod_cidrs]
    return found


def service_addresses(node: NodeState, context: NodeSnapshots) -> list[str]:
    addresses = [rule.address for rule in node.cluster_ips][:200]
    addresses += [a.address for a in node.addresses if a.interface == "kube-ipvs0"][:200]
    return addresses


def contains(cidr, item: str) -> bool:
    network = cidr_of(item)
    return network is not None and network.version == cidr.version and network.subnet_of(cidr)


@register("kube-proxy-masquerade-rule", reads="node-snapshot")
def kube_proxy_masquerade_rule(context: NodeSnapshots, params: Mapping[str, Any]) -> Iterator[Hit]:
    for node in context.nodes:
        mode = node.proxy_mode
        if mode not in ("ipvs", "iptables") or node.services_anchor is None:
            continue
        form = "ipvs-set" if mode == "ipvs" else "per-service"
        rules = [rule for rule in node.masquerade if rule.form == form]
        if mode == "iptables" and not node.cluster_ip_service_rules:
            continue  # no ClusterIP Services: nothing to masquerade, nothing to judge
        marking = [rule for rule in rules if rule.negated_source or rule.set_flags != "src,dst"]
        if not marking or not any(rule.negated_source for rule in rules) and all(
                rule.set_flags == "src,dst" for rule in rules):
            anchor = rules[0].place if rules else node.services_anchor
            # The `KUBE-CLUSTER-IP src,dst` rule came with kube-proxy v1.11 (kubernetes#63319): its
            # presence dates the node's kube-proxy for the datapath model.
            version = (1, 11) if rules else (1, 10) if mode == "ipvs" else None
            gap = " ".join(f"{g.text}." for g in masquerade_gap(mode, version))
            yield Hit(subject(node, anchor), "nat KUBE-SERVICES masquerade",
                      phrases_node.masquerade_rule_missing(mode, node.name, gap), variant=mode)
            continue
        service_space = [cidr for cidr in context.service_cidrs]
        by_range: dict[str, object] = {}
        for rule in rules:  # iptables mode writes one per Service: judge each range once
            if rule.negated_source:
                by_range.setdefault(rule.negated_source, rule)
        for rule in by_range.values():
            cidr = cidr_of(rule.negated_source)
            if cidr is None:
                continue
            services_inside = [address for address in service_addresses(node, context) if contains(cidr, address)]
            is_service_cidr = any(cidr.version == s.version and (cidr.overlaps(s)) for s in service_space) or (
                services_inside and not any(contains(cidr, item) for item, _ in pod_addresses(node, context)))
            missing = [(item, why) for item, why in pod_addresses(node, context) if not contains(cidr, item)
                       and (cidr_of(item) is not None and cidr_of(item).version == cidr.version)]
            if is_service_cidr:
                what = (f"{rule.negated_source} is the Service range (it holds ClusterIPs such as "
                        f"{services_inside[0]})" if services_inside else f"{rule.negated_source} overlaps the Service CIDR")
            elif missing:
                item, why = missing[0]
                what = f"{rule.negated_source} does not contain {item} ({why})"
            else:
                continue
            yield Hit(subject(node, rule.place), "nat KUBE-SERVICES masquerade",
                      phrases_node.masquerade_rule_wrong_range(node.name, rule.negated_source, what), variant=mode)
            break


def covers(listener_address: str, host_ip: str) -> bool:
    if not host_ip:
        return True
    return listener_address in ("*", "0.0.0.0", "::", host_ip)


@register("host-process-loses-port", reads="node-snapshot")
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
        for listener in node.listeners:
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
                          phrases_node.process_loses_to_host_port(listener.process_text, shown, listener.protocol,
                                                                  describe_entry(entry), node.name, answer, parties),
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
                      phrases_node.process_loses_to_node_port(listener.process_text, shown, listener.protocol,
                                                              listener.port, service, answer, parties, paths),
                      (related(node, rule.place, f"nodePort {listener.port} of {service}"),), port=listener.port,
                      traffic=traffic_data(answer, parties, paths))


def listener_packet(address: str, destination: str, client: str = FROM_POD) -> tuple[str, str]:
    """The packet a listening socket on `address` would take: a loopback socket only gets what the
    node itself sends to it, any other one the packets to the node's address."""
    if address.startswith("127.") or address == "::1":
        return FROM_NODE, LOCALHOST
    return client, destination


def fact_keys(node: NodeState, rules: dict | None = None) -> dict[tuple[str, ...], Place]:
    """Rules that should match across nodes, keyed by what they do (first place kept); `rules`,
    when given, collects the Service rule behind each Service key."""
    keys: dict[tuple[str, ...], Place] = {}
    for entry in node.host_ports:
        keys.setdefault(("host-port", entry.protocol, str(entry.port)), entry.jump)
    for rule in node.node_ports:
        key = ("service", f"nodePort {rule.port}/{rule.protocol}" + (f" of {rule.service}" if rule.service else ""))
        keys.setdefault(key, rule.place)
        if rules is not None:
            rules.setdefault(key, rule)
    for rule in node.cluster_ips:
        key = ("service", f"{host_ports_text(rule.address, rule.port)}/{rule.protocol}" + (f" ({rule.service})" if rule.service else ""))
        keys.setdefault(key, rule.place)
        if rules is not None:
            rules.setdefault(key, rule)
    return keys


def missing_rule_answer(node: NodeState, rule: NodePortRule | ClusterIpRule, label: str) -> tuple[str, dict]:
    """Who gets a packet for a Service rule this node lacks: what else holds the port here decides."""
    if isinstance(rule, NodePortRule):
        listening = any(listener.protocol == rule.protocol and listener.port == rule.port for listener in node.listeners)
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
    return explain(answer, parties), traffic_data(answer, parties)


@register("node-drift", reads="node-snapshot")
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
        what = phrases_node.drift_what(key[0], key[1], key[2] if len(key) > 2 else "")
        if len(having) <= len(lacking):
            for node in having:
                traffic = None
                if key[0] == "host-port":
                    answer = ask(node, NODE_IP, PortUse(host_port_ip=WILDCARD), int(key[2]), key[1])
                    traffic = traffic_data(answer, {HOSTPORT: "the hostPort pod"})
                yield Hit(subject(node, keys[node.name][key]), f"drift {' '.join(key)}", phrases_node.drift_present(
                    what, node.name, listed([n.name for n in lacking]), key[0] == "host-port"),
                    variant=key[0], traffic=traffic)
        elif key[0] == "service":
            for node in lacking:
                missing_on.setdefault(node.name, []).append(key[1])
    for node in nodes:
        missing = missing_on.get(node.name)
        if missing and node.services_anchor is not None:
            first = missing[0]
            said, traffic = missing_rule_answer(node, rules[("service", first)], first)
            yield Hit(subject(node, node.services_anchor), "drift missing services", phrases_node.drift_missing(
                node.name, len(missing), listed(missing), first, said), variant="service", traffic=traffic)
