"""kube-proxy and CIDR rules: the cluster's own configuration (DOMAIN.md D and E, incident 002).

Every rule reads `cluster.network` (model.cluster_network): kube-proxy configurations, Service and pod
ranges with the place that states them, and values that are not CIDRs. Ranges are compared per
IP family, so a dual-stack pair is two ranges and an IPv4 range never meets an IPv6 one.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from kubelint_ports.checks import Hit, Related, register
from kubelint_ports.checks.manifest import network_phrases as phrases
from kubelint_ports.model import Cluster
from kubelint_ports.model.datapath import (
    FROM_POD,
    NODE_IP,
    WILDCARD,
    Datapath,
    DatapathFacts,
    Fact,
    PortUse,
    masquerade_gap,
    masqueraded,
    version_text,
)
from kubelint_ports.model.cluster_network import CidrSource, NetworkConfig, ProxyConfig, cidr_text, family_name

MAX_RELATED = 10
KNOWN_MODES = ("ipvs", "iptables", "nftables")


def network_of(cluster: Cluster) -> NetworkConfig | None:
    return cluster.network


NetworkCheck = Callable[[NetworkConfig, Cluster], Iterator[Hit]]


def network_check(name: str) -> Callable[[NetworkCheck], Callable]:
    """Register a rule of the cluster's network configuration: `function(network, cluster)`, run
    only when the inputs built one (`cluster.network`). None of these rules takes params."""
    def decorate(function: NetworkCheck) -> Callable:
        @functools.wraps(function)
        def check(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
            network = network_of(cluster)
            if network is not None:
                yield from function(network, cluster)
        return register(name)(check)
    return decorate


def source_related(source: CidrSource, message: str = "") -> Related | None:
    """A related place for a range; None for a command-line option (no file to point at)."""
    if source.owner is None:
        return None
    return Related(source.owner, source.field_path, message or f"{source.label}: {source.text}")


def related_places(entries) -> tuple[Related, ...]:
    places = [entry for entry in entries if entry is not None]
    return tuple(places[:MAX_RELATED])


def more(count: int) -> str:
    return f" (and {count} more)" if count > 0 else ""


def pod_cidr(network: NetworkConfig) -> tuple[str, str]:
    """(`10.244.0.0/16`, the labels of the settings that state it) when other inputs know the pod
    CIDR; ("", "") else."""
    found = [(version, source) for version in (4, 6) if (source := network.cluster_pod_range(version)) is not None]
    if not found:
        return "", ""
    first = found[0][1]
    if all(source is first for _, source in found):
        value = cidr_text(first.networks)  # one source for both families: keep its order
    else:
        value = ",".join(str(source.of_family(version)[0]) for version, source in found)
    return value, " and ".join(dict.fromkeys(source.label for _, source in found))


def pod_cidr_advice(network: NetworkConfig, proxy: ProxyConfig) -> str:
    """`--cluster-cidr=10.244.0.0/16 (the pod CIDR, from ...)`, when other inputs know the pod CIDR."""
    value, labels = pod_cidr(network)
    if not value:
        return ""
    setting = f"--cluster-cidr={value}" if proxy.from_flags else f"clusterCIDR: {value}"
    return f"{setting} (the pod CIDR, from {labels})"


# --- KP400 -----------------------------------------------------------------------------------

@network_check("invalid-cidr")
def invalid_cidr(network: NetworkConfig, cluster: Cluster) -> Iterator[Hit]:
    for invalid in network.invalid:
        if invalid.owner.live:
            continue
        yield Hit(invalid.owner, invalid.field_path,
                  phrases.invalid_cidr(invalid.label, invalid.text, invalid.problem, invalid.effect))


# --- KP401 -----------------------------------------------------------------------------------

@network_check("kube-proxy-cluster-cidr-missing")
def kube_proxy_cluster_cidr_missing(network: NetworkConfig, cluster: Cluster) -> Iterator[Hit]:
    for proxy in network.proxies:
        if proxy.owner.live or not proxy.missing_cluster_cidr:
            continue
        if not proxy.uses_cluster_cidr or proxy.masquerade_all:
            continue  # local traffic is told apart another way, or everything is masqueraded anyway
        harm, gaps, variant = masquerade_harm(cluster, proxy.effective_mode)
        pods = pods_harm(cluster, proxy.effective_mode)
        ignored = [flag for flag in proxy.ignored_flags if flag.name == "cluster-cidr"]
        field_path = proxy.cluster_cidr_path or proxy.anchor_path
        related = [Related(proxy.launcher, flag.field_path, f"ignored because of --config: {flag.text}")
                   for flag in ignored if proxy.launcher is not None]
        yield Hit(proxy.owner, field_path, phrases.cluster_cidr_missing(
            proxy.cluster_cidr_setting, "empty" if proxy.cluster_cidr_path else "not set", proxy.label,
            str(proxy.owner.ref), harm, gaps, pods, pod_cidr_advice(network, proxy), pod_cidr(network)[0],
            ignored[0].text if ignored else "", str(proxy.launcher.ref) if proxy.launcher else "the DaemonSet"),
            related_places(related), variant=variant)


def masquerade_harm(cluster: Cluster, mode: str) -> tuple[str, tuple, str]:
    """What breaks without clusterCIDR, per plausible kube-proxy version (model.datapath), the
    gaps it tells, and the variant: `node-clients` when node processes may reach no Service, else
    `off-cluster-clients`."""
    version = cluster.datapath.facts.kube_proxy_version if cluster.datapath is not None else None
    gaps = masquerade_gap(mode, version.value if version else None)
    variant = "node-clients" if any(gap.node_clients_broken for gap in gaps) else "off-cluster-clients"
    known = f" (kube-proxy {version_text(version.value)} from {version.source})" if version and len(gaps) == 1 else ""
    return phrases.masquerade_harm(mode, gaps, known), gaps, variant


def pods_harm(cluster: Cluster, mode: str) -> str:
    """What the model says of pods' packets for an externalTrafficPolicy: Local NodePort on a node
    without its endpoint once kube-proxy has no local detector, when that differs from a kube-proxy
    with one (iptables and nftables mode; IPVS serves such NodePorts the same either way); "" else."""
    if mode not in KNOWN_MODES:
        return ""
    facts = cluster.datapath.facts if cluster.datapath is not None else DatapathFacts()
    facts = replace(facts, proxy_mode=Fact(mode, "kube-proxy's mode"))
    without = Datapath(replace(facts, local_detector=Fact(False, "no clusterCIDR")))
    detected = Datapath(replace(facts, local_detector=Fact(True, "a clusterCIDR")))
    use = PortUse(node_port=True, endpoints=True, external_local=True, local_endpoints=False)
    bare = without.deliver(FROM_POD, NODE_IP, use, 0)
    if {route for _, route in bare.worlds} == {route for _, route in detected.deliver(FROM_POD, NODE_IP, use, 0).worlds}:
        return ""
    hostport = without.deliver(FROM_POD, NODE_IP, replace(use, host_port_ip=WILDCARD), 0)
    return phrases.pods_not_short_circuited(hostport, bare) + " "


# --- KP402 -----------------------------------------------------------------------------------

def checked_cluster_cidrs(proxy: ProxyConfig):
    """The clusterCIDR ranges a rule may judge: written (not derived from podSubnet), valid, used."""
    if proxy.owner.live or proxy.derived_from is not None or not proxy.cluster_cidr_known:
        return ()
    if not proxy.uses_cluster_cidr:
        return ()
    return proxy.cluster_cidrs


@network_check("kube-proxy-cluster-cidr-overlaps-service-cidr")
def kube_proxy_cluster_cidr_overlaps_service_cidr(network: NetworkConfig, cluster: Cluster) -> Iterator[Hit]:
    for proxy in network.proxies:
        for cluster_range in checked_cluster_cidrs(proxy):
            overlapping = [(source, service_range) for source in network.service_ranges
                           for service_range in source.of_family(cluster_range.version)
                           if cluster_range.overlaps(service_range)]
            if not overlapping:
                continue
            first, first_range = overlapping[0]
            mode = proxy.effective_mode
            if not masqueraded(mode, "node", cluster_cidr="services"):
                harm = "node-clients-unanswered"
            elif masqueraded(mode, "pod", cluster_cidr="services"):
                harm = "pods-masqueraded"
            else:
                continue
            words = phrases.cluster_cidr_overlaps_service_cidr(
                proxy.cluster_cidr_setting, str(cluster_range), proxy.label, str(proxy.owner.ref), str(first_range),
                first.label, more(len(overlapping) - 1), harm, pod_cidr_advice(network, proxy), pod_cidr(network)[0])
            yield Hit(proxy.owner, proxy.cluster_cidr_path or proxy.anchor_path, words,
                related_places(source_related(source, f"{source.label}: {r}") for source, r in overlapping))


# --- KP403 -----------------------------------------------------------------------------------

@network_check("kube-proxy-cluster-cidr-excludes-pod-cidr")
def kube_proxy_cluster_cidr_excludes_pod_cidr(network: NetworkConfig, cluster: Cluster) -> Iterator[Hit]:
    for proxy in network.proxies:
        cluster_ranges = checked_cluster_cidrs(proxy)
        if not cluster_ranges:
            continue
        for version in (4, 6):
            mine = [r for r in cluster_ranges if r.version == version]
            outside = [(source, pod_range) for source in network.pod_ranges for pod_range in source.of_family(version)
                       if not any(pod_range.subnet_of(r) for r in mine)]
            if not outside:
                continue
            source, pod_range = outside[0]
            advice = pod_cidr_advice(network, proxy)
            yield Hit(proxy.owner, proxy.cluster_cidr_path or proxy.anchor_path, phrases.pods_outside_cluster_cidr(
                proxy.cluster_cidr_setting, proxy.label, str(proxy.owner.ref), source.label, str(pod_range),
                len(outside) - 1, str(mine[0]) if mine else "", cidr_text(cluster_ranges), family_name(version),
                masqueraded(proxy.effective_mode, "pod", cluster_cidr="elsewhere"),
                'Set ' + advice if advice else 'Set it to the pod CIDR that holds every node podCIDR',
                pod_cidr(network)[0]),
                related_places(source_related(s, f"{s.label}: {r}") for s, r in outside))


# --- KP404 -----------------------------------------------------------------------------------

@network_check("service-cidr-overlaps-pod-cidr")
def service_cidr_overlaps_pod_cidr(network: NetworkConfig, cluster: Cluster) -> Iterator[Hit]:
    """Reported at the Service range; at the pod range when the Service range is not in a linted file."""
    reported: dict[tuple[int, int], list] = {}  # (id of subject source, family) -> overlapping ranges
    order: list[tuple[CidrSource, int]] = []
    for service in network.service_ranges:
        for service_range in service.networks:
            for pod in network.pod_ranges:
                for pod_range in pod.of_family(service_range.version):
                    if not service_range.overlaps(pod_range):
                        continue
                    if service.reportable:
                        subject, other, subject_range, other_range = service, pod, service_range, pod_range
                    elif pod.reportable:
                        subject, other, subject_range, other_range = pod, service, pod_range, service_range
                    else:
                        continue
                    key = (id(subject), subject_range.version)
                    if key not in reported:
                        reported[key] = []
                        order.append((subject, subject_range.version))
                    reported[key].append((subject_range, other, other_range))
    for subject, version in order:
        overlaps = reported[(id(subject), version)]
        subject_range, other, other_range = overlaps[0]
        yield Hit(subject.owner, subject.field_path, phrases.service_cidr_overlap(
            subject.role == "service", str(subject_range), subject.label, str(other_range), other.label,
            more(len(overlaps) - 1)),
            related_places(source_related(o, f"{o.label}: {r}") for _, o, r in overlaps))


# --- KP405 -----------------------------------------------------------------------------------

def proxy_setting(proxy: ProxyConfig) -> tuple[str, frozenset]:
    return proxy.effective_mode, frozenset(proxy.cluster_cidrs)


def describe_setting(proxy: ProxyConfig) -> str:
    cidr = cidr_text(proxy.cluster_cidrs) if proxy.cluster_cidrs else "no clusterCIDR"
    if proxy.cluster_cidrs:
        cidr = f"clusterCIDR {cidr}"
    return f"{proxy.effective_mode} mode with {cidr}"


@network_check("kube-proxy-config-inconsistent")
def kube_proxy_config_inconsistent(network: NetworkConfig, cluster: Cluster) -> Iterator[Hit]:
    """Configurations that differ from the most common setting; on a tie, every configuration."""
    proxies = [proxy for proxy in network.proxies if proxy.cluster_cidr_known]
    counts = Counter(proxy_setting(proxy) for proxy in proxies)
    if len(counts) < 2:
        return
    ranked = counts.most_common()
    majority = ranked[0][0] if ranked[0][1] > ranked[1][1] else None
    for proxy in proxies:
        setting = proxy_setting(proxy)
        if proxy.owner.live or setting == majority:
            continue
        others = [other for other in proxies if proxy_setting(other) != setting]
        first = others[0]
        mode_differs = any(other.effective_mode != proxy.effective_mode for other in others)
        field_path = (proxy.mode_path if mode_differs else proxy.cluster_cidr_path) or proxy.anchor_path
        ref, first_ref = str(proxy.owner.ref), str(first.owner.ref)
        if first.effective_mode != proxy.effective_mode:  # the headline: how it differs from the first other
            difference = phrases.configs_differ_in_mode(proxy.effective_mode, ref, first.effective_mode, first_ref)
        else:
            difference = phrases.configs_differ_in_cluster_cidr(
                cidr_text(proxy.cluster_cidrs) if proxy.cluster_cidrs else "", ref,
                cidr_text(first.cluster_cidrs) if first.cluster_cidrs else "", first_ref)
        yield Hit(proxy.owner, field_path, phrases.kube_proxy_configs_disagree(
            proxy.label, describe_setting(proxy), first.label, describe_setting(first), more(len(others) - 1),
            difference, ref, first_ref),
            related_places(Related(other.owner, (other.mode_path if mode_differs else other.cluster_cidr_path)
                                   or other.anchor_path, f"{other.label}: {describe_setting(other)}")
                           for other in others))
