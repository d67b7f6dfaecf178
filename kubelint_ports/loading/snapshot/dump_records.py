"""What the node-snapshot readers produce: the dumps' records, each with the line it came from.

Records stay close to the tools' words (a rule's target, a socket's local address); what they
mean for a packet is the model's business (`model/node_state.py`). Every record keeps its 1-based
line, and `DumpLine` turns that into a finding location, so a finding opens the dump at the rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from kubelint_ports.vocabulary import Location


@dataclass(frozen=True, slots=True)
class DumpLine:
    """A line of a dump file: the `document` of a snapshot finding (the engine asks it where).

    Manifests' documents resolve a field path to a YAML node; a dump line is already the place, so
    the field path only names the fact (it feeds the finding's fingerprint). `root` is None: a
    dump has no annotations to suppress a finding with.
    """

    path: str
    line: int
    column: int = 1
    end_column: int = 0
    origin: str = ""
    root: None = None

    def location(self, field_path: str = "", message: str = "") -> Location:
        return Location(self.path, self.line, self.column, self.line, self.end_column or self.column + 1, message)


@dataclass(slots=True)
class Rule:
    """One rule as iptables-save prints it (or an nft rule reduced to the same facts).

    Fields are None/empty when the rule does not match on them. `negated` holds the option names
    written with `!` before them (`-s`, `--match-set`).
    """

    line: int
    chain: str
    end_column: int
    protocol: str = ""
    source: str = ""
    destination: str = ""
    in_interface: str = ""
    dst_local: bool = False  # -m addrtype --dst-type LOCAL, nft `fib daddr type local`
    dports: tuple[tuple[int, int], ...] = ()  # inclusive ranges, from --dport/--dports/`th dport`
    match_sets: tuple[tuple[str, str], ...] = ()  # (set name, flags such as "dst,dst")
    comment: str = ""
    target: str = ""  # -j / -g target, or an nft verdict ("jump X", "dnat", "reject")
    goto: bool = False
    to_destination: str = ""  # DNAT --to-destination / nft `dnat to`
    negated: frozenset[str] = frozenset()
    modules: tuple[str, ...] = ()
    column: int = 1  # where the rule starts (nft text is indented; `nft -j` is one long line)

    def matches_port(self, port: int) -> bool:
        return not self.dports or any(low <= port <= high for low, high in self.dports)


class JumpRule:
    """A rule of kube-proxy's per-Service and per-endpoint chains, read for its line and target
    alone (`iptables_save` says which rules): every other field of `Rule` reads as Rule's default,
    as if the rule did not match on it. Four slots instead of Rule's seventeen: a 10,000-Service
    dump holds some 130,000 of these, and nothing reads more of them."""

    __slots__ = ("line", "chain", "end_column", "target")

    def __init__(self, line: int, chain: str, end_column: int, target: str):
        self.line = line
        self.chain = chain
        self.end_column = end_column
        self.target = target

    matches_port = Rule.matches_port


for _field in fields(Rule):  # the class-level defaults, from Rule's own so they cannot drift
    if _field.name not in JumpRule.__slots__:
        setattr(JumpRule, _field.name, _field.default)
del _field


@dataclass(slots=True)
class Chain:
    name: str
    line: int  # the `:NAME POLICY` declaration (iptables) or `chain NAME {` (nft)
    policy: str = ""
    rules: list[Rule | JumpRule] = field(default_factory=list)
    hook: str = ""  # nft base chains: prerouting, output, ...
    priority: int | None = None


@dataclass(slots=True)
class Table:
    name: str  # iptables: nat, filter, ...; nft: "ip kube-proxy" (family and name)
    line: int
    chains: dict[str, Chain] = field(default_factory=dict)
    # nft sets and maps: name -> (declaration line, elements as written, element lines)
    sets: dict[str, "NamedSet"] = field(default_factory=dict)


@dataclass(slots=True)
class NamedSet:
    name: str
    line: int
    kind: str = ""  # ipset type (hash:ip,port) or "set"/"map" for nft
    members: list[tuple[str, int]] = field(default_factory=list)  # (member text, line)


@dataclass(slots=True)
class Ruleset:
    """An iptables-save dump, or the tables of an nft ruleset."""

    path: str
    tool: str  # "iptables-save", "iptables -S", "nft", "nft -j"
    backend: str = ""  # "legacy", "nf_tables", or "" when the dump does not say
    tables: dict[str, Table] = field(default_factory=dict)
    # A line saying the other backend holds tables this dump lacks (iptables-nft's warning).
    other_backend_line: int = 0
    # iptables-save dumps: "ipv4" (iptables-save) or "ipv6" (ip6tables-save). nft tables carry
    # their family in their name ("ip nat", "ip6 nat", "inet ...") instead.
    family: str = ""


@dataclass(frozen=True, slots=True)
class Listener:
    """A listening socket from `ss -tlnup`."""

    line: int
    end_column: int
    protocol: str  # tcp, udp
    address: str  # "0.0.0.0", "::", "127.0.0.1", "*"
    port: int
    processes: tuple[tuple[str, int], ...] = ()  # (name, pid)


@dataclass(frozen=True, slots=True)
class Address:
    """An address of a node interface from `ip -o addr`."""

    line: int
    end_column: int
    interface: str
    address: str
    prefix: int


@dataclass(frozen=True, slots=True)
class Lease:
    """A host-local IPAM reservation: /var/lib/cni/networks/<network>/<ip> holds the container ID."""

    line: int
    end_column: int
    network: str
    address: str
    container_id: str


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A pod sandbox from `crictl pods -o json`."""

    line: int
    end_column: int
    id: str
    name: str
    namespace: str
    state: str  # SANDBOX_READY, SANDBOX_NOTREADY


@dataclass(frozen=True, slots=True)
class VirtualServer:
    """An IPVS virtual service from `ipvsadm -Sn` (`-A -t 10.96.0.1:443 -s rr`), with the number
    of its real servers (`-a ... -r ADDRESS:PORT` lines; which ones, no check asks)."""

    line: int
    end_column: int
    protocol: str  # tcp, udp, sctp
    address: str
    port: int
    real_server_count: int = 0


@dataclass(slots=True)
class SnapshotFile:
    """One file of a snapshot directory, read: its kind and its records."""

    path: str
    kind: str  # a key of `detect.KINDS`
    ruleset: Ruleset | None = None
    sets: dict[str, NamedSet] = field(default_factory=dict)  # ipset list
    # ss and ipvsadm: a `tables.Table` (a large dump's records kept as columns), else empty
    listeners: Sequence[Listener] = ()
    addresses: list[Address] = field(default_factory=list)
    leases: list[Lease] = field(default_factory=list)
    sandboxes: list[Sandbox] = field(default_factory=list)
    virtual_servers: Sequence[VirtualServer] = ()
    sysctls: dict[str, tuple[str, int]] = field(default_factory=dict)
