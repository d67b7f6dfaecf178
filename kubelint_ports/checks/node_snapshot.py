"""Node-snapshot rules (KP8xx): a live node diagnosed from its own dumps (incidents 000-003).

Each check reads `model.node_state.NodeSnapshots` and points at the dump line of the rule,
socket or lease at fault. Who receives a packet is decided by the order the node's own rules
show (`receiver_*` below, the one place these checks decide it): the first DNAT that matches
ends the nat traversal (DOMAIN.md B, F).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubelint_ports.checks import Hit, Related, register
from kubelint_ports.findings import ObjectRef
from kubelint_ports.loading.snapshot import Place
from kubelint_ports.model.node_state import (
    READY,
    HostPortEntry,
    NodeSnapshots,
    NodeState,
    ip_in,
    pods_by_ip,
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
    return f"{entry.chain} ({who}, {entry.pod_ip}:{entry.pod_port})"


# --- who receives the packet --------------------------------------------------------------------

def winner_for(entries: list[HostPortEntry], loser: HostPortEntry) -> HostPortEntry | None:
    """The earlier entry that takes every packet `loser` would match (same rule order, same
    backend): a wildcard host IP, or the same host IP."""
    for entry in entries:
        if entry.order >= loser.order:
            return None
        if entry.backend == loser.backend and entry.overlaps(loser) and (not entry.host_ip or entry.host_ip == loser.host_ip):
            return entry
    return None


def shadowed_by(entries: list[HostPortEntry], winner: HostPortEntry) -> list[HostPortEntry]:
    return [entry for entry in entries if entry is not winner and winner_for(entries, entry) is winner]


# --- evidence that a sandbox is gone --------------------------------------------------------------

def dead_reasons(entry: HostPortEntry, node: NodeState, context: NodeSnapshots) -> tuple[list[str], list[Related]]:
    reasons: list[str] = []
    evidence: list[Related] = []
    if entry.sandbox_id and node.sandboxes is not None:
        sandbox = node.sandboxes.get(entry.sandbox_id)
        if sandbox is None:
            reasons.append(f"no sandbox {entry.short_id} runs on {node.name} (crictl pods)")
        elif sandbox.state != READY:
            reasons.append(f"sandbox {entry.short_id} is {sandbox.state} (crictl pods)")
            evidence.append(related(node, sandbox.place, f"sandbox {entry.short_id} is {sandbox.state}"))
    if context.pods is not None:
        on_node = pods_by_ip(context.pods, node.name)
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
    known = (entry.sandbox_id and node.sandboxes is not None) or context.pods is not None or (
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
            winners = [winner for winner in (winner_for(node.host_ports, stale) for stale in entries) if winner]
            if victims:
                victim = next(iter(victims.values()))
                outcome = (f"It comes first, so packets to {ports} on {node.name} are DNATed to {entry.pod_ip}, where "
                           f"nothing answers; the live {describe_entry(victim)} at line {victim.jump.line} receives "
                           f"none of them.")
                evidence += [related(node, loser.jump, f"live entry shadowed: {describe_entry(loser)}")
                             for loser in victims.values()]
            elif len(winners) == len(entries):
                outcome = (f"An earlier entry, {describe_entry(winners[0])} (line {winners[0].jump.line}), shadows it, "
                           f"so it takes no traffic today: delete it before a restart reorders the rules.")
            else:
                outcome = (f"Packets to {ports} on {node.name} are DNATed to {entry.pod_ip}, where nothing answers, "
                           f"instead of reaching whatever should own the port.")
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
                port=entry.port)


@register("shadowed-host-port", reads="node-snapshot")
def shadowed_host_port(context: NodeSnapshots, params: Mapping[str, Any]) -> Iterator[Hit]:
    for node in context.nodes:
        for jump, entries in by_jump(node.host_ports).items():
            pairs: dict[Place, list[HostPortEntry]] = {}
            winners: dict[Place, HostPortEntry] = {}
            for entry in entries:
                winner = winner_for(node.host_ports, entry)
                if winner is not None:
                    pairs.setdefault(winner.jump, []).append(entry)
                    winners.setdefault(winner.jump, winner)
            for winner_jump, lost in pairs.items():
                winner, entry = winners[winner_jump], lost[0]
                host = f" on {entry.host_ip}" if entry.host_ip else ""
                yield Hit(subject(node, jump), f"hostPort {port_list(lost)} {entry.chain}", (
                    f"hostPort {port_list(lost)}{host} is DNATed twice on {node.name}: {describe_entry(winner)} at "
                    f"line {winner_jump.line} comes first and receives every packet, so {describe_entry(entry)} here "
                    f"receives none. Two pods cannot hold one hostPort on a node: one of the two entries is left over "
                    f"from a pod that is gone."),
                    (related(node, winner_jump, f"winner: {describe_entry(winner)}"),), port=entry.port)


def captured_services(node: NodeState, entries: list[HostPortEntry], context: NodeSnapshots) -> list[str]:
    """Services whose traffic on this node the hostPort DNAT entries take, per the node's proxy mode."""
    ports = {(entry.protocol, entry.port) for entry in entries if not entry.host_ip}
    captured: dict[str, None] = {}
    for rule in node.node_ports:
        if (rule.protocol, rule.port) in ports:
            captured[f"nodePort {rule.port}/{rule.protocol}{' of ' + rule.service if rule.service else ''}"] = None
    for service in context.services:
        for claim in service.node_port_claims if service.has_node_ports else ():
            if (claim.protocol.lower(), claim.port) in ports:
                captured[f"nodePort {claim.port}/{claim.protocol.lower()} of {service.ref.namespace}/{service.ref.name}"] = None
    if node.proxy_mode == "ipvs":  # Service IPs are local addresses on kube-ipvs0
        for rule in node.cluster_ips:
            if (rule.protocol, rule.port) in ports:
                captured[f"{rule.address}:{rule.port}/{rule.protocol}{' (' + rule.service + ')' if rule.service else ''}"] = None
        for service in context.services:
            for port in service.ports:
                if port.port and (port.protocol.lower(), port.port) in ports and service.cluster_ip not in ("", "None"):
                    captured[f"{service.cluster_ip}:{port.port}/{port.protocol.lower()} ({service.ref.namespace}/"
                             f"{service.ref.name})"] = None
    return list(captured)


@register("host-ports-ahead-of-kube-proxy", reads="node-snapshot")
def host_ports_ahead_of_kube_proxy(context: NodeSnapshots, params: Mapping[str, Any]) -> Iterator[Hit]:
    for node in context.nodes:
        for hook in ("PREROUTING", "OUTPUT"):
            jumps = [jump for jump in node.entry_jumps if jump.hook == hook]
            proxy = next((jump for jump in jumps if jump.leads_to == "kube-proxy"), None)
            for jump in jumps:
                if jump.leads_to != "host-ports" or proxy is None or jump.index > proxy.index:
                    continue
                entries = [entry for entry in node.host_ports if entry.jump.path == jump.place.path]
                captured = captured_services(node, entries, context)
                outcome = (f"on this node they take {listed(captured)}" if captured else
                           "no Service port on this node equals a hostPort today, but any later NodePort (and in IPVS "
                           "mode any ClusterIP port) that does will be taken")
                yield Hit(subject(node, jump.place), f"nat {hook} {jump.chain}", (
                    f"{hook} jumps to {jump.chain} (rule {jump.index + 1}) before kube-proxy's KUBE-SERVICES (rule "
                    f"{proxy.index + 1}): hostPort DNATs see every local packet first (portmap before v0.7.5, or CRI-O; "
                    f"CVE-2019-9946), so the hostPort pods receive what was meant for Services: {outcome}. Upgrade "
                    f"the CNI plugins (portmap appends its jump since v0.7.5) and flush the old jump."),
                    (related(node, proxy.place, "kube-proxy's jump, which comes later"),))


def cidr_of(text: str):
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def pod_addresses(node: NodeState, context: NodeSnapshots) -> list[tuple[str, str]]:
    """(pod IP or range, where it comes from) that the masquerade rule's CIDR must contain."""
    found = [(lease.address, f"IPAM lease line {lease.place.line}") for lease in node.leases[:50]]
    found += [(cidr, f"podCIDR of Node {node.name}") for cidr in context.node_pod_cidrs.get(node.name, ())]
    if context.pods is not None:
        found += [(ip, f"pod {pod.namespace}/{pod.name}") for ip, pod in list(pods_by_ip(context.pods, node.name).items())[:50]]
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
            yield Hit(subject(node, anchor), "nat KUBE-SERVICES masquerade", (
                f"kube-proxy ({mode} mode) on {node.name} has no `! -s <clusterCIDR> ... -j KUBE-MARK-MASQ` rule "
                f"for Service traffic: it runs without clusterCIDR (--cluster-cidr). Packets from the node itself "
                f"and from hostNetwork pods reach a Service's endpoint with the ClusterIP as source address, so the "
                f"endpoint's reply never comes back (incident 002); pod clients are not affected. Set clusterCIDR to "
                f"the pod CIDR in kube-proxy's configuration."), variant=mode)
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
        host_ports: dict[tuple[str, int], list[HostPortEntry]] = {}
        for entry in node.host_ports:
            host_ports.setdefault((entry.protocol, entry.port), []).append(entry)
        services = {(claim.protocol.lower(), claim.port): service for service in context.services
                    if service.has_node_ports for claim in service.node_port_claims}
        for listener in node.listeners:
            if any(name in KUBE_PROXY_PROCESSES for name, _ in listener.processes):
                continue  # kube-proxy <= 1.23 holds its own nodePorts open
            key = (listener.protocol, listener.port)
            entries = [e for e in host_ports.get(key, ()) if covers(listener.address, e.host_ip)]
            if entries:
                entry = min(entries, key=lambda e: e.order)
                yield Hit(subject(node, listener.place), f"listener {listener.protocol}/{listener.port}", (
                    f"{listener.process_text} listens on {listener.address}:{listener.port}/{listener.protocol}, but the "
                    f"hostPort DNAT {describe_entry(entry)} takes that port first: packets to it on {node.name} "
                    f"reach the pod at {entry.pod_ip}:{entry.pod_port}, never the process, and no socket of the "
                    f"pod shows in ss. Move the process or the hostPort."),
                    (related(node, entry.jump, f"hostPort DNAT {describe_entry(entry)}"),), port=listener.port)
                continue
            rules = node_ports.get(key)
            if not rules:
                continue
            if node.proxy_mode == "nftables" and listener.address.startswith("127."):
                continue  # kube-proxy's nftables NodePorts skip 127.0.0.0/8
            rule = next((r for r in rules if r.action == "reject"), rules[0])
            service = rule.service or (f"{services[key].ref.namespace}/{services[key].ref.name}" if key in services
                                       else "a Service")
            if rule.action == "reject":
                outcome = (f"{service} has no endpoints, so kube-proxy REJECTs the port: clients get \"connection "
                           f"refused\" although the socket is open")
            elif rule.action == "mark":
                outcome = f"IPVS forwards the port to the endpoints of {service}"
            else:
                outcome = f"kube-proxy DNATs the port to the endpoints of {service}"
            yield Hit(subject(node, listener.place), f"listener {listener.protocol}/{listener.port}", (
                f"{listener.process_text} listens on {listener.address}:{listener.port}/{listener.protocol}, which is "
                f"nodePort {listener.port} of {service}: {outcome}, before the process sees a packet (incident "
                f"003). Move the process below the node-port range, or give the Service another nodePort."),
                (related(node, rule.place, f"nodePort {listener.port} of {service}"),), port=listener.port)


def fact_keys(node: NodeState) -> dict[tuple[str, ...], Place]:
    """Rules that should match across nodes, keyed by what they do (first place kept)."""
    keys: dict[tuple[str, ...], Place] = {}
    for entry in node.host_ports:
        keys.setdefault(("host-port", entry.protocol, str(entry.port)), entry.jump)
    for rule in node.node_ports:
        keys.setdefault(("service", f"nodePort {rule.port}/{rule.protocol}" + (f" of {rule.service}" if rule.service else "")),
                        rule.place)
    for rule in node.cluster_ips:
        keys.setdefault(("service", f"{rule.address}:{rule.port}/{rule.protocol}" + (f" ({rule.service})" if rule.service else "")),
                        rule.place)
    return keys


@register("node-drift", reads="node-snapshot")
def node_drift(context: NodeSnapshots, params: Mapping[str, Any]) -> Iterator[Hit]:
    nodes = [node for node in context.nodes if node.entry_jumps or node.node_ports or node.cluster_ips]
    if len(nodes) < 2:
        return
    keys = {node.name: fact_keys(node) for node in nodes}
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
                yield Hit(subject(node, keys[node.name][key]), f"drift {' '.join(key)}", (
                    f"{what} exists on {node.name} but not on {listed([n.name for n in lacking])}: "
                    + ("a hostPort pod runs here only; on this node that port goes to the pod, on the others to "
                       "whatever listens (how incident 000 was found)." if key[0] == "host-port" else
                       "kube-proxy programs every Service on every node, so one of them is out of date: packets to it "
                       "are handled differently depending on the node they reach. Restart the lagging kube-proxy.")),
                    variant=key[0])
        elif key[0] == "service":
            for node in lacking:
                missing_on.setdefault(node.name, []).append(key[1])
    for node in nodes:
        missing = missing_on.get(node.name)
        if missing and node.services_anchor is not None:
            yield Hit(subject(node, node.services_anchor), "drift missing services", (
                f"{node.name} lacks kube-proxy rules that the other nodes have ({len(missing)}: {listed(missing)}): "
                f"its kube-proxy is out of date or failing, so packets to those Services that reach this node are "
                f"not forwarded. Check its kube-proxy logs and restart it."), variant="service")
