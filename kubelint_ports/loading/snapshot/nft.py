"""`nft list ruleset` (text) and `nft -j list ruleset` (JSON) -> a Ruleset of nft tables.

Each nft rule is reduced to the facts an iptables rule carries (`records.Rule`): protocol,
destination ports, `fib daddr type local`, destination address, the verdict (`jump X`, `goto X`,
`dnat`, `reject`, `accept`, a `vmap`), the DNAT address and the comment. Sets and maps keep their
elements as written (`tcp . 30081 : goto external-...`), each at its line. Table names are
`FAMILY NAME` (`ip kube-proxy`, `ip cni_hostport`).

`nft -j` prints the whole ruleset on one line, so its places are line 1 and the column where the
rule's object starts.
"""

from __future__ import annotations

import json
import re

from kubelint_ports.findings import Diagnostic, Location
from kubelint_ports.loading.snapshot.records import Chain, NamedSet, Rule, Ruleset, Table

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


class NftProblem(ValueError):
    def __init__(self, line: int, column: int, message: str):
        super().__init__(message)
        self.line, self.column, self.message = line, column, message


def read_nft(text: str, path: str) -> tuple[Ruleset, list[Diagnostic]]:
    ruleset = Ruleset(path=path, tool="nft", backend="nf_tables")
    try:
        _read_text(text, ruleset)
    except NftProblem as problem:
        return ruleset, [Diagnostic(Location(path, problem.line, problem.column), problem.message)]
    return ruleset, []


def _read_text(text: str, ruleset: Ruleset) -> None:
    table: Table | None = None
    chain: Chain | None = None
    named: NamedSet | None = None
    in_elements = False
    number = 0
    for number, raw in enumerate(text.splitlines(), start=1):
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
                raise NftProblem(number, 1, f"not a line of `nft list ruleset`: {line[:80]!r} (expected `table FAMILY "
                                            f"NAME {{`)")
            name = f"{match.group(1)} {match.group(2)}"
            if name in ruleset.tables:
                raise NftProblem(number, 1, f"table {name} appears twice: two rulesets in one file?")
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
            raise NftProblem(number, 1, f"unexpected line in table {table.name}: {line[:80]!r}")
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
                chain.priority = _priority(base.group(3))
                continue
            if line.startswith(("policy ", "comment ", "devices ")):
                continue
            chain.rules.append(rule_from_text(line, number, chain.name, len(raw) + 1, raw.find(line) + 1))
    if table is not None:
        raise NftProblem(max(number, 1), 1, (
            f"the ruleset ends inside table {table.name} (line {table.line}): it is truncated; save it again"))


def _add_elements(named: NamedSet, text: str, number: int) -> None:
    text = text.rstrip().rstrip("}").strip()
    for element in text.split(","):
        element = element.strip()
        if element:
            named.members.append((element, number))


def _priority(text: str) -> int:
    parts = text.split()
    value = PRIORITY_NAMES.get(parts[0])
    if value is None:
        try:
            return int(parts[0])
        except ValueError:
            return 0
    if len(parts) == 3:
        value += int(parts[2]) * (1 if parts[1] == "+" else -1)
    return value


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
        rule.dports = tuple(_port_range(part) for part in dport.group(2).strip("{} ").split(",") if part.strip())
    elif protocol:
        rule.protocol = protocol.group(1)
    rule.dst_local = "fib daddr type local" in line
    daddr = _DADDR.search(line)
    if daddr:
        rule.destination = daddr.group(2)
        if daddr.group(1):
            rule.negated = frozenset(("-d",))
    saddr = _SADDR.search(line)
    if saddr:
        rule.source = saddr.group(2)
        if saddr.group(1):
            rule.negated = rule.negated | {"-s"}
    dnat = _DNAT.search(line)
    verdict = _VERDICT.search(line)
    if dnat:
        rule.target = "DNAT"
        rule.to_destination = dnat.group(1).replace(" . ", ":")
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


def _port_range(text: str) -> tuple[int, int]:
    low, _, high = text.strip().partition("-")
    try:
        first = int(low)
        return first, int(high) if high else first
    except ValueError:
        return 0, 65535  # a named service or a set reference: any port, as far as this reader knows


# --- nft -j --------------------------------------------------------------------------------------

def read_nft_json(text: str, path: str) -> tuple[Ruleset, list[Diagnostic]]:
    ruleset = Ruleset(path=path, tool="nft -j", backend="nf_tables")
    try:
        data = json.loads(text)
    except ValueError as error:
        return ruleset, [Diagnostic(Location(path, getattr(error, "lineno", 1), getattr(error, "colno", 1)),
                                    f"invalid JSON from `nft -j list ruleset`: {getattr(error, 'msg', error)} "
                                    f"(truncated?)")]
    objects = data.get("nftables") if isinstance(data, dict) else None
    if not isinstance(objects, list):
        return ruleset, [Diagnostic(Location(path, 1, 1), "`nft -j` output has no `nftables` list")]
    places = _object_places(text)
    for index, entry in enumerate(objects):
        if not isinstance(entry, dict) or len(entry) != 1:
            continue
        kind, body = next(iter(entry.items()))
        line, column = places[index] if index < len(places) else (1, 1)
        if not isinstance(body, dict):
            continue
        table_name = f"{body.get('family')} {body.get('table') if kind != 'table' else body.get('name')}"
        if kind == "table":
            ruleset.tables[table_name] = Table(table_name, line)
            continue
        table = ruleset.tables.get(table_name)
        if table is None and kind in ("chain", "rule", "set", "map"):
            return ruleset, [Diagnostic(Location(path, line, column), f"{kind} of table {table_name}, which the output "
                                                                      f"does not declare before it")]
        if kind == "chain":
            table.chains[body["name"]] = Chain(body["name"], line, body.get("policy", ""), hook=body.get("hook", ""),
                                               priority=body.get("prio"))
        elif kind in ("set", "map"):
            named = table.sets[body["name"]] = NamedSet(body["name"], line, kind)
            for element in body.get("elem", []):
                named.members.append((_element_text(element), line))
        elif kind == "rule":
            chain = table.chains.get(body.get("chain"))
            if chain is None:
                return ruleset, [Diagnostic(Location(path, line, column),
                                            f"rule of chain {body.get('chain')}, which table {table_name} does not "
                                            f"declare before it")]
            chain.rules.append(_rule_from_json(body, line, column))
    return ruleset, []


def _object_places(text: str) -> list[tuple[int, int]]:
    """(line, column) of each object in the `nftables` list, in order, by raw-decoding the text."""
    decoder = json.JSONDecoder()
    start = text.find("[", text.find('"nftables"'))
    places = []
    position = start + 1
    while position > 0:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text) or text[position] == "]":
            break
        line = text.count("\n", 0, position) + 1
        column = position - text.rfind("\n", 0, position)
        places.append((line, column))
        _, position = decoder.raw_decode(text, position)
    return places


def _element_text(element) -> str:
    if isinstance(element, list) and len(element) == 2:
        return f"{_element_text(element[0])} : {_element_text(element[1])}"
    if isinstance(element, dict):
        if "concat" in element:
            return " . ".join(_element_text(part) for part in element["concat"])
        if "elem" in element:
            return _element_text(element["elem"].get("val"))
        for verdict in ("goto", "jump"):
            if verdict in element:
                return f"{verdict} {element[verdict].get('target')}"
        if "prefix" in element:
            return f"{element['prefix'].get('addr')}/{element['prefix'].get('len')}"
        if "range" in element:
            return "-".join(str(part) for part in element["range"])
        return json.dumps(element, sort_keys=True)
    return str(element)


def _rule_from_json(body: dict, line: int, column: int) -> Rule:
    rule = Rule(line, body.get("chain", ""), column + 1, column=column)
    rule.comment = body.get("comment", "") or ""
    for expression in body.get("expr", []):
        if not isinstance(expression, dict):
            continue
        if "match" in expression:
            _json_match(rule, expression["match"])
        elif "dnat" in expression:
            dnat = expression["dnat"] or {}
            rule.target = "DNAT"
            rule.to_destination = f"{dnat.get('addr', '')}" + (f":{dnat['port']}" if "port" in dnat else "")
        elif "jump" in expression or "goto" in expression:
            verdict = "jump" if "jump" in expression else "goto"
            rule.target, rule.goto = expression[verdict].get("target", ""), verdict == "goto"
        elif "vmap" in expression:
            rule.target = "vmap"
        elif "xt" in expression and (expression["xt"] or {}).get("type") == "target":
            rule.target = expression["xt"].get("name", "")  # an iptables-nft target (DNAT, MARK, ...)
        elif "reject" in expression:
            rule.target = "REJECT"
        elif "masquerade" in expression:
            rule.target = "MASQUERADE"
        elif "accept" in expression:
            rule.target = "ACCEPT"
        elif "drop" in expression:
            rule.target = "DROP"
    return rule


def _json_match(rule: Rule, match: dict) -> None:
    left, right, operator = match.get("left"), match.get("right"), match.get("op", "==")
    if not isinstance(left, dict):
        return
    if "payload" in left:
        payload = left["payload"]
        field = payload.get("field")
        if field == "dport":
            if payload.get("protocol") in ("tcp", "udp", "sctp"):
                rule.protocol = payload["protocol"]
            rule.dports = _json_ports(right)
        elif field in ("daddr", "saddr") and isinstance(right, str) and not right.startswith("@"):
            if field == "daddr":
                rule.destination = right
            else:
                rule.source = right
            if operator == "!=":
                rule.negated = rule.negated | {"-d" if field == "daddr" else "-s"}
        elif field == "protocol" and isinstance(right, str):
            rule.protocol = right
    elif "meta" in left and left["meta"].get("key") == "l4proto" and isinstance(right, str):
        rule.protocol = right
    elif "fib" in left and right == "local" and operator == "==":
        rule.dst_local = True


def _json_ports(value) -> tuple[tuple[int, int], ...]:
    if isinstance(value, int):
        return ((value, value),)
    if isinstance(value, dict) and "set" in value:
        return tuple(port for item in value["set"] for port in _json_ports(item))
    if isinstance(value, dict) and "range" in value:
        low, high = value["range"]
        return ((int(low), int(high)),)
    return ((0, 65535),)
