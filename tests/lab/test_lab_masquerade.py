"""kube-proxy's masquerade of ClusterIP traffic, per clusterCIDR setting: the claims of KP401
(clusterCIDR missing), KP402 (clusterCIDR holds the Service CIDR) and KP403 (clusterCIDR misses
pods), checked against `datapath.masqueraded`.

iptables mode: the backend reports the source address it sees; masqueraded traffic arrives from
the node's bridge address. IPVS mode (no IPVS module here): the node's own connection to a
ClusterIP leaves from that ClusterIP (incident 002's mechanism): unmasqueraded, the stand-in sees
the VIP as the client. The packet counter of kube-proxy's KUBE-CLUSTER-IP masquerade rule says
whether a packet was marked, for every client.
"""

from __future__ import annotations

import pytest

import netlab
from cells import CASES, CLIENTS, CLUSTER_IP, sources_seen

from kubelint_ports.model import datapath as dp

@pytest.mark.parametrize("mode, kind, version, client", [
    pytest.param(mode, kind, version, client, id=f"{mode}-{dp.version_text(version) if version else 'any'}-"
                                                 f"clusterCIDR={kind or 'unset'}-{client}")
    for mode, kind, version in CASES for client in CLIENTS])
def test_masquerade(lab_ready, mode, kind, version, client):
    address, answer, marked = sources_seen(mode, kind, version)[client]
    expected = dp.masqueraded(mode, client, cluster_cidr=kind, version=version)
    if mode == "iptables":
        assert answer.startswith("service "), answer
        source = answer.split()[1]
        assert (source != address) == expected, f"sent from {address}, the backend saw {source}"
        assert (source == netlab.BRIDGE_IP) == expected
    else:
        assert answer.startswith("ipvs-stand-in "), answer
        assert marked == expected, f"KUBE-CLUSTER-IP masquerade rule {'matched' if marked else 'did not match'}"
        if client == "node":
            # Sent from the VIP itself (kube-ipvs0 holds it); a local connection passes POSTROUTING,
            # so the masquerade shows: the stand-in sees the node's address instead of the VIP.
            assert (answer.split()[1] != CLUSTER_IP) == expected, answer
