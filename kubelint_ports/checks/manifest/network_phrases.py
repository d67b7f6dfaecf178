"""The stories of the manifest rules about the cluster's network settings and Service routing
(KP400-KP405, KP501-KP505, KP551; and how a `port-schema` policy's own message, KP552-KP555's,
is read as a finding's words), beside `phrases` (ports and hostPorts, KP0xx-KP3xx): what each
finding says, from the model's answers and the names the rule passes in. Every word about a
packet's fate is written in a phrase module (`tests/test_rule_rooms.py`), not in the rules.

Each finding's words are a `Message` (issue 36): a headline of at most `HEADLINE_LIMIT`
characters (object names shortened in the middle when it must, never a port or a CIDR), one
sentence of effect, one imperative sentence of fix, and the whole story as its analysis, told as
it always was (`-v`, SARIF markdown, JSON `message`, the HTML page).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kubelint_ports.model.datapath.facts import HOSTPORT
from kubelint_ports.model.datapath.phrases import story, summary_short
from kubelint_ports.vocabulary import HEADLINE_LIMIT, SHORT_LIMIT, Message, fit_headline, shorten_middle

if TYPE_CHECKING:
    from kubelint_ports.model.datapath.answer import Answer


def headline_of(candidates: Sequence[str], *names: str) -> str:
    """The first candidate headline that fits, from the fullest to the barest (secondary details
    such as where a range is stated left to the analysis); else the barest with the object names
    it quotes shortened in the middle (`fit_headline`); else, for values no one writes (a name of
    a thousand characters), the barest cut in the middle."""
    for candidate in candidates:
        if len(candidate) <= HEADLINE_LIMIT:
            return candidate
    fitted = fit_headline(candidates[-1], *names)
    return fitted if len(fitted) <= HEADLINE_LIMIT else shorten_middle(fitted, HEADLINE_LIMIT)


def sentence(text: str) -> str:
    """`text` with its full stop."""
    return text if text.endswith(".") else f"{text}."


def set_pod_cidr(setting: str, pod_cidr: str, otherwise: str) -> str:
    """The fix of a kube-proxy clusterCIDR: `Set clusterCIDR to the pod range 10.244.0.0/16.`, or
    `otherwise` when the inputs do not state the pod CIDR."""
    if not pod_cidr:
        return sentence(otherwise)
    ranges = "ranges" if "," in pod_cidr else "range"
    return f"Set {setting} to the pod {ranges} {pod_cidr}."


# --- KP400-KP405 -----------------------------------------------------------------------------------------

CIDR_EXAMPLE = "Write one range like 10.244.0.0/16, or a dual-stack pair like 10.244.0.0/16,fd00:10:244::/56."
CIDR_FIX = "Write one range like 10.244.0.0/16, or a dual-stack pair joined by a comma."


def invalid_cidr(label: str, text: str, problem: str, effect: str) -> Message:
    """KP400: a setting's value that is not a CIDR, and what its consumer does with it (the effect;
    what is wrong with the value, `problem`, is the analysis's: the headline quotes the value)."""
    return Message(headline_of([f"{label} {text!r} is not a valid CIDR"], label, repr(text)),
                   sentence(effect), CIDR_FIX,
                   f"{label} {text!r} is not a valid CIDR: {problem}; {effect}. {CIDR_EXAMPLE}")


def masquerade_harm(mode: str, gaps, known_version: str) -> str:
    """KP401: what breaks without clusterCIDR, per plausible kube-proxy version."""
    if len(gaps) == 1:
        return f"in {mode} mode{known_version} {gaps[0].text}"
    return (f"in {mode} mode, what breaks depends on kube-proxy's version (unknown: pass facts.kube-proxy-version "
            f"or lint the kube-proxy DaemonSet): " + "; ".join(f"with {gap.versions} {gap.text}" for gap in gaps))


# KP401, the short of a masquerade gap: whether node processes reach no Service (else only clients
# outside the cluster lose their replies).
GAP_EFFECTS = {
    True: "node processes and hostNetwork pods reach no Service",
    False: "outside clients routed to the Service CIDR lose replies from backends on other nodes",
}


def masquerade_effect(gaps) -> tuple[str, tuple[str, ...]]:
    """KP401: the effect sentence and the facts it depends on; with the version unknown, what the
    newest plausible kube-proxy does (the last gap), as the datapath's effects say "most likely"."""
    if len(gaps) == 1:
        return sentence(GAP_EFFECTS[gaps[0].node_clients_broken]), ()
    return (f"most likely {GAP_EFFECTS[gaps[-1].node_clients_broken]}, but it depends on kube-proxy's version: "
            f"run with -v.", ("kube-proxy-version",))


def cluster_cidr_missing(setting: str, state: str, label: str, ref: str, harm: str, gaps, pods: str, advice: str,
                         pod_cidr: str, ignored: str, launcher: str) -> Message:
    """KP401: kube-proxy without clusterCIDR. `harm` is `masquerade_harm`'s, `pods` is
    `pods_not_short_circuited`'s ("" when pods fare the same), `advice` the setting with the pod
    CIDR and where it is stated, `ignored` the --cluster-cidr flag --config makes kube-proxy ignore."""
    remedy = f"Set {advice}" if advice else f"Set {setting} to the cluster's pod CIDR (not the Service CIDR)"
    note = (f" The {ignored} flag of {launcher} does not count: kube-proxy ignores it because --config is set."
            if ignored else "")
    effect, unknown = masquerade_effect(gaps)
    fix = set_pod_cidr(setting, pod_cidr, f"Set {setting} to the cluster's pod CIDR, not the Service CIDR")
    if ignored:
        fix = f"{fix[:-1]} (the --cluster-cidr flag is ignored)."
    return Message(headline_of([f"{setting} is {state} in {label}", f"{setting} is {state} in {ref}"], ref),
                   effect, fix, f"{setting} is {state} in {label}: {harm}. {pods}{remedy}.{note}", unknown)


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
                               "version",
    "pods-masqueraded": "kube-proxy takes real pods for outside clients, so their Service traffic is masqueraded: "
                        "backends and NetworkPolicies see the node's address instead of the pod's",
}
CLUSTER_CIDR_EFFECTS = {
    "node-clients-unanswered": "node processes and hostNetwork pods reach no Service, whatever kube-proxy's version.",
    "pods-masqueraded": "pods' Service traffic is masqueraded, so backends and NetworkPolicies see the node's address "
                        "instead of the pod's.",
}


def cluster_cidr_overlaps_service_cidr(setting: str, cluster_range: str, label: str, ref: str, service_range: str,
                                       service_label: str, more: str, kind: str, advice: str,
                                       pod_cidr: str) -> Message:
    """KP402: a clusterCIDR holding the Service CIDR; `kind` is what it does (`CLUSTER_CIDR_HARMS`)."""
    claim = f"{setting} {cluster_range} in {label} overlaps the Service CIDR {service_range}"
    remedy = "Set " + advice if advice else "Set it to the pod CIDR, not the Service CIDR"
    return Message(
        headline_of([f"{claim} ({service_label})", claim,
                     f"{setting} {cluster_range} in {ref} overlaps the Service CIDR {service_range}"], ref),
        CLUSTER_CIDR_EFFECTS[kind],
        set_pod_cidr(setting, pod_cidr, f"Set {setting} to the pod CIDR, not the Service CIDR"),
        f"{claim} ({service_label}){more}: {CLUSTER_CIDR_HARMS[kind]}. {remedy}.")


def pods_outside_cluster_cidr(setting: str, label: str, ref: str, source_label: str, pod_range: str, others: int,
                              inside: str, cluster_cidr: str, family: str, masqueraded_too: bool, advice: str,
                              pod_cidr: str) -> Message:
    """KP403: pods kube-proxy takes for outside clients: a pod range (`source_label` states it,
    with `others` more) not inside clusterCIDR's range of its family (`inside`), or clusterCIDR
    without a range of that family ("" `inside`)."""
    more = f" (and {others} more pod ranges)" if others else ""
    if inside:
        problem = f"{source_label} {pod_range}{more} is not inside {setting} {inside} of {label}"
        shorter = [f"pod range {pod_range} is not inside {setting} {inside} of {where}" for where in (label, ref)]
    else:
        problem = f"{setting} {cluster_cidr} of {label} has no {family} range, but {source_label} is {pod_range}{more}"
        shorter = [f"{setting} {cluster_cidr} of {where} has no {family} range for the pod range {pod_range}"
                   for where in (label, ref)]
    masquerade = ("their Service traffic is masqueraded (backends and NetworkPolicies see the node's address) and "
                  if masqueraded_too else "")
    effect = ("kube-proxy takes these pods for outside clients and masquerades their Service traffic (backends see "
              "the node's address)." if masqueraded_too else
              "kube-proxy drops these pods' traffic to `externalTrafficPolicy: Local` LoadBalancer IPs on nodes "
              "without an endpoint.")
    return Message(
        headline_of([problem, *shorter], ref), effect,
        set_pod_cidr(setting, pod_cidr, f"Set {setting} to a pod CIDR that holds every node's podCIDR"),
        story(problem,
              f"kube-proxy takes those pods for outside clients, so {masquerade}their traffic to LoadBalancer IPs "
              f"of `externalTrafficPolicy: Local` Services is dropped on nodes without a local endpoint [INFERRED "
              f"from kube-proxy's source]", f"{advice}."))


def service_cidr_overlap(service_side: bool, subject_range: str, subject_label: str, other_range: str,
                         other_label: str, more: str) -> Message:
    """KP404: a pod address that is also a Service address, told from the subject's side (the
    Service range when `service_side`, else the pod range)."""
    subject, other = ("Service CIDR", "the pod range") if service_side else ("pod range", "the Service CIDR")
    text = f"{subject} {subject_range} ({subject_label}) overlaps {other} {other_range} ({other_label})"
    return Message(
        headline_of([text, f"{subject} {subject_range} ({subject_label}) overlaps {other} {other_range}",
                     f"{subject} {subject_range} overlaps {other} {other_range}"]),
        "a pod given an address in the overlap is unreachable where kube-proxy handles it (every node in ipvs mode).",
        "Choose ranges that do not overlap.",
        story(f"{text}{more}",
              "a pod that gets an address a Service also uses is unreachable wherever kube-proxy handles that "
              "address (on every node in ipvs mode, where ClusterIPs are local), and routes to the two ranges "
              "conflict", "Choose ranges that do not overlap."))


def kube_proxy_configs_disagree(label: str, setting: str, other_label: str, other_setting: str, more: str,
                                difference: str, ref: str, other_ref: str) -> Message:
    """KP405: kube-proxy configurations that differ between node pools; `difference` is the
    headline (`configs_differ_in_mode` or `configs_differ_in_cluster_cidr`)."""
    return Message(
        headline_of([difference], ref, other_ref),
        "host-network clients may reach Services on some nodes only.",
        "Make them agree, unless the node pools are meant to differ.",
        story("kube-proxy configurations disagree",
              f"{label} runs {setting}, but {other_label} runs {other_setting}{more}",
              "Service traffic then behaves differently depending on the node a client is on (host-network clients "
              "may reach Services on some nodes only); make them agree, unless the node pools are meant to differ."))


def configs_differ_in_mode(mode: str, ref: str, other_mode: str, other_ref: str) -> str:
    """KP405's headline when the proxy modes differ."""
    return f"kube-proxy mode is {mode} in {ref} but {other_mode} in {other_ref}"


def configs_differ_in_cluster_cidr(cidr: str, ref: str, other_cidr: str, other_ref: str) -> str:
    """KP405's headline when the clusterCIDRs differ ("" when one is not set)."""
    return f"kube-proxy clusterCIDR is {cidr or 'not set'} in {ref} but {other_cidr or 'not set'} in {other_ref}"


# --- KP501-KP505 -----------------------------------------------------------------------------------------

SELECTORLESS_STORY = ("Service has no selector: the control plane manages no endpoints for it, so it routes nowhere "
                      "unless someone maintains its EndpointSlices by hand. Add a selector matching the pods' "
                      "labels, or keep hand-made EndpointSlices beside it.")
SELECTORLESS_SERVICE = Message(
    "Service has no selector",
    "the control plane manages no endpoints for it, so it routes nowhere unless someone maintains its "
    "EndpointSlices by hand.",
    "Add a selector matching the pods' labels, or keep hand-made EndpointSlices beside it.", SELECTORLESS_STORY)
NO_ENDPOINTS = "the Service has no endpoints and connections to it are refused or time out"
NO_ENDPOINTS_SHORT = "the Service has no endpoints, so connections to it fail."


def keys_text(keys: Sequence[str]) -> str:
    return f"label key{'s' if len(keys) > 1 else ''} " + ", ".join(f"`{key}`" for key in keys)


def dangling_near_miss(selector: str, workload: str, ours: str, theirs: str) -> Message:
    """KP501, a warning: one edit of the selector would select a workload's pods."""
    claim = f"selector {selector} matches no workload, one edit away from the pod labels of {workload}"
    return Message(
        headline_of([claim, f"the selector matches no workload, one edit away from the pod labels of {workload}"],
                    workload),
        NO_ENDPOINTS_SHORT, f"Change the selector's `{ours}` to `{theirs}`.",
        story(claim, f"it has `{ours}` where those pods carry `{theirs}`, so {NO_ENDPOINTS}",
              "Fix the selector or the pod labels."))


def dangling_unwritten(selector: str, where: str, keys: Sequence[str]) -> Message:
    """KP501, a warning: labels no template writes and nothing among the inputs could set."""
    them = "them" if len(keys) > 1 else "it"
    claim = (f"selector {selector} matches no workload and uses {keys_text(keys)}, which no pod template in "
             f"{where} writes")
    return Message(
        headline_of([claim, f"selector {selector} matches no workload: no pod template in {where} writes "
                            f"{keys_text(keys)}",
                     f"the selector matches no workload: no pod template in {where} writes {keys_text(keys)}"]),
        NO_ENDPOINTS_SHORT, f"Fix the selector's {keys_text(keys)} or the pod labels.",
        story(claim,
              f"nothing in the inputs could set {them} at run time either (no custom resource whose operator makes "
              f"pods there, no workload whose pods carry the selector's other labels and might label themselves), "
              f"so {NO_ENDPOINTS}", "Fix the selector or the pod labels."))


def dangling_maybe_at_run_time(selector: str, where: str, keys: Sequence[str], labeller: str) -> Message:
    """KP501, a note: no template carries the labels, but pods may get them at run time."""
    if keys and labeller:
        why = (f"no pod template in {where} writes {keys_text(keys)}, but the pods of {labeller} carry the "
               f"selector's other labels and may set {'them' if len(keys) > 1 else 'it'} on themselves at run time "
               f"(service registration, leader election, a database's role)")
        effect = (f"the Service has no endpoints unless the pods of {labeller} set {keys_text(keys)} on "
                  f"themselves at run time.")
    else:
        why = (f"no pod template in {where} carries these labels, and none is one edit away from them; pods may get "
               f"them at run time (an operator, leader election, a database's role)")
        effect = "the Service has no endpoints unless pods get these labels at run time (an operator, leader election)."
    claim = f"selector {selector} matches no workload among the inputs"
    return Message(headline_of([claim, "the selector matches no workload among the inputs"]), effect,
                   "Fix the selector or the pod labels if nothing sets them at run time.",
                   story(claim, why, f"If nothing does, {NO_ENDPOINTS}; fix the selector or the pod labels."))


def target_port_name_nowhere(name: str, protocol: str, why: str, port: int) -> Message:
    """KP502: a named targetPort no selected pod declares."""
    claim = f"targetPort {name!r} ({protocol}) resolves in no selected pod"
    fix = f"Name the container port {name!r} ({protocol}), or use its number."
    return Message(headline_of([claim]), f"{why}, so port {port} of the Service has no endpoints and routes nowhere.",
                   fix, f"{claim}: {why}, so the EndpointSlice controller lists no endpoint for port {port} and it "
                        f"routes nowhere. {fix}")


def target_port_name_somewhere(name: str, protocol: str, why: str, port: int, served: int) -> Message:
    """KP502: a named targetPort some selected pods lack."""
    claim = f"targetPort {name!r} ({protocol}) is missing in some selected pods"
    effect = (f"{why}, so their pods are left out of port {port}'s endpoints and the {served} other "
              f"workload{'s get' if served > 1 else ' gets'} all its traffic.")
    fix = "Declare the port in every selected workload, or narrow the selector."
    return Message(headline_of([claim]), effect, fix, f"{claim}: {effect} {fix}")


def target_port_number_undeclared(what: str, number: int, workloads: str) -> Message:
    """KP503: a targetPort number no selected container declares."""
    claim = f"{what} is declared by no selected container"
    fix = f"Declare containerPort {number} (and name it), or point targetPort at the port they declare."
    return Message(headline_of([claim]),
                   f"traffic goes to port {number} of the pods of {workloads} whether or not they listen there.",
                   f"Declare containerPort {number}, or point targetPort at a declared port.",
                   f"{claim}: traffic goes to port {number} of the pods of {workloads} whether or not they listen "
                   f"there, and no containerPort or probe of theirs names it. {fix}")


def target_port_number_flagged(what: str, number: int, workload: str, container: str, flag: str,
                               workloads: str) -> Message:
    """KP503: a targetPort number no container declares, which a listen flag names."""
    claim = f"{what} is declared by no selected container, though a listen flag names it"
    return Message(
        headline_of([claim]),
        f"container '{container}' most likely listens there (its `{flag}` names port {number}), but no "
        f"containerPort says so.",
        f"Declare containerPort {number} (and name it) on '{container}'.",
        story(claim,
              f"container '{container}' of {workload} is started with `{flag}` set to port {number}, so it "
              f"most likely listens there (judged from the flag's name; the program is not run)",
              f"Traffic goes to port {number} of the pods of {workloads}; declare containerPort {number} (and name "
              f"it) on '{container}', so that the manifests say what the Service reaches."))


def service_protocol_mismatch(port: int, protocol: str, number: int, others: Sequence[str], workloads: str) -> Message:
    """KP504: the Service port's protocol, which the selected pods do not declare."""
    claim = f"port {port}/{protocol} targets port {number}, which the selected pods declare only for {'/'.join(others)}"
    effect = f"{protocol} packets reach a port where nothing is declared to listen for them ({workloads})."
    fix = f"Set protocol: {others[0]} on the Service port, or add a {protocol} port {number} to the containers."
    return Message(headline_of([claim]), f"{protocol} packets reach no declared listener in {workloads}.", fix,
                   f"{claim}: {effect} {fix}")


def probe_effect(source: str) -> str:
    """KP505: what a probe or hook on a port the container lacks does."""
    return {
        "livenessProbe": "the kubelet restarts the container again and again",
        "readinessProbe": "the pod never becomes Ready and gets no Service traffic",
        "startupProbe": "the container is killed before it ever counts as started",
        "lifecycle.postStart": "a failed postStart hook kills the container",
        "lifecycle.preStop": "the preStop hook fails and the container is stopped without it",
    }[source]


def probe_port_name_missing(source: str, name: str, container: str) -> Message:
    """KP505: a probe or hook naming a port its container does not declare."""
    claim = f"{source} port {name!r} is not a port of container '{container}'"
    fix = f"Declare a port named {name!r} on '{container}', or use the number."
    return Message(headline_of([claim], container), f"every {source} attempt fails: {probe_effect(source)}.", fix,
                   f"{claim}: the kubelet resolves a named port only among the container's own ports, so every "
                   f"{source} attempt fails ({probe_effect(source)}). {fix}")


def probe_port_number_undeclared(source: str, number: int, container: str) -> Message:
    """KP505 with `numeric`: a probe or hook on a port number its container does not declare."""
    claim = f"{source} port {number} is not declared by container '{container}'"
    effect = "the kubelet connects anyway, but nothing in the manifest says the container listens there."
    fix = f"Declare containerPort {number}."
    return Message(headline_of([claim], container), effect, fix, f"{claim}: {effect} {fix}")


# --- KP551 -----------------------------------------------------------------------------------------------

def host_network(ref: str, ports: Sequence[int]) -> Message:
    """KP551: a pod in the node's network namespace, with the ports it declares."""
    listed = f" (declared: {', '.join(map(str, ports))})" if ports else ""
    effect = (f"every port it opens is a port of the node{listed}, outside NetworkPolicies, and one such pod fits "
              f"per node and port.")
    return Message(
        headline_of([f"{ref} runs in the node's network namespace (hostNetwork is true)"], ref),
        f"its ports{listed} are the node's, beyond NetworkPolicies, and one such pod fits per node and port.",
        "Expose the pods through a Service instead of hostNetwork.",
        f"the pod runs in the node's network namespace (hostNetwork is true): {effect} Use a Service (and hostPort "
        f"only if you must).")


# --- port-schema policies (KP552-KP555 and the user's own) ---------------------------------------------

def policy_words(message: str, *names: str) -> Message:
    """KP552-KP555 and every `port-schema` policy: the policy's message as a finding's words. The
    message is the user's, so it is not reworded: one of at most HEADLINE_LIMIT characters is the
    headline, whole; a longer one is
    read as the story built-in messages tell (`Message.from_story`: the claim before ": ", the
    first sentence after it as the effect, the last as the fix) and kept whole as the analysis. A
    claim past the limit gets the object names it quotes shortened in the middle, then is cut in
    the middle; an effect or a fix that would carry the three parts past SHORT_LIMIT is left to
    the analysis (the fix first)."""
    if len(message) <= HEADLINE_LIMIT:
        return Message(message)
    words = Message.from_story(message)
    headline = fit_headline(words.headline, *names)
    if len(headline) > HEADLINE_LIMIT:
        headline = shorten_middle(headline, HEADLINE_LIMIT)
    effect, fix = words.effect, words.fix
    if len(Message(headline, effect, fix).short) > SHORT_LIMIT:
        fix = ""
    if len(Message(headline, effect, fix).short) > SHORT_LIMIT:
        effect = ""
    return Message(headline, effect, fix, message)
