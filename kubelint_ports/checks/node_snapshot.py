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
from kubelint_ports.checks.traffic import data, explain, node_destination
from kubelint_ports.findings import ObjectRef
from kubelint_ports.loading.snapshot import Place
from kubelint_ports.model.datapath import (
    CLUSTER_IP,
    FROM_POD,
    HOST_PROCESS,
    HOSTPORT,
    NODE_IP,
    SERVICE,
    WILDCARD,
    Answer,
    Datapath,
    PortUse,
    first_dnat,
    masquerade_gap,
)
from kubelint_ports.model.node_state import (
    READY,
    ClusterIpRule,
    HostPortEntry,
    NodePortRule,
    NodeSnapshots,
    NodeState,
    datapath_facts,
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

def ask(node: NodeState, destination: str, use: PortUse, port: int, protocol: str) -> Answer:
    """The datapath model's answer for a packet from a pod or another machine to this node."""
    return Datapath(datapath_facts(node)).deliver(FROM_POD, destination, use, port, protocol.upper())


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
    return explain(answer, parties), data(answer, parties)

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
                outcome = (f"For {entry.protocol}/{entry.port}: {sentence}. It comes first in its chain, so the live "
                           f"{describe_entry(victim)} at line {victim.jump.line} receives none of {ports}.")
                evidence += [related(node, loser.jump, f"live entry shadowed: {describe_entry(loser)}")
                             for loser in victims.values()]
            elif len(winners) == len(entries):
                outcome = (f"An earlier entry, {describe_entry(winners[0])} (line {winners[0].jump.line}), shadows it, "
                           f"so it takes no traffic today: delete it before a restart reorders the rules.")
            else:
                outcome = f"For {entry.protocol}/{entry.port}: {sentence}."
            hash_note = ""
            if entry.chain_name_matches is False:
                hash_note = (f" The chain name does not match sha512(\"{entry.network}\" + ID): portmap did not write "
                             f"it as it stands.")
            fix = (f"`iptables -t nat -D CNI-HOSTPORT-DNAT` this rule, then `iptables -t nat -F {entry.chain}` and "
                   f"`-X {entry.chain}`" if entry.backend == "portmap-iptables" else f"delete this rule ({entry.backend})")
            yield Hit(subject(node, jump), f"hostPort {ports} {entry.chain}", (
                f"stale hostPort DNAT: {describe_entry(entry)} maps {ports}, but {'; '.join(reasons)}: the sandbox's "
                f"teardown never ran (incident 001). {outcome}{hash_note} Fix: {fix}."),
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
                yield Hit(subject(node, jump), f"hostPort {port_list(lost)} {entry.chain} on {winner.host_ip}", (
                    f"hostPort {port_list(lost)} is DNATed twice on {node.name} for {winner.host_ip}: "
                    f"{describe_entry(winner)} at line {winner_jump.line}, bound to {winner.host_ip}, comes first in "
                    f"the chain, so {describe_entry(entry)} here receives nothing sent to {winner.host_ip}, only what "
                    f"is sent to the node's other addresses. For {entry.protocol}/{entry.port} to {winner.host_ip}: "
                    f"{sentence}. Two pods cannot hold one hostPort on a node (one bound to a hostIP conflicts with "
                    f"one on every address): one of the two entries is left over from a pod that is gone."),
                    (related(node, winner_jump, f"winner for {winner.host_ip}: {describe_entry(winner)}"),),
                    port=entry.port, traffic=traffic)
            for winner_jump, lost in pairs.items():
                winner, entry = winners[winner_jump], lost[0]
                host = f" on {entry.host_ip}" if entry.host_ip else ""
                sentence, traffic = host_port_answer(node, winner, describe_entry(winner))
                yield Hit(subject(node, jump), f"hostPort {port_list(lost)} {entry.chain}", (
                    f"hostPort {port_list(lost)}{host} is DNATed twice on {node.name}: {describe_entry(winner)} at "
                    f"line {winner_jump.line} comes first in the chain, so {describe_entry(entry)} here receives "
                    f"nothing. For {entry.protocol}/{entry.port}: {sentence}. Two pods cannot hold one hostPort on a "
                    f"node: one of the two entries is left over from a pod that is gone."),
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
                    outcome = (f"for {label}: {explain(answer, parties)}"
                               + (f"; likewise {listed([name for name, _ in captured[1:]])}" if len(captured) > 1 else ""))
                    traffic = data(answer, parties)
                else:
                    outcome = ("no Service port on this node equals a hostPort today, but a later NodePort (and in IPVS "
                               "mode a ClusterIP port) that does will be taken")
                yield Hit(subject(node, jump.place), f"nat {hook} {jump.chain}", (
                    f"{hook} jumps to {jump.chain} (rule {jump.index + 1}) before kube-proxy's KUBE-SERVICES (rule "
                    f"{proxy.index + 1}): hostPort DNATs see every local packet first (portmap before v0.7.5 wrote it so, "
                    f"CVE-2019-9946; current portmap and CRI-O append). {outcome[:1].upper()}{outcome[1:]}. Upgrade the CNI plugins (portmap "
                    f"appends its jump since v0.7.5) and flush the old jump."),
                    (related(node, proxy.place, "kube-proxy's jump, which comes later"),), traffic=traffic)


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
            yield Hit(subject(node, anchor), "nat KUBE-SERVICES masquerade", (
                f"kube-proxy ({mode} mode) on {node.name} has no `! -s <clusterCIDR> ... -j KUBE-MARK-MASQ` rule "
                f"for Service traffic: it runs without clusterCIDR (--cluster-cidr). Its rules say: {gap} Pod "
                f"clients are not affected. Set clusterCIDR to the pod CIDR in kube-proxy's configuration."),
                variant=mode)
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
            yield Hit(subject(node, rule.place), "nat KUBE-SERVICES masquerade", (
                f"kube-proxy's masquerade rule on {node.name} exempts `! -s {rule.negated_source}`, but {what}: "
                f"clusterCIDR must be the pod CIDR. Pods outside it are masqueraded needlessly, and node or "
                f"hostNetwork clients inside it keep a source address the endpoint cannot answer (incident 002's "
                f"detour). Set clusterCIDR to the pod CIDR."), variant=mode)
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
                # A hostIP-bound entry sees only packets to its hostIP, which the listener covers:
                # ask about that address (any other node address never meets the DNAT).
                answer = ask(node, node_destination(use.host_port_ip), use, listener.port, listener.protocol)
                if not answer.possible(HOSTPORT):
                    continue
                parties = {HOSTPORT: f"the pod at {entry.pod_ip}:{entry.pod_port}", HOST_PROCESS: listener.process_text}
                yield Hit(subject(node, listener.place), f"listener {listener.protocol}/{listener.port}", (
                    f"{listener.process_text} listens on {shown}/{listener.protocol}, but "
                    f"the hostPort DNAT {describe_entry(entry)} matches that port on {node.name}: "
                    f"{explain(answer, parties)}. No socket of the pod shows in ss. Move the process or the hostPort."),
                    (related(node, entry.jump, f"hostPort DNAT {describe_entry(entry)}"),), port=listener.port,
                    traffic=data(answer, parties))
                continue
            rules = [rule for rule in node_ports.get(key, ()) if same_family(listener.family, rule.family)]
            if not rules:
                continue
            if node.proxy_mode == "nftables" and listener.address.startswith("127."):
                continue  # kube-proxy's nftables NodePorts skip 127.0.0.0/8
            rule = next((r for r in rules if r.action == "reject"), rules[0])
            service = rule.service or (f"{services[key].ref.namespace}/{services[key].ref.name}" if key in services
                                       else "a Service")
            use = PortUse(host_process=True, node_port=True, endpoints=rule.action != "reject")
            answer = ask(node, NODE_IP, use, listener.port, listener.protocol)
            if answer.always(HOST_PROCESS):
                continue
            parties = {HOST_PROCESS: listener.process_text, SERVICE: service}
            yield Hit(subject(node, listener.place), f"listener {listener.protocol}/{listener.port}", (
                f"{listener.process_text} listens on {shown}/{listener.protocol}, which is "
                f"nodePort {listener.port} of {service}: {explain(answer, parties)} (incident 003). "
                f"Move the process below the node-port range, or give the Service another nodePort."),
                (related(node, rule.place, f"nodePort {listener.port} of {service}"),), port=listener.port,
                traffic=data(answer, parties))


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
    return explain(answer, parties), data(answer, parties)


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
        what = f"hostPort {key[1]}/{key[2]} DNAT" if key[0] == "host-port" else f"kube-proxy's rule for {key[1]}"
        if len(having) <= len(lacking):
            for node in having:
                traffic = None
                if key[0] == "host-port":
                    answer = ask(node, NODE_IP, PortUse(host_port_ip=WILDCARD), int(key[2]), key[1])
                    traffic = data(answer, {HOSTPORT: "the hostPort pod"})
                yield Hit(subject(node, keys[node.name][key]), f"drift {' '.join(key)}", (
                    f"{what} exists on {node.name} but not on {listed([n.name for n in lacking])}: "
                    + ("a hostPort pod runs here only; on this node that port goes to the pod, on the others to "
                       "whatever listens (how incident 000 was found)." if key[0] == "host-port" else
                       "kube-proxy programs every Service on every node, so one of them is out of date: packets to it "
                       "are handled differently depending on the node they reach. Restart the lagging kube-proxy.")),
                    variant=key[0], traffic=traffic)
        elif key[0] == "service":
            for node in lacking:
                missing_on.setdefault(node.name, []).append(key[1])
    for node in nodes:
        missing = missing_on.get(node.name)
        if missing and node.services_anchor is not None:
            first = missing[0]
            said, traffic = missing_rule_answer(node, rules[("service", first)], first)
            yield Hit(subject(node, node.services_anchor), "drift missing services", (
                f"{node.name} lacks {len(missing)} kube-proxy rule{'s' if len(missing) > 1 else ''} that the other "
                f"nodes have ({listed(missing)}): "
                f"its kube-proxy is out of date or failing, so packets to those Services that reach this node are "
                f"not forwarded; for {first} here, {said}. Check its kube-proxy logs and restart it."),
                variant="service", traffic=traffic)
