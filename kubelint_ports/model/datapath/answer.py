"""From facts to answers: every plausible world for what is unknown, each routed, and the outcomes
grouped by receiver with the conditions (`when`) under which each happens."""

from __future__ import annotations

import functools
import ipaddress
import itertools
from dataclasses import replace
from typing import Any

from kubelint_ports.records import record
from kubelint_ports.model.datapath.facts import (
    APPENDED,
    DEPENDS,
    NFT_ANY,
    NFT_BROKEN,
    NFT_LOCAL,
    NO_HOSTPORT,
    OTHERWISE,
    PREPENDED,
    PROXY_MODES,
    SECONDARY_IP,
    SPLIT_BACKENDS,
    UNDEFINED,
    DatapathFacts,
    PortUse,
    RECEIVER_ORDER,
)
from kubelint_ports.model.datapath.route import (
    ALL_ADDRESSES,
    CIDR_ADDRESSES,
    ORDER_INSERTED,
    LOOPBACK_ONLY,
    PRIMARY_ADDRESS,
    Route,
    World,
    route,
)

# Unknown conditions a world fixes, and the fact (or condition) each stands for.
FACT_OF_DIMENSION = {"proxy-mode": "proxy-mode", "hostport": "cni-plugins-version", "endpoints": "endpoints",
                     "local-endpoints": "local-endpoints", "secondary-covered": "node-port-addresses"}


@record(frozen=True, slots=True)
class Outcome:
    receiver: str
    when: tuple[tuple[tuple[str, Any], ...], ...]  # OR of ANDs of (dimension, value); () = always
    route: Route


@record(frozen=True, slots=True)
class Answer:
    client: str
    destination: str
    port: int
    protocol: str
    outcomes: tuple[Outcome, ...]
    focused: tuple[str, ...]  # (receiver,) when other outcomes were merged into OTHERWISE
    facts: DatapathFacts
    worlds: tuple[tuple[tuple, Route], ...] = ()  # every plausible world's values and route
    dimensions: tuple[str, ...] = ()
    use: PortUse = PortUse()

    def deciding_facts(self) -> list[str]:
        """The known facts without which the answer would differ (the ones a message should cite)."""
        return list(_deciding_facts(self.facts, self.client, self.destination, self.use))

    @property
    def depends_on(self) -> tuple[str, ...]:
        """The unknown facts the outcome depends on (as named in `kubelint-ports config`)."""
        mentioned = {name for outcome in self.outcomes for term in outcome.when for name, _ in term}
        return tuple(FACT_OF_DIMENSION[name] for name in self.dimensions if name in mentioned)

    def focus(self, receiver: str) -> "Answer":
        """The same answer, told as "`receiver` gets it when ...; otherwise ..."."""
        return replace(self, outcomes=_outcomes(self.worlds, self.dimensions, receiver), focused=(receiver,))

    @property
    def receiver(self) -> str:
        return self.outcomes[0].receiver if len(self.outcomes) == 1 else DEPENDS

    @property
    def certain(self) -> bool:
        return self.receiver not in (UNDEFINED, DEPENDS, OTHERWISE)

    @property
    def possible_receivers(self) -> list[str]:
        return sorted({r for outcome in self.outcomes for r in outcome.route.receivers})

    def possible(self, receiver: str) -> bool:
        return any(receiver in route.receivers for _, route in self.worlds)

    def always(self, receiver: str) -> bool:
        return all(route.receivers == {receiver} for _, route in self.worlds)

    def always_but_for_history(self, receiver: str) -> bool:
        """`receiver` gets it in every plausible world, or the world's only doubt is which rule was
        inserted last (portmap < v0.7.5 beside kube-proxy): the steady state of such a node, where
        the other order lasts from a flush or a boot race to the next pod's ADD."""
        return all(route.receivers == {receiver} or receiver in route.receivers and route.steps[:1] == (ORDER_INSERTED,)
                   for _, route in self.worlds)


@functools.lru_cache(maxsize=1024)
def _deciding_facts(facts: DatapathFacts, client: str, destination: str, use: PortUse) -> tuple[str, ...]:
    known = Datapath(facts).deliver(client, destination, use, 0)
    deciding = []
    for name, _ in facts.items():
        attribute = name.replace("-", "_")
        unknown = Datapath(replace(facts, **{attribute: None})).deliver(client, destination, use, 0)
        if {route for _, route in unknown.worlds} != {route for _, route in known.worlds}:
            deciding.append(name)
    return tuple(deciding)


def node_port_coverage(addresses: tuple[str, ...] | None) -> dict[str, Any]:
    """nodePortAddresses as a world sees them: () or None is kube-proxy's default for the mode.
    The keywords (kubernetes#123105 `primary`; kubernetes#138427 `localhost` and `all`, in any mix
    with CIDRs): `all` or a /0 CIDR is every address; `localhost` the loopback addresses; `primary`
    the node's primary address. CIDRs cover 127.0.0.1 when one holds it; whether they hold a
    secondary address asked about is unknown unless keywords are all there is."""
    if not addresses:
        return {"node_port_addresses": ""}
    words = {text.strip().lower() for text in addresses}
    if "all" in words:
        return {"node_port_addresses": ALL_ADDRESSES}
    localhost = "localhost" in words
    cidrs = False
    for text in words - {"primary", "localhost"}:
        try:
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            continue  # a value kube-proxy would refuse
        if network.prefixlen == 0:  # 0.0.0.0/0 or ::/0: kube-proxy's MatchAll, as if unset in iptables mode
            return {"node_port_addresses": ALL_ADDRESSES}
        cidrs = True
        localhost |= ipaddress.ip_address("127.0.0.1") in network
    if cidrs:
        return {"node_port_addresses": CIDR_ADDRESSES, "localhost_covered": localhost}
    if "primary" in words or not localhost:
        return {"node_port_addresses": PRIMARY_ADDRESS, "localhost_covered": localhost}
    return {"node_port_addresses": LOOPBACK_ONLY, "localhost_covered": True}


class Datapath:
    """The packet decisions for nodes with these facts."""

    def __init__(self, facts: DatapathFacts = DatapathFacts()):
        self.facts = facts
        self._answers: dict[tuple, Answer] = {}  # the answer does not depend on the port number

    # -- traits from facts

    def proxy_modes(self) -> tuple[str, ...]:
        mode = self.facts.proxy_mode.value if self.facts.proxy_mode else None
        return (mode,) if mode in PROXY_MODES else PROXY_MODES

    def hostport_traits(self) -> tuple[str, ...]:
        """The plausible hostPort implementations. Nothing known: CNI portmap's iptables backend,
        of any version (its nftables backend is opt-in, and "none" needs a CNI config to say so)."""
        facts = self.facts
        kind = facts.hostport.value if facts.hostport else None
        version = facts.cni_plugins_version.value if facts.cni_plugins_version else None
        backend = facts.hostport_backend.value if facts.hostport_backend else None
        if kind == "none":
            return (NO_HOSTPORT,)
        if kind == "crio":
            crio = facts.crio_version.value if facts.crio_version else None
            if crio is None:
                return (APPENDED, NFT_LOCAL)
            return (NFT_LOCAL,) if crio >= (1, 33) else (APPENDED,)
        if backend == "nftables":
            if version is None:
                return (NFT_ANY, NFT_LOCAL)
            if version < (1, 6):
                return (APPENDED,) if version >= (0, 7, 5) else (PREPENDED,)  # no such backend yet
            if version < (1, 6, 1):
                return (NFT_BROKEN,)
            return (NFT_ANY,) if version < (1, 9) else (NFT_LOCAL,)
        if version is None:
            return (APPENDED, PREPENDED)
        return (APPENDED,) if version >= (0, 7, 5) else (PREPENDED,)

    def world_base(self) -> dict[str, Any]:
        facts = self.facts
        version = facts.kube_proxy_version.value if facts.kube_proxy_version else None
        localhost = facts.localhost_node_ports.value if facts.localhost_node_ports else True
        addresses = facts.node_port_addresses.value if facts.node_port_addresses else ()
        order = facts.hostport_order.value if facts.hostport_order else None
        split = facts.iptables_backends is not None and facts.iptables_backends.value == SPLIT_BACKENDS
        detector = facts.local_detector is None or bool(facts.local_detector.value)
        return {"ipvs_accepts": version is None or version >= (1, 11),
                "ipvs_localhost": version is not None and (1, 10) <= version[:2] < (1, 22),
                "localhost_node_ports": bool(localhost),
                "order": order, "split_backends": split, "pods_detected": detector, **node_port_coverage(addresses)}

    # -- questions

    def deliver(self, client: str, destination: str, use: PortUse, port: int, protocol: str = "TCP") -> Answer:
        """Who receives a packet sent by `client` to `destination`:`port`/`protocol`."""
        key = (client, destination, use)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = self._deliver(client, destination, use)
        return replace(answer, port=port, protocol=protocol)

    def _dimensions(self, destination: str, use: PortUse, base: dict[str, Any]) -> list[tuple[str, tuple]]:
        dimensions: list[tuple[str, tuple]] = [("proxy-mode", self.proxy_modes()),
                                               ("hostport", self.hostport_traits())]
        needs_endpoints = use.node_port or use.service_port
        endpoints = (use.endpoints,) if use.endpoints is not None or not needs_endpoints else (True, False)
        dimensions.append(("endpoints", endpoints))
        if use.policy_local and needs_endpoints and use.local_endpoints is None and True in endpoints:
            dimensions.append(("local-endpoints", (True, False)))
        else:
            dimensions.append(("local-endpoints", (use.local_endpoints is not False,)))
        covered = (False,)
        if destination == SECONDARY_IP and use.node_port and base.get("node_port_addresses") == CIDR_ADDRESSES:
            covered = (True, False)  # whether the CIDRs hold that address is not known here
        dimensions.append(("secondary-covered", covered))
        return dimensions

    def _deliver(self, client: str, destination: str, use: PortUse) -> Answer:
        base = self.world_base()
        dimensions = self._dimensions(destination, use, base)
        results: dict[tuple, Route] = {}
        for values in itertools.product(*(vals for _, vals in dimensions)):
            chosen = dict(zip((name for name, _ in dimensions), values))
            world = World(proxy=chosen["proxy-mode"], hostport=chosen["hostport"],
                          endpoints=chosen["endpoints"] if chosen["endpoints"] is not None else True,
                          local_endpoints=chosen["local-endpoints"], secondary_covered=chosen["secondary-covered"],
                          **base)
            results[values] = route(world, client, destination, use)
        names = tuple(name for name, _ in dimensions)
        worlds = tuple(results.items())
        return Answer(client, destination, 0, "", _outcomes(worlds, names), (), self.facts, worlds, names, use)


def _outcomes(worlds: tuple[tuple[tuple, Route], ...], names: tuple[str, ...], focus: str | None = None):
    """One outcome per receiver (and per set of alternatives); the first route found explains it.
    With `focus`, every world where that receiver cannot win is one OTHERWISE outcome."""
    by_receiver: dict[tuple, list[tuple]] = {}
    explanation: dict[tuple, Route] = {}
    for values, result in worlds:
        # Orders nobody fixes differ in why (hooks, insertion history): one outcome per reason.
        key = (result.receiver, tuple(sorted(result.receivers)), result.steps[:1] if result.alternatives else ())
        if focus is not None and focus not in result.receivers:
            key, result = (OTHERWISE, (OTHERWISE,), ()), Route(OTHERWISE)
        by_receiver.setdefault(key, []).append(values)
        explanation.setdefault(key, result)
    universe = [values for values, _ in worlds]
    varying = [name for index, name in enumerate(names) if len({values[index] for values in universe}) > 1]
    outcomes = []
    for key in sorted(by_receiver, key=_outcome_order):
        when = () if len(by_receiver) == 1 else _cover(set(by_receiver[key]), universe, list(names), varying)
        outcomes.append(Outcome(key[0], when, explanation[key]))
    return tuple(outcomes)


def _outcome_order(key: tuple) -> tuple:
    order = RECEIVER_ORDER
    return (order.index(key[0]) if key[0] in order else len(order), key)


def _cover(worlds: set[tuple], universe: list[tuple], names: list[str], varying: list[str]):
    """A short description of `worlds` among `universe`: terms of at most two (dimension, value)
    pairs, each holding only worlds of the set, chosen greedily."""
    indexes = [names.index(name) for name in varying]
    candidates = []
    for size in (1, 2):
        for chosen in itertools.combinations(indexes, size):
            for values in itertools.product(*(sorted({u[i] for u in universe}, key=repr) for i in chosen)):
                term = tuple(zip(chosen, values))
                matching = {u for u in universe if all(u[i] == v for i, v in term)}
                if matching and matching <= worlds:
                    candidates.append((term, matching))
    uncovered, terms = set(worlds), []
    while uncovered:
        best = max(candidates, key=lambda item: (len(item[1] & uncovered), -len(item[0])), default=None)
        if best is None or not best[1] & uncovered:
            # no short term fits: name each remaining world in full
            for world in sorted(uncovered, key=repr):
                terms.append(tuple((i, world[i]) for i in indexes))
            break
        terms.append(best[0])
        uncovered -= best[1]
    return tuple(tuple((names[i], v) for i, v in term) for term in terms)



