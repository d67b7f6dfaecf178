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

import functools

import pytest

import netlab
import shapes
from shapes import Endpoint, LabService

from kubelint_ports.model import datapath as dp

CLUSTER_IP, PORT = "10.96.0.50", 3306
CIDRS = {"pods": netlab.CLUSTER_CIDR, "services": "10.96.0.0/12", "elsewhere": "10.245.0.0/16", None: None}
CLIENTS = ("pod", "node", "off-cluster")
CASES = [("iptables", kind, None) for kind in CIDRS] + [("ipvs", kind, (1, 31, 0)) for kind in CIDRS] + \
        [("ipvs", None, (1, 10, 0))]


@functools.cache
def sources_seen(mode: str, kind: str | None, version) -> dict[str, tuple[str, str, bool]]:
    """client -> (the address it sends from, what the Service side saw, marked for masquerade)."""
    seen = {}
    with netlab.Node() as node:
        backend = node.add_pod("backend")
        client = node.add_pod("client")
        node.serve(backend.namespace, "service", [f"tcp:0.0.0.0:9376"])
        run = functools.partial(netlab.run, *node.exec_args(node.outside))
        run("ip", "route", "add", "10.96.0.0/12", "via", netlab.NODE_IP)
        service = LabService("db", "mysql-a", "mysql", "tcp", CLUSTER_IP, PORT, None, (Endpoint(backend.ip, 9376),))
        if mode == "iptables":
            node.iptables_restore(shapes.iptables_mode([service], cluster_cidr=CIDRS[kind]))
        else:
            node.node_run("ip", "link", "add", "kube-ipvs0", "type", "bridge")
            node.node_run("ip", "addr", "add", f"{CLUSTER_IP}/32", "dev", "kube-ipvs0")
            for command in shapes.ipvs_ipsets([service]):
                node.node_run("ipset", *command)
            node.iptables_restore(shapes.ipvs_mode(cluster_cidr=CIDRS[kind], vip_masquerade=version >= (1, 11)))
            node.serve(node.namespace, "ipvs-stand-in", [f"tcp:0.0.0.0:{PORT}"])
        for jump in shapes.iptables_jumps(mode):
            node.iptables(*jump)
        origin = {"pod": (client.namespace, client.ip), "node": (node.namespace, None),
                  "off-cluster": (node.outside, netlab.GATEWAY_IP)}
        for name in CLIENTS:
            node.iptables("-t", "nat", "-Z", "KUBE-SERVICES")
            namespace, address = origin[name]
            [answer] = node.probe(namespace, [["tcp", CLUSTER_IP, PORT]])
            listing = node.node_run("iptables", "-t", "nat", "-L", "KUBE-SERVICES", "-v", "-x", "-n").stdout
            marked = any("KUBE-MARK-MASQ" in line and "KUBE-CLUSTER-IP" in line and int(line.split()[0]) > 0
                         for line in listing.splitlines()[2:])
            if address is None:  # the node picks its source by route: the VIP in IPVS mode
                address = CLUSTER_IP if mode == "ipvs" else netlab.NODE_IP
            seen[name] = (address, answer, marked)
    return seen


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
