"""What a fix function says, and what the fixes of one run share: the vocabulary of `fixes`."""

from __future__ import annotations

from dataclasses import field, replace

from kubelint_ports.findings import Finding
from kubelint_ports.fixes.source import Sources
from kubelint_ports.model import Cluster
from kubelint_ports.records import record

SAFE, UNSAFE = "safe", "unsafe"


@record(frozen=True, slots=True)
class Plan:
    """What a fix function says: safe or unsafe, what it does, and the edit, a splice of one
    scalar's span or a removal (through `fixes.structure`)."""

    applicability: str
    description: str
    splice: tuple[int, int, str] | None = None  # (start, end, text) in the file's text
    remove: tuple[list, tuple[int, int]] | None = None  # (path segments from the root, the node's lines)
    port: int | None = None  # the free port handed out to this fix (given back when it is not made)


@record(frozen=True, slots=True)
class Choices:
    """The configuration's `fix:` section: `node-port: move` (to the lowest free nodePort) or
    `remove` (the API server allocates one when the Service is applied)."""

    node_port: str = "move"


@record(slots=True)
class RoundTrips:
    """The removals of one run whose edit was checked by a round trip of its document (`run.to_fix`):
    how many per document ((file, shown path, the document's start) -> count), and their characters."""

    documents: dict[tuple[str, str, int], int] = field(default_factory=dict)
    characters: int = 0


@record(slots=True)
class Context:
    """What the fixes of one run share: the model, the node daemons' ports, the ports already
    handed out (so two moved ports never land on the same free one), which KP203 and KP301
    findings keep their port (one of each colliding group does), the run's findings, the
    configuration's choices, the files read."""

    cluster: Cluster
    reserved: frozenset[int] = frozenset()
    handed_out: set[int] = field(default_factory=set)
    keeps_port: set[tuple[str, int, int]] = field(default_factory=set)
    findings: list[Finding] = field(default_factory=list)
    choices: Choices = field(default_factory=Choices)
    sources: Sources = field(default_factory=Sources)
    # (shown path, start, end) of a scalar a moved port was carried to -> its new text: a base
    # file's nodePort that two overlays report moves once, to one port.
    carried: dict[tuple[str, int, int], str] = field(default_factory=dict)
    workloads: dict | None = None  # object -> its linted Workload, made when first asked
    # The whole run's model when `cluster` is one deployment unit's (`run.unit_context`): which
    # overlays read a base file is a question about every unit.
    whole_run: Cluster | None = None
    round_trips: RoundTrips = field(default_factory=RoundTrips)  # the run's, its units' too

    def workload(self, ref):
        """The linted (not running) Workload of an object, or None."""
        if self.workloads is None:
            self.workloads = {}
            for workload in self.cluster.workloads:
                if not workload.live:
                    self.workloads.setdefault(workload.ref, workload)
        return self.workloads.get(ref)

    def once(self, plan: Plan, span: tuple[str, int, int], text: str, key: str, old: str) -> Plan:
        """A moved port carried to a place (shown path, start, end) that another finding's move
        already edits (a base file two overlays read, a values key two objects read) gets that
        same new port: the edit is made once, and the port this plan was handed is given back."""
        if span not in self.carried:
            self.carried[span] = text
            return replace(plan, splice=(span[1], span[2], text))
        self.give_back(plan)
        earlier = self.carried[span]
        return Plan(plan.applicability, f"move {key} {old} to {earlier}, as the fix of another finding on the same "
                                        f"place does; clients of port {old} must follow", splice=(span[1], span[2], earlier))

    def give_back(self, plan: Plan) -> None:
        """A fix that is not made frees the port it was handed."""
        if plan.port is not None:
            self.handed_out.discard(plan.port)


def place(finding_or_location) -> tuple[str, int, int]:
    location = getattr(finding_or_location, "location", finding_or_location)
    return location.path, location.line, location.column
