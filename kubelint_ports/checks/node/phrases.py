"""The node-snapshot rules' stories (KP801-KP806) and the advice they print: every word about a
packet's fate on a live node, and the repair commands the lab runs (`tests/lab/test_lab_repairs.py`).
Built from the datapath model's own sentences (`model.datapath.phrases`); the rules beside this
module pass names and answers, and say no such word themselves (`tests/test_rule_rooms.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kubelint_ports.checks.manifest.phrases import QUOTA_REMEDY
from kubelint_ports.model.datapath.node import APPENDED_ENTRIES, ENTRY_PLACEMENT, PREPENDED_ENTRIES
from kubelint_ports.model.datapath.phrases import explain, story

if TYPE_CHECKING:
    from kubelint_ports.model.datapath.answer import Answer

# --- KP801, KP802: entries of one chain -------------------------------------------------------------

STALE_CAUSES = ("the sandbox's teardown never ran (the runtime died half-way, incident 001), or ran without its port "
                "mappings (portmap's DEL, since v0.8.7, returns early when the runtime passes no portMappings, as one "
                "that lost its checkpoint does)")

PLACEMENT_WORDS = {
    APPENDED_ENTRIES: "this implementation appends each pod's entry, so the older one comes first",
    PREPENDED_ENTRIES: "CRI-O inserts each pod's entry at the top of KUBE-HOSTPORTS, so the newest comes first",
    "either": "portmap >= v0.7.5 appends each pod's entry (the older comes first), portmap < v0.7.5 inserted it at the "
              "top (the newest comes first)",
}


def placement(backend: str) -> str:
    return PLACEMENT_WORDS[ENTRY_PLACEMENT.get(backend, "either")]


def stale_outcome_shadowing(protocol: str, port: int, sentence: str, victim: str, line: int, ports: str,
                            backend: str) -> str:
    return (f"{stale_outcome(protocol, port, sentence)} It comes first in its chain ({placement(backend)}), so the "
            f"live {victim} at line {line} receives none of {ports}.")


def stale_outcome_shadowed(winner: str, line: int, backend: str) -> str:
    return (f"An earlier entry, {winner} (line {line}), shadows it ({placement(backend)}), so it takes no traffic "
            f"today: delete it before a restart reorders the rules.")


def stale_outcome(protocol: str, port: int, sentence: str) -> str:
    return f"For {protocol}/{port}: {sentence}."


def stale_fix(backend: str, chain: str, udp_ports: list[int]) -> str:
    """Delete the entry; established UDP flows keep their DNAT binding in conntrack until deleted."""
    if backend == "portmap-iptables":
        fix = (f"`iptables -t nat -D CNI-HOSTPORT-DNAT` this rule, then `iptables -t nat -F {chain}` and "
               f"`iptables -t nat -X {chain}`")
    else:
        fix = f"delete this rule ({backend})"
    if udp_ports:
        flows = ", ".join(f"`conntrack -D -p udp --orig-port-dst {port}`" for port in udp_ports[:3])
        fix += (f"; then {flows}{' and the others' if len(udp_ports) > 3 else ''}: established UDP flows keep the old "
                f"DNAT until their conntrack entry goes (portmap clears them only when it adds a pod's ports)")
    return fix


def stale_entry(described: str, ports: str, reasons: str, outcome: str, hash_note: str, fix: str) -> str:
    # The headline (the claim) names the entry, its pod and its ports: what a user acts on.
    return story(f"stale hostPort DNAT {described} for {ports}", f"{reasons}: {STALE_CAUSES}",
                 f"{outcome}{hash_note} Fix: {fix}.")


def chain_name_mismatch(network: str) -> str:
    return f" The chain name does not match sha512(\"{network}\" + ID): portmap did not write it as it stands."


def shadowed_for_address(ports: str, node: str, address: str, winner: str, line: int, entry: str, protocol: str,
                         port: int, sentence: str) -> str:
    return story(f"hostPort {ports} is DNATed twice on {node} for {address}",
                 f"{winner} at line {line}, bound to {address}, comes first in the chain, so {entry} here receives "
                 f"nothing sent to {address}, only what is sent to the node's other addresses",
                 f"For {protocol}/{port} to {address}: {sentence}.",
                 "Two pods cannot hold one hostPort on a node (one bound to a hostIP conflicts with one on every "
                 "address): one of the two entries is left over from a pod that is gone.")


def shadowed(ports: str, host: str, node: str, winner: str, line: int, entry: str, protocol: str, port: int,
             sentence: str, backend: str) -> str:
    return story(f"hostPort {ports}{host} is DNATed twice on {node}",
                 f"{winner} at line {line} comes first in the chain ({placement(backend)}; the first DNAT ends the "
                 f"chain), so {entry} here receives nothing", stale_outcome(protocol, port, sentence),
                 "Two pods cannot hold one hostPort on a node: one of the two entries is left over from a pod that is "
                 "gone.")


# --- KP803: the hostPort jump ahead of kube-proxy's ------------------------------------------------

JUMP_MATCHES = {
    "CNI-HOSTPORT-DNAT": "-m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
    "KUBE-HOSTPORTS": '-m comment --comment "kube hostport portals" -m addrtype --dst-type LOCAL -j KUBE-HOSTPORTS',
}


def repair_commands(hook: str, chain: str) -> list[str]:
    """Delete the jump and append it again, behind kube-proxy's: what moves it (an upgrade never
    does: portmap adds its jump only when absent, and flushing the chain drops kube-proxy's too)."""
    rule = JUMP_MATCHES.get(chain, f"-j {chain}")
    return [f"iptables -t nat -D {hook} {rule}", f"iptables -t nat -A {hook} {rule}"]


def ahead_captures(label: str, answer: "Answer", parties: Mapping[str, str], more: list[str]) -> str:
    text = f"for {label}: {explain(answer, parties)}"
    if more:
        text += f"; likewise {', '.join(more[:5])}{' and more' if len(more) > 5 else ''}"
    return text


AHEAD_NOTHING_YET = ("no Service port on this node equals a hostPort today, but a later NodePort (and in IPVS mode a "
                     "ClusterIP port) that does will be taken")
AHEAD_IN_IPVS_MODE = ("In IPVS mode that ends only the ClusterIP capture: kube-proxy only marks NodePort packets, so "
                      "a hostPort still takes a nodePort with its number.")


def ahead_of_kube_proxy(hook: str, chain: str, index: int, proxy_index: int, outcome: str, ipvs: bool) -> str:
    commands = repair_commands(hook, chain)
    other = "OUTPUT" if hook == "PREROUTING" else "PREROUTING"
    return story(f"{hook} jumps to {chain} (rule {index + 1}) before kube-proxy's KUBE-SERVICES "
                 f"(rule {proxy_index + 1})",
                 "hostPort DNATs see every local packet first (portmap before v0.7.5 inserted its jump at the top, "
                 "CVE-2019-9946; current portmap and CRI-O append)", f"{outcome[:1].upper()}{outcome[1:]}.",
                 f"Upgrading the CNI plugins does not move a jump that exists (portmap adds it only when absent), and "
                 f"flushing {hook} drops kube-proxy's jump too: delete it and append it again, `{commands[0]} && "
                 f"{commands[1]}` (the same for {other}), then upgrade portmap to v0.7.5 or later.",
                 *((AHEAD_IN_IPVS_MODE,) if ipvs else ()))


# --- KP804: kube-proxy's masquerade rule -----------------------------------------------------------

def masquerade_rule_missing(mode: str, node: str, gap: str) -> str:
    return story(f"kube-proxy ({mode} mode) on {node} has no `! -s <clusterCIDR> ... -j KUBE-MARK-MASQ` rule for "
                 f"Service traffic", "it runs without clusterCIDR (--cluster-cidr)",
                 f"Its rules say: {gap} Pod clients are not affected.",
                 "Set clusterCIDR to the pod CIDR in kube-proxy's configuration.")


def masquerade_rule_wrong_range(node: str, cidr: str, what: str) -> str:
    return story(f"kube-proxy's masquerade rule on {node} exempts `! -s {cidr}`, but {what}",
                 "clusterCIDR must be the pod CIDR",
                 "Pods outside it are masqueraded needlessly, and node or hostNetwork clients inside it keep a source "
                 "address the endpoint cannot answer (incident 002's detour).", "Set clusterCIDR to the pod CIDR.")


# --- KP805: a host process's port ------------------------------------------------------------------

def process_loses_to_host_port(process: str, shown: str, protocol: str, entry: str, node: str, answer: "Answer",
                               parties: Mapping[str, str]) -> str:
    return story(f"{process} listens on {shown}/{protocol}, but the hostPort DNAT {entry} matches that port on {node}",
                 explain(answer, parties), "No socket of the pod shows in ss.", "Move the process or the hostPort.")


def process_loses_to_node_port(process: str, shown: str, protocol: str, port: int, service: str, answer: "Answer",
                               parties: Mapping[str, str], paths) -> str:
    return story(f"{process} listens on {shown}/{protocol}, which is nodePort {port} of {service}",
                 f"{explain(answer, parties, paths)} (incident 003)",
                 "Move the process below the node-port range, or give the Service another nodePort.", QUOTA_REMEDY)


# --- KP806: nodes that disagree --------------------------------------------------------------------

def drift_present(what: str, node: str, lacking: str, host_port: bool) -> str:
    claim = f"{what} exists on {node} but not on {lacking}"
    if host_port:
        return story(claim, "a hostPort pod runs here only; on this node that port goes to the pod, on the others to "
                            "whatever listens (how incident 000 was found)")
    return story(claim, "kube-proxy programs every Service on every node, so one of them is out of date: packets to it "
                        "are handled differently depending on the node they reach", "Restart the lagging kube-proxy.")


def drift_missing(node: str, count: int, listed: str, first: str, said: str) -> str:
    return story(f"{node} lacks {count} kube-proxy rule{'s' if count > 1 else ''} that the other nodes have ({listed})",
                 f"its kube-proxy is out of date or failing, so packets to those Services that reach this node are not "
                 f"forwarded; for {first} here, {said}", "Check its kube-proxy logs and restart it.")


def drift_what(kind: str, first: str, second: str = "") -> str:
    return f"hostPort {first}/{second} DNAT" if kind == "host-port" else f"kube-proxy's rule for {first}"
