"""The datapath model's words: the only place that says what a packet does.

Decisions (`route`, `answer`) name their steps with ids; this module turns answers into sentences
(`summary`, `explain`) and into the `traffic` data of findings. The rule families' stories, built
from these sentences in the one shape of a finding's message (`story`), sit beside the rules they
phrase: `checks.manifest.phrases` (manifests) and `checks.node.phrases` (node snapshots).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kubelint_ports.model.datapath.facts import (
    APPENDED,
    DROPPED,
    HOST_PROCESS,
    HOSTPORT,
    NFT_ANY,
    NFT_BROKEN,
    NFT_LOCAL,
    NO_HOSTPORT,
    NOTHING,
    OTHERWISE,
    PREPENDED,
    REJECTED,
    SERVICE,
    UNDEFINED,
    losers_of,
    receiver_rank,
)

if TYPE_CHECKING:
    from kubelint_ports.model.datapath.answer import Answer, Outcome

# --- a finding's message: the shape of the rule families' stories (`checks.*.phrases`) ---

def story(claim: str, why: str, *then: str) -> str:
    """A finding's message in the shape its readers split (`findings.split_message`): the short
    claim, ": ", why (one sentence; its full stop is added here), then the sentences that follow
    (what else happens, the remedy), each with its own full stop."""
    return " ".join((f"{claim}: {why}.", *then))


# --- steps: what each handler did ---------------------------------------------------------------------

STEP_WORDS = {
    "kp-iptables-service-dnat": "kube-proxy's KUBE-SERVICES rule DNATs it to the Service's endpoints",
    "kp-iptables-nodeport-dnat": "kube-proxy's KUBE-NODEPORTS rule DNATs it to the Service's endpoints",
    "kp-iptables-nodeport-none": "kube-proxy writes no NodePort DNAT for a Service without endpoints",
    "kp-ipvs-accept-service": "kube-proxy ACCEPTs the Service's (IP, port) pair in KUBE-SERVICES, which ends the nat "
                              "table",
    "kp-ipvs-nodeport-mark": "kube-proxy only marks NodePort packets in IPVS mode",
    "kp-ipvs-nodeport-local-return": "kube-proxy RETURNs externalTrafficPolicy: Local NodePorts "
                                     "(KUBE-NODE-PORT-LOCAL) without a DNAT",
    "kp-ipvs-nodeport-local-accept": "kube-proxy < v1.11 ACCEPTs externalTrafficPolicy: Local NodePorts in "
                                     "KUBE-NODE-PORT, which ends the nat table",
    "kp-nft-service-dnat": "kube-proxy's nftables `services` chain DNATs it to the Service's endpoints",
    "kp-nft-nodeport-dnat": "kube-proxy's nftables NodePort map DNATs it to the Service's endpoints",
    "ext-short-circuit-pod": "with externalTrafficPolicy: Local kube-proxy still sends pods' packets to any endpoint",
    "ext-short-circuit-node": "with externalTrafficPolicy: Local kube-proxy still sends the node's own packets to any "
                              "endpoint",
    "ext-pod-undetected": "kube-proxy cannot tell pods' packets apart (no clusterCIDR), so its external chain does "
                          "not short-circuit the pod's packet to the Service",
    "ext-no-local-endpoint": "kube-proxy's external chain (externalTrafficPolicy: Local) has no endpoint on this node "
                             "and no final jump, so a packet from outside the node passes on",
    "hp-iptables-dnat": "the hostPort rule (CNI-HOSTPORT-DNAT) DNATs it to the hostPort pod",
    "hp-nft-any-destination": "portmap's nftables prerouting chain DNATs that port for any destination",
    "hp-nft-dnat": "the hostPort rule in its nftables table DNATs it to the hostPort pod",
    "kp-reject-service": "kube-proxy REJECTs the Service's address: it has no endpoints",
    "kp-reject-service-before-nat": "kube-proxy REJECTs the Service's address before NAT: it has no endpoints",
    "kp-reject-nodeport": "kube-proxy REJECTs the NodePort: the Service has no endpoints",
    "kp-drop-internal": "kube-proxy DROPs the ClusterIP (internalTrafficPolicy: Local, no endpoint on this node): the "
                        "client times out",
    "kp-drop-external": "kube-proxy DROPs it (externalTrafficPolicy: Local, no endpoint on this node): the client "
                        "times out",
    "kp-drop-nodeport": "kube-proxy DROPs the NodePort (externalTrafficPolicy: Local, no endpoint on this node): the "
                        "client times out",
    "kp-drop-before-nat": "kube-proxy DROPs it before NAT (a traffic policy Local, no endpoint on this node): the "
                          "client times out",
    "ipvs-local-delivery": "IPVS takes it at local delivery, before any socket",
    "ipvs-no-real-server": "IPVS has no real server for it and refuses it",
    "ipvs-localhost-hang": "kube-proxy v1.10 to v1.21 makes 127.0.0.1:nodePort an IPVS virtual server, and IPVS takes "
                           "it before the listening process: the connection hangs (kubernetes#96879, gone in v1.22)",
    "ipvs-no-local-real-server": "IPVS has no real server on this node for it (a traffic policy Local) and refuses it",
    "process": "delivered to the process listening on the node",
    "order-hooks": "the tables hook dstnat at the same priority: the one registered last runs first",
    "order-inserted": "portmap < v0.7.5 and kube-proxy insert their jumps at the top only when absent: the one "
                      "inserted last runs first",
}


def step_text(step: str) -> str:
    return STEP_WORDS.get(step, step)


def steps_text(steps: Iterable[str]) -> str:
    return "; ".join(step_text(step) for step in steps)


# --- receivers, conditions, outcomes ---------------------------------------------------------------------

RECEIVER_WORDS = {
    HOSTPORT: "the hostPort pod",
    SERVICE: "the Service",
    HOST_PROCESS: "the process on the node",
    REJECTED: "nobody (kube-proxy REJECTs it: connection refused)",
    DROPPED: "nobody (kube-proxy DROPs it: the client times out)",
    NOTHING: "nobody",
}

# Dimensions enumerated when unknown, with the words that name their values in messages.
DIMENSION_WORDS = {
    "proxy-mode": {"iptables": "in iptables mode", "ipvs": "in IPVS mode", "nftables": "in nftables mode"},
    "hostport": {APPENDED: "with CNI portmap >= v0.7.5 (or CRI-O < 1.33)",
                 PREPENDED: "with CNI portmap < v0.7.5",
                 NFT_ANY: "with portmap's nftables backend v1.6.1-v1.8.x",
                 NFT_LOCAL: "with portmap's nftables backend >= v1.9 (or CRI-O >= 1.33)",
                 NFT_BROKEN: "with portmap v1.6.0's nftables backend",
                 NO_HOSTPORT: "without a hostPort implementation"},
    "endpoints": {True: "when the Service has endpoints", False: "when the Service has no endpoints"},
    "local-endpoints": {True: "on nodes with an endpoint of the Service",
                        False: "on nodes without an endpoint of the Service"},
    "secondary-covered": {True: "when nodePortAddresses holds that address",
                          False: "when nodePortAddresses leaves that address out"},
}


def join_or(parts: list[str]) -> str:
    parts = list(dict.fromkeys(parts))
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def condition_text(when) -> str:
    terms = [" ".join(DIMENSION_WORDS[d][v] for d, v in term) for term in when if term]
    return join_or(terms)


def who(receiver: str, parties: Mapping[str, str]) -> str:
    return parties.get(receiver) or RECEIVER_WORDS.get(receiver, receiver)


def _order_choice(outcome: "Outcome", parties: Mapping[str, str]) -> str:
    """Both outcomes of an order nobody fixes, and what decides between them."""
    alternatives = sorted(outcome.route.alternatives, key=lambda r: receiver_rank(r.receiver))
    hostport = [r for r in alternatives if r.receiver == HOSTPORT]
    other = [r for r in alternatives if r.receiver != HOSTPORT]
    reason = outcome.route.steps[0] if outcome.route.steps else "order-hooks"
    if hostport and other and reason == "order-inserted":
        return (f"it depends on which jump was inserted last: {who(HOSTPORT, parties)} gets it when portmap's was "
                f"(a hostPort pod added after kube-proxy started), {who(other[0].receiver, parties)} when "
                f"kube-proxy's was (after an iptables flush or a kube-proxy restart that re-created it)")
    options = " or ".join(who(r, parties) for r in sorted(outcome.route.receivers, key=receiver_rank))
    if reason == "order-inserted":
        return f"it depends on which jump was inserted last ({options})"
    return f"the order is undefined ({options}: whichever table hooked dstnat last runs first)"


def outcome_clause(outcome: "Outcome", parties: Mapping[str, str]) -> str:
    """`in IPVS mode nginx gets it` / `in nftables mode the order is undefined (...)`."""
    when = condition_text(outcome.when)
    if outcome.receiver == UNDEFINED:
        what = _order_choice(outcome, parties)
        return f"{when}, {what}" if when else what
    if outcome.receiver == REJECTED:
        what = "kube-proxy refuses it"
    elif outcome.receiver == DROPPED:
        what = "kube-proxy drops it (a timeout)"
    elif outcome.receiver == NOTHING:
        what = "nothing answers"
    elif outcome.receiver == OTHERWISE:
        return parties.get(OTHERWISE, "otherwise it goes elsewhere")
    else:
        what = f"{who(outcome.receiver, parties)} gets it"
    return f"{what} {when}".strip() if when else what


def summary(answer: "Answer", parties: Mapping[str, str]) -> str:
    """One sentence: the winner and the loser when certain, else what each outcome depends on."""
    if answer.certain:
        outcome = answer.outcomes[0]
        mechanism = steps_text(outcome.route.steps)
        losers = sorted(losers_of(outcome.receiver, parties))
        lost = f", and {' and '.join(parties[loser] for loser in losers)} never sees it" if losers else ""
        winner = who(outcome.receiver, parties)
        if outcome.receiver in (REJECTED, DROPPED):
            return f"{mechanism}{lost}"
        if not mechanism:  # no handler and no listener: the packet finds nothing on this node
            return f"no rule and no listener on the node takes it{lost}"
        return f"{mechanism}, so {winner} receives it{lost}"
    if len(answer.outcomes) == 1:  # UNDEFINED whatever the unknown facts
        return outcome_clause(answer.outcomes[0], parties)
    return "; ".join(outcome_clause(outcome, parties) for outcome in answer.outcomes)


def summary_short(answer: "Answer", parties: Mapping[str, str]) -> str:
    if answer.certain:
        if answer.receiver == DROPPED:
            return "kube-proxy drops it (a timeout)"
        if answer.receiver == REJECTED:
            return "kube-proxy refuses it"
        return f"{who(answer.receiver, parties)} gets it"
    return summary(answer, parties)


# --- facts --------------------------------------------------------------------------------------------

FACT_WORDS = {"proxy-mode": "proxy mode", "kube-proxy-version": "kube-proxy", "hostport": "hostPorts by",
              "hostport-backend": "portmap backend", "cni-plugins-version": "CNI plugins", "crio-version": "CRI-O",
              "node-port-addresses": "nodePortAddresses", "localhost-node-ports": "localhostNodePorts",
              "masquerade-all": "masqueradeAll", "hostport-order": "observed order",
              "iptables-backends": "iptables backends", "local-detector": "kube-proxy tells pods apart"}


def fact_text(name: str, value: Any) -> str:
    """`proxy mode ipvs`, `masqueradeAll false`, `nodePortAddresses 10.0.0.0/8, 127.0.0.1/32`."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, (list, tuple)):
        value = ", ".join(map(str, value))
    return f"{FACT_WORDS.get(name, name)} {value}"


def fact_sources(answer: "Answer", names: Iterable[str]) -> str:
    """`(proxy mode ipvs from --proxy-mode; CNI plugins v1.1.1 from kube-system/ConfigMap/...)`"""
    shown = answer.facts.shown()
    parts = [f"{fact_text(name, shown[name]['value'])} from {shown[name]['source']}"
             for name in names if name in shown]
    return f" ({'; '.join(parts)})" if parts else ""


def fact_note(answer: "Answer") -> str:
    return fact_sources(answer, answer.deciding_facts())


# --- other paths into the same port ------------------------------------------------------------------

PATH_WORDS = {
    "node": "from the node itself",
    "node-to-service": "from the node",
    "localhost": "from the node to 127.0.0.1",
    "other-addresses": "to the node's other addresses",
    "secondary": "to the node's other addresses (a second interface, the CNI bridge's gateway)",
    "outside": "from outside the node",
    "pods": "from pods on the node",
    "any-cluster-ip": "to any ClusterIP on that port",
    "external-addresses": "to its external and load-balancer IPs",
}


def explain(answer: "Answer", parties: Mapping[str, str], others: Sequence[tuple[str, "Answer"]] = ()) -> str:
    """The model's sentence, the facts it rests on, and any other path where the winner differs."""
    text = summary(answer, parties) + fact_note(answer)
    for key, other in others:
        if other.receiver != answer.receiver:
            text += f"; {PATH_WORDS[key]}: {summary_short(other, parties)}"
    return text


def answer_data(answer: "Answer", parties: Mapping[str, str]) -> dict[str, Any]:
    """The `traffic` property of a finding: the model's answer as data."""
    receiver = answer.receiver
    losers = sorted(losers_of(receiver, parties)) if answer.certain else []
    return {
        "destination": answer.destination,
        "client": answer.client,
        "port": answer.port,
        "protocol": answer.protocol,
        "receiver": receiver,
        "receiverName": parties.get(receiver, ""),
        "loser": [parties[loser] for loser in losers],
        "certain": answer.certain,
        "possible": answer.possible_receivers,
        "dependsOn": list(answer.depends_on),
        "outcomes": [{"receiver": o.receiver,
                      "possible": sorted(o.route.receivers),
                      "when": [{d: v for d, v in term} for term in o.when],
                      "handlers": [step_text(step) for step in o.route.steps]} for o in answer.outcomes],
        "facts": answer.facts.shown(),
    }


def traffic_data(answer: "Answer", parties: Mapping[str, str],
                 others: Sequence[tuple[str, "Answer"]] = ()) -> dict[str, Any]:
    """A finding's `traffic` property: the main answer, plus the other paths asked."""
    result = answer_data(answer, parties)
    if others:
        result["paths"] = [{"client": other.client, "destination": other.destination, "label": PATH_WORDS[key],
                            "receiver": other.receiver, "certain": other.certain,
                            "possible": other.possible_receivers}
                           for key, other in others]
    return result


# --- the masquerade model's words (`masquerade.masquerade_gap`: a `MasqueradeGap`'s text) ---------------

MASQUERADE_GAP_WORDS = {
    "vip-masqueraded": "node processes still work (the `KUBE-CLUSTER-IP src,dst` rule masquerades what the node "
                       "sends from a VIP), but {off_cluster}",
    "node-clients-broken": "node processes and hostNetwork pods reach no Service: the node sends to a ClusterIP "
                           "(bound to kube-ipvs0) from that ClusterIP, no rule masquerades it, and the backend's reply "
                           "goes back to the VIP on its own node",
    "node-address": "node processes still work (they send from the node's address, which replies find), but "
                    "{off_cluster}",
}
OFF_CLUSTER = ("clients outside the cluster that route the Service CIDR to a node are not masqueraded, so a backend on "
               "another node answers them directly and the reply never matches their connection")


def masquerade_gap_text(kind: str) -> str:
    return MASQUERADE_GAP_WORDS[kind].format(off_cluster=OFF_CLUSTER)


def version_class_text(mode: str, versions: str | None) -> str:
    return f"kube-proxy {versions}" if versions else f"kube-proxy ({mode} mode)"
