"""The API-validation, Service-routing, ephemeral-range, node-address and organisation-policy rules:
their parameters, the facts they read and the edges the golden fixtures do not show."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.config import apply_rules, load_config
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.model import ClusterFacts, build_cluster
from kubelint_ports.model.selection import selection
from kubelint_ports.policies import builtin_policies, enabled_by_default, find_policy
from kubelint_ports.settings import CommandLine, resolve

ROOT = Path(__file__).resolve().parents[1]
INVENTORY = ROOT / "tests" / "policies" / "KP305" / "nodes.inventory.yaml"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def lint(tmp_path: Path, text: str, *, policies=None, **options):
    write(tmp_path / "in.yaml", text)
    report = lint_paths([str(tmp_path / "in.yaml")], LintOptions(**options),
                        policies=policies if policies is not None else builtin_policies())
    assert not report.diagnostics, report.diagnostics
    return report


def with_params(reference: str, **params):
    policy = find_policy(reference)
    return [dataclasses.replace(policy, params={**policy.params, **params})]


def lines_of(report, rule_id: str) -> list[int]:
    return [f.location.line for f in report.findings if f.rule_id == rule_id]


SERVICES_ONLY = """\
    apiVersion: v1
    kind: Service
    metadata: {name: billing, namespace: finance}
    spec:
      selector: {app: billing}
      ports: [{name: http, port: 80}]
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: manual, namespace: finance}
    spec:
      ports: [{name: sql, port: 5432}]
    """


# --- off by default, turned on by the configuration ------------------------------------------------

def test_organisation_policies_are_off_until_the_config_names_them(tmp_path):
    off = {p.id for p in builtin_policies() if not p.enabled}
    assert off == {"KP551", "KP552", "KP553", "KP554", "KP555"}
    assert not off & {p.id for p in enabled_by_default(builtin_policies())}
    config = load_config(str(write(tmp_path / "c.yaml", """\
        rules:
          host-network: on
          KP552: error
          forbidden-service-type: {types: [LoadBalancer]}
          privileged-port: off
        """)))
    chosen = {p.id: p for p in apply_rules(list(builtin_policies()), config)}
    assert {"KP551", "KP552", "KP553"} <= set(chosen)
    assert not {"KP554", "KP555"} & set(chosen)
    assert chosen["KP553"].params["types"] == ["LoadBalancer"]


def test_the_cli_runs_an_organisation_policy_only_when_turned_on(tmp_path):
    manifest = write(tmp_path / "svc.yaml", """\
        apiVersion: v1
        kind: Service
        metadata: {name: grafana, namespace: monitoring}
        spec:
          type: NodePort
          selector: {app: grafana}
          ports: [{name: http, port: 3000}]
        """)
    quiet = json.loads(CliRunner().invoke(app, ["lint", "--format", "json", str(manifest)]).output)
    assert "KP553" not in {f["rule"] for f in quiet["findings"]}
    config = write(tmp_path / "on.yaml", "rules:\n  forbidden-service-type: on\n")
    loud = json.loads(CliRunner().invoke(app, ["lint", "--format", "json", "--config", str(config),
                                               str(manifest)]).output)
    assert [f["line"] for f in loud["findings"] if f["rule"] == "KP553"] == [5]
    rules = CliRunner().invoke(app, ["rules"]).output
    entry = rules.split("KP553")[1].split("\nKP")[0]  # its row, wrapped summary included
    assert "(off by default)" in " ".join(entry.split())


# --- facts: the ephemeral port range ------------------------------------------------------------------

def test_ephemeral_range_from_option_config_and_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve(CommandLine()).options.facts.ephemeral_port_range is None
    write(tmp_path / ".kubelint-ports.yaml", "ephemeral-port-range: 49152-65535\n")
    assert resolve(CommandLine()).options.facts.ephemeral_port_range == (49152, 65535)
    assert resolve(CommandLine(ephemeral_port_range="40000-50000")).options.facts.ephemeral_port_range == \
        (40000, 50000)
    cluster, _ = build_cluster([])
    assert cluster.ephemeral_port_range == (32768, 60999)
    write(tmp_path / ".kubelint-ports.yaml", "ephemeral-port-range: 60000-50000\n")
    result = CliRunner().invoke(app, ["lint", str(tmp_path)])
    assert result.exit_code == 2 and ".kubelint-ports.yaml:1: ephemeral-port-range" in result.output


def test_ephemeral_range_option_moves_the_findings(tmp_path):
    manifest = """\
        apiVersion: v1
        kind: Pod
        metadata: {name: probe, namespace: ops}
        spec:
          hostNetwork: true
          containers:
            - name: probe
              image: busybox:1.36
              ports: [{containerPort: 45000}, {containerPort: 55000}]
        """
    default = lint(tmp_path, manifest)
    assert len(lines_of(default, "KP106")) == 2
    narrow = lint(tmp_path, manifest, facts=ClusterFacts(ephemeral_port_range=(50000, 60000)))
    assert [f.port for f in narrow.findings if f.rule_id == "KP106"] == [55000]


# --- one check for a hostPort and a hostNetwork port -----------------------------------------------------

HOLDER_TWINS = (("KP102", "KP103"), ("KP105", "KP106"), ("KP201", "KP202"))

BOTH_HOLDERS = """\
    apiVersion: v1
    kind: Pod
    metadata: {name: dnat, namespace: x}
    spec:
      containers: [{name: c, image: i, ports: [{containerPort: 8080, hostPort: 31001}]}]
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: socket, namespace: x}
    spec:
      hostNetwork: true
      containers: [{name: c, image: i, ports: [{containerPort: 31002}]}]
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: x}
    spec:
      type: NodePort
      selector: {app: web}
      ports: [{name: a, port: 80, nodePort: 31001}, {name: b, port: 81, nodePort: 31002}]
    """


def test_one_check_serves_a_host_port_rule_and_its_host_network_twin(tmp_path):
    """Each twin pair is one check told by its policy's `holder` param which ports to read: the
    hostPort policy reports the DNAT pod only, the hostNetwork policy the socket pod only."""
    for host_port, host_network in HOLDER_TWINS:
        dnat, socket = find_policy(host_port), find_policy(host_network)
        assert dnat.check == socket.check, (host_port, host_network)
        assert (dnat.params, socket.params) == ({"holder": "hostPort"}, {"holder": "hostNetwork"})
    report = lint(tmp_path, BOTH_HOLDERS, facts=ClusterFacts(ephemeral_port_range=(31000, 31999)))
    found = {(f.rule_id, f.port, f.subject.name) for f in report.findings if f.rule_id < "KP3"}
    twins = {rule for pair in HOLDER_TWINS for rule in pair}
    assert {entry for entry in found if entry[0] in twins} == {
        ("KP102", 31001, "dnat"), ("KP105", 31001, "dnat"), ("KP201", 31001, "dnat"),
        ("KP103", 31002, "socket"), ("KP106", 31002, "socket"), ("KP202", 31002, "socket")}, found


def test_a_holder_the_check_does_not_know_is_refused_at_its_config_line(tmp_path):
    manifest = write(tmp_path / "in.yaml", BOTH_HOLDERS)
    config = write(tmp_path / "c.yaml", "rules:\n  KP103:\n    holder: hostPod\n")
    result = CliRunner().invoke(app, ["lint", "--config", str(config), str(manifest)])
    assert result.exit_code == 2, result.output
    assert "c.yaml:3" in result.output and "hostPod" in result.output, result.output


# --- Service routing ------------------------------------------------------------------------------------

def test_dangling_service_stays_quiet_on_services_alone_unless_strict(tmp_path):
    assert not lines_of(lint(tmp_path, SERVICES_ONLY), "KP501")
    strict = lint(tmp_path, SERVICES_ONLY, policies=with_params("KP501", strict=True))
    assert lines_of(strict, "KP501") == [5]
    both = lint(tmp_path, SERVICES_ONLY, policies=with_params("KP501", strict=True, selectorless=True))
    assert lines_of(both, "KP501") == [5, 11]


def test_selection_matches_every_selector_label_within_the_namespace():
    from kubelint_ports.loading import LoadResult, load_bytes

    loaded = LoadResult()
    load_bytes(textwrap.dedent("""\
        apiVersion: v1
        kind: Pod
        metadata: {name: a, namespace: x, labels: {app: web, tier: front}}
        spec: {containers: [{name: c, image: i}]}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: b, namespace: y, labels: {app: web, tier: front}}
        spec: {containers: [{name: c, image: i}]}
        ---
        apiVersion: v1
        kind: Service
        metadata: {name: s, namespace: x}
        spec: {selector: {app: web, tier: front}, ports: [{port: 80}]}
        ---
        apiVersion: v1
        kind: Service
        metadata: {name: t, namespace: x}
        spec: {selector: {app: web, tier: back}, ports: [{port: 80}]}
        """).encode(), "in.yaml", loaded)
    cluster, _ = build_cluster(loaded.documents)
    chosen = selection(cluster)
    first, second = cluster.services
    assert [w.ref.name for w in chosen.selected(first)] == ["a"]
    assert chosen.selected(second) == []


def test_probe_numeric_ports_are_notes_when_asked(tmp_path):
    manifest = """\
        apiVersion: v1
        kind: Pod
        metadata: {name: orders, namespace: shop}
        spec:
          containers:
            - name: orders
              image: ghcr.io/example/orders:3.0.2
              ports: [{name: http, containerPort: 8080}]
              livenessProbe: {tcpSocket: {port: 8081}}
              readinessProbe: {httpGet: {path: /, port: 8080}}
        """
    assert not lines_of(lint(tmp_path, manifest), "KP505")
    report = lint(tmp_path, manifest, policies=with_params("KP505", numeric=True))
    [finding] = [f for f in report.findings if f.rule_id == "KP505"]
    assert (finding.location.line, str(finding.severity), finding.port) == (9, "note", 8081)


# --- organisation policies' parameters ------------------------------------------------------------------

HOST_PORTS = """\
    apiVersion: v1
    kind: Pod
    metadata: {name: ingress, namespace: edge}
    spec:
      containers:
        - name: nginx
          image: nginx:1.27
          ports:
            - {containerPort: 8443, hostPort: 8443}
            - {containerPort: 9000, hostPort: 9000}
            - {containerPort: 80}
    """


def test_allowed_host_port_ranges(tmp_path):
    assert lines_of(lint(tmp_path, HOST_PORTS), "KP552") == [9, 10]
    allowed = lint(tmp_path, HOST_PORTS, policies=with_params("KP552", allowed=[{"min": 8000, "max": 8999}]))
    assert lines_of(allowed, "KP552") == [10]


def test_privileged_port_threshold_and_forbidden_ports(tmp_path):
    assert lines_of(lint(tmp_path, HOST_PORTS), "KP554") == [11]
    assert lines_of(lint(tmp_path, HOST_PORTS, policies=with_params("KP554", below=8500)), "KP554") == [9, 11]
    forbidden = with_params("KP555", ports=[{"port": 9000, "reason": "the legacy admin port"}])
    [finding] = [f for f in lint(tmp_path, HOST_PORTS, policies=forbidden).findings if f.rule_id == "KP555"]
    assert finding.location.line == 10 and "the legacy admin port" in finding.message


# --- inventory rules without an inventory --------------------------------------------------------------

@pytest.mark.parametrize("rule", ["KP305", "KP306"])
def test_node_address_rules_need_an_inventory(tmp_path, rule):
    example = find_policy(rule).docs["example"]
    assert not lines_of(lint(tmp_path, example), rule)
    assert lines_of(lint(tmp_path, example, node_files=(str(INVENTORY),)), rule)


def test_live_service_on_a_node_address_is_reported_on_the_linted_workload(tmp_path):
    live = write(tmp_path / "running.yaml", """\
        apiVersion: v1
        kind: Service
        metadata: {name: pushgateway, namespace: monitoring}
        spec:
          selector: {app: pushgateway}
          externalIPs: [10.0.0.12]
          ports: [{name: http, port: 9100, targetPort: 9091}]
        """)
    report = lint(tmp_path, """\
        apiVersion: apps/v1
        kind: DaemonSet
        metadata: {name: node-exporter, namespace: monitoring}
        spec:
          selector: {matchLabels: {app: node-exporter}}
          template:
            metadata: {labels: {app: node-exporter}}
            spec:
              hostNetwork: true
              containers:
                - name: node-exporter
                  image: prom/node-exporter:v1.8.2
                  ports: [{name: metrics, containerPort: 9100}]
        """, node_files=(str(INVENTORY),), cluster_files=(str(live),))
    [finding] = [f for f in report.findings if f.rule_id == "KP305"]
    assert finding.subject.kind == "DaemonSet" and finding.location.line == 13
    assert finding.related[0].path.endswith("running.yaml")
    # the datapath model's answer: the process never gets it (DNAT with endpoints, REJECT without)
    assert finding.traffic["destination"] == "external-ip" and "host-process" not in finding.traffic["possible"]
    assert "monitoring/DaemonSet/node-exporter" in finding.traffic["loser"] or not finding.traffic["certain"]


@pytest.mark.parametrize("mode, cni, said", [
    ("iptables", "1.1.1", "so the Service pushgateway receives it, and the hostPort pod never sees it"),
    # portmap < v0.7.5 and kube-proxy both insert at the top only when absent: the last inserter wins
    ("iptables", "0.7.4", "it depends on which jump was inserted last: the hostPort pod gets it when portmap's was"),
    ("nftables", "1.1.1", "the order is undefined (the hostPort pod or the Service pushgateway"),
])
def test_external_ip_on_a_node_names_the_winner_for_the_known_facts(tmp_path, mode, cni, said):
    report = lint(tmp_path, """\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: relay, namespace: monitoring}
        spec:
          selector: {matchLabels: {app: relay}}
          template:
            metadata: {labels: {app: relay}}
            spec:
              containers:
                - {name: relay, ports: [{containerPort: 8080, hostPort: 9100}]}
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: pushgateway, namespace: monitoring}
        spec:
          selector: {matchLabels: {app: pushgateway}}
          template:
            metadata: {labels: {app: pushgateway}}
            spec:
              containers: [{name: gw, ports: [{containerPort: 9091}]}]
        ---
        apiVersion: v1
        kind: Service
        metadata: {name: pushgateway, namespace: monitoring}
        spec:
          selector: {app: pushgateway}
          externalIPs: [10.0.0.12]
          ports: [{name: http, port: 9100, targetPort: 9091}]
        """, node_files=(str(INVENTORY),), facts=ClusterFacts(proxy_mode=mode, stated=(
        ("cni-plugins-version", cni, "test"),)))
    [finding] = [f for f in report.findings if f.rule_id == "KP305"]
    assert said in finding.message, finding.message
    assert finding.traffic["certain"] is (mode == "iptables" and cni != "0.7.4")


# --- ports a hostNetwork pod listens on by its flags, and healthCheckNodePorts --------------------------

UNDECLARED_LISTENERS = """\
    apiVersion: apps/v1
    kind: DaemonSet
    metadata: {name: exporter, namespace: mon}
    spec:
      selector: {matchLabels: {app: exporter}}
      template:
        metadata: {labels: {app: exporter}}
        spec:
          hostNetwork: true
          containers:
            - {name: a, image: prom/node-exporter, args: ["--web.listen-address=:31500"]}
            - {name: b, image: prom/node-exporter, args: ["--web.listen-address=:45000"]}
            - {name: c, image: prom/node-exporter, args: ["--web.listen-address=:10250"]}
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: np, namespace: mon}
    spec:
      type: NodePort
      selector: {app: other}
      ports: [{port: 80, nodePort: 31500}]
    """


def test_undeclared_host_network_listeners_are_node_ports_too(tmp_path):
    """Incident 003's server declared nothing: its flag is what binds the node's port."""
    report = lint(tmp_path, UNDECLARED_LISTENERS)
    found = {(f.rule_id, f.location.line, f.location.column) for f in report.findings if f.rule_id < "KP5"}
    assert found == {("KP202", 11, 55), ("KP103", 11, 55), ("KP106", 12, 55), ("KP303", 13, 55)}, found
    [collision] = [f for f in report.findings if f.rule_id == "KP202"]
    assert "hostNetwork port 31500/TCP (undeclared, --web.listen-address)" in collision.message
    assert collision.traffic is not None and "host-process" not in collision.traffic["possible"]
    [kubelet] = [f for f in report.findings if f.rule_id == "KP303"]
    assert kubelet.message.startswith("hostNetwork port 10250/TCP (container 'c', undeclared, --web.listen-address) "
                                      "is kubelet's port")


HEALTH_CHECK = """\
    apiVersion: v1
    kind: Service
    metadata: {name: lb, namespace: x}
    spec:
      type: LoadBalancer
      externalTrafficPolicy: Local
      healthCheckNodePort: 32000
      selector: {app: lb}
      ports: [{name: http, port: 80}]
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: p, namespace: x}
    spec:
      HOST_NETWORK
      containers: [{name: c, image: i, ports: [{containerPort: 32000PORT}]}]
    """


def test_a_health_check_node_port_is_kube_proxys_socket_not_a_dnat(tmp_path):
    """kube-proxy serves healthCheckNodePort from a listening socket: a hostPort's DNAT takes the
    load balancer's checks in every mode, and a hostNetwork process fights kube-proxy for bind()."""
    host_port = lint(tmp_path, HEALTH_CHECK.replace("HOST_NETWORK", "hostNetwork: false")
                     .replace("32000PORT", "8080, hostPort: 32000"), facts=ClusterFacts(proxy_mode="iptables"))
    [taken] = [f for f in host_port.findings if f.rule_id == "KP201"]
    assert taken.message.startswith("hostPort 32000/TCP takes the traffic of healthCheckNodePort 32000 of x/Service/lb")
    assert "kube-proxy's health-check server never sees it" in taken.message
    assert "change the hostPort or the healthCheckNodePort" in taken.message
    assert taken.traffic["receiver"] == "hostport" and taken.traffic["certain"]
    bound = lint(tmp_path, HEALTH_CHECK.replace("HOST_NETWORK", "hostNetwork: true").replace("32000PORT", "32000"))
    [clash] = [f for f in bound.findings if f.rule_id == "KP202"]
    assert "the process that binds it first keeps it" in clash.message and clash.traffic is None
    assert "DNAT" not in clash.message
