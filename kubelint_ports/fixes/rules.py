"""The fix of each fixable rule: a function that reads the finding's node and says what to change.

A fix function takes (target, finding, context) and returns a Plan, or None when this finding's
case has no fix (a sidecar's hostPort, a name used twice). It never writes: the command line does.
A Plan is a splice (replace one scalar's exact span) or a removal (a key or list item, through
`fixes.structure`). The target is the finding's node in the file it names, or, for a rendered
object, in the rendered output (`fixes.helm` and `fixes.kustomize` carry the plan to the user's
text). KP401's fix finds its own place (`whole_run`: `fixes.kube_proxy`).
"""

from __future__ import annotations

import os
import re

import yaml

from kubelint_ports.policy_data import builtin_policy_data
from kubelint_ports.findings import Finding
from kubelint_ports.fixes.comments import remove_unused_suppression
from kubelint_ports.fixes.kube_proxy import set_cluster_cidr
from kubelint_ports.fixes.plan import SAFE, UNSAFE, Context, Plan, place
from kubelint_ports.fixes.source import Target, scalar_span
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.model.free_ports import (
    free_node_ports, held_host_ports, nearest_free_host_port, node_names, node_ports_held)

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
    names, readers = units_reading(finding, context)
    port = free_node_port_in_all(readers, context.reserved, context.handed_out)
    if port is None:
        return None
    # Said when another move of the run took a lower one: the message's lowest free port is then not this.
    others = bool(context.handed_out) and port != free_node_port_in_all(readers, context.reserved, set())
    context.handed_out.add(port)
    low, high = context.cluster.node_port_range
    start, end = scalar_span(value)
    claims = f"Service or pod of the units that read {finding.location.path} ({', '.join(names)})" if len(names) > 1 \
        else "Service or pod of the inputs"
    return Plan(UNSAFE, f"move {target.key.value} {value.value} to {port}, the lowest nodePort of {low}-{high} that no "
                        f"{claims} claims{OTHER_MOVES if others else ''}; clients of port {value.value} must follow",
                splice=(start, end, str(port)), port=port)


def free_node_port_in_all(clusters: list, reserved, taken) -> int | None:
    """The lowest nodePort free in each of `clusters` (deployment units that read one file)."""
    first, *rest = clusters
    for port in free_node_ports(first, reserved, taken):
        if all(cluster.node_port_range[0] <= port <= cluster.node_port_range[1]
               and port not in node_ports_held(cluster) for cluster in rest):
            return port
    return None


def units_reading(finding: Finding, context: Context) -> tuple[list[str], list]:
    """(names, models) of the deployment units that read the file the finding's edit starts from
    (a base two overlays build on, a chart's template every values set renders, a manifest), with
    the finding's own: a moved port must be free in each, or the edit that fixes one unit breaks
    another. ([], [the finding's model]) with one unit."""
    whole = context.whole_run or context.cluster
    units = dict(whole.units)
    if len(units) < 2:
        return [], [context.cluster]
    file = os.path.realpath(os.path.abspath(finding.location.path))
    known = whole.derived.setdefault("units reading", {})
    if file not in known:
        known[file] = sorted(name for name, unit in units.items() if any(
            file in files_read(item.document) for item in [*unit.workloads, *unit.services] if not item.live))
    names = sorted({*known[file], *(name for name in finding.units if name in units)})
    return names, ([units[name] for name in names] or [context.cluster])


def files_read(document) -> set[str]:
    """The files an object was read from: its manifest or template, a build's resource and patches."""
    paths = [getattr(document, "path", None), getattr(document, "source_file", None),
             *(patch.path for patch, _ in getattr(document, "applied", ()))]
    return {os.path.realpath(os.path.abspath(path)) for path in paths if path}


def move_host_port(target: Target, finding: Finding, context: Context) -> Plan | None:
    """KP201 (a hostPort that is a nodePort), KP303 (a node daemon's port), KP301 (another pod's
    hostPort on shared nodes): the hostPort moved to the free host port nearest it on every node
    the pod may run on (no pod, nodePort or node daemon holds it there; outside the node-port and
    ephemeral ranges). Only a move that can help is offered (`move_helps`); of objects that collide
    with each other one keeps its port (`keeps_host_port`), and an object's TCP and UDP halves of
    one port move together, to one port. Unsafe: whoever reaches the pod on the node's old port
    must follow."""
    value = target.value
    if (target.key is None or target.key.value != "hostPort" or not isinstance(value, yaml.ScalarNode)
            or value.style or yt.scalar_type(value) != yt.INT):
        return None
    workload = context.workload(finding.subject)
    if workload is None or not move_helps(finding, workload, context):
        return None
    if finding.rule_id == "KP301" and keeps_host_port(finding, workload, context):
        return None
    old = int(value.value)
    nodes, held = host_ports_held(context, workload)
    where = f"on every node it may run on ({', '.join(nodes)})" if nodes != [""] else "on any node (no inventory)"
    names, readers = units_reading(finding, context)
    if len(names) > 1:  # the edited file is read by other units too: free on every node of theirs as well
        reserved = {port: "a node daemon" for port in context.reserved}
        held = held.union(*(held_host_ports(unit, reserved).on(node_names(unit))
                            for unit in readers if unit is not context.cluster))
        where += f" and in every unit that reads {finding.location.path} ({', '.join(names)})"
    claim = claim_of(workload, finding)
    # The other protocol's half of the same port, moved earlier in this run, says where this one
    # goes: kept in the run's `carried` under a key no file span has (start -1).
    half = (f"<{workload.ref} container {claim.container if claim else ''}>", old, -1)
    start, end = scalar_span(value)
    if half in context.carried:
        port = int(context.carried[half])
        return Plan(UNSAFE, f"move hostPort {old} to {port}, where this run moves the other protocol's half of port "
                            f"{old} of the same container, free {where}; clients of the node's port {old} must "
                            f"follow", splice=(start, end, str(port)))
    port = nearest_free_host_port(context.cluster, held | context.handed_out, old)
    if port is None:
        return None
    others = bool(context.handed_out) and port != nearest_free_host_port(context.cluster, held, old)
    context.handed_out.add(port)
    context.carried[half] = str(port)
    where += " that no other move of this run takes" if others else ""
    return Plan(UNSAFE, f"move hostPort {old} to {port}, the free host port nearest {old} {where}, outside the "
                        f"node-port range {context.cluster.node_port_range_text} and the ephemeral range "
                        f"{context.cluster.ephemeral_port_range_text}; clients of the node's port {old} must follow",
                splice=(start, end, str(port)), port=port)


def claim_of(workload, finding: Finding):
    return next((claim for claim in workload.claims if claim.field_path == finding.field_path), None)


def move_helps(finding: Finding, workload, context: Context) -> bool:
    """Whether moving the finding's host port can end its conflict, as the workload says (not the
    finding's related places: a chart's always hold the values key). A hostNetwork pod's process
    listens where it listens, so its port is no hostPort rule to move; a KP301 conflict whose only
    claimant is this workload (more replicas than nodes) is the same on any port."""
    if workload.host_network:
        return False
    if finding.rule_id != "KP301":
        return True
    return any(other.workload is not workload for conflict in conflicts_of(context.cluster, workload, finding, True)
               for other in conflict.claimants)


def keeps_host_port(finding: Finding, workload, context: Context) -> bool:
    """Of the objects whose claims of one host port collide (TCP and UDP alike), the one that keeps
    it: none when one of them cannot move (a hostNetwork or running pod, one without a finding of
    its own to fix: it keeps the port, and every other moves); else the one that the fewest other
    objects reference (Services that select it), then by name. Never the order of the files."""
    rivals = {id(claimant.workload): claimant.workload
              for conflict in conflicts_of(context.cluster, workload, finding, False)
              for claimant in conflict.claimants}
    moving = findings_to_move(context)
    if any(rival is not workload and (rival.live or rival.host_network or (rival.ref, finding.port) not in moving)
           for rival in rivals.values()):
        return False
    keeper = min(rivals.values(), default=workload, key=lambda rival: (
        service_references(context.cluster, rival), rival.ref.name, rival.ref.namespace, rival.ref.kind))
    return keeper is workload


def findings_to_move(context: Context) -> set:
    """(object, port) of each KP301 finding a fix may move (not suppressed), worked out once per run."""
    derived = (context.whole_run or context.cluster).derived
    key = ("KP301 findings to move", id(context.findings))  # the run's list, alive as long as its model
    if key not in derived:
        derived[key] = {(f.subject, f.port) for f in context.findings if f.rule_id == "KP301" and not f.suppressed}
    return derived[key]


def service_references(cluster, workload) -> int:
    """How many Services select the workload's pods, counted once per cluster."""
    key = ("service references",)
    if key not in cluster.derived:
        from kubelint_ports.model.selection import selection

        index, counts = selection(cluster), {}
        for service in cluster.services:
            for selected in index.selected(service):
                counts[id(selected)] = counts.get(id(selected), 0) + 1
        cluster.derived[key] = counts
    return cluster.derived[key].get(id(workload), 0)


def conflicts_of(cluster, workload, finding: Finding, this_claim: bool) -> list:
    """The host-port conflicts of the run's allocation that hold the finding's claim (`this_claim`)
    or any claim of the workload on the finding's port, in any protocol; each (protocol, port)
    worked out once per model (3,000 findings on one port ask for the same group)."""
    from kubelint_ports.model.allocation import allocate, cliques, conflicts_on_nodes, conflicts_without_inventory

    claim = claim_of(workload, finding)
    if claim is None:
        return []
    allocation = allocate(cluster)
    known = cluster.derived.setdefault("host port conflicts", {})  # (protocol, port) -> its conflicts
    found = []
    for protocol in ((claim.protocol,) if this_claim else ("TCP", "UDP", "SCTP")):
        group = (protocol, claim.port)
        if group not in known:
            known[group] = [conflict for host_ip, clique in cliques(allocation.groups.get(group, []))
                            for conflict in (
                                conflicts_without_inventory(protocol, claim.port, host_ip, clique) if cluster.nodes
                                is None else conflicts_on_nodes(allocation, protocol, claim.port, host_ip, clique))]
        found += [conflict for conflict in known[group] if any(
            c.workload is workload and (c.claim.field_path == claim.field_path or not this_claim)
            for c in conflict.claimants)]
    return found


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
    """Of each group of KP203 findings on one nodePort, the first (by place) keeps the port when
    every claim it collides with is another finding of the group (all linted, so they move).
    `origins(finding)`: the related places that are no claim but where its own value is set (a
    chart's values key). KP301's keeper is chosen by `keeps_host_port`."""
    groups: dict[tuple[str, int | None], list[Finding]] = {}
    for finding in findings:
        if finding.rule_id == "KP203" and not finding.suppressed:  # KP301: `keeps_host_port`
            groups.setdefault((finding.rule_id, finding.port), []).append(finding)
    kept = set()
    for group in groups.values():
        first = min(group, key=place)
        # The other findings' places: a claim on the first's own place (two entries a chart writes
        # from one template line) is no other finding, and that claim does not move.
        others = {place(finding) for finding in group} - {place(first)}
        own = {place(location) for location in origins(first)}
        claims = [related for related in first.related if place(related) not in own]
        if claims and all(place(related) in others for related in claims):
            kept.add(place(first))
    return kept


# Each fix by the name a built-in policy gives it (`fix:` in `policies/*.yaml`), and the table
# of rule id -> its fix made from those names: `kubelint-ports explain` and the docs say which
# rules have one, and a new rule gets one with a line in its policy.
FIXERS = {
    "unquote-port": unquote_port,
    "remove-duplicate-service-port": remove_duplicate_service_port,
    "remove-init-host-port": remove_init_host_port,
    "move-host-port": move_host_port,
    "move-node-port": move_node_port,
    "set-cluster-cidr": set_cluster_cidr,
    "remove-unused-suppression": remove_unused_suppression,
}
FIXES = {data["id"]: FIXERS[data["fix"]] for _, data in builtin_policy_data() if "fix" in data}
