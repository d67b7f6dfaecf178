"""KP301's scheduling story: pods that need one host port on the same nodes, and who stays
Pending. Its words are built with `phrases`' helpers (headline, effect, fix; the story as the
analysis)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelint_ports.checks.manifest.phrases import names_short, told
from kubelint_ports.model.allocation import ANY_NODE
from kubelint_ports.vocabulary import HEADLINE_LIMIT, Message, fit_headline

if TYPE_CHECKING:
    from kubelint_ports.model.allocation import Claimant, Conflict
    from kubelint_ports.model.objects import HostClaim, Workload


# --- KP301: pods that need one host port (the scheduling story: who stays Pending) -----------------

SCHEDULER_MESSAGE = "node(s) didn't have free ports for the requested pod ports"


def node_list(names: list[str], limit: int = 5) -> str:
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])} and {len(names) - limit} more"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def port_text(claim: HostClaim) -> str:
    noun = {"hostPort": "hostPort", "hostNetwork": "hostNetwork port"}.get(claim.via, "sidecar hostPort")
    on_ip = f" on {claim.host_ip}" if claim.host_ip != "0.0.0.0" else ""
    return f"{noun} {claim.port}/{claim.protocol}{on_ip}"


def where_running(workload: Workload) -> str:
    if workload.live:
        return f" (already running on {workload.scheduling.node_name})"
    return ""


def conflict_message(conflict: Conflict, claimant: Claimant, others: list[Claimant],
                     free_port: int | None = None) -> Message:
    """KP301: pods that need one host port where only one fits (`free_port`: the nearest free host
    port, the fix's; the check appends its sentence to the analysis, `with_free`)."""
    workload = claimant.workload
    port = port_text(claimant.claim)
    pending = plural(conflict.pending, "pod")
    stays = f"{pending} stay{'s' if conflict.pending == 1 else ''} Pending with '{SCHEDULER_MESSAGE}'"
    outcome = f"{stays}. Give them distinct host ports, or keep them on different nodes."
    refs = [str(c.workload.ref) for c in others]
    move = "this hostPort to" if claimant.claim.via == "hostPort" else "the process to port"
    fix = (f"Move {move} {free_port}, or keep the pods on different nodes." if free_port is not None
           else "Give them distinct host ports, or keep them on different nodes.")
    if conflict.nodes == [ANY_NODE]:
        holders = [c.workload for c in conflict.claimants if c.workload.is_daemonset and c.workload is not workload]
        if all(c.workload.is_daemonset for c in conflict.claimants):
            return told(f"{port} is also needed by {names_short(refs)} on the same nodes",
                        f"only one pod per node can hold the port, so on every such node {stays}", fix,
                        f"{port} is also needed by {others_text(others)}: these DaemonSets run on the same nodes "
                        f"and only one pod per node can hold the port, so on every such node {outcome}", *refs)
        if workload.is_daemonset:
            return told(f"{port} is held by this DaemonSet on every node that {names_short(refs)} may use", stays, fix,
                        f"{port} is held by this DaemonSet{selector_text(workload)} on every node that "
                        f"{others_text(others)} may use: {outcome}", *refs)
        names = ", ".join(f"{d.ref}{selector_text(d)}" for d in holders)
        verb = "runs" if len(holders) == 1 else "run"
        held = [str(d.ref) for d in holders]
        return told(f"{port} is held by {names_short(held)} on every node these pods may use", stays, fix,
                    f"{port} is also needed by {others_text(others)}, but {names} {verb} on every node these pods may "
                    f"use and hold{'s' if len(holders) == 1 else ''} it there: {outcome}", *held)
    where = node_list(conflict.nodes)
    nodes = plural(len(conflict.nodes), "node")
    if not others:
        headline = f"this {workload.ref.kind} wants {workload.pods} with {port}, but only {nodes} can run them"
        if len(f"{headline} ({where})") <= HEADLINE_LIMIT:
            headline = f"{headline} ({where})"
        return told(headline, f"each node fits one pod with this port, so {stays}",
                    f"Run at most {len(conflict.nodes)} of them, or let more nodes run them.",
                    f"this {workload.ref.kind} wants {workload.pods} with {port}, but only {nodes} can run them "
                    f"({where}) and each node fits one pod with this port: {outcome}")
    pinned = " (all pinned there)" if conflict.provable_without_inventory else ""
    same = f"the same {'node' if len(conflict.nodes) == 1 else 'nodes'}"
    headline = f"{port} is also needed by {names_short(refs)} on {where}"
    if len(fit_headline(headline, *refs)) > HEADLINE_LIMIT:
        headline = f"{port} is also needed by {names_short(refs)} on {same}"
    return told(headline, f"one pod per node fits, so {stays}", fix,
                f"{port} ({workload.pods}) is also needed by {others_text(others)} on the same "
                f"{'node' if len(conflict.nodes) == 1 else 'nodes'} ({where}){pinned}; one pod per node fits, so "
                f"{outcome}", *refs)


def selector_text(workload: Workload) -> str:
    selector = workload.scheduling.node_selector
    if not selector:
        return " (no node constraint)"
    return " (on nodes with " + ", ".join(f"{k}={v}" for k, v in sorted(selector.items())) + ")"


def others_text(others: list[Claimant]) -> str:
    parts = [f"{c.workload.ref} ({c.workload.pods}){where_running(c.workload)}" for c in others[:3]]
    if len(others) > 3:
        parts.append(f"{len(others) - 3} more")
    return ", ".join(parts)
