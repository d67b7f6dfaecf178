"""What the node-traffic rules ask the datapath model: the cluster's `Datapath`, and which packets
(client, destination) reach a port besides the one a rule is about. The answers' words are the
model's (`model.datapath.phrases`); nothing here knows a packet's fate or says one."""

from __future__ import annotations

from kubelint_ports.model.datapath import (
    FROM_NODE,
    FROM_OUTSIDE,
    FROM_POD,
    HOST_IP,
    LOCALHOST,
    SECONDARY_IP,
    Answer,
    Datapath,
    PortUse,
)
from kubelint_ports.model.port_holders import datapath_of, node_destination

__all__ = ["datapath_of", "node_destination", "node_paths"]  # the model's two helpers, under the checks' names


def node_paths(datapath: Datapath, use: PortUse, port: int, protocol: str, host_ip: str,
               main_client: str = FROM_POD) -> list[tuple[str, Answer]]:
    """The other ways into the same port (path key, answer): from pods or from outside the node
    (whichever is not the main question), from the node itself, to 127.0.0.1 (kube-proxy treats
    it apart: localhostNodePorts), and to the node's other addresses (nodePortAddresses; for a
    hostPort bound to a hostIP, the addresses it leaves alone)."""
    destination = node_destination(host_ip)
    paths = []
    if use.node_port or use.external_local:
        other = FROM_POD if main_client == FROM_OUTSIDE else FROM_OUTSIDE
        paths.append(("pods" if other == FROM_POD else "outside", datapath.deliver(other, destination, use, port,
                                                                                    protocol)))
    paths += [("node", datapath.deliver(FROM_NODE, destination, use, port, protocol)),
              ("localhost", datapath.deliver(FROM_NODE, LOCALHOST, use, port, protocol))]
    if destination == HOST_IP:
        paths.append(("other-addresses", datapath.deliver(FROM_POD, SECONDARY_IP, use, port, protocol)))
    elif use.node_port:
        paths.append(("secondary", datapath.deliver(FROM_POD, SECONDARY_IP, use, port, protocol)))
    return paths
