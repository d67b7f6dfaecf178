"""The manifest rules' stories about ports (KP0xx-KP3xx; the network and routing rules' are in
`network_phrases`): what each finding says about traffic, built from the
model's answers (`model.datapath.phrases.explain`) and the names the rule passes in. A check
chooses which question to ask and which objects are involved; every word about a packet's fate
is written here (`tests/test_rule_rooms.py`), not in the rules beside it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from kubelint_ports.model.datapath.facts import (
    DROPPED,
    HOST_PROCESS,
    HOSTPORT,
    OTHERWISE,
    REJECTED,
    SERVICE,
    UNDEFINED,
)
from kubelint_ports.model.datapath.effects import effect as traffic_effect
from kubelint_ports.model.datapath.phrases import explain, fact_note, story, summary_short
from kubelint_ports.vocabulary import HEADLINE_LIMIT, Message, fit_headline

if TYPE_CHECKING:
    from kubelint_ports.model.datapath.answer import Answer

Paths = Sequence[tuple[str, "Answer"]]
QUOTA_REMEDY = ("In namespaces that must not open nodePorts, a ResourceQuota with `services.nodeports: 0` keeps "
                "them from allocating one.")


def takes(captured: bool) -> str:
    """A capture the model is sure of "takes" the traffic; one that depends on unknown facts "may take" it."""
    return "takes" if captured else "may take"


# --- the five-second words (issue 36): headline, effect, fix; the story stays as the analysis ------------

def sentence(text: str, capital: bool = False) -> str:
    """`text` as one sentence: its full stop added, its first letter a capital when `capital`."""
    text = text.strip()
    if not text:
        return ""
    if capital:
        text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else f"{text}."


def told(headline: str, effect: str, fix: str, analysis: str, *names: str, unknown: Sequence[str] = ()) -> Message:
    """A finding's words: the headline within `vocabulary.HEADLINE_LIMIT` (the object `names` it
    quotes shortened in the middle, never the ports), one sentence of effect, one imperative
    sentence of fix, and the whole story as the analysis."""
    return Message(fit_headline(without_asides(headline, *names), *names), sentence(effect),
                   sentence(fix, capital=True), analysis, tuple(dict.fromkeys(unknown)))


ASIDE = re.compile(r" \([^()0-9]*\)")  # "(container 'agent', undeclared, from its --port flag)": no port in it


def without_asides(headline: str, *names: str) -> str:
    """The headline without its asides in brackets that name no number, the last first, while even
    its names shortened would not fit (`fit_headline`); the analysis keeps them."""
    while len(fit_headline(headline, *names)) > HEADLINE_LIMIT and (asides := list(ASIDE.finditer(headline))):
        headline = headline[:asides[-1].start()] + headline[asides[-1].end():]
    return headline


def effect_on(where: str, answer: "Answer", parties: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """The model's answer in one clause (`model.datapath.effects.effect`) after where it holds
    ("for connections to port 9100 of its nodes, the Service gets it ..."), and the unknown facts."""
    said, unknown = traffic_effect(answer, {key: name for key, name in parties.items() if key != OTHERWISE})
    return f"{where}, {said}" if where else said, unknown


def names_short(names: Sequence[str], limit: int = 2) -> str:
    """`a/Deployment/x, b/Pod/y and 3 more`: the objects a headline names, the rest counted."""
    shown = ", ".join(names[:limit])
    return f"{shown} and {len(names) - limit} more" if len(names) > limit else shown


# --- KP001: port fields the API server rejects, as the model's reader words them -------------------------

def invalid_port(text: str, rejected: str) -> Message:
    """KP001: the reader's text ("<field> <problem>[: the API server rejects ...][; <remedy>]") as
    headline, effect and fix; the text, with its full stop, stays the analysis. `rejected`: what the
    API server rejects ("the pod", "the Service")."""
    claim, _, rest = text.partition(": ")
    if not rest:
        claim, _, rest = text.partition("; ")
    effect, fix = rest.partition("; ")[::2] if rest.startswith("the API server") else ("", rest)
    if ", so " in claim:  # "containerPort '8080' is quoted, so the API server reads a string and rejects it"
        claim, _, effect = claim.partition(", so ")
    if claim.endswith(")") and " (the API server " in claim:  # "... needs a port number (the API server rejects ...)"
        claim, _, effect = claim[:-1].partition(" (")
    effect = effect or f"the API server rejects {rejected}"
    if not fix:
        if "must equal containerPort" in claim:
            fix = f"Set hostPort to {claim.rsplit('containerPort ', 1)[1].split()[0]}, or leave it out"
        elif "is set on a Service of type" in claim:
            fix = "Remove the nodePort, or make the Service a NodePort or LoadBalancer one"
        elif "needs a port number" in claim:
            fix = "Add the port number clients connect to"
        elif "must be a port number or a port name" in claim:
            fix = "Write a port number (1-65535) or a port name"
        else:
            fix = "Write a port number from 1 to 65535"
    return told(claim, effect, fix, f"{text}.")


# --- KP101, KP104, KP105, KP205 --------------------------------------------------------------------

def host_port(head: str, port: int, host_ip: str, wildcard: bool, node: "Answer", localhost: "Answer | None",
              other_addresses: "Answer | None", paths: Paths, words: Mapping[str, str],
              container: str = "") -> Message:
    """KP101: where the hostPort rule sends the port, asked of the model for 127.0.0.1 and for
    the node's other addresses."""
    if not node.possible(HOSTPORT):
        remedy = "Remove the hostPort, or chain the portmap plugin in the CNI configuration."
        effect, unknown = effect_on(f"for port {port} of its nodes", node, {HOSTPORT: "this pod"})
        return told(f"{head}, but nothing forwards it", effect, remedy,
                    story(f"{head}, but nothing forwards it", explain(node, words), remedy), container,
                    unknown=unknown)
    notes = []  # the other paths into the port, where the model's answer differs
    if wildcard:
        where = "every address of its node"
        if localhost is not None and localhost.always(HOSTPORT):
            where += " (127.0.0.1 included)"
        elif localhost is not None:
            notes.append(f"From the node to 127.0.0.1: {summary_short(localhost, words)}.")
    else:
        where = f"{host_ip} of its node"
        if other_addresses is not None and not other_addresses.possible(HOSTPORT):
            where += " (only there)"
    for key, answer in paths:
        if key == "any-cluster-ip" and answer.possible(HOSTPORT):
            notes.append(f"Pods connecting to any ClusterIP on that port: {summary_short(answer, words)}.")
    analysis = story(head, f"the hostPort rule sends port {port} on {where} to this pod{fact_note(node)}",
                     "No listening socket shows it to netstat or ss, and only one such pod fits per node.", *notes,
                     "Expose it through a Service instead, or keep the hostPort and document which traffic it "
                     "takes.")
    return told(head, f"port {port} on {where} goes to this pod, unseen by netstat and ss",
                "Prefer a Service, or document which traffic the hostPort takes.", analysis, container)


def host_port_in_node_port_range(noun_port: str, port: int, container: str, how: str, node_port_range: str,
                                 low: int) -> Message:
    """KP102, KP103: a port a later nodePort takes from the pod."""
    head = f"{noun_port} (container '{container}'{how}) lies inside the node-port range {node_port_range}"
    effect = (f"a Service that gets nodePort {port} later, even one allocated at random, collides with it on every "
              f"node this pod runs on")
    return told(head, f"any Service that later gets nodePort {port}, even at random, collides with it on this pod's "
                      f"nodes", f"Use a port below {low}.", f"{head}: {effect}. Use a port below {low}.", container)


def init_container_host_port(host_port: int, protocol: str, plain_init: bool, container: str) -> Message:
    """KP104: the kubelet maps only regular containers' ports, so no rule forwards this one; the
    scheduler ignores a plain init container's hostPort but reserves a sidecar's."""
    if plain_init:
        kind = "plain init container"
        scheduler = "the scheduler does not count it either, so nothing on the node is reserved or forwarded"
    else:
        kind = "sidecar (init container, restartPolicy Always)"
        scheduler = "yet the scheduler reserves the port, so the pod blocks it on its node while no traffic arrives"
    head = f"hostPort {host_port}/{protocol} on {kind} '{container}' is never mapped"
    remedy = "Move the port to a regular container, or drop the hostPort."
    effect = ("the kubelet maps only regular containers' ports, so nothing forwards it, and the scheduler does not "
              "reserve it either" if plain_init else
              "the kubelet maps only regular containers' ports, so nothing forwards it, yet the scheduler reserves it "
              "and the pod blocks it on its node")
    return told(head, effect, remedy, story(
        head, f"the kubelet hands only regular containers' ports to the CNI portmap plugin, so nothing DNATs it; "
              f"{scheduler}", "Namespaces enforcing Pod Security 'baseline' reject the pod outright.", remedy),
        container)


def ephemeral_host_port(port: int, protocol: str, container: str, origin: str, low: int) -> Message:
    """KP105: replies to node processes whose source port is the hostPort's number."""
    head = f"hostPort {port}/{protocol} (container '{container}') is in the ephemeral range"
    remedy = f"Prefer a port below {low}, or reserve it in net.ipv4.ip_local_reserved_ports."
    return told(head, f"replies to a node's outgoing connection from source port {port} arrive on it, and "
                      f"hostPort datapaths without conntrack (eBPF) hand them to the pod",
                f"Move the hostPort below {low}, or reserve it in net.ipv4.ip_local_reserved_ports.", story(
                    head, f"node processes get source ports from {origin}, so packets answering a node's outgoing "
                          f"connection from port {port} arrive on the hostPort's number",
                    "With the CNI portmap plugin conntrack keeps those replies out of the DNAT; datapaths that match "
                    "them without conntrack (eBPF hostPort implementations) can hand them to the pod.", remedy),
                container)


def ephemeral_host_network_port(noun_port: str, port: int, container: str, how: str, origin: str,
                                low: int) -> Message:
    """KP106: a hostNetwork pod's bind() fails while an outgoing connection of the node holds its port."""
    head = f"{noun_port} (container '{container}'{how}) is in the ephemeral range"
    analysis = (f"{head}: the node's kernel gives ports in {origin} to outgoing connections of any node process, so "
                f"when one holds {port} the pod's bind() fails with 'address already in use' and it crash-loops on "
                f"that node until the connection closes. Use a port below {low}, or list it in the nodes' "
                f"net.ipv4.ip_local_reserved_ports.")
    return told(head, f"while an outgoing connection of the node holds {port}, the pod's bind() fails ('address "
                      f"already in use') and it crash-loops on that node",
                f"Use a port below {low}, or list it in the nodes' net.ipv4.ip_local_reserved_ports.", analysis,
                container)


def ephemeral_node_port_range(first: int, last: int, overlap: str, label: str, origin: str, low: int) -> Message:
    """KP205: a node-port range reaching into the ephemeral range."""
    head = f"node-port range {first}-{last} overlaps the ephemeral range in {overlap}"
    return told(head, f"a node process whose outgoing connection gets a source port in {overlap} can lose the reply "
                      f"to kube-proxy's rule for that nodePort, and the connection times out",
                f"Keep the node-port range below {low}, or reserve it in net.ipv4.ip_local_reserved_ports.", story(
                    head,
                    f"{label} sets it, nodes hand ports {origin} to outgoing connections, and kube-proxy's rules for "
                    f"a nodePort in {overlap} can take the replies of node processes whose source port it is "
                    f"(connections from the node time out, kubernetes#111682)",
                    f"Keep the node-port range below {low} (the default is 30000-32767), or reserve it in the nodes' "
                    f"net.ipv4.ip_local_reserved_ports."))


def ephemeral_node_port(label: str, port: int, origin: str, low: int) -> Message:
    """KP205: one nodePort inside the ephemeral range."""
    head = f"{label} {port} is in the nodes' ephemeral range"
    return told(head, f"a node process whose outgoing connection gets source port {port} can lose the reply to "
                      f"kube-proxy's rule for it, and the connection times out", f"Pick a nodePort below {low}.",
                story(head, f"the kernel hands ports {origin} to outgoing connections of node processes, and "
                            f"kube-proxy's rule for {port} can take the replies of one that got {port} as its source "
                            f"port (its connection times out, kubernetes#111682)", f"Pick a nodePort below {low}."))


# --- KP201, KP202 --------------------------------------------------------------------------------------

def node_port_headline(answer: "Answer", port: str, theirs: str, host_port: bool, found: str = "") -> str:
    """`hostPort 31123/TCP takes the traffic of nodePort 31123 of web/Service/nginx`, by the answer
    for clients outside the node (the ones a nodePort is for)."""
    if host_port:
        if answer.receiver == HOSTPORT:
            return f"{port} takes the traffic of {theirs}"
        if answer.receiver in (SERVICE, HOST_PROCESS):
            return f"{theirs} takes the traffic of {port}"
        if answer.receiver == UNDEFINED:
            return f"{port} and {theirs} have no fixed winner"
        return f"{port} collides with {theirs}"
    port = f"{port}{found}"
    if answer.receiver == REJECTED:
        return f"kube-proxy refuses {port}: {theirs} has no endpoints"
    if answer.receiver == DROPPED:
        return f"kube-proxy drops {port}: {theirs} has no endpoint on the node"
    if not answer.possible(HOST_PROCESS):
        return f"{theirs} takes the traffic of {port}"
    return f"{theirs} may take the traffic of {port}"


def node_port_collision(headline: str, others: str, answer: "Answer", words: Mapping[str, str], paths: Paths,
                        fix: str, host_network: bool, kube_proxy_holds_ports: bool, free: str = "",
                        port: int = 0, free_port: int | None = None, label: str = "nodePort",
                        names: Sequence[str] = ()) -> Message:
    """KP201/KP202: the model's answer for every path into the port, and the remedies (`free`: the
    `free_host_port` sentence, or ""). A host process also met kube-proxy's own socket on every
    nodePort until v1.23 (kubernetes#108496)."""
    notes = [free] if free else []
    if host_network:
        if kube_proxy_holds_ports:
            notes.append("kube-proxy up to v1.23 also held every nodePort open, so whichever of the two started second "
                         "failed to bind it ('address already in use').")
        notes.append(QUOTA_REMEDY)
    analysis = story(f"{headline}{others}", f"on every node this pod runs on, {explain(answer, words, paths)}", fix,
                     *notes)
    effect, unknown = effect_on(f"for connections to port {port} of its nodes", answer, words)
    return told(f"{headline}{others}", effect, move_fix(free_port, host_network, label), analysis, *names,
                unknown=unknown)


HOST_PORT_FIX = "The API server accepts both without a word: change the hostPort or the {label}."
HOST_NETWORK_FIX = "Move the process to a port below the node-port range, or give the Service another {label}."


def move_fix(free_port: int | None, host_network: bool, label: str) -> str:
    """KP201/KP202: the one-sentence remedy, to the free port when there is one."""
    if host_network:
        to = f"port {free_port}" if free_port is not None else "a port below the node-port range"
        return f"Move the process to {to}, or give the Service another {label}."
    if free_port is not None:
        return f"Move the hostPort to {free_port}, or give the Service another {label}."
    return f"Change the hostPort or the {label}."


def health_check_clash(noun_port: str, theirs: str, others: str, fix: str, free: str = "",
                       free_port: int | None = None, label: str = "healthCheckNodePort",
                       names: Sequence[str] = ()) -> Message:
    """KP202 on a healthCheckNodePort: two sockets, one port, no packet rule involved."""
    analysis = story(f"{noun_port} is {theirs}{others}",
                     "kube-proxy answers the load balancer's health checks on it from its own listening socket, so on "
                     "every node this pod runs on the process that binds it first keeps it and the other cannot bind "
                     "(the pod's process fails, or kube-proxy logs the error and the node fails its health checks)",
                     fix, *([free] if free else []))
    return told(f"{noun_port} is {theirs}{others}",
                "on its nodes, whichever of the pod's process and kube-proxy's health-check server binds it second "
                "fails, and the load balancer may take the node out", move_fix(free_port, True, label), analysis,
                *names)


# --- KP203, KP204: nodePorts the API server refuses -------------------------------------------------------

def node_port_taken(label: str, number: int, other: str, more: str, free_port: int | None) -> Message:
    """KP203: two Services on one nodePort."""
    head = f"{label} {number} is also claimed by {other}{more}"
    remedy = "Pick a free nodePort, or leave it out and let the API server choose."
    return told(head, "the API server rejects whichever of the two is applied second ('provided port is already "
                      "allocated'), whatever the protocol",
                f"Move it to {free_port}, or leave it out and let the API server choose." if free_port is not None
                else remedy,
                f"{head}: nodePorts are allocated cluster-wide by number, whatever the protocol, so the API server "
                f"rejects whichever is applied second ('provided port is already allocated'). {remedy}", other)


def node_port_twice(label: str, port: int, earlier: str, free_port: int | None) -> Message:
    """KP203: one Service using one nodePort twice, not as TCP and UDP of one port."""
    head = f"{label} {port} is used twice in this Service ({earlier})"
    return told(head, "the API server rejects the Service: one Service may reuse a nodePort only for TCP and UDP of "
                      "the same port",
                f"Move it to {free_port}." if free_port is not None else "Use another nodePort.",
                f"{head}: one Service may reuse a nodePort only for TCP and UDP of the same port, so the API server "
                f"rejects it. Use another nodePort.")


def node_port_out_of_range(label: str, port: int, low: int, high: int, free_port: int | None) -> Message:
    """KP204: a nodePort outside the range the API server allocates from."""
    head = f"{label} {port} is outside the node-port range {low}-{high}"
    return told(head, "the API server rejects the Service ('provided port is not in the valid range')",
                f"Move it to {free_port}, or pass the cluster's real range with --node-port-range."
                if free_port is not None else
                "Use a port in the range, or pass the cluster's real range with --node-port-range.",
                f"{head}: the API server rejects the Service ('provided port is not in the valid range'). Use a port "
                f"in the range, or pass the cluster's real range with --node-port-range.")


# --- free alternatives: the port `lint --fix --unsafe-fixes` moves to (model.free_ports) ----------------

def free_host_port(port: int | None, near: int, noun: str, inventory: bool) -> str:
    """KP201, KP202, KP301: the host port nearest `near` that is free wherever the pod may run, the
    one the fix moves a hostPort to; "" when none is known (the pod fits no node). No ": " in it:
    the message's claim ends at the first one (`findings.split_message`)."""
    if port is None:
        return ""
    which = (f"free {noun} on every node this pod may run on" if inventory
             else f"{noun} that no pod, nodePort or node daemon of the inputs holds")
    return f"The nearest {which} is {port} (`kubelint-ports ports --free --near {near}`)."


def free_node_port(port: int | None, node_port_range: str) -> str:
    """KP203, KP204: the lowest nodePort of the range no Service, pod or node daemon of the inputs
    holds, the one the fix moves a nodePort to; "" when the range is full."""
    if port is None:
        return ""
    return f"The lowest nodePort of {node_port_range} the inputs leave free is {port} (`kubelint-ports ports --free`)."


def with_free(message: Message, free: str, fix: str = "") -> Message:
    """A message whose analysis ends in full sentences, followed by its free alternative when there
    is one (`free`: the `free_host_port`/`free_node_port` sentence), and `fix` (naming that port) as
    its fix when given."""
    analysis = f"{message.analysis} {free}" if free else message.analysis
    return replace(message, analysis=analysis, fix=sentence(fix, capital=True) if fix else message.fix)


# --- KP301: ports hostNetwork pods listen on without declaring them (issue 34) ---------------------------

SILENT_MEETINGS = {
    "same": "on the same {nodes} ({where})",
    "shared": "on {nodes} both may use ({where})",
    "their-daemonset": "on every node this pod may use, where {it} run{s}",
    "this-daemonset": "on every node {it} may use, where this DaemonSet runs",
    "pinned": "on the same node ({where}) (all pinned there)",
    "anywhere": "wherever the scheduler puts them together (nothing in their constraints keeps them apart)",
}
BIND_FAILS = ("the process that binds the port second fails with 'address already in use' (its container restarts "
              "again and again, or runs without that listener)")
BEST_EFFORT_NOTE = ("A listen flag is read from the arguments as written, a best guess: check that the process "
                    "listens there.")


def silent_port_conflict(port: str, others: str, count: int, meeting: str, where: str, node_count: int,
                         undeclared: Sequence[str], best_effort: bool, number: int, short_port: str = "",
                         other_names: Sequence[str] = (), free_port: int | None = None) -> Message:
    """KP301, hostNetwork pods on one node port, one of them at least without declaring it (a probe's
    port, a listen flag): the scheduler cannot keep them apart, so where they meet the second cannot
    bind it. `meeting`: how sure it is that they meet (`SILENT_MEETINGS`)."""
    place = SILENT_MEETINGS[meeting].format(nodes="node" if node_count == 1 else "nodes", where=where,
                                            it="it" if count == 1 else "they", s="s" if count == 1 else "")
    places = "may place them side by side" if meeting in ("shared", "anywhere") else "places them side by side"
    analysis = story(f"{port} is also listened on by {others} {place}",
                     f"the scheduler cannot see a port no container declares, so it {places}, and there {BIND_FAILS}",
                     *((BEST_EFFORT_NOTE,) if best_effort else ()),
                     f"Declare containerPort {number} on {' and '.join(undeclared)} (the scheduler then keeps the pods "
                     f"apart, and one that fits nowhere stays Pending instead), or move one of them to another port.")
    nodes = f" on {where}" if meeting in ("same", "shared", "pinned") and where else ""
    move = f"move this one to port {free_port}" if free_port is not None else "move one of them to another port"
    return told(f"{short_port or port} is also listened on by {names_short(other_names) or others}{nodes}",
                f"the scheduler cannot see an undeclared port, so it {places}, and there the second process fails "
                f"to bind it ('address already in use')",
                f"Declare containerPort {number} on {' and '.join(name.rsplit('/', 1)[-1] for name in undeclared)}, "
                f"or {move}.", analysis, *other_names)


def silent_port_replicas(kind: str, pods: str, port: str, node_count: int, where: str, extra: int, best_effort: bool,
                         number: int, short_port: str = "") -> Message:
    """KP301, more replicas than nodes of a hostNetwork workload that listens on a port without
    declaring it: the scheduler doubles them up, and the second process on a node cannot bind it."""
    nodes = f"{node_count} node{'' if node_count == 1 else 's'}"
    analysis = story(f"this {kind} wants {pods} listening on {port}, but only {nodes} can run them ({where})",
                     f"the scheduler cannot see a port no container declares, so it places {extra} of them beside "
                     f"another anyway, and there {BIND_FAILS}",
                     *((BEST_EFFORT_NOTE,) if best_effort else ()),
                     f"Run at most {node_count} replica{'' if node_count == 1 else 's'}, or declare containerPort "
                     f"{number} (the scheduler then keeps the extra pods Pending instead).")
    headline = f"this {kind} wants {pods} listening on {short_port or port}, but only {nodes} can run them ({where})"
    if len(headline) > HEADLINE_LIMIT:
        headline = f"this {kind} wants {pods} listening on {short_port or port}, but only {nodes} can run them"
    return told(headline, f"the scheduler cannot see an undeclared port, so it places {extra} of them beside another, "
                          f"and there the second process fails to bind it ('address already in use')",
                f"Run at most {node_count} replica{'' if node_count == 1 else 's'}, or declare containerPort {number}.",
                analysis)


# --- KP302, KP303, KP304 --------------------------------------------------------------------------------

def host_network_capture(port: str, captured: bool, silent_port: int, host: str, more: str, running: str,
                         source: str, where: str, answer: "Answer", words: Mapping[str, str], paths: Paths,
                         host_name: str) -> Message:
    """KP302: a hostPort against a port a hostNetwork pod listens on without declaring it."""
    head = f"{port} {takes(captured)} port {silent_port} from {host}{more}"
    analysis = story(head, f"that hostNetwork pod{running} listens on it ({source}) without declaring it, so the "
                           f"scheduler cannot keep the two apart; wherever both run{where}, "
                           f"{explain(answer, words, paths)}",
                     f"Declare containerPort {silent_port} on {host_name} (then the scheduler keeps them apart), or "
                     f"use another hostPort.")
    effect, unknown = effect_on(f"where both run{where}", answer, {**words, HOSTPORT: "the hostPort pod"})
    return told(head, effect, f"Declare containerPort {silent_port} on {host_name}, or use another hostPort.",
                analysis, host, unknown=unknown)


def reserved_port(port: str, container_note: str, daemon: str, answer: "Answer | None",
                  words: Mapping[str, str], container: str = "") -> Message:
    """KP303: a node daemon's port taken by a hostPort's DNAT, or fought over by bind()."""
    unknown: tuple[str, ...] = ()
    if answer is not None:
        why = f"on every node this pod runs on, {explain(answer, words)}"
        effect, unknown = effect_on("on its nodes", answer, words)
    else:
        why = effect = f"the pod cannot bind it on nodes where {daemon} runs, or {daemon} cannot"
    head = f"{port} ({container_note}) is {daemon}'s port"
    return told(head, effect, "Pick a port no node daemon uses.",
                story(head, why, "Pick a port no node daemon uses."), container, unknown=unknown)


STATE_THE_FACTS = ("Whether it does depends on facts the inputs do not state: state kube-proxy's mode and the CNI "
                   "plugins' version (`proxy-mode: ...` and `facts: {cni-plugins-version: ...}` in "
                   ".kubelint-ports.yaml, or --proxy-mode and --cni-plugins-version), or lint with the kube-proxy "
                   "ConfigMap and the CNI configuration, to make this an error or make it go away.")


def service_capture(port: int, protocol: str, captured: bool, label: str, what: str, nodes: str, answer: "Answer",
                    words: Mapping[str, str], paths: Paths) -> Message:
    """KP304: a hostPort on every address against a Service port, from pods that connect to it."""
    head = f"hostPort {port}/{protocol} {takes(captured)} the traffic of {label} port {port}"
    analysis = story(f"{head}{what}",
                     f"pods{nodes} that connect to its ClusterIP:{port}: {explain(answer, words, paths)}",
                     "Use another hostPort, or none.", *(() if captured else (STATE_THE_FACTS,)))
    effect, unknown = effect_on(f"for pods{nodes} connecting to its ClusterIP:{port}", answer, words)
    what_short = f"{what.split(';', 1)[0]})" if ";" in what else what  # " (the API server)"
    headline = f"{head}{what_short}" if len(fit_headline(f"{head}{what_short}", label)) <= HEADLINE_LIMIT else head
    return told(headline, effect, "Use another hostPort, or none.", analysis, label, unknown=unknown)


def service_capture_many(port: int, protocol: str, captured: bool, labels: Sequence[str],
                         strongest: Message) -> Message:
    """KP304, one hostPort against several Services' port: the Services named once, the strongest
    case's story told for them all."""
    shown = ", ".join(labels[:5]) + (f" and {len(labels) - 5} more" if len(labels) > 5 else "")
    story_text = strongest.analysis
    said = (story_text.split(": ", 1)[1] if ": " in story_text else story_text).replace(
        "that connect to its ClusterIP", "that connect to their ClusterIPs", 1)
    services = "1 Service's" if len(labels) == 1 else f"{len(labels)} Services'"
    head = f"hostPort {port}/{protocol} {takes(captured)} the traffic of {services} port {port}"
    first = f"{labels[0]} and {len(labels) - 1} more" if len(labels) > 1 else labels[0]
    return replace(strongest, headline=fit_headline(f"{head} ({first})", labels[0]),
                   effect=strongest.effect.replace("connecting to its ClusterIP", "connecting to their ClusterIPs", 1),
                   analysis=f"{head} ({shown}): {said}")


# --- KP305, KP306 ----------------------------------------------------------------------------------------

def external_ip_collision(address_label: str, address: str, port: int, protocol: str, nodes: str, victim: str,
                          more: str, answer: "Answer", words: Mapping[str, str], paths: Paths,
                          victim_name: str = "") -> Message:
    """KP305: a Service exposed on a node's own address, where a hostPort or a process uses the port."""
    remedy = "Expose the Service on an address no node owns, or move one of the two ports."
    analysis = (f"{address_label} {address}:{port}/{protocol} is a host port of node {nodes}: {address} is the node's "
                f"own address and {victim}{more} uses port {port} there; for connections to {address}:{port}, "
                f"{explain(answer, words, paths)}. {remedy}")
    effect, unknown = effect_on(f"for connections to {address}:{port}", answer, words)
    return told(f"{address_label} {address}:{port}/{protocol} is on node {nodes}, where {victim_name or victim}{more} "
                f"also uses port {port}", effect, remedy, analysis, victim_name or victim, nodes, unknown=unknown)


def host_ip_not_on_node(host_ip: str, elsewhere: str, port: int, protocol: str, nodes: str, answer: "Answer",
                        words: Mapping[str, str]) -> Message:
    """KP306: a hostIP none of the pod's nodes has; the model answers for the node's own addresses."""
    head = f"hostIP {host_ip} is on none of the nodes this pod may run on"
    analysis = story(head, f"{elsewhere}, and the hostPort rule for {port}/{protocol} matches only packets sent to "
                           f"{host_ip}: on {nodes}, for packets to the node's own addresses, {explain(answer, words)}",
                     "Use an address those nodes have, or leave hostIP out; if it is a floating address the inventory "
                     "does not list (a keepalived VIP), accept this finding with an annotation.")
    effect, unknown = effect_on(f"the hostPort rule for {port}/{protocol} matches only packets to {host_ip}, so on "
                                f"{nodes}", answer, words)
    return told(head, effect, "Use an address those nodes have, or leave hostIP out.", analysis, unknown=unknown)
