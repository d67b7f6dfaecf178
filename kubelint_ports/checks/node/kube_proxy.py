"""Node-snapshot rule on kube-proxy's own rules (KP804): the masquerade rule of KUBE-SERVICES
(`! -s <clusterCIDR> ... -j KUBE-MARK-MASQ`) missing, which means kube-proxy runs without
clusterCIDR, or exempting a range that is not the pod CIDR (incident 002).

The range is judged against what the node's dumps and the cluster say the pods and the Services
use: IPAM leases, Node podCIDRs, the running pods of `--cluster`, the cluster's pod and Service
CIDRs, and the ClusterIPs of kube-proxy's rules.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.checks.node import phrases
from kubelint_ports.checks.node.dump_context import subject
from kubelint_ports.model.datapath import masquerade_gap
from kubelint_ports.model.node_state import NodeSnapshots, NodeState


def cidr_of(text: str):
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def pod_addresses(node: NodeState, context: NodeSnapshots) -> list[tuple[str, str]]:
    """(pod IP or range, where it comes from) that the masquerade rule's CIDR must contain."""
    found = [(lease.address, f"IPAM lease line {lease.place.line}") for lease in node.leases[:50]]
    found += [(cidr, f"podCIDR of Node {node.name}") for cidr in context.node_pod_cidrs.get(node.name, ())]
    on_node = context.pods_on(node.name)
    if on_node is not None:
        found += [(ip, f"pod {pod.namespace}/{pod.name}") for ip, pod in list(on_node.items())[:50]]
    found += [(str(cidr), "the cluster's pod CIDR") for cidr in context.pod_cidrs]
    return found


def service_addresses(node: NodeState, context: NodeSnapshots) -> list[str]:
    addresses = [rule.address for rule in islice(node.cluster_ips, 200)]
    addresses += [a.address for a in node.addresses if a.interface == "kube-ipvs0"][:200]
    return addresses


def contains(cidr, item: str) -> bool:
    network = cidr_of(item)
    return network is not None and network.version == cidr.version and network.subnet_of(cidr)


@register("kube-proxy-masquerade-rule")
def kube_proxy_masquerade_rule(context: NodeSnapshots, params: Mapping[str, Any]) -> Iterator[Hit]:
    for node in context.nodes:
        mode = node.proxy_mode
        if mode not in ("ipvs", "iptables") or node.services_anchor is None:
            continue
        form = "ipvs-set" if mode == "ipvs" else "per-service"
        rules = [rule for rule in node.masquerade if rule.form == form]
        if mode == "iptables" and not node.cluster_ip_service_rules:
            continue  # no ClusterIP Services: nothing to masquerade, nothing to judge
        marking = [rule for rule in rules if rule.negated_source or rule.set_flags != "src,dst"]
        if not marking or not any(rule.negated_source for rule in rules) and all(
                rule.set_flags == "src,dst" for rule in rules):
            anchor = rules[0].place if rules else node.services_anchor
            # The `KUBE-CLUSTER-IP src,dst` rule came with kube-proxy v1.11 (kubernetes#63319): its
            # presence dates the node's kube-proxy for the datapath model.
            version = (1, 11) if rules else (1, 10) if mode == "ipvs" else None
            yield Hit(subject(node, anchor), "nat KUBE-SERVICES masquerade",
                      phrases.masquerade_rule_missing(mode, node.name, masquerade_gap(mode, version)), variant=mode)
            continue
        service_space = [cidr for cidr in context.service_cidrs]
        by_range: dict[str, object] = {}
        for rule in rules:  # iptables mode writes one per Service: judge each range once
            if rule.negated_source:
                by_range.setdefault(rule.negated_source, rule)
        for rule in by_range.values():
            cidr = cidr_of(rule.negated_source)
            if cidr is None:
                continue
            services_inside = [address for address in service_addresses(node, context) if contains(cidr, address)]
            is_service_cidr = any(cidr.version == s.version and (cidr.overlaps(s)) for s in service_space) or (
                services_inside and not any(contains(cidr, item) for item, _ in pod_addresses(node, context)))
            missing = [(item, why) for item, why in pod_addresses(node, context) if not contains(cidr, item)
                       and (cidr_of(item) is not None and cidr_of(item).version == cidr.version)]
            if is_service_cidr:
                what = phrases.masquerade_range_service(rule.negated_source,
                                                        services_inside[0] if services_inside else "")
            elif missing:
                item, why = missing[0]
                what = phrases.masquerade_range_missing(rule.negated_source, item, why)
            else:
                continue
            yield Hit(subject(node, rule.place), "nat KUBE-SERVICES masquerade",
                      phrases.masquerade_rule_wrong_range(node.name, rule.negated_source, what), variant=mode)
            break
