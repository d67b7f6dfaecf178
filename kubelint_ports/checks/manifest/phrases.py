"""The manifest rules' stories (KP1xx-KP4xx): what each finding says about traffic, built from the
model's answers (`model.datapath.phrases.explain`) and the names the rule passes in. A check
chooses which question to ask and which objects are involved; every word about a packet's fate
is written here (`tests/test_rule_rooms.py`), not in the rules beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kubelint_ports.model.datapath.facts import (
    DROPPED,
    HOST_PROCESS,
    HOSTPORT,
    REJECTED,
    SERVICE,
    UNDEFINED,
)
from kubelint_ports.model.allocation import ANY_NODE
from kubelint_ports.model.datapath.phrases import explain, fact_note, story, summary_short

if TYPE_CHECKING:
    from kubelint_ports.model.allocation import Claimant, Conflict
    from kubelint_ports.model.datapath.answer import Answer
    from kubelint_ports.model.objects import HostClaim, Workload

Paths = Sequence[tuple[str, "Answer"]]
QUOTA_REMEDY = ("In namespaces that must not open nodePorts, a ResourceQuota with `services.nodeports: 0` keeps "
                "them from allocating one.")


def takes(captured: bool) -> str:
    """A capture the model is sure of "takes" the traffic; one that depends on unknown facts "may take" it."""
    return "takes" if captured else "may take"


# --- KP101, KP104, KP105, KP205 --------------------------------------------------------------------

def host_port(head: str, port: int, host_ip: str, wildcard: bool, node: "Answer", localhost: "Answer | None",
              other_addresses: "Answer | None", paths: Paths, words: Mapping[str, str]) -> str:
    """KP101: where the hostPort rule sends the port, asked of the model for 127.0.0.1 and for
    the node's other addresses."""
    if not node.possible(HOSTPORT):
        return story(f"{head}, but nothing forwards it", explain(node, words),
                     "Remove the hostPort, or chain the portmap plugin in the CNI configuration.")
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
    return story(head, f"the hostPort rule sends port {port} on {where} to this pod{fact_note(node)}",
                 "No listening socket shows it to netstat or ss, and only one such pod fits per node.", *notes,
                 "Expose it through a Service instead, or keep the hostPort and document which traffic it takes.")


def host_port_in_node_port_range(noun_port: str, port: int, container: str, how: str, node_port_range: str,
                                 low: int) -> str:
    """KP102, KP103: a port a later nodePort takes from the pod."""
    return (f"{noun_port} (container '{container}'{how}) lies inside the node-port range {node_port_range}: a "
            f"Service that gets nodePort {port} later, even one allocated at random, collides with it on every node "
            f"this pod runs on. Use a port below {low}.")


def init_container_host_port(host_port: int, protocol: str, plain_init: bool, container: str) -> str:
    """KP104: the kubelet maps only regular containers' ports, so no rule forwards this one; the
    scheduler ignores a plain init container's hostPort but reserves a sidecar's."""
    if plain_init:
        kind = "plain init container"
        scheduler = "the scheduler does not count it either, so nothing on the node is reserved or forwarded"
    else:
        kind = "sidecar (init container, restartPolicy Always)"
        scheduler = "yet the scheduler reserves the port, so the pod blocks it on its node while no traffic arrives"
    return story(f"hostPort {host_port}/{protocol} on {kind} '{container}' is never mapped",
                 f"the kubelet hands only regular containers' ports to the CNI portmap plugin, so nothing DNATs it; "
                 f"{scheduler}", "Namespaces enforcing Pod Security 'baseline' reject the pod outright.",
                 "Move the port to a regular container, or drop the hostPort.")


def ephemeral_host_port(port: int, protocol: str, container: str, origin: str, low: int) -> str:
    """KP105: replies to node processes whose source port is the hostPort's number."""
    return story(f"hostPort {port}/{protocol} (container '{container}') is in the ephemeral range",
                 f"node processes get source ports from {origin}, so packets answering a node's outgoing connection "
                 f"from port {port} arrive on the hostPort's number",
                 "With the CNI portmap plugin conntrack keeps those replies out of the DNAT; datapaths that match them "
                 "without conntrack (eBPF hostPort implementations) can hand them to the pod.",
                 f"Prefer a port below {low}, or reserve it in net.ipv4.ip_local_reserved_ports.")


def ephemeral_node_port_range(first: int, last: int, overlap: str, label: str, origin: str, low: int) -> str:
    """KP205: a node-port range reaching into the ephemeral range."""
    return story(f"node-port range {first}-{last} overlaps the ephemeral range in {overlap}",
                 f"{label} sets it, nodes hand ports {origin} to outgoing connections, and kube-proxy's rules for a "
                 f"nodePort in {overlap} can take the replies of node processes whose source port it is (connections "
                 f"from the node time out, kubernetes#111682)",
                 f"Keep the node-port range below {low} (the default is 30000-32767), or reserve it in the nodes' "
                 f"net.ipv4.ip_local_reserved_ports.")


def ephemeral_node_port(label: str, port: int, origin: str, low: int) -> str:
    """KP205: one nodePort inside the ephemeral range."""
    return story(f"{label} {port} is in the nodes' ephemeral range",
                 f"the kernel hands ports {origin} to outgoing connections of node processes, and kube-proxy's rule "
                 f"for {port} can take the replies of one that got {port} as its source port (its connection times "
                 f"out, kubernetes#111682)", f"Pick a nodePort below {low}.")


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
                        fix: str, host_network: bool, kube_proxy_holds_ports: bool, free: str = "") -> str:
    """KP201/KP202: the model's answer for every path into the port, and the remedies (`free`: the
    `free_host_port` sentence, or ""). A host process also met kube-proxy's own socket on every
    nodePort until v1.23 (kubernetes#108496)."""
    notes = [free] if free else []
    if host_network:
        if kube_proxy_holds_ports:
            notes.append("kube-proxy up to v1.23 also held every nodePort open, so whichever of the two started second "
                         "failed to bind it ('address already in use').")
        notes.append(QUOTA_REMEDY)
    return story(f"{headline}{others}", f"on every node this pod runs on, {explain(answer, words, paths)}", fix, *notes)


HOST_PORT_FIX = "The API server accepts both without a word: change the hostPort or the {label}."
HOST_NETWORK_FIX = "Move the process to a port below the node-port range, or give the Service another {label}."


def health_check_clash(noun_port: str, theirs: str, others: str, fix: str, free: str = "") -> str:
    """KP202 on a healthCheckNodePort: two sockets, one port, no packet rule involved."""
    return story(f"{noun_port} is {theirs}{others}",
                 "kube-proxy answers the load balancer's health checks on it from its own listening socket, so on "
                 "every node this pod runs on the process that binds it first keeps it and the other cannot bind (the "
                 "pod's process fails, or kube-proxy logs the error and the node fails its health checks)", fix,
                 *([free] if free else []))


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


def with_free(message: str, free: str) -> str:
    """A message that ends in full sentences, followed by its free alternative when there is one."""
    return f"{message} {free}" if free else message


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
                         undeclared: Sequence[str], best_effort: bool, number: int) -> str:
    """KP301, hostNetwork pods on one node port, one of them at least without declaring it (a probe's
    port, a listen flag): the scheduler cannot keep them apart, so where they meet the second cannot
    bind it. `meeting`: how sure it is that they meet (`SILENT_MEETINGS`)."""
    place = SILENT_MEETINGS[meeting].format(nodes="node" if node_count == 1 else "nodes", where=where,
                                            it="it" if count == 1 else "they", s="s" if count == 1 else "")
    places = "may place them side by side" if meeting in ("shared", "anywhere") else "places them side by side"
    return story(f"{port} is also listened on by {others} {place}",
                 f"the scheduler cannot see a port no container declares, so it {places}, and there {BIND_FAILS}",
                 *((BEST_EFFORT_NOTE,) if best_effort else ()),
                 f"Declare containerPort {number} on {' and '.join(undeclared)} (the scheduler then keeps the pods "
                 f"apart, and one that fits nowhere stays Pending instead), or move one of them to another port.")


def silent_port_replicas(kind: str, pods: str, port: str, node_count: int, where: str, extra: int, best_effort: bool,
                         number: int) -> str:
    """KP301, more replicas than nodes of a hostNetwork workload that listens on a port without
    declaring it: the scheduler doubles them up, and the second process on a node cannot bind it."""
    nodes = f"{node_count} node{'' if node_count == 1 else 's'}"
    return story(f"this {kind} wants {pods} listening on {port}, but only {nodes} can run them ({where})",
                 f"the scheduler cannot see a port no container declares, so it places {extra} of them beside "
                 f"another anyway, and there {BIND_FAILS}",
                 *((BEST_EFFORT_NOTE,) if best_effort else ()),
                 f"Run at most {node_count} replica{'' if node_count == 1 else 's'}, or declare containerPort {number} "
                 f"(the scheduler then keeps the extra pods Pending instead).")


# --- KP302, KP303, KP304 --------------------------------------------------------------------------------

def host_network_capture(port: str, captured: bool, silent_port: int, host: str, more: str, running: str,
                         source: str, where: str, answer: "Answer", words: Mapping[str, str], paths: Paths,
                         host_name: str) -> str:
    """KP302: a hostPort against a port a hostNetwork pod listens on without declaring it."""
    return story(f"{port} {takes(captured)} port {silent_port} from {host}{more}",
                 f"that hostNetwork pod{running} listens on it ({source}) without declaring it, so the scheduler "
                 f"cannot keep the two apart; wherever both run{where}, {explain(answer, words, paths)}",
                 f"Declare containerPort {silent_port} on {host_name} (then the scheduler keeps them apart), or use "
                 f"another hostPort.")


def reserved_port(port: str, container_note: str, daemon: str, answer: "Answer | None",
                  words: Mapping[str, str]) -> str:
    """KP303: a node daemon's port taken by a hostPort's DNAT, or fought over by bind()."""
    if answer is not None:
        effect = f"on every node this pod runs on, {explain(answer, words)}"
    else:
        effect = f"the pod cannot bind it on nodes where {daemon} runs, or {daemon} cannot"
    return story(f"{port} ({container_note}) is {daemon}'s port", effect, "Pick a port no node daemon uses.")


STATE_THE_FACTS = ("Whether it does depends on facts the inputs do not state: state kube-proxy's mode and the CNI "
                   "plugins' version (`proxy-mode: ...` and `facts: {cni-plugins-version: ...}` in "
                   ".kubelint-ports.yaml, or --proxy-mode and --cni-plugins-version), or lint with the kube-proxy "
                   "ConfigMap and the CNI configuration, to make this an error or make it go away.")


def service_capture(port: int, protocol: str, captured: bool, label: str, what: str, nodes: str, answer: "Answer",
                    words: Mapping[str, str], paths: Paths) -> str:
    """KP304: a hostPort on every address against a Service port, from pods that connect to it."""
    return story(f"hostPort {port}/{protocol} {takes(captured)} the traffic of {label} port {port}{what}",
                 f"pods{nodes} that connect to its ClusterIP:{port}: {explain(answer, words, paths)}",
                 "Use another hostPort, or none.", *(() if captured else (STATE_THE_FACTS,)))


def service_capture_many(port: int, protocol: str, captured: bool, labels: Sequence[str], strongest: str) -> str:
    """KP304, one hostPort against several Services' port: the Services named once, the strongest
    case's story told for them all."""
    shown = ", ".join(labels[:5]) + (f" and {len(labels) - 5} more" if len(labels) > 5 else "")
    told = (strongest.split(": ", 1)[1] if ": " in strongest else strongest).replace(
        "that connect to its ClusterIP", "that connect to their ClusterIPs", 1)
    services = "1 Service's" if len(labels) == 1 else f"{len(labels)} Services'"
    return (f"hostPort {port}/{protocol} {takes(captured)} the traffic of {services} port {port} "
            f"({shown}): {told}")


# --- KP305, KP306 ----------------------------------------------------------------------------------------

def external_ip_collision(head: str, address: str, port: int, answer: "Answer", words: Mapping[str, str],
                          paths: Paths) -> str:
    """KP305: a Service exposed on a node's own address, where a hostPort or a process uses the port."""
    return (f"{head}; for connections to {address}:{port}, {explain(answer, words, paths)}. Expose the Service on an "
            f"address no node owns, or move one of the two ports.")


def host_ip_not_on_node(host_ip: str, elsewhere: str, port: int, protocol: str, nodes: str, answer: "Answer",
                        words: Mapping[str, str]) -> str:
    """KP306: a hostIP none of the pod's nodes has; the model answers for the node's own addresses."""
    return story(f"hostIP {host_ip} is on none of the nodes this pod may run on",
                 f"{elsewhere}, and the hostPort rule for {port}/{protocol} matches only packets sent to {host_ip}: "
                 f"on {nodes}, for packets to the node's own addresses, {explain(answer, words)}",
                 "Use an address those nodes have, or leave hostIP out; if it is a floating address the inventory does "
                 "not list (a keepalived VIP), accept this finding with an annotation.")


# --- KP401-KP405 -----------------------------------------------------------------------------------------

def masquerade_harm(mode: str, gaps, known_version: str) -> str:
    """KP401: what breaks without clusterCIDR, per plausible kube-proxy version."""
    if len(gaps) == 1:
        return f"in {mode} mode{known_version} {gaps[0].text}"
    return (f"in {mode} mode, what breaks depends on kube-proxy's version (unknown: pass facts.kube-proxy-version "
            f"or lint the kube-proxy DaemonSet): " + "; ".join(f"with {gap.versions} {gap.text}" for gap in gaps))


POD_SHORT_CIRCUIT_PARTIES = {HOSTPORT: "a hostPort pod on that port"}


def pods_not_short_circuited(with_hostport: "Answer", without_hostport: "Answer") -> str:
    """KP401: what the model says of a pod's packet for an externalTrafficPolicy: Local Service's
    NodePort on a node without its endpoint, once kube-proxy cannot tell pods apart."""
    return (f"Nor can kube-proxy tell pods apart for externalTrafficPolicy: Local Services: on a node without the "
            f"Service's endpoint a pod's packet to its NodePort, external or load-balancer IP is not sent to the Service, "
            f"so {summary_short(with_hostport, POD_SHORT_CIRCUIT_PARTIES)}, and without one "
            f"{summary_short(without_hostport, {})}.")


CLUSTER_CIDR_HARMS = {
    "node-clients-unanswered": "node processes and hostNetwork pods send to a ClusterIP from that ClusterIP, which "
                               "lies in this range, so kube-proxy does not masquerade them and the reply goes back to "
                               "the VIP on the backend's own node: no Service answers them, whatever kube-proxy's "
                               "version (the detour of incident 002)",
    "pods-masqueraded": "kube-proxy takes real pods for outside clients, so their Service traffic is masqueraded: "
                        "backends and NetworkPolicies see the node's address instead of the pod's",
}


def cluster_cidr_harm(kind: str) -> str:
    """KP402: what a clusterCIDR holding the Service CIDR does."""
    return CLUSTER_CIDR_HARMS[kind]


def pods_outside_cluster_cidr(problem: str, masqueraded_too: bool, advice: str) -> str:
    """KP403: pods kube-proxy takes for outside clients."""
    masquerade = ("their Service traffic is masqueraded (backends and NetworkPolicies see the node's address) and "
                  if masqueraded_too else "")
    return story(problem,
                 f"kube-proxy takes those pods for outside clients, so {masquerade}their traffic to LoadBalancer IPs "
                 f"of `externalTrafficPolicy: Local` Services is dropped on nodes without a local endpoint [INFERRED "
                 f"from kube-proxy's source]", f"{advice}.")


def service_cidr_overlap(text: str, more: str) -> str:
    """KP404: a pod address that is also a Service address."""
    return story(f"{text}{more}",
                 "a pod that gets an address a Service also uses is unreachable wherever kube-proxy handles that "
                 "address (on every node in ipvs mode, where ClusterIPs are local), and routes to the two ranges "
                 "conflict", "Choose ranges that do not overlap.")


def kube_proxy_configs_disagree(label: str, setting: str, other_label: str, other_setting: str, more: str) -> str:
    """KP405: kube-proxy configurations that differ between node pools."""
    return story("kube-proxy configurations disagree",
                 f"{label} runs {setting}, but {other_label} runs {other_setting}{more}",
                 "Service traffic then behaves differently depending on the node a client is on (host-network clients "
                 "may reach Services on some nodes only); make them agree, unless the node pools are meant to differ.")


# --- KP501-KP505 -----------------------------------------------------------------------------------------

SELECTORLESS_SERVICE = ("Service has no selector: the control plane manages no endpoints for it, so it routes nowhere "
                        "unless someone maintains its EndpointSlices by hand. Add a selector matching the pods' "
                        "labels, or keep hand-made EndpointSlices beside it.")
NO_ENDPOINTS = "the Service has no endpoints and connections to it are refused or time out"


def keys_text(keys: Sequence[str]) -> str:
    return f"label key{'s' if len(keys) > 1 else ''} " + ", ".join(f"`{key}`" for key in keys)


def dangling_near_miss(selector: str, workload: str, ours: str, theirs: str) -> str:
    """KP501, a warning: one edit of the selector would select a workload's pods."""
    return story(f"selector {selector} matches no workload, one edit away from the pod labels of {workload}",
                 f"it has `{ours}` where those pods carry `{theirs}`, so {NO_ENDPOINTS}",
                 "Fix the selector or the pod labels.")


def dangling_unwritten(selector: str, where: str, keys: Sequence[str]) -> str:
    """KP501, a warning: labels no template writes and nothing among the inputs could set."""
    them = "them" if len(keys) > 1 else "it"
    return story(f"selector {selector} matches no workload and uses {keys_text(keys)}, which no pod template in "
                 f"{where} writes",
                 f"nothing in the inputs could set {them} at run time either (no custom resource whose operator makes "
                 f"pods there, no workload whose pods carry the selector's other labels and might label themselves), "
                 f"so {NO_ENDPOINTS}", "Fix the selector or the pod labels.")


def dangling_maybe_at_run_time(selector: str, where: str, keys: Sequence[str], labeller: str) -> str:
    """KP501, a note: no template carries the labels, but pods may get them at run time."""
    if keys and labeller:
        why = (f"no pod template in {where} writes {keys_text(keys)}, but the pods of {labeller} carry the "
               f"selector's other labels and may set {'them' if len(keys) > 1 else 'it'} on themselves at run time "
               f"(service registration, leader election, a database's role)")
    else:
        why = (f"no pod template in {where} carries these labels, and none is one edit away from them; pods may get "
               f"them at run time (an operator, leader election, a database's role)")
    return story(f"selector {selector} matches no workload among the inputs", why,
                 f"If nothing does, {NO_ENDPOINTS}; fix the selector or the pod labels.")


def target_port_name_nowhere(name: str, protocol: str, why: str, port: int) -> str:
    """KP502: a named targetPort no selected pod declares."""
    return (f"targetPort {name!r} ({protocol}) resolves in no selected pod: {why}, so the EndpointSlice controller "
            f"lists no endpoint for port {port} and it routes nowhere. Name the container port {name!r} "
            f"({protocol}), or use its number.")


def target_port_name_somewhere(name: str, protocol: str, why: str, port: int, served: int) -> str:
    """KP502: a named targetPort some selected pods lack."""
    return (f"targetPort {name!r} ({protocol}) is missing in some selected pods: {why}, so their pods are left out "
            f"of port {port}'s endpoints and the {served} other workload{'s get' if served > 1 else ' gets'} all its "
            f"traffic. Declare the port in every selected workload, or narrow the selector.")


def target_port_number_undeclared(what: str, number: int, workloads: str) -> str:
    """KP503: a targetPort number no selected container declares."""
    return (f"{what} is declared by no selected container: traffic goes to port {number} of the pods of "
            f"{workloads} whether or not they listen there, and no containerPort or probe of theirs names it. "
            f"Declare containerPort {number} (and name it), or point targetPort at the port they declare.")


def target_port_number_flagged(what: str, number: int, workload: str, container: str, flag: str,
                               workloads: str) -> str:
    """KP503: a targetPort number no container declares, which a listen flag names."""
    return story(f"{what} is declared by no selected container, though a listen flag names it",
                 f"container '{container}' of {workload} is started with `{flag}` set to port {number}, so it "
                 f"most likely listens there (judged from the flag's name; the program is not run)",
                 f"Traffic goes to port {number} of the pods of {workloads}; declare containerPort {number} (and name "
                 f"it) on '{container}', so that the manifests say what the Service reaches.")


def service_protocol_mismatch(port: int, protocol: str, number: int, others: Sequence[str], workloads: str) -> str:
    """KP504: the Service port's protocol, which the selected pods do not declare."""
    return (f"port {port}/{protocol} targets port {number}, which the selected pods declare only for "
            f"{'/'.join(others)}: {protocol} packets reach a port where nothing is declared to listen for them "
            f"({workloads}). Set protocol: {others[0]} on the Service port, or add a {protocol} port {number} to the "
            f"containers.")
def probe_effect(source: str) -> str:
    """KP505: what a probe or hook on a port the container lacks does."""
    return {
        "livenessProbe": "the kubelet restarts the container again and again",
        "readinessProbe": "the pod never becomes Ready and gets no Service traffic",
        "startupProbe": "the container is killed before it ever counts as started",
        "lifecycle.postStart": "a failed postStart hook kills the container",
        "lifecycle.preStop": "the preStop hook fails and the container is stopped without it",
    }[source]


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


def conflict_message(conflict: Conflict, claimant: Claimant, others: list[Claimant]) -> str:
    workload = claimant.workload
    port = port_text(claimant.claim)
    pending = plural(conflict.pending, "pod")
    outcome = (f"{pending} stay{'s' if conflict.pending == 1 else ''} Pending with '{SCHEDULER_MESSAGE}'. "
               f"Give them distinct host ports, or keep them on different nodes.")
    if conflict.nodes == [ANY_NODE]:
        holders = [c.workload for c in conflict.claimants if c.workload.is_daemonset and c.workload is not workload]
        if all(c.workload.is_daemonset for c in conflict.claimants):
            return (f"{port} is also needed by {others_text(others)}: these DaemonSets run on the same nodes "
                    f"and only one pod per node can hold the port, so on every such node {outcome}")
        if workload.is_daemonset:
            return (f"{port} is held by this DaemonSet{selector_text(workload)} on every node that "
                    f"{others_text(others)} may use: {outcome}")
        names = ", ".join(f"{d.ref}{selector_text(d)}" for d in holders)
        verb = "runs" if len(holders) == 1 else "run"
        return (f"{port} is also needed by {others_text(others)}, but {names} {verb} on every node these pods may "
                f"use and hold{'s' if len(holders) == 1 else ''} it there: {outcome}")
    where = node_list(conflict.nodes)
    if not others:
        return (f"this {workload.ref.kind} wants {workload.pods} with {port}, but only "
                f"{plural(len(conflict.nodes), 'node')} can run them ({where}) and each node fits one pod with "
                f"this port: {outcome}")
    pinned = " (all pinned there)" if conflict.provable_without_inventory else ""
    return (f"{port} ({workload.pods}) is also needed by {others_text(others)} on the same "
            f"{'node' if len(conflict.nodes) == 1 else 'nodes'} ({where}){pinned}; one pod per node fits, so "
            f"{outcome}")


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
