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
    assert chosen["KP553"].params == {"types": ["LoadBalancer"]}


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
    assert "KP553" in rules and "(off by default)" in rules.split("KP553")[1].splitlines()[0]


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
    ("iptables", "1.1.1", "so pushgateway's endpoints receives it, and the hostPort pod never sees it"),
    ("iptables", "0.7.4", "so the hostPort pod receives it, and pushgateway's endpoints never sees it"),
    ("nftables", "1.1.1", "the order is undefined (the hostPort pod or pushgateway's endpoints"),
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
    assert finding.traffic["certain"] is (mode != "nftables")
