"""Node-aware rules: host port conflicts, captures of host processes and Service IPs, and ports
node daemons already use. They read the shared allocation (claims indexed by protocol/port)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, Related, register
from kubelint_ports.checks.manifest import phrases
from kubelint_ports.checks.manifest.scheduling_phrases import (  # noqa: F401 (node_addresses reads node_list here)
    SCHEDULER_MESSAGE,
    conflict_message,
    node_list,
    others_text,
    plural,
    port_text,
    selector_text,
    where_running,
)
from kubelint_ports.checks.manifest import traffic
from kubelint_ports.checks.manifest.node_ports import FreeHostPort
from kubelint_ports.records import record
from kubelint_ports.model import Cluster, Service, Workload
from kubelint_ports.model.allocation import ANY_NODE, Claimant, Conflict, allocate, conflicts, covers, pods_wanted
from kubelint_ports.model.datapath import (
    CLUSTER_IP,
    EXTERNAL_IP,
    FROM_NODE,
    FROM_POD,
    HOST_PROCESS,
    HOSTPORT,
    OTHERWISE,
    SERVICE,
    PortUse,
    traffic_data,
)
from kubelint_ports.model.datapath.service import service_use
from kubelint_ports.model.objects import HostClaim, SilentPort
from kubelint_ports.model.placement import pinned_node
from kubelint_ports.model.port_holders import is_the_daemon, reserved_ports

MAX_RELATED = 10
def claimant_related(claimant: Claimant) -> Related:
    workload = claimant.workload
    return Related(workload, claimant.claim.field_path,
                   f"{port_text(claimant.claim)} of {workload.ref}{where_running(workload)}")


# --- host-port-conflict ------------------------------------------------------------------------

@register("host-port-conflict")
def host_port_conflict(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    free_host_port = FreeHostPort(cluster)
    for conflict in conflicts(allocate(cluster)):
        # ANY_NODE: wherever each claimant runs (a DaemonSet covers the other's nodes).
        nodes = () if conflict.nodes == [ANY_NODE] else tuple(conflict.nodes)
        for claimant in conflict.claimants:
            others = [c for c in conflict.claimants if c is not claimant]
            # A pod that collides with itself (more replicas than nodes): no other port helps.
            free_port, free = (free_host_port.find(claimant.workload, conflict.port, claimant.claim.via) if others
                               else (None, ""))
            yield Hit(claimant.workload, claimant.claim.field_path,
                      phrases.with_free(conflict_message(conflict, claimant, others, free_port), free),
                      tuple(claimant_related(c) for c in others[:MAX_RELATED]), port=conflict.port, nodes=nodes)
    yield from silent_port_conflicts(cluster, free_host_port)


# --- host-port-conflict: ports hostNetwork pods listen on without declaring them ---------------------

# How sure the model is that a hostNetwork pod's process listens on a port (issue 34): a declared
# port is certain, a probe's port nearly so (the kubelet expects an answer there, on the node's
# address), a listen flag is a best effort (read from the arguments as written).
CERTAIN, NEARLY_CERTAIN, BEST_EFFORT = "certain", "nearly certain", "a best guess"
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


@record(frozen=True, slots=True)
class Listener:
    """A hostNetwork pod's process on a node port: a declared port (the scheduler sees it) or a
    silent one (`SilentPort`: a probe's port, a listen flag), with the evidence for it."""

    workload: Workload
    port: int
    host_ip: str  # "0.0.0.0": every address
    field_path: str
    evidence: str  # "declared", "undeclared, from its readinessProbe", "undeclared, from its --port flag"
    confidence: str  # CERTAIN | NEARLY_CERTAIN | BEST_EFFORT
    container: str = ""

    @property
    def silent(self) -> bool:
        return self.confidence != CERTAIN

    @property
    def claim(self) -> HostClaim:
        return HostClaim(self.port, "TCP", self.host_ip, "hostNetwork", self.container, self.field_path)

    def overlaps(self, other: "Listener") -> bool:
        return "0.0.0.0" in (self.host_ip, other.host_ip) or self.host_ip == other.host_ip

    def clashes(self, other: "Listener", allocation) -> bool:
        """Another pod's listener on the port that the scheduler may put beside this one: it keeps
        two declared ports apart by itself (the allocation's conflicts), not a silent one."""
        return (other.workload is not self.workload and (self.silent or other.silent) and self.overlaps(other)
                and allocation.may_share_node(self.workload, other.workload))


def silent_listener(workload: Workload, silent: SilentPort) -> Listener:
    """A flag backed by a probe on the same port is as sure as the probe."""
    host_ip = silent.address or "0.0.0.0"
    if silent.source.startswith("its "):
        return Listener(workload, silent.port, host_ip, silent.field_path, f"undeclared, from {silent.source}",
                        NEARLY_CERTAIN, silent.container)
    probe = next((ref.source for ref in workload.port_references
                  if ref.source in PROBES and ref.value == silent.port), None)
    evidence = f"undeclared, from its {silent.source} flag" + (f" and its {probe}" if probe else "")
    return Listener(workload, silent.port, host_ip, silent.field_path, evidence,
                    NEARLY_CERTAIN if probe else BEST_EFFORT, silent.container)


def listeners_beside_silent_ports(cluster: Cluster) -> dict[int, list[Listener]]:
    """port -> the hostNetwork pods' listeners on it, for the TCP ports some hostNetwork pod
    listens on without declaring them (declared ones alone are the allocation's: the scheduler
    keeps those apart). A hostPort is a DNAT, not a socket: host-port-host-network-capture's."""
    by_port: dict[int, list[Listener]] = defaultdict(list)
    for workload in cluster.workloads:
        for silent in workload.silent_ports:
            by_port[silent.port].append(silent_listener(workload, silent))
    if by_port:
        for workload, claim in cluster.host_claims():
            if claim.via == "hostNetwork" and claim.protocol == "TCP" and claim.port in by_port:
                by_port[claim.port].append(Listener(workload, claim.port, claim.host_ip, claim.field_path,
                                                    "declared", CERTAIN, claim.container))
    return by_port


def silent_port_conflicts(cluster: Cluster, free_host_port: FreeHostPort) -> Iterator[Hit]:
    """hostNetwork pods that listen on one node port, one of them at least without declaring it:
    the scheduler cannot keep them apart, so wherever they meet the second cannot bind the port.
    Two workloads that may share a node (the scheduler does not stop them), and the replicas of one
    workload beyond its nodes (as for declared host ports: with an inventory, or pinned)."""
    by_port = listeners_beside_silent_ports(cluster)
    if not by_port:
        return
    allocation = allocate(cluster)
    for port in sorted(by_port):
        listeners = by_port[port]
        for listener in listeners:
            workload = listener.workload
            if workload.live:
                continue
            others = [other for other in listeners if listener.clashes(other, allocation)]
            if others:
                yield silent_pair_hit(allocation, free_host_port, listener, others)
            elif listener.silent:
                yield from silent_replicas_hit(allocation, listener)


def silent_pair_hit(allocation, free_host_port: FreeHostPort, listener: Listener, others: list[Listener]) -> Hit:
    workload = listener.workload
    shared: set[str] = set()
    for other in others:
        shared.update(allocation.shared_nodes(workload, other.workload))
    nodes = tuple(sorted(shared))
    meeting, where = meeting_place(allocation, listener, others, nodes)
    names = ", ".join(f"{o.workload.ref} {listener_note(o)}{where_running(o.workload)}" for o in others[:3])
    if len(others) > 3:
        names += f" and {len(others) - 3} more"
    undeclared = sorted({str(x.workload.ref) for x in (listener, *others) if x.silent})
    free_port, free = free_host_port.find(workload, listener.port, "hostNetwork")
    message = phrases.silent_port_conflict(
        listener_text(listener, with_pods=True), names, len(others), meeting, where, len(nodes) or 1, undeclared,
        any(x.confidence == BEST_EFFORT for x in (listener, *others)), listener.port, listener_port(listener),
        [str(o.workload.ref) for o in others], free_port)
    related = tuple(Related(o.workload, o.field_path,
                            f"port {o.port} of hostNetwork {o.workload.ref} ({o.evidence}){where_running(o.workload)}")
                    for o in others[:MAX_RELATED])
    return Hit(workload, listener.field_path, phrases.with_free(message, free), related, port=listener.port,
               nodes=nodes)


def meeting_place(allocation, listener: Listener, others: list[Listener], shared: tuple[str, ...]) -> tuple[str, str]:
    """(how the pods meet, the nodes' names): with an inventory, on nodes they share ("same" when
    certain: `surely_meet`, else "shared"); without one, beside a DaemonSet that runs on every node
    the other may use ("their-daemonset", "this-daemonset"), on the node all are pinned to
    ("pinned"), or wherever nothing keeps them apart ("anywhere")."""
    workload = listener.workload
    if allocation.cluster.nodes is not None:
        sure = all(surely_meet(allocation, workload, o.workload) for o in others)
        return ("same" if sure else "shared"), node_list(list(shared))
    if all(covers(o.workload, workload) for o in others):
        return "their-daemonset", ""
    if all(covers(workload, o.workload) for o in others):
        return "this-daemonset", ""
    pins = {pinned_node(x.workload.scheduling) for x in (listener, *others)}
    if len(pins) == 1 and None not in pins:
        return "pinned", pins.pop()
    return "anywhere", ""


def surely_meet(allocation, a: Workload, b: Workload) -> bool:
    """With an inventory: every node one may use holds a pod of the other (a DaemonSet's, a running
    pod's, or the one node a workload fits)."""
    def occupied(workload: Workload) -> set[str]:
        eligible = allocation.eligible(workload)
        if workload.is_daemonset or workload.live or len(eligible) == 1:
            return set(eligible)
        return set()
    return set(allocation.eligible(a)) <= occupied(b) or set(allocation.eligible(b)) <= occupied(a)


def silent_replicas_hit(allocation, listener: Listener) -> Iterator[Hit]:
    """More replicas than nodes (with an inventory, or pinned to one node without): the scheduler,
    blind to the port, doubles them up."""
    workload = listener.workload
    wanted = pods_wanted(workload)
    if workload.is_daemonset or wanted < 2:
        return
    if allocation.cluster.nodes is not None:
        nodes = list(allocation.eligible(workload))
    else:
        node = pinned_node(workload.scheduling)
        nodes = [node] if node else []
    if not nodes or wanted <= len(nodes):
        return
    yield Hit(workload, listener.field_path, phrases.silent_port_replicas(
        workload.ref.kind, workload.pods, listener_text(listener), len(nodes), node_list(nodes),
        wanted - len(nodes), listener.confidence == BEST_EFFORT, listener.port, listener_port(listener)),
        port=listener.port, nodes=tuple(nodes))


def listener_note(listener: Listener, with_pods: bool = True) -> str:
    """"(1 pod; undeclared, from its readinessProbe, nearly certain)": no ": " (a message's claim
    ends at its first one, `findings.split_message`)."""
    pods = f"{listener.workload.pods}; " if with_pods else ""
    return f"({pods}{listener.evidence}, {listener.confidence})"


def listener_port(listener: Listener) -> str:
    """`hostNetwork port 8080/TCP`, undeclared ones said so (a headline's words)."""
    on_ip = f" on {listener.host_ip}" if listener.host_ip != "0.0.0.0" else ""
    return f"{'undeclared ' if listener.silent else ''}hostNetwork port {listener.port}/TCP{on_ip}"


def listener_text(listener: Listener, with_pods: bool = False) -> str:
    on_ip = f" on {listener.host_ip}" if listener.host_ip != "0.0.0.0" else ""
    return f"hostNetwork port {listener.port}/TCP{on_ip} {listener_note(listener, with_pods)}"


# --- host-port-host-network-capture --------------------------------------------------------------

@register("host-port-host-network-capture")
def host_port_host_network_capture(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    """A hostNetwork pod's declared ports are host ports: the scheduler keeps hostPort pods off
    its node (host-port-conflict reports what cannot fit). Ports it listens on *without* declaring
    them are invisible to the scheduler, and there the hostPort's DNAT wins."""
    silent: dict[int, list[tuple[Workload, SilentPort]]] = defaultdict(list)
    for workload in cluster.workloads:
        for port in workload.silent_ports:
            silent[port.port].append((workload, port))
    if not silent:
        return
    allocation = allocate(cluster)
    for workload, claim in cluster.host_claims():
        if claim.via != "hostPort" or claim.protocol != "TCP" or claim.port not in silent:
            continue
        victims = [(host, port) for host, port in silent[claim.port]
                   if host is not workload and bound_together(claim, port)
                   and allocation.may_share_node(workload, host)]
        if victims:
            yield from capture_hits(allocation, Claimant(workload, claim), victims)


def bound_together(claim: HostClaim, silent: SilentPort) -> bool:
    """A hostPort on one IP leaves a listener bound to another IP alone."""
    return claim.host_ip == "0.0.0.0" or not silent.address or silent.address == claim.host_ip


def capture_hits(allocation, dnat: Claimant, victims: list[tuple[Workload, SilentPort]]) -> Iterator[Hit]:
    host, silent = victims[0]
    shared = allocation.shared_nodes(dnat.workload, host)
    every_shared = set(shared).union(*(allocation.shared_nodes(dnat.workload, h) for h, _ in victims[1:]))
    nodes = tuple(sorted(every_shared))
    where = f" ({node_list(shared)})" if shared else ""
    more = f" (and {len(victims) - 1} more)" if len(victims) > 1 else ""
    claim = dnat.claim
    datapath = traffic.datapath_of(allocation.cluster)
    use = PortUse(host_port_ip=claim.host_ip, host_process=True)
    answer = datapath.deliver(FROM_POD, traffic.node_destination(claim.host_ip), use, claim.port, claim.protocol)
    paths = traffic.node_paths(datapath, use, claim.port, claim.protocol, claim.host_ip)
    names = {HOSTPORT: f"{dnat.workload.ref} (container '{claim.container}')", HOST_PROCESS: f"{host.ref}"}
    words = {HOSTPORT: str(dnat.workload.ref), HOST_PROCESS: f"the process of {host.ref.name}"}
    message = phrases.host_network_capture(port_text(claim), answer.always(HOSTPORT), silent.port, str(host.ref),
                                           more, where_running(host), silent.source, where, answer, words, paths,
                                           host.ref.name)
    related = tuple(Related(h, p.field_path, f"port {p.port} of hostNetwork {h.ref} ({p.source})")
                    for h, p in victims[:MAX_RELATED])
    data = traffic_data(answer, names, paths)
    if not dnat.workload.live:
        yield Hit(dnat.workload, claim.field_path, message, related, port=claim.port, traffic=data, nodes=nodes)
    else:
        for h, p in victims:
            if not h.live:
                yield Hit(h, p.field_path, message, (claimant_related(dnat),), port=p.port, traffic=data,
                          nodes=tuple(allocation.shared_nodes(dnat.workload, h)))


# --- node-reserved-port ---------------------------------------------------------------------------

RESERVED_PORT_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["port", "daemon"],
        "properties": {
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            "protocol": {"enum": ["TCP", "UDP", "SCTP"]},
            "daemon": {"type": "string", "minLength": 1},
        },
    },
}


@register("node-reserved-port", params_schema={
    "type": "object",
    "additionalProperties": False,
    "properties": {"ports": RESERVED_PORT_SCHEMA, "extra_ports": RESERVED_PORT_SCHEMA},
})
def node_reserved_port(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    reserved = reserved_ports(params)
    told: set[tuple[int, str]] | None = None
    for workload, claim, source in cluster.held_ports():
        daemon = reserved.get((claim.protocol, claim.port))
        if daemon is None or not claim.on_the_node or is_the_daemon(workload, claim, daemon):
            continue
        if told is None:
            told = told_by_host_port_conflict(cluster, reserved)
        if (id(workload), claim.field_path) in told:
            continue
        data = answer = None
        words = {HOSTPORT: "this pod", HOST_PROCESS: daemon}
        if claim.via == "hostPort":
            answer = traffic.datapath_of(cluster).deliver(
                FROM_POD, traffic.node_destination(claim.host_ip),
                PortUse(host_port_ip=claim.host_ip, host_process=True), claim.port, claim.protocol)
            data = traffic_data(answer, {HOSTPORT: f"{workload.ref} (container '{claim.container}')",
                                         HOST_PROCESS: daemon})
        how = f", undeclared, {source}" if source else ""
        yield Hit(workload, claim.field_path, phrases.reserved_port(
            port_text(claim), f"container '{claim.container}'{how}", daemon, answer, words, claim.container),
            port=claim.port, traffic=data)


def told_by_host_port_conflict(cluster: Cluster, reserved: Mapping[tuple[str, int], str]) -> set[tuple[int, str]]:
    """The claims (workload, field path) that host-port-conflict reports against the node daemon's
    own pods: when the daemon runs from the inputs (node-exporter's DaemonSet) and the scheduler
    keeps the two apart, that conflict is the story, and "this is node-exporter's port" would say
    it twice on the same line. The same for ports hostNetwork pods listen on without declaring
    them, beside the daemon's own pods (`silent_port_conflicts`)."""
    told: set[tuple[int, str]] = set()
    for conflict in conflicts(allocate(cluster)):
        daemon = reserved.get((conflict.protocol, conflict.port))
        if daemon is None or not any(is_the_daemon(c.workload, c.claim, daemon) for c in conflict.claimants):
            continue
        told.update((id(c.workload), c.claim.field_path) for c in conflict.claimants)
    allocation = allocate(cluster)
    for port, listeners in listeners_beside_silent_ports(cluster).items():
        daemon = reserved.get(("TCP", port))
        for own in (x for x in listeners if daemon is not None and is_the_daemon(x.workload, x.claim, daemon)):
            rivals = [other for other in listeners if own.clashes(other, allocation)]
            if rivals:
                told.update((id(x.workload), x.field_path) for x in (own, *rivals))
    return told


# --- host-port-service-port-capture -----------------------------------------------------------------

# Services every cluster has (DOMAIN.md B): assumed unless --cluster shows the real ones.
DEFAULT_SERVICES = (
    ("default", "kubernetes", "https", "TCP", 443, "the API server; every pod on the node loses it, kubernetes#61938"),
    ("kube-system", "kube-dns", "dns", "UDP", 53, "cluster DNS"),
    ("kube-system", "kube-dns", "dns-tcp", "TCP", 53, "cluster DNS"),
    ("kube-system", "kube-dns", "metrics", "TCP", 9153, "CoreDNS metrics"),
)


@record(frozen=True, slots=True)
class ServiceTarget:
    """A Service port whose ClusterIP (and external or load-balancer IPs) a hostPort may take."""

    service: Service | None  # None: a Service every cluster has, not among the inputs
    service_port: Any
    label: str  # "db/Service/mysql-a"
    port: int
    protocol: str
    external: bool = False  # has externalIPs or load-balancer IPs
    note: str = ""  # what the default Service is


def service_targets(cluster: Cluster) -> dict[tuple[str, int], list[ServiceTarget]]:
    by_port: dict[tuple[str, int], list[ServiceTarget]] = defaultdict(list)
    for service in cluster.services:
        if service.is_headless or service.type == "ExternalName":
            continue
        for service_port in service.ports:
            if service_port.port:
                by_port[(service_port.protocol, service_port.port)].append(ServiceTarget(
                    service, service_port, str(service.ref), service_port.port, service_port.protocol,
                    bool(service.external_ips or service.load_balancer_ips)))
    if not any(service.live for service in cluster.services):
        present = {(s.ref.namespace, s.ref.name) for s in cluster.services}
        for namespace, name, _, protocol, port, note in DEFAULT_SERVICES:
            if (namespace, name) not in present:
                by_port[(protocol, port)].append(ServiceTarget(
                    None, None, f"{namespace}/Service/{name}", port, protocol, note=note))
    return by_port


@register("host-port-service-port-capture")
def host_port_service_port_capture(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    by_port = service_targets(cluster)
    allocation = allocate(cluster) if cluster.nodes is not None else None
    for workload, claim in cluster.host_claims():
        # portmap adds `-d hostIP` to the DNAT rule of a hostPort with a hostIP: no Service IP matches.
        if claim.via != "hostPort" or claim.host_ip != "0.0.0.0":
            continue
        hits = [(target, hit) for target in by_port.get((claim.protocol, claim.port), ())
                if target.service is None or not selects_itself(target.service, target.service_port, workload, claim)
                for hit in service_capture_hits(cluster, workload, claim, target, allocation)]
        yield from one_per_host_port(workload, claim, hits)


def one_per_host_port(workload: Workload, claim: HostClaim, hits: list[tuple[ServiceTarget, Hit]]) -> Iterator[Hit]:
    """One finding per hostPort, naming every Service whose port it may take (one nginx hostPort
    on 443 against eight Services on 443 was eight findings); hits about a running pod (subject:
    the Service) stay one per Service. The strongest case speaks for the rest. The Services are
    named from their targets, not from the hits' related places: a Service every cluster has
    (`default/kubernetes`) is among no inputs and has no place to relate."""
    own = [(target, hit) for target, hit in hits if hit.subject is workload]
    yield from (hit for _, hit in hits if hit.subject is not workload)
    if len(own) <= 1:
        yield from (hit for _, hit in own)
        return
    strongest = next((hit for _, hit in own if hit.variant == "captured"), own[0][1])
    # The Services every cluster has first: the API server lost is the worst of it (kubernetes#61938),
    # and the list shows five names.
    labels = [target_name(target) for target, _ in sorted(own, key=lambda pair: pair[0].service is not None)]
    message = phrases.service_capture_many(claim.port, claim.protocol, strongest.variant == "captured",
                                           labels, strongest.message)
    yield Hit(workload, claim.field_path, message, tuple(r for _, hit in own for r in hit.related),
              variant=strongest.variant, port=claim.port, traffic=strongest.traffic)


def target_name(target: ServiceTarget) -> str:
    """A Service as a list of several names it: a default one says what it is ("the API server")."""
    what = target.note.split(";", 1)[0].strip()
    return f"{target.label} ({what})" if what else target.label


def selects_itself(service: Service, service_port, workload: Workload, claim: HostClaim) -> bool:
    """The Service in front of this very pod and port: its traffic was going there anyway."""
    if service.ref.namespace != workload.ref.namespace or not service.selector:
        return False
    if any(workload.pod_labels.get(key) != value for key, value in service.selector.items()):
        return False
    target = service_port.target_port if service_port.target_port is not None else service_port.port
    return target in (claim.container_port, claim.port_name)


def service_capture_hits(cluster: Cluster, workload: Workload, claim: HostClaim, target: ServiceTarget,
                         allocation) -> Iterator[Hit]:
    nodes = ""
    if allocation is not None:
        eligible = list(allocation.eligible(workload))
        if not eligible:
            return
        nodes = f" on {node_list(eligible)}"
    datapath = traffic.datapath_of(cluster)
    use = service_use(cluster, target.service, PortUse(host_port_ip=claim.host_ip, service_port=True))
    asked = [("node-to-service", datapath.deliver(FROM_NODE, CLUSTER_IP, use, claim.port, claim.protocol))]
    if target.external:
        asked.append(("external-addresses", datapath.deliver(FROM_POD, EXTERNAL_IP, use, claim.port, claim.protocol)))
    answer = datapath.deliver(FROM_POD, CLUSTER_IP, use, claim.port, claim.protocol).focus(HOSTPORT)
    asked = [(label, other.focus(HOSTPORT)) for label, other in asked]
    if not answer.possible(HOSTPORT) and not any(other.possible(HOSTPORT) for _, other in asked):
        return  # the Service keeps its traffic whatever the unknown facts are
    captured = any(one.always_but_for_history(HOSTPORT) for one in (answer, *(other for _, other in asked)))
    names = {HOSTPORT: f"{workload.ref} (container '{claim.container}')", SERVICE: target.label}
    words = {HOSTPORT: "this pod", SERVICE: "the Service", OTHERWISE: "otherwise the Service keeps it"}
    what = f" ({target.note})" if target.note else ""
    message = phrases.service_capture(claim.port, claim.protocol, captured, target.label, what, nodes, answer,
                                      words, asked)
    variant = "captured" if captured else "possible"
    data = traffic_data(answer, names, asked)
    if target.service is None or not workload.live:
        related = () if target.service is None else (
            Related(target.service, f"{target.service_port.field_path}.port", f"port {target.port} of {target.label}"),)
        if not workload.live:
            yield Hit(workload, claim.field_path, message, related, variant=variant, port=claim.port, traffic=data)
    else:
        yield Hit(target.service, f"{target.service_port.field_path}.port", message,
                  (Related(workload, claim.field_path, f"hostPort {claim.port} of {workload.ref}"
                                                       f"{where_running(workload)}"),), variant=variant,
                  port=claim.port, traffic=data)
