"""The datapath model's answer in one sentence a reviewer reads in five seconds: who gets the
port's traffic and who loses it. When unknown facts decide, the most likely outcome (a current
cluster: iptables mode, portmap >= v0.7.5, a Service with endpoints) and "depends on ...": the
per-mode, per-version analysis stays in `phrases.explain` (`-v`, SARIF markdown, the HTML page),
and the run names once which options would settle it (`unknown`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kubelint_ports.model.datapath.facts import (
    APPENDED,
    DROPPED,
    NOTHING,
    REJECTED,
    UNDEFINED,
    losers_of,
    receiver_rank,
)
from kubelint_ports.model.datapath.phrases import who

if TYPE_CHECKING:
    from kubelint_ports.model.datapath.answer import Answer

# What a current cluster most likely has, for each dimension an unknown fact leaves open.
LIKELY = {"proxy-mode": "iptables", "hostport": APPENDED, "endpoints": True, "local-endpoints": True,
          "secondary-covered": True}

# How a user states each fact the model may lack (the run's closing note names them once).
SETTLED_BY = {"proxy-mode": "--proxy-mode", "cni-plugins-version": "--cni-plugins-version",
              "endpoints": "lint the Service with its workloads", "local-endpoints": "--nodes",
              "node-port-addresses": "the kube-proxy ConfigMap", "rule-order": "a node snapshot (`kubelint-ports node`)",
              "kube-proxy-version": "`facts: {kube-proxy-version: ...}` in .kubelint-ports.yaml, or lint the kube-proxy "
                                    "DaemonSet"}

# The unknown facts by the words a sentence names them with ("depends on the proxy mode").
UNKNOWN_WORDS = {"proxy-mode": "the proxy mode", "cni-plugins-version": "the CNI plugins' version",
                 "endpoints": "whether the Service has endpoints", "local-endpoints": "where its endpoints run",
                 "node-port-addresses": "nodePortAddresses", "rule-order": "which rule was written last",
                 "kube-proxy-version": "kube-proxy's version"}


def likely_receiver(answer: "Answer") -> tuple[str, tuple[str, ...]]:
    """The receiver in the world a current cluster most likely is (`LIKELY`), with who else may get
    it when the rule order decides there."""
    def score(values: tuple) -> int:
        return sum(1 for name, value in zip(answer.dimensions, values) if LIKELY.get(name) == value)

    values, route = max(answer.worlds, key=lambda world: score(world[0]))  # first of the best: stable
    return route.receiver, tuple(sorted(route.receivers, key=receiver_rank))


def what_happens(receiver: str, parties: Mapping[str, str]) -> str:
    """`the hostPort pod gets it` / `connections are refused`."""
    if receiver == REJECTED:
        return "connections are refused"
    if receiver == DROPPED:
        return "connections time out"
    if receiver == NOTHING:
        return "nothing answers"
    return f"{who(receiver, parties)} gets it"


def effect(answer: "Answer", parties: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """(sentence, unknown facts): `on its nodes the Service gets it and this pod never sees it` when
    the facts are known; else the likely outcome and `depends on the proxy mode: run with -v`."""
    unknown = tuple(answer.depends_on)
    if answer.certain:
        receiver = answer.receiver
        losers = sorted(losers_of(receiver, parties), key=receiver_rank)
        lost = f", and {' and '.join(parties[loser] for loser in losers)} never sees it" if losers else ""
        return f"{what_happens(receiver, parties)}{lost}", ()
    receiver, receivers = likely_receiver(answer)
    if receiver == UNDEFINED or answer.receiver == UNDEFINED and len(answer.outcomes) == 1:
        options = " or ".join(who(r, parties) for r in receivers)
        unknown = unknown or ("rule-order",)
        return f"{options} gets it, whichever rule was written last: run with -v", unknown
    words = [UNKNOWN_WORDS.get(name, name) for name in unknown]
    depends = (", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)) \
        or "facts the inputs do not state"
    return f"most likely {what_happens(receiver, parties)}, but it depends on {depends}: run with -v", unknown


def unknown_facts_note(unknown: set[str]) -> str:
    """The run's one note on the facts that would settle its "depends" findings; "" without any."""
    if not unknown:
        return ""
    order = list(SETTLED_BY)
    named = [f"{UNKNOWN_WORDS.get(name, name)} ({SETTLED_BY.get(name, 'kubelint-ports config')})"
             for name in sorted(unknown, key=lambda n: order.index(n) if n in order else len(order))]
    return ("Some findings depend on facts the inputs do not state: " + "; ".join(named)
            + ". State them, and `kubelint-ports config` shows what the run knows.")
