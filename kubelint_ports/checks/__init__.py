"""The registry of checks: the logic behind policies, keyed by the policy's `check:` name.

A check reads the cluster model and yields `Hit`s. It never knows its rule id or severity: the
engine stamps those from the policy, so severity stays configuration.

The registry stays explicit (each built-in policy names its check's module, `placements`) and
loads lazily: a family's module is imported, and registers its checks, when one of them is first
looked up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import field
from functools import cache
from typing import Any, Protocol

from kubelint_ports.loading import Document
from kubelint_ports.records import record
from kubelint_ports.vocabulary import Message, ObjectRef


class Subject(Protocol):
    document: Document
    ref: ObjectRef


@record(frozen=True, slots=True)
class Related:
    subject: Subject
    field_path: str
    message: str


@record(frozen=True, slots=True)
class Hit:
    subject: Subject
    field_path: str
    # The rule's words: a `Message` (headline, effect, fix, analysis), or one story string that
    # the engine splits (`Message.from_story`).
    message: "str | Message"
    related: tuple[Related, ...] = ()
    # Which case of the rule this is (e.g. the proxy mode); the policy's `variants` map a case to
    # its severity, so severity stays data even when it depends on facts.
    variant: str = ""
    port: int | None = None  # the port at issue: part of the finding's fingerprint (baselines)
    traffic: Mapping[str, Any] | None = None  # the datapath model's answer as data (model.datapath)
    # The nodes where it happens, when the rule knows them (a conflict's contested nodes, the nodes
    # two pods share); empty: wherever the subject's pods may run. The port map marks these.
    nodes: tuple[str, ...] = ()


CheckFunction = Callable[[Any, Mapping[str, Any]], Iterator[Hit]]


@record(frozen=True, slots=True)
class Check:
    name: str
    function: CheckFunction
    params_schema: Mapping[str, Any] = field(default_factory=dict)
    # Compares several objects (or an object with cluster facts): wrong on a subset of the files,
    # so the per-file pre-commit hook (`--scope object`) leaves it out.
    cross_object: bool = False
    # What the check reads: "cluster" (manifests, `lint`) or "node-snapshot" (dumps, `node`).
    reads: str = "cluster"
    # What the params schema cannot say: params -> (the keys below params where, why they are
    # refused), or None.
    check_params: Callable[[Mapping[str, Any]], tuple[list, str] | None] | None = None


@record(frozen=True, slots=True)
class Placement:
    """Where a built-in check lives and what it is, as the built-in policies naming it declare
    (`module:`, `reads:`, `cross-object:` in `policies/*.yaml`): the one place these are said."""

    module: str  # its family's module under `checks/` (`manifest.host_ports`)
    reads: str = "cluster"  # "cluster" (manifests, `lint`) or "node-snapshot" (dumps, `node`)
    cross_object: bool = False  # `--scope object` (the per-file pre-commit hook) leaves it out


@cache
def placements() -> dict[str, Placement]:
    """Each built-in check's placement, from the built-in policies (their index: no YAML parsed).
    A module is imported when one of its checks is first looked up (`CHECKS[name]`), so a run
    imports only the families its rules use: `lint` never loads the node-snapshot rules (and with
    them the dump readers), nor `port-schema` unless a policy uses it. `register` refuses a check
    its policy does not place in its module, so the policies cannot drift from the code."""
    from kubelint_ports.policy_data import builtin_policy_data

    found: dict[str, Placement] = {}
    for path, data in builtin_policy_data():
        if not isinstance(data, dict) or "module" not in data:
            continue
        place = Placement(data["module"], data.get("reads", "cluster"), bool(data.get("cross-object", False)))
        if found.setdefault(data["check"], place) != place:
            raise ValueError(f"{path.name} places check {data['check']!r} otherwise than another built-in policy "
                             f"({found[data['check']]} != {place})")
    return found


def reads_of(name: str) -> str:
    """What the check `name` reads ("cluster" or "node-snapshot"), without importing its module."""
    place = placements().get(name)
    return place.reads if place is not None else CHECKS[name].reads


def cross_object_of(name: str) -> bool:
    """Whether the check `name` compares several objects, without importing its module."""
    place = placements().get(name)
    return place.cross_object if place is not None else CHECKS[name].cross_object


def load(module: str) -> None:
    """Import a family's module (which registers its checks). `__import__`, not importlib's
    `import_module`: only the statement's path shows in `python -X importtime`."""
    __import__(f"{__name__}.{module}")


class Registry(dict):
    """`CHECKS`: a dict of the registered checks that imports a check's module when the check is
    first looked up. Membership, `get` and iteration see every built-in check (iteration imports
    them all: listing the registry is for validation and docs, not for a run)."""

    def __missing__(self, name: str) -> Check:
        place = placements().get(name) if isinstance(name, str) else None
        if place is None:
            raise KeyError(name)
        load(place.module)
        return dict.__getitem__(self, name)

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in placements()

    def get(self, name, default=None):
        try:
            return self[name]
        except KeyError:
            return default

    def load_all(self) -> None:
        for module in sorted({place.module for place in placements().values()}):
            load(module)

    def __iter__(self):
        self.load_all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self.load_all()
        return dict.__len__(self)

    def keys(self):
        self.load_all()
        return dict.keys(self)

    def values(self):
        self.load_all()
        return dict.values(self)

    def items(self):
        self.load_all()
        return dict.items(self)


CHECKS: dict[str, Check] = Registry()


def register(name: str, params_schema: Mapping[str, Any] | None = None, *,
             check_params: Callable[[Mapping[str, Any]], tuple[list, str] | None] | None = None
             ) -> Callable[[CheckFunction], CheckFunction]:
    """Register `function` as the check `name`. What it reads and whether it compares objects
    are its policy's (`placements`); a check outside `checks/` (a test's) reads the cluster,
    one object at a time."""
    def decorate(function: CheckFunction) -> CheckFunction:
        if dict.__contains__(CHECKS, name):
            raise ValueError(f"check {name!r} registered twice")
        place = placements().get(name)
        family = function.__module__.removeprefix(f"{__name__}.")
        if function.__module__.startswith(f"{__name__}.") and (place is None or place.module != family):
            raise ValueError(f"check {name!r} is registered in {function.__module__} but no built-in policy places it "
                             f"there: add `module: {family}` to the policy whose `check:` is {name!r}")
        place = place or Placement(family)
        CHECKS[name] = Check(name, function, params_schema or {"type": "object", "additionalProperties": False},
                             place.cross_object, place.reads, check_params)
        return function

    return decorate
