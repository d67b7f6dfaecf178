"""Issue 34: ports a hostNetwork pod listens on without declaring them (a probe's port, a listen
flag) are claims on the node port for host-port-conflict (KP301), with the evidence and how sure
it is named; and host-port-service-port-capture (KP304) names every Service a hostPort may take,
the implicit default/kubernetes included, with a count that agrees with the names."""

from __future__ import annotations

import textwrap
from pathlib import Path

from test_policies import working_directory

from kubelint_ports.checks.manifest import phrases
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.policies import builtin_policies
from kubelint_ports.portmap import port_map_of
from kubelint_ports.vocabulary import Message

CONTROL_PLANE_AND_WORKERS = textwrap.dedent("""\
    apiVersion: v1
    kind: List
    items:
      - apiVersion: v1
        kind: Node
        metadata:
          name: cp-1
          labels: {kubernetes.io/hostname: cp-1, node-role.kubernetes.io/control-plane: ""}
        spec:
          taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]
      - {apiVersion: v1, kind: Node, metadata: {name: w1, labels: {kubernetes.io/hostname: w1, pool: a}}, spec: {}}
      - {apiVersion: v1, kind: Node, metadata: {name: w2, labels: {kubernetes.io/hostname: w2, pool: b}}, spec: {}}
    """)


def host_network(name: str, kind: str = "Deployment", replicas: int = 1, args: str = "", probe: str = "",
                 ports: str = "", spec: str = "") -> str:
    """A hostNetwork workload; `probe`: `readinessProbe: {...}` lines of its container."""
    replicas_line = f"\n          replicas: {replicas}" if kind != "DaemonSet" else ""
    return textwrap.dedent(f"""\
        apiVersion: apps/v1
        kind: {kind}
        metadata: {{name: {name}, namespace: sys}}
        spec:{replicas_line}
          selector: {{matchLabels: {{app: {name}}}}}
          template:
            metadata: {{labels: {{app: {name}}}}}
            spec:
              hostNetwork: true
              {spec}containers:
                - name: main
                  image: example/{name}:1
                  args: [{args}]
                  {probe}
                  ports: [{ports}]
        """)


def lint(tmp_path: Path, *documents: str, nodes: str | None = None):
    (tmp_path / "m.yaml").write_text("---\n".join(documents), encoding="utf-8")
    options = LintOptions()
    if nodes is not None:
        (tmp_path / "nodes.yaml").write_text(nodes, encoding="utf-8")
        options = LintOptions(node_files=("nodes.yaml",))
    with working_directory(tmp_path):
        return lint_paths(["m.yaml"], options, policies=builtin_policies())


def of_rule(report, rule_id: str):
    return [f for f in report.findings if f.rule_id == rule_id and not f.suppressed]


PROBE_8080 = "readinessProbe: {httpGet: {path: /ready, port: 8080}}"
EVERYWHERE = "tolerations: [{operator: Exists}]\n              "


# --- KP304: every Service named, the implicit default/kubernetes included ---------------------------

INGRESS_443 = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: DaemonSet
    metadata: {name: ingress, namespace: edge}
    spec:
      selector: {matchLabels: {app: ingress}}
      template:
        metadata: {labels: {app: ingress}}
        spec:
          containers:
            - name: nginx
              image: nginx:1.27
              ports: [{containerPort: 443, hostPort: 443}]
    """)
WEB_TLS = textwrap.dedent("""\
    apiVersion: v1
    kind: Service
    metadata: {name: web-tls, namespace: web}
    spec:
      selector: {app: web}
      ports: [{port: 443, targetPort: 8443}]
    """)


def test_kp304_names_default_kubernetes_beside_another_service_on_443(tmp_path):
    [finding] = of_rule(lint(tmp_path, INGRESS_443, WEB_TLS), "KP304")
    assert "2 Services' port 443" in finding.message
    assert "default/Service/kubernetes (the API server)" in finding.message
    assert "web/Service/web-tls" in finding.message
    assert "1 Services'" not in finding.message
    # the API server first: a list of many shows five names
    assert finding.message.index("default/Service/kubernetes") < finding.message.index("web/Service/web-tls")


def test_kp304_alone_against_default_kubernetes_keeps_its_one_service_story(tmp_path):
    [finding] = of_rule(lint(tmp_path, INGRESS_443), "KP304")
    assert "the traffic of default/Service/kubernetes port 443 (the API server" in finding.message
    assert "Services'" not in finding.message


def test_service_capture_many_counts_in_the_singular_and_the_plural():
    one = phrases.service_capture_many(443, "TCP", False, ["a/Service/x"],
                                       Message("head", analysis="head: pods that connect to its ClusterIP"))
    assert "the traffic of 1 Service's port 443 (a/Service/x)" in one.analysis
    assert one.headline == "hostPort 443/TCP may take the traffic of 1 Service's port 443 (a/Service/x)"
    assert one.analysis.endswith("pods that connect to their ClusterIPs")
    two = phrases.service_capture_many(443, "TCP", True, ["a/Service/x", "b/Service/y"],
                                       Message("head", analysis="head: story"))
    assert "takes the traffic of 2 Services' port 443" in two.analysis
    assert two.headline.endswith("(a/Service/x and 1 more)")


# --- KP301: the three shapes of the issue ------------------------------------------------------------

def test_injector_and_csi_provider_both_on_8080_from_their_probes(tmp_path):
    report = lint(tmp_path,
                  host_network("injector", probe=PROBE_8080),
                  host_network("csi-provider", kind="DaemonSet", spec=EVERYWHERE,
                               probe="livenessProbe: {httpGet: {path: /health, port: 8080}}"))
    findings = of_rule(report, "KP301")
    assert sorted(f.subject.name for f in findings) == ["csi-provider", "injector"]
    injector = next(f for f in findings if f.subject.name == "injector")
    assert "from its readinessProbe, nearly certain" in injector.message
    assert "from its livenessProbe, nearly certain" in injector.message
    assert "where it runs" in injector.message  # the DaemonSet is on every node the injector may use
    assert "'address already in use'" in injector.message
    assert injector.field_path.endswith("readinessProbe.httpGet.port")
    assert [r.message for r in injector.related] == [
        "port 8080 of hostNetwork sys/DaemonSet/csi-provider (undeclared, from its livenessProbe)"]
    # the port map shows the claim, and marks it
    marked = [h for h in port_map_of(report).holders if h.port == 8080]
    assert len(marked) == 2
    assert all(any(m.state == "conflict" for m in h.marks) for h in marked)


def test_dns_cache_health_port_beside_a_controller(tmp_path):
    dns_cache = host_network("node-local-dns", kind="DaemonSet", spec=EVERYWHERE,
                             ports="{containerPort: 53, protocol: UDP}",
                             probe="livenessProbe: {httpGet: {host: 169.254.20.10, path: /health, port: 8080}}")
    findings = of_rule(lint(tmp_path, dns_cache, host_network("controller", probe=PROBE_8080)), "KP301")
    assert sorted(f.subject.name for f in findings) == ["controller", "node-local-dns"]


def test_two_replicas_on_the_one_control_plane_node(tmp_path):
    controller = host_network(
        "ccm", replicas=2, args="--leader-elect=true, --secure-port=29652",
        spec='nodeSelector: {node-role.kubernetes.io/control-plane: ""}\n              '
             'tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists}]\n              ')
    [finding] = of_rule(lint(tmp_path, controller, nodes=CONTROL_PLANE_AND_WORKERS), "KP301")
    assert finding.message.startswith("this Deployment wants 2 pods listening on hostNetwork port 29652/TCP "
                                      "(undeclared, from its --secure-port flag, a best guess), but only 1 node")
    assert "(cp-1)" in finding.message
    assert "check that the process listens there" in finding.message
    assert finding.nodes == ("cp-1",)


# --- KP301: how sure, and when not ----------------------------------------------------------------------

def test_a_flag_backed_by_a_probe_is_as_sure_as_the_probe(tmp_path):
    findings = of_rule(lint(tmp_path,
                            host_network("a", args="--listen=:8080", probe=PROBE_8080),
                            host_network("b", kind="DaemonSet", spec=EVERYWHERE, args="--port=8080")), "KP301")
    a = next(f for f in findings if f.subject.name == "a")
    assert "(1 pod; undeclared, from its --listen flag and its readinessProbe, nearly certain)" in a.message
    assert "from its --port flag, a best guess" in a.message
    assert "check that the process listens there" in a.message  # b's evidence is only a flag


def test_a_declared_port_is_certain_and_the_scheduler_still_cannot_keep_them_apart(tmp_path):
    findings = of_rule(lint(tmp_path,
                            host_network("exporter", kind="DaemonSet", spec=EVERYWHERE,
                                         ports="{name: metrics, containerPort: 9100}"),
                            host_network("other", args="--web.listen-address=:9100")), "KP301")
    exporter = next(f for f in findings if f.subject.name == "exporter")
    assert "(one pod per eligible node; declared, certain)" in exporter.message
    # node-reserved-port does not tell the same collision again on the same line
    assert not [f for f in lint(tmp_path, host_network("node-exporter", kind="DaemonSet", spec=EVERYWHERE,
                                                         ports="{name: metrics, containerPort: 9100}"),
                                host_network("other", args="--web.listen-address=:9100")).findings
                if f.rule_id == "KP303" and not f.suppressed]


def test_two_deployments_that_may_share_a_node_without_an_inventory(tmp_path):
    findings = of_rule(lint(tmp_path, host_network("a", probe=PROBE_8080), host_network("b", probe=PROBE_8080)),
                       "KP301")
    assert len(findings) == 2
    assert all("wherever the scheduler puts them together" in f.message for f in findings)
    assert all("may place them side by side" in f.message for f in findings)


def test_pods_that_cannot_share_a_node_are_left_alone(tmp_path):
    pool_a = 'nodeSelector: {pool: a}\n              '
    pool_b = 'nodeSelector: {pool: b}\n              '
    report = lint(tmp_path, host_network("a", probe=PROBE_8080, spec=pool_a),
                  host_network("b", probe=PROBE_8080, spec=pool_b))
    assert not of_rule(report, "KP301")
    report = lint(tmp_path, host_network("a", probe=PROBE_8080, spec=pool_a),
                  host_network("b", probe=PROBE_8080, spec=pool_b), nodes=CONTROL_PLANE_AND_WORKERS)
    assert not of_rule(report, "KP301")


def test_listeners_on_different_addresses_do_not_clash(tmp_path):
    report = lint(tmp_path, host_network("a", args="--listen=10.0.0.1:8080"),
                  host_network("b", args="--listen=10.0.0.2:8080"))
    assert not of_rule(report, "KP301")


def test_replicas_the_nodes_can_hold_apart_are_not_reported(tmp_path):
    """As for declared host ports: more replicas than nodes is the provable case (two replicas on
    two worker nodes may still meet, but nothing says they must)."""
    workers = host_network("w", replicas=2, args="--port=7000")
    assert not of_rule(lint(tmp_path, workers, nodes=CONTROL_PLANE_AND_WORKERS), "KP301")
    assert not of_rule(lint(tmp_path, workers), "KP301")
    pinned = host_network("p", replicas=2, args="--port=7000", spec="nodeName: edge-1\n              ")
    [finding] = of_rule(lint(tmp_path, pinned), "KP301")
    assert "but only 1 node can run them (edge-1)" in finding.message


def test_declared_ports_alone_are_the_allocations_as_before(tmp_path):
    """Two hostNetwork pods that both declare the port: the scheduler keeps them apart (one Pending),
    reported once per claim as before, not also as a silent-port clash."""
    pinned = "nodeName: lb-1\n              "
    findings = of_rule(lint(tmp_path, host_network("a", ports="{containerPort: 80}", spec=pinned),
                            host_network("b", ports="{containerPort: 80}", spec=pinned)), "KP301")
    assert len(findings) == 2
    assert all("Pending" in f.message and "address already in use" not in f.message for f in findings)
