"""The lab's table: node setups (scenarios) x packets (cells), what the model predicts for each,
and how a node is built and probed. Shared by the tests and by `write_datapath_doc.py`.

A scenario is one kube-proxy mode and one hostPort implementation on a node built by `netlab`,
with the same objects every time:

    hostPort pod   hostPorts 31123, 3306 (TCP+UDP), 9100, 9200 (TCP) and 8443 (TCP, hostIP 192.168.11.2),
                   all to containerPort 8080: it answers `hostport-pod`
    Service        web/nginx-nodeport: NodePort 31123 (TCP+UDP)       } endpoints: the backend pod
                   db/mysql-a: ClusterIP 10.96.0.50:3306, externalIP   } (`service`), or none in the
                   192.168.11.100:3306 (TCP+UDP)                       } `no endpoints` scenarios
                   shop/api: NodePort 30584 (TCP+UDP)                  }
                   lab/ingress, lab/status: ClusterIP Services whose externalIP is the node's own
                   address 192.168.11.2, port 9200 and 9300 (TCP)
    host process   a process in the node namespace on 30584 (TCP+UDP), 9100, 8443 and 9300
                   (`host-process`), as a hostNetwork pod's would be
    IPVS stand-in  IPVS scenarios only: a process on 3306 and 9200 in the node namespace (`ipvs-stand-in`): it
                   answers exactly when the nat table leaves a Service packet to local delivery,
                   where IPVS would take it (this kernel has no IPVS module)

Cross-table scenarios (kube-proxy's nftables table, or portmap's nftables backend) are built twice:
once with the hostPort handler's hook registered last (it runs first), once with kube-proxy's.
"""

from __future__ import annotations

import functools
import textwrap
from dataclasses import dataclass, field

import netlab
import shapes
import shapes_local
from shapes import Endpoint, HostPortMapping, LabService

from kubelint_ports.model import datapath as dp

CLUSTER_IP = "10.96.0.50"
EXTERNAL_IP = "192.168.11.100"
NODE_PORT, SERVICE_PORT, PROCESS_PORT, LISTENER_PORT, BOUND_PORT = 31123, 3306, 30584, 9100, 8443
CONTAINER_PORT, BACKEND_PORT = 8080, 9376
# A Service's externalIP that is the node's own address: with a hostPort, and with a host process.
EXTERNAL_NODE_PORT, EXTERNAL_PROCESS_PORT = 9200, 9300
KUBE_PROXY_FIRST, HOSTPORT_FIRST = dp.KUBE_PROXY_FIRST, dp.HOSTPORT_FIRST


@dataclass(frozen=True)
class Scenario:
    name: str
    proxy: str  # iptables | ipvs | ipvs-1.10 | nftables
    hostport: str  # portmap | portmap-0.7.4 | portmap-nft-1.7 | portmap-nft-1.9
    endpoints: bool = True
    node_ports: str = "all"  # nftables mode: "all" (nodePortAddresses 0.0.0.0/0) or "primary" (its default)

    @property
    def mode(self) -> str:
        return self.proxy.split("-")[0]

    @property
    def cross_table(self) -> bool:
        """Are kube-proxy's and the hostPort's handlers in different tables (no fixed order)?"""
        return self.proxy == "nftables" or "nft" in self.hostport

    @property
    def legacy(self) -> bool:
        """portmap < v0.7.5 beside kube-proxy: both insert their jump at the top when it is absent."""
        return self.hostport == "portmap-0.7.4" and self.mode != "nftables"

    @property
    def unordered(self) -> bool:
        """Does no rule fix which handler runs first (tables at one priority, or insertion history)?"""
        return self.cross_table or self.legacy

    @property
    def orders(self) -> tuple[str | None, ...]:
        return (KUBE_PROXY_FIRST, HOSTPORT_FIRST) if self.unordered else (None,)

    def facts(self, order: str | None = None) -> dp.DatapathFacts:
        version = {"portmap": (1, 1, 1), "portmap-0.7.4": (0, 7, 4), "portmap-nft-1.7": (1, 7, 1),
                   "portmap-nft-1.9": (1, 9, 0)}[self.hostport]
        return dp.DatapathFacts(
            proxy_mode=dp.Fact(self.mode, "lab"),
            kube_proxy_version=dp.Fact((1, 10, 0) if self.proxy == "ipvs-1.10" else (1, 31, 0), "lab"),
            hostport=dp.Fact("portmap", "lab"),
            hostport_backend=dp.Fact("nftables" if "nft" in self.hostport else "iptables", "lab"),
            cni_plugins_version=dp.Fact(version, "lab"),
            # the shapes' nftables NodePort rule is the match-all one (`fib daddr type local`)
            node_port_addresses=dp.Fact(("0.0.0.0/0",), "lab") if self.mode == "nftables" and self.node_ports == "all"
            else None,
            hostport_order=dp.Fact(order, "lab") if order else None)

    def stated(self, order: str | None = None) -> tuple[tuple[str, str, str], ...]:
        """The same facts as a user states them (config `facts:`), for linting."""
        facts = self.facts(order)
        return tuple(({"hostport-backend": "portmap-backend"}.get(name, name),
                      dp.version_text(fact.value) if name.endswith("version") else fact.value, "lab")
                     for name, fact in facts.items())


SCENARIOS = (
    Scenario("iptables, portmap v1.1.1", "iptables", "portmap"),
    Scenario("iptables, portmap v1.1.1, no endpoints", "iptables", "portmap", endpoints=False),
    Scenario("iptables, portmap < v0.7.5", "iptables", "portmap-0.7.4"),
    Scenario("ipvs, portmap v1.1.1", "ipvs", "portmap"),
    Scenario("ipvs, portmap v1.1.1, no endpoints", "ipvs", "portmap", endpoints=False),
    Scenario("ipvs, portmap < v0.7.5", "ipvs", "portmap-0.7.4"),
    Scenario("ipvs (kube-proxy < v1.11), portmap v1.1.1", "ipvs-1.10", "portmap"),
    Scenario("nftables, portmap v1.1.1", "nftables", "portmap"),
    Scenario("nftables, portmap v1.1.1, no endpoints", "nftables", "portmap", endpoints=False),
    Scenario("nftables (nodePortAddresses: primary), portmap v1.1.1", "nftables", "portmap", node_ports="primary"),
    Scenario("iptables, portmap nftables backend v1.6.1-v1.8", "iptables", "portmap-nft-1.7"),
    Scenario("iptables, portmap nftables backend v1.9", "iptables", "portmap-nft-1.9"),
    Scenario("ipvs, portmap nftables backend v1.9", "ipvs", "portmap-nft-1.9"),
    Scenario("nftables, portmap nftables backend v1.9", "nftables", "portmap-nft-1.9"),
)


@dataclass(frozen=True)
class Cell:
    """One packet: who sends it, where to, and which rule speaks about that destination."""

    group: str  # what shares the port (also the docs table it lands in)
    client: str  # dp.FROM_NODE | dp.FROM_POD
    destination: str  # dp destination class
    address: str
    port: int
    protocol: str
    rule: str

    @property
    def key(self) -> str:
        return f"{self.group} {self.client}->{self.destination} {self.address}:{self.port}/{self.protocol}"

    def use(self, endpoints: bool) -> dp.PortUse:
        return {
            "nodeport": dp.PortUse(host_port_ip=dp.WILDCARD, node_port=True, endpoints=endpoints),
            "clusterip": dp.PortUse(host_port_ip=dp.WILDCARD, service_port=True, endpoints=endpoints),
            "externalip": dp.PortUse(host_port_ip=dp.WILDCARD, service_port=True, endpoints=endpoints),
            "process-nodeport": dp.PortUse(host_process=True, node_port=True, endpoints=endpoints),
            "hostport-process": dp.PortUse(host_port_ip=dp.WILDCARD, host_process=True),
            "hostip": dp.PortUse(host_port_ip=netlab.NODE_IP, host_process=True),
            "externalip-node": dp.PortUse(host_port_ip=dp.WILDCARD, service_port=True, endpoints=endpoints,
                                          external_ip_on_node=True),
            "externalip-node-process": dp.PortUse(host_process=True, service_port=True, endpoints=endpoints,
                                                  external_ip_on_node=True),
        }[self.group]

    @property
    def local(self) -> bool:
        """Is the address one of the node's own (a packet nobody takes is refused, not lost)?"""
        return self.destination not in (dp.CLUSTER_IP, dp.EXTERNAL_IP) or self.group.startswith("externalip-node")


def _cells() -> tuple[Cell, ...]:
    cells = []
    both = ("tcp", "udp")
    node_paths = [(dp.FROM_POD, dp.NODE_IP, netlab.NODE_IP), (dp.FROM_NODE, dp.NODE_IP, netlab.NODE_IP),
                  (dp.FROM_NODE, dp.LOCALHOST, "127.0.0.1"), (dp.FROM_OUTSIDE, dp.NODE_IP, netlab.NODE_IP),
                  (dp.FROM_POD, dp.SECONDARY_IP, netlab.BRIDGE_IP)]
    for protocol in both:
        for client, destination, address in node_paths:
            cells.append(Cell("nodeport", client, destination, address, NODE_PORT, protocol, "KP201"))
        for client in (dp.FROM_POD, dp.FROM_NODE):
            cells.append(Cell("clusterip", client, dp.CLUSTER_IP, CLUSTER_IP, SERVICE_PORT, protocol, "KP304"))
        cells.append(Cell("externalip", dp.FROM_POD, dp.EXTERNAL_IP, EXTERNAL_IP, SERVICE_PORT, protocol, "KP304"))
        for client, destination, address in node_paths:
            cells.append(Cell("process-nodeport", client, destination, address, PROCESS_PORT, protocol, "KP202"))
    for client, destination, address in node_paths[:3]:
        cells.append(Cell("hostport-process", client, destination, address, LISTENER_PORT, "tcp", "KP302"))
    for client, destination, address in [(dp.FROM_POD, dp.HOST_IP, netlab.NODE_IP),
                                         (dp.FROM_NODE, dp.HOST_IP, netlab.NODE_IP),
                                         (dp.FROM_NODE, dp.LOCALHOST, "127.0.0.1"),
                                         (dp.FROM_POD, dp.SECONDARY_IP, netlab.BRIDGE_IP)]:
        cells.append(Cell("hostip", client, destination, address, BOUND_PORT, "tcp", "KP302"))
    for client in (dp.FROM_POD, dp.FROM_NODE):
        cells.append(Cell("externalip-node", client, dp.EXTERNAL_IP, netlab.NODE_IP, EXTERNAL_NODE_PORT, "tcp",
                          "KP305"))
        cells.append(Cell("externalip-node-process", client, dp.EXTERNAL_IP, netlab.NODE_IP, EXTERNAL_PROCESS_PORT,
                          "tcp", "KP305"))
    return tuple(cells)


CELLS = _cells()
GROUP_TITLES = {
    "nodeport": "hostPort 31123 and NodePort 31123 (KP201)",
    "clusterip": "hostPort 3306 and a Service's ClusterIP port 3306 (KP304)",
    "externalip": "hostPort 3306 and a Service's external IP port 3306 (KP304)",
    "process-nodeport": "a process on the node on 30584 and NodePort 30584 (KP202)",
    "hostport-process": "hostPort 9100 and a process on the node listening on 9100 (KP302)",
    "hostip": "hostPort 8443 bound to hostIP 192.168.11.2 and a process on 8443 (KP101, KP302)",
    "externalip-node": "hostPort 9200 and a Service whose externalIP is the node's address, port 9200 (KP305)",
    "externalip-node-process": "a process on the node on 9300 and a Service whose externalIP is the node's address, "
                               "port 9300 (KP305)",
}


# --- what the model predicts, in the classes the lab can observe ----------------------------------

def route_for(scenario: Scenario, cell: Cell, order: str | None) -> dp.Route:
    answer = dp.Datapath(scenario.facts(order)).deliver(cell.client, cell.destination,
                                                        cell.use(scenario.endpoints), cell.port, cell.protocol.upper())
    assert len(answer.outcomes) == 1, f"every fact is known, yet: {answer.outcomes}"
    return answer.outcomes[0].route


def observable(route: dp.Route, cell: Cell) -> frozenset[str]:
    """What the lab should see for a predicted route: IPVS itself cannot run here, so "IPVS takes
    it at local delivery" is seen as a local process answering (`local`)."""
    if route.alternatives:
        return frozenset(c for alternative in route.alternatives for c in observable(alternative, cell))
    if any(step.startswith("ipvs-") for step in route.steps):  # IPVS at local delivery
        return frozenset(("local",))
    if route.receiver == dp.NOTHING:
        return frozenset(("refused",) if cell.local else ("refused", "timeout"))
    if route.receiver == dp.DROPPED:
        return frozenset(("timeout",))
    return frozenset((route.receiver,))


def observed_class(answer: str, scenario: Scenario) -> str:
    name = answer.split(" ", 1)[0]
    if name == "ipvs-stand-in" or (name == "host-process" and scenario.mode == "ipvs"):
        return "local" if name == "ipvs-stand-in" else "host-process"
    if name in ("hostport-pod", "service", "host-process"):
        return {"hostport-pod": dp.HOSTPORT, "service": dp.SERVICE, "host-process": dp.HOST_PROCESS}[name]
    if answer in ("refused", "error: Operation not permitted", "error: Connection refused"):
        return "refused"
    return answer  # timeout, or an error to look at


def matches(observed: str, expected: frozenset[str]) -> bool:
    """`local` covers any process in the node namespace answering (IPVS scenarios)."""
    if observed in expected:
        return True
    return observed == dp.HOST_PROCESS and "local" in expected or observed == "refused" and dp.REJECTED in expected


# --- building and probing a node ---------------------------------------------------------------------

@dataclass
class Observation:
    scenario: Scenario
    order: str | None
    answers: dict[str, str] = field(default_factory=dict)  # cell key -> raw answer
    dump: dict[str, str] = field(default_factory=dict)


def lab_services(backend_ip: str, endpoints: bool) -> list[LabService]:
    backends = (Endpoint(backend_ip, BACKEND_PORT),) if endpoints else ()
    services = []
    for protocol in ("tcp", "udp"):
        services += [
            LabService("web", "nginx-nodeport", "http", protocol, "10.96.0.80", 80, NODE_PORT, backends),
            LabService("db", "mysql-a", "mysql", protocol, CLUSTER_IP, SERVICE_PORT, None, backends, (EXTERNAL_IP,)),
            LabService("shop", "api", "http", protocol, "10.96.0.90", 8080, PROCESS_PORT, backends),
        ]
    services += [
        LabService("lab", "ingress", "https", "tcp", "10.96.0.70", EXTERNAL_NODE_PORT, None, backends, (netlab.NODE_IP,)),
        LabService("lab", "status", "http", "tcp", "10.96.0.71", EXTERNAL_PROCESS_PORT, None, backends,
                   (netlab.NODE_IP,)),
    ]
    return services


HOST_PORTS = [(NODE_PORT, "tcp", ""), (NODE_PORT, "udp", ""), (SERVICE_PORT, "tcp", ""), (SERVICE_PORT, "udp", ""),
              (LISTENER_PORT, "tcp", ""), (BOUND_PORT, "tcp", netlab.NODE_IP), (EXTERNAL_NODE_PORT, "tcp", "")]


@functools.cache
def observe(scenario: Scenario, order: str | None, timeout: float = 1.0) -> Observation:
    """Build the node, write every handler, send every cell's packet; the node is gone afterwards."""
    observation = Observation(scenario, order)
    iptables_hostports = not scenario.hostport.startswith("portmap-nft")
    with netlab.Node(portmap=iptables_hostports) as node:
        if scenario.mode == "nftables" and order == HOSTPORT_FIRST and iptables_hostports:
            node.nft(shapes.nftables_base_chains())  # before portmap's first ADD creates the nat table
        backend = node.add_pod("backend")
        mappings = [{"hostPort": port, "containerPort": CONTAINER_PORT, "protocol": protocol,
                     **({"hostIP": host_ip} if host_ip else {})} for port, protocol, host_ip in HOST_PORTS]
        hostport = node.add_pod("hostport", mappings)
        client = node.add_pod("client")
        node.serve(hostport.namespace, "hostport-pod", [f"tcp:0.0.0.0:{CONTAINER_PORT}", f"udp:0.0.0.0:{CONTAINER_PORT}"])
        node.serve(backend.namespace, "service", [f"tcp:0.0.0.0:{BACKEND_PORT}", f"udp:0.0.0.0:{BACKEND_PORT}"])
        node.serve(node.namespace, "host-process", [f"tcp:0.0.0.0:{PROCESS_PORT}", f"udp:0.0.0.0:{PROCESS_PORT}",
                                                    f"tcp:0.0.0.0:{LISTENER_PORT}", f"tcp:0.0.0.0:{BOUND_PORT}",
                                                    f"tcp:0.0.0.0:{EXTERNAL_PROCESS_PORT}"])
        services = lab_services(backend.ip, scenario.endpoints)
        nft_mappings = [HostPortMapping(hostport.container_id, hostport.ip, protocol, port, CONTAINER_PORT, host_ip)
                        for port, protocol, host_ip in HOST_PORTS]
        writers = [lambda: write_kube_proxy(node, scenario, services),
                   lambda: write_hostports(node, scenario, nft_mappings)]
        if order == KUBE_PROXY_FIRST:  # the hook registered last runs first
            writers.reverse()
        for write in writers:
            write()
        if scenario.legacy:  # the jump inserted last runs first
            shapes_local.portmap_inserted_last(node)
            if order == KUBE_PROXY_FIRST:
                shapes_local.kube_proxy_inserted_last(node, scenario.mode)
        by_client: dict[str, list[Cell]] = {}
        for cell in CELLS:
            by_client.setdefault(cell.client, []).append(cell)
        for client_side, cells in by_client.items():
            namespace = {dp.FROM_NODE: node.namespace, dp.FROM_OUTSIDE: node.outside}.get(client_side, client.namespace)
            answers = node.probe(namespace, [[c.protocol, c.address, c.port] for c in cells], timeout)
            observation.answers.update({cell.key: answer for cell, answer in zip(cells, answers)})
        observation.dump = node.dump()
    return observation


def write_kube_proxy(node: netlab.Node, scenario: Scenario, services: list[LabService]) -> None:
    if scenario.mode in ("iptables", "ipvs"):
        node.node_run("sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1")  # kube-proxy sets it
    if scenario.mode == "iptables":
        node.iptables_restore(shapes.iptables_mode(services))
    elif scenario.mode == "ipvs":
        node.node_run("ip", "link", "add", "kube-ipvs0", "type", "bridge")  # stands in for the dummy device
        for address in sorted({s.cluster_ip for s in services} | {a for s in services for a in s.external_ips}):
            node.node_run("ip", "addr", "add", f"{address}/32", "dev", "kube-ipvs0")
        for command in shapes.ipvs_ipsets(services):
            node.node_run("ipset", *command)
        node.iptables_restore(shapes.ipvs_mode(accept_cluster_ips=scenario.proxy != "ipvs-1.10"))
        node.serve(node.namespace, "ipvs-stand-in", [f"tcp:0.0.0.0:{SERVICE_PORT}", f"udp:0.0.0.0:{SERVICE_PORT}",
                                                     f"tcp:0.0.0.0:{EXTERNAL_NODE_PORT}"])
    else:
        node.nft(shapes.nftables_mode(services) if scenario.node_ports == "all" else shapes_local.nftables_primary(services))
        return
    for jump in shapes.iptables_jumps(scenario.mode):
        node.iptables(*jump)


def write_hostports(node: netlab.Node, scenario: Scenario, mappings: list[HostPortMapping]) -> None:
    if scenario.hostport.startswith("portmap-nft"):
        node.nft(shapes.portmap_nftables(mappings, "1.9" if scenario.hostport.endswith("1.9") else "1.6"))
        # portmap sets route_localnet on the bridge whatever its backend (main.go, `snat`)
        node.node_run("sysctl", "-qw", f"net.ipv4.conf.{netlab.BRIDGE}.route_localnet=1")


# --- what the rules say, for the same setup -----------------------------------------------------------

NODES = textwrap.dedent("""\
    apiVersion: v1
    kind: Node
    metadata:
      name: lab-node
      labels: {kubernetes.io/hostname: lab-node, kubernetes.io/os: linux}
    status:
      addresses:
        - {type: InternalIP, address: 192.168.11.2}
    """)  # the lab node, for the rules that compare Service addresses with nodes' (KP305)


def manifest(scenario: Scenario) -> str:
    """The objects of the scenario as manifests, for `kubelint-ports lint`."""
    backend_replicas = 1 if scenario.endpoints else 0
    host_ports = "\n".join(
        f"            - {{containerPort: {CONTAINER_PORT}, hostPort: {port}, protocol: {protocol.upper()}"
        + (f", hostIP: {host_ip}" if host_ip else "") + f", name: p{index}}}"
        for index, (port, protocol, host_ip) in enumerate(HOST_PORTS))
    return textwrap.dedent("""\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: hostport, namespace: lab}
        spec:
          selector: {matchLabels: {app: hostport}}
          template:
            metadata: {labels: {app: hostport}}
            spec:
              containers:
                - name: server
                  image: agent:lab
                  ports:
        HOST_PORTS
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: backend, namespace: lab}
        spec:
          replicas: REPLICAS
          selector: {matchLabels: {app: backend}}
          template:
            metadata: {labels: {app: backend}}
            spec:
              containers:
                - {name: server, image: agent:lab, ports: [{containerPort: 9376}]}
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
                - name: server
                  image: agent:lab
                  args: ["--metrics-listen-address=:9100", "--https-port=8443"]
                  ports:
                    - {containerPort: 30584, protocol: TCP}
                    - {containerPort: 30584, protocol: UDP}
                    - {containerPort: 9300, protocol: TCP}
        ---
        apiVersion: v1
        kind: Service
        metadata: {name: nginx-nodeport, namespace: lab}
        spec:
          type: NodePort
          selector: {app: backend}
          ports:
            - {name: http, port: 80, targetPort: 9376, nodePort: 31123, protocol: TCP}
            - {name: http-udp, port: 80, targetPort: 9376, nodePort: 31123, protocol: UDP}
        ---
        apiVersion: v1
        kind: Service
        metadata: {name: mysql-a, namespace: lab}
        spec:
          selector: {app: backend}
          externalIPs: [192.168.11.100]
          ports:
            - {name: mysql, port: 3306, targetPort: 9376, protocol: TCP}
            - {name: mysql-udp, port: 3306, targetPort: 9376, protocol: UDP}
        ---
        apiVersion: v1
        kind: Service
        metadata: {name: api, namespace: lab}
        spec:
          type: NodePort
          selector: {app: backend}
          ports:
            - {name: http, port: 8080, targetPort: 9376, nodePort: 30584, protocol: TCP}
            - {name: http-udp, port: 8080, targetPort: 9376, nodePort: 30584, protocol: UDP}
        ---
        apiVersion: v1
        kind: Service
        metadata: {name: ingress, namespace: lab}
        spec:
          selector: {app: backend}
          externalIPs: [192.168.11.2]
          ports:
            - {name: https, port: 9200, targetPort: 9376, protocol: TCP}
        ---
        apiVersion: v1
        kind: Service
        metadata: {name: status, namespace: lab}
        spec:
          selector: {app: backend}
          externalIPs: [192.168.11.2]
          ports:
            - {name: http, port: 9300, targetPort: 9376, protocol: TCP}
        """).replace("HOST_PORTS", host_ports).replace("REPLICAS", str(backend_replicas))


# --- kube-proxy's masquerade per clusterCIDR (KP401-KP403) -------------------------------------------

MASQUERADE_PORT = 3306
CIDRS = {"pods": netlab.CLUSTER_CIDR, "services": "10.96.0.0/12", "elsewhere": "10.245.0.0/16", None: None}
CLIENTS = ("pod", "node", "off-cluster")
CASES = [("iptables", kind, None) for kind in CIDRS] + [("ipvs", kind, (1, 31, 0)) for kind in CIDRS] + \
        [("ipvs", None, (1, 10, 0)), ("ipvs", None, (1, 11, 0))]


@functools.cache
def sources_seen(mode: str, kind: str | None, version) -> dict[str, tuple[str, str, bool]]:
    """client -> (the address it sends from, what the Service side saw, marked for masquerade)."""
    seen = {}
    with netlab.Node() as node:
        backend = node.add_pod("backend")
        client = node.add_pod("client")
        node.serve(backend.namespace, "service", ["tcp:0.0.0.0:9376"])
        run = functools.partial(netlab.run, *node.exec_args(node.outside))
        run("ip", "route", "add", "10.96.0.0/12", "via", netlab.NODE_IP)
        service = LabService("db", "mysql-a", "mysql", "tcp", CLUSTER_IP, MASQUERADE_PORT, None, (Endpoint(backend.ip, 9376),))
        if mode == "iptables":
            node.iptables_restore(shapes.iptables_mode([service], cluster_cidr=CIDRS[kind]))
        else:
            node.node_run("ip", "link", "add", "kube-ipvs0", "type", "bridge")
            node.node_run("ip", "addr", "add", f"{CLUSTER_IP}/32", "dev", "kube-ipvs0")
            for command in shapes.ipvs_ipsets([service]):
                node.node_run("ipset", *command)
            node.iptables_restore(shapes.ipvs_mode(cluster_cidr=CIDRS[kind], vip_masquerade=version >= (1, 11, 1)))
            # v1.11.0 had the `KUBE-CLUSTER-IP src,dst` rule in its source but wrote it only with a
            # non-empty set, which needed masqueradeAll or a clusterCIDR (kubernetes#65388, v1.11.1).
            node.serve(node.namespace, "ipvs-stand-in", [f"tcp:0.0.0.0:{MASQUERADE_PORT}"])
        for jump in shapes.iptables_jumps(mode):
            node.iptables(*jump)
        origin = {"pod": (client.namespace, client.ip), "node": (node.namespace, None),
                  "off-cluster": (node.outside, netlab.GATEWAY_IP)}
        for name in CLIENTS:
            node.iptables("-t", "nat", "-Z", "KUBE-SERVICES")
            namespace, address = origin[name]
            [answer] = node.probe(namespace, [["tcp", CLUSTER_IP, MASQUERADE_PORT]])
            listing = node.node_run("iptables", "-t", "nat", "-L", "KUBE-SERVICES", "-v", "-x", "-n").stdout
            marked = any("KUBE-MARK-MASQ" in line and "KUBE-CLUSTER-IP" in line and int(line.split()[0]) > 0
                         for line in listing.splitlines()[2:])
            if address is None:  # the node picks its source by route: the VIP in IPVS mode
                address = CLUSTER_IP if mode == "ipvs" else netlab.NODE_IP
            seen[name] = (address, answer, marked)
    return seen
