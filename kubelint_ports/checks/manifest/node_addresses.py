"""Addresses that belong to nodes (the inventory's `status.addresses`): a Service exposed on a
node's own address, and a hostPort bound to an address its nodes do not have."""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from kubelint_ports.checks import Hit, Related, register
from kubelint_ports.checks.manifest import phrases
from kubelint_ports.checks.manifest import traffic
from kubelint_ports.checks.manifest.node_model import node_list, selects_itself
from kubelint_ports.model import Cluster
from kubelint_ports.model.allocation import allocate
from kubelint_ports.model.datapath import (
    EXTERNAL_IP,
    FROM_NODE,
    FROM_OUTSIDE,
    FROM_POD,
    HOST_PROCESS,
    HOSTPORT,
    NODE_IP,
    SERVICE,
    PortUse,
    traffic_data,
)
from kubelint_ports.model.datapath.service import service_use
from kubelint_ports.model.objects import WILDCARD_HOST_IP

MAX_RELATED = 10


@lru_cache(maxsize=4096)  # the nodes' addresses, asked for by two rules a run (0.01 s on 500 nodes)
def normal(ip: str) -> str:
    """One spelling per address (`::0:1` and `::1` are one IPv6 address)."""
    try:
        return str(ipaddress.ip_address(ip.strip()))
    except ValueError:
        return ip.strip()


def address_owners(cluster: Cluster) -> dict[str, list[str]]:
    """Node address -> the names of the nodes that have it."""
    owners: dict[str, list[str]] = defaultdict(list)
    for node in cluster.nodes or ():
        for _, address in node.addresses:
            owners[normal(address)].append(node.name)
    return owners


# --- external-ip-host-port-collision ---------------------------------------------------------------

@register("external-ip-host-port-collision")
def external_ip_host_port_collision(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    """kube-proxy accepts a Service's `port` on its externalIPs and load-balancer IPs (iptables,
    IPVS and nftables alike) and DNATs it to the endpoints before any socket of the node sees it."""
    if not cluster.nodes:
        return
    owners = address_owners(cluster)
    allocation = allocate(cluster)
    silent = defaultdict(list)
    for workload in cluster.workloads:
        for port in workload.silent_ports:
            silent[port.port].append((workload, port))
    for service in cluster.services:
        if service.is_headless or service.type == "ExternalName":
            continue
        for address in service.addresses:
            nodes = owners.get(normal(address.ip))
            if not nodes:
                continue
            for port in service.ports:
                if port.port is None:
                    continue
                victims = []
                for claimant in allocation.groups.get((port.protocol, port.port), ()):
                    workload, claim = claimant.workload, claimant.claim
                    if not claim.on_the_node or claim.host_ip not in (WILDCARD_HOST_IP, address.ip) or \
                            selects_itself(service, port, workload, claim):
                        continue
                    if shared := [n for n in allocation.eligible(workload) if n in nodes]:
                        noun = "the hostPort pod" if claim.via == "hostPort" else "hostNetwork"
                        victims.append((workload, claim.field_path, claim.via, shared, f"{noun} {workload.ref}"))
                for workload, silent_port in silent.get(port.port, ()) if port.protocol == "TCP" else ():
                    if silent_port.address and silent_port.address != address.ip:
                        continue
                    if shared := [n for n in allocation.eligible(workload) if n in nodes]:
                        victims.append((workload, silent_port.field_path, "hostNetwork", shared,
                                        f"hostNetwork {workload.ref} ({silent_port.source})"))
                if victims:
                    yield from collision_hits(cluster, service, port, address, victims)


def collision_hits(cluster: Cluster, service, port, address, victims) -> Iterator[Hit]:
    """One finding per Service port and address; the datapath model says who gets the packets."""
    _, _, _, shared, label = victims[0]
    more = f" (and {len(victims) - 1} more)" if len(victims) > 1 else ""
    host_ports = [v for v in victims if v[2] == "hostPort"]
    processes = [v for v in victims if v[2] == "hostNetwork"]
    # Every hostPort here listens on this address (all addresses, or bound to it): the same rule match.
    use = service_use(cluster, service, PortUse(host_port_ip=WILDCARD_HOST_IP if host_ports else None,
                                                host_process=bool(processes), service_port=True,
                                                external_ip_on_node=True))
    datapath = traffic.datapath_of(cluster)
    answer = datapath.deliver(FROM_POD, EXTERNAL_IP, use, port.port, port.protocol)
    paths = [("node", datapath.deliver(FROM_NODE, EXTERNAL_IP, use, port.port, port.protocol))]
    if use.external_local:  # only then do clients outside the node fare differently from pods
        paths.insert(0, ("outside", datapath.deliver(FROM_OUTSIDE, EXTERNAL_IP, use, port.port, port.protocol)))
    names = {SERVICE: str(service.ref)}
    words = {SERVICE: f"the Service {service.ref.name}"}
    if host_ports:
        names[HOSTPORT] = " or ".join(dict.fromkeys(str(v[0].ref) for v in host_ports))
        words[HOSTPORT] = "the hostPort pod"
    if processes:
        names[HOST_PROCESS] = " or ".join(dict.fromkeys(str(v[0].ref) for v in processes))
        words[HOST_PROCESS] = "the process on the node"
    variant = "host-network" if processes else "host-port"
    message = phrases.external_ip_collision(address.label, address.ip, port.port, port.protocol, node_list(shared),
                                            label, more, answer, words, paths, str(victims[0][0].ref))
    related = (Related(service, address.field_path, f"{address.label} {address.ip} of {service.ref}"),)
    related += tuple(Related(w, path, f"port {port.port} of {text}") for w, path, _, _, text in victims[:MAX_RELATED])
    data = traffic_data(answer, names, paths)
    if not service.live:
        yield Hit(service, f"{port.field_path}.port", message, related, variant=variant, port=port.port,
                  traffic=data)
        return
    for victim, path, _, _, _ in victims:
        if not victim.live:
            yield Hit(victim, path, message, (Related(service, f"{port.field_path}.port",
                                                      f"port {port.port} of {service.ref}"),),
                      variant=variant, port=port.port, traffic=data)


# --- host-ip-not-on-node ------------------------------------------------------------------------------

@register("host-ip-not-on-node")
def host_ip_not_on_node(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    if not cluster.nodes:
        return
    owners = address_owners(cluster)
    allocation = allocate(cluster)
    for workload, claim in cluster.host_claims():
        if claim.via != "hostPort" or not specific_address(claim.host_ip):
            continue
        eligible = allocation.eligible(workload)
        holders = owners.get(normal(claim.host_ip), [])
        if not eligible or set(eligible) & set(holders):
            continue
        elsewhere = f"it belongs to {node_list(holders)}, where this pod cannot run" if holders else \
            "no node in the inventory has it"
        # The model's answer for the node's own addresses, which the rule's `-d hostIP` never matches.
        answer = traffic.datapath_of(cluster).deliver(FROM_POD, NODE_IP, PortUse(host_port_ip=claim.host_ip),
                                                      claim.port, claim.protocol)
        words = {HOSTPORT: "the hostPort pod"}
        yield Hit(workload, f"{claim.field_path.rpartition('.')[0]}.hostIP", phrases.host_ip_not_on_node(
            claim.host_ip, elsewhere, claim.port, claim.protocol, node_list(list(eligible)), answer, words),
            port=claim.port, traffic=traffic_data(answer, {HOSTPORT: f"{workload.ref} (container '{claim.container}')"}))


def specific_address(host_ip: str) -> bool:
    """A hostIP naming one address: not a wildcard, not loopback (every node has those)."""
    try:
        address = ipaddress.ip_address(host_ip.strip())
    except ValueError:
        return False
    return not (address.is_unspecified or address.is_loopback)
