"""What a node's own dumps settle for the datapath model: the facts they establish (kube-proxy's
mode, the hostPort implementation, the observed order of the jumps, two iptables backends), which
of two hostPort entries a packet meets first, and how each implementation orders its entries."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kubelint_ports.model.datapath.facts import SPLIT_BACKENDS, DatapathFacts, Fact

if TYPE_CHECKING:  # node_state (and the dump readers under it) loads only when dumps are read: `node`
    from kubelint_ports.model.node_state import NodeState

# How an implementation places a new pod's entry among the others, so which entry a packet meets
# first: appended entries keep creation order (a stale entry shadows a later live one), entries
# inserted at the top put the newest first (a stale entry is shadowed by a later live one).
# portmap's iptables backend appended since v0.7.5 and prepended before (`prependUnique`, both for
# the CNI-HOSTPORT-DNAT jump and for each container's CNI-DN jump); CRI-O's KUBE-HOSTPORTS inserts
# each pod's entry at the top ("avoids any leaking iptables rules that take up the same port");
# portmap's nftables backend adds (appends) its rules.
APPENDED_ENTRIES, PREPENDED_ENTRIES, EITHER = "appended", "prepended", "either"
ENTRY_PLACEMENT = {"portmap-iptables": EITHER, "cri-o": PREPENDED_ENTRIES, "portmap-nftables": APPENDED_ENTRIES}


def first_dnat(entries, later):
    """Of a node's hostPort DNAT entries in rule order (`order`, `backend`, `host_ip`,
    `overlaps()`, as model.node_state keeps them), the earlier one that receives every packet
    `later` would match, or None. DNAT ends the nat table's traversal, so within one backend the
    first matching entry wins (the lab's replay of incident 001: a stale CNI-DN chain ahead of the
    live one took every connection); a wildcard host IP matches every address, a specific one only
    itself. Entries of different backends (portmap's iptables rules against an nftables table)
    are never ordered here: their order is the tables' hook order, decided by `route`."""
    for entry in entries:
        if entry.order >= later.order:
            return None
        if entry.backend == later.backend and entry.overlaps(later) and (
                not entry.host_ip or entry.host_ip == later.host_ip):
            return entry
    return None


def families_at(node: NodeState, path: str) -> set[str]:
    """The address families of the hostPort and NodePort rules read from one dump file."""
    found = {entry.family for entry in node.host_ports if entry.jump.path == path}
    found |= {rule.family for rule in node.node_ports if rule.place.path == path}
    return {family for family in found if family}


def split_backends(node: NodeState):
    """(hostPort jump, kube-proxy jump) when the node's dumps show them only in different dump files
    of one address family (kube-proxy on iptables-legacy, portmap on iptables-nft): two nat tables
    hooked at the same priority, whose order no rule position says. None otherwise."""
    jumps = [jump for jump in node.entry_jumps if jump.hook == "PREROUTING"]
    sources = {jump.source for jump in jumps}
    if any({j.leads_to for j in jumps if j.source == source} == {"host-ports", "kube-proxy"} for source in sources):
        return None  # one table holds both: its rule order decides
    host_ports = [jump for jump in jumps if jump.leads_to == "host-ports"]
    kube_proxy = [jump for jump in jumps if jump.leads_to == "kube-proxy"]
    for mine in host_ports:
        for theirs in kube_proxy:
            if families_at(node, mine.place.path) & families_at(node, theirs.place.path):
                return mine, theirs
    return None


def node_facts(node: NodeState) -> DatapathFacts:
    """`node_state.facts_from_dumps`, plus two iptables backends when the dumps show them."""
    from kubelint_ports.model.node_state import facts_from_dumps

    facts = facts_from_dumps(node)
    split = split_backends(node)
    if split is not None:
        mine, theirs = split
        facts = replace(facts, iptables_backends=Fact(SPLIT_BACKENDS, f"{mine.place.path}:{mine.place.line} and "
                                                                      f"{theirs.place.path}:{theirs.place.line}"))
    return facts
