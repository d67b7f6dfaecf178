"""NodePort rules: allocation clashes between Services and host ports that take NodePort traffic.

Every rule looks claims up in the cluster's nodePort index (port number -> claims), so the work
is linear in the number of ports, never in pairs of objects. Each finding names a free alternative
(`model.free_ports`, the port `lint --fix --unsafe-fixes` moves to), worked out once per run of
the check, at its first finding.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any

from kubelint_ports.checks import Hit, Related, register
from kubelint_ports.checks.manifest import phrases
from kubelint_ports.checks.manifest import traffic
from kubelint_ports.checks.manifest.host_ports import HOLDER_NOUNS, HOLDER_PARAMS
from kubelint_ports.model import Cluster, NodePortClaim, Service, Workload
from kubelint_ports.model.datapath import (
    FROM_OUTSIDE,
    FROM_POD,
    HOST_PROCESS,
    HOSTPORT,
    SERVICE,
    PortUse,
    traffic_data,
)
from kubelint_ports.model.datapath.service import service_use
from kubelint_ports.model.free_ports import HeldHostPorts, free_host_port_for, free_node_port, held_host_ports

MAX_RELATED = 10


def identity(service: Service) -> tuple[str, str, str]:
    return service.ref.kind, service.ref.namespace, service.ref.name


def node_port_related(service: Service, claim: NodePortClaim) -> Related:
    return Related(service, claim.field_path, f"{claim.label} {claim.port} of {service.ref}")


def lowest_free_node_port(cluster: Cluster) -> tuple[int | None, str]:
    """The lowest free nodePort of the range, and the sentence naming it (`phrases.free_node_port`)."""
    found = free_node_port(cluster, cluster.node_daemons)
    return found, phrases.free_node_port(found, cluster.node_port_range_text)


class FreeHostPort:
    """The sentence naming the free host port nearest a colliding one (`phrases.free_host_port`),
    for the findings of one run of a host port check: the ports held on each node are worked out
    at its first finding, once."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.held: HeldHostPorts | None = None

    def find(self, workload: Workload, port: int, via: str) -> tuple[int | None, str]:
        """The free port nearest `port`, or None, and the sentence naming it ("" when None)."""
        if self.held is None:
            self.held = held_host_ports(self.cluster, self.cluster.node_daemons)
        found = free_host_port_for(self.cluster, workload, port, self.held)
        return found, phrases.free_host_port(found, port, "hostPort" if via == "hostPort" else "port",
                                             bool(self.cluster.nodes))

    def sentence(self, workload: Workload, port: int, via: str) -> str:
        return self.find(workload, port, via)[1]


@register("host-port-node-port-collision", params_schema=HOLDER_PARAMS)
def host_port_node_port_collision(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    """A hostPort's DNAT and kube-proxy's nodePort rule, or a hostNetwork pod's socket and
    kube-proxy's rule (or its health-check server), on one port: the datapath model says who wins."""
    by_number = cluster.node_ports_by_number()
    datapath = traffic.datapath_of(cluster)
    hostport = params["holder"] == "hostPort"
    noun = HOLDER_NOUNS[params["holder"]]
    free_host_port = FreeHostPort(cluster)
    for workload, claim, source in cluster.held_ports(params["holder"]):
        found = f" (undeclared, {source})" if source else ""
        if claim.port not in by_number:
            continue
        # portmap and kube-proxy rules match one protocol; a UDP nodePort leaves a TCP hostPort alone.
        owners = one_per_service((service, np) for service, np in by_number[claim.port]
                                 if np.protocol == claim.protocol)
        if not owners:
            continue
        service, node_port = owners[0]
        others = f" (and {len(owners) - 1} more)" if len(owners) > 1 else ""
        theirs = f"{node_port.label} {claim.port} of {service.ref}"
        fix = (phrases.HOST_PORT_FIX if hostport else phrases.HOST_NETWORK_FIX).format(label=node_port.label)
        related = tuple(node_port_related(s, np) for s, np in owners[:MAX_RELATED])
        free_port, free = free_host_port.find(workload, claim.port, claim.via)
        if node_port.label == "healthCheckNodePort" and not hostport:
            # kube-proxy serves health checks from its own socket: two processes, one port, no packet rule.
            yield Hit(workload, claim.field_path, phrases.health_check_clash(
                f"{noun} {claim.port}/{claim.protocol}{found}", theirs, others, fix, free, free_port,
                node_port.label, (str(service.ref),)), related, port=claim.port)
            continue
        if node_port.label == "healthCheckNodePort":
            use = PortUse(host_port_ip=claim.host_ip, host_process=True)
            words = {HOSTPORT: "this pod", HOST_PROCESS: "kube-proxy's health-check server"}
            names = {HOSTPORT: f"{workload.ref} (container '{claim.container}')",
                     HOST_PROCESS: f"kube-proxy's health-check server for {service.ref}"}
            client = FROM_POD
        else:
            use = service_use(cluster, service, PortUse(host_port_ip=claim.host_ip if hostport else None,
                                                        host_process=not hostport, node_port=True))
            mine = HOSTPORT if hostport else HOST_PROCESS
            names = {mine: f"{workload.ref} (container '{claim.container}')", SERVICE: str(service.ref)}
            words = {mine: "this pod" if hostport else "the pod's process", SERVICE: "the Service"}
            client = FROM_OUTSIDE  # whom a nodePort is for; pods and the node are the other paths
        destination = traffic.node_destination(claim.host_ip)
        answer = datapath.deliver(client, destination, use, claim.port, claim.protocol)
        paths = traffic.node_paths(datapath, use, claim.port, claim.protocol, claim.host_ip, client)
        headline = phrases.node_port_headline(answer, f"{noun} {claim.port}/{claim.protocol}", theirs, hostport,
                                              found)
        holds = not hostport and kube_proxy_may_hold_node_ports(datapath)
        yield Hit(workload, claim.field_path, phrases.node_port_collision(
            headline, others, answer, words, paths, fix, not hostport, holds, free, claim.port, free_port,
            node_port.label, (str(service.ref),)),
            related, port=claim.port, traffic=traffic_data(answer, names, paths))


def kube_proxy_may_hold_node_ports(datapath) -> bool:
    """kube-proxy held a listening socket on every nodePort until v1.23 (kubernetes#108496)."""
    version = datapath.facts.kube_proxy_version
    return version is None or version.value < (1, 24)


def one_per_service(entries) -> list[tuple[Service, NodePortClaim]]:
    """The same Service in two files (base and overlay) is one object: keep its first document."""
    first_document: dict[tuple[str, str, str], object] = {}
    kept = []
    for service, claim in entries:
        if first_document.setdefault(identity(service), service.document) is service.document:
            kept.append((service, claim))
    return kept


def legal_share(a: NodePortClaim, b: NodePortClaim) -> bool:
    """The one share the allocator allows: one Service, one `port`, TCP and UDP (53/TCP + 53/UDP)."""
    return (a.label == b.label == "nodePort" and a.service_port == b.service_port
            and a.protocol != b.protocol)


@register("node-port-collision")
def node_port_collision(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    free = None  # the lowest free nodePort and its sentence, made at the first finding
    for number, entries in cluster.node_ports_by_number().items():
        if len(entries) < 2:
            continue
        owners: dict[tuple[str, str, str], list[tuple[Service, NodePortClaim]]] = {}
        for service, claim in one_per_service(entries):
            owners.setdefault(identity(service), []).append((service, claim))
        everyone = [entry for claims in owners.values() for entry in claims]
        free = lowest_free_node_port(cluster) if free is None else free
        for key, claims in owners.items():
            yield from _within_one_service(claims, free)
            other_services = len(owners) - 1
            if not other_services:
                continue
            others = list(islice((e for e in everyone if identity(e[0]) != key), MAX_RELATED))
            other_service = others[0][0]
            more = f" (and {other_services - 1} more Service{'s' if other_services > 2 else ''})" \
                if other_services > 1 else ""
            for service, claim in claims:
                yield Hit(service, claim.field_path, phrases.with_free(phrases.node_port_taken(
                    claim.label, number, str(other_service.ref), more, free[0]), free[1]),
                    tuple(node_port_related(s, c) for s, c in others), port=number)


def _within_one_service(claims: list[tuple[Service, NodePortClaim]], free: tuple[int | None, str]) -> Iterator[Hit]:
    for position, (service, claim) in enumerate(claims):
        for _, earlier in claims[:position]:
            if not legal_share(earlier, claim):
                yield Hit(service, claim.field_path, phrases.with_free(phrases.node_port_twice(
                    claim.label, claim.port, earlier.field_path, free[0]), free[1]),
                    (node_port_related(service, earlier),), port=claim.port)
                break


@register("node-port-out-of-range")
def node_port_out_of_range(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    low, high = cluster.node_port_range
    free = None  # the lowest free nodePort and its sentence, made at the first finding
    for service in cluster.services:
        if not service.has_node_ports:
            continue
        for claim in service.node_port_claims:
            if not low <= claim.port <= high:
                free = lowest_free_node_port(cluster) if free is None else free
                yield Hit(service, claim.field_path, phrases.with_free(phrases.node_port_out_of_range(
                    claim.label, claim.port, low, high, free[0]), free[1]), port=claim.port)
