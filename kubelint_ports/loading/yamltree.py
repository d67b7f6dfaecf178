"""Read composed YAML nodes (libyaml's C composer) without constructing Python objects.

Composing keeps every node's start and end mark, so any field can be located later. Values are
typed only where a rule reads them, with the YAML 1.1 rules Kubernetes' decoder applies
(`on`/`yes` are booleans, a quoted "80" is a string), and never through arbitrary tags.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_TAG = "tag:yaml.org,2002:"
STR, INT, BOOL, NULL, FLOAT, MERGE = (_TAG + t for t in ("str", "int", "bool", "null", "float", "merge"))
_STANDARD_TAGS = frozenset(_TAG + t for t in ("str", "int", "bool", "null", "float", "map", "seq",
                                            "merge", "timestamp", "binary", "omap", "set", "value"))


class FieldTypeError(ValueError):
    """A field has a type Kubernetes would reject; carries the offending node for its position."""

    def __init__(self, node: Node, message: str):
        super().__init__(message)
        self.node = node


def check_tag(node: Node) -> None:
    if node.tag not in _STANDARD_TAGS:
        raise FieldTypeError(node, f"unsupported YAML tag {node.tag!r}: Kubernetes manifests use plain YAML")


def pairs(mapping: MappingNode) -> Iterator[tuple[ScalarNode, Node]]:
    """Key/value pairs with `<<` merge keys applied the way YAML 1.1 (and Kubernetes) does."""
    merged: list[Node] = []
    for key, value in mapping.value:
        if key.tag == MERGE:
            merged.append(value)
        else:
            yield key, value
    for source in merged:
        sources = source.value if isinstance(source, SequenceNode) else [source]
        for one in sources:
            if isinstance(one, MappingNode):
                yield from pairs(one)


def child(mapping: Node | None, key: str) -> tuple[ScalarNode, Node] | None:
    """The (key node, value node) pair for `key`, the last one winning as in the API decoder."""
    if not isinstance(mapping, MappingNode):
        return None
    found = None
    for key_node, value in mapping.value:
        if key_node.tag == MERGE:
            continue
        if isinstance(key_node, ScalarNode) and key_node.value == key:
            found = (key_node, value)
    if found is None and any(k.tag == MERGE for k, _ in mapping.value):
        for key_node, value in pairs(mapping):
            if isinstance(key_node, ScalarNode) and key_node.value == key:
                return key_node, value
    return found


def get(mapping: Node | None, key: str) -> Node | None:
    pair = child(mapping, key)
    if pair is None:
        return None
    value = pair[1]
    if isinstance(value, ScalarNode) and value.tag == NULL:
        return None
    return value


def items(node: Node | None, what: str) -> list[Node]:
    """The items of a sequence field; absent or null is empty, anything else a type error."""
    if node is None or (isinstance(node, ScalarNode) and node.tag == NULL):
        return []
    if not isinstance(node, SequenceNode):
        raise FieldTypeError(node, f"{what} must be a list, not {describe(node)}")
    return node.value


def mapping(node: Node | None, what: str) -> MappingNode | None:
    if node is None or (isinstance(node, ScalarNode) and node.tag == NULL):
        return None
    if not isinstance(node, MappingNode):
        raise FieldTypeError(node, f"{what} must be a mapping, not {describe(node)}")
    return node


def describe(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    kind = {STR: "string", INT: "integer", BOOL: "boolean", NULL: "null", FLOAT: "number"}.get(node.tag, "value")
    return f"the {kind} {node.value!r}"


_INT_FORMS = re.compile(r"[-+]?(0b[01_]+|0x[0-9a-fA-F_]+|0[0-7_]*|[1-9][0-9_]*)")


def parse_int(text: str) -> int | None:
    """YAML 1.1 integer forms (sexagesimal excluded: no port is written that way)."""
    if not _INT_FORMS.fullmatch(text):
        return None
    sign = -1 if text[0] == "-" else 1
    digits = text.lstrip("+-").replace("_", "")
    if digits.startswith("0b"):
        return sign * int(digits[2:], 2)
    if digits.startswith("0x"):
        return sign * int(digits[2:], 16)
    if len(digits) > 1 and digits.startswith("0"):
        return sign * int(digits[1:], 8)
    return sign * int(digits)


def as_int(node: Node) -> int:
    """An integer field; anything else (a quoted "80", 80.5, true) is rejected by the API."""
    if isinstance(node, ScalarNode) and node.tag == INT:
        value = parse_int(node.value)
        if value is not None:
            return value
    check_tag(node)
    raise FieldTypeError(node, f"expected an integer, found {describe(node)}")


_TRUE = frozenset(("true", "yes", "on", "y"))
_FALSE = frozenset(("false", "no", "off", "n"))


def as_bool(node: Node | None, default: bool = False) -> bool:
    if node is None or (isinstance(node, ScalarNode) and node.tag == NULL):
        return default
    if isinstance(node, ScalarNode) and node.tag == BOOL:
        lowered = node.value.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    check_tag(node)
    raise FieldTypeError(node, f"expected true or false, found {describe(node)}")


def as_str(node: Node | None, default: str = "") -> str:
    """A scalar as text, whatever its implicit type (labels and names are strings to the API)."""
    if node is None or (isinstance(node, ScalarNode) and node.tag == NULL):
        return default
    if isinstance(node, ScalarNode):
        check_tag(node)
        return node.value
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
        return None if node.tag == NULL else node.value
    if isinstance(node, SequenceNode):
        return [to_plain(item, budget) for item in node.value]
    return {key.value if isinstance(key, ScalarNode) else str(key.value): to_plain(value, budget)
            for key, value in pairs(node)}


_SEGMENT = re.compile(r'\.?(?:"([^"]*)"|\[(\d+)\]|([^.\["]+))')


def parse_field_path(path: str) -> list[str | int]:
    """`spec.containers[0].ports[1].hostPort` or `nodeSelector."kubernetes.io/hostname"`."""
    segments: list[str | int] = []
    for quoted, index, plain in _SEGMENT.findall(path):
        if index:
            segments.append(int(index))
        else:
            segments.append(quoted or plain)
    return segments


def resolve(root: Node, path: str) -> tuple[Node | None, Node]:
    """The key node (None for list items) and value node at `path`, or the deepest ancestor."""
    key_node: Node | None = None
    node = root
    for segment in parse_field_path(path):
        if isinstance(segment, int):
            if isinstance(node, SequenceNode) and segment < len(node.value):
                key_node, node = None, node.value[segment]
                continue
            break
        pair = child(node, segment)
        if pair is None:
            break
        key_node, node = pair
    return key_node, node
