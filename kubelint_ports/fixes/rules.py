"""The fix of each fixable rule: a function that reads the finding's node and says what to change.

A fix function takes (target, finding, context) and returns a Plan, or None when this finding's
case has no fix (a sidecar's hostPort, a name used twice). It never writes: `fixes.apply` does.
A Plan is a splice (replace one scalar's exact span) or a removal (a key or list item, through
`fixes.structure`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from kubelint_ports.findings import Finding
from kubelint_ports.fixes.source import Target, scalar_span
from kubelint_ports.loading import yamltree as yt
from kubelint_ports.model import Cluster
from kubelint_ports.model.free_ports import free_node_ports

SAFE, UNSAFE = "safe", "unsafe"
PORT_TEXT = re.compile(r"[1-9][0-9]{0,4}")


@dataclass(frozen=True, slots=True)
class Plan:
    applicability: str
    description: str
    splice: tuple[int, int, str] | None = None  # (start, end, text) in the file's text
    remove: tuple[list, tuple[int, int]] | None = None  # (path segments from the root, the node's lines)


@dataclass(slots=True)
class Context:
    """What the fixes of one run share: the model, the node daemons' ports, the nodePorts already
    handed out (so two moved nodePorts never land on the same free one), which KP203 findings keep
    their port (one of each colliding group does)."""

    cluster: Cluster
    reserved: frozenset[int] = frozenset()
    handed_out: set[int] = field(default_factory=set)
    keeps_port: set[tuple[str, int, int]] = field(default_factory=set)


def unquote_port(target: Target, finding: Finding, context: Context) -> Plan | None:
    """KP001 `containerPort: "8080"` -> `containerPort: 8080`: the API server rejected the string,
    so nothing that worked changes."""
    value = target.value
    if (target.key is None or not isinstance(value, yaml.ScalarNode) or value.style not in ("'", '"')
            or not PORT_TEXT.fullmatch(value.value) or int(value.value) > 65535):
        return None
    start, end = scalar_span(value)
    return Plan(SAFE, f"remove the quotes: {target.key.value}: {value.value}", splice=(start, end, value.value))


SERVICE_PORT = re.compile(r"spec\.ports\[([0-9]+)\]\.port")


def remove_duplicate_service_port(target: Target, finding: Finding, context: Context) -> Plan | None:
    """KP003 a Service port entry whose (port, protocol) an earlier entry declares: removed. Safe
    when it repeats the earlier entry exactly; unsafe when it says more (another targetPort, name,
    nodePort): that is lost, and the finding says which."""
    match = SERVICE_PORT.fullmatch(finding.field_path)
    if finding.subject.kind != "Service" or match is None:
        return None
    ports = yt.at(target.obj, "spec.ports")
    index = int(match.group(1))
    if not isinstance(ports, yaml.SequenceNode) or index >= len(ports.value):
        return None
    item = ports.value[index]
    number, protocol = port_key(item)
    earlier = next((other for other in ports.value[:index] if port_key(other) == (number, protocol)), None)
    if earlier is None or number is None:
        return None
    segments = target.prefix + ["spec", "ports", index]
    from kubelint_ports.fixes.structure import node_lines

    lines = node_lines(item, item)
    first = ports.value.index(earlier)
    if yt.to_plain(item) == yt.to_plain(earlier):
        return Plan(SAFE, f"remove spec.ports[{index}], a copy of spec.ports[{first}]", remove=(segments, lines))
    lost = ", ".join(f"{key} {value}" for key, value in sorted((yt.to_plain(item) or {}).items())
                     if (yt.to_plain(earlier) or {}).get(key) != value)
    return Plan(UNSAFE, f"remove spec.ports[{index}] (port {number}/{protocol}, also declared by spec.ports[{first}]); "
                        f"what it says differently is lost: {lost}", remove=(segments, lines))


def port_key(item: yaml.Node) -> tuple[str | None, str]:
    number = yt.get(item, "port")
    protocol = yt.get(item, "protocol")
    return (number.value if isinstance(number, yaml.ScalarNode) else None,
            protocol.value if isinstance(protocol, yaml.ScalarNode) else "TCP")


INIT_HOST_PORT = re.compile(r"(.*\.initContainers\[[0-9]+\])\.ports\[[0-9]+\]\.hostPort")


def remove_init_host_port(target: Target, finding: Finding, context: Context) -> Plan | None:
    """KP104 a plain init container's hostPort: removed. The kubelet never maps it and the
    scheduler never counts it, so nothing changes but the misleading line. A sidecar's (an init
    container with `restartPolicy: Always`) is counted by the scheduler: no fix."""
    match = INIT_HOST_PORT.fullmatch(finding.field_path)
    if match is None or target.key is None:
        return None
    _, container = yt.resolve(target.obj, match.group(1))
    policy = yt.get(container, "restartPolicy")
    if not isinstance(container, yaml.MappingNode) or (isinstance(policy, yaml.ScalarNode) and policy.value == "Always"):
        return None
    _, entry = yt.resolve(target.obj, finding.field_path.rsplit(".", 1)[0])
    if yt.get(entry, "containerPort") is None:
        return None  # the entry would be left without a port: KP001 says what to add
    from kubelint_ports.fixes.structure import node_lines

    segments = target.prefix + yt.parse_field_path(finding.field_path)
    return Plan(SAFE, f"remove hostPort {target.value.value} of the init container (never mapped)",
                remove=(segments, node_lines(target.key, target.value)))


def move_node_port(target: Target, finding: Finding, context: Context) -> Plan | None:
    """KP203 (a nodePort claimed twice), KP204 (outside the range): the nodePort moved to the
    lowest free one of the range (claimed by no Service and held by no pod of the inputs, not a
    node daemon's). Unsafe: whoever reaches the Service on the old port must follow."""
    value = target.value
    if (target.key is None or not isinstance(value, yaml.ScalarNode) or value.style
            or yt.scalar_type(value) != yt.INT):
        return None
    if finding.rule_id == "KP203" and place(finding) in context.keeps_port:
        return None
    port = next(free_node_ports(context.cluster, context.reserved, context.handed_out), None)
    if port is None:
        return None
    context.handed_out.add(port)
    low, high = context.cluster.node_port_range
    start, end = scalar_span(value)
    return Plan(UNSAFE, f"move {target.key.value} {value.value} to {port}, the lowest nodePort of {low}-{high} that no "
                        f"Service or pod of the inputs claims; clients of port {value.value} must follow",
                splice=(start, end, str(port)))


def place(finding_or_location) -> tuple[str, int, int]:
    location = getattr(finding_or_location, "location", finding_or_location)
    return location.path, location.line, location.column


def node_ports_kept(findings: list[Finding]) -> set[tuple[str, int, int]]:
    """Of each group of KP203 findings on one nodePort, the first (by place) keeps the port when
    every claim it collides with is another finding of the group (all linted, so they move)."""
    groups: dict[int | None, list[Finding]] = {}
    for finding in findings:
        if finding.rule_id == "KP203" and not finding.suppressed:
            groups.setdefault(finding.port, []).append(finding)
    kept = set()
    for group in groups.values():
        first = min(group, key=place)
        others = {place(finding) for finding in group}
        if first.related and all(place(related) in others for related in first.related):
            kept.add(place(first))
    return kept


# The table: rule id -> its fix. Explicit, so `kubelint-ports explain` and the docs can say
# which rules have one.
FIXES = {
    "KP001": unquote_port,
    "KP003": remove_duplicate_service_port,
    "KP104": remove_init_host_port,
    "KP203": move_node_port,
    "KP204": move_node_port,
}
