"""The port map: per node, which host ports are claimed, by whom, and where they clash.

A view of the model for `kubelint-ports ports`, not a rule: it shows what the rules reason about.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import TextIO

from kubelint_ports.loading import held
from kubelint_ports.model import Cluster, Workload
from kubelint_ports.model.allocation import allocate, unconstrained_daemonset
from kubelint_ports.model.placement import pinned_node

ANY_NODE = "(any node)"
EVERY_NODE = "(every node)"


@dataclass(frozen=True, slots=True, order=True)
class PortEntry:
    port: int
    protocol: str
    host_ip: str
    kind: str  # hostPort | hostNetwork | nodePort
    owner: str
    pods: str
    certainty: str  # "runs" (DaemonSet, running or pinned pod) or "may run"
    location: str
    conflict: str = ""


def build_port_map(cluster: Cluster) -> dict[str, list[PortEntry]]:
    """Node name -> entries; without an inventory, pinned node names and "(any node)"."""
    allocation = allocate(cluster)
    table: dict[str, list[PortEntry]] = defaultdict(list)
    service_claims = [(service, claim) for service in cluster.services if service.has_node_ports
                      for claim in service.node_port_claims]
    where = claim_locations([*cluster.host_claims(), *service_claims])
    for workload, claim in cluster.host_claims():
        for node, certainty in placements(allocation, workload):
            table[node].append(PortEntry(claim.port, claim.protocol, claim.host_ip, claim.via, str(workload.ref),
                                         workload.pods, certainty, where[(id(workload.document), claim.field_path)]))
    for service, claim in service_claims:
        table[EVERY_NODE].append(PortEntry(claim.port, claim.protocol, "0.0.0.0", claim.label, str(service.ref), "",
                                           "runs", where[(id(service.document), claim.field_path)]))
    node_ports = {(e.protocol, e.port) for e in table.get(EVERY_NODE, ())}
    return {node: mark_conflicts(sorted(entries), node_ports if node != EVERY_NODE else set())
            for node, entries in sorted(table.items(), key=lambda item: (item[0].startswith("("), item[0]))}


def placements(allocation, workload: Workload) -> list[tuple[str, str]]:
    fixed = workload.is_daemonset or workload.live
    if allocation.cluster.nodes is not None:
        certainty = "runs" if fixed or workload.scheduling.node_name else "may run"
        return [(name, certainty) for name in allocation.eligible(workload)]
    pinned = pinned_node(workload.scheduling)
    if pinned:
        return [(pinned, "runs")]
    return [(ANY_NODE, "runs" if unconstrained_daemonset(workload) else "may run")]


def claim_locations(claims) -> dict[tuple[int, str], str]:
    """"file:line:column" of each claim's field, each document composed once."""
    wanted: dict[int, tuple[object, set[str]]] = {}
    for owner, claim in claims:
        wanted.setdefault(id(owner.document), (owner.document, set()))[1].add(claim.field_path)
    return {(id(document), path): str(document.location(path))
            for document in held(document for document, _ in wanted.values()) for path in wanted[id(document)][1]}


def mark_conflicts(entries: list[PortEntry], node_ports: set[tuple[str, int]]) -> list[PortEntry]:
    by_port: dict[tuple[str, int], list[PortEntry]] = defaultdict(list)
    for entry in entries:
        by_port[(entry.protocol, entry.port)].append(entry)
    marked = []
    for entry in entries:
        same = [other for other in by_port[(entry.protocol, entry.port)] if other is not entry and (
            "0.0.0.0" in (entry.host_ip, other.host_ip) or entry.host_ip == other.host_ip)]
        reasons = []
        if same:
            reasons.append(f"also claimed by {', '.join(sorted({o.owner for o in same}))}")
        if entry.kind != "nodePort" and (entry.protocol, entry.port) in node_ports:
            reasons.append("equals a nodePort")
        if entry.kind == "nodePort" and same:
            reasons = [f"nodePort also claimed by {', '.join(sorted({o.owner for o in same}))}"]
        marked.append(replace(entry, conflict="; ".join(reasons)))
    return marked


def write_text(port_map: dict[str, list[PortEntry]], out: TextIO, color: bool = False) -> None:
    red, reset = ("\033[31m", "\033[0m") if color else ("", "")
    for node, entries in port_map.items():
        out.write(f"{node}\n")
        for e in entries:
            flag = f"  {red}CONFLICT: {e.conflict}{reset}" if e.conflict else ""
            pods = f" ({e.pods})" if e.pods else ""
            out.write(f"  {e.port:>5}/{e.protocol:<4} {e.host_ip:<15} {e.kind:<11} {e.certainty:<7} "
                      f"{e.owner}{pods}  {e.location}{flag}\n")
    conflicts = sum(1 for entries in port_map.values() for e in entries if e.conflict)
    out.write(f"{len(port_map)} node groups, {sum(len(v) for v in port_map.values())} claims, "
              f"{conflicts} in conflict\n")


def write_json(port_map: dict[str, list[PortEntry]], out: TextIO) -> None:
    data = {"nodes": [{"name": node, "claims": [
        {"port": e.port, "protocol": e.protocol, "hostIP": e.host_ip, "kind": e.kind, "owner": e.owner,
         "pods": e.pods, "placement": e.certainty, "location": e.location, "conflict": e.conflict or None}
        for e in entries]} for node, entries in port_map.items()]}
    json.dump(data, out, indent=2, sort_keys=True)
    out.write("\n")
