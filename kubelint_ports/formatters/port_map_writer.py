"""The port map (`kubelint-ports ports`) as text and as JSON: the map the engine made for the
report (`Report.port_map`, module `portmap`), written, nothing computed."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, TextIO

from kubelint_ports.formatters import printable  # names and paths come from the inputs
from kubelint_ports.portmap import ANY_NODE, EVERY_NODE, MAY_RUN, RUNS, Holder, Mark, PortMap, Receiver


def flagged(holder: Holder, node: str) -> str:
    """`CONFLICT KP301`, `CAPTURE KP201, KP302`: the standing marks of the holder's state."""
    state = holder.state_on(node)
    if state in (RUNS, MAY_RUN):
        return ""
    rules = sorted({m.finding.rule_id for m in holder.marks_on(node) if m.state == state and not m.finding.suppressed})
    return f"{state.upper()} {', '.join(rules)}"


def sections(port_map: PortMap) -> list[PortMap]:
    """The maps to write: each unit's when the run has named units, else the one map."""
    return port_map.units or [port_map]


def units_title(port_map: PortMap) -> str:
    """`unit prod`, `units prod, staging`: which units the map covers ("" for the run's one
    unnamed unit), for a page's title."""
    names = [section.unit for section in sections(port_map) if section.unit]
    return f"unit{'s' if len(names) > 1 else ''} {', '.join(names)}" if names else ""


def summary(port_map: PortMap) -> str:
    """`3 nodes, (every node): 22 holders, 8 in conflict, 7 captured, 0 on node-daemon ports`;
    with several units, one such summary per unit (`prod: ...; staging: ...`)."""
    if port_map.units:
        return "; ".join(f"{section.unit}: {summary(section)}" for section in port_map.units)
    counts: dict[str, int] = defaultdict(int)
    for holder in port_map.holders:  # each holder once per node it is on
        if not holder.nodes:
            continue
        if all(mark.nodes is None for mark in holder.marks):  # the same state on every node: count once
            counts[holder.state_on(holder.nodes[0])] += len(holder.nodes)
        else:
            for node in holder.nodes:
                counts[holder.state_on(node)] += 1
    real = [node for node in port_map.nodes if node not in (ANY_NODE, EVERY_NODE)]
    groups = "".join(f", {node}" for node in port_map.nodes if node in (ANY_NODE, EVERY_NODE))
    return (f"{len(real)} node{'s' if len(real) != 1 else ''}{groups}: {sum(counts.values())} holders, "
            f"{counts['conflict']} in conflict, {counts['capture']} captured, {counts['reserved']} on node-daemon "
            f"ports")


def write_text(port_map: PortMap, out: TextIO, color: bool = False) -> None:
    """The map, node by node; with named units, a section per unit, headed `unit NAME`."""
    for index, section in enumerate(sections(port_map)):
        if section.unit:
            out.write(("\n" if index else "") + printable(f"unit {section.unit}") + "\n")
        write_unit_text(section, out, color)


def write_unit_text(port_map: PortMap, out: TextIO, color: bool = False) -> None:
    paint = {"conflict": "\033[31m", "capture": "\033[33m", "reserved": "\033[35m"}
    reset = "\033[0m"
    for node, ports in port_map.ports_by_node():
        out.write(f"{printable(node)}\n")
        if not ports:
            out.write("  (no host ports)\n")
        for (protocol, port), holders in ports.items():
            for h in holders:
                state = h.state_on(node)
                flag = flagged(h, node)
                if flag and color:
                    flag = f"{paint[state]}{flag}{reset}"
                owner = h.owner + (f" ({h.pods})" if h.pods else "") + (f" [{h.note}]" if h.note else "")
                where = str(h.location) if h.location else "-"
                out.write(printable(f"  {h.port:>5}/{h.protocol:<4} {h.host_ip:<15} {h.kind:<11} {h.placement:<7} "
                                    f"{owner}  {where}") + f"{'  ' + flag if flag else ''}\n")
            answer = port_map.receiver_at(protocol, port, holders)
            if answer is not None:
                out.write(printable(f"             receives: {answer.winner if answer.certain else answer.text}") + "\n")
    if port_map.datapath_facts:
        out.write(f"receivers decided with {facts_text(port_map.datapath_facts)}\n")
    out.write(summary(port_map) + "\n")


def facts_text(facts: dict[str, dict[str, Any]]) -> str:
    """`proxy mode ipvs (from --proxy-mode); hostport portmap (from ...)`."""
    from kubelint_ports.model.datapath import fact_text

    return "; ".join(f"{fact_text(name, fact['value'])} (from {fact['source']})" for name, fact in facts.items())


def mark_data(mark: Mark) -> dict:
    finding = mark.finding
    return {"rule": finding.rule_id, "name": finding.rule_name, "severity": str(finding.severity),
            "state": mark.state or None, "location": str(finding.location), "suppressed": finding.suppressed or None}


def receiver_data(answer: Receiver | None) -> dict | None:
    if answer is None:
        return None
    return {"winner": answer.winner, "receiver": answer.role, "certain": answer.certain, "text": answer.text}


def write_json(port_map: PortMap, out: TextIO) -> None:
    """The map as JSON; with named units, `units`: a map per unit, with its `name`. Written node
    by node (`write_indented`): the whole map of 500 nodes x 700 claims held at once took 474 MiB."""
    if port_map.unit or port_map.units:
        data = {"version": 2, "units": [{"name": section.unit, **map_data(section)} for section in sections(port_map)]}
    else:
        data = {"version": 2, **map_data(port_map)}
    write_indented(data, out)
    out.write("\n")


def map_data(port_map: PortMap) -> dict:
    """The map's data; its `nodes` made one node at a time, as they are written."""
    return {"inventory": port_map.with_inventory, "datapathFacts": port_map.datapath_facts,
            "nodes": (node_data(port_map, node, ports) for node, ports in port_map.ports_by_node())}


def node_data(port_map: PortMap, node: str, ports: dict) -> dict:
    claims = []
    for (protocol, port), holders in ports.items():
        receiver = receiver_data(port_map.receiver_at(protocol, port, holders))
        claims += [{"port": h.port, "protocol": h.protocol, "hostIP": h.host_ip, "kind": h.kind, "owner": h.owner,
                    "pods": h.pods, "placement": h.placement, "note": h.note or None,
                    "location": str(h.location) if h.location else None, "state": h.state_on(node),
                    "findings": [mark_data(m) for m in h.marks_on(node)], "receiver": receiver}
                   for h in holders]
    return {"name": node, "claims": claims}


_END = object()


def write_indented(value, out: TextIO, level: int = 0) -> None:
    """`json.dump(value, out, indent=2, sort_keys=True)`, byte for byte, where a list may also be
    given as an iterator: its items are made and written one at a time."""
    if isinstance(value, dict):
        if not value:
            out.write("{}")
            return
        out.write("{")
        for index, key in enumerate(sorted(value)):
            out.write(("," if index else "") + "\n" + "  " * (level + 1) + json.dumps(key) + ": ")
            write_indented(value[key], out, level + 1)
        out.write("\n" + "  " * level + "}")
    elif isinstance(value, (list, tuple, Iterator)):
        made = isinstance(value, Iterator)  # its items are plain data: json writes each whole
        items = iter(value)
        item = next(items, _END)
        if item is _END:
            out.write("[]")
            return
        out.write("[")
        index = 0
        indent = "\n" + "  " * (level + 1)
        while item is not _END:
            out.write(("," if index else "") + indent)
            if made:
                out.write(json.dumps(item, indent=2, sort_keys=True).replace("\n", indent))
            else:
                write_indented(item, out, level + 1)
            index += 1
            item = next(items, _END)
        out.write("\n" + "  " * level + "]")
    else:
        out.write(json.dumps(value))


def free_scope_title(scope, free_ports) -> str:
    if scope.node is None:
        return "nodePorts ({}-{})".format(*free_ports.node_port_range)
    where = f"node {scope.node}" if scope.node else "every node (no --nodes inventory)"
    return (f"{where}: host ports from 1024, outside the node-port range {'{}-{}'.format(*free_ports.node_port_range)} "
            f"and the ephemeral range {'{}-{}'.format(*free_ports.ephemeral_port_range)}")


def run_text(run: tuple[int, int]) -> str:
    return str(run[0]) if run[0] == run[1] else f"{run[0]}-{run[1]}"


def write_free_text(units, out: TextIO) -> None:
    """`ports --free`: per unit (`model.free_ports.free_ports_by_unit`; headed `unit NAME` when
    named) and per scope, the free ports as runs (or the suggestions near `--near`) and what holds
    the taken ones in the scope's range."""
    for number, (unit, free_ports) in enumerate(units):
        if unit:
            out.write(("\n" if number else "") + printable(f"unit {unit}") + "\n")
        for index, scope in enumerate(free_ports.scopes):
            if index:
                out.write("\n")
            out.write(printable(f"{free_scope_title(scope, free_ports)}: {scope.count} free") + "\n")
            if free_ports.near is not None:
                out.write(f"  near {free_ports.near}: {', '.join(map(str, scope.suggested)) or 'none'}\n")
            else:
                out.write(f"  free: {', '.join(run_text(run) for run in scope.free) or 'none'}\n")
            for port, holders in scope.held.items():
                out.write(printable(f"  taken {port}: {', '.join(holders)}") + "\n")


def write_free_json(units, out: TextIO) -> None:
    """The run's one unnamed unit as it always was; named units as `version` 2 with `units`, each
    its `name` beside its answer (as the port map's JSON has them)."""
    if len(units) == 1 and not units[0][0]:
        data = free_ports_data(units[0][1])
    else:
        data = {"version": 2, "units": [{"name": unit, **free_ports_data(free_ports)} for unit, free_ports in units]}
    json.dump(data, out, indent=2, sort_keys=True)
    out.write("\n")


def free_ports_data(free_ports) -> dict:
    """One unit's `ports --free` answer as JSON data (the page's compact form is `html.free_data`)."""
    return {
        "nodePortRange": list(free_ports.node_port_range),
        "ephemeralPortRange": list(free_ports.ephemeral_port_range),
        "near": free_ports.near,
        "scopes": [{
            "kind": "nodePort" if scope.node is None else "hostPort",
            "node": scope.node,
            "free": [list(run) for run in scope.free],
            "freeCount": scope.count,
            **({"suggested": list(scope.suggested)} if free_ports.near is not None else {}),
            "taken": {str(port): list(holders) for port, holders in scope.held.items()},
        } for scope in free_ports.scopes],
    }
