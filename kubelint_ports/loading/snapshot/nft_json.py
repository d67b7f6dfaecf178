"""`nft -j list ruleset` (libnftables-json(5)) -> a Ruleset of nft tables, like `nft list ruleset`.

`{"nftables": [{"metainfo": {...}}, {"table": {...}}, {"chain": {...}}, {"rule": {...}}, ...]}`:
each object of the list is one table, chain, set, map or rule, placed at the line and column where
it starts (nft prints the whole ruleset on one line, so that is line 1 and a column).

Every object is checked against the shape nft prints before anything is taken from it: a field of
the wrong type (a chain `name` that is a list, a `jump` that is a string, a port range of three
ports, a port past 65535) makes that object an input error at its place, and the other objects
are still read, so one run lists every malformed object (up to MAX_PROBLEMS).
"""

from __future__ import annotations

import json

from kubelint_ports.loading.snapshot import json_text
from kubelint_ports.loading.snapshot.nft import FAMILIES, PRIORITY_NAMES, element_problem
from kubelint_ports.loading.snapshot.dump_records import Chain, NamedSet, Rule, Ruleset, Table
from kubelint_ports.loading.snapshot.text import LineTable, excerpt, is_address, quoted_name
from kubelint_ports.vocabulary import Diagnostic, Location

MAX_PROBLEMS = 20  # malformed objects listed per file; the count of the rest follows
DECLARING = ("table", "chain", "rule", "set", "map")  # the kinds read; flowtables, counters, ... are not


class Malformed(ValueError):
    """An object nft would not print; its message names the field."""


def read_nft_json(text: str, path: str) -> tuple[Ruleset, list[Diagnostic]]:
    ruleset = Ruleset(path=path, tool="nft -j", backend="nf_tables")
    try:
        data, _ = json_text.document(text, lambda key: json_text.value_at if key == "nftables" else None)
    except json.JSONDecodeError as error:
        return ruleset, [Diagnostic(Location(path, error.lineno, error.colno),
                                    f"invalid JSON from `nft -j list ruleset`: {error.msg} (truncated?)")]
    objects = data.get("nftables") if isinstance(data, dict) else None
    if not isinstance(objects, list):
        return ruleset, [Diagnostic(Location(path, 1, 1), "`nft -j` output has no `nftables` list")]
    lines = LineTable(text)
    problems: list[Diagnostic] = []
    malformed = 0
    for entry, offset in objects:
        line, column = lines.place(offset)
        try:
            try:
                _read_object(entry, ruleset, line, column)
            except RecursionError:  # elements nested near a max-depth raised to Python's own limit
                raise Malformed("nested too deeply to read") from None
        except Malformed as problem:
            malformed += 1
            if len(problems) < MAX_PROBLEMS:
                problems.append(Diagnostic(Location(path, line, column), str(problem)))
    if malformed > len(problems):
        problems.append(Diagnostic(Location(path, 1, 1), f"{malformed - len(problems):,} more malformed objects "
                                                         f"(only the first {MAX_PROBLEMS} are listed)"))
    return ruleset, problems


def _read_object(entry: object, ruleset: Ruleset, line: int, column: int) -> None:
    if not isinstance(entry, dict) or len(entry) != 1:
        raise Malformed("not an nft object (one key naming its kind: `table`, `chain`, `rule`, ...)")
    kind, body = next(iter(entry.items()))
    if kind not in DECLARING:
        return  # metainfo, flowtables, counters, quotas, ... say nothing about ports
    if not isinstance(body, dict):
        raise Malformed(f"the {kind} is {_type(body)}, not an object")
    family = _text(body, "family", kind, required=True)
    if family not in FAMILIES:
        raise Malformed(f"{kind}: {excerpt(family)} is not an nft family ({', '.join(sorted(FAMILIES))})")
    table_name = f"{family} {_text(body, 'name' if kind == 'table' else 'table', kind, required=True)}"
    if kind == "table":
        if table_name in ruleset.tables:
            raise Malformed(f"table {quoted_name(table_name)} appears twice: two rulesets in one file?")
        ruleset.tables[table_name] = Table(table_name, line)
        return
    table = ruleset.tables.get(table_name)
    if table is None:
        raise Malformed(f"{kind} of table {quoted_name(table_name)}, which the output does not declare before it")
    if kind == "chain":
        name = _text(body, "name", kind, required=True)
        table.chains[name] = Chain(name, line, _text(body, "policy", kind), hook=_text(body, "hook", kind),
                                   priority=_priority(body.get("prio")))
    elif kind in ("set", "map"):
        named = NamedSet(_text(body, "name", kind, required=True), line, kind)
        elements = body.get("elem", [])
        if not isinstance(elements, list):
            raise Malformed(f"{kind} {quoted_name(named.name)}: `elem` is {_type(elements)}, not a list")
        for element in elements:
            try:
                member = _element_text(element)
            except Malformed as problem:
                raise Malformed(f"{kind} {quoted_name(named.name)}: {problem}") from None
            problem = element_problem(member)
            if problem:
                raise Malformed(f"{kind} {quoted_name(named.name)}: {problem}")
            named.members.append((member, line))
        table.sets[named.name] = named
    else:
        chain_name = _text(body, "chain", kind, required=True)
        chain = table.chains.get(chain_name)
        if chain is None:
            raise Malformed(f"rule of chain {quoted_name(chain_name)}, which table {quoted_name(table_name)} does not "
                            f"declare before it")
        chain.rules.append(_rule(body, chain_name, line, column))


def _type(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _text(body: dict, key: str, kind: str, required: bool = False) -> str:
    value = body.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise Malformed(f"{kind}: `{key}` is {_type(value)}, not a string" if value is not None
                        else f"{kind} without a `{key}`")
    return value


def _priority(value: object) -> int | None:
    if value is None or isinstance(value, dict):  # an expression form nft may print one day: order unknown
        return None
    if isinstance(value, str) and value in PRIORITY_NAMES:
        return PRIORITY_NAMES[value]
    if type(value) is not int or not -2**31 <= value < 2**31:
        raise Malformed(f"chain: `prio` {excerpt(value)} is not a priority (a 32-bit number)")
    return value


def _element_text(element: object) -> str:
    """An element as `nft list ruleset` writes it (`tcp . 30081 : goto external-...`); the forms
    this reader interprets must have their shape, any other is kept as its JSON text."""
    if isinstance(element, list):
        if len(element) != 2:
            raise Malformed(f"a map element is a list of {len(element)}, not a [key, value] pair")
        return f"{_element_text(element[0])} : {_element_text(element[1])}"
    if not isinstance(element, dict):
        return str(element)
    if "concat" in element:
        parts = element["concat"]
        if not isinstance(parts, list):
            raise Malformed(f"`concat` is {_type(parts)}, not a list")
        return " . ".join(_element_text(part) for part in parts)
    if "elem" in element:
        inner = element["elem"]
        if not isinstance(inner, dict) or "val" not in inner:
            raise Malformed("an `elem` without its `val`")
        return _element_text(inner["val"])
    for verdict in ("goto", "jump"):
        if verdict in element:
            return f"{verdict} {_target(element[verdict], verdict)}"
    if "prefix" in element:
        prefix = element["prefix"]
        if not isinstance(prefix, dict) or not isinstance(prefix.get("addr"), str) or \
                type(prefix.get("len")) is not int:
            raise Malformed("a `prefix` is not {\"addr\": ADDRESS, \"len\": LENGTH}")
        return f"{prefix['addr']}/{prefix['len']}"
    if "range" in element:
        bounds = element["range"]
        if not isinstance(bounds, list) or len(bounds) != 2:
            raise Malformed("a `range` is not [LOW, HIGH]")
        return "-".join(_element_text(bound) for bound in bounds)
    return json.dumps(element, sort_keys=True)


def _target(verdict: object, name: str) -> str:
    if not isinstance(verdict, dict) or not isinstance(verdict.get("target"), str):
        raise Malformed(f"a `{name}` is not {{\"target\": CHAIN}}")
    return verdict["target"]


def _rule(body: dict, chain: str, line: int, column: int) -> Rule:
    rule = Rule(line, chain, column + 1, column=column)
    rule.comment = _text(body, "comment", "rule")
    expressions = body.get("expr", [])
    if not isinstance(expressions, list):
        raise Malformed(f"rule: `expr` is {_type(expressions)}, not a list")
    for expression in expressions:
        if not isinstance(expression, dict) or len(expression) != 1:
            raise Malformed("rule: an expression is not an object with one key")
        (kind, value), = expression.items()
        if kind == "match":
            _match(rule, value)
        elif kind == "dnat":
            _dnat(rule, value)
        elif kind in ("jump", "goto"):
            rule.target, rule.goto = _target(value, kind), kind == "goto"
        elif kind == "vmap":
            rule.target = "vmap"
        elif kind == "xt":
            if not isinstance(value, dict):
                raise Malformed(f"rule: `xt` is {_type(value)}, not an object")
            if value.get("type") == "target":  # an iptables-nft target (DNAT, MARK, ...)
                rule.target = _text(value, "name", "xt target", required=True)
        elif kind in ("reject", "masquerade", "accept", "drop"):
            rule.target = kind.upper()
    return rule


def _dnat(rule: Rule, value: object) -> None:
    if value is not None and not isinstance(value, dict):
        raise Malformed(f"rule: `dnat` is {_type(value)}, not an object")
    value = value or {}
    address, port = value.get("addr", ""), value.get("port")
    rule.target = "DNAT"
    # `addr` and `port` may be expressions (a map lookup): only literal ones say where a packet goes
    if isinstance(address, str) and address and not is_address(address):
        raise Malformed(f"rule: dnat to {excerpt(address)}, which is not an IP address")
    if port is not None and not isinstance(port, dict) and _port(port) is None:
        raise Malformed(f"rule: dnat to port {excerpt(port)}, which is not a port in 0-65535")
    if not isinstance(address, str):
        address = ""
    if type(port) is int:  # as `nft list ruleset` prints it: `10.0.0.2:80`, `[fd00::2]:80`
        address = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    rule.to_destination = address


def _match(rule: Rule, match: object) -> None:
    if not isinstance(match, dict):
        raise Malformed(f"rule: `match` is {_type(match)}, not an object")
    left, right, operator = match.get("left"), match.get("right"), match.get("op", "==")
    if not isinstance(left, dict) or len(left) != 1:
        return  # a concatenation, a constant: nothing this reader needs
    (kind, detail), = left.items()
    if kind in ("payload", "meta", "fib") and not isinstance(detail, dict):
        raise Malformed(f"rule: `{kind}` is {_type(detail)}, not an object")
    if kind == "payload":
        field = detail.get("field")
        if field == "dport":
            if detail.get("protocol") in ("tcp", "udp", "sctp"):
                rule.protocol = detail["protocol"]
            rule.dports = _ports(right)
        elif field in ("daddr", "saddr") and isinstance(right, str) and not right.startswith("@"):
            if not is_address(right, prefix=True):
                raise Malformed(f"rule: {field} {excerpt(right)} is not an IP address")
            if field == "daddr":
                rule.destination = right
            else:
                rule.source = right
            if operator == "!=":
                rule.negated = rule.negated | {"-d" if field == "daddr" else "-s"}
        elif field == "protocol" and isinstance(right, str):
            rule.protocol = right
    elif kind == "meta" and detail.get("key") == "l4proto" and isinstance(right, str):
        rule.protocol = right
    elif kind == "fib" and right == "local" and operator == "==":
        rule.dst_local = True


def _port(value: object) -> int | None:
    return value if type(value) is int and 0 <= value <= 65535 else None


def _ports(value: object) -> tuple[tuple[int, int], ...]:
    if isinstance(value, dict) and "set" in value:
        items = value["set"]
        if not isinstance(items, list):
            raise Malformed(f"rule: a port `set` is {_type(items)}, not a list")
        return tuple(port for item in items for port in _ports(item))
    if isinstance(value, dict) and "range" in value:
        bounds = value["range"]
        low, high = (bounds if isinstance(bounds, list) and len(bounds) == 2 else (None, None))
        if _port(low) is None or _port(high) is None or high < low:
            raise Malformed(f"rule: the port range {excerpt(json.dumps(bounds))} is not [LOW, HIGH] in 0-65535")
        return ((low, high),)
    if isinstance(value, (str, dict)):
        return ((0, 65535),)  # a set reference (`@name`), a named service, an expression: any port
    if _port(value) is None:
        raise Malformed(f"rule: destination port {excerpt(json.dumps(value))} is not a port in 0-65535")
    return ((value, value),)
