"""kube-proxy and CIDR configuration (issue 4): the sources read, positions inside embedded
configs, what feeds the cluster model (proxy mode, node-port range), and the KP40x rules."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.vocabulary import Severity
from kubelint_ports.loading import LoadResult, load_bytes
from kubelint_ports.model import ClusterFacts, build_cluster
from kubelint_ports.model.cluster_network import parse_cidrs, parse_port_range, read_network

FIXTURES = Path(__file__).resolve().parent / "policies"
NETWORK_RULES = ("KP400", "KP401", "KP402", "KP403", "KP404", "KP405")

KUBEADM_CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-proxy
  namespace: kube-system
data:
  config.conf: |-
      apiVersion: kubeproxy.config.k8s.io/v1alpha1
      kind: KubeProxyConfiguration

      clusterCIDR: ""
      mode: ipvs
  kubeconfig.conf: |-
    apiVersion: v1
    kind: Config
"""

KUBEADM_DAEMONSET = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kube-proxy
  namespace: kube-system
spec:
  selector:
    matchLabels: {k8s-app: kube-proxy}
  template:
    metadata:
      labels: {k8s-app: kube-proxy}
    spec:
      hostNetwork: true
      containers:
        - name: kube-proxy
          image: registry.k8s.io/kube-proxy:v1.30.4
          command:
            - /usr/local/bin/kube-proxy
            - --config=/var/lib/kube-proxy/config.conf
            - --proxy-mode=iptables
            - --cluster-cidr=10.244.0.0/16
          volumeMounts:
            - name: kube-proxy
              mountPath: /var/lib/kube-proxy
      volumes:
        - name: kube-proxy
          configMap:
            name: kube-proxy
"""


def static_pod(name: str, *words: str, image: str = "", key: str = "command") -> str:
    items = "".join(f"        - {word!r}\n" for word in words)
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: kube-system\nspec:\n"
            f"  hostNetwork: true\n  containers:\n    - name: {name}\n      image: {image or 'busybox'}\n"
            f"      {key}:\n{items}")


def write(tmp_path: Path, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return sorted(name for name in files if not name.startswith("running"))


@pytest.fixture
def lint(tmp_path, monkeypatch):
    """Lint files written to tmp_path, from inside it (so paths in findings are bare names)."""
    monkeypatch.chdir(tmp_path)

    def run(files: dict[str, str], **options):
        names = write(tmp_path, files)
        return lint_paths(names, LintOptions(**options))
    return run


@pytest.fixture
def network_of(tmp_path):
    """The network model of one file's text, written to tmp_path (positions inside embedded
    configs are mapped by re-reading the file)."""
    def read(text: str, facts: ClusterFacts = ClusterFacts()):
        path = tmp_path / "m.yaml"
        path.write_text(text, encoding="utf-8")
        result = LoadResult()
        load_bytes(text.encode(), str(path), result)
        assert not result.diagnostics, result.diagnostics
        return read_network(result.documents, None, facts)
    return read


def of_rule(report, rule_id):
    return [finding for finding in report.findings if finding.rule_id == rule_id]


def where(findings):
    return [f"{f.location.path}:{f.location.line}:{f.location.column}" for f in findings]


# --- CIDR parsing ------------------------------------------------------------------------------

def test_host_bits_are_masked_off_like_go_parse_cidr():
    networks, problem = parse_cidrs("10.196.0.0/12")
    assert problem == "" and networks == (ipaddress.ip_network("10.192.0.0/12"),)


def test_dual_stack_pair_is_one_range_per_family_in_either_order():
    networks, problem = parse_cidrs("fd00:10:244::/56, 10.244.0.0/16")
    assert problem == ""
    assert [n.version for n in networks] == [6, 4]
    assert str(networks[1]) == "10.244.0.0/16"


def test_leading_zeros_are_read_as_decimal_like_parse_cidr_sloppy():
    assert parse_cidrs("010.244.000.000/16") == ((ipaddress.ip_network("10.244.0.0/16"),), "")


@pytest.mark.parametrize("text, words", [
    ("10.244.0.0", "prefix length"),
    ("10.244.0.0/33", "/33 is longer"),
    ("fd00::/129", "/129 is longer"),
    ("10.244.0/16", "not an IP address"),
    ("10.244.0.0/16,", "empty"),
    ("10.244.0.0/16;fd00::/56", "comma"),
    ("10.244.0.0/16,10.245.0.0/16", "two IPv4"),
    ("10.0.0.0/8,fd00::/64,10.1.0.0/16", "3 ranges"),
    ("10.0.0.0/sixteen", "not a number"),
])
def test_garbage_is_explained(text, words):
    networks, problem = parse_cidrs(text)
    assert networks == () or problem
    assert words in problem


@pytest.mark.parametrize("text, expected", [
    ("30000-32767", (30000, 32767)), ("20000+2767", (20000, 22767)), ("8080", (8080, 8080)),
    ("32767-30000", None), ("0-100", None), ("30000-70000", None), ("a-b", None)])
def test_port_range_forms(text, expected):
    assert parse_port_range(text) == expected


# --- positions inside embedded configs ----------------------------------------------------------

def test_position_inside_a_block_scalar_is_the_line_and_column_in_the_file(lint):
    report = lint({"kube-proxy.yaml": KUBEADM_CONFIGMAP})
    [finding] = of_rule(report, "KP401")
    # `      clusterCIDR: ""`: file line 11 (after an empty embedded line), block indentation 6
    assert (finding.location.line, finding.location.column) == (11, 7)
    assert (finding.location.end_line, finding.location.end_column) == (11, 22)  # after `""`
    assert finding.field_path == 'data."config.conf".clusterCIDR'


def test_explicit_indentation_indicator_and_keep_chomping(lint):
    text = KUBEADM_CONFIGMAP.replace("config.conf: |-\n      apiVersion", "config.conf: |+2\n      apiVersion")
    text = text.replace("    config.conf", "    config.conf")
    report = lint({"kube-proxy.yaml": text})
    [finding] = of_rule(report, "KP401")
    assert (finding.location.line, finding.location.column) == (11, 7)


def test_invalid_cidr_inside_embedded_yaml_points_at_its_value_line(lint):
    text = KUBEADM_CONFIGMAP.replace('clusterCIDR: ""', "clusterCIDR: 10.244.0.0/33")
    report = lint({"kube-proxy.yaml": text})
    [finding] = of_rule(report, "KP400")
    assert where([finding]) == ["kube-proxy.yaml:11:7"]
    assert "/33" in finding.message and "kube-proxy refuses" in finding.message


def test_flannel_json_position_is_inside_the_json(lint):
    flannel = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-flannel-cfg, namespace: kube-flannel}
data:
  net-conf.json: |
    {
      "Network": "10.96.0.0/16",
      "Backend": {"Type": "vxlan"}
    }
"""
    apiserver = static_pod("kube-apiserver", "kube-apiserver", "--service-cluster-ip-range=10.96.0.0/12")
    report = lint({"flannel.yaml": flannel, "apiserver.yaml": apiserver})
    [finding] = of_rule(report, "KP404")  # at the Service range, the flannel Network as related
    assert where([finding]) == ["apiserver.yaml:13:11"]
    assert [f"{r.path}:{r.line}:{r.column}" for r in finding.related] == ["flannel.yaml:7:7"]


def test_one_line_quoted_json_shifts_columns_only(lint):
    flannel = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kube-flannel-cfg, namespace: kube-flannel}\n"
               "data:\n  net-conf.json: '{\"Network\": \"10.244.0/16\"}'\n")
    [finding] = of_rule(lint({"flannel.yaml": flannel}), "KP400")
    assert where([finding]) == ["flannel.yaml:5:20"]  # the "Network" key after `'{`


@pytest.mark.parametrize("style", ["folded", "escaped"])
def test_styles_that_move_text_fall_back_to_the_key(lint, style):
    if style == "folded":
        value = '>\n    {"Network": "10.244.0/16"}\n'
    else:
        value = '"{\\"Network\\": \\"10.244.0/16\\"}"\n'
    flannel = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kube-flannel-cfg, namespace: kube-flannel}\n"
               f"data:\n  net-conf.json: {value}")
    [finding] = of_rule(lint({"flannel.yaml": flannel}), "KP400")
    assert where([finding]) == ["flannel.yaml:5:3"]  # the `net-conf.json:` key


def test_standard_input_cannot_be_reread_so_the_key_is_the_position():
    from kubelint_ports.policies import builtin_policies
    import io

    report = lint_paths(["-"], stdin=io.BytesIO(KUBEADM_CONFIGMAP.encode()), policies=builtin_policies())
    [finding] = of_rule(report, "KP401")
    assert where([finding]) == ["<stdin>:7:3"]  # `config.conf:`


def test_a_file_that_changed_since_loading_falls_back_to_the_key(tmp_path):
    path = tmp_path / "kube-proxy.yaml"
    path.write_text(KUBEADM_CONFIGMAP)
    result = LoadResult()
    load_bytes(KUBEADM_CONFIGMAP.encode(), str(path), result)
    path.write_text("something else\n")
    network, _ = read_network(result.documents)
    [proxy] = network.proxies
    assert proxy.owner.document.location(proxy.cluster_cidr_path).line == 7


def test_unreadable_embedded_yaml_is_an_input_error_inside_the_block(lint):
    text = KUBEADM_CONFIGMAP.replace("      mode: ipvs", "      mode: [ipvs")
    report = lint({"kube-proxy.yaml": text})
    assert len(report.diagnostics) == 1
    diagnostic = report.diagnostics[0]
    assert diagnostic.location.path == "kube-proxy.yaml" and diagnostic.location.line >= 12
    assert 'data."config.conf"' in diagnostic.message


# --- sources -----------------------------------------------------------------------------------

def test_standalone_kube_proxy_configuration(network_of):
    network, _ = network_of("""\
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clusterCIDR: 10.244.0.0/16
detectLocalMode: ClusterCIDR
nftables: {masqueradeAll: true}
""")
    [proxy] = network.proxies
    assert (proxy.mode, proxy.cluster_cidrs, proxy.masquerade_all) == (
        "nftables", (ipaddress.ip_network("10.244.0.0/16"),), True)
    assert proxy.owner.ref.kind == "KubeProxyConfiguration" and proxy.owner.ref.name == "m.yaml"


def test_config_flag_overrides_the_other_flags_and_finds_the_configmap(network_of):
    network, _ = network_of(KUBEADM_CONFIGMAP + "---\n" + KUBEADM_DAEMONSET)
    [proxy] = network.proxies  # the DaemonSet and its ConfigMap are one configuration
    assert proxy.mode == "ipvs" and not proxy.cluster_cidr_text  # the flags said iptables and a CIDR
    assert proxy.launcher.ref.name == "kube-proxy" and proxy.launcher.ref.kind == "DaemonSet"
    assert sorted(flag.name for flag in proxy.ignored_flags) == ["cluster-cidr", "proxy-mode"]
    assert network.proxy_mode == "ipvs"


def test_config_through_configmap_items_and_sub_path(network_of):
    daemonset = KUBEADM_DAEMONSET.replace("--config=/var/lib/kube-proxy/config.conf",
                                          "--config=/etc/kube-proxy/proxy.yaml")
    daemonset = daemonset.replace("mountPath: /var/lib/kube-proxy", "mountPath: /etc/kube-proxy")
    daemonset = daemonset.replace("            name: kube-proxy\n",
                                  "            name: kube-proxy\n            items:\n"
                                  "              - {key: config.conf, path: proxy.yaml}\n")
    network, _ = network_of(KUBEADM_CONFIGMAP + "---\n" + daemonset)
    assert [p.launcher is not None for p in network.proxies] == [True]
    sub_path = KUBEADM_DAEMONSET.replace(
        "              mountPath: /var/lib/kube-proxy\n",
        "              mountPath: /var/lib/kube-proxy/config.conf\n              subPath: config.conf\n")
    network, _ = network_of(KUBEADM_CONFIGMAP + "---\n" + sub_path)
    assert [p.launcher is not None for p in network.proxies] == [True]


def test_config_file_not_in_the_inputs_means_unknown_settings(network_of):
    daemonset = KUBEADM_DAEMONSET.replace("configMap:\n            name: kube-proxy",
                                          "hostPath:\n            path: /var/lib/kube-proxy")
    network, _ = network_of(KUBEADM_CONFIGMAP.replace("name: kube-proxy", "name: other") + "---\n" + daemonset)
    [proxy] = network.proxies  # only the ConfigMap itself; the DaemonSet's flags do not count
    assert proxy.launcher is None and proxy.owner.ref.name == "other"


@pytest.mark.parametrize("words, key, image", [
    (("kube-proxy", "--proxy-mode=ipvs", "--cluster-cidr=10.244.0.0/16"), "command", ""),
    (("kube-proxy", "--proxy-mode", "ipvs", "--cluster-cidr", "10.244.0.0/16"), "command", ""),
    (("/go-runner", "--log-file=/var/log/kube-proxy.log", "--", "/usr/local/bin/kube-proxy",
      "--proxy-mode=ipvs", "--cluster-cidr=10.244.0.0/16"), "command", ""),
    (("/bin/sh", "-c", "kube-proxy --proxy-mode=ipvs --cluster-cidr=10.244.0.0/16 1>>/var/log/kp.log 2>&1"),
     "command", ""),
    (("/hyperkube", "proxy", "--proxy-mode=ipvs", "--cluster-cidr=10.244.0.0/16"), "command", ""),
    (("--proxy-mode=ipvs", "--cluster-cidr=10.244.0.0/16"), "args", "registry.k8s.io/kube-proxy:v1.30.4"),
])
def test_kube_proxy_flag_forms(words, key, image, network_of):
    network, _ = network_of(static_pod("kube-proxy", *words, image=image, key=key))
    [proxy] = network.proxies
    assert proxy.from_flags and proxy.mode == "ipvs"
    assert proxy.cluster_cidrs == (ipaddress.ip_network("10.244.0.0/16"),)


KUBE_PROXY_CONTAINER = """
      containers:
      - name: kube-proxy
        image: registry.k8s.io/kube-proxy:v1.30.4
        command: [kube-proxy, --proxy-mode=ipvs]
"""


@pytest.mark.parametrize("head, template, read", [
    ("apiVersion: v1\nkind: ReplicationController\nmetadata: {name: kp}\nspec:\n  template:\n", "    spec:", True),
    ("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: kp}\nspec:\n  template:\n", "    spec:", True),
    ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: kp}\nspec:\n  template:\n", "    spec:", False),
    ("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: kp}\nspec:\n  schedule: '@daily'\n"
     "  jobTemplate:\n    spec:\n      template:\n", "        spec:", False),
], ids=["ReplicationController", "DaemonSet", "Job", "CronJob"])
def test_components_are_read_from_the_workload_kinds_that_keep_running(head, template, read, network_of):
    """One kind table (workload_kinds): a kube-proxy in any long-running workload counts,
    one in a Job or CronJob (`kube-proxy --cleanup`) says nothing of the running cluster."""
    indent = " " * (len(template) - len(template.lstrip()) - 4)
    containers = "".join(indent + line + "\n" for line in KUBE_PROXY_CONTAINER.strip("\n").splitlines())
    network, _ = network_of(head + template + "\n" + containers)
    assert [proxy.mode for proxy in network.proxies] == (["ipvs"] if read else [])
    assert bool(network.kube_proxy_versions) is read


def test_go_runner_log_file_is_not_taken_for_kube_proxy(network_of):
    network, _ = network_of(static_pod("logger", "/go-runner", "--log-file=/var/log/kube-proxy", "--", "sleep"))
    assert network.proxies == []


def test_masquerade_all_and_detect_local_flags(network_of):
    network, _ = network_of(static_pod("kube-proxy", "kube-proxy", "--masquerade-all",
                                       "--detect-local-mode=NodeCIDR"))
    [proxy] = network.proxies
    assert proxy.masquerade_all and proxy.detect_local_mode == "NodeCIDR"
    network, _ = network_of(static_pod("kube-proxy", "kube-proxy", "--masquerade-all=false"))
    assert not network.proxies[0].masquerade_all


@pytest.mark.parametrize("version, extra_args", [
    ("v1beta3", "  extraArgs:\n    service-node-port-range: 20000-22767\n"
                "    service-cluster-ip-range: 10.100.0.0/16\n"),
    ("v1beta4", "  extraArgs:\n    - name: service-node-port-range\n      value: 20000-22767\n"
                "    - name: service-cluster-ip-range\n      value: 10.100.0.0/16\n"),
])
def test_kubeadm_cluster_configuration_both_extra_args_forms(version, extra_args, network_of):
    network, _ = network_of(f"""\
apiVersion: kubeadm.k8s.io/{version}
kind: ClusterConfiguration
networking:
  serviceSubnet: 10.96.0.0/12
  podSubnet: 10.244.0.0/16
apiServer:
{extra_args}""")
    # extraArgs win over networking.serviceSubnet, as kubeadm passes them last
    assert [s.text for s in network.service_ranges] == ["10.100.0.0/16"]
    assert [s.text for s in network.pod_ranges] == ["10.244.0.0/16"]
    assert network.node_port_range == (20000, 22767)


def test_kubeadm_default_service_subnet_is_used_but_never_reported(network_of):
    network, _ = network_of("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n")
    [service] = network.service_ranges
    assert service.text == "10.96.0.0/12" and service.defaulted and not service.reportable


def test_kubeadm_fills_cluster_cidr_from_pod_subnet_in_the_same_config_file(network_of, lint):
    kubeadm = ("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n"
               "networking: {podSubnet: 10.244.0.0/16}\n")
    proxy = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n"
    network, _ = network_of(kubeadm + "---\n" + proxy)
    [config] = network.proxies
    assert config.derived_from is not None and config.cluster_cidrs == (ipaddress.ip_network("10.244.0.0/16"),)
    assert not of_rule(lint({"kubeadm.yaml": kubeadm + "---\n" + proxy}), "KP401")
    # in another file kubeadm does not see it: the KubeProxyConfiguration is judged on its own
    assert where(of_rule(lint({"kubeadm.yaml": kubeadm, "proxy.yaml": proxy}), "KP401")) == ["proxy.yaml:1:1"]


def test_kubeadm_config_configmap_from_a_running_cluster(network_of):
    network, _ = network_of("""\
apiVersion: v1
kind: ConfigMap
metadata: {name: kubeadm-config, namespace: kube-system}
data:
  ClusterConfiguration: |
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: ClusterConfiguration
    networking:
      serviceSubnet: 10.96.0.0/12
      podSubnet: 10.244.0.0/16
""")
    [pod] = network.pod_ranges
    assert pod.text == "10.244.0.0/16"
    assert pod.owner.document.location(pod.field_path).line == 10


def test_cni_and_control_plane_pod_ranges_in_priority_order(network_of):
    calico_node = static_pod("calico-node", "start_runit", image="calico/node:v3.28.1").replace(
        "      command:", "      env:\n        - {name: CALICO_IPV4POOL_CIDR, value: 192.168.0.0/16}\n"
                           "        - {name: CALICO_IPV6POOL_CIDR, value: 'fd00:192:168::/48'}\n      command:")
    text = "---\n".join([
        calico_node,
        "apiVersion: crd.projectcalico.org/v1\nkind: IPPool\nmetadata: {name: p}\nspec: {cidr: 192.168.0.0/17}\n",
        static_pod("kube-controller-manager", "kube-controller-manager", "--cluster-cidr=192.168.0.0/16",
                   "--service-cluster-ip-range=10.96.0.0/12"),
    ])
    network, _ = network_of(text, ClusterFacts(pod_cidr="192.168.0.0/15"))
    assert [s.label for s in network.pod_ranges] == [
        "the --pod-cidr option", "kube-controller-manager --cluster-cidr", "CALICO_IPV4POOL_CIDR",
        "CALICO_IPV6POOL_CIDR", "Calico IPPool p spec.cidr"]
    assert network.cluster_pod_range(4).label == "the --pod-cidr option"
    assert network.cluster_pod_range(6).label == "CALICO_IPV6POOL_CIDR"


def test_node_pod_cidrs_come_from_the_inventory_with_positions(tmp_path, lint):
    (tmp_path / "nodes.yaml").write_text("""\
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Node
    metadata: {name: worker-1}
    spec:
      podCIDRs: [10.244.1.0/24, "fd00:10:244:1::/64"]
""")
    proxy = KUBEADM_CONFIGMAP.replace('clusterCIDR: ""', "clusterCIDR: 10.244.0.0/16")
    report = lint({"kube-proxy.yaml": proxy}, node_files=("nodes.yaml",))
    [finding] = of_rule(report, "KP403")  # the node's IPv6 range: clusterCIDR has no IPv6 half
    assert "no IPv6 range" in finding.message and "fd00:10:244:1::/64" in finding.message
    assert [f"{r.path}:{r.line}:{r.column}" for r in finding.related] == ["nodes.yaml:8:33"]


# --- what feeds the cluster model ---------------------------------------------------------------

def build(text: str, facts: ClusterFacts = ClusterFacts(), live: str = ""):
    result, running = LoadResult(), LoadResult()
    load_bytes(text.encode(), "m.yaml", result)
    if live:
        load_bytes(live.encode(), "running.yaml", running)
    return build_cluster(result.documents, facts, live_documents=running.documents)


def test_effective_proxy_mode_is_fed_into_the_cluster():
    cluster, _ = build(KUBEADM_CONFIGMAP)
    assert cluster.proxy_mode == "ipvs"
    cluster, _ = build(KUBEADM_CONFIGMAP, ClusterFacts(proxy_mode="nftables"))
    assert cluster.proxy_mode == "nftables"  # the option wins
    cluster, _ = build(static_pod("kube-proxy", "kube-proxy", "--cluster-cidr=10.244.0.0/16"))
    assert cluster.proxy_mode == "iptables"  # kube-proxy's default mode
    cluster, _ = build(KUBEADM_CONFIGMAP + "---\n" + static_pod("kube-proxy", "kube-proxy"))
    assert cluster.proxy_mode is None  # ipvs here, iptables there: unknown
    cluster, _ = build(static_pod("web", "nginx"))
    assert cluster.proxy_mode is None and cluster.network.proxies == []


def test_running_kube_proxy_counts_for_the_mode():
    cluster, _ = build(static_pod("web", "nginx"), live=KUBEADM_CONFIGMAP)
    assert cluster.proxy_mode == "ipvs"


def test_apiserver_node_port_range_is_fed_into_the_cluster_unless_the_option_says():
    apiserver = static_pod("kube-apiserver", "kube-apiserver", "--service-node-port-range=20000-22767")
    cluster, diagnostics = build(apiserver)
    assert cluster.node_port_range == (20000, 22767) and not diagnostics
    cluster, _ = build(apiserver, ClusterFacts(node_port_range=(30000, 32767)))
    assert cluster.node_port_range == (30000, 32767)
    other = static_pod("kube-apiserver-2", "kube-apiserver", "--service-node-port-range", "25000-27767")
    cluster, _ = build(apiserver + "---\n" + other)
    assert cluster.node_port_range == (30000, 32767)  # two apiservers disagree: keep the default


def test_node_port_range_from_the_apiserver_changes_range_rules(lint):
    apiserver = static_pod("kube-apiserver", "kube-apiserver", "--service-node-port-range=20000-22767")
    service = ("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n"
               "spec:\n  type: NodePort\n  ports:\n    - {port: 80, nodePort: 30080}\n")
    assert of_rule(lint({"apiserver.yaml": apiserver, "service.yaml": service}), "KP204")
    assert not of_rule(lint({"service.yaml": service}), "KP204")


def test_invalid_node_port_range_is_an_input_error():
    _, diagnostics = build(static_pod("kube-apiserver", "kube-apiserver", "--service-node-port-range=30000:32767"))
    assert [(d.location.line, "not a port range" in d.message) for d in diagnostics] == [(13, True)]


def test_invalid_cidr_option_is_an_input_error():
    _, diagnostics = build(static_pod("web", "nginx"), ClusterFacts(service_cidr="10.96.0.0/33"))
    assert [(d.location.path, d.message.startswith("--service-cidr ")) for d in diagnostics] == [("command line", True)]


# --- rules ------------------------------------------------------------------------------------

def test_missing_cluster_cidr_severity_follows_the_mode(lint):
    ipvs = lint({"kube-proxy.yaml": KUBEADM_CONFIGMAP})
    assert [f.severity for f in of_rule(ipvs, "KP401")] == [Severity.ERROR]
    iptables = lint({"kube-proxy.yaml": KUBEADM_CONFIGMAP.replace("mode: ipvs", "mode: iptables")})
    assert [f.severity for f in of_rule(iptables, "KP401")] == [Severity.WARNING]
    odd = lint({"kube-proxy.yaml": KUBEADM_CONFIGMAP.replace("mode: ipvs", "mode: userspace")})
    assert [f.severity for f in of_rule(odd, "KP401")] == [Severity.WARNING]


def test_missing_cluster_cidr_says_which_value_to_set(lint):
    report = lint({"kube-proxy.yaml": KUBEADM_CONFIGMAP}, facts=ClusterFacts(pod_cidr="10.244.0.0/16"))
    [finding] = of_rule(report, "KP401")
    assert "clusterCIDR: 10.244.0.0/16 (the pod CIDR, from the --pod-cidr option)" in finding.message
    flags = static_pod("kube-proxy", "kube-proxy", "--proxy-mode=ipvs")
    kubeadm = ("apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\n"
               "networking: {podSubnet: '10.244.0.0/16,fd00:10:244::/56'}\n")
    [finding] = of_rule(lint({"pod.yaml": flags, "kubeadm.yaml": kubeadm}), "KP401")
    assert "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56" in finding.message
    assert where([finding]) == ["pod.yaml:11:7"]  # the flags list


def test_ignored_cluster_cidr_flag_is_named_and_related(lint):
    report = lint({"kube-proxy.yaml": KUBEADM_CONFIGMAP, "daemonset.yaml": KUBEADM_DAEMONSET})
    [finding] = of_rule(report, "KP401")
    assert "kube-proxy ignores it because --config is set" in finding.message
    assert [f"{r.path}:{r.line}" for r in finding.related] == ["daemonset.yaml:21"]


def test_running_configuration_is_never_reported_and_linted_replaces_running(lint):
    broken = KUBEADM_CONFIGMAP
    fixed = KUBEADM_CONFIGMAP.replace('clusterCIDR: ""', "clusterCIDR: 10.244.0.0/16")
    report = lint({"running.yaml": broken, "web.yaml": static_pod("web", "nginx")}, cluster_files=("running.yaml",))
    assert not [f for f in report.findings if f.rule_id in NETWORK_RULES]
    report = lint({"running.yaml": broken, "kube-proxy.yaml": fixed}, cluster_files=("running.yaml",))
    assert not [f for f in report.findings if f.rule_id in NETWORK_RULES]  # no KP405 against the replaced one


def test_cluster_cidr_equal_to_service_cidr_is_the_incident_detour(lint):
    files = {
        "apiserver.yaml": static_pod("kube-apiserver", "kube-apiserver", "--service-cluster-ip-range=10.20.0.0/16"),
        "proxy.yaml": static_pod("kube-proxy", "kube-proxy", "--proxy-mode=ipvs", "--cluster-cidr=10.20.0.0/16"),
    }
    [finding] = of_rule(lint(files), "KP402")
    assert where([finding]) == ["proxy.yaml:14:11"]
    assert "no Service answers them" in finding.message and "10.20.0.0/16" in finding.message


def test_overlap_is_judged_per_family(lint):
    files = {
        "apiserver.yaml": static_pod("kube-apiserver", "kube-apiserver",
                                     "--service-cluster-ip-range=10.96.0.0/12,fd00:10:96::/108"),
        "proxy.yaml": static_pod("kube-proxy", "kube-proxy", "--cluster-cidr=fd00:10:244::/56,10.96.0.0/8"),
    }
    [finding] = of_rule(lint(files), "KP402")  # 10.96.0.0/8 contains the Service range; IPv6 is apart
    assert "10.0.0.0/8 in" in finding.message and "Service CIDR 10.96.0.0/12 (" in finding.message
    assert "fd00" not in finding.message


def test_inconsistent_configurations_report_the_minority(lint):
    agree = static_pod("kube-proxy-a", "kube-proxy", "--proxy-mode=ipvs", "--cluster-cidr=10.244.0.0/16")
    also = agree.replace("kube-proxy-a", "kube-proxy-b")
    differs = agree.replace("kube-proxy-a", "kube-proxy-c").replace("--proxy-mode=ipvs", "--proxy-mode=iptables")
    [finding] = of_rule(lint({"a.yaml": agree, "b.yaml": also, "c.yaml": differs}), "KP405")
    assert where([finding]) == ["c.yaml:13:11"]  # at --proxy-mode, which is what differs
    assert sorted(r.path for r in finding.related) == ["a.yaml", "b.yaml"]
    tie = of_rule(lint({"a.yaml": agree, "c.yaml": differs}), "KP405")
    assert sorted(f.location.path for f in tie) == ["a.yaml", "c.yaml"]


def test_service_and_pod_overlap_is_reported_at_the_service_range_when_linted(lint):
    kubeadm = ("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n"
               "networking:\n  serviceSubnet: 10.96.0.0/12\n  podSubnet: 10.100.0.0/16\n")
    [finding] = of_rule(lint({"kubeadm.yaml": kubeadm}), "KP404")
    assert where([finding]) == ["kubeadm.yaml:4:3"]
    defaulted = kubeadm.replace("  serviceSubnet: 10.96.0.0/12\n", "")
    [finding] = of_rule(lint({"kubeadm.yaml": defaulted}), "KP404")
    assert where([finding]) == ["kubeadm.yaml:4:3"]  # the default is not written: at podSubnet
    assert "kubeadm's default serviceSubnet" in finding.message


# --- the fixtures' positions ---------------------------------------------------------------------

# What a KP40x finding may point at: the setting's key (in a file or inside an embedded config),
# a flag (or its value item), a kube-proxy flags list, or the first line of a config document.
SETTING_AT = re.compile(
    r"""(?:"?(clusterCIDR|serviceSubnet|podSubnet|cidr|cidrs|value|Network|IPv6Network|mode|"""
    r"""service-cluster-ip-range|command|args)"?\s*:"""
    r"""|["']?--(cluster-cidr|service-cluster-ip-range|proxy-mode)\b"""
    r"""|["']?[0-9a-f.:]+/\d+|apiVersion:)""")


def fixture_findings():
    from kubelint_ports.policies import builtin_policies
    import json
    import os

    for rule_id in NETWORK_RULES:
        for folder in sorted({path.parent for path in (FIXTURES / rule_id).rglob("fail-*.yaml")}):
            settings = {}
            if (folder / "options.json").is_file():
                settings = {k: tuple(v) for k, v in json.loads((folder / "options.json").read_text()).items()}
            previous = os.getcwd()
            os.chdir(folder)
            try:
                report = lint_paths(sorted(p.name for p in folder.glob("fail-*.yaml")), LintOptions(**settings),
                                    policies=builtin_policies())
            finally:
                os.chdir(previous)
            for finding in of_rule(report, rule_id):
                yield folder, finding


def test_fixture_findings_point_at_the_setting_to_edit():
    """The KP40x counterpart of test_policies' port-key check: every position in the fail fixtures
    is the setting the fix changes."""
    seen = set()
    for folder, finding in fixture_findings():
        seen.add(finding.rule_id)
        line = (folder / finding.location.path).read_text().splitlines()[finding.location.line - 1]
        at = line[finding.location.column - 1:]
        assert SETTING_AT.match(at), f"{folder.name}/{finding.location}: {finding.rule_id} points at {at!r}"
    assert seen == set(NETWORK_RULES)


def test_examples_show_each_network_rule_once_at_least():
    from kubelint_ports.policies import builtin_policies

    examples = Path(__file__).resolve().parents[1] / "examples"
    report = lint_paths([str(examples / "cluster-config")], policies=builtin_policies())
    assert not report.diagnostics
    assert {f.rule_id for f in report.findings} >= set(NETWORK_RULES)
    [missing] = of_rule(report, "KP401")
    # kube-proxy v1.31 (its image) masquerades what the node sends from a VIP: only off-cluster clients break
    assert missing.location.path.endswith("kube-proxy.yaml") and missing.severity is Severity.WARNING
    assert "v1.31.2" in missing.message and "node processes still work" in missing.message
    assert "clusterCIDR: 10.244.0.0/16" in missing.message  # learned from flannel's net-conf.json
