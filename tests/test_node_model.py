"""The per-node model: host port matching, captures, reserved ports, running objects (the port map: test_portmap)."""

from __future__ import annotations

import textwrap

import pytest

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.model import ClusterFacts


def node(name: str, labels: str = "", taints: str = "", unschedulable: bool = False) -> str:
    return textwrap.dedent(f"""\
        - apiVersion: v1
          kind: Node
          metadata:
            name: {name}
            labels: {{kubernetes.io/hostname: {name}{', ' + labels if labels else ''}}}
          spec:
            unschedulable: {'true' if unschedulable else 'false'}
            taints: [{taints}]
        """)


def inventory(*nodes: str) -> str:
    return "apiVersion: v1\nkind: List\nitems:\n" + "".join(textwrap.indent(n, "  ") for n in nodes)


def workload(name: str, port: int, *, kind: str = "Deployment", replicas: int = 1, spec: str = "",
             host_network: bool = False, protocol: str = "TCP", host_ip: str = "", namespace: str = "ns",
             labels: str = "") -> str:
    port_entry = f"{{containerPort: {port}, protocol: {protocol}" + (
        "" if host_network else f", hostPort: {port}") + (f", hostIP: {host_ip}" if host_ip else "") + "}"
    replicas_line = f"  replicas: {replicas}\n" if kind != "DaemonSet" else ""
    pod_spec = (f"    hostNetwork: {'true' if host_network else 'false'}\n"
                f"{textwrap.indent(spec, '    ')}"
                f"    containers: [{{name: c, ports: [{port_entry}]}}]\n")
    return (f"apiVersion: apps/v1\nkind: {kind}\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n"
            f"{replicas_line}  template:\n    metadata: {{labels: {{{labels}}}}}\n    spec:\n"
            + textwrap.indent(pod_spec, "  "))


@pytest.fixture
def lint(tmp_path):
    def run(*manifests: str, nodes: str | None = None, cluster: str | None = None, **facts):
        path = tmp_path / "m.yaml"
        path.write_text("---\n".join(manifests))
        options = LintOptions(facts=ClusterFacts(**facts))
        if nodes is not None:
            (tmp_path / "nodes.yaml").write_text(nodes)
            options = LintOptions(facts=options.facts, node_files=(str(tmp_path / "nodes.yaml"),))
        if cluster is not None:
            (tmp_path / "live.yaml").write_text(cluster)
            options = LintOptions(facts=options.facts, node_files=options.node_files,
                                  cluster_files=(str(tmp_path / "live.yaml"),))
        report = lint_paths([str(path)], options)
        assert report.diagnostics == [], report.diagnostics
        return report
    return run


def rule(report, name: str):
    return [f for f in report.findings if f.rule_name == name]


THREE_NODES = inventory(node("n1", "pool: a"), node("n2", "pool: a"), node("n3", "pool: b"))


# --- host-port-conflict with an inventory ---------------------------------------------------------

def test_replicas_outnumber_eligible_nodes(lint):
    report = lint(workload("web", 8080, replicas=3, spec="nodeSelector: {pool: a}\n"), nodes=THREE_NODES)
    [finding] = rule(report, "host-port-conflict")
    assert "wants 3 pods" in finding.message and "n1, n2" in finding.message
    assert "1 pod stays Pending" in finding.message
    assert "didn't have free ports for the requested pod ports" in finding.message
    assert (finding.location.line, finding.location.column) == (11, 75)  # the hostPort key


def test_replicas_that_fit_are_fine(lint):
    report = lint(workload("web", 8080, replicas=3), nodes=THREE_NODES)
    assert rule(report, "host-port-conflict") == []


def test_daemonset_and_deployment_share_nodes(lint):
    report = lint(workload("agent", 9000, kind="DaemonSet"),
                  workload("web", 9000, replicas=1, spec="nodeSelector: {pool: b}\n"), nodes=THREE_NODES)
    findings = rule(report, "host-port-conflict")
    assert sorted(f.subject.name for f in findings) == ["agent", "web"]
    assert all("1 pod stays Pending" in f.message for f in findings)
    assert all(f.related for f in findings)


def test_daemonset_limited_to_other_nodes_is_fine(lint):
    report = lint(workload("agent", 9000, kind="DaemonSet", spec="nodeSelector: {pool: a}\n"),
                  workload("web", 9000, spec="nodeSelector: {pool: b}\n"), nodes=THREE_NODES)
    assert rule(report, "host-port-conflict") == []


def test_matching_finds_the_assignment_greedy_placement_would_miss(lint):
    # a may use n1 or n2, b only n1: a feasible assignment exists (a->n2, b->n1).
    report = lint(workload("a", 7000, spec="nodeSelector: {pool: a}\n"),
                  workload("b", 7000, spec="nodeName: n1\n"), nodes=THREE_NODES)
    assert rule(report, "host-port-conflict") == []
    report = lint(workload("a", 7000, replicas=2, spec="nodeSelector: {pool: a}\n"),
                  workload("b", 7000, spec="nodeName: n1\n"), nodes=THREE_NODES)
    assert len(rule(report, "host-port-conflict")) == 2


def test_protocol_and_host_ip_awareness(lint):
    pinned = "nodeName: n1\n"
    assert rule(lint(workload("a", 53, spec=pinned, protocol="UDP"), workload("b", 53, spec=pinned),
                     nodes=THREE_NODES), "host-port-conflict") == []
    assert rule(lint(workload("a", 53, spec=pinned, host_ip="10.0.0.1"),
                     workload("b", 53, spec=pinned, host_ip="10.0.0.2"), nodes=THREE_NODES), "host-port-conflict") == []
    assert len(rule(lint(workload("a", 53, spec=pinned, host_ip="10.0.0.1"), workload("b", 53, spec=pinned),
                         nodes=THREE_NODES), "host-port-conflict")) == 2


def test_host_network_ports_are_host_ports(lint):
    report = lint(workload("host", 8443, host_network=True, spec="nodeName: n3\n"),
                  workload("web", 8443, spec="nodeName: n3\n"), nodes=THREE_NODES)
    assert len(rule(report, "host-port-conflict")) == 2


def test_taints_and_cordons_shape_eligibility(lint):
    nodes = inventory(node("n1", taints="{key: gpu, value: 'true', effect: NoSchedule}"),
                      node("n2", unschedulable=True), node("n3"))
    report = lint(workload("web", 8080, replicas=2), nodes=nodes)
    [finding] = rule(report, "host-port-conflict")
    assert "only 1 node can run them (n3)" in finding.message
    tolerant = "tolerations: [{operator: Exists}]\n"
    assert rule(lint(workload("web", 8080, replicas=3, spec=tolerant), nodes=nodes), "host-port-conflict") == []


def test_zero_replicas_and_unschedulable_workloads_claim_nothing(lint):
    assert rule(lint(workload("a", 8080, replicas=0, spec="nodeName: n1\n"), workload("b", 8080, spec="nodeName: n1\n"),
                     nodes=THREE_NODES), "host-port-conflict") == []
    # no eligible node at all: Pending for another reason, not reported as a port conflict
    assert rule(lint(workload("a", 8080, replicas=2, spec="nodeSelector: {pool: z}\n"), nodes=THREE_NODES),
                "host-port-conflict") == []


# --- host-port-conflict without an inventory -------------------------------------------------------

@pytest.mark.parametrize("pin_a, pin_b, conflict", [
    ("nodeName: n1\n", "nodeName: n1\n", True),
    ("nodeName: n1\n", "nodeName: n2\n", False),
    ("nodeSelector: {kubernetes.io/hostname: n1}\n", "nodeName: n1\n", True),
    ("nodeSelector: {pool: a}\n", "nodeSelector: {pool: a}\n", False),  # possible, not provable
    ("", "", False),
])
def test_provable_conflicts_without_inventory(lint, pin_a, pin_b, conflict):
    report = lint(workload("a", 8080, spec=pin_a), workload("b", 8080, spec=pin_b))
    assert bool(rule(report, "host-port-conflict")) is conflict


def test_replicas_pinned_to_one_node_without_inventory(lint):
    [finding] = rule(lint(workload("a", 8080, replicas=3, spec="nodeName: n1\n")), "host-port-conflict")
    assert "2 pods stay Pending" in finding.message


def test_unconstrained_daemonset_conflicts_with_any_other_claimant(lint):
    report = lint(workload("agent", 9000, kind="DaemonSet"), workload("web", 9000, replicas=2))
    findings = rule(report, "host-port-conflict")
    assert len(findings) == 2
    by_subject = {f.subject.name: f.message for f in findings}
    assert "is held by this DaemonSet (no node constraint) on every node" in by_subject["agent"]
    assert "runs on every node these pods may use" in by_subject["web"]
    constrained = workload("agent", 9000, kind="DaemonSet", spec="nodeSelector: {pool: a}\n")
    assert rule(lint(constrained, workload("web", 9000)), "host-port-conflict") == []


# --- running objects (--cluster) ---------------------------------------------------------------------

RUNNING_POD = """\
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata:
      name: legacy-proxy-7d9f
      namespace: ops
      ownerReferences: [{kind: ReplicaSet, name: legacy-proxy-5c8b9}]
    spec:
      nodeName: n2
      containers: [{name: proxy, ports: [{containerPort: 80, hostPort: 8080}]}]
    status: {phase: Running}
  - apiVersion: v1
    kind: Pod
    metadata: {name: done-job, namespace: ops}
    spec:
      nodeName: n2
      containers: [{name: job, ports: [{containerPort: 80, hostPort: 8080}]}]
    status: {phase: Succeeded}
  - apiVersion: v1
    kind: Service
    metadata: {name: old-nodeport, namespace: ops}
    spec:
      type: NodePort
      ports: [{port: 80, nodePort: 31000}]
"""


def test_running_pod_occupies_its_node_and_is_only_related(lint):
    report = lint(workload("web", 8080, spec="nodeName: n2\n"), nodes=THREE_NODES, cluster=RUNNING_POD)
    [finding] = rule(report, "host-port-conflict")
    assert finding.subject.name == "web"
    [related] = finding.related
    assert related.path.endswith("live.yaml") and related.line == 12
    assert "already running on n2" in related.message
    assert "already running on n2" in finding.message


def test_running_pod_owned_by_the_linted_deployment_is_replaced_not_counted(lint):
    report = lint(workload("legacy-proxy", 8080, spec="nodeName: n2\n", namespace="ops"),
                  nodes=THREE_NODES, cluster=RUNNING_POD)
    assert rule(report, "host-port-conflict") == []


def test_running_services_count_for_node_port_collisions(lint):
    service = ("apiVersion: v1\nkind: Service\nmetadata: {name: new, namespace: shop}\n"
               "spec: {type: NodePort, ports: [{port: 80, nodePort: 31000}]}\n")
    report = lint(service, cluster=RUNNING_POD)
    [finding] = rule(report, "node-port-collision")
    assert finding.subject.name == "new" and finding.related[0].path.endswith("live.yaml")


# --- host-port-host-network-capture -----------------------------------------------------------------

def silent_exporter(spec: str = "", declared: str = "") -> str:
    return textwrap.dedent(f"""\
        apiVersion: apps/v1
        kind: DaemonSet
        metadata: {{name: exporter, namespace: monitoring}}
        spec:
          template:
            spec:
              hostNetwork: true
              {spec}
              containers:
                - name: exporter
                  args: ["--web.listen-address=:9100", "--path.rootfs=/host"]
                  livenessProbe: {{httpGet: {{port: 9100, path: /}}}}
                  ports: [{declared}]
        """)


def test_host_port_captures_an_undeclared_host_network_port(lint):
    report = lint(silent_exporter(), workload("proxy", 9100, spec="nodeSelector: {pool: b}\n"), nodes=THREE_NODES)
    [finding] = rule(report, "host-port-host-network-capture")
    assert finding.subject.name == "proxy" and "(n3)" in finding.message
    assert "without declaring it" in finding.message and "--web.listen-address" in finding.message
    assert [(r.line, r.column) for r in finding.related] == [(11, 18)]  # the args item
    assert rule(report, "host-port-conflict") == [], "the scheduler cannot see an undeclared port"


def test_declared_host_network_port_is_left_to_the_scheduler(lint):
    report = lint(silent_exporter(declared="{containerPort: 9100}"), workload("proxy", 9100))
    assert rule(report, "host-port-host-network-capture") == []
    assert len(rule(report, "host-port-conflict")) == 2


def test_undeclared_port_kept_apart_by_placement(lint):
    report = lint(silent_exporter(spec="nodeSelector: {pool: a}"),
                  workload("proxy", 9100, spec="nodeSelector: {pool: b}\n"), nodes=THREE_NODES)
    assert rule(report, "host-port-host-network-capture") == []
    report = lint(silent_exporter(spec="nodeName: n1"), workload("proxy", 9100, spec="nodeName: n2\n"))
    assert rule(report, "host-port-host-network-capture") == []


def test_probe_ports_count_as_listening():
    from kubelint_ports.loading import LoadResult, load_bytes
    from kubelint_ports.model import build_cluster

    result = LoadResult()
    load_bytes(silent_exporter().replace('args: ["--web.listen-address=:9100", "--path.rootfs=/host"]',
                                         "args: [--port, '8080']").encode(), "m.yaml", result)
    cluster, _ = build_cluster(result.documents)
    assert [(p.port, p.source) for p in cluster.workloads[0].silent_ports] == [
        (8080, "--port"), (9100, "its livenessProbe")]


# --- node-reserved-port ----------------------------------------------------------------------------

def test_reserved_ports_and_the_daemon_itself(lint):
    report = lint(workload("debug", 10250), workload("node-exporter", 9100, kind="DaemonSet", host_network=True))
    [finding] = rule(report, "node-reserved-port")
    assert finding.subject.name == "debug" and "kubelet" in finding.message


def test_reserved_ports_are_a_parameter(tmp_path):
    from dataclasses import replace

    from kubelint_ports.policies import builtin_policies, find_policy

    policy = find_policy("node-reserved-port")
    custom = replace(policy, params={**policy.params, "extra_ports": [{"port": 4240, "daemon": "cilium-health"}]})
    path = tmp_path / "m.yaml"
    path.write_text(workload("web", 4240))
    policies = [custom if p is policy else p for p in builtin_policies()]
    [finding] = [f for f in lint_paths([str(path)], policies=policies).findings if f.rule_name == "node-reserved-port"]
    assert "cilium-health" in finding.message


# --- host-port-service-port-capture ----------------------------------------------------------------

MYSQL_A = """\
apiVersion: v1
kind: Service
metadata: {name: mysql-a, namespace: db}
spec:
  selector: {app: mysql-a}
  ports: [{port: 3306}]
"""


@pytest.mark.parametrize("mode, cni, severity", [
    ("ipvs", "0.7.4", "error"),  # portmap's jump above KUBE-SERVICES: incident 000
    ("ipvs", None, "note"),  # depends on the rule order, which no input states (issue 24: a note)
    ("ipvs", "1.1.1", None),  # kube-proxy ACCEPTs KUBE-CLUSTER-IP pairs before portmap's appended jump
    (None, None, "note"),
    ("iptables", "0.7.4", None),  # ClusterIPs are not local addresses there
    ("iptables", None, None),
    ("nftables", None, None),
])
def test_service_capture_by_proxy_mode(lint, mode, cni, severity):
    report = lint(MYSQL_A, workload("mysql-b", 3306, kind="StatefulSet", namespace="db", labels="app: mysql-b"),
                  proxy_mode=mode, cni_plugins_version=cni)
    findings = rule(report, "host-port-service-port-capture")
    assert [str(f.severity) for f in findings] == ([severity] if severity else [])
    if findings:
        assert "ClusterIP:3306" in findings[0].message and "db/Service/mysql-a" in findings[0].message
        assert findings[0].related[0].line == 6
        assert findings[0].traffic["destination"] == "cluster-ip"


def test_service_capture_names_nodes_with_inventory(lint):
    report = lint(MYSQL_A, workload("mysql-b", 3306, namespace="db", spec="nodeSelector: {pool: a}\n"),
                  nodes=THREE_NODES, proxy_mode="ipvs", cni_plugins_version="0.7.4")
    [finding] = rule(report, "host-port-service-port-capture")
    assert "pods on n1, n2 that connect" in finding.message


@pytest.mark.parametrize("target", ["", ", targetPort: 3306", ", targetPort: mysql"])
def test_service_in_front_of_the_pod_itself_is_benign(lint, target):
    service = MYSQL_A.replace("mysql-a", "mysql-b").replace("ports: [{port: 3306}]", f"ports: [{{port: 3306{target}}}]")
    pod = workload("mysql-b", 3306, namespace="db", labels="app: mysql-b").replace(
        "protocol: TCP", "protocol: TCP, name: mysql")
    assert rule(lint(service, pod, proxy_mode="ipvs"), "host-port-service-port-capture") == []


def test_headless_services_are_not_captured(lint):
    headless = MYSQL_A.replace("spec:\n", "spec:\n  clusterIP: None\n")
    assert rule(lint(headless, workload("mysql-b", 3306, namespace="db"), proxy_mode="ipvs"),
                "host-port-service-port-capture") == []


def test_service_capture_needs_a_wildcard_host_ip(lint):
    pod = workload("mysql-b", 3306, namespace="db", host_ip="127.0.0.1")
    assert rule(lint(MYSQL_A, pod, proxy_mode="ipvs"), "host-port-service-port-capture") == []


@pytest.mark.parametrize("deployment_spec, conflict", [
    ("nodeSelector: {pool: a}\n", True),
    ("nodeSelector: {pool: a, zone: z1}\n", True),   # stricter than the DaemonSet: still covered
    ("nodeSelector: {pool: b}\n", False),
    ("", False),                                     # may use nodes outside pool a
    ("nodeSelector: {pool: a}\ntolerations: [{key: gpu, operator: Exists}]\n", False),  # tainted nodes too
])
def test_daemonset_with_a_selector_covers_stricter_workloads_without_inventory(lint, deployment_spec, conflict):
    report = lint(workload("agent", 9000, kind="DaemonSet", spec="nodeSelector: {pool: a}\n"),
                  workload("web", 9000, replicas=2, spec=deployment_spec))
    findings = rule(report, "host-port-conflict")
    assert bool(findings) is conflict
    if conflict:
        assert all("on nodes with pool=a" in f.message for f in findings)


def test_conflict_names_only_contested_nodes(lint):
    report = lint(workload("a", 7000, replicas=2, spec="nodeSelector: {pool: a}\n"),
                  workload("b", 7000, spec="nodeName: n1\n"), nodes=THREE_NODES)
    for finding in rule(report, "host-port-conflict"):
        assert "(n1)" in finding.message and "n2" not in finding.message


@pytest.mark.parametrize("flag, listener", [
    ("--port", True), ("--healthz-port", True), ("--web.listen-address", True),
    ("--metrics-bind-address", True), ("--statsd.listen-tcp", True), ("-listen", True),
    ("--report-interval", False), ("--kubelet-port", False), ("--redis-port", False),
    ("--statsd.listen-udp", False), ("--config-dir", False), ("--support-email", False),
])
def test_listener_flags(flag, listener):
    from kubelint_ports.model.object_readers import listener_flag

    assert listener_flag(flag) is listener


def test_listener_bound_to_another_ip_is_left_alone(lint):
    exporter = silent_exporter().replace('"--web.listen-address=:9100"', '"--web.listen-address=10.0.0.7:9100"')
    exporter = exporter.replace("livenessProbe: {httpGet: {port: 9100, path: /}}", "livenessProbe: null")
    assert rule(lint(exporter, workload("proxy", 9100, host_ip="10.0.0.9")), "host-port-host-network-capture") == []
    assert len(rule(lint(exporter, workload("proxy", 9100, host_ip="10.0.0.7")), "host-port-host-network-capture")) == 1


def test_two_word_flag_points_at_the_value():
    from kubelint_ports.loading import LoadResult, load_bytes
    from kubelint_ports.model import build_cluster

    result = LoadResult()
    load_bytes(silent_exporter().replace('args: ["--web.listen-address=:9100", "--path.rootfs=/host"]',
                                         'args: ["--port", "4240"]').encode(), "m.yaml", result)
    cluster, _ = build_cluster(result.documents)
    assert cluster.workloads[0].silent_ports[0].field_path.endswith("args[1]")


# --- a sidecar's hostPort: reserved by the scheduler, forwarded by nobody -----------------------------

SIDECAR_DAEMONSET = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: mesh-agent, namespace: ns}
spec:
  template:
    metadata: {labels: {app: mesh-agent}}
    spec:
      initContainers:
        - name: proxy
          restartPolicy: Always
          ports: [{containerPort: 31123, hostPort: 31123}]
      containers: [{name: app}]
"""
NODE_PORT_SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: ns}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{port: 80, nodePort: 31123}]
"""


def test_a_sidecar_host_port_counts_for_the_scheduler_only(lint):
    """kubelet's generatePodSandboxConfig maps spec.containers' ports only, the scheduler's
    GetHostPorts adds sidecars': the scheduler keeps pods apart, no DNAT takes any traffic."""
    report = lint(SIDECAR_DAEMONSET, NODE_PORT_SERVICE, workload("web", 31123, spec="nodeSelector: {pool: a}\n"),
                  nodes=THREE_NODES, proxy_mode="ipvs")
    conflicts = rule(report, "host-port-conflict")
    assert sorted(f.subject.name for f in conflicts) == ["mesh-agent", "web"]
    [agent] = [f for f in conflicts if f.subject.name == "mesh-agent"]
    assert agent.message.startswith("sidecar hostPort 31123/TCP")
    assert [f.subject.name for f in rule(report, "host-port-node-port-collision")] == ["web"]  # not the sidecar
    assert [f.subject.name for f in rule(report, "host-port")] == ["web"]
    assert [f.subject.name for f in rule(report, "host-port-in-init-container")] == ["mesh-agent"]
    assert [f.subject.name for f in rule(report, "host-port-in-node-port-range")] == ["web"]


def test_a_sidecar_host_port_takes_no_daemon_port_or_service_traffic(lint):
    sidecar = SIDECAR_DAEMONSET.replace("31123", "10250")
    report = lint(sidecar, proxy_mode="ipvs")
    assert rule(report, "node-reserved-port") == []
    assert rule(report, "host-port-service-port-capture") == []
    assert [f.subject.name for f in rule(report, "host-port-in-init-container")] == ["mesh-agent"]
