"""`record`: a dataclass made cheaply.

`@record(frozen=True, slots=True, order=True)` gives the class `dataclasses.dataclass` gives
(fields, `replace`, `asdict`, pickling, the same errors), without compiling its methods when the
class is defined: every stage defines records, and `lint` on one small file (what every
pre-commit run pays) spent a third of its start-up compiling dataclass methods it never called.
`tests/test_records.py` holds the two equal under every option.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from typing import Any


def record(cls=None, /, *, eq: bool = True, order: bool = False, frozen: bool = False, slots: bool = False):
    """`dataclasses.dataclass` for the records every stage defines, made cheap to define.

    The standard decorator compiles each method from generated source when the class is created
    (six compilations for a frozen class, ~0.4 ms each: most of what a `lint` of one small file
    spent importing). A record is a real dataclass (`dataclasses.fields`, `replace`, `asdict` and
    `is_dataclass` work on it, and `field(...)` declares its fields), with the `__init__`,
    `__repr__`, `__eq__`, `__hash__`, ordering, frozenness and pickling that
    `dataclass(eq=, order=, frozen=, slots=)` gives (tests/test_records.py compares them). Its
    methods start generic, reading the fields through one `operator.attrgetter`; a method called
    more than `COMPILE_AFTER` times compiles the source dataclass would have generated and takes
    its place, so a record made or compared by the million costs what a dataclass costs."""

    def wrap(cls):
        return _make_record(cls, eq, order, frozen, slots)

    return wrap if cls is None else wrap(cls)


# Calls of a record's generic method before it compiles its own: most records are made a few
# times per run (options, the report), and compiling one method costs what ~60 generic calls
# cost more than compiled ones.
COMPILE_AFTER = 64
ORDERING = {"__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">="}


def _make_record(cls, eq: bool, order: bool, frozen: bool, slots: bool):
    own = dict(cls.__dict__)  # what the class body defines itself wins, as with dataclass
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if not own.get("__doc__"):
        cls.__doc__ = cls.__name__  # dataclass would spell out the signature (inspect: costly)
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=slots)
    fields = dataclasses.fields(cls)
    if "__init__" not in own:
        _check_field_order(cls, fields)
        cls.__init__ = _lazy_init(cls, fields, frozen)
    if "__repr__" not in own:
        cls.__repr__ = _repr_of(tuple(f.name for f in fields if f.repr))
    compared = tuple(f.name for f in fields if f.compare)
    if eq and "__eq__" not in own:
        cls.__eq__ = _comparison(cls, "__eq__", "==", compared)
    if order:
        for name, operator in ORDERING.items():
            if name in own:
                raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}. "
                                "Consider using functools.total_ordering")
            setattr(cls, name, _comparison(cls, name, operator, compared))
    if eq and not explicit_hash:  # dataclass's rule: frozen and compared -> hashed by value, else unhashable
        cls.__hash__ = _hash(cls, tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))) \
            if frozen else None
    if frozen:
        names = frozenset(f.name for f in fields)
        for name in ("__setattr__", "__delattr__"):
            if name in own:
                raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
        cls.__setattr__, cls.__delattr__ = _frozen_setattr(cls, names), _frozen_delattr(cls, names)
        if slots:  # pickling sets the fields back through object.__setattr__, as dataclass does
            cls.__getstate__, cls.__setstate__ = _frozen_state(tuple(f.name for f in fields))
    return cls


def _values_of(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    """The fields' values as a tuple, as the generated methods compare and hash them."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        single = attrgetter(names[0])
        return lambda self: (single(self),)
    return lambda self: ()


def _fields_tuple(owner: str, names: tuple[str, ...]) -> str:
    return "(" + "".join(f"{owner}.{name}," for name in names) + ")"


def _compile(cls, name: str, source: str, namespace: dict[str, Any]):
    """A method of `cls` compiled from `source` (the text dataclass would generate)."""
    exec(compile(source, f"<record {cls.__qualname__}>", "exec"), namespace)  # noqa: S102 (our own source)
    method = namespace[name]
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    return method


def _until_hot(cls, name: str, generic, source: str):
    """`generic` for the first COMPILE_AFTER calls, then the method compiled from `source`."""
    calls = 0

    def method(self, *args):
        nonlocal calls
        calls += 1
        if calls > COMPILE_AFTER:
            compiled = _compile(cls, name, source, {})
            setattr(cls, name, compiled)
            return compiled(self, *args)
        return generic(self, *args)

    method.__name__ = name
    return method


def _comparison(cls, name: str, operator: str, names: tuple[str, ...]):
    """`__eq__` or an ordering method as dataclass writes it: the compared fields' tuples, for two
    instances of the same class only."""
    values = _values_of(names)
    generic = {
        "==": lambda self, other: values(self) == values(other),
        "<": lambda self, other: values(self) < values(other),
        "<=": lambda self, other: values(self) <= values(other),
        ">": lambda self, other: values(self) > values(other),
        ">=": lambda self, other: values(self) >= values(other),
    }[operator]

    def compare(self, other):
        if other.__class__ is self.__class__:
            return generic(self, other)
        return NotImplemented

    return _until_hot(cls, name, compare, (
        f"def {name}(self, other):\n"
        f"  if other.__class__ is self.__class__:\n"
        f"    return {_fields_tuple('self', names)} {operator} {_fields_tuple('other', names)}\n"
        f"  return NotImplemented\n"))


def _hash(cls, names: tuple[str, ...]):
    values = _values_of(names)
    return _until_hot(cls, "__hash__", lambda self: hash(values(self)),
                      f"def __hash__(self):\n  return hash({_fields_tuple('self', names)})\n")


def _repr_of(names: tuple[str, ...]):
    import _thread

    running: set[tuple[int, int]] = set()

    def __repr__(self) -> str:
        key = id(self), _thread.get_ident()
        if key in running:  # a record that holds itself (reprlib.recursive_repr, as dataclass)
            return "..."
        running.add(key)
        try:
            shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
            return f"{self.__class__.__qualname__}({shown})"
        finally:
            running.discard(key)

    return __repr__


def _frozen_setattr(cls, names: frozenset[str]):
    def __setattr__(self, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _frozen_delattr(cls, names: frozenset[str]):
    def __delattr__(self, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__


def _frozen_state(names: tuple[str, ...]):
    values = _values_of(names)

    def __getstate__(self) -> list:
        return list(values(self))

    def __setstate__(self, state) -> None:
        for name, value in zip(names, state):
            object.__setattr__(self, name, value)

    return __getstate__, __setstate__


def _check_field_order(cls, fields) -> None:
    """What dataclass refuses when it builds `__init__`: a field without a default after one with."""
    seen_default = False
    for spec in fields:
        if not spec.init:
            continue
        has_default = spec.default is not dataclasses.MISSING or spec.default_factory is not dataclasses.MISSING
        if seen_default and not has_default:
            raise TypeError(f"non-default argument {spec.name!r} follows default argument")
        seen_default = seen_default or has_default


class _Factory:
    """The default of a parameter whose field has a default_factory (dataclass's `<factory>`)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _lazy_init(cls, fields, frozen: bool):
    """An `__init__` that binds its arguments itself (the generic one) for the record's first
    instances, then compiles the one dataclass would generate and puts it in its place. A call the
    generic one cannot bind (a missing or unexpected argument) goes to the compiled one, which
    raises Python's own TypeError."""
    names = tuple(spec.name for spec in fields if spec.init)
    position = {name: index for index, name in enumerate(names)}
    defaults = {spec.name: spec.default for spec in fields if spec.default is not dataclasses.MISSING}
    factories = {spec.name: spec.default_factory for spec in fields
                 if spec.default_factory is not dataclasses.MISSING}
    later = tuple(spec.name for spec in fields if not spec.init and (spec.name in defaults or spec.name in factories))
    assign = object.__setattr__ if frozen else setattr
    post_init = hasattr(cls, "__post_init__")
    calls = 0

    def compiled(self, *args: Any, **kwargs: Any) -> None:
        init = _compile_init(cls, fields, frozen)
        cls.__init__ = init
        init(self, *args, **kwargs)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        given = len(args)
        if calls > COMPILE_AFTER or given > len(names) or any(position.get(key, -1) < given for key in kwargs):
            return compiled(self, *args, **kwargs)
        values = []
        for index, name in enumerate(names):
            if index < given:
                values.append(args[index])
            elif name in kwargs:
                values.append(kwargs[name])
            elif name in factories:
                values.append(factories[name]())
            elif name in defaults:
                values.append(defaults[name])
            else:
                return compiled(self, *args, **kwargs)  # a required argument is missing
        for name, value in zip(names, values):
            assign(self, name, value)
        for name in later:
            assign(self, name, factories[name]() if name in factories else defaults[name])
        if post_init:
            self.__post_init__()

    return __init__


def _compile_init(cls, fields, frozen: bool):
    names: dict[str, Any] = {"_FACTORY": _FACTORY, "_object": object}
    parameters, body = ["self"], []
    for number, spec in enumerate(fields):
        default, factory = f"_default_{number}", f"_factory_{number}"
        if spec.default is not dataclasses.MISSING:
            names[default] = spec.default
        if spec.default_factory is not dataclasses.MISSING:
            names[factory] = spec.default_factory
        if spec.init:
            if spec.default_factory is not dataclasses.MISSING:
                parameters.append(f"{spec.name}=_FACTORY")
                value = f"{factory}() if {spec.name} is _FACTORY else {spec.name}"
            else:
                parameters.append(spec.name if spec.default is dataclasses.MISSING else f"{spec.name}={default}")
                value = spec.name
        elif spec.default_factory is not dataclasses.MISSING:
            value = f"{factory}()"
        elif spec.default is not dataclasses.MISSING:
            value = default
        else:
            continue
        body.append(f"  _object.__setattr__(self, {spec.name!r}, {value})" if frozen else
                    f"  self.{spec.name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("  self.__post_init__()")
    source = f"def __init__({', '.join(parameters)}):\n" + ("\n".join(body) or "  pass") + "\n"
    return _compile(cls, "__init__", source, names)
