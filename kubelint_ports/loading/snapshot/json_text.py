"""JSON dumps (`nft -j list ruleset`, `crictl pods -o json`) read within the depth budget, with the
offset of every item a reader reports about.

`json.loads` recurses in C once per nesting level: 100,000 `[` raise RecursionError (a crash of the
whole run, every node's findings lost), and on a smaller C stack they could take the process down.
So nesting is measured first, by a scan that never recurses (strings cut out at their quotes,
brackets kept with one `bytes.translate`, the running depth summed in C), and a text nested deeper
than `max-depth` (loading/budgets.py) is refused before any decoder sees it.

The document is then decoded a member and an item at a time with `JSONDecoder.raw_decode`, which
gives every item its offset in the same pass: one pass over the text, where finding each item again
by counting lines from the start was quadratic (40,000 nft objects took 53 s, now 0.9 s).
`text.LineTable` turns offsets into lines and columns.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Callable
from itertools import accumulate

from kubelint_ports.loading import budgets

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
# brackets -> +1 / -1 as signed bytes; everything else deleted
_BRACKETS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[{]}")


def depth_problem(text: str, max_depth: int | None = None) -> json.JSONDecodeError | None:
    """An error at the first bracket nested deeper than `max_depth` (the run's limit), or None."""
    max_depth = max_depth or budgets.current().max_depth
    if text.count("[") + text.count("{") <= max_depth:
        return None  # the common small file: no scan needed
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:  # escaped backslashes first, then escaped quotes: what is left delimits strings
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(data.split(b'"')[::2])  # every other piece lies outside the strings
    depths = array("b", outside.translate(_BRACKETS, _NOT_BRACKETS))
    if max(accumulate(depths), default=0) <= max_depth:
        return None
    return json.JSONDecodeError(f"nested deeper than {max_depth} levels (limit max-depth); not read", text,
                                _nth_bracket(text, list(accumulate(depths)).index(max_depth + 1)))


def _nth_bracket(text: str, index: int) -> int:
    """The offset of the `index`-th bracket outside strings. Only a refused text gets here, and the
    scan stops at the bracket, so a Python loop is affordable."""
    seen = -1
    for match in re.finditer(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', text):
        if match.group() in "[]{}":
            seen += 1
            if seen == index:
                return match.start()
    return 0


def skip(text: str, position: int) -> int:
    return _SPACE.match(text, position).end()


def value_at(text: str, position: int) -> tuple[object, int]:
    """(value, end) of the JSON value at `position`; JSONDecodeError (a ValueError) when it is not one."""
    try:
        return _DECODER.raw_decode(text, position)
    except json.JSONDecodeError:
        raise
    except ValueError:  # int() refuses more than 4,300 digits
        raise json.JSONDecodeError("a number too long to read", text, position) from None
    except RecursionError:  # past the budget's reach (max-depth raised near Python's own limit)
        raise json.JSONDecodeError("nested too deeply for the JSON decoder; not read", text, position) from None


Item = Callable[[str, int], tuple[object, int]]  # (text, offset) -> (value, end)


def object_at(text: str, position: int, arrays: Callable[[str], Item | None] = lambda key: None
              ) -> tuple[dict, dict[str, int], int]:
    """The object at `position`, member by member: (members, offset of each member's value, end).
    A key for which `arrays(key)` gives an item reader, with an array value, has that array read
    item by item: its value is then a list of (item, offset) pairs. A repeated key keeps its last
    value, as `json.loads` does."""
    if not text.startswith("{", position):
        raise json.JSONDecodeError("Expecting an object", text, position)
    members: dict = {}
    offsets: dict[str, int] = {}
    position = skip(text, position + 1)
    if text.startswith("}", position):
        return members, offsets, position + 1
    while True:
        if not text.startswith('"', position):
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, position)
        key, position = value_at(text, position)
        position = skip(text, position)
        if not text.startswith(":", position):
            raise json.JSONDecodeError("Expecting ':' delimiter", text, position)
        position = skip(text, position + 1)
        reader = arrays(key)
        if reader is not None and text.startswith("[", position):
            value, end = array_at(text, position, reader)
        else:
            value, end = value_at(text, position)
        members[key], offsets[key] = value, position
        position = skip(text, end)
        if text.startswith("}", position):
            return members, offsets, position + 1
        if not text.startswith(",", position):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, position)
        position = skip(text, position + 1)


def array_at(text: str, position: int, item: Item = value_at) -> tuple[list[tuple[object, int]], int]:
    """The array at `position` as (item, offset) pairs, each item read by `item`; and its end."""
    items: list[tuple[object, int]] = []
    position = skip(text, position + 1)
    if text.startswith("]", position):
        return items, position + 1
    while True:
        value, end = item(text, position)
        items.append((value, position))
        position = skip(text, end)
        if text.startswith("]", position):
            return items, position + 1
        if not text.startswith(",", position):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, position)
        position = skip(text, position + 1)


def document(text: str, arrays: Callable[[str], Item | None]) -> tuple[object, dict[str, int]]:
    """The whole text as one JSON value, depth first checked: (value, offsets of a top-level
    object's members, `{}` for any other value). JSONDecodeError at the first problem."""
    problem = depth_problem(text)
    if problem is not None:
        raise problem
    start = skip(text, 0)
    if text.startswith("{", start):
        value, offsets, end = object_at(text, start, arrays)
    else:
        (value, end), offsets = value_at(text, start), {}
    end = skip(text, end)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value, offsets


def object_item(text: str, position: int) -> tuple[object, int]:
    """An array item read member by member when it is an object (value: (members, offsets)), so a
    reader can place its fields; any other item as is."""
    if text.startswith("{", position):
        members, offsets, end = object_at(text, position)
        return (members, offsets), end
    return value_at(text, position)
