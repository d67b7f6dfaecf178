"""`nft list ruleset` (text) and `nft -j list ruleset` (JSON) -> a Ruleset of nft tables.

Each nft rule is reduced to the facts an iptables rule carries (`records.Rule`): protocol,
destination ports, `fib daddr type local`, destination address, the verdict (`jump X`, `goto X`,
`dnat`, `reject`, `accept`, a `vmap`), the DNAT address and the comment. Sets and maps keep their
elements as written (`tcp . 30081 : goto external-...`), each at its line. Table names are
`FAMILY NAME` (`ip kube-proxy`, `ip cni_hostport`). `nft -j` output is read by `nft_json.py`.

Values nft would never print are input errors at their line: a port past 65535 or a range written
high-low (nft prints `30000-32767`), an address such as `999.0.0.1`.
"""

from __future__ import annotations

import re

from kubelint_ports.vocabulary import Diagnostic
from kubelint_ports.loading.snapshot.dump_records import Chain, NamedSet, Rule, Ruleset, Table
from kubelint_ports.loading.snapshot.text import (DumpProblem, destination_problem, excerpt, is_address, lines,
                                                  port_range, quoted_name, read_whole)

FAMILIES = frozenset(("ip", "ip6", "inet", "arp", "bridge", "netdev"))
PRIORITY_NAMES = {"raw": -300, "mangle": -150, "dstnat": -100, "filter": 0, "security": 50, "srcnat": 100,
                  "out": 100}
_TABLE = re.compile(r"table (\S+) (\S+) \{$")
_CHAIN = re.compile(r"chain (\S+) \{$")
_SET = re.compile(r"(set|map|flowtable|counter|quota|ct helper|ct timeout|ct expectation|limit|secmark|synproxy) "
                  r"(\S+) \{$")
_BASE = re.compile(r"type (\w+) hook (\w+)(?: device \S+)? priority ([\w+-]+(?: [+-] \d+)?);")
_COMMENT = re.compile(r'comment "((?:[^"\\]|\\.)*)"')
_DPORT = re.compile(r"(tcp|udp|sctp|th) dport (?:!= )?(\{[^}]*\}|\S+)")
_PROTO = re.compile(r"(?:meta l4proto|ip protocol|ip6 nexthdr) (?:\{ )?(tcp|udp|sctp)")
_DADDR = re.compile(r"ip6? daddr (!= )?([0-9a-fA-F.:/]+)\b")
_SADDR = re.compile(r"ip6? saddr (!= )?([0-9a-fA-F.:/]+)\b")
_DNAT = re.compile(r"dnat (?:ip6? )?(?:addr \. port )?to (\S+(?: \. \S+)?)")
_VERDICT = re.compile(r"\b(jump|goto) (\S+)")


def read_nft(text: str, path: str) -> tuple[Ruleset, list[Diagnostic]]:
    """The ruleset's tables; the first line nft would not print becomes the file's diagnostic."""
    return read_whole(_read_text, text, Ruleset(path=path, tool="nft", backend="nf_tables"), path)


def _read_text(text: str, ruleset: Ruleset) -> None:
    table: Table | None = None
    chain: Chain | None = None
    named: NamedSet | None = None
    in_elements = False
    number = 0
    for number, raw in enumerate(lines(text), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if in_elements and named is not None:
            _add_elements(named, line, number)
            in_elements = not line.endswith("}")
            continue
        if table is None:
            match = _TABLE.match(line)
            if match is None or match.group(1) not in FAMILIES:
                raise DumpProblem(number, 1, f"not a line of `nft list ruleset`: {excerpt(line)} (expected `table "
                                             f"FAMILY NAME {{`)")
            name = f"{match.group(1)} {match.group(2)}"
            if name in ruleset.tables:
                raise DumpProblem(number, 1, f"table {quoted_name(name)} appears twice: two rulesets in one file?")
            table = ruleset.tables[name] = Table(name, number)
        elif chain is None and named is None:
            if line == "}":
                table = None
                continue
            match = _CHAIN.match(line)
            if match is not None:
                chain = table.chains[match.group(1)] = Chain(match.group(1), number)
                continue
            match = _SET.match(line)
            if match is not None:
                named = table.sets[match.group(2)] = NamedSet(match.group(2), number, match.group(1))
                continue
            if line.startswith(("comment ", "flags ")):
                continue
            raise DumpProblem(number, 1, f"unexpected line in table {quoted_name(table.name)}: {excerpt(line)}")
        elif named is not None:
            if line == "}":
                named = None
            elif line.startswith("elements = {"):
                _add_elements(named, line[len("elements = {"):], number)
                in_elements = not line.endswith("}")
            # type, flags, size, timeout, policy, counter, auto-merge: not needed
        else:
            if line == "}":
                chain = None
                continue
            base = _BASE.match(line)
            if base is not None:
                chain.hook = base.group(2)
                chain.priority = _priority(base.group(3), number)
                continue
            if line.startswith(("policy ", "comment ", "devices ")):
                continue
            chain.rules.append(rule_from_text(line, number, chain.name, len(raw) + 1, raw.find(line) + 1))
    if table is not None:
        raise DumpProblem(max(number, 1), 1, (
            f"the ruleset ends inside table {quoted_name(table.name)} (line {table.line}): it is truncated; save it "
            f"again"))


def _add_elements(named: NamedSet, text: str, number: int) -> None:
    text = text.rstrip().rstrip("}").strip()
    for element in text.split(","):
        element = element.strip()
        if element:
            problem = element_problem(element)
            if problem:
                raise DumpProblem(number, 1, f"set {quoted_name(named.name)}: {problem}")
            named.members.append((element, number))


# `tcp . 30081 : goto ...` in kube-proxy's service-nodeports map: the port the model reads
_ELEMENT_PORT = re.compile(r"\b(?:tcp|udp|sctp) \. (\d+)")


def element_problem(element: str) -> str:
    """Why a set or map element is not what nft prints (a protocol's port past 65535); "" if fine."""
    for match in _ELEMENT_PORT.finditer(element):
        if port_range(match.group(1)) is None:
            return f"{excerpt(match.group(1))} in element {excerpt(element)} is not a port in 0-65535"
    return ""


def _priority(text: str, number: int) -> int:
    """`dstnat`, `-100`, `filter + 10`: a 32-bit number as nft keeps it (a named one's offset too)."""
    parts = text.split()
    value = PRIORITY_NAMES.get(parts[0])
    if value is None:  # a name of another family's table (bridge, netdev): no order this reader needs
        value = 0 if parts[0][:1].isalpha() else _int32(parts[0], number)
    if len(parts) == 3:
        value += _int32(parts[2], number) * (1 if parts[1] == "+" else -1)
    return value


def _int32(text: str, number: int) -> int:
    if not re.fullmatch(r"[+-]?[0-9]{1,10}", text) or not -2**31 <= int(text) < 2**31:
        raise DumpProblem(number, 1, f"chain priority {excerpt(text)} is not a 32-bit number nor a priority name")
    return int(text)


def rule_from_text(line: str, number: int, chain: str, end_column: int, column: int = 1) -> Rule:
    rule = Rule(number, chain, end_column, column=column)
    comment = _COMMENT.search(line)
    if comment:
        rule.comment = comment.group(1).replace('\\"', '"')
        line = line[:comment.start()]
    protocol = _PROTO.search(line)
    dport = _DPORT.search(line)
    if dport and (dport.group(2) == "vmap" or dport.group(2).startswith("@")):
        dport = None
    if dport:
        rule.protocol = dport.group(1) if dport.group(1) != "th" else (protocol.group(1) if protocol else "")
        rule.dports = tuple(_dport_range(part, number, column + dport.start(2))
                            for part in dport.group(2).strip("{} ").split(",") if part.strip())
    elif protocol:
        rule.protocol = protocol.group(1)
    rule.dst_local = "fib daddr type local" in line
    daddr = _DADDR.search(line)
    if daddr:
        rule.destination = _address(daddr.group(2), number, column + daddr.start(2))
        if daddr.group(1):
            rule.negated = frozenset(("-d",))
    saddr = _SADDR.search(line)
    if saddr:
        rule.source = _address(saddr.group(2), number, column + saddr.start(2))
        if saddr.group(1):
            rule.negated = rule.negated | {"-s"}
    dnat = _DNAT.search(line)
    verdict = _VERDICT.search(line)
    if dnat:
        rule.target = "DNAT"
        rule.to_destination = dnat.group(1).replace(" . ", ":")
        problem = destination_problem(rule.to_destination)
        if problem:
            raise DumpProblem(number, column + dnat.start(1), problem)
    elif " vmap " in f" {line} ":
        rule.target = "vmap"
    elif verdict:
        rule.target, rule.goto = verdict.group(2), verdict.group(1) == "goto"
    elif re.search(r"\breject\b", line):
        rule.target = "REJECT"
    elif re.search(r"\bmasquerade\b", line):
        rule.target = "MASQUERADE"
    elif re.search(r"\baccept\b", line):
        rule.target = "ACCEPT"
    elif re.search(r"\bdrop\b", line):
        rule.target = "DROP"
    elif re.search(r"\breturn\b", line):
        rule.target = "RETURN"
    return rule


def _dport_range(text: str, number: int, column: int) -> tuple[int, int]:
    """One item of a `dport` match: `80`, `30000-32767`, or a named service or set (any port)."""
    text = text.strip()
    if not text[:1].isdigit():
        return 0, 65535  # a named service or a set reference: any port, as far as this reader knows
    ports = port_range(text)
    if ports is None:
        raise DumpProblem(number, column, f"{excerpt(text)} is not a port or a port range in 0-65535 (low-high)")
    return ports


def _address(text: str, number: int, column: int) -> str:
    if not is_address(text, prefix=True):
        raise DumpProblem(number, column, f"{excerpt(text)} is not an IP address or prefix")
    return text
