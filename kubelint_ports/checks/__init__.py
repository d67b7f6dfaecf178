"""The registry of checks: the logic behind policies, keyed by the policy's `check:` name.

A check reads the cluster model and yields `Hit`s. It never knows its rule id or severity: the
engine stamps those from the policy, so severity stays configuration.

The registry stays explicit (`MODULES` names every check's module) and loads lazily: a family's
module is imported, and registers its checks, when one of them is first looked up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import field
from typing import Any, Protocol

from kubelint_ports.loading import Document
from kubelint_ports.records import record
from kubelint_ports.vocabulary import ObjectRef


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


# Where each built-in check lives: its name -> its family's module under `checks/`. A module is
# imported when one of its checks is first looked up (`CHECKS[name]`), so a run imports only the
# families its rules use: `lint` never loads the node-snapshot rules (and with them the dump
# readers), nor `port-schema` unless a custom policy uses it. `register` refuses a check missing
# here or placed in another module, so the table cannot drift from the code.
MODULES: dict[str, str] = {
    **dict.fromkeys(("invalid-port-name", "duplicate-port", "service-without-ports"), "api_validation"),
    **dict.fromkeys(("host-port-in-ephemeral-range", "node-port-range-overlaps-ephemeral-range"), "ephemeral_ports"),
    **dict.fromkeys(("host-port", "host-port-in-node-port-range"), "host_ports"),
    "host-port-in-init-container": "init_container_ports",
    "invalid-port": "invalid_ports",
    **dict.fromkeys(("invalid-cidr", "kube-proxy-cluster-cidr-missing", "kube-proxy-cluster-cidr-overlaps-service-cidr",
                     "kube-proxy-cluster-cidr-excludes-pod-cidr", "service-cidr-overlaps-pod-cidr",
                     "kube-proxy-config-inconsistent"), "network"),
    **dict.fromkeys(("external-ip-host-port-collision", "host-ip-not-on-node"), "node_addresses"),
    **dict.fromkeys(("host-port-conflict", "host-port-host-network-capture", "node-reserved-port",
                     "host-port-service-port-capture"), "node_model"),
    **dict.fromkeys(("host-port-node-port-collision", "node-port-collision", "node-port-out-of-range"), "node_ports"),
    **dict.fromkeys(("stale-host-port-dnat", "shadowed-host-port", "host-ports-ahead-of-kube-proxy"),
                    "snapshot_host_ports"),
    "kube-proxy-masquerade-rule": "snapshot_kube_proxy",
    "host-process-loses-port": "snapshot_listeners",
    "node-drift": "snapshot_drift",
    "host-network": "peer_policies",
    "port-schema": "port_schema",
    **dict.fromkeys(("dangling-service", "target-port-name-not-declared", "target-port-number-not-declared",
                     "service-protocol-mismatch", "probe-port-name-not-declared"), "service_routing"),
}
# The families whose checks read node dumps (`node`); every other check reads the cluster (`lint`).
NODE_SNAPSHOT_MODULES = frozenset({"snapshot_host_ports", "snapshot_kube_proxy", "snapshot_listeners",
                                   "snapshot_drift"})
# The built-in checks that compare several objects (`register(..., cross_object=True)`), which
# `--scope object` (the per-file pre-commit hook) leaves out.
CROSS_OBJECT = frozenset({
    "dangling-service", "external-ip-host-port-collision", "host-ip-not-on-node",
    "host-port-conflict", "host-port-host-network-capture", "host-port-node-port-collision",
    "host-port-service-port-capture", "kube-proxy-cluster-cidr-excludes-pod-cidr",
    "kube-proxy-cluster-cidr-overlaps-service-cidr", "kube-proxy-config-inconsistent", "node-port-collision",
    "node-port-range-overlaps-ephemeral-range", "service-cidr-overlaps-pod-cidr", "service-protocol-mismatch",
    "target-port-name-not-declared", "target-port-number-not-declared",
})


def reads_of(name: str) -> str:
    """What the check `name` reads ("cluster" or "node-snapshot"), without importing its module."""
    module = MODULES.get(name)
    if module is not None and not dict.__contains__(CHECKS, name):
        return "node-snapshot" if module in NODE_SNAPSHOT_MODULES else "cluster"
    return CHECKS[name].reads


def cross_object_of(name: str) -> bool:
    """Whether the check `name` compares several objects, without importing its module."""
    if name in MODULES and not dict.__contains__(CHECKS, name):
        return name in CROSS_OBJECT
    return CHECKS[name].cross_object


def load(module: str) -> None:
    """Import a family's module (which registers its checks). `__import__`, not importlib's
    `import_module`: only the statement's path shows in `python -X importtime`."""
    __import__(f"{__name__}.{module}")


class Registry(dict):
    """`CHECKS`: a dict of the registered checks that imports a check's module when the check is
    first looked up. Membership, `get` and iteration see every built-in check (iteration imports
    them all: listing the registry is for validation and docs, not for a run)."""

    def __missing__(self, name: str) -> Check:
        module = MODULES.get(name) if isinstance(name, str) else None
        if module is None:
            raise KeyError(name)
        load(module)
        return dict.__getitem__(self, name)

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in MODULES

    def get(self, name, default=None):
        try:
            return self[name]
        except KeyError:
            return default

    def load_all(self) -> None:
        for module in sorted(set(MODULES.values())):
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
             cross_object: bool = False, reads: str = "cluster",
             check_params: Callable[[Mapping[str, Any]], tuple[list, str] | None] | None = None
             ) -> Callable[[CheckFunction], CheckFunction]:
    def decorate(function: CheckFunction) -> CheckFunction:
        if dict.__contains__(CHECKS, name):
            raise ValueError(f"check {name!r} registered twice")
        module = MODULES.get(name)
        family = function.__module__.rpartition(".")[2]
        if function.__module__.startswith(f"{__name__}.") and module != family:
            raise ValueError(f"check {name!r} is registered in checks/{family}.py but checks.MODULES says "
                             f"{module!r}: add it there")
        if module is not None and reads != ("node-snapshot" if module in NODE_SNAPSHOT_MODULES else "cluster"):
            raise ValueError(f"check {name!r} reads {reads!r}: checks.NODE_SNAPSHOT_MODULES disagrees")
        if module is not None and cross_object != (name in CROSS_OBJECT):
            raise ValueError(f"check {name!r}: cross_object={cross_object} but checks.CROSS_OBJECT disagrees")
        CHECKS[name] = Check(name, function, params_schema or {"type": "object", "additionalProperties": False},
                             cross_object, reads, check_params)
        return function

    return decorate
