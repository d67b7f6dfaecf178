"""What loading and the model's reader made of one file, as JSON data and back: the file cache's
format (`loading.file_cache`). Data, never code: no pickle, no marshal, nothing that a stored
entry could make run.

An encoded value is JSON: None, booleans, numbers, strings and lists stand for themselves; every
JSON object is a tag of one key: `{"o": n}` the n-th record of the entry's object table (shared
records stay shared: a workload and the list of documents name the same `Document`), `{"t": [...]}`
a tuple, `{"d": [k, v, ...]}` a dict, `{"s": [...]}`/`{"f": [...]}` a set/frozenset, `{"b": "..."}`
bytes (base64), `{"e": [type, name]}` an enum member, `{"n": [type, [...]]}` a named tuple,
`{"i": [type, text]}` an address or network of `ipaddress`, `{"k": n}` the n-th value the caller
names `known` (the reader's custom kinds, which the entry's key holds: read back as this run's own
object). The object table holds `[type, [field values]]` per record, `type` an index into the
entry's table of types, each `["module:qualname", [field names]]`.

A type is what the pickling of worker processes (`loading.pool`) would name too, and no more: a
dataclass, an enum or a named tuple defined in this package (its module imported by name only if
it lies under `kubelint_ports`), or one of `ipaddress`'s four classes. Its fields must be the
class's fields exactly (a foreign version of the class is refused). A record is made as pickling
makes one, `object.__new__` and its fields set, never through a method of the entry's choosing.
Anything else, or any doubt, raises `CodecError`: the caller then reads the file itself.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import importlib
import ipaddress
import json
import re
import sys
from typing import Any

TRANSIENT = frozenset(("_root", "_held"))  # a document's tree, a source's held bytes: never stored
_IP_TYPES = {f"ipaddress:{cls.__name__}": cls for cls in (
    ipaddress.IPv4Address, ipaddress.IPv6Address, ipaddress.IPv4Network, ipaddress.IPv6Network)}
_TYPE_NAME = re.compile(r"kubelint_ports(?:\.[a-z_][a-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_UNSET = {"u": 0}  # a slot never set
_PLAIN = frozenset((type(None), str, int, bool, float))  # JSON's own: stored as themselves
# The kinds stored as records (`{"o": n}`), found so by `Encoder.encode`'s checks in order: a kind
# passes or fails them whatever its value, so the first decision stands for the run.
_RECORD_KINDS: set[type] = set()


class CodecError(ValueError):
    """A value this format does not hold, or an entry that is not one."""


def _state_names(cls: type) -> tuple[str, ...] | None:
    """The attributes a record of `cls` carries: its dataclass fields (slots or not), or the slots
    of a small class of this package made of slots alone (`placement.FrozenMap`); None for any
    other class."""
    if dataclasses.is_dataclass(cls):
        return tuple(field.name for field in dataclasses.fields(cls))
    names: list[str] = []
    for klass in cls.__mro__:
        if klass is object:
            continue
        slots = klass.__dict__.get("__slots__")
        if slots is None:
            return None  # a class with a __dict__: not a plain record
        slots = (slots,) if isinstance(slots, str) else tuple(slots)
        if not klass.__module__.startswith(("kubelint_ports", "collections.abc", "typing")):
            return None
        names += [name for name in slots if name not in ("__weakref__", "__dict__") and name not in names]
    return tuple(names)


_NAMES: dict[type, tuple[str, ...]] = {}


def state_names(cls: type) -> tuple[str, ...] | None:
    if cls in _NAMES:
        return _NAMES[cls]
    names = _NAMES[cls] = _state_names(cls) if cls.__module__.startswith("kubelint_ports") else None
    return names


class Encoder:
    """One entry's values, with its tables of types and records."""

    def __init__(self, canonical: bool = False, known: tuple = ()):
        self.canonical = canonical  # sets in a stable order (a key, compared across processes)
        self.known = {id(value): index for index, value in enumerate(known)}  # stored as {"k": index}
        self.types: list[list] = []
        self.type_index: dict[type, int] = {}
        self.records: list[int] = []  # the type of each record
        self.objects: list[list] = []  # the field values of each record
        self.object_index: dict[int, int] = {}
        self.kept: list[object] = []  # alive while encoding: ids stay unique

    def type_of(self, cls: type, names: tuple[str, ...] | None = None) -> int:
        index = self.type_index.get(cls)
        if index is None:
            module = cls.__module__
            name = f"{module}:{cls.__qualname__}"
            if name not in _IP_TYPES and not _TYPE_NAME.fullmatch(name):
                raise CodecError(f"a {name} is not stored")
            index = self.type_index[cls] = len(self.types)
            self.types.append([name, list(names) if names is not None else []])
        return index

    def encode(self, value: Any) -> Any:
        kind = type(value)
        if kind in _PLAIN:
            return value
        if self.known and id(value) in self.known:
            return {"k": self.known[id(value)]}
        if kind in _RECORD_KINDS:  # what a kind is depends on the kind alone: decided once below
            return {"o": self.record(value, kind)}
        if kind is list:
            return [item if type(item) in _PLAIN else self.encode(item) for item in value]
        if kind is tuple:
            return {"t": [item if type(item) in _PLAIN else self.encode(item) for item in value]}
        if kind is dict:
            flat = []
            for key, item in value.items():
                flat.append(key if type(key) in _PLAIN else self.encode(key))
                flat.append(item if type(item) in _PLAIN else self.encode(item))
            return {"d": flat}
        if kind is set or kind is frozenset:
            items = [self.encode(item) for item in value]
            if self.canonical:
                items.sort(key=lambda item: json.dumps(item, sort_keys=True))
            return {"s" if kind is set else "f": items}
        if kind is bytes:
            return {"b": base64.b64encode(value).decode("ascii")}
        if isinstance(value, enum.Enum):
            return {"e": [self.type_of(kind), value.name]}
        if f"ipaddress:{kind.__name__}" in _IP_TYPES and kind.__module__ == "ipaddress":
            return {"i": [self.type_of(kind), str(value)]}
        if isinstance(value, tuple) and hasattr(kind, "_fields"):
            return {"n": [self.type_of(kind), [self.encode(item) for item in value]]}
        if state_names(kind) is not None:
            _RECORD_KINDS.add(kind)
            return {"o": self.record(value, kind)}
        raise CodecError(f"a {kind.__module__}.{kind.__qualname__} is not stored")

    def record(self, value: Any, kind: type) -> int:
        index = self.object_index.get(id(value))
        if index is not None:
            return index
        names = state_names(kind)
        type_index = self.type_of(kind, names)
        index = self.object_index[id(value)] = len(self.objects)
        self.kept.append(value)
        self.records.append(type_index)
        values: list = []
        self.objects.append(values)
        append, plain, encode = values.append, _PLAIN, self.encode
        for name in names:
            if name in TRANSIENT:
                append(None)
                continue
            item = getattr(value, name, _UNSET)  # a slot never set
            append(item if type(item) in plain else encode(item) if item is not _UNSET else _UNSET)
        return index


def _resolve(name: str, names: list) -> tuple[type, str, tuple[str, ...] | None]:
    """(class, what it is, its field names) for a type of an entry; CodecError when not allowed."""
    if name in _IP_TYPES:
        return _IP_TYPES[name], "ip", None
    if not isinstance(name, str) or not _TYPE_NAME.fullmatch(name):
        raise CodecError(f"type {name!r} is not allowed")
    module_name, _, qualname = name.partition(":")
    module = sys.modules.get(module_name)
    if module is None:
        try:  # only this package's own modules, by a name the pattern allowed
            module = importlib.import_module(module_name)
        except ImportError:
            raise CodecError(f"no module {module_name}") from None
    cls: Any = module
    for part in qualname.split("."):
        cls = getattr(cls, part, None)
    if not isinstance(cls, type) or not cls.__module__.startswith("kubelint_ports"):
        raise CodecError(f"type {name!r} is not allowed")
    if issubclass(cls, enum.Enum):
        return cls, "enum", None
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return cls, "named", None
    expected = state_names(cls)
    if expected is not None:
        if tuple(names) != expected:
            raise CodecError(f"type {name!r} has other fields here")
        return cls, "record", expected
    raise CodecError(f"type {name!r} is not allowed")


_RESOLVED: dict[tuple[str, tuple[str, ...]], tuple] = {}  # a type allowed once is allowed for the run
_UNSET_MARK = object()


class Decoder:
    """The values of one entry: its types resolved and its records made (`object.__new__`, as
    pickling makes them) before its body is parsed; `loads` parses the body with a hook that
    turns each tag into its value as the parser meets it, then fills each record's fields."""

    def __init__(self, types: Any, records: Any, strings: dict | None = None, known: tuple = ()):
        if type(types) is not list or type(records) is not list:
            raise CodecError("no tables")
        self.types = []
        for entry in types:
            if not (type(entry) is list and len(entry) == 2 and type(entry[0]) is str and type(entry[1]) is list):
                raise CodecError("a type of the wrong shape")
            try:
                key = (entry[0], tuple(entry[1]))
                resolved = _RESOLVED.get(key)
            except TypeError:  # a list or dict among the names
                raise CodecError("a type of the wrong shape") from None
            if resolved is None:
                if not all(type(name) is str for name in entry[1]):
                    raise CodecError("a type of the wrong shape")
                resolved = _RESOLVED[key] = _resolve(entry[0], entry[1])
            self.types.append(resolved)
        made = []
        count = len(self.types)
        for index in records:
            if type(index) is not int or not 0 <= index < count or self.types[index][1] != "record":
                raise CodecError("a record of the wrong shape")
            made.append(object.__new__(self.types[index][0]))
        self.records, self.made = records, made
        self.strings = strings if strings is not None else {}  # equal strings shared, as one read shares them
        self.known = known  # what {"k": index} stands for: the Encoder's `known`, this run's

    def loads(self, text: str | bytes) -> Any:
        """The body `[value, records' fields]`: the value, its records filled."""
        body = json.loads(text, object_hook=self._hook)
        if not (type(body) is list and len(body) == 2 and type(body[1]) is list
                and len(body[1]) == len(self.made)):
            raise CodecError("a body of the wrong shape")
        setter, strings, types, unset = object.__setattr__, self.strings, self.types, _UNSET_MARK
        for made, type_index, values in zip(self.made, self.records, body[1]):
            names = types[type_index][2]
            if type(values) is not list or len(values) != len(names):
                raise CodecError("a record of the wrong shape")
            for name, value in zip(names, values):
                if value is unset:
                    continue
                if name in TRANSIENT:
                    value = None
                elif type(value) is str:
                    value = strings.setdefault(value, value)
                setter(made, name, value)
        return body[0]

    def _hook(self, tagged: dict) -> Any:
        if len(tagged) != 1:
            raise CodecError("a value of the wrong shape")
        (tag, body), = tagged.items()
        kind = type(body)
        try:
            if tag == "o" and kind is int and 0 <= body < len(self.made):
                return self.made[body]
            if tag == "t" and kind is list:
                strings = self.strings
                return tuple([strings.setdefault(item, item) if type(item) is str else item for item in body])
            if tag == "d" and kind is list and not len(body) % 2:
                strings = self.strings
                body = [strings.setdefault(item, item) if type(item) is str else item for item in body]
                return dict(zip(body[::2], body[1::2]))
            if tag == "s" and kind is list:
                return set(body)
            if tag == "f" and kind is list:
                return frozenset(body)
            if tag == "b" and kind is str:
                return base64.b64decode(body.encode("ascii"), validate=True)
            if tag == "u" and body == 0:
                return _UNSET_MARK
            if tag == "k" and kind is int and 0 <= body < len(self.known):
                return self.known[body]
            if tag in ("e", "i", "n") and kind is list and len(body) == 2:
                index = body[0]
                if type(index) is not int or not 0 <= index < len(self.types):
                    raise CodecError("no such type")
                cls, what, _ = self.types[index]
                if tag == "e" and what == "enum" and type(body[1]) is str:
                    return cls[body[1]]
                if tag == "i" and what == "ip" and type(body[1]) is str:
                    return cls(body[1])
                if tag == "n" and what == "named" and type(body[1]) is list:
                    return cls(*body[1])
        except (TypeError, AttributeError, KeyError, ValueError) as error:  # a record hashed before it is filled
            raise CodecError(f"a value tagged {tag!r} cannot be made: {type(error).__name__}") from None
        raise CodecError(f"a value tagged {tag!r} of the wrong shape")


def dumps_body(encoder: Encoder, value: Any) -> str:
    """The body of an entry: `value` (already encoded by `encoder`) and its records' fields."""
    return json.dumps([value, encoder.objects], separators=(",", ":"), ensure_ascii=False, check_circular=False)
