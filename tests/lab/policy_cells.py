"""Traffic policies Local in the lab: who receives a packet from outside the node, from a pod and
from the node itself, with and without an endpoint of the Service on the node.

    hostPort pod     hostPort 31124 (TCP) -> containerPort 8080: it answers `hostport-pod`
    web/local-np     NodePort 31124, externalTrafficPolicy: Local  } endpoint: the backend pod on this
    shop/local-api   NodePort 30586, externalTrafficPolicy: Local  } node (`local endpoint`), or a server
    db/local-db      ClusterIP 10.96.0.60:3307, internalTrafficPolicy: Local } in the outside namespace
                                                                     (another node's pod) answering `service`
    host process     a process on the node on 30586 (incident 003 with a Local Service)
    IPVS stand-in    IPVS scenarios: a process on 31124 and 3307 in the node namespace

kube-proxy's rules are written in its shapes (`shapes_local`); portmap is the real plugin (>= v0.7.5,
appended). nftables mode is built twice, once per hook registration order.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import netlab
import shapes
import shapes_local
from cells import KUBE_PROXY_FIRST, HOSTPORT_FIRST, Cell, Observation
from shapes import Endpoint, LabService
from shapes_local import PolicyService

from kubelint_ports.model import datapath as dp

HOST_PORT, PROCESS_PORT, CLUSTER_PORT, CLUSTER_IP = 31124, 30586, 3307, "10.96.0.60"
BACKEND_PORT = 9376


@dataclass(frozen=True)
class PolicyScenario:
    name: str
    proxy: str  # iptables | ipvs | ipvs-1.10 | nftables
    local_endpoint: bool

    @property
    def mode(self) -> str:
        return self.proxy.split("-")[0]

    @property
    def orders(self) -> tuple[str | None, ...]:
        return (KUBE_PROXY_FIRST, HOSTPORT_FIRST) if self.mode == "nftables" else (None,)

    @property
    def cluster_cidr(self) -> str | None:
        """kube-proxy's clusterCIDR on the node (None: its local detector is a no-op)."""
        return netlab.CLUSTER_CIDR

    def facts(self, order: str | None = None) -> dp.DatapathFacts:
        return dp.DatapathFacts(
            proxy_mode=dp.Fact(self.mode, "lab"),
            kube_proxy_version=dp.Fact((1, 10, 0) if self.proxy == "ipvs-1.10" else (1, 31, 0), "lab"),
            hostport=dp.Fact("portmap", "lab"), hostport_backend=dp.Fact("iptables", "lab"),
            cni_plugins_version=dp.Fact((1, 1, 1), "lab"),
            node_port_addresses=dp.Fact(("0.0.0.0/0",), "lab") if self.mode == "nftables" else None,
            hostport_order=dp.Fact(order, "lab") if order else None)


SCENARIOS = tuple(PolicyScenario(f"{label}, {'local endpoint' if local else 'no local endpoint'}", proxy, local)
                  for proxy, label in (("iptables", "iptables"), ("ipvs", "ipvs"),
                                       ("ipvs-1.10", "ipvs (kube-proxy < v1.11)"), ("nftables", "nftables"))
                  for local in (True, False))


def _cells() -> tuple[Cell, ...]:
    paths = [(dp.FROM_OUTSIDE, dp.NODE_IP, netlab.NODE_IP), (dp.FROM_POD, dp.NODE_IP, netlab.NODE_IP),
             (dp.FROM_NODE, dp.NODE_IP, netlab.NODE_IP)]
    cells = [Cell("etp-hostport", c, d, a, HOST_PORT, "tcp", "KP201") for c, d, a in paths]
    cells += [Cell("etp-process", c, d, a, PROCESS_PORT, "tcp", "KP202") for c, d, a in paths]
    cells += [Cell("itp-clusterip", c, dp.CLUSTER_IP, CLUSTER_IP, CLUSTER_PORT, "tcp", "")
              for c in (dp.FROM_POD, dp.FROM_NODE)]
    return tuple(cells)


CELLS = _cells()
GROUP_TITLES = {
    "etp-hostport": "hostPort 31124 and NodePort 31124 of an `externalTrafficPolicy: Local` Service (KP201)",
    "etp-process": "a process on the node on 30586 and NodePort 30586 of an `externalTrafficPolicy: Local` Service "
                   "(KP202)",
    "itp-clusterip": "ClusterIP 10.96.0.60:3307 of an `internalTrafficPolicy: Local` Service",
}
USES = {
    "etp-hostport": dp.PortUse(host_port_ip=dp.WILDCARD, node_port=True, endpoints=True, external_local=True),
    "etp-process": dp.PortUse(host_process=True, node_port=True, endpoints=True, external_local=True),
    "itp-clusterip": dp.PortUse(service_port=True, endpoints=True, internal_local=True),
}


def use(cell: Cell, scenario: PolicyScenario | None) -> dp.PortUse:
    """The cell's PortUse; with a scenario, whether the node has an endpoint is known."""
    base = USES[cell.group]
    return base if scenario is None else replace(base, local_endpoints=scenario.local_endpoint)


def route_for(scenario: PolicyScenario, cell: Cell, order: str | None) -> dp.Route:
    answer = dp.Datapath(scenario.facts(order)).deliver(cell.client, cell.destination, use(cell, scenario), cell.port)
    assert len(answer.outcomes) == 1, f"every fact is known, yet: {answer.outcomes}"
    return answer.outcomes[0].route


def services(backend_ip: str, local: bool) -> list[PolicyService]:
    where = Endpoint(backend_ip, BACKEND_PORT) if local else Endpoint(netlab.GATEWAY_IP, BACKEND_PORT)
    local_endpoints = (where,) if local else ()
    return [
        PolicyService(LabService("web", "local-np", "http", "tcp", "10.96.0.81", 80, HOST_PORT, (where,)),
                      external_local=True, local=local_endpoints),
        PolicyService(LabService("shop", "local-api", "http", "tcp", "10.96.0.91", 8080, PROCESS_PORT, (where,)),
                      external_local=True, local=local_endpoints),
        PolicyService(LabService("db", "local-db", "mysql", "tcp", CLUSTER_IP, CLUSTER_PORT, None, (where,)),
                      internal_local=True, local=local_endpoints),
    ]


@functools.cache
def observe(scenario: PolicyScenario, order: str | None, timeout: float = 1.0) -> Observation:
    observation = Observation(scenario, order)
    with netlab.Node(prefix="kp22") as node:
        if scenario.mode == "nftables" and order == HOSTPORT_FIRST:
            node.nft(shapes.nftables_base_chains())  # before portmap's first ADD creates the nat table
        backend = node.add_pod("backend")
        hostport = node.add_pod("hostport", [{"hostPort": HOST_PORT, "containerPort": 8080, "protocol": "tcp"}])
        client = node.add_pod("client")
        node.serve(hostport.namespace, "hostport-pod", ["tcp:0.0.0.0:8080"])
        node.serve(backend.namespace, "service", [f"tcp:0.0.0.0:{BACKEND_PORT}"])
        node.serve(node.outside, "service", [f"tcp:0.0.0.0:{BACKEND_PORT}"])  # another node's endpoint
        node.serve(node.namespace, "host-process", [f"tcp:0.0.0.0:{PROCESS_PORT}"])
        policies = services(backend.ip, scenario.local_endpoint)
        node.node_run("sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1")
        if scenario.mode == "iptables":
            node.iptables_restore(shapes_local.iptables_policies(policies, cluster_cidr=scenario.cluster_cidr))
        elif scenario.mode == "ipvs":
            node.node_run("ip", "link", "add", "kube-ipvs0", "type", "bridge")
            node.node_run("ip", "addr", "add", f"{CLUSTER_IP}/32", "dev", "kube-ipvs0")
            commands, text = shapes_local.ipvs_policies(policies, local_accept=scenario.proxy == "ipvs-1.10")
            for command in commands:
                node.node_run("ipset", *command)
            node.iptables_restore(text)
            node.serve(node.namespace, "ipvs-stand-in", [f"tcp:0.0.0.0:{HOST_PORT}", f"tcp:0.0.0.0:{CLUSTER_PORT}"])
        else:
            node.nft(shapes.nftables_mode([], cluster_cidr=scenario.cluster_cidr))
            node.nft(shapes_local.nftables_policies(policies, cluster_cidr=scenario.cluster_cidr))
        if scenario.mode != "nftables":
            for jump in shapes.iptables_jumps(scenario.mode):
                node.iptables(*jump)
        # nftables: kube-proxy's table, created after portmap's ADD made the nat table, runs first
        # (KUBE_PROXY_FIRST) unless its base chains were created before that ADD (HOSTPORT_FIRST).
        for client_side in (dp.FROM_OUTSIDE, dp.FROM_POD, dp.FROM_NODE):
            mine = [cell for cell in CELLS if cell.client == client_side]
            namespace = {dp.FROM_NODE: node.namespace, dp.FROM_OUTSIDE: node.outside}.get(client_side, client.namespace)
            answers = node.probe(namespace, [[c.protocol, c.address, c.port] for c in mine], timeout)
            observation.answers.update({cell.key: answer for cell, answer in zip(mine, answers)})
    return observation


MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: hostport, namespace: lab}
spec:
  selector: {matchLabels: {app: hostport}}
  template:
    metadata: {labels: {app: hostport}}
    spec:
      containers:
        - {name: server, image: agent:lab, ports: [{containerPort: 8080, hostPort: 31124}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: host-process, namespace: lab}
spec:
  selector: {matchLabels: {app: host-process}}
  template:
    metadata: {labels: {app: host-process}}
    spec:
      hostNetwork: true
      containers:
        - {name: server, image: agent:lab, ports: [{containerPort: 30586}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: backend, namespace: lab}
spec:
  selector: {matchLabels: {app: backend}}
  template:
    metadata: {labels: {app: backend}}
    spec:
      containers:
        - {name: server, image: agent:lab, ports: [{containerPort: 9376}]}
---
apiVersion: v1
kind: Service
metadata: {name: local-np, namespace: lab}
spec:
  type: NodePort
  externalTrafficPolicy: Local
  selector: {app: backend}
  ports: [{name: http, port: 80, targetPort: 9376, nodePort: 31124}]
---
apiVersion: v1
kind: Service
metadata: {name: local-api, namespace: lab}
spec:
  type: NodePort
  externalTrafficPolicy: Local
  selector: {app: backend}
  ports: [{name: http, port: 8080, targetPort: 9376, nodePort: 30586}]
"""
