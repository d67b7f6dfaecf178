"""Budgets for hostile input: every YAML text is bounded before libyaml composes it.

libyaml's composer (PyYAML's C loader) recurses once per nesting level, with no limit of its own:
about 20,000 nested `[` or `- ` overflow an 8 MiB C stack and kill the process. It also builds
every node of a document before returning it, so a 60 MiB file of `[]` holds 30 million nodes
(7.5 GiB) before anything could count them. Both are bounded here BEFORE composing:

1. A cheap byte scan proves most files safe: nesting depth is at most (brackets written) +
   2 x (the widest run of indentation and block indicators that starts a line), because a block
   collection's column grows at least every second level; node count is at most 2 x the file's
   bytes, or 3 x its indicator characters (`:` `,` `-` `?` `[` `{`) plus its documents.
   The same bounds are tried document by document (`---` lines always end a document), so a
   big file of small documents passes too.
2. Only when those bounds are over budget, libyaml's event parser (no recursion, no tree) counts
   the real depth and nodes, stopping at the first event over budget.

After composing, aliases and merge keys are expanded virtually (sizes and depths memoised per
node), so a "billion laughs" or merge-key bomb is refused before any reader walks it.

The budgets in force are module state set by the run (`applied`), so the many places that read
YAML (manifests, embedded configs, values files, the config file, policies) share one setting.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kubelint_ports.records import record

MIB = 1024 * 1024


@record(frozen=True, slots=True)
class Limits:
    """What one run accepts. The names are the config file's `limits:` keys and `--limit NAME=N`."""

    max_depth: int = 200  # nesting levels of one YAML or JSON text (aliases expanded)
    max_aliases: int = 1_000_000  # nodes of one document once aliases and merge keys are expanded
    max_nodes: int = 500_000  # nodes of one document as written (about 150 MB composed)
    max_file_mib: int = 64  # bytes read from one file
    helm_seconds: float = 10.0  # one chart's render
    helm_output_mib: int = 16  # one chart's rendered text
    helm_memory_mib: int = 256  # the render worker's data size (Go heap and Python's)
    kustomize_seconds: float = 10.0  # one Kustomize build
    kustomize_memory_mib: int = 512  # the build's data size (kustomize's Go heap)
    kustomize_generators: int = 500  # configMapGenerator/secretGenerator entries of one build
    input_seconds: float = 300.0  # reading one input (file, chart, standard input)

    @property
    def max_file_bytes(self) -> int:
        return self.max_file_mib * MIB


DEFAULT_LIMITS = Limits()
# What each limit may be set to (low, high), from the command line. A repository's configuration
# may only lower a limit (`repository_limits`): its range ends at the default. The highs are what
# the mechanism behind each can take, not what a run should need: Python's recursion past 1,000
# levels; standard input read into one buffer of `max-file-mib` (allocated whole, so a TiB is a
# MemoryError); `select` and `setitimer` overflow past a few hundred years (`input-seconds=1e10`
# ended every input in an internal error; `helm-seconds=1e10` read as an oversized output).
# The lows: a deadline under 0.1 s or a Go program in under 64 MiB only fails for no reason.
RANGES: dict[str, tuple[float, float]] = {
    "max_depth": (1, 1000),
    "max_aliases": (1, 1_000_000_000),
    "max_nodes": (1, 1_000_000_000),
    "max_file_mib": (1, 1024),
    "helm_seconds": (0.1, 86_400),
    "helm_output_mib": (1, 1024),
    "helm_memory_mib": (64, 1_048_576),
    "kustomize_seconds": (0.1, 86_400),
    "kustomize_memory_mib": (64, 1_048_576),
    "kustomize_generators": (1, 1_000_000),
    "input_seconds": (0.1, 86_400),
}
LIMIT_DOCS = {
    "max-depth": "nesting levels of a YAML/JSON text, aliases expanded",
    "max-aliases": "nodes of a document once aliases and `<<` merge keys are expanded",
    "max-nodes": "nodes of a document as written",
    "max-file-mib": "MiB read from one file (a chart archive unpacks to at most 4 times it)",
    "helm-seconds": "seconds one chart may take to render",
    "helm-output-mib": "MiB of rendered text one chart may produce",
    "helm-memory-mib": "MiB of address space the Helm render worker may use",
    "kustomize-seconds": "seconds one Kustomize build may take",
    "kustomize-memory-mib": "MiB of data the Kustomize build (kustomize or kubectl) may use",
    "kustomize-generators": "configMapGenerator/secretGenerator entries one Kustomize build may hold",
    "input-seconds": "seconds one input (file, chart, stdin) may take to read",
}


class LimitValueError(ValueError):
    """A limit's value refused: `key` is the limit as written, `reason` says why (without the key)."""

    def __init__(self, key: str, reason: str):
        super().__init__(f"limit {key}: {reason}")
        self.key, self.reason = key, reason


def limit_names() -> list[str]:
    return [spec.name.replace("_", "-") for spec in fields(Limits)]


def _number_text(number: float) -> str:
    return f"{number:,}" if isinstance(number, int) or not number.is_integer() else f"{int(number):,}"


def limit_range(name: str) -> str:
    """`1 to 1,000`: a limit's range as the messages and docs write it (`name`: either spelling)."""
    low, high = RANGES[name.replace("-", "_")]
    return f"{_number_text(low)} to {_number_text(high)}"


def limit_value(key: str, value: object, most: float | None = None) -> int | float:
    """One limit's value (a number, or text as `--limit` gives it), within its range and at most
    `most`; LimitValueError (naming the limit and its range) otherwise: non-numeric, bool, NaN,
    infinite, zero, negative, fractional where a count is meant, or out of range."""
    name = str(key).replace("-", "_")
    known = {spec.name: spec for spec in fields(Limits)}
    if name not in known:
        raise LimitValueError(str(key), f"unknown limit (known: {', '.join(limit_names())})")
    whole = known[name].type not in ("float", float)
    low, high = RANGES[name]
    what = "a whole number" if whole else "a number of seconds"
    number = _as_number(value)
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    allowed = limit_range(name) if most is None else f"{_number_text(low)} to {_number_text(min(most, high))}"
    if number is None or number != number or (  # NaN, text that is no number, 1.5 nodes
            whole and isinstance(number, float) and abs(number) != float("inf") and not number.is_integer()):
        raise LimitValueError(str(key), f"{shown} is not {what} (allowed: {allowed})")
    if most is not None and number > most:
        raise LimitValueError(str(key), (
            f"{shown} is over the default, {_number_text(most)}: a repository's configuration may lower a limit, "
            f"never raise it (allowed: {allowed}); whoever runs kubelint-ports "
            f"raises it on the command line, --limit {str(key).replace('_', '-')}=N (up to {_number_text(high)})"))
    if not low <= number <= high:  # infinities too
        raise LimitValueError(str(key), f"{shown} is out of range (allowed: {allowed})")
    return int(number) if whole else float(number)


def _as_number(value: object) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip()
    for kind in (int, float):
        try:
            return kind(text)
        except (ValueError, OverflowError):
            continue
    return None


def parse_limits(settings: dict[str, object], base: Limits = DEFAULT_LIMITS) -> Limits:
    """`{"max-depth": 300}` (`--limit` pairs, the person running the tool) over `base`, each
    within its range; LimitValueError names the bad one."""
    changes = {str(key).replace("-", "_"): limit_value(key, value) for key, value in settings.items()}
    return Limits(**{**{spec.name: getattr(base, spec.name) for spec in fields(Limits)}, **changes})


def repository_limits(settings: dict[str, object]) -> Limits:
    """A configuration file's `limits:`: each may lower its limit, never raise it past the default
    (a repository under review must not lift the budgets that protect whoever lints it). Numbers
    only, as the file's schema says; LimitValueError names the bad one."""
    changes = {}
    for key, value in settings.items():
        name = str(key).replace("-", "_")
        default = getattr(DEFAULT_LIMITS, name, None)
        if isinstance(value, str) and name in RANGES:  # text is the command line's way, not YAML's
            allowed = f"{_number_text(RANGES[name][0])} to {_number_text(default)}"
            raise LimitValueError(str(key), f"{value[:40]!r} is not a number (allowed: {allowed})")
        changes[name] = limit_value(key, value, most=default)
    return Limits(**{**{spec.name: getattr(DEFAULT_LIMITS, spec.name) for spec in fields(Limits)}, **changes})


_current = [DEFAULT_LIMITS]


def current() -> Limits:
    return _current[0]


@contextmanager
def applied(limits: Limits | None):
    """Use `limits` for every YAML read inside the block."""
    previous = _current[0]
    _current[0] = limits or previous
    try:
        yield
    finally:
        _current[0] = previous


class LimitError(yaml.MarkedYAMLError):
    """Input over a budget: a YAML error with a place, so every reader reports it as such."""

    def __init__(self, message: str, mark=None, node: Node | None = None):
        super().__init__(problem=message, problem_mark=mark)
        self.node = node

    def __str__(self) -> str:
        return self.problem


# --- the byte scan -----------------------------------------------------------------------------

_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_NOT_INDICATORS = bytes(byte for byte in range(256) if byte not in b":,-?[{.")
_DEPTH_SHAPE = bytes(ord("[") if byte in b"[{" else ord(" ") if byte in b" \t?:-"
                     else ord("\n") if byte in b"\n\r\x85\xa8\xa9" else ord("x") for byte in range(256))


def depth_surely_within(data: bytes, depth: int, start: int = 0, end: int | None = None) -> bool:
    """True when the text (or `data[start:end]`, whole documents) cannot nest deeper than
    `depth`; False means "count it"."""
    if start == 0 and (data.startswith(_UTF16_BOMS) or b"\x00" in data[:4]):
        return False  # UTF-16: columns are not bytes
    # One pass maps the text to `[` (a flow opener), ` ` (indentation or a block indicator),
    # `\n` (a possible line break: LF, CR, and the bytes of NEL, LS, PS) and `x` (anything else).
    shape = data[start:end].translate(_DEPTH_SHAPE)
    block_levels = depth - shape.count(b"[")
    if block_levels < 4:
        return False
    # Block nesting is at most 2 x (column + 1) of the innermost block collection's start.
    run = b" " * (block_levels // 2 - 1)
    if shape.startswith(run, 3 if start == 0 and data.startswith(b"\xef\xbb\xbf") else 0):
        return False
    return shape.find(b"\n" + run) < 0


def nodes_surely_within(data: bytes, nodes: int, start: int = 0, end: int | None = None) -> bool:
    """True when no document of the text (or of `data[start:end]`) can hold more than `nodes` nodes."""
    end = len(data) if end is None else end
    if 2 * (end - start) + 4 <= nodes:  # every node costs at least half a byte
        return True
    kept = data[start:end].translate(None, _NOT_INDICATORS)  # one pass: only `:,-?[{.` remain
    dots = kept.count(b".")
    indicators = len(kept) - dots
    documents = (kept.count(b"-") + dots) // 3 + 1  # `---` and `...` start and end documents
    return 3 * indicators + documents <= nodes


# A line starting `---` or `...` (then a blank or the end) always ends a document in libyaml: no
# scalar or collection runs across it.
_DOCUMENT_MARKER = re.compile(rb"\n(?:---|\.\.\.)(?=[ \t\r\n]|\Z)")


def documents_surely_within(data: bytes, limits: Limits) -> bool:
    """The cheap bounds applied document by document: a big file of small documents passes."""
    starts = [0, *(match.start() + 1 for match in _DOCUMENT_MARKER.finditer(data)), len(data)]
    if len(starts) < 3:
        return False
    if not depth_surely_within(data, limits.max_depth, 0, starts[1]) or not all(
            depth_surely_within(data, limits.max_depth, a, b) for a, b in zip(starts[1:], starts[2:])):
        return False
    return all(nodes_surely_within(data, limits.max_nodes, a, b) for a, b in zip(starts, starts[1:]))


def event_check(data: bytes | str, limits: Limits, retry: bool = True) -> None:
    """Count depth and nodes with libyaml's event parser; raise at the first event over budget.

    The parser keeps its own stacks (no recursion) and builds no tree, so this costs time in
    proportion to the text, never memory. A syntax error is left for the composer to report."""
    loader = _loader_class()
    depth = nodes = 0
    try:
        for event in yaml.parse(data, Loader=loader):
            kind = type(event)
            if kind is yaml.ScalarEvent:
                nodes += 1
            elif kind is yaml.SequenceStartEvent or kind is yaml.MappingStartEvent:
                nodes += 1
                depth += 1
                if depth > limits.max_depth:
                    raise LimitError(f"nested deeper than {limits.max_depth} levels (limit max-depth); not read",
                                     event.start_mark)
            elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
                depth -= 1
            elif kind is yaml.DocumentStartEvent:
                nodes = 0
            if nodes > limits.max_nodes:
                raise LimitError(f"a document holds more than {limits.max_nodes:,} nodes (limit max-nodes); "
                                 "not read", event.start_mark)
    except LimitError:
        raise
    except yaml.YAMLError as error:
        # libyaml's scanner reads ahead and, since PyYAML 6.0.4, refuses deep flow nesting on its
        # own before it hands us a single event. Our budget speaks first: the text up to where the
        # scanner stopped is counted again, and a genuine syntax error there is left to the composer.
        # One retry: the prefix ends where the scanner stopped, so it cannot stop there again.
        stop = getattr(getattr(error, "problem_mark", None), "index", None)
        if retry and isinstance(stop, int) and 0 < stop < len(data):
            event_check(data[:stop], limits, retry=False)
        return


def check_text(data: bytes | str, limits: Limits | None = None) -> None:
    """Raise LimitError when composing `data` could nest or grow past the budgets."""
    limits = limits or current()
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if depth_surely_within(raw, limits.max_depth) and nodes_surely_within(raw, limits.max_nodes):
        return
    if documents_surely_within(raw, limits):
        return
    event_check(data, limits)


# --- aliases and merge keys --------------------------------------------------------------------

def check_expansion(root: Node, limits: Limits | None = None) -> None:
    """Refuse alias graphs that expand past the node budget or the depth budget, or that contain
    themselves. Iterative, with sizes and depths memoised per node: linear in the distinct nodes."""
    limits = limits or current()
    sizes: dict[int, tuple[int, int]] = {}  # id -> (expanded nodes, expanded depth)
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            total, deepest = 1, 0
            for child in _children(node):
                size, depth = sizes[id(child)]
                total += size
                deepest = max(deepest, depth)
            deepest += 1
            if total > limits.max_aliases:
                raise LimitError(f"YAML aliases expand to more than {limits.max_aliases:,} nodes, merge keys included "
                                 "(a 'billion laughs' document?) (limit max-aliases); not read", node.start_mark, node)
            if deepest > limits.max_depth:
                raise LimitError(f"YAML aliases nest deeper than {limits.max_depth} levels once expanded "
                                 "(limit max-depth); not read", node.start_mark, node)
            sizes[key] = (total, deepest)
            continue
        if key in sizes:
            continue
        if isinstance(node, ScalarNode):
            sizes[key] = (1, 1)
            continue
        if key in on_path:
            raise LimitError("recursive YAML alias: a node contains itself; not read", node.start_mark, node)
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            child_key = id(child)
            if child_key in on_path:
                raise LimitError("recursive YAML alias: a node contains itself; not read", child.start_mark, child)
            if child_key not in sizes:
                stack.append((child, False))


def _children(node: Node) -> Iterator[Node]:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            yield key
            yield value
    elif isinstance(node, SequenceNode):
        yield from node.value


def may_have_aliases(data: bytes | str) -> bool:
    star, amp = ("*", "&") if isinstance(data, str) else (b"*", b"&")
    return star in data and amp in data


# --- composing ---------------------------------------------------------------------------------

def _loader_class():
    from kubelint_ports.loading.yaml_files.loader import ManifestLoader

    return ManifestLoader


def compose_all(data: bytes | str, *, loader=None, expand_check: bool = True) -> Iterator[Node]:
    """`yaml.compose_all` within the budgets. With `expand_check=False` the caller checks each
    document's aliases itself (to reject one document and keep the others)."""
    limits = current()
    check_text(data, limits)
    aliases = expand_check and may_have_aliases(data)
    for root in yaml.compose_all(data, Loader=loader or _loader_class()):
        if aliases and root is not None:
            check_expansion(root, limits)
        yield root


def compose(data: bytes | str, *, loader=None) -> Node | None:
    """`yaml.compose` (one document) within the budgets."""
    limits = current()
    check_text(data, limits)
    root = yaml.compose(data, Loader=loader or _loader_class())
    if root is not None and may_have_aliases(data):
        check_expansion(root, limits)
    return root
