"""The node-snapshot rules' stories (KP801-KP806) and the advice they print: every word about a
packet's fate on a live node, and the repair commands the lab runs (`tests/lab/test_lab_repairs.py`).
Built from the datapath model's own sentences (`model.datapath.phrases`, `model.datapath.effects`);
the rules beside this module pass names and answers, and say no such word themselves
(`tests/test_rule_rooms.py`).

Each finding's words are a `Message`: a headline (what is wrong and where, at most
`HEADLINE_LIMIT` characters), one sentence of effect (what breaks for whom), one imperative
sentence of fix, and the full story as the analysis (`-v`, SARIF markdown, the HTML page). Repair
commands stay in the analysis; the fix names the action.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kubelint_ports.checks.manifest.phrases import QUOTA_REMEDY
from kubelint_ports.model.datapath.effects import effect as answer_effect
from kubelint_ports.model.datapath.facts import HOST_PROCESS, HOSTPORT, SERVICE
from kubelint_ports.model.datapath.node import APPENDED_ENTRIES, ENTRY_PLACEMENT, PREPENDED_ENTRIES
from kubelint_ports.model.datapath.phrases import explain, story
from kubelint_ports.vocabulary import Message, fit_headline

if TYPE_CHECKING:
    from kubelint_ports.model.datapath.answer import Answer
    from kubelint_ports.model.datapath.masquerade import MasqueradeGap

WITH_COMMANDS = "(commands with -v)"


def as_sentence(text: str) -> str:
    """`text` as a sentence: a capital first letter and a full stop."""
    text = text.strip()
    if not text:
        return ""
    text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else f"{text}."


def first_ports(protocol: str, ports: Sequence[int]) -> str:
    """A headline's ports: the first one (never cut), and how many more: `tcp/443 and 14 more`."""
    more = f" and {len(ports) - 1} more" if len(ports) > 1 else ""
    return f"{protocol}/{ports[0]}{more}"


# --- KP801, KP802: entries of one chain -------------------------------------------------------------

STALE_CAUSES = ("the sandbox's teardown never ran (the runtime died half-way), or ran without its port "
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


def stale_fix_action(backend: str, chain: str, node: str, udp: bool) -> str:
    """The fix in one imperative sentence; the commands are in the analysis (`stale_fix`)."""
    flows = ", then its UDP flows' conntrack entries" if udp else ""
    if backend == "portmap-iptables":
        return f"Delete the stale chain and its jump on {node}{flows} {WITH_COMMANDS}."
    if udp:
        return f"Delete this stale hostPort rule ({backend}) on {node}{flows} {WITH_COMMANDS}."
    return f"Delete this stale hostPort rule ({backend}) on {node}."


def stale_effect(protocol: str, port: int, answer: "Answer", parties: Mapping[str, str], victim_ip: str = "",
                 winner_line: int = 0) -> tuple[str, tuple[str, ...]]:
    """What the stale entry breaks: the live pod it shadows, or what its port does today."""
    if winner_line:
        return (f"Nothing breaks today, as the entry at line {winner_line} comes first, but a restart that reorders "
                f"the rules sends these ports where nothing answers."), ()
    said, unknown = answer_effect(answer, {**parties, HOSTPORT: "the stale entry (nothing answers)"})
    if victim_ip:
        return as_sentence(f"the live pod at {victim_ip} gets none of them: for {protocol}/{port}, {said}"), \
            unknown
    return as_sentence(f"for {protocol}/{port}, {said}"), unknown


def stale_entry(described: str, ports: str, reasons: str, outcome: str, hash_note: str, fix: str, *, chain: str,
                pod_ip: str, headline_ports: str, words: tuple[str, tuple[str, ...]], action: str) -> Message:
    # The headline names the entry, its pod and its first port: what a user acts on.
    headline = fit_headline(f"stale hostPort DNAT {chain} to {pod_ip} for {headline_ports}", chain)
    said, unknown = words
    return Message(headline, said, action,
                   story(f"stale hostPort DNAT {described} for {ports}", f"{reasons}: {STALE_CAUSES}",
                         f"{outcome}{hash_note} Fix: {fix}."), unknown)


def chain_name_mismatch(network: str) -> str:
    return f" The chain name does not match sha512(\"{network}\" + ID): portmap did not write it as it stands."


SHADOWED_FIX = "Delete the entry of whichever pod is gone (see crictl pods)."


def shadowed_effect(entry_pod: str, winner_pod: str, protocol: str, port: int, answer: "Answer",
                    parties: Mapping[str, str], address: str = "") -> tuple[str, tuple[str, ...]]:
    said, unknown = answer_effect(answer, {**parties, HOSTPORT: f"the pod at {winner_pod}"})
    sent = f" sent to {address}" if address else ""
    return as_sentence(f"the pod at {entry_pod} gets none of them{sent}: for {protocol}/{port}, {said}"), \
        unknown


def shadowed_for_address(ports: str, node: str, address: str, winner: str, line: int, entry: str, protocol: str,
                         port: int, sentence: str, *, headline_ports: str, names: Sequence[str],
                         words: tuple[str, tuple[str, ...]]) -> Message:
    said, unknown = words
    return Message(
        fit_headline(f"hostPort {headline_ports} is DNATed twice on {node} for {address}", node, *names), said,
        SHADOWED_FIX,
        story(f"hostPort {ports} is DNATed twice on {node} for {address}",
              f"{winner} at line {line}, bound to {address}, comes first in the chain, so {entry} here receives "
              f"nothing sent to {address}, only what is sent to the node's other addresses",
              f"For {protocol}/{port} to {address}: {sentence}.",
              "Two pods cannot hold one hostPort on a node (one bound to a hostIP conflicts with one on every "
              "address): one of the two entries is left over from a pod that is gone."), unknown)


def shadowed(ports: str, host: str, node: str, winner: str, line: int, entry: str, protocol: str, port: int,
             sentence: str, backend: str, *, headline_ports: str, words: tuple[str, tuple[str, ...]]) -> Message:
    said, unknown = words
    return Message(
        fit_headline(f"hostPort {headline_ports}{host} is DNATed twice on {node}", node), said,
        SHADOWED_FIX,
        story(f"hostPort {ports}{host} is DNATed twice on {node}",
              f"{winner} at line {line} comes first in the chain ({placement(backend)}; the first DNAT ends the "
              f"chain), so {entry} here receives nothing", stale_outcome(protocol, port, sentence),
              "Two pods cannot hold one hostPort on a node: one of the two entries is left over from a pod that is "
              "gone."), unknown)


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


def ahead_effect(label: str, answer: "Answer", parties: Mapping[str, str], more: int) -> tuple[str, tuple[str, ...]]:
    said, unknown = answer_effect(answer, {**parties, HOSTPORT: "the hostPort pod", SERVICE: "the Service"})
    others = f" and {more} more Service port{'s' if more > 1 else ''}" if more else ""
    return as_sentence(f"for {label}{others}, {said}"), unknown


AHEAD_NOTHING_YET_EFFECT = ("No Service port here has a hostPort's number today, but one given it later goes to the "
                            "hostPort pod, not to the Service.", ())


AHEAD_NOTHING_YET = ("no Service port on this node equals a hostPort today, but a later NodePort (and in IPVS mode a "
                     "ClusterIP port) that does will be taken")
AHEAD_IN_IPVS_MODE = ("In IPVS mode that ends only the ClusterIP capture: kube-proxy only marks NodePort packets, so "
                      "a hostPort still takes a nodePort with its number.")


def ahead_of_kube_proxy(hook: str, chain: str, index: int, proxy_index: int, outcome: str, ipvs: bool, *,
                        node: str, words: tuple[str, tuple[str, ...]]) -> Message:
    commands = repair_commands(hook, chain)
    other = "OUTPUT" if hook == "PREROUTING" else "PREROUTING"
    said, unknown = words
    return Message(
        fit_headline(f"{hook} on {node} jumps to {chain} before kube-proxy's jump", node, chain), said,
        f"Move the jump behind kube-proxy's and upgrade portmap to v0.7.5+ {WITH_COMMANDS}.",
        story(f"{hook} jumps to {chain} (rule {index + 1}) before kube-proxy's KUBE-SERVICES "
              f"(rule {proxy_index + 1})",
              "hostPort DNATs see every local packet first (portmap before v0.7.5 inserted its jump at the top, "
              "CVE-2019-9946; current portmap and CRI-O append)", f"{outcome[:1].upper()}{outcome[1:]}.",
              f"Upgrading the CNI plugins does not move a jump that exists (portmap adds it only when absent), and "
              f"flushing {hook} drops kube-proxy's jump too: delete it and append it again, `{commands[0]} && "
              f"{commands[1]}` (the same for {other}), then upgrade portmap to v0.7.5 or later.",
              *((AHEAD_IN_IPVS_MODE,) if ipvs else ())), unknown)


# --- KP804: kube-proxy's masquerade rule -----------------------------------------------------------

MASQUERADE_FIX = "Set kube-proxy's clusterCIDR to the pod CIDR."


def masquerade_gap_effect(gaps: Sequence["MasqueradeGap"]) -> str:
    """What the missing rule breaks, by the masquerade model's verdict on node clients."""
    if any(gap.node_clients_broken for gap in gaps):
        return "Node processes and hostNetwork pods reach no Service: the backends' replies never come back to them."
    return ("Off-cluster clients routing the Service CIDR here are not masqueraded: replies from other nodes' "
            "backends miss them.")


def masquerade_rule_missing(mode: str, node: str, gaps: Sequence["MasqueradeGap"]) -> Message:
    gap = " ".join(f"{g.text}." for g in gaps)
    return Message(
        fit_headline(f"kube-proxy ({mode} mode) on {node} has no clusterCIDR masquerade rule", node),
        masquerade_gap_effect(gaps), MASQUERADE_FIX,
        story(f"kube-proxy ({mode} mode) on {node} has no `! -s <clusterCIDR> ... -j KUBE-MARK-MASQ` rule for "
              f"Service traffic", "it runs without clusterCIDR (--cluster-cidr)",
              f"Its rules say: {gap} Pod clients are not affected.",
              "Set clusterCIDR to the pod CIDR in kube-proxy's configuration."))


def masquerade_range_service(cidr: str, example: str) -> tuple[str, str]:
    """(headline words, analysis words) for a masquerade exemption that is the Service range."""
    if example:
        return "the Service range", \
            f"{cidr} is the Service range (it holds ClusterIPs such as {example})"
    return "which overlaps the Service CIDR", f"{cidr} overlaps the Service CIDR"


def masquerade_range_missing(cidr: str, item: str, why: str) -> tuple[str, str]:
    """(headline words, analysis words) for a masquerade exemption that leaves pods out."""
    return f"which does not contain {item}", f"{cidr} does not contain {item} ({why})"


def masquerade_rule_wrong_range(node: str, cidr: str, what: tuple[str, str]) -> Message:
    short, long = what
    return Message(
        fit_headline(f"kube-proxy's masquerade rule on {node} exempts {cidr}, {short}", node),
        "Pods outside it are masqueraded needlessly, and node or hostNetwork clients inside it get no reply.",
        MASQUERADE_FIX,
        story(f"kube-proxy's masquerade rule on {node} exempts `! -s {cidr}`, but {long}",
              "clusterCIDR must be the pod CIDR",
              "Pods outside it are masqueraded needlessly, and node or hostNetwork clients inside it keep a source "
              "address the endpoint cannot answer.", "Set clusterCIDR to the pod CIDR."))


# --- KP805: a host process's port ------------------------------------------------------------------

def process_loses_to_host_port(process: str, shown: str, protocol: str, entry: str, node: str, answer: "Answer",
                               parties: Mapping[str, str], *, pod: str, port: int) -> Message:
    said, unknown = answer_effect(answer, {**parties, HOSTPORT: "the hostPort pod", HOST_PROCESS: "the process"})
    return Message(
        fit_headline(f"{process} listens on {shown}/{protocol}, a hostPort of the pod at {pod} on {node}",
                     process, node),
        as_sentence(f"for {protocol}/{port}, {said}"), "Move the process or the hostPort to another port.",
        story(f"{process} listens on {shown}/{protocol}, but the hostPort DNAT {entry} matches that port on {node}",
              explain(answer, parties), "No socket of the pod shows in ss.", "Move the process or the hostPort."),
        unknown)


def process_loses_to_node_port(process: str, shown: str, protocol: str, port: int, service: str, answer: "Answer",
                               parties: Mapping[str, str], paths, *, node: str) -> Message:
    said, unknown = answer_effect(answer, {**parties, HOST_PROCESS: "the process", SERVICE: "the Service"})
    return Message(
        fit_headline(f"{process} listens on {shown}/{protocol} on {node}, which is nodePort {port} of {service}",
                     process, service, node),
        as_sentence(f"for {protocol}/{port}, {said}"),
        "Move the process below the node-port range, or give the Service another nodePort.",
        story(f"{process} listens on {shown}/{protocol}, which is nodePort {port} of {service}",
              explain(answer, parties, paths),
              "Move the process below the node-port range, or give the Service another nodePort.", QUOTA_REMEDY),
        unknown)


# --- KP806: nodes that disagree --------------------------------------------------------------------

def drift_present(what: str, node: str, lacking: str, host_port: bool) -> Message:
    claim = f"{what} exists on {node} but not on {lacking}"
    headline = fit_headline(claim, lacking, node)
    if host_port:
        return Message(
            headline, f"On {node} the port goes to the hostPort pod, on {lacking} to whatever listens there.",
            f"Run the pod on every node its clients reach, or send them only to {node}.",
            story(claim, "a hostPort pod runs here only; on this node that port goes to the pod, on the others to "
                         "whatever listens"))
    return Message(
        headline, f"Packets to this Service fare differently on {node} and {lacking}: one side's kube-proxy is out "
                  f"of date.", "Find the lagging kube-proxy (its logs) and restart it.",
        story(claim, "kube-proxy programs every Service on every node, so one of them is out of date: packets to it "
                     "are handled differently depending on the node they reach", "Restart the lagging kube-proxy."))


def drift_missing(node: str, count: int, listed: str, first: str, said: str, *, answer: "Answer",
                  parties: Mapping[str, str]) -> Message:
    rules = f"kube-proxy rule{'s' if count > 1 else ''}"
    more = f" and {count - 1} more" if count > 1 else ""
    short, unknown = answer_effect(answer, parties)
    return Message(
        fit_headline(f"{node} lacks {count} {rules} that the other nodes have ({first}{more})", node, first),
        as_sentence(f"for {first}{more}, {short}"), f"Check kube-proxy's logs on {node} and restart it.",
        story(f"{node} lacks {count} {rules} that the other nodes have ({listed})",
              f"its kube-proxy is out of date or failing, so packets to those Services that reach this node are not "
              f"forwarded; for {first} here, {said}", "Check its kube-proxy logs and restart it."), unknown)


def drift_what(kind: str, first: str, second: str = "") -> str:
    return f"hostPort {first}/{second} DNAT" if kind == "host-port" else f"kube-proxy's rule for {first}"
