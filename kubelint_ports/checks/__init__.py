"""The registry of checks: the logic behind policies, keyed by the policy's `check:` name.

A check reads the cluster model and yields `Hit`s. It never knows its rule id or severity: the
engine stamps those from the policy, so severity stays configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubelint_ports.findings import ObjectRef
from kubelint_ports.loading import Document


class Subject(Protocol):
    document: Document
    ref: ObjectRef


@dataclass(frozen=True, slots=True)
class Related:
    subject: Subject
    field_path: str
    message: str


@dataclass(frozen=True, slots=True)
class Hit:
    subject: Subject
    field_path: str
    message: str
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


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    function: CheckFunction
    params_schema: Mapping[str, Any] = field(default_factory=dict)
    # Compares several objects (or an object with cluster facts): wrong on a subset of the files,
    # so the per-file pre-commit hook (`--scope object`) leaves it out.
    cross_object: bool = False
    # What the check reads: "cluster" (manifests, `lint`) or "node-snapshot" (dumps, `node`).
    reads: str = "cluster"


CHECKS: dict[str, Check] = {}


def register(name: str, params_schema: Mapping[str, Any] | None = None, *,
             cross_object: bool = False, reads: str = "cluster") -> Callable[[CheckFunction], CheckFunction]:
    def decorate(function: CheckFunction) -> CheckFunction:
        if name in CHECKS:
            raise ValueError(f"check {name!r} registered twice")
        CHECKS[name] = Check(name, function, params_schema or {"type": "object", "additionalProperties": False},
                             cross_object, reads)
        return function

    return decorate


# Importing the modules fills the registry.
from kubelint_ports.checks import host_ports, invalid_ports, node_model, node_ports, port_schema  # noqa: E402,F401
from kubelint_ports.checks import network  # noqa: E402,F401
from kubelint_ports.checks import node_snapshot  # noqa: E402,F401
from kubelint_ports.checks import (  # noqa: E402,F401
    api_validation, ephemeral_ports, init_container_ports, node_addresses, peer_policies, service_routing)
