"""The one vocabulary every stage after the checks speaks: where, what, how bad."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import field
from operator import attrgetter
from typing import Any

STDIN_NAME = "<stdin>"
# Where a problem with the command itself is reported (a path given there that does not exist).
COMMAND_LINE = "command line"
NOT_FILES = frozenset((STDIN_NAME, COMMAND_LINE))
FINGERPRINT_VERSION = 2  # bump when what `Finding.fingerprint` hashes changes


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


class Severity(enum.IntEnum):
    """Ordered so that `severity >= threshold` decides the exit code."""

    NOTE = 1
    WARNING = 2
    ERROR = 3

    @classmethod
    def parse(cls, text: str) -> "Severity":
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (use error, warning or note)") from None

    def __str__(self) -> str:
        return self.name.lower()


@record(frozen=True, slots=True, order=True)
class Location:
    """A 1-based place in a file; `end_column` is the column after the last character."""

    path: str
    line: int
    column: int
    end_line: int = 0
    end_column: int = 0
    message: str = field(default="", compare=False)

    def __str__(self) -> str:
        if self.line < 1:
            return self.path  # the whole file (unreadable, missing) or the command line
        return f"{self.path}:{self.line}:{self.column}"

    @property
    def is_file(self) -> bool:
        """False for standard input and the command line: nothing to open or annotate."""
        return self.path not in NOT_FILES


@record(frozen=True, slots=True, order=True)
class ObjectRef:
    api_version: str
    kind: str
    namespace: str  # "" when the manifest leaves it to the client's current namespace
    name: str

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.namespace}/{self.kind}/{self.name}"
        return f"{self.kind}/{self.name}"


@record(frozen=True, slots=True)
class Edit:
    """One replacement in a file's text: the characters from `start` to `end` (offsets in the
    decoded text, a BOM not counted), which `region` names by line and column, become `text`."""

    region: Location
    start: int
    end: int
    text: str


@record(frozen=True, slots=True)
class Fix:
    """How `lint --fix` would mend a finding (`kubelint_ports.fixes`). "safe": only what the
    finding names changes (the API server read it as an error or ignored it); "unsafe": behaviour
    changes (a port moves), applied with `--unsafe-fixes` only."""

    applicability: str  # "safe" or "unsafe"
    description: str
    edits: tuple[Edit, ...] = ()  # worked out when asked for (--fix, --diff, SARIF); () otherwise
    blocked: str = ""  # why it is not applied (it would touch other lines); "" when it can be

    @property
    def available(self) -> bool:
        return not self.blocked


@record(frozen=True, slots=True, order=True)
class Finding:
    location: Location
    rule_id: str
    rule_name: str
    severity: Severity
    message: str
    subject: ObjectRef
    field_path: str = ""
    related: tuple[Location, ...] = ()
    suppressed: str = ""  # the reason; empty when the finding stands
    template: str = ""  # the Helm template the object came from (`# Source:`), if any
    port: int | None = None  # the port the finding is about, when there is one
    suppressed_by: str = ""  # "inSource" (an annotation) or "external" (config, baseline)
    # `field_path` with list items named instead of counted (`containers[web].ports[http/TCP]`),
    # and the identities of the other objects the finding is about (the Service whose nodePort a
    # hostPort takes): what the fingerprint hashes, so adding a sidecar or reordering ports keeps it.
    identity_path: str = field(default="", compare=False)
    partners: tuple[str, ...] = field(default=(), compare=False)
    # Who receives the packet, as the datapath model answered it (JSON `traffic`, SARIF
    # `properties.traffic`); data for tools, left out of ordering, equality and the fingerprint.
    traffic: Any = field(default=None, compare=False)
    # Where it happens (the check's Hit.nodes; empty: wherever the subject runs). Not part of a
    # finding's identity: the port map reads it.
    nodes: tuple[str, ...] = field(default=(), compare=False)
    # The deployment units it is found in (model.units), when the inputs hold several; not part of
    # its identity: a base's object built by two overlays is one finding in both.
    units: tuple[str, ...] = field(default=(), compare=False)
    # How `--fix` mends it (a description, safe or unsafe), when a fix exists; set after the run
    # (`kubelint_ports.fixes.describe`), not part of its identity.
    fix: Fix | None = field(default=None, compare=False)

    @property
    def fingerprint(self) -> str:
        """Stable across line shifts, reformatting and list reordering: rule, object, the field by
        the names of the items on its way, port, template, partners."""
        subject = self.subject
        return _digest(self.rule_id, subject.kind, subject.namespace, subject.name,
                       self.identity_path or self.field_path, "" if self.port is None else str(self.port),
                       self.template, *self.partners)

    @property
    def legacy_fingerprint(self) -> str:
        """The version 1 fingerprint (list indexes in the field path), to honour old baselines."""
        subject = self.subject
        return _digest(self.rule_id, subject.kind, subject.namespace, subject.name, self.field_path,
                       "" if self.port is None else str(self.port), self.template)

    @property
    def headline(self) -> str:
        """The short claim: the message up to its first ": " (messages read "<claim>: <why>")."""
        return split_message(self.message)[0]

    @property
    def explanation(self) -> str:
        """The rest of the message after the claim; "" when the message is all claim."""
        return split_message(self.message)[1]


def split_message(message: str) -> tuple[str, str]:
    """'<short claim>: <explanation>' -> (claim, explanation); a message without ": " is all claim.
    A ": " inside backticks is part of a quoted field (`externalTrafficPolicy: Local`), not the split."""
    start = 0
    while (at := message.find(": ", start)) >= 0 and message.count("`", 0, at) % 2:
        start = at + 2
    claim, explanation = (message[:at], message[at + 2:]) if at >= 0 else (message, "")
    if not claim.strip() or not explanation.strip():
        return message.strip(), ""
    return claim.strip(), explanation.strip()


def _digest(*parts: str) -> str:
    import hashlib

    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


@record(frozen=True, slots=True, order=True)
class Diagnostic:
    """An input problem (unreadable file, wrong field type): not a finding, exit code 2; or, when
    `internal`, a failure of the tool itself on that input (a bug): exit code 3."""

    location: Location
    message: str
    internal: bool = False


@record(slots=True)
class Report:
    """What a run produced, handed to a formatter."""

    findings: list[Finding]
    diagnostics: list[Diagnostic]
    rules: tuple  # the policies that ran (formatters list them: SARIF rules table, docs)
    files: int = 0
    objects: int = 0
    skipped: int = 0
    # The model the checks read (a model.Cluster): the port map and the HTML page show it.
    cluster: object = field(default=None, repr=False)
    notes: list[str] = field(default_factory=list)  # inputs passed over on purpose (FIFOs, outside links)
    # How the engine makes the run's port map (portmap.PortMap, a view of the model and the
    # findings) from this report: `port_map` makes it when first asked, once. None: no map.
    make_port_map: Callable[[Report], Any] | None = field(default=None, repr=False, compare=False)
    _port_map: Any = field(default=None, init=False, repr=False, compare=False)

    @property
    def port_map(self) -> Any:
        """The run's port map (`ports`, `--format html`), or None when the engine gave no way to make one."""
        if self._port_map is None and self.make_port_map is not None:
            self._port_map = self.make_port_map(self)
        return self._port_map

    @property
    def internal_errors(self) -> bool:
        return any(diagnostic.internal for diagnostic in self.diagnostics)

    def counts(self) -> dict[str, int]:
        counts = {str(severity): 0 for severity in sorted(Severity, reverse=True)}
        for finding in self.findings:
            if not finding.suppressed:
                counts[str(finding.severity)] += 1
        return counts

    def rule_counts(self) -> list[tuple[int, str, str, Severity]]:
        """(count, rule id, rule name, highest severity) of standing findings per rule, most first."""
        rules: dict[str, tuple[int, str, Severity]] = {}
        for finding in self.findings:
            if not finding.suppressed:
                count, _, severity = rules.get(finding.rule_id, (0, finding.rule_name, finding.severity))
                rules[finding.rule_id] = (count + 1, finding.rule_name, max(severity, finding.severity))
        return sorted(((count, rule_id, name, severity) for rule_id, (count, name, severity) in rules.items()),
                      key=lambda row: (-row[0], row[1]))
