"""The datapath facts (`model.datapath`) the cluster's network configuration and the user establish:
proxy mode, kube-proxy and CNI plugin versions, portmap and its backend, CRI-O, kube-proxy's
node-port and masquerade settings. A fact is known when every place that states it agrees;
linted inputs come before objects from --cluster, and what the user states wins.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kubelint_ports.model.datapath.facts import DatapathFacts, Fact, parse_version

if TYPE_CHECKING:
    from kubelint_ports.model.cluster_network import NetworkConfig

# Facts a user may state (config `facts:`, `--cni-plugins-version`, `--proxy-mode`) -> DatapathFacts field.
STATED_FACTS = {
    "proxy-mode": "proxy_mode", "kube-proxy-version": "kube_proxy_version", "hostport": "hostport",
    "portmap-backend": "hostport_backend", "cni-plugins-version": "cni_plugins_version",
    "crio-version": "crio_version", "node-port-addresses": "node_port_addresses",
    "localhost-node-ports": "localhost_node_ports", "masquerade-all": "masquerade_all",
    "hostport-order": "hostport_order",
}
VERSION_FACTS = frozenset(("kube-proxy-version", "cni-plugins-version", "crio-version"))


def agreed(found: list[tuple[Any, str]]) -> Fact | None:
    """One value from places that all say the same; None when nothing or they disagree."""
    if not found:
        return None
    values = {value for value, _ in found}
    if len(values) != 1:
        return None
    places = sorted(set(place for _, place in found))  # the same words whatever the input order
    more = f" and {len(places) - 1} more" if len(places) > 1 else ""
    return Fact(values.pop(), places[0] + more)


def by_precedence(found: list[tuple[Any, str, bool]]) -> Fact | None:
    """Linted inputs first, objects from --cluster second."""
    linted = [(value, place) for value, place, live in found if not live]
    return agreed(linted) if linted else agreed([(value, place) for value, place, _ in found])


def local_detector(proxy: Any) -> bool | None:
    """Does kube-proxy tell pods' packets apart (`localDetector.IsImplemented()`)? In detectLocalMode
    ClusterCIDR only with a clusterCIDR (written, or filled by kubeadm from podSubnet); None when the
    value is a placeholder or another mode decides (its own settings are not read here)."""
    if not proxy.uses_cluster_cidr:
        return None
    if proxy.missing_cluster_cidr:
        return False
    return True if proxy.cluster_cidr_known or proxy.derived_from is not None else None


def cluster_datapath_facts(network: NetworkConfig,
                           stated: Iterable[tuple[str, Any, str]] = ()) -> DatapathFacts:
    """What the inputs and the user say about how the cluster's nodes handle packets; the user wins.
    (What one node's own dumps establish is `node_state`'s.)"""
    found: dict[str, Fact | None] = {}
    proxies = network.proxies
    found["proxy_mode"] = agreed([(p.effective_mode, p.label) for p in proxies]) if network.proxy_mode else None
    found["kube_proxy_version"] = by_precedence(network.kube_proxy_versions)
    found["cni_plugins_version"] = by_precedence(network.cni_plugins_versions)
    for name, attribute in (("node_port_addresses", "node_port_addresses"),
                            ("localhost_node_ports", "localhost_node_ports")):
        values = [(getattr(p, attribute), p.label) for p in proxies if getattr(p, attribute) is not None]
        found[name] = agreed(values) if len(values) == len(proxies) else None
    found["masquerade_all"] = agreed([(p.masquerade_all, p.label) for p in proxies])
    # Only its absence is stated: True is what the model assumes while the fact is unknown.
    detectors = [(value, p.label) for p in proxies if (value := local_detector(p)) is not None]
    detector = agreed(detectors) if len(detectors) == len(proxies) else None
    found["local_detector"] = detector if detector is not None and detector.value is False else None
    runtimes = network.runtimes
    if runtimes and all(runtime == "cri-o" for runtime, _, _ in runtimes):
        found["hostport"] = Fact("crio", f"containerRuntimeVersion of Node {min(node for _, _, node in runtimes)}"
                                         + (f" and {len(runtimes) - 1} more" if len(runtimes) > 1 else ""))
        found["crio_version"] = agreed([(version, f"containerRuntimeVersion of Node {node}")
                                        for _, version, node in runtimes if version is not None])
    elif network.cni_configs:
        configs = [c for c in network.cni_configs if not c.live] or network.cni_configs
        found["hostport"] = agreed([("portmap" if c.has_portmap else "none", c.source) for c in configs])
        backends = [(c.portmap_backend, c.source) for c in configs if c.has_portmap and c.portmap_backend]
        found["hostport_backend"] = agreed(backends)
    for name, value, source in stated:
        attribute = STATED_FACTS[name]
        if name in VERSION_FACTS:
            value = parse_version(value)
        elif isinstance(value, list):
            value = tuple(value)
        if value is not None:
            found[attribute] = Fact(value, source)
    return DatapathFacts(**{name: fact for name, fact in found.items() if fact is not None})
