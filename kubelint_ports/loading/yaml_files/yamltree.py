"""Read composed YAML nodes (libyaml's C composer) without constructing Python objects.

Composing keeps every node's start and end mark, so any field can be located later. Values are
typed only where a rule reads them, with the YAML 1.1 rules Kubernetes' decoder applies
(`on`/`yes` are booleans, a quoted "80" is a string), and never through arbitrary tags.

Text read into the model is interned: a cluster repeats a few thousand label keys and values,
kinds and namespaces hundreds of thousands of times (10k corpus: 337k strings, 18.7k distinct).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from sys import intern

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_TAG = "tag:yaml.org,2002:"
STR, INT, BOOL, NULL, FLOAT, MERGE, SEQ, MAP = (
    _TAG + t for t in ("str", "int", "bool", "null", "float", "merge", "seq", "map"))
# The YAML spec's non-specific tag of a plain scalar: the loader leaves plain scalars untyped
# (typing every scalar costs more than composing it) and the readers below type what they read.
PLAIN = "?"
_STANDARD_TAGS = frozenset((PLAIN, *(_TAG + t for t in (
    "str", "int", "bool", "null", "float", "map", "seq", "merge", "timestamp", "binary", "omap", "set", "value"))))

# YAML 1.1 as Kubernetes' decoder (go-yaml v2) reads it.
_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_TRUE = frozenset(("true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"))
_FALSE = frozenset(("false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"))
_INT_FORMS = re.compile(r"[-+]?(0b[01_]+|0x[0-9a-fA-F_]+|0[0-7_]*|[1-9][0-9_]*)")
_FLOAT_FORMS = re.compile(r"[-+]?([0-9][0-9_]*)?\.[0-9.]*([eE][-+][0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")


class FieldTypeError(ValueError):
    """A field has a type Kubernetes would reject; carries the offending node for its position."""

    def __init__(self, node: Node, message: str):
        super().__init__(message)
        self.node = node


def check_tag(node: Node) -> None:
    if node.tag not in _STANDARD_TAGS:
        raise FieldTypeError(node, f"unsupported YAML tag {node.tag!r}: Kubernetes manifests use plain YAML")


def is_null(node: Node | None) -> bool:
    if node is None:
        return True
    if not isinstance(node, ScalarNode):
        return False
    return node.tag == NULL or (node.tag == PLAIN and node.value in _NULLS)


def is_merge_key(node: Node) -> bool:
    return node.tag == MERGE or (node.tag == PLAIN and node.value == "<<")


def scalar_type(node: ScalarNode) -> str:
    """The implicit YAML 1.1 type of a scalar: the tag a typing resolver would have given it."""
    if node.tag != PLAIN:
        return node.tag
    value = node.value
    if value in _NULLS:
        return NULL
    if value in _TRUE or value in _FALSE:
        return BOOL
    if _INT_FORMS.fullmatch(value):
        return INT
    if _FLOAT_FORMS.fullmatch(value):
        return FLOAT
    return STR


def pairs(mapping: MappingNode) -> Iterator[tuple[ScalarNode, Node]]:
    """Key/value pairs with `<<` merge keys applied the way YAML 1.1 (and Kubernetes) does."""
    merged: list[Node] = []
    for key, value in mapping.value:
        if is_merge_key(key):
            merged.append(value)
        else:
            yield key, value
    for source in merged:
        sources = source.value if isinstance(source, SequenceNode) else [source]
        for one in sources:
            if isinstance(one, MappingNode):
                yield from pairs(one)


def child(mapping: Node | None, key: str) -> tuple[ScalarNode, Node] | None:
    """The (key node, value node) pair for `key`; the last one wins, as in the API decoder.

    Each mapping is indexed on first use (the model reads several keys of the same mappings)."""
    try:
        index = mapping._index
    except AttributeError:
        if not isinstance(mapping, MappingNode):
            return None
        index = _indexed(mapping)
    return index.get(key)


def _indexed(mapping: MappingNode) -> dict[str, tuple[ScalarNode, Node]]:
    """One pass in C over the pairs; the written-out loop only for merge keys or non-scalar keys.
    (A key tagged `!!merge` that is not spelled `<<` is read as an ordinary key.)"""
    try:
        index = {pair[0].value: pair for pair in mapping.value}
        if "<<" in index:
            raise TypeError
    except TypeError:
        index = {}
        has_merge = False
        for key_node, value in mapping.value:
            name = key_node.value
            if not isinstance(name, str):
                continue
            if is_merge_key(key_node):
                has_merge = True
            else:
                index[name] = (key_node, value)
        if has_merge:  # keys written in the mapping win over merged ones
            written = len(index)
            for name, pair in _first_pairs(mapping).items():
                index.setdefault(name, pair)
            if len(index) > written:  # the keys only a merge key brings in (`written_at` steps over none)
                mapping._merged = frozenset(list(index)[written:])
    mapping._index = index
    return index


def _first_pairs(mapping: MappingNode) -> dict[str, tuple[ScalarNode, Node]]:
    """Each text key's first (key, value) in `pairs(mapping)` order: its written pairs, then each
    merge source's in turn. Worked out once per mapping a merge key reaches, and kept on it, so
    that nested merge keys (`<<: [*a, *a, ...]` of `<<: [*b, *b, ...]`) cost what is written, not
    what they expand to; a merge key that reaches its own mapping again adds nothing."""
    pending: set[int] = set()
    stack: list[tuple[MappingNode, bool]] = [(mapping, False)]
    while stack:
        node, sources_done = stack.pop()
        if hasattr(node, "_first"):
            continue
        sources = _merge_sources(node)
        if not sources_done:
            pending.add(id(node))
            stack.append((node, True))
            stack.extend((one, False) for one in sources if id(one) not in pending and not hasattr(one, "_first"))
            continue
        first: dict[str, tuple[ScalarNode, Node]] = {}
        for key, value in node.value:
            if isinstance(key.value, str) and not is_merge_key(key):
                first.setdefault(key.value, (key, value))
        for one in sources:
            for name, pair in getattr(one, "_first", {}).items():
                first.setdefault(name, pair)
        node._first = first
    return mapping._first


def _merge_sources(mapping: MappingNode) -> list[MappingNode]:
    """The mappings `<<` merge keys of `mapping` name, in order."""
    sources: list[MappingNode] = []
    for key, value in mapping.value:
        if is_merge_key(key):
            for one in value.value if isinstance(value, SequenceNode) else [value]:
                if isinstance(one, MappingNode):
                    sources.append(one)
    return sources


def get(mapping: Node | None, key: str) -> Node | None:
    try:
        pair = mapping._index.get(key)  # the model reads ~50 keys per object: the indexed case inline
    except AttributeError:
        pair = child(mapping, key)
    if pair is None:
        return None
    value = pair[1]
    if value.__class__ is ScalarNode and (value.tag == NULL or (value.tag == PLAIN and value.value in _NULLS)):
        return None
    return value


def at(root: Node | None, path: str) -> Node | None:
    """The value at a dotted path of mappings (`spec.template.spec`), or None when a step is absent."""
    node = root
    for key in path.split("."):
        node = get(node, key)
        if node is None:
            return None
    return node


def at_segments(root: Node | None, segments: list[str | int]) -> Node | None:
    """The node at parsed field-path segments (keys and list indexes), or None when a step is
    absent: mappings and sequences as they are written, no typing."""
    _, node, depth = descend(root, segments)
    return node if depth == len(segments) else None


def items(node: Node | None, what: str) -> list[Node]:
    """The items of a sequence field; absent or null is empty, anything else a type error."""
    if node.__class__ is SequenceNode:
        return node.value
    if is_null(node):
        return []
    if not isinstance(node, SequenceNode):
        raise FieldTypeError(node, f"{what} must be a list, not {describe(node)}")
    return node.value


def mapping(node: Node | None, what: str) -> MappingNode | None:
    if node.__class__ is MappingNode:
        return node
    if is_null(node):
        return None
    if not isinstance(node, MappingNode):
        raise FieldTypeError(node, f"{what} must be a mapping, not {describe(node)}")
    return node


MAX_QUOTED = 80  # characters of a value quoted in a message


def describe(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    kind = {STR: "string", INT: "integer", BOOL: "boolean", NULL: "null", FLOAT: "number"}.get(
        scalar_type(node), "value")
    return f"the {kind} {quoted(node.value)}"


def quoted(text: str) -> str:
    """`repr` of a value for a message, shortened: a message must not carry a whole file."""
    return repr(text) if len(text) <= MAX_QUOTED else repr(text[:MAX_QUOTED]) + f"... ({len(text):,} characters)"


MAX_INT_DIGITS = 64  # far past int64; longer digit strings are not read as numbers at all


def parse_int(text: str) -> int | None:
    """YAML 1.1 integer forms (sexagesimal excluded: no port is written that way); None for
    anything else, including digit strings too long to be a number any API field holds."""
    if len(text) > MAX_INT_DIGITS or not _INT_FORMS.fullmatch(text):
        return None
    sign = -1 if text[0] == "-" else 1
    digits = text.lstrip("+-").replace("_", "")
    try:
        if digits.startswith("0b"):
            return sign * int(digits[2:], 2)
        if digits.startswith("0x"):
            return sign * int(digits[2:], 16)
        if len(digits) > 1 and digits.startswith("0"):
            return sign * int(digits[1:], 8)
        return sign * int(digits)
    except ValueError:  # `0x_`, `0b_`: the form's digits are all underscores
        return None


def as_int(node: Node) -> int:
    """An integer field; anything else (a quoted "80", 80.5, true) is rejected by the API."""
    if isinstance(node, ScalarNode) and node.tag in (PLAIN, INT):
        value = parse_int(node.value)
        if value is not None:
            return value
    check_tag(node)
    raise FieldTypeError(node, f"expected an integer, found {describe(node)}")


def as_bool(node: Node | None, default: bool = False) -> bool:
    if is_null(node):
        return default
    if isinstance(node, ScalarNode) and node.tag in (PLAIN, BOOL):
        if node.value in _TRUE:
            return True
        if node.value in _FALSE:
            return False
    check_tag(node)
    raise FieldTypeError(node, f"expected true or false, found {describe(node)}")


def as_str(node: Node | None, default: str = "") -> str:
    """A scalar as text, whatever its implicit type (labels and names are strings to the API)."""
    if node is None:
        return default
    if node.__class__ is ScalarNode:
        tag = node.tag
        if tag is STR:  # the loader's own tags: no lookup needed
            return intern(node.value)
        if tag is PLAIN:
            return default if node.value in _NULLS else intern(node.value)
    if is_null(node):
        return default
    if isinstance(node, ScalarNode):
        check_tag(node)
        return intern(node.value)
    raise FieldTypeError(node, f"expected a string, found {describe(node)}")


def to_plain(node: Node | None, budget: list[int] | None = None):
    """A subtree as plain dicts/lists/strings, for logic that wants data (placement, labels).

    Scalars stay strings (booleans and ints keep their text); the node budget stops an
    aliased subtree from expanding without bound.
    """
    if budget is None:
        budget = [100_000]
    budget[0] -= 1
    if budget[0] < 0:
        raise FieldTypeError(node, "subtree is too large (alias expansion?)")
    if node is None:
        return None
    if isinstance(node, ScalarNode):
        if node.tag is STR:  # the loader's own tag: not null
            return intern(node.value)
        return None if is_null(node) else intern(node.value)
    if isinstance(node, SequenceNode):
        return [to_plain(item, budget) for item in node.value]
    return {intern(key.value) if isinstance(key, ScalarNode) else str(key.value): to_plain(value, budget)
            for key, value in pairs(node)}


_SEGMENT = re.compile(r'\.?(?:"([^"]*)"|\[([0-9]{1,18})\]|([^.\["]+))')


def parse_field_path(path: str) -> list[str | int]:
    """`spec.containers[0].ports[1].hostPort` or `nodeSelector."kubernetes.io/hostname"`."""
    segments: list[str | int] = []
    for quoted, index, plain in _SEGMENT.findall(path):
        if index:
            segments.append(int(index))
        else:
            segments.append(quoted or plain)
    return segments


def format_field_path(segments: list[str | int]) -> str:
    """The inverse of `parse_field_path`: keys holding a dot are quoted."""
    parts = []
    for segment in segments:
        if isinstance(segment, int):
            parts.append(f"[{segment}]")
        else:
            text = f'"{segment}"' if "." in segment else segment
            parts.append(f".{text}" if parts else text)
    return "".join(parts)


def field_path_to(root: Node, target: Node) -> str | None:
    """The field path of a node inside `root` (a key node names its key), or None when not inside:
    of a node that aliases repeat, the first place it is written, in the order the text is read."""
    for node, path in _places(root):
        if node is target:
            return format_field_path(_unlinked(path))
    return None


def first_places(root: Node) -> dict[int, list[str | int]]:
    """Of each node that aliases repeat (`shared_nodes`), the path of the first place it is written,
    as `field_path_to` gives it. One walk, kept on the root."""
    try:
        return root._first_places
    except AttributeError:
        pass
    shared = shared_nodes(root)
    places: dict[int, list[str | int]] = {}
    if shared:
        for node, path in _places(root):
            if id(node) in shared and id(node) not in places:
                places[id(node)] = _unlinked(path)
    root._first_places = places
    return places


def _places(root: Node) -> Iterator[tuple[Node, tuple | None]]:
    """Each place a node is written under `root`, in the order the text is read, with its path as
    (parent path, segment) links; a key node is a place of its own (its path names its key), and
    not entered. A node is entered where it is first reached only: every later place of anything
    under an alias comes after its first one, so an alias graph of a million expanded nodes costs
    its thousand written ones."""
    entered: set[int] = set()
    stack: list[tuple[Node, bool, tuple | None]] = [(root, False, None)]  # (node, is a key, path)
    while stack:
        node, is_key, path = stack.pop()
        yield node, path
        if is_key or id(node) in entered:
            continue
        entered.add(id(node))
        if isinstance(node, MappingNode):
            for key, value in reversed(node.value):
                link = (path, key.value)
                stack.append((value, False, link))
                stack.append((key, True, link))
        elif isinstance(node, SequenceNode):
            stack.extend((item, False, (path, index)) for index, item in reversed(list(enumerate(node.value))))


def _unlinked(path: tuple | None) -> list[str | int]:
    segments: list[str | int] = []
    while path is not None:
        path, segment = path
        segments.append(segment)
    segments.reverse()
    return segments


def written_at(root: Node | None, segments: list[str | int]) -> tuple[Node | None, Node] | None:
    """The key node (None for a list item or the root) and the value node at `segments` when each
    step is written where the path says: a key of its mapping (the last of a repeated key, as the
    decoder takes it; never one a merge key brings in) or an item of its sequence. None when a step
    is absent or merged in. Follows the path only: no walk."""
    key_node: Node | None = None
    node = root
    for segment in segments:
        if isinstance(segment, int):
            if not isinstance(node, SequenceNode) or segment >= len(node.value):
                return None
            key_node, node = None, node.value[segment]
            continue
        pair = child(node, segment)
        if pair is None or segment in getattr(node, "_merged", ()):
            return None
        key_node, node = pair
    return key_node, node


def written_once(roots) -> Iterator[Node]:
    """Every node under `roots` that a value or an item reaches (keys are not entered), each once
    however many aliases repeat it: a walk of what is written, not of what aliases expand to. A
    node's children are taken after the caller has seen it, last pushed first."""
    entered: set[int] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) in entered:
            continue
        entered.add(id(node))
        yield node
        if isinstance(node, MappingNode):
            stack.extend(value for _, value in node.value)
        elif isinstance(node, SequenceNode):
            stack.extend(node.value)


def shared_nodes(root: Node) -> frozenset[int]:
    """Ids of the nodes reachable from `root` more than once (keys included): an anchor's node that
    aliases or merge keys repeat, and everything under it. An edit of one of them would change
    every place that repeats it.

    One walk that enters each node once, and marks each shared node once; kept on the root, so
    the fixes of a thousand findings in one document ask it for the price of one walk."""
    try:
        return root._shared
    except AttributeError:
        pass
    seen: set[int] = set()
    shared: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            stack.extend(children_of(node))
            continue
        marking = [node]  # reached again: it and everything under it
        while marking:
            again = marking.pop()
            if id(again) not in shared:
                shared.add(id(again))
                marking.extend(children_of(again))
    root._shared = frozenset(shared)
    return root._shared


def same_tree(old: Node | None, new: Node | None) -> bool:
    """Whether two composed trees read alike: the same kinds and tags, the same scalars, keys and
    items in the same order. Each pair of nodes is compared once, so trees that aliases repeat
    cost what is written, not what they expand to."""
    compared: set[tuple[int, int]] = set()
    stack = [(old, new)]
    while stack:
        one, other = stack.pop()
        if one is None or other is None:
            if one is not other:
                return False
            continue
        if (id(one), id(other)) in compared:
            continue
        compared.add((id(one), id(other)))
        if one.__class__ is not other.__class__ or one.tag != other.tag:
            return False
        if isinstance(one, ScalarNode):
            if one.value != other.value:
                return False
        elif len(one.value) != len(other.value):
            return False
        elif isinstance(one, MappingNode):
            for (key, value), (other_key, other_value) in zip(one.value, other.value):
                stack += ((key, other_key), (value, other_value))
        else:
            stack.extend(zip(one.value, other.value))
    return True


def children_of(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, SequenceNode):
        return node.value
    return []


def resolve(root: Node, path: str) -> tuple[Node | None, Node]:
    """The key node (None for list items) and value node at `path`, or the deepest ancestor."""
    key_node, node, _ = descend(root, parse_field_path(path))
    return key_node, node


def descend(root: Node | None, segments: list[str | int]) -> tuple[Node | None, Node | None, int]:
    """Follow field-path segments as far as they go: the key node (None for a list item or the
    root), the value node reached (`root` when no segment resolves) and how many segments resolved.
    Items are taken by index: the tree is the one the path was written for. The walkers through
    other files (`kustomize_positions.walk` through a patch, `TemplateDocument.map` through a
    template) match list items by their keys instead, as those lists hold other items."""
    key_node: Node | None = None
    node = root
    depth = 0
    for segment in segments:
        if isinstance(segment, int):
            if isinstance(node, SequenceNode) and segment < len(node.value):
                key_node, node = None, node.value[segment]
                depth += 1
                continue
            break
        pair = child(node, segment)
        if pair is None:
            break
        key_node, node = pair
        depth += 1
    return key_node, node, depth


def identity_path(root: Node, path: str) -> str:
    """`path` with each list index replaced by what names the item, so that inserting or
    reordering items keeps it: `spec.containers[0].ports[1].hostPort` becomes
    `spec.containers[web].ports[http/TCP].hostPort` (a port without a name: `[8080/TCP]`; a
    command-line flag: `[--metrics-port]`). An item with nothing to name it keeps its index."""
    parts: list[str] = []
    node: Node | None = root
    for segment in parse_field_path(path):
        if isinstance(segment, int):
            item = node.value[segment] if isinstance(node, SequenceNode) and segment < len(node.value) else None
            parts.append(f"[{item_identity(item) or segment}]")
            node = item
        else:
            parts.append(f".{segment}" if "." not in segment else f'."{segment}"')
            pair = child(node, segment)
            node = pair[1] if pair is not None else None
    return "".join(parts).lstrip(".")


def item_identity(item: Node | None) -> str:
    """A list item's name: `name` (containers, volumes, named ports), else its port number; a
    port's protocol follows it (`http/TCP`); a scalar `--flag=value` is named by its flag."""
    if isinstance(item, ScalarNode):
        text = item.value if isinstance(item.value, str) else ""
        return text.split("=", 1)[0] if text.startswith("-") else ""
    if not isinstance(item, MappingNode):
        return ""
    name = get(item, "name")
    number = next((node for node in (get(item, "containerPort"), get(item, "port")) if node is not None), None)
    label = name if isinstance(name, ScalarNode) else number if isinstance(number, ScalarNode) else None
    if label is None:
        return ""
    if number is None:
        return label.value
    protocol = get(item, "protocol")
    return f"{label.value}/{protocol.value if isinstance(protocol, ScalarNode) else 'TCP'}"
