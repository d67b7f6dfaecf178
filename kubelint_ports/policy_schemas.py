"""A JSON Schema written by a user (a `port-schema` policy's) made safe to validate with: its
references stay inside it, without loops or a "billion laughs" of them (`references_problem`), and
its regular expressions match in linear time with RE2 when it is installed and takes them, else
in Python's backtracking `re` under a per-match deadline, patterns that could take exponential
time refused when the policy is loaded (`patterns_problem`, `backtracking_problem`).

A policy file is input like any other, so these are budgets of hostile input, as `budgets.py`'s
are (and `files.schema_reference_problem`, which keeps references from leaving the schema).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

# --- references: `#...` only, resolved here, no loop ---------------------------------------------

MAX_EXPANDED_SUBSCHEMAS = 100_000  # references inlined, a schema could be a "billion laughs"


def subschemas(schema: dict) -> dict[tuple, Any]:
    """Every node of the schema by its key path (iterative: depth is bounded by max-depth, not
    by the stack)."""
    nodes: dict[tuple, Any] = {}
    stack: list[tuple[tuple, Any]] = [((), schema)]
    while stack:
        keys, node = stack.pop()
        nodes[keys] = node
        if isinstance(node, dict):
            stack.extend(((*keys, key), value) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend(((*keys, index), value) for index, value in enumerate(node))
    return nodes


def resource_of(keys: tuple, nodes: dict[tuple, Any]) -> tuple:
    """The key path of the schema resource `keys` is in: the nearest node with an `$id` (a
    fragment reference resolves inside it), else the document."""
    for length in range(len(keys), 0, -1):
        node = nodes[keys[:length]]
        if isinstance(node, dict) and "$id" in node and keys[length - 1:length] != ("properties",):
            return keys[:length]
    return ()


def anchors(nodes: dict[tuple, Any]) -> dict[tuple[tuple, str], tuple]:
    """(resource, anchor name) -> the key path of the node declaring it, the first one found."""
    found: dict[tuple[tuple, str], tuple] = {}
    for keys, node in sorted(nodes.items(), key=lambda item: (len(item[0]), list(map(str, item[0])))):
        if isinstance(node, dict):
            for keyword in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(keyword), str):
                    found.setdefault((resource_of(keys, nodes), node[keyword]), keys)
    return found


def resolve_fragment(fragment: str, resource: tuple, nodes: dict[tuple, Any], named: dict) -> tuple | None:
    """The key path a `#...` reference inside `resource` leads to: a JSON pointer or an anchor."""
    from urllib.parse import unquote

    fragment = unquote(fragment[1:])
    if fragment and not fragment.startswith("/"):
        return named.get((resource, fragment))
    keys = resource
    for token in fragment.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        node = nodes.get(keys)
        if isinstance(node, list) and token.isdigit() and int(token) < len(node):
            keys = (*keys, int(token))
        elif isinstance(node, dict) and token in node:
            keys = (*keys, token)
        else:
            return None
    return keys


def references_problem(schema: dict) -> tuple[list, str] | None:
    """A `$dynamicRef`/`$recursiveRef` (resolved at run time: refused), a `$ref` to nothing in the
    schema, a loop of `$ref`s (and subschemas) back to where it started, or references that would
    inline the schema past MAX_EXPANDED_SUBSCHEMAS. A port's context is two levels deep: a
    recursive schema has nothing to recurse into."""
    nodes = subschemas(schema)
    named = anchors(nodes)
    edges: dict[tuple, list[tuple]] = {keys: [] for keys, node in nodes.items() if isinstance(node, (dict, list))}
    for keys, node in sorted(nodes.items(), key=lambda item: list(map(str, item[0]))):
        if keys and isinstance(nodes[keys[:-1]], (dict, list)) and isinstance(node, (dict, list)):
            edges[keys[:-1]].append(keys)
        if not isinstance(node, dict):
            continue
        for keyword in ("$dynamicRef", "$recursiveRef"):
            if keyword in node:
                return [*keys, keyword], (f"uses {keyword}, which is resolved while validating and can loop: "
                                          "use $ref")
        reference = node.get("$ref")
        if isinstance(reference, str) and reference.startswith("#"):
            target = resolve_fragment(reference, resource_of(keys, nodes), nodes, named)
            if target is None:
                return [*keys, "$ref"], f"refers to {reference}, which is not in the schema"
            if not isinstance(nodes.get(target), (dict, bool)):  # a keyword's value, not a schema
                return [*keys, "$ref"], f"refers to {reference}, which is not a schema (an object or true/false)"
            edges[keys].append(target)
    # Iterative depth-first search: a node met again while on the path is a loop; sizes of the
    # schema with every reference inlined are summed bottom-up.
    size: dict[tuple, int] = {}
    on_path: set[tuple] = set()
    stack: list[tuple[tuple, int]] = [((), 0)]
    while stack:
        keys, next_edge = stack.pop()
        if next_edge == 0:
            on_path.add(keys)
        followed = edges.get(keys, [])
        if next_edge < len(followed):
            stack.append((keys, next_edge + 1))
            child = followed[next_edge]
            if child in on_path:
                return [*keys, "$ref"] if "$ref" in nodes[keys] else list(keys), (
                    f"refers back to itself (through {'#/' + '/'.join(map(str, child)) if child else '#'}): a "
                    "validator would recurse for ever; a port's context needs no recursive schema")
            if child not in size and child in edges:
                stack.append((child, 0))
            continue
        on_path.discard(keys)
        size[keys] = 1 + sum(size.get(child, 1) for child in followed)
        if size[keys] > MAX_EXPANDED_SUBSCHEMAS:
            return list(keys), (f"refers to its parts so often that, inlined, it would be over "
                                f"{MAX_EXPANDED_SUBSCHEMAS:,} subschemas")
    return None


# --- patterns: linear time with RE2, else Python's re bounded ----------------------------------------

_ONE_SCHEMA = ("not", "if", "then", "else", "items", "contains", "additionalProperties", "unevaluatedProperties",
               "unevaluatedItems", "propertyNames", "additionalItems")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def schema_nodes(schema: dict) -> Iterator[tuple[list, dict]]:
    """Every subschema (by its keys), in a fixed order: only where a keyword takes a schema, so a
    `const` or an `enum` holding a `pattern` key is no pattern."""
    stack: list[tuple[list, Any]] = [([], schema)]
    while stack:
        keys, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield keys, node
        children = []
        for keyword in sorted(node, key=str):
            value = node[keyword]
            if keyword in _ONE_SCHEMA:
                children.append(([*keys, keyword], value))
            if keyword in _SCHEMA_LISTS and isinstance(value, list):
                children += [([*keys, keyword, index], item) for index, item in enumerate(value)]
            if keyword in _SCHEMA_MAPS and isinstance(value, dict):
                children += [([*keys, keyword, name], item) for name, item in value.items()]
        stack.extend(reversed(children))


def pattern_keys(schema: Any, pattern: str) -> list:
    """The keys down to where `schema` writes `pattern` (a `pattern`, or a `patternProperties`
    key), or none when it does not (a parameter gives it)."""
    for keys, node in schema_nodes(schema) if isinstance(schema, dict) else ():
        if node.get("pattern") == pattern:
            return [*keys, "pattern"]
        if isinstance(node.get("patternProperties"), dict) and pattern in node["patternProperties"]:
            return [*keys, "patternProperties", pattern]
    return []


def patterns_problem(schema: dict) -> tuple[list, str] | None:
    """The first `pattern` or `patternProperties` key that does not compile, or that Python's re
    could take exponential time on (when RE2 does not take it). `unevaluatedProperties` with
    `patternProperties` is refused: jsonschema matches those patterns itself, out of reach."""
    import re

    pattern_properties = unevaluated = False
    for keys, node in schema_nodes(schema):
        found = []
        if isinstance(node.get("pattern"), str):
            found.append(([*keys, "pattern"], node["pattern"]))
        if isinstance(node.get("patternProperties"), dict):
            pattern_properties = True
            found += [([*keys, "patternProperties", key], key) for key in node["patternProperties"]]
        unevaluated = unevaluated or "unevaluatedProperties" in node
        for where, pattern in found:
            try:
                compiled = matcher(pattern)
            except (re.error, RecursionError, OverflowError) as error:
                return where, f"is not a regular expression: {error}"
            if not compiled.linear:
                problem = backtracking_problem(pattern)
                if problem:
                    return where, (f"{problem}: Python's re can take exponential time on it (minutes on a "
                                   "30-character name); rewrite it so no repeated group can match the same "
                                   "text two ways (^[a-z0-9]+(-[a-z0-9]+)*$ rather than ^([a-z0-9]+-?)+$), "
                                   "or install the re2 extra (`pip install 'kubelint-ports[re2]'`)")
    if pattern_properties and unevaluated:
        return ["unevaluatedProperties"], ("uses unevaluatedProperties with patternProperties, whose matching "
                                           "kubelint-ports cannot bound: use additionalProperties")
    return None



PATTERN_SECONDS = 2.0  # one match in Python's re: some 10^8 backtracking steps; a sane pattern takes microseconds
# What one policy's patterns may spend matching in one run, every port together: two deadlines'
# worth. A pattern under the deadline can still take a second per port (`.*.*.*.*.*.*=` on a
# 50-character name: 17 s for a pod of 20 ports); four patterns of a sane policy over 10,000 pods
# (20,000 ports, 10,110 distinct texts) spent 6 ms.
POLICY_PATTERN_SECONDS = 4.0
# And all the run's policies together: a repository may bring many policies of its own.
RUN_PATTERN_SECONDS = 4 * POLICY_PATTERN_SECONDS
MEMO_ENTRIES = 100_000  # (pattern, text) results one budget remembers: references to the model's strings


class PatternLimit(ValueError):
    """A pattern gave up: past PATTERN_SECONDS in Python's re."""


class PatternBudgetSpent(Exception):
    """A policy's patterns spent their budget for the run (`PatternBudget`): the policy stops, as a
    whole, rather than fail port after port. Not a ValueError: the validators must not catch it."""

    def __init__(self, budget: PatternBudget, pattern: str):
        super().__init__(f"the pattern {pattern!r} was to match when its budget ran out")
        self.budget, self.pattern = budget, pattern


class PatternBudget:
    """The matching time patterns may spend, `seconds` in all (with `parent`, also within the
    parent's: a policy's budget within the run's), and what each (pattern, text) gave, so that a
    text met again (a pod's name, once per port) is not matched again. Patterns match through
    `matcher` inside `charged_to(budget)`; outside, each match has only its deadline."""

    __slots__ = ("seconds", "used", "parent", "memo", "matched", "reused", "spent_by")

    def __init__(self, seconds: float, parent: PatternBudget | None = None):
        self.seconds, self.used, self.parent = seconds, 0.0, parent
        self.memo: dict[tuple[str, str], bool] = {}
        self.matched = self.reused = 0  # matches run and answers remembered: what the tests count
        self.spent_by: PatternBudget | None = None  # the budget that ran out: this one or a parent

    def left(self) -> float:
        own = self.seconds - self.used
        return own if self.parent is None else min(own, self.parent.left())

    def charge(self, seconds: float) -> None:
        budget = self
        while budget is not None:
            budget.used += seconds
            budget = budget.parent
        if self.spent_by is None and self.left() <= 0:
            self.spent_by = self.exhausted()

    def exhausted(self) -> PatternBudget:
        """The innermost budget with nothing left (the parent's when both are)."""
        if self.parent is not None and self.parent.left() <= 0:
            return self.parent.exhausted()
        return self

    def search(self, matcher: Matcher, text: str) -> bool:
        key = (matcher.pattern, text)
        found = self.memo.get(key)
        if found is not None:
            self.reused += 1
            return found
        if matcher.gave_up:  # past its deadline once: it fails at once, as outside a budget
            raise PatternLimit(matcher.limit_message())
        if self.spent_by is None and self.left() <= 0:  # a parent spent by another policy
            self.spent_by = self.exhausted()
        if self.spent_by is not None:
            raise PatternBudgetSpent(self, matcher.pattern)
        self.matched += 1
        seconds = min(PATTERN_SECONDS, self.left())
        try:
            found, took = matcher.timed_search(text, seconds)
        except PatternLimit:
            self.charge(seconds)
            if seconds >= PATTERN_SECONDS:
                raise  # the pattern's own deadline: it fails this port, and at once the others
            matcher.gave_up = False  # the budget ran out, not the deadline: the pattern is no worse
            self.spent_by = self.spent_by or self.exhausted()
            raise PatternBudgetSpent(self, matcher.pattern) from None
        self.charge(took)
        if len(self.memo) < MEMO_ENTRIES:
            self.memo[key] = found
        return found


_charged: list[PatternBudget] = []  # the budget matches are charged to, innermost last


@contextmanager
def charged_to(budget: PatternBudget):
    """Every match through `matcher` inside the block is remembered by, and charged to, `budget`."""
    _charged.append(budget)
    try:
        yield budget
    finally:
        _charged.pop()


class Matcher:
    """One `pattern` compiled: with RE2 (`google-re2`, linear time) when it is installed and takes
    the pattern, else with Python's `re` under a deadline where a timer signal can interrupt it
    (`re` checks signals while it backtracks). A pattern that ran out of time once fails at once
    afterwards: a rule must not spend the deadline again on every port. Inside `charged_to`, the
    budget remembers answers and bounds the time all matches take together."""

    __slots__ = ("pattern", "compiled", "linear", "gave_up")

    def __init__(self, pattern: str):
        import re

        self.pattern, self.gave_up = pattern, False
        self.compiled, self.linear = re2_compiled(pattern), True
        if self.compiled is None:
            self.compiled, self.linear = re.compile(pattern), False

    def search(self, text: str) -> bool:
        if _charged:
            return _charged[-1].search(self, text)
        return self.timed_search(text, PATTERN_SECONDS)[0]

    def timed_search(self, text: str, seconds: float) -> tuple[bool, float]:
        """Whether the pattern matches, and the seconds the match itself took (not the timer's
        setting up: a budget bounds backtracking, not our bookkeeping); PatternLimit past
        `seconds` (Python's re; RE2, linear, needs no deadline)."""
        if self.linear:
            started = time.perf_counter()
            return self.compiled.search(text) is not None, time.perf_counter() - started
        if self.gave_up:
            raise PatternLimit(self.limit_message())
        from kubelint_ports.loading import files

        try:
            with files.time_limit(max(seconds, 1e-6)):
                started = time.perf_counter()
                found = self.compiled.search(text) is not None
                return found, time.perf_counter() - started
        except files.InputTimeout:
            self.gave_up = True
            raise PatternLimit(self.limit_message()) from None

    def limit_message(self) -> str:
        return (f"the pattern {self.pattern!r} took over {PATTERN_SECONDS:g} s in Python's re (it backtracks): "
                "rewrite it, or install the re2 extra (`pip install 'kubelint-ports[re2]'`), which matches in linear time")


def re2_compiled(pattern: str):
    """The pattern compiled by RE2, or None: not installed, or a pattern RE2 does not take
    (lookaround, backreferences). Imported only here: most runs have no pattern."""
    try:
        import re2
    except ImportError:
        return None
    options = re2.Options()
    options.log_errors = False  # its refusals are expected: Python's re takes those patterns
    try:
        return re2.compile(pattern, options)
    except Exception:  # re2.error, and TypeError/ValueError for what its wrapper refuses
        return None


@lru_cache(maxsize=256)
def matcher(pattern: str) -> Matcher:
    return Matcher(pattern)


def _parser():
    try:
        from re import _constants as constants, _parser as parser  # Python 3.11+
    except ImportError:  # Python 3.10
        import sre_constants as constants
        import sre_parse as parser
    return parser, constants


def backtracking_problem(pattern: str) -> str | None:
    """Why Python's backtracking `re` could take exponential time on `pattern`, or None: a
    repeated group whose body holds another repetition of characters the body can also begin or
    end with (`([a-z0-9]+-?)+`, `(a+)+`), or an alternation whose branches can begin alike
    (`(ab|a.)*`). A body that begins or ends with a character no inner repetition takes
    (`(-[a-z0-9]+)*`, `([a-z]+[.])+`) splits the text one way only. A heuristic that errs on the
    side of refusing: what it misses still runs under the PATTERN_SECONDS deadline."""
    parser, constants = _parser()
    ignore_case = False
    try:
        parsed = parser.parse(pattern)
        ignore_case = bool(parsed.state.flags & constants.SRE_FLAG_IGNORECASE)
    except Exception:  # noqa: BLE001 - compiled already; an internal parser change is no reason to fail
        return None
    repeats = (constants.MAX_REPEAT, constants.MIN_REPEAT)

    everything = frozenset(range(128)), True
    named_classes = {"DIGIT": frozenset(b"0123456789"), "SPACE": frozenset(b" \t\n\r\f\v"),
                     "WORD": frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")}

    def category(name) -> frozenset:
        kind = str(name).replace("CATEGORY_", "")
        found = named_classes.get(kind.removeprefix("NOT_"))
        if found is None:  # a line break and the like: take it as anything
            return everything[0]
        return frozenset(range(128)) - found if kind.startswith("NOT_") else found

    def chars(items) -> tuple[frozenset, bool]:
        """The ASCII characters a subpattern can consume, and whether any non-ASCII one."""
        found: set[int] = set()
        wide = False
        for op, argument in items:
            if op == constants.LITERAL:
                found.add(argument)
            elif op in (constants.NOT_LITERAL, constants.ANY):
                return everything
            elif op == constants.IN:
                members: set[int] = set()
                for sub_op, sub_argument in argument:
                    if sub_op == constants.LITERAL:
                        members.add(sub_argument)
                    elif sub_op == constants.RANGE:
                        members.update(range(sub_argument[0], min(sub_argument[1], 128) + 1))
                    elif sub_op == constants.CATEGORY:
                        members |= category(sub_argument)
                        wide = True  # \d, \w, \s take Unicode in a str pattern
                    elif sub_op != constants.NEGATE:
                        return everything
                if any(sub_op == constants.NEGATE for sub_op, _ in argument):
                    members = set(range(128)) - members
                    wide = True
                found |= members
            elif op in (*repeats, constants.SUBPATTERN, constants.BRANCH):
                parts = [argument[2]] if op in repeats else [argument[-1]] if op == constants.SUBPATTERN \
                    else argument[1]
                for part in parts:
                    inner, inner_wide = chars(part)
                    found |= inner
                    wide = wide or inner_wide
            elif op not in (constants.AT, constants.ASSERT, constants.ASSERT_NOT):
                return everything  # group references and the like: anything
        wide = wide or any(c >= 128 for c in found)
        found = {c for c in found if c < 128}
        if ignore_case:
            found |= {ord(chr(c).swapcase()) for c in found if chr(c).isalpha()}
        return frozenset(found), wide

    def overlap(one: tuple[frozenset, bool], other: tuple[frozenset, bool]) -> bool:
        return bool(one[0] & other[0]) or (one[1] and other[1])

    def edge(items, from_end: bool) -> tuple[frozenset, bool] | None:
        """The characters of the body's first (last) mandatory single character, when it is one."""
        for op, argument in (reversed(items) if from_end else items):
            if op in (constants.AT, constants.ASSERT, constants.ASSERT_NOT):
                continue
            if op in (constants.LITERAL, constants.NOT_LITERAL, constants.IN, constants.ANY):
                return chars([(op, argument)])
            if op == constants.SUBPATTERN:
                return edge(argument[-1], from_end)
            return None
        return None

    def inner_repeats(items) -> Iterator[tuple]:
        for op, argument in items:
            if op in repeats:
                if argument[1] > 1:
                    yield argument[2]
                yield from inner_repeats(argument[2])
            elif op == constants.SUBPATTERN:
                yield from inner_repeats(argument[-1])
            elif op == constants.BRANCH:
                for branch in argument[1]:
                    yield from inner_repeats(branch)

    def first_chars(items) -> tuple[frozenset, bool]:
        """The characters a subpattern can begin with (every optional element before the first
        mandatory one counts)."""
        found: set[int] = set()
        wide = False
        for op, argument in items:
            if op in (constants.AT, constants.ASSERT, constants.ASSERT_NOT):
                continue
            if op in repeats:
                inner = first_chars(argument[2])
            elif op == constants.SUBPATTERN:
                inner = first_chars(argument[-1])
            else:
                inner = chars([(op, argument)])
            found |= inner[0]
            wide = wide or inner[1]
            if not (op in repeats and argument[0] == 0):
                break
        return frozenset(found), wide

    def ambiguous_branch(items) -> bool:
        for op, argument in items:
            if op == constants.BRANCH:
                branches = [first_chars(branch) for branch in argument[1] if branch]
                if any(overlap(one, other) for index, one in enumerate(branches) for other in branches[index + 1:]):
                    return True
                if any(ambiguous_branch(branch) for branch in argument[1]):
                    return True
            elif op in repeats:
                if ambiguous_branch(argument[2]):
                    return True
            elif op == constants.SUBPATTERN and ambiguous_branch(argument[-1]):
                return True
        return False

    stack = [list(parsed)]
    while stack:
        for op, argument in stack.pop():
            if op in repeats:
                body = argument[2]
                if argument[1] > 1:
                    taken = [chars(inner) for inner in inner_repeats(body)]
                    if taken:
                        separators = [found for found in (edge(body, False), edge(body, True)) if found]
                        if not any(all(not overlap(separator, inner) for inner in taken) for separator in separators):
                            return ("it repeats a group that holds a repetition of the characters it may begin "
                                    "or end with")
                    if ambiguous_branch(body):
                        return "it repeats an alternation whose branches can begin alike"
                stack.append(list(body))
            elif op == constants.SUBPATTERN:
                stack.append(list(argument[-1]))
            elif op == constants.BRANCH:
                stack.extend(list(branch) for branch in argument[1])
            elif op in (constants.ASSERT, constants.ASSERT_NOT):
                stack.append(list(argument[1]))
    return None

