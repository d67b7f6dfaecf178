"""The datapath model without the lab (which proves it: tests/lab), the facts it reads and their
sources, and how its answers reach findings, JSON, SARIF and `kubelint-ports config`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.model import ClusterFacts, build_cluster
from kubelint_ports.model import datapath as dp
from kubelint_ports.model.cluster_network import image_version
from kubelint_ports.loading import LoadResult, load_bytes

NODE_PORT = dp.PortUse(host_port_ip=dp.WILDCARD, node_port=True, endpoints=True)
CLUSTER_PORT = dp.PortUse(host_port_ip=dp.WILDCARD, service_port=True, endpoints=True)
EXTERNAL_ON_NODE = dp.PortUse(host_port_ip=dp.WILDCARD, service_port=True, endpoints=True, external_ip_on_node=True)


def facts(mode=None, cni=None, backend=None, kube_proxy=None, order=None) -> dp.DatapathFacts:
    return dp.DatapathFacts(
        proxy_mode=dp.Fact(mode, "t") if mode else None,
        cni_plugins_version=dp.Fact(dp.parse_version(cni), "t") if cni else None,
        hostport_backend=dp.Fact(backend, "t") if backend else None,
        kube_proxy_version=dp.Fact(dp.parse_version(kube_proxy), "t") if kube_proxy else None,
        hostport_order=dp.Fact(order, "t") if order else None)


@pytest.mark.parametrize("mode, cni, backend, destination, use, receiver", [
    ("iptables", "1.1.1", None, dp.NODE_IP, NODE_PORT, dp.SERVICE),  # KUBE-NODEPORTS first
    ("iptables", "1.1.1", None, dp.NODE_IP, dp.PortUse(dp.WILDCARD, node_port=True, endpoints=False), dp.HOSTPORT),
    ("iptables", "0.7.4", None, dp.NODE_IP, NODE_PORT, dp.UNDEFINED),  # the last inserter runs first
    ("ipvs", "1.1.1", None, dp.NODE_IP, NODE_PORT, dp.HOSTPORT),  # IPVS only marks NodePorts
    ("nftables", "1.1.1", None, dp.NODE_IP, NODE_PORT, dp.UNDEFINED),  # two tables, one priority
    ("ipvs", "1.1.1", None, dp.CLUSTER_IP, CLUSTER_PORT, dp.SERVICE),  # ACCEPT before portmap
    ("ipvs", "0.7.4", None, dp.CLUSTER_IP, CLUSTER_PORT, dp.UNDEFINED),  # incident 000, unless the order is seen
    ("ipvs", "1.9.0", "nftables", dp.CLUSTER_IP, CLUSTER_PORT, dp.HOSTPORT),  # ACCEPT ends one table only
    # a Service's externalIP that is the node's own address (KP305): local for both sides
    ("iptables", "1.1.1", None, dp.EXTERNAL_IP, EXTERNAL_ON_NODE, dp.SERVICE),  # KUBE-SERVICES first
    ("iptables", "0.7.4", None, dp.EXTERNAL_IP, EXTERNAL_ON_NODE, dp.UNDEFINED),
    ("iptables", "1.1.1", None, dp.EXTERNAL_IP, dp.PortUse(dp.WILDCARD, service_port=True, endpoints=False,
                                                        external_ip_on_node=True), dp.HOSTPORT),
    ("nftables", "1.1.1", None, dp.EXTERNAL_IP, EXTERNAL_ON_NODE, dp.UNDEFINED),
    ("iptables", "1.1.1", None, dp.EXTERNAL_IP, dp.PortUse(host_process=True, service_port=True, endpoints=False,
                                                        external_ip_on_node=True), dp.REJECTED),
    ("iptables", "1.1.1", None, dp.EXTERNAL_IP, CLUSTER_PORT, dp.SERVICE),
    ("iptables", "0.7.4", None, dp.CLUSTER_IP, CLUSTER_PORT, dp.SERVICE),  # ClusterIPs are not local
    ("iptables", "1.7.1", "nftables", dp.CLUSTER_IP, CLUSTER_PORT, dp.UNDEFINED),  # GHSA-jv3w-x3r3-g6rm
    ("iptables", "1.9.0", "nftables", dp.CLUSTER_IP, CLUSTER_PORT, dp.SERVICE),
    ("iptables", "1.1.1", None, dp.NODE_IP, dp.PortUse(host_process=True, node_port=True, endpoints=False),
     dp.REJECTED),  # incident 003
    ("nftables", "1.1.1", None, dp.NODE_IP, dp.PortUse(dp.WILDCARD, host_process=True), dp.HOSTPORT),
    ("iptables", "1.1.1", None, dp.NODE_IP, dp.PortUse("192.168.1.5", host_process=True), dp.HOST_PROCESS),
])
def test_known_facts_give_one_receiver(mode, cni, backend, destination, use, receiver):
    answer = dp.Datapath(facts(mode, cni, backend)).deliver(dp.FROM_POD, destination, use, 31123)
    assert answer.receiver == receiver, answer.outcomes
    assert answer.certain is (receiver != dp.UNDEFINED)


def test_nftables_localhost_is_not_a_node_port():
    answer = dp.Datapath(facts("nftables", "1.1.1")).deliver(dp.FROM_NODE, dp.LOCALHOST, NODE_PORT, 31123)
    assert answer.receiver == dp.HOSTPORT


def test_old_ipvs_kube_proxy_lets_the_hostport_take_cluster_ips():
    answer = dp.Datapath(facts("ipvs", "1.1.1", kube_proxy="1.10.0")).deliver(dp.FROM_POD, dp.CLUSTER_IP,
                                                                               CLUSTER_PORT, 3306)
    assert answer.receiver == dp.HOSTPORT


def test_observed_order_settles_undefined():
    for order, receiver in ((dp.HOSTPORT_FIRST, dp.HOSTPORT), (dp.KUBE_PROXY_FIRST, dp.SERVICE)):
        answer = dp.Datapath(facts("nftables", "1.1.1", order=order)).deliver(dp.FROM_POD, dp.NODE_IP, NODE_PORT, 1)
        assert answer.receiver == receiver


def test_unknown_facts_give_outcomes_with_conditions():
    answer = dp.Datapath().deliver(dp.FROM_POD, dp.NODE_IP, dp.PortUse(dp.WILDCARD, node_port=True), 31123)
    assert answer.receiver == dp.DEPENDS and not answer.certain
    assert set(answer.depends_on) == {"proxy-mode", "cni-plugins-version", "endpoints"}
    text = dp.summary(answer, {dp.HOSTPORT: "this pod", dp.SERVICE: "the Service"})
    assert "this pod gets it" in text and "in IPVS mode" in text
    assert "the Service gets it in iptables mode" in text and "undefined" in text
    # portmap < v0.7.5: both outcomes and what decides between them (the last inserter runs first)
    assert "with CNI portmap < v0.7.5 when the Service has endpoints, it depends on which jump was inserted last: " \
           "this pod gets it when portmap's was" in text
    focused = answer.focus(dp.HOSTPORT)
    assert [o.receiver for o in focused.outcomes] == [dp.HOSTPORT, dp.UNDEFINED, dp.UNDEFINED, dp.OTHERWISE]


def test_summary_names_winner_and_loser():
    answer = dp.Datapath(facts("iptables", "1.1.1")).deliver(dp.FROM_POD, dp.NODE_IP, NODE_PORT, 31123)
    text = dp.summary(answer, {dp.HOSTPORT: "nginx", dp.SERVICE: "web"})
    assert "KUBE-NODEPORTS" in text and "so web receives it, and nginx never sees it" in text
    data = dp.phrases.answer_data(answer, {dp.HOSTPORT: "nginx", dp.SERVICE: "web"})
    assert data["receiver"] == "service" and data["loser"] == ["nginx"] and data["certain"]
    assert data["facts"]["proxy-mode"] == {"value": "iptables", "source": "t"}


@pytest.mark.parametrize("mode, client, cidr, version, expected", [
    ("ipvs", "node", None, (1, 10), False), ("ipvs", "node", None, (1, 31), True),
    # kubernetes#65388 reached release-1.11 after v1.11.0 shipped (#65821, in v1.11.1)
    ("ipvs", "node", None, (1, 11, 0), False), ("ipvs", "node", None, (1, 11, 1), True),
    ("ipvs", "node", "services", (1, 31), False), ("ipvs", "node", "pods", (1, 31), True),
    ("iptables", "pod", "elsewhere", None, True), ("iptables", "off-cluster", None, None, False),
])
def test_masquerade(mode, client, cidr, version, expected):
    assert dp.masqueraded(mode, client, cluster_cidr=cidr, version=version) is expected


@pytest.mark.parametrize("image, component, kind, version", [
    ("registry.k8s.io/kube-proxy:v1.29.3", None, "kube-proxy", (1, 29, 3)),
    ("k8s.gcr.io/kube-proxy-amd64:v1.9.11", None, "kube-proxy", (1, 9, 11)),
    ("rancher/hyperkube:v1.18.20-rancher1", "kube-proxy", "kube-proxy", (1, 18, 20)),
    ("rancher/hyperkube:v1.18.20-rancher1", "kube-apiserver", "", None),
    ("rancher/hardened-cni-plugins:v1.4.0-build20240122", None, "cni-plugins", (1, 4, 0)),
    ("docker.io/flannel/flannel-cni-plugin:v1.1.2", None, "", None),  # flannel's own binary
    ("calico/cni:v3.27.0", None, "", None),
    ("registry.k8s.io/kube-proxy:latest", None, "kube-proxy", None),
])
def test_image_versions(image, component, kind, version):
    assert image_version(image, component) == (kind, version)


FLANNEL = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-flannel-cfg, namespace: kube-flannel}
data:
  cni-conf.json: |
    {"name": "cbr0", "cniVersion": "0.3.1",
     "plugins": [{"type": "flannel", "delegate": {"hairpinMode": true}},
                 {"type": "portmap", "capabilities": {"portMappings": true}}]}
"""
CALICO = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: calico-config, namespace: kube-system}
data:
  cni_network_config: |-
    {"name": "k8s-pod-network", "cniVersion": "0.3.1",
     "plugins": [{"type": "calico", "mtu": __CNI_MTU__, "kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"}},
                 {"type": "bandwidth", "capabilities": {"bandwidth": true}}]}
"""
KUBE_PROXY = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system}
spec:
  selector: {matchLabels: {k8s-app: kube-proxy}}
  template:
    metadata: {labels: {k8s-app: kube-proxy}}
    spec:
      hostNetwork: true
      containers:
        - name: kube-proxy
          image: registry.k8s.io/kube-proxy:v1.30.4
          command: [kube-proxy, --proxy-mode=ipvs, --cluster-cidr=10.244.0.0/16, --nodeport-addresses=primary]
"""


def loaded(text: str, path: str) -> list:
    result = LoadResult()
    load_bytes(text.encode(), path, result)
    assert not result.diagnostics, result.diagnostics
    return result.documents


def model(text: str, facts: ClusterFacts = ClusterFacts(), nodes: str | None = None):
    documents = loaded(text, "m.yaml")
    node_documents = loaded(nodes, "nodes.yaml") if nodes else None
    cluster, diagnostics = build_cluster(documents, facts, node_documents=node_documents)
    assert not diagnostics, diagnostics
    return cluster.datapath.facts


def test_facts_from_inputs_with_sources():
    found = model(FLANNEL + "---\n" + KUBE_PROXY)
    assert found.hostport == dp.Fact("portmap", "kube-flannel/ConfigMap/kube-flannel-cfg (cni-conf.json)")
    assert found.proxy_mode.value == "ipvs" and "kube-proxy flags" in found.proxy_mode.source
    assert found.kube_proxy_version.value == (1, 30, 4)
    assert found.node_port_addresses.value == ("primary",)


def test_calico_template_without_portmap_means_no_hostport_rules():
    assert model(CALICO).hostport.value == "none"


def test_conflist_file_and_cri_o_nodes(tmp_path):
    nodes = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {nodeInfo: {containerRuntimeVersion: "cri-o://1.33.2"}}
"""
    found = model(FLANNEL, nodes=nodes)
    assert found.hostport.value == "crio" and found.crio_version.value == (1, 33, 2)
    assert dp.Datapath(found).hostport_traits() == (dp.NFT_LOCAL,)
    (tmp_path / "10-flannel.conflist").write_text(
        '{"cniVersion": "1.0.0", "name": "cbr0", "plugins": [{"type": "flannel"}, '
        '{"type": "portmap", "backend": "nftables"}]}')
    report = lint_paths([str(tmp_path)])
    assert not report.diagnostics and report.objects == 1


def test_stated_facts_win_with_their_source():
    stated = (("cni-plugins-version", "0.7.4", "--cni-plugins-version"), ("proxy-mode", "iptables", "cfg proxy-mode"))
    found = model(KUBE_PROXY, ClusterFacts(stated=stated))
    assert found.proxy_mode == dp.Fact("iptables", "cfg proxy-mode")
    assert found.cni_plugins_version == dp.Fact((0, 7, 4), "--cni-plugins-version")


HOSTPORT_VS_NODEPORT = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  containers:
    - {name: nginx, image: nginx, ports: [{containerPort: 80, hostPort: 31123}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  type: NodePort
  selector: {app: other}
  ports: [{port: 80, nodePort: 31123}]
"""


def test_json_and_sarif_carry_the_answer(tmp_path):
    (tmp_path / "m.yaml").write_text(HOSTPORT_VS_NODEPORT)
    result = CliRunner().invoke(app, ["lint", str(tmp_path / "m.yaml"), "--format", "json", "--proxy-mode", "ipvs",
                                      "--cni-plugins-version", "1.1.1"])
    [finding] = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "KP201"]
    traffic = finding["traffic"]
    assert traffic["receiver"] == "hostport" and traffic["certain"] and traffic["loser"] == ["shop/Service/web"]
    assert traffic["facts"]["cni-plugins-version"] == {"value": "v1.1.1", "source": "--cni-plugins-version"}
    assert finding["message"].startswith("hostPort 31123/TCP takes the traffic of nodePort 31123 of shop/Service/web:")
    result = CliRunner().invoke(app, ["lint", str(tmp_path / "m.yaml"), "--format", "sarif"])
    [sarif] = [r for r in json.loads(result.stdout)["runs"][0]["results"] if r["ruleId"] == "KP201"]
    assert sarif["properties"]["traffic"]["receiver"] == "depends"
    assert set(sarif["properties"]["traffic"]["dependsOn"]) == {"proxy-mode", "cni-plugins-version", "endpoints"}


def test_bad_cni_plugins_version_is_a_usage_error(tmp_path):
    (tmp_path / "m.yaml").write_text(HOSTPORT_VS_NODEPORT)
    result = CliRunner().invoke(app, ["lint", str(tmp_path / "m.yaml"), "--cni-plugins-version", "latest"])
    assert result.exit_code == 2 and "not a version" in result.output


def test_config_shows_facts_and_sources(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".kubelint-ports.yaml").write_text("facts:\n  cni-plugins-version: '1.1.1'\n  hostport: portmap\n")
    (tmp_path / "kp.yaml").write_text(KUBE_PROXY)
    import yaml

    shown = yaml.safe_load(CliRunner().invoke(app, ["config"]).stdout)
    assert shown["facts"]["cni-plugins-version"] == {"value": "1.1.1",
                                                     "source": ".kubelint-ports.yaml facts.cni-plugins-version"}
    shown = yaml.safe_load(CliRunner().invoke(app, ["config", "kp.yaml"]).stdout)
    assert shown["facts"]["kube-proxy-version"]["value"] == "v1.30.4"
    assert shown["facts"]["cni-plugins-version"]["value"] == "v1.1.1"
    assert shown["facts"]["hostport-order"]["value"] is None and "not observed" in shown["facts"]["hostport-order"][
        "unknown"]


def test_default_services_are_assumed_unless_the_cluster_shows_its_own(tmp_path):
    pod = HOSTPORT_VS_NODEPORT.split("---")[0].replace("hostPort: 31123", "hostPort: 443")
    (tmp_path / "m.yaml").write_text(pod)
    options = LintOptions(facts=ClusterFacts(proxy_mode="ipvs", cni_plugins_version="0.7.4"))
    [finding] = [f for f in lint_paths([str(tmp_path / "m.yaml")], options).findings if f.rule_id == "KP304"]
    assert "default/Service/kubernetes" in finding.message and "API server" in finding.message
    (tmp_path / "live.yaml").write_text(HOSTPORT_VS_NODEPORT.split("---")[1])
    options = LintOptions(facts=options.facts, cluster_files=(str(tmp_path / "live.yaml"),))
    assert not [f for f in lint_paths([str(tmp_path / "m.yaml")], options).findings if f.rule_id == "KP304"]


LAB_TOOLS_PRESENT = "iptables v1.8.9 (nf_tables)"
LEGACY_IPTABLES = "iptables v1.8.7 (legacy)"
NO_NETNS = "mount --make-shared /run/netns failed: Operation not permitted"
NO_BRIDGE = "Error: Unknown device type."


@pytest.mark.parametrize("machine, reason", [
    ({"platform": "darwin"}, "the datapath lab needs Linux network namespaces"),
    ({"euid": 1000}, "the datapath lab needs root (network namespaces, iptables, nft)"),
    ({"missing_tool": "nft"}, "the datapath lab needs `nft`, which is not installed: apt-get install nftables"),
    ({"missing_tool": "conntrack"}, "the datapath lab needs `conntrack`, which is not installed: apt-get install conntrack"),
    ({"missing_plugin": "portmap"},
     "the datapath lab needs the CNI portmap plugin in {cni} (apt-get install containernetworking-plugins)"),
    ({"iptables_version": LEGACY_IPTABLES},
     f"the datapath lab needs iptables with the nf_tables backend, found: {LEGACY_IPTABLES}"),
    ({"netns_error": NO_NETNS}, f"cannot create a network namespace: {NO_NETNS}"),
    ({"bridge_error": NO_BRIDGE}, f"cannot create a bridge in a network namespace: {NO_BRIDGE}"),
    ({}, ""),
], ids=["not-linux", "not-root", "no-nft", "no-conntrack", "no-portmap-plugin", "legacy-iptables",
        "no-network-namespace", "no-bridge", "everything-present"])
def test_lab_names_what_keeps_it_from_running(machine, reason, tmp_path, monkeypatch):
    """The lab skips with a reason, never silently (tests/lab/conftest.py): each missing requirement
    gives its own reason, naming the package to install. The machine is simulated (no command
    runs), so every case is checked everywhere, not only the one this machine happens to be."""
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent / "lab"))
    import netlab

    monkeypatch.setattr(netlab.sys, "platform", machine.get("platform", "linux"))
    monkeypatch.setattr(netlab.os, "geteuid", lambda: machine.get("euid", 0))
    monkeypatch.setattr(netlab, "missing_tool_reason", lambda tool, package: (
        f"`{tool}` is not installed: apt-get install {package}" if tool == machine.get("missing_tool") else None))
    for plugin in ("bridge", "host-local", "portmap"):
        if plugin != machine.get("missing_plugin"):
            (tmp_path / plugin).write_text("#!/bin/sh\n")
            (tmp_path / plugin).chmod(0o755)
    monkeypatch.setattr(netlab, "CNI_PATH", str(tmp_path))
    namespaces: set[str] = set()

    def run(*command: str, check: bool = True, **_) -> subprocess.CompletedProcess:
        def done(returncode: int = 0, stdout: str = "", stderr: str = "") -> subprocess.CompletedProcess:
            return subprocess.CompletedProcess(command, returncode, stdout, stderr)

        if command == ("iptables", "--version"):
            return done(stdout=machine.get("iptables_version", LAB_TOOLS_PRESENT) + "\n")
        if command[:3] == ("ip", "netns", "add"):
            if "netns_error" in machine:
                return done(1, stderr=machine["netns_error"] + "\n")
            namespaces.add(command[3])
            return done()
        if command[:3] == ("ip", "netns", "exec") and command[4:7] == ("ip", "link", "add"):
            return done(2, stderr=machine["bridge_error"] + "\n") if "bridge_error" in machine else done()
        if command[:3] == ("ip", "netns", "del"):
            namespaces.discard(command[3])
            return done()
        raise AssertionError(f"the probe ran a command the simulated machine does not know: {command}")

    monkeypatch.setattr(netlab, "run", run)
    assert netlab.missing_requirements() == reason.format(cni=tmp_path)
    assert not namespaces, "the probe left its network namespace behind"


def test_masquerade_gap_boundary_is_v1_11_1():
    [gap] = dp.masquerade_gap("ipvs", (1, 11, 0))
    assert gap.node_clients_broken and gap.versions == "kube-proxy < v1.11.1"
    [gap] = dp.masquerade_gap("ipvs", (1, 11, 1))
    assert not gap.node_clients_broken and gap.versions == "kube-proxy >= v1.11.1"


def test_kp801_names_the_portmap_release_whose_del_returns_early():
    from kubelint_ports.checks.node.phrases import STALE_CAUSES
    assert "since v0.8.7" in STALE_CAUSES and "v0.9.0" not in STALE_CAUSES  # containernetworking/plugins 877602d6


# --- issue 34: pods short-circuited to a Local Service only with a local detector ------------------

LOCAL_NODE_PORT = dp.PortUse(node_port=True, endpoints=True, external_local=True, local_endpoints=False)


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
@pytest.mark.parametrize("host_port, without", [(dp.WILDCARD, dp.HOSTPORT), (None, dp.DROPPED)])
def test_pods_reach_a_local_node_port_only_when_kube_proxy_tells_them_apart(mode, host_port, without):
    """kube-proxy writes the pod short-circuit of KUBE-EXT-* / external-* only under
    `if proxier.localDetector.IsImplemented()`: without clusterCIDR a pod is an outside client to
    the chain, so the hostPort pod takes it, or kube-proxy's DROP does. The node's own packets
    (`--src-type LOCAL`) are short-circuited either way."""
    use = replace(LOCAL_NODE_PORT, host_port_ip=host_port)
    base = facts(mode, cni="1.1.1", order=dp.KUBE_PROXY_FIRST if mode == "nftables" else None)
    blind = dp.Datapath(replace(base, local_detector=dp.Fact(False, "t")))
    assert dp.Datapath(base).deliver(dp.FROM_POD, dp.NODE_IP, use, 31124).receiver == dp.SERVICE
    pod = blind.deliver(dp.FROM_POD, dp.NODE_IP, use, 31124)
    assert pod.receiver == without and "ext-pod-undetected" in pod.outcomes[0].route.steps
    assert blind.deliver(dp.FROM_NODE, dp.NODE_IP, use, 31124).receiver == dp.SERVICE


def test_ipvs_serves_a_local_node_port_alike_with_or_without_a_local_detector():
    """IPVS has no pod short-circuit (its NodePort virtual servers take local endpoints only for
    every client: syncEndpoint(..., ExternalPolicyLocal(), ...)): the detector changes nothing."""
    use = replace(LOCAL_NODE_PORT, host_port_ip=dp.WILDCARD)
    base = facts("ipvs", cni="1.1.1")
    known = dp.Datapath(base).deliver(dp.FROM_POD, dp.NODE_IP, use, 1)
    blind = dp.Datapath(replace(base, local_detector=dp.Fact(False, "t"))).deliver(dp.FROM_POD, dp.NODE_IP, use, 1)
    assert {route for _, route in known.worlds} == {route for _, route in blind.worlds}


KUBE_PROXY_CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-proxy, namespace: kube-system}
data:
  config.conf: |-
    apiVersion: kubeproxy.config.k8s.io/v1alpha1
    kind: KubeProxyConfiguration
    mode: @MODE@
    clusterCIDR: @CIDR@
"""


def kube_proxy_findings(tmp_path: Path, mode: str, cidr: str):
    path = tmp_path / "kube-proxy.yaml"
    path.write_text(KUBE_PROXY_CONFIG.replace("@MODE@", mode).replace("@CIDR@", cidr), encoding="utf-8")
    return [f for f in lint_paths([str(path)], LintOptions()).findings if f.rule_id == "KP401"]


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_kp401_says_what_pods_get_from_a_local_service(tmp_path, mode):
    [finding] = kube_proxy_findings(tmp_path, mode, '""')
    assert ("a pod's packet to its NodePort, external or load-balancer IP is not sent to the Service, so a hostPort "
            "pod on that port gets it, and without one kube-proxy drops it (a timeout)") in finding.message


def test_kp401_says_nothing_of_local_services_in_ipvs_mode(tmp_path):
    [finding] = kube_proxy_findings(tmp_path, "ipvs", '""')
    assert "externalTrafficPolicy" not in finding.message


def test_the_local_detector_fact_is_stated_only_when_missing():
    """A kube-proxy without clusterCIDR (detectLocalMode ClusterCIDR) states the fact false; one with
    a clusterCIDR leaves it unknown, which the model takes as true."""
    for cidr, expected in (('""', False), ("10.244.0.0/16", None)):
        fact = model(KUBE_PROXY_CONFIG.replace("@MODE@", "iptables").replace("@CIDR@", cidr)).local_detector
        assert (fact.value if fact else None) is expected


HOST_PROCESS_ON_NODE_PORT = dp.PortUse(host_process=True, node_port=True, endpoints=True)


@pytest.mark.parametrize("kube_proxy, receiver", [
    ("1.10.0", dp.DROPPED),  # 127.0.0.1:nodePort is an IPVS virtual server: the connection hangs
    ("1.21.14", dp.DROPPED),
    ("1.22.0", dp.HOST_PROCESS),  # kubernetes#101023: no loopback virtual servers
    (None, dp.HOST_PROCESS),  # an unstated version is read as a current one, as for the ACCEPT rules
])
def test_ipvs_takes_localhost_node_ports_from_v1_10_to_v1_21(kube_proxy, receiver):
    answer = dp.Datapath(facts("ipvs", "1.1.1", kube_proxy=kube_proxy)).deliver(
        dp.FROM_NODE, dp.LOCALHOST, HOST_PROCESS_ON_NODE_PORT, 30584)
    assert answer.receiver == receiver, answer.outcomes
    if receiver == dp.DROPPED:
        assert "IPVS virtual server" in dp.explain(answer, {}) and "v1.22" in dp.explain(answer, {})


def test_ipvs_v1_10_leaves_localhost_alone_when_node_port_addresses_skip_it():
    stated = replace(facts("ipvs", "1.1.1", kube_proxy="1.10.0"), node_port_addresses=dp.Fact(("10.0.0.0/8",), "t"))
    answer = dp.Datapath(stated).deliver(dp.FROM_NODE, dp.LOCALHOST, HOST_PROCESS_ON_NODE_PORT, 30584)
    assert answer.receiver == dp.HOST_PROCESS


@pytest.mark.parametrize("addresses, expected", [
    (("all",), {"node_port_addresses": "all"}),
    (("primary", "all"), {"node_port_addresses": "all"}),
    (("ALL",), {"node_port_addresses": "all"}),
    (("primary",), {"node_port_addresses": "primary", "localhost_covered": False}),
    (("primary", "localhost"), {"node_port_addresses": "primary", "localhost_covered": True}),
    (("localhost",), {"node_port_addresses": "loopback", "localhost_covered": True}),
    (("localhost", "10.0.0.0/8"), {"node_port_addresses": "cidrs", "localhost_covered": True}),
    (("primary", "10.0.0.0/8"), {"node_port_addresses": "cidrs", "localhost_covered": False}),
    (("0.0.0.0/0",), {"node_port_addresses": "all"}),
])
def test_node_port_address_keywords_are_read_as_keywords(addresses, expected):
    assert dp.node_port_coverage(addresses) == expected


def with_addresses(mode: str, *addresses: str) -> dp.DatapathFacts:
    return replace(facts(mode, "1.1.1"), node_port_addresses=dp.Fact(addresses, "t"))


def test_all_in_nftables_mode_serves_node_ports_on_secondary_addresses():
    # kubernetes#138427: `all` is every address; read as a CIDR it covered nothing and gave "depends"
    answer = dp.Datapath(with_addresses("nftables", "all")).deliver(
        dp.FROM_POD, dp.SECONDARY_IP, dp.PortUse(host_process=True, node_port=True, endpoints=True), 30080)
    assert answer.receiver == dp.SERVICE, answer.outcomes
    assert answer.certain


def test_keywords_alone_leave_secondary_addresses_to_the_node():
    for words in (("primary", "localhost"), ("localhost",)):
        answer = dp.Datapath(with_addresses("nftables", *words)).deliver(
            dp.FROM_POD, dp.SECONDARY_IP, dp.PortUse(host_process=True, node_port=True, endpoints=True), 30080)
        assert answer.receiver == dp.HOST_PROCESS, (words, answer.outcomes)


def test_localhost_alone_serves_node_ports_on_loopback_only_in_iptables_mode():
    loopback = dp.Datapath(with_addresses("iptables", "localhost"))
    use = dp.PortUse(host_process=True, node_port=True, endpoints=True)
    assert loopback.deliver(dp.FROM_NODE, dp.LOCALHOST, use, 30080).receiver == dp.SERVICE
    assert loopback.deliver(dp.FROM_POD, dp.NODE_IP, use, 30080).receiver == dp.HOST_PROCESS
