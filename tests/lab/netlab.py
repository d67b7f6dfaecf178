"""A Kubernetes node in network namespaces, built with the real CNI plugins.

`Node` creates (all names start with the prefix, `kp11-` by default, plus the process id):

    <prefix>-node   the node: `eth0` 192.168.11.2/24 (its address), the CNI `bridge` (kp11br0,
                    10.244.11.1/24, made by the real `bridge` + `host-local` plugins), ip_forward
                    and bridge-nf-call-iptables on, as on a Kubernetes node
    <prefix>-ext    a machine outside the cluster on 192.168.11.1, the node's default gateway
    <prefix>-<pod>  one namespace per pod sandbox, attached by CNI ADD (bridge, host-local,
                    then the real `portmap` with the pod's port mappings as runtime config)

Everything happens inside these namespaces: no rule, link or address is ever added to the
namespace the tests run in. `close()` (or leaving the `with` block) stops every process the
lab started and deletes its namespaces, and the kernel drops their rules with them.

Reusable beyond the tests: `Node.dump()` returns what `iptables-save`, `nft list ruleset`,
`ss -Htlnup`, `ip -o addr` and the host-local IPAM directory say, the raw material of node
snapshot fixtures. Pods are added by CNI ADD and never removed by DEL, so stale state can be
built on purpose (a second ADD for the same port).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from external_tools import missing_tool_reason, needs  # noqa: E402  (tests/: one wording for missing tools)

CNI_PATH = "/usr/lib/cni"
AGENT = str(Path(__file__).with_name("agent.py"))
NODE_IP = "192.168.11.2"
GATEWAY_IP = "192.168.11.1"
BRIDGE = "kp11br0"
BRIDGE_IP = "10.244.11.1"
POD_SUBNET = "10.244.11.0/24"
CLUSTER_CIDR = "10.244.0.0/16"
NETWORK_NAME = "kp11net"
COMMAND_TIMEOUT = 20  # seconds for any one command: nothing here should take more than a fraction
_serial = itertools.count(1)


class LabError(RuntimeError):
    pass


def run(*command: str, stdin: str | None = None, check: bool = True, env: dict | None = None,
        timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess:
    result = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, timeout=timeout)
    if check and result.returncode != 0:
        raise LabError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr.strip() or result.stdout}")
    return result


def conflist(ipam_dir: str, portmap: bool = True) -> dict:
    """The network configuration list a node would hold in /etc/cni/net.d."""
    plugins: list[dict] = [{
        "type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True,
        "ipam": {"type": "host-local", "dataDir": ipam_dir, "ranges": [[{"subnet": POD_SUBNET, "gateway": BRIDGE_IP}]],
                 "routes": [{"dst": "0.0.0.0/0"}]},
    }]
    if portmap:
        plugins.append({"type": "portmap", "capabilities": {"portMappings": True}, "snat": True})
    return {"cniVersion": "1.0.0", "name": NETWORK_NAME, "plugins": plugins}


@dataclass
class Pod:
    name: str
    namespace: str  # the network namespace
    ip: str
    container_id: str
    port_mappings: list[dict] = field(default_factory=list)


class Node:
    def __init__(self, prefix: str = "kp11", portmap: bool = True):
        self.id = f"{prefix}-{os.getpid()}-{next(_serial)}"
        self.namespace = f"{self.id}-node"
        self.outside = f"{self.id}-ext"
        self.workdir = tempfile.mkdtemp(prefix=f"{self.id}-")
        self.ipam_dir = os.path.join(self.workdir, "ipam")
        self.network = conflist(self.ipam_dir, portmap)
        self.pods: dict[str, Pod] = {}
        self.namespaces: list[str] = []
        self.processes: list[subprocess.Popen] = []

    # -- life cycle

    def __enter__(self) -> "Node":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        for namespace in (self.namespace, self.outside):
            self.add_namespace(namespace)
        node = self.exec_args(self.namespace)
        run(*node, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "ext0")
        run(*node, "ip", "link", "set", "ext0", "netns", self.outside)
        run(*node, "ip", "addr", "add", f"{NODE_IP}/24", "dev", "eth0")
        run(*node, "ip", "link", "set", "eth0", "up")
        run(*node, "ip", "route", "add", "default", "via", GATEWAY_IP)
        # icmp_ratelimit 0: a REJECT's port-unreachable reaches a pod client however many came before
        # (the kernel's default lets about six through per peer, then one a second: a probe would time out).
        for setting in ("net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1", "net.ipv4.icmp_ratelimit=0"):
            run(*node, "sysctl", "-qw", setting)
        outside = self.exec_args(self.outside)
        run(*outside, "ip", "addr", "add", f"{GATEWAY_IP}/24", "dev", "ext0")
        run(*outside, "ip", "link", "set", "ext0", "up")
        run(*outside, "ip", "route", "add", CLUSTER_CIDR, "via", NODE_IP)

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.processes.clear()
        for namespace in reversed(self.namespaces):
            run("ip", "netns", "del", namespace, check=False)
        self.namespaces.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def add_namespace(self, namespace: str) -> None:
        run("ip", "netns", "add", namespace)
        self.namespaces.append(namespace)
        run("ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up")

    @staticmethod
    def exec_args(namespace: str) -> tuple[str, ...]:
        return ("ip", "netns", "exec", namespace)

    def node_run(self, *command: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return run(*self.exec_args(self.namespace), *command, stdin=stdin, check=check)

    # -- pods

    def add_pod(self, name: str, port_mappings: list[dict] | None = None) -> Pod:
        """A pod sandbox attached the way the kubelet's runtime does it: CNI ADD, plugin by plugin."""
        namespace = f"{self.id}-{name}"
        self.add_namespace(namespace)
        container_id = f"{name}-{self.id}".replace("-", "")[:64]
        mappings = port_mappings or []
        result = self.cni_add(container_id, namespace, mappings)
        address = next(ip["address"] for ip in result["ips"])
        pod = Pod(name, namespace, address.split("/")[0], container_id, mappings)
        self.pods[name] = pod
        return pod

    def cni_add(self, container_id: str, namespace: str, port_mappings: list[dict]) -> dict:
        env = {**os.environ, "CNI_COMMAND": "ADD", "CNI_CONTAINERID": container_id,
               "CNI_NETNS": f"/run/netns/{namespace}", "CNI_IFNAME": "eth0", "CNI_PATH": CNI_PATH}
        previous = None
        for plugin in self.network["plugins"]:
            config = {"cniVersion": self.network["cniVersion"], "name": self.network["name"], **plugin}
            if "portMappings" in plugin.get("capabilities", {}):
                config["runtimeConfig"] = {"portMappings": port_mappings}
            if previous is not None:
                config["prevResult"] = previous
            output = run(*self.exec_args(self.namespace), os.path.join(CNI_PATH, plugin["type"]),
                         stdin=json.dumps(config), env=env)
            previous = json.loads(output.stdout)
        return previous

    # -- rules in other components' shapes

    def iptables_restore(self, text: str) -> None:
        self.node_run("iptables-restore", "--noflush", stdin=text)

    def iptables(self, *arguments: str) -> None:
        self.node_run("iptables", "-w", *arguments)

    def nft(self, text: str) -> None:
        self.node_run("nft", "-f", "-", stdin=text)

    # -- processes and packets

    def serve(self, namespace: str, name: str, sockets: list[str]) -> None:
        """A server answering `name <client address>` on `proto:address:port` sockets."""
        process = subprocess.Popen([*self.exec_args(namespace), sys.executable, AGENT, "serve", name, *sockets],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.processes.append(process)
        line = process.stdout.readline()  # `ready`, or EOF when the bind failed
        if line.strip() != "ready":
            process.kill()
            raise LabError(f"server {name} in {namespace} did not start: {process.stderr.read().strip()}")

    def probe(self, namespace: str, probes: list[tuple[str, str, int]], timeout: float = 1.0) -> list[str]:
        """Connect from `namespace` to each (protocol, address, port); the answers, in order."""
        result = run(*self.exec_args(namespace), sys.executable, AGENT, "probe", str(timeout),
                     stdin=json.dumps(probes), timeout=COMMAND_TIMEOUT + timeout * len(probes))
        return json.loads(result.stdout)

    # -- what a node snapshot reads

    def dump(self) -> dict[str, str]:
        ipam = []
        for root, _, files in os.walk(self.ipam_dir):
            for name in sorted(files):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8", errors="replace") as handle:
                    ipam.append(f"{os.path.relpath(path, self.ipam_dir)}: {handle.read().strip()}")
        return {
            "iptables-save": self.node_run("iptables-save").stdout,
            "nft list ruleset": self.node_run("nft", "list", "ruleset").stdout,
            "ss -Htlnup": self.node_run("ss", "-Htlnup").stdout,
            "ip -o addr": self.node_run("ip", "-o", "addr").stdout,
            "host-local": "\n".join(sorted(ipam)) + "\n",
        }


def missing_requirements() -> str:
    """Why the lab cannot run here, or "" when it can."""
    if sys.platform != "linux":
        return "the datapath lab needs Linux network namespaces"
    if os.geteuid() != 0:
        return "the datapath lab needs root (network namespaces, iptables, nft)"
    missing = [(tool, package, reason) for tool, package in (
        ("ip", "iproute2"), ("iptables", "iptables"), ("iptables-save", "iptables"), ("iptables-restore", "iptables"),
        ("nft", "nftables"), ("ipset", "ipset"), ("ss", "iproute2"), ("sysctl", "procps"), ("conntrack", "conntrack"),
    ) if (reason := missing_tool_reason(tool, package))]
    if missing:
        return needs("the datapath lab", missing)
    for plugin in ("bridge", "host-local", "portmap"):
        if not os.access(os.path.join(CNI_PATH, plugin), os.X_OK):
            return f"the datapath lab needs the CNI {plugin} plugin in {CNI_PATH} (apt-get install containernetworking-plugins)"
    version = run("iptables", "--version", check=False).stdout
    if "nf_tables" not in version:
        return f"the datapath lab needs iptables with the nf_tables backend, found: {version.strip()}"
    probe = f"kp11-probe-{os.getpid()}"
    created = run("ip", "netns", "add", probe, check=False)
    if created.returncode != 0:
        return f"cannot create a network namespace: {created.stderr.strip()}"
    try:
        bridge = run("ip", "netns", "exec", probe, "ip", "link", "add", "br0", "type", "bridge", check=False)
        if bridge.returncode != 0:
            return f"cannot create a bridge in a network namespace: {bridge.stderr.strip()}"
    finally:
        run("ip", "netns", "del", probe, check=False)
    return ""
