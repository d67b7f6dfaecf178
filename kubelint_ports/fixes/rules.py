"""The fix of each fixable rule: a function that reads the finding's node and says what to change.

A fix function takes (target, finding, context) and returns a Plan, or None when this finding's
case has no fix (a sidecar's hostPort, a name used twice). It never writes: the command line does.
A Plan is a splice (replace one scalar's exact span) or a removal (a key or list item, through
`fixes.structure`). The target is the finding's node in the file it names, or, for a rendered
object, in the rendered output (`fixes.helm` and `fixes.kustomize` carry the plan to the user's
text). KP401's fix finds its own place (`whole_run`: `fixes.kube_proxy`).
"""

from __future__ import annotations

import re

import yaml

from kubelint_ports.findings import Finding
from kubelint_ports.fixes.kube_proxy import set_cluster_cidr
from kubelint_ports.fixes.plan import SAFE, UNSAFE, Context, Plan, place
from kubelint_ports.fixes.source import Target, scalar_span
from kubelint_ports.loading import yamltree as yt
from kubelint_ports.model.free_ports import (
    free_node_ports, held_host_ports, nearest_free_host_port)

PORT_TEXT = re.compile(r"[1-9][0-9]{0,4}")


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
    first = first_entries(ports)[(number, protocol)]
    if first >= index or number is None:
        return None
    said, said_before = entry_data(item), entry_data(ports.value[first])
    if said is None or said_before is None:
        return None
    segments = target.prefix + ["spec", "ports", index]
    from kubelint_ports.fixes.structure import node_lines

    lines = node_lines(item, item)
    if said == said_before:
        return Plan(SAFE, f"remove spec.ports[{index}], a copy of spec.ports[{first}]", remove=(segments, lines))
    lost = ", ".join(f"{key} {value}" for key, value in sorted((said or {}).items())
                     if (said_before or {}).get(key) != value)
    return Plan(UNSAFE, f"remove spec.ports[{index}] (port {number}/{protocol}, also declared by spec.ports[{first}]); "
                        f"what it says differently is lost: {lost}", remove=(segments, lines))


def first_entries(ports: yaml.SequenceNode) -> dict[tuple[str | None, str], int]:
    """(port, protocol) -> the index of the first entry of `ports` that declares it: worked out once
    per list and kept on it (a Service of 3,000 repeated ports asks it 3,000 times)."""
    try:
        return ports._first_entries
    except AttributeError:
        pass
    first: dict[tuple[str | None, str], int] = {}
    for index, item in enumerate(ports.value):
        first.setdefault(port_key(item), index)
    ports._first_entries = first
    return first


ENTRY_NODES = 1_000  # a port entry is a handful of scalars: past this many nodes, aliases repeat a tree in it


def entry_data(item: yaml.Node):
    """A port entry as plain data, or None when aliases make it larger than ENTRY_NODES nodes: such
    an entry is no copy a fix should judge, and reading it whole for each finding would cost the
    expanded tree each time."""
    try:
        return yt.to_plain(item, [ENTRY_NODES])
    except yt.FieldTypeError:
        return None


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


OTHER_MOVES = " and no other move of this run takes"  # a move pushed past the port its message names


def move_node_port(target: Target, finding: Finding, context: Context) -> Plan | None:
    """KP203 (a nodePort claimed twice), KP204 (outside the range): the nodePort moved to the
    lowest free one of the range (claimed by no Service and held by no pod of the inputs, not a
    node daemon's), or removed when the configuration says `fix: {node-port: remove}`. Unsafe:
    whoever reaches the Service on the old port must follow."""
    value = target.value
    if (target.key is None or not isinstance(value, yaml.ScalarNode) or value.style
            or yt.scalar_type(value) != yt.INT):
        return None
    if finding.rule_id == "KP203" and place(finding) in context.keeps_port:
        return None
    if context.choices.node_port == "remove":  # the configuration's choice: let the API server pick
        from kubelint_ports.fixes.structure import node_lines

        return Plan(UNSAFE, f"remove {target.key.value} {value.value}, so the API server allocates a free one when the "
                            f"Service is applied; clients of port {value.value} must follow the new one",
                    remove=(target.prefix + yt.parse_field_path(finding.field_path), node_lines(target.key, value)))
    port = next(free_node_ports(context.cluster, context.reserved, context.handed_out), None)
    if port is None:
        return None
    # Said when another move of the run took a lower one: the message's lowest free port is then not this.
    others = bool(context.handed_out) and port != next(free_node_ports(context.cluster, context.reserved, set()), None)
    context.handed_out.add(port)
    low, high = context.cluster.node_port_range
    start, end = scalar_span(value)
    return Plan(UNSAFE, f"move {target.key.value} {value.value} to {port}, the lowest nodePort of {low}-{high} that no "
                        f"Service or pod of the inputs claims{OTHER_MOVES if others else ''}; clients of port "
                        f"{value.value} must follow",
                splice=(start, end, str(port)), port=port)


def move_host_port(target: Target, finding: Finding, context: Context) -> Plan | None:
    """KP201 (a hostPort that is a nodePort), KP303 (a node daemon's port), KP301 (another pod's
    hostPort on shared nodes): the hostPort moved to the free host port nearest it on every node
    the pod may run on (no pod, nodePort or node daemon holds it there; outside the node-port and
    ephemeral ranges). Of pods that collide with each other, the first keeps its port; a pod that
    collides with itself (more replicas than nodes) gets no fix: a port move cannot help. Unsafe:
    whoever reaches the pod on the node's old port must follow."""
    value = target.value
    if (target.key is None or target.key.value != "hostPort" or not isinstance(value, yaml.ScalarNode)
            or value.style or yt.scalar_type(value) != yt.INT):
        return None
    if finding.rule_id == "KP301" and (not finding.related or place(finding) in context.keeps_port):
        return None
    workload = context.workload(finding.subject)
    if workload is None:
        return None
    nodes, held = host_ports_held(context, workload)
    old = int(value.value)
    port = nearest_free_host_port(context.cluster, held | context.handed_out, old)
    if port is None:
        return None
    others = bool(context.handed_out) and port != nearest_free_host_port(context.cluster, held, old)
    context.handed_out.add(port)
    start, end = scalar_span(value)
    where = f"on every node it may run on ({', '.join(nodes)})" if nodes != [""] else "on any node (no inventory)"
    where += " that no other move of this run takes" if others else ""
    return Plan(UNSAFE, f"move hostPort {old} to {port}, the free host port nearest {old} {where}, outside the "
                        f"node-port range {context.cluster.node_port_range_text} and the ephemeral range "
                        f"{context.cluster.ephemeral_port_range_text}; clients of the node's port {old} must follow",
                splice=(start, end, str(port)), port=port)


def host_ports_held(context: Context, workload) -> tuple[list[str], set[int]]:
    """(the nodes the workload may run on, [""] with no inventory; the host ports held on any of
    them), each node's ports worked out once per run."""
    if context.cluster.nodes:
        from kubelint_ports.model.allocation import allocate

        nodes = sorted(allocate(context.cluster).eligible(workload))
    else:
        nodes = [""]
    reserved = {port: "a node daemon" for port in context.reserved}
    # every node in one pass over the claims, once per run (node by node it was quadratic)
    return nodes, held_host_ports(context.cluster, reserved).on(nodes)


def node_ports_kept(findings: list[Finding], origins=lambda finding: ()) -> set[tuple[str, int, int]]:
    """Of each group of KP203 findings on one nodePort (KP301 findings on one hostPort), the first
    (by place) keeps the port when every claim it collides with is another finding of the group
    (all linted, so they move). `origins(finding)`: the related places that are no claim but
    where its own value is set (a chart's values key)."""
    groups: dict[tuple[str, int | None], list[Finding]] = {}
    for finding in findings:
        if finding.rule_id in ("KP203", "KP301") and not finding.suppressed:
            groups.setdefault((finding.rule_id, finding.port), []).append(finding)
    kept = set()
    for group in groups.values():
        first = min(group, key=place)
        others = {place(finding) for finding in group}
        own = {place(location) for location in origins(first)}
        claims = [related for related in first.related if place(related) not in own]
        if claims and all(place(related) in others for related in claims):
            kept.add(place(first))
    return kept


# The table: rule id -> its fix. Explicit, so `kubelint-ports explain` and the docs can say
# which rules have one.
FIXES = {
    "KP001": unquote_port,
    "KP003": remove_duplicate_service_port,
    "KP104": remove_init_host_port,
    "KP201": move_host_port,
    "KP203": move_node_port,
    "KP204": move_node_port,
    "KP301": move_host_port,
    "KP303": move_host_port,
    "KP401": set_cluster_cidr,
}
