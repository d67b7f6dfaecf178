"""Who receives a packet on a node: the one place that decides what a packet does, and says it.

Every rule that speaks about node traffic asks this package and tells no story of its own. The
answers are proven in the lab (`tests/lab/`, `docs/datapath.md`): real network namespaces, the
real CNI plugins, real iptables and nftables, kube-proxy's rules written in its own shapes.

Modules:
- `facts`: the vocabulary (receivers, clients, destinations, hostPort implementations), `Fact`,
  `DatapathFacts` with `WHEN_UNKNOWN`, and `PortUse` (what occupies a port on a node).
- `route`: what one fully known node (`World`) does with one packet, handler by handler.
- `answer`: `Datapath(facts).deliver(client, destination, use, port, protocol)` -> `Answer`, every
  plausible world for what is unknown, outcomes with the conditions they need.
- `masquerade`: kube-proxy's masquerade of Service traffic (KP401-KP403, KP804).
- `node`: what a node's dumps settle (`node_facts`, `first_dnat`, entry placement).
- `service`: a Service's traffic policies and endpoints as a `PortUse` (the rules' questions).
- `phrases`: the traffic wording of the answers: sentences, the `traffic` data of findings, and
  `story`, the shape of every message. Each rule family's own story and advice sit beside its
  rules (`checks.manifest.phrases`, `checks.node.phrases`): the model answers, the checks phrase.

Clients: FROM_OUTSIDE (another machine), FROM_POD (a pod address: nat PREROUTING), FROM_NODE (nat
OUTPUT). Destinations: NODE_IP (the primary address), SECONDARY_IP, HOST_IP, LOCALHOST, CLUSTER_IP,
EXTERNAL_IP. Receivers: HOSTPORT, SERVICE, HOST_PROCESS, REJECTED (connection refused), DROPPED (a
timeout), NOTHING, UNDEFINED (no fixed order: tables at one hook priority, or rules inserted at the
top when absent, where the last inserter wins), DEPENDS (unknown facts: see `outcomes`). When facts
are unknown the answer holds every plausible outcome with the facts it depends on; a node snapshot
reader passes the order it observed (`hostport_order`) and the answer is then exact.
"""

from kubelint_ports.model.datapath.answer import Answer, Datapath, Outcome, node_port_coverage
from kubelint_ports.model.datapath.facts import (
    APPENDED,
    CLIENTS,
    CLUSTER_IP,
    DEPENDS,
    DESTINATIONS,
    DROPPED,
    EXTERNAL_IP,
    FROM_NODE,
    FROM_OUTSIDE,
    FROM_POD,
    HOST_IP,
    HOST_PROCESS,
    HOSTPORT,
    HOSTPORT_FIRST,
    HOSTPORT_TRAITS,
    KUBE_PROXY_FIRST,
    LOCALHOST,
    NFT_ANY,
    NFT_BROKEN,
    NFT_LOCAL,
    NO_HOSTPORT,
    NODE_ADDRESSES,
    NODE_IP,
    NOTHING,
    OTHERWISE,
    PREPENDED,
    PROXY_MODES,
    REJECTED,
    SAME_BACKEND,
    SECONDARY_IP,
    SERVICE,
    SPLIT_BACKENDS,
    UNDEFINED,
    WHEN_UNKNOWN,
    WILDCARD,
    DatapathFacts,
    Fact,
    PortUse,
    facts_table,
    losers_of,
    parse_version,
    receiver_rank,
    version_text,
)
from kubelint_ports.model.datapath import phrases  # the wording, importable here
from kubelint_ports.model.datapath.effects import UNKNOWN_WORDS, effect, unknown_facts_note
from kubelint_ports.model.datapath.masquerade import MasqueradeGap, masquerade_gap, masqueraded
from kubelint_ports.model.datapath.node import first_dnat
from kubelint_ports.model.datapath.phrases import (
    DIMENSION_WORDS,
    FACT_WORDS,
    RECEIVER_WORDS,
    STEP_WORDS,
    condition_text,
    explain,
    fact_sources,
    fact_text,
    outcome_clause,
    summary,
    summary_short,
    traffic_data,
    who,
)
from kubelint_ports.model.datapath.route import ORDER_HOOKS, ORDER_INSERTED, Route, World, route

__all__ = [
    "APPENDED", "CLIENTS", "CLUSTER_IP", "DEPENDS", "DESTINATIONS", "DIMENSION_WORDS", "DROPPED", "EXTERNAL_IP",
    "FACT_WORDS", "FROM_NODE", "FROM_OUTSIDE", "FROM_POD", "HOST_IP", "HOST_PROCESS", "HOSTPORT", "HOSTPORT_FIRST",
    "HOSTPORT_TRAITS", "KUBE_PROXY_FIRST", "LOCALHOST", "NFT_ANY", "NFT_BROKEN", "NFT_LOCAL", "NO_HOSTPORT",
    "NODE_ADDRESSES", "NODE_IP", "NOTHING", "ORDER_HOOKS", "ORDER_INSERTED", "OTHERWISE", "PREPENDED", "PROXY_MODES",
    "RECEIVER_WORDS", "REJECTED", "SAME_BACKEND", "SECONDARY_IP", "SERVICE", "SPLIT_BACKENDS", "STEP_WORDS",
    "UNDEFINED", "UNKNOWN_WORDS", "WHEN_UNKNOWN", "WILDCARD", "Answer", "Datapath", "DatapathFacts", "Fact", "MasqueradeGap",
    "Outcome", "PortUse", "Route", "World", "condition_text", "effect", "explain", "fact_sources", "fact_text", "facts_table",
    "first_dnat", "losers_of", "masquerade_gap", "masqueraded", "node_port_coverage", "outcome_clause",
    "parse_version", "phrases", "receiver_rank", "route", "summary", "summary_short",
    "traffic_data", "unknown_facts_note", "version_text", "who",
]
