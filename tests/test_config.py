"""Configuration files, exemptions, annotations, baselines and user policies."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from kubelint_ports.config import ConfigError, apply_rules, find_config, load_config
from kubelint_ports.engine import lint_paths
from kubelint_ports.loading.helm.charts import in_process_engine
from kubelint_ports.policies import PolicyError, builtin_policies, policies_with
from kubelint_ports.suppressions import BaselineError, apply_exemptions, read_baseline, write_baseline
from kubelint_ports.vocabulary import Severity

ROOT = Path(__file__).resolve().parents[1]

HOSTPORT = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: node-exporter
  namespace: monitoring
  annotations: ANNOTATIONS
spec:
  template:
    spec:
      containers:
        - name: exporter
          ports:
            - containerPort: 9100
              hostPort: 31100
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# --- finding and validating the file -------------------------------------------------------------

def test_config_is_found_from_a_subdirectory_upward(tmp_path):
    config = write(tmp_path / ".kubelint-ports.yaml", "fail-on: warning\n")
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert find_config(tmp_path / "a" / "b") == config.resolve()
    assert load_config(start=tmp_path / "a" / "b").get("fail-on") == "warning"


def test_pyproject_table_is_a_config(tmp_path):
    write(tmp_path / "pyproject.toml", """\
        [project]
        name = "x"

        [tool.kubelint-ports]
        fail-on = "note"
        paths = ["k8s"]
        """)
    config = load_config(start=tmp_path)
    assert config.get("fail-on") == "note"
    assert config.paths("paths") == [str(Path(config.path).parent / "k8s")]


def test_no_config_is_an_empty_config(tmp_path):
    assert load_config(start=tmp_path).data == {}


@pytest.mark.parametrize("text, line, words", [
    ("fail-on: warning\nunknown-key: 1\n", 2, "unknown key"),
    ("fail-on: sometimes\n", 1, "fail-on"),
    ("paths: k8s\n", 1, "paths"),
    ("exemptions:\n  - rule: host-port\n    name: x\n", 2, "reason"),
    ("charts:\n  - path: c\n    valuez: [a]\n", 3, "unknown key"),
    ("rules: [\n", 2, "invalid YAML"),
    ("pod-templates:\n  argoproj.io/Rollout: spec.template\n  Rollout: spec.template\n", 3, "Rollout"),
    ("pod-templates:\n  a.io/X: {template: spec.template, replicas: -1}\n", 2, "pod-templates"),
    ("pod-templates:\n  a.io/X: {replicas: per-node}\n", 2, "template"),
    ("units:\n  prod:\n    paths: [prod]\n    node: [n.yaml]\n", 4, "did you mean 'nodes'"),
    ("units:\n  prod:\n    nodes: [n.yaml]\n", 2, "'paths' is a required property"),
    ("units:\n  prod: prod\n", 2, "neither a list of paths nor a mapping"),
    ("units:\n  prod:\n    paths: [prod]\n    facts: {hostport: maybe}\n", 4, "units.prod.facts.hostport"),
    ("units:\n  prod: {paths: [prod], proxy-mode: userspace}\n", 2, "units.prod.proxy-mode"),
])
def test_bad_config_is_a_clear_error_with_line(tmp_path, text, line, words):
    path = write(tmp_path / ".kubelint-ports.yaml", text)
    with pytest.raises(ConfigError) as raised:
        load_config(str(path))
    assert raised.value.line == line, raised.value
    assert words in str(raised.value)


def test_bad_pyproject_key_points_at_its_line(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kubelint-ports]\nfail-on = "error"\nbogus = 1\n')
    with pytest.raises(ConfigError) as raised:
        load_config(start=tmp_path)
    assert raised.value.line == 3


def test_missing_explicit_config_is_an_error(tmp_path):
    with pytest.raises(ConfigError):
        load_config(str(tmp_path / "nope.yaml"))


# --- custom resources with pod templates ---------------------------------------------------------

CUSTOM_KINDS = """\
apiVersion: example.com/v1
kind: NodeAgent
metadata: {name: agent, namespace: ops}
spec:
  podTemplate:
    spec:
      containers:
        - name: agent
          ports: [{containerPort: 9400, hostPort: 9400}]
---
apiVersion: example.com/v1
kind: Batch
metadata: {name: batch, namespace: ops}
spec:
  size: 4
  pod:
    spec:
      nodeName: gpu-1
      containers:
        - name: worker
          ports: [{containerPort: 9500, hostPort: 9500}]
"""


def test_pod_templates_config_reads_custom_kinds(tmp_path, monkeypatch):
    from kubelint_ports.settings import CommandLine, effective, resolve

    write(tmp_path / ".kubelint-ports.yaml", """\
        pod-templates:
          example.com/NodeAgent: {template: spec.podTemplate, replicas: per-node}
          example.com/Batch: {template: spec.pod, replicas: spec.size}
        """)
    write(tmp_path / "agents.yaml", CUSTOM_KINDS)
    monkeypatch.chdir(tmp_path)
    settings = resolve(CommandLine())
    report = lint_paths(["agents.yaml"], settings.options, policies=settings.policies)
    by_rule = {(f.rule_id, f.subject.kind) for f in report.findings}
    assert ("KP101", "NodeAgent") in by_rule and ("KP101", "Batch") in by_rule
    conflict = next(f for f in report.findings if f.rule_id == "KP301")
    assert conflict.subject.kind == "Batch" and "4 pods" in conflict.message
    shown = effective(settings)["pod-templates"]
    assert shown["example.com/NodeAgent"] == {"template": "spec.podTemplate", "replicas": "per-node"}
    assert shown["argoproj.io/Rollout"] == {"template": "spec.template", "replicas": "spec.replicas"}
    # Without the config, nobody reads these kinds
    write(tmp_path / ".kubelint-ports.yaml", "fail-on: error\n")
    assert lint_paths(["agents.yaml"], resolve(CommandLine()).options).findings == []
    # A path the objects do not have is an input error at the object, not a silent skip
    write(tmp_path / ".kubelint-ports.yaml", "pod-templates:\n  example.com/Batch: spec.nonexistent\n")
    report = lint_paths(["agents.yaml"], resolve(CommandLine()).options)
    [diagnostic] = report.diagnostics
    assert "Batch (example.com) has no spec.nonexistent" in diagnostic.message
    assert diagnostic.location.path == "agents.yaml" and diagnostic.location.line > 1


# --- per-rule settings --------------------------------------------------------------------------

def test_rules_off_severity_and_params(tmp_path):
    path = write(tmp_path / ".kubelint-ports.yaml", """\
        rules:
          host-port: off
          KP102: error
          node-reserved-port:
            severity: error
            extra_ports: [{port: 4240, daemon: cilium-health}]
        """)
    policies = apply_rules(list(builtin_policies()), load_config(str(path)))
    by_name = {p.name: p for p in policies}
    assert "host-port" not in by_name
    assert by_name["host-port-in-node-port-range"].severity is Severity.ERROR
    reserved = by_name["node-reserved-port"]
    assert reserved.severity is Severity.ERROR
    assert reserved.params["extra_ports"] == [{"port": 4240, "daemon": "cilium-health"}]
    assert reserved.params["ports"], "defaults kept"


@pytest.mark.parametrize("rules, line, words", [
    ("rules:\n  no-such-rule: off\n", 2, "unknown rule"),
    ("rules:\n  node-reserved-port:\n    extra_ports: [{port: 70000, daemon: x}]\n", 3, "70000"),
])
def test_bad_rule_settings_are_errors(tmp_path, rules, line, words):
    path = write(tmp_path / ".kubelint-ports.yaml", rules)
    with pytest.raises(ConfigError) as raised:
        apply_rules(list(builtin_policies()), load_config(str(path)))
    assert raised.value.line == line and words in str(raised.value)


@pytest.mark.parametrize("schema, line, words", [
    # Deeper than jsonschema's recursion can check (was an internal error, exit 3).
    ("{not: " * 190 + "{}" + "}" * 190, 3, "rules.KP901: nested too deeply to validate (limit max-depth)"),
    ("{properties: {name: {minimum: a}}}", 4, "rules.KP901.schema.properties.name.minimum: params.schema is not a "
                                              "valid JSON Schema"),
    ('{$ref: "#"}', 4, "refers back to itself"),
])
def test_bad_schema_param_of_a_port_schema_rule_is_a_config_error(tmp_path, schema, line, words):
    """The config's `rules:` params pass the policy files' validator (`policies.refused_params`):
    a bad `schema:` exits 2 at the config file's line, never 3."""
    import shutil
    import subprocess
    import sys

    shutil.copytree(ROOT / "examples" / "policies", tmp_path / "policies")
    (tmp_path / ".kubelint-ports.yaml").write_text(f"policies: [policies]\nrules:\n  KP901:\n    schema: {schema}\n")
    write(tmp_path / "m.yaml", HOSTPORT.replace("ANNOTATIONS", "{}"))
    done = subprocess.run([sys.executable, "-m", "kubelint_ports", "lint", "m.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"kubelint-ports: error: .kubelint-ports.yaml:{line}: "), done.stderr
    assert words in done.stderr and "internal error" not in done.stderr


def test_exclude_globs(tmp_path):
    path = write(tmp_path / ".kubelint-ports.yaml", "exclude: ['testdata', '*.generated.yaml']\n")
    config = load_config(str(path))
    assert config.excluded(str(tmp_path / "k8s" / "testdata" / "x.yaml"))
    assert config.excluded(str(tmp_path / "k8s" / "app.generated.yaml"))
    assert not config.excluded(str(tmp_path / "k8s" / "app.yaml"))


# --- suppressions -------------------------------------------------------------------------------

@pytest.mark.parametrize("annotations, suppressed", [
    ('{kubelint-ports.io/ignore: "host-port,KP102"}', {"KP101", "KP102"}),
    ('{kubelint-ports.io/ignore: "kp101"}', {"KP101"}),
    ('{kubelint-ports.io/ignore: "all"}', {"KP101", "KP102"}),
    ("{}", set()),
])
def test_ignore_annotation(tmp_path, annotations, suppressed):
    path = write(tmp_path / "m.yaml", HOSTPORT.replace("ANNOTATIONS", annotations))
    report = lint_paths([str(path)])
    assert {f.rule_id for f in report.findings if f.suppressed} == suppressed
    for finding in report.findings:
        assert finding.suppressed_by == ("inSource" if finding.suppressed else "")


def test_ignore_reason_annotation(tmp_path):
    annotations = '{kubelint-ports.io/ignore: host-port, kubelint-ports.io/ignore-reason: "node agent, reviewed"}'
    path = write(tmp_path / "m.yaml", HOSTPORT.replace("ANNOTATIONS", annotations))
    [finding] = [f for f in lint_paths([str(path)]).findings if f.rule_id == "KP101"]
    assert finding.suppressed == "node agent, reviewed"


def test_config_exemptions_by_glob(tmp_path):
    path = write(tmp_path / ".kubelint-ports.yaml", """\
        exemptions:
          - rule: host-port
            namespace: monitor*
            name: node-*
            reason: node agents need the host port
        """)
    manifest = write(tmp_path / "m.yaml", HOSTPORT.replace("ANNOTATIONS", "{}"))
    findings = apply_exemptions(lint_paths([str(manifest)]).findings, load_config(str(path)).exemptions)
    [exempt] = [f for f in findings if f.suppressed]
    assert exempt.rule_id == "KP101" and exempt.suppressed_by == "external"
    assert exempt.suppressed == "node agents need the host port"


def test_baseline_survives_line_shifts_and_reports_only_new_findings(tmp_path):
    manifest = write(tmp_path / "m.yaml", HOSTPORT.replace("ANNOTATIONS", "{}"))
    baseline = tmp_path / "baseline.json"
    assert write_baseline(lint_paths([str(manifest)]).findings, str(baseline)) == 2
    manifest.write_text("# a comment\n\n" + manifest.read_text().replace(
        "              hostPort: 31100\n",
        "              hostPort: 31100\n            - containerPort: 9101\n              hostPort: 9101\n"))
    findings = apply_exemptions(lint_paths([str(manifest)]).findings, (), read_baseline(str(baseline)))
    assert {(f.rule_id, f.port) for f in findings if not f.suppressed} == {("KP101", 9101)}
    assert all(f.suppressed == "in the baseline" for f in findings if f.port == 31100)


def test_bad_baseline_is_an_error(tmp_path):
    (tmp_path / "b.json").write_text("[1, 2]")
    with pytest.raises(BaselineError):
        read_baseline(str(tmp_path / "b.json"))
    with pytest.raises(BaselineError):
        read_baseline(str(tmp_path / "missing.json"))


# --- user policies ------------------------------------------------------------------------------

def test_example_user_policies_load_and_fire(tmp_path):
    policies = policies_with([ROOT / "examples" / "policies"])
    declarative = next(p for p in policies if p.id == "KP901")
    path = write(tmp_path / "m.yaml", HOSTPORT.replace("ANNOTATIONS", "{}"))
    [finding] = [f for f in lint_paths([str(path)], policies=[declarative]).findings]
    assert "ingress" in finding.message and finding.location.line == 14
    allowed = HOSTPORT.replace("ANNOTATIONS", "{}").replace("monitoring", "ingress").replace("31100", "8080")
    assert lint_paths([str(write(tmp_path / "ok.yaml", allowed))], policies=[declarative]).findings == []


def test_service_port_declarative_policy(tmp_path):
    policy_dir = tmp_path / "policies"
    write(policy_dir / "KP950-no-nodeports-for-tenants.yaml", """\
        id: KP950
        name: no-nodeports-for-tenants
        severity: error
        summary: Tenant namespaces may not expose NodePorts (incident 003's advice)
        check: port-schema
        params:
          target: service-port
          message: tenants get no nodePorts; use an Ingress
          schema:
            if: {properties: {namespace: {pattern: "^tenant-"}}}
            then: {properties: {nodePort: {type: "null"}, type: {enum: [ClusterIP]}}}
        docs:
          what: Flags Services with nodePorts in tenant namespaces.
          why: A tenant's nodePort can take a host process's traffic on every node.
          example: "apiVersion: v1"
          fix: "apiVersion: v1"
          references: [https://kubernetes.io/docs/concepts/policy/resource-quotas/]
        """)
    [policy] = [p for p in policies_with([policy_dir]) if p.id == "KP950"]
    manifest = write(tmp_path / "svc.yaml", """\
        apiVersion: v1
        kind: Service
        metadata: {name: web, namespace: tenant-a}
        spec:
          type: NodePort
          ports: [{port: 80, nodePort: 30080}]
        """)
    [finding] = lint_paths([str(manifest)], policies=[policy]).findings
    assert finding.rule_id == "KP950" and finding.location.line == 6


@pytest.mark.parametrize("text, line, words", [
    ("id: KP101\nname: mine\n", 1, "already used"),
    ("check: nope\n", 5, "unknown check"),
    ("params: {target: pods}\n", 6, "params"),
    ("severity: fatal\n", 3, "severity"),
])
def test_broken_user_policy_is_a_clear_error(tmp_path, text, line, words):
    base = {"id": "KP960", "name": "mine", "severity": "error", "summary": "A user policy for tests",
            "check": "port-schema", "params": {"target": "container-port", "schema": {}, "message": "a message"},
            "docs": {"what": "what it does", "why": "why it matters", "example": "apiVersion: v1",
                     "fix": "apiVersion: v1", "references": ["https://example.com"]}}
    import yaml

    data = {**base, **yaml.safe_load(text)}
    ordered = {key: data[key] for key in ("id", "name", "severity", "summary", "check", "params", "docs")}
    path = tmp_path / "p" / "KP960-mine.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(ordered, sort_keys=False))
    with pytest.raises(PolicyError) as raised:
        policies_with([path.parent])
    assert words in str(raised.value)
    assert raised.value.line == line, raised.value


# Not importorskip("helm_python"): it skips only a missing module, and the SDK installed for
# another platform, or with a library that does not load, raises something else.
needs_engine = pytest.mark.skipif(in_process_engine() is None and shutil.which("helm") is None,
                                  reason="no Helm engine (helm-python-sdk) nor `helm` binary here")


@needs_engine
def test_ignore_annotation_rendered_by_helm(tmp_path):
    from kubelint_ports.engine import LintOptions
    from kubelint_ports.loading.helm.charts import HelmOptions

    chart = tmp_path / "agent"
    write(chart / "Chart.yaml", "apiVersion: v2\nname: agent\nversion: 1.0.0\n")
    write(chart / "values.yaml", "annotations: {}\n")
    write(chart / "templates" / "daemonset.yaml", """\
        apiVersion: apps/v1
        kind: DaemonSet
        metadata:
          name: {{ .Release.Name }}
          {{- with .Values.annotations }}
          annotations:
            {{- toYaml . | nindent 4 }}
          {{- end }}
        spec:
          template:
            spec:
              containers:
                - name: agent
                  ports:
                    - containerPort: 9100
                      hostPort: 31100
        """)
    plain = lint_paths([str(chart)])
    assert {f.rule_id for f in plain.findings if not f.suppressed} >= {"KP101", "KP102"}
    values = write(tmp_path / "accept.yaml", """\
        annotations:
          kubelint-ports.io/ignore: host-port
          kubelint-ports.io/ignore-reason: the agent's port is reviewed
        """)
    report = lint_paths([str(chart)], LintOptions(helm=HelmOptions(values=(str(values),))))
    assert not report.diagnostics, report.diagnostics
    [accepted] = [f for f in report.findings if f.rule_id == "KP101"]
    assert accepted.suppressed == "the agent's port is reviewed"
    assert accepted.location.path.endswith("templates/daemonset.yaml") and accepted.location.line == 16


def test_config_shows_a_declarative_policys_parameters_not_its_schema(tmp_path, monkeypatch):
    """`kubelint-ports config` shows what `rules:` sets: a port-schema policy's declared
    parameters, with the configured value; its schema, message and target stay in its file."""
    import yaml
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".kubelint-ports.yaml").write_text(
        "rules:\n  KP552: {allowed: [{min: 9000, max: 9099}]}\n  forbidden-service-type: on\n")
    shown = yaml.safe_load(CliRunner().invoke(app, ["config"]).stdout)["rules"]
    assert shown["KP552"] == {"name": "host-port-not-allowed", "severity": "error",
                              "params": {"allowed": [{"min": 9000, "max": 9099}]}}
    assert shown["KP553"]["params"] == {"types": ["NodePort"]}  # its default
    assert "ports" in shown["KP303"]["params"]  # a check's params, all of them
