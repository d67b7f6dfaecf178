"""kube-proxy's masquerade of Service traffic (KP401-KP403, KP804): which clients it masquerades,
per mode, version and clusterCIDR setting. The lab checks it (`tests/lab/test_lab_masquerade.py`)."""

from __future__ import annotations


from kubelint_ports.records import record
from kubelint_ports.model.datapath.facts import version_text
from kubelint_ports.model.datapath.phrases import masquerade_gap_text, version_class_text


VIP_MASQUERADE_SINCE = (1, 11, 1)  # IPVS masquerades the node's packets sent from a VIP without clusterCIDR


def at_least(version: tuple[int, ...], since: tuple[int, ...]) -> bool:
    """`version` >= `since`; a version without a patch number, (1, 11), stands for that minor's
    latest patch (a node's rules date it to a minor line, not a patch)."""
    padded = tuple(version) + (10**6,) * (len(since) - len(version))
    return padded >= since


def masqueraded(mode: str, client: str, *, cluster_cidr: str | None, version: tuple[int, ...] | None = None,
                masquerade_all: bool = False) -> bool:
    """Does kube-proxy masquerade a client's traffic to a ClusterIP?

    `client`: "pod" (its address is a pod address), "node" (a node process or hostNetwork pod:
    in IPVS mode it sends from the ClusterIP itself, bound to kube-ipvs0, elsewhere from the node's
    address), "off-cluster" (a machine that routes the Service CIDR to a node). `cluster_cidr`:
    None when kube-proxy has none, else "pods" (the pod CIDR), "services" (it holds the Service
    CIDR: KP402) or "elsewhere" (it misses this client's address: KP403).
    """
    if masquerade_all:
        return True
    if cluster_cidr is None:
        # IPVS writes `-m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ` since v1.11.1:
        # v1.11.0 carried the rule (kubernetes#63319) but filled KUBE-CLUSTER-IP only with
        # masqueradeAll or a clusterCIDR, so the rule was never written until kubernetes#65388
        # (cherry-picked as #65821, CHANGELOG-1.11.md "Changelog since v1.11.0"). Nothing else
        # masquerades without a local-traffic detector.
        return mode == "ipvs" and client == "node" and (version is None or at_least(version, VIP_MASQUERADE_SINCE))
    source_in_cidr = {"pod": cluster_cidr == "pods",
                      "node": mode == "ipvs" and cluster_cidr == "services",
                      "off-cluster": False}[client]
    return not source_in_cidr  # `! -s <clusterCIDR> ... -j KUBE-MARK-MASQ`


@record(frozen=True, slots=True)
class MasqueradeGap:
    """Which clients' Service traffic kube-proxy leaves unmasqueraded, for one version."""

    versions: str  # "kube-proxy < v1.11.1"
    node_clients_broken: bool
    text: str


def masquerade_gap(mode: str, version: tuple[int, ...] | None) -> tuple[MasqueradeGap, ...]:
    """kube-proxy without clusterCIDR (detectLocalMode ClusterCIDR, masqueradeAll off): what breaks,
    one entry per plausible version class (`masqueraded` decides)."""
    classes = [(None, version_class_text(mode, None))]
    if mode == "ipvs":
        since = version_text(VIP_MASQUERADE_SINCE)
        classes = [((1, 11, 0), version_class_text(mode, f"< {since}")),
                   (VIP_MASQUERADE_SINCE, version_class_text(mode, f">= {since}"))]
        if version is not None:
            classes = [classes[1] if at_least(version, VIP_MASQUERADE_SINCE) else classes[0]]
    gaps = []
    for sample, label in classes:
        if masqueraded(mode, "node", cluster_cidr=None, version=sample):
            gaps.append(MasqueradeGap(label, False, masquerade_gap_text("vip-masqueraded")))
        elif mode == "ipvs":
            gaps.append(MasqueradeGap(label, True, masquerade_gap_text("node-clients-broken")))
        else:
            gaps.append(MasqueradeGap(label, False, masquerade_gap_text("node-address")))
    return tuple(gaps)
