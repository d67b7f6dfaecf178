"""Issue 34, "Noise that the field shows": KP501 (a selector that matches no workload) is a note
unless there is evidence of a mistake (a selector one edit away from a workload's pod labels, or
a label key nothing in the unit writes or could set), and KP503 (a numeric targetPort no
container declares) stays silent where the pod's own probe connects to the port and says what a
listen flag shows where only a flag names it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kubelint_ports.checks.manifest.service_routing import close, edit_distance
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.policies import builtin_policies, find_policy
from kubelint_ports.vocabulary import Severity


def findings(tmp_path: Path, text: str, rule_id: str):
    path = tmp_path / "in.yaml"
    path.write_text(text, encoding="utf-8")
    report = lint_paths([str(path)], LintOptions(), policies=builtin_policies())
    assert not report.diagnostics, report.diagnostics
    return {f.subject.name: f for f in report.findings if f.rule_id == rule_id}


# --- KP501: what counts as one edit ---------------------------------------------------------------------

@pytest.mark.parametrize(("ours", "theirs"), [
    ("wbe", "web"),            # two neighbours swapped: one edit
    ("kafak-0", "kafka-0"),
    ("cart-v1", "cart"),       # a version suffix: 3 edits, fewer than half of 7
    ("catalgo", "catalog"),
    ("frontedn", "frontend"),
])
def test_close_values(ours, theirs):
    assert close(ours, theirs)


@pytest.mark.parametrize(("ours", "theirs"), [
    ("v1", "v2"),              # 1 edit, but half of the value: a version, not a slip
    ("web", "db"),
    ("canary", "stable"),      # the values of run-time roles and tracks are words apart
    ("primary", "replica"),
    ("master", "replica"),
    ("active", "standby"),
    ("true", "false"),
    ("leader", "follower"),
    ("web", "web"),            # equal is no edit
])
def test_distant_values(ours, theirs):
    assert not close(ours, theirs)


def test_edit_distance_is_the_optimal_string_alignment():
    assert edit_distance("ab", "ba") == 1
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3
    assert edit_distance("a", "abcdefgh") > 3  # cut short: far beyond `close` anyway


NAMESPACE = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: api, namespace: shop}
    spec:
      selector: {matchLabels: {app.kubernetes.io/name: api}}
      template:
        metadata: {labels: {app.kubernetes.io/name: api, tier: backend}}
        spec:
          containers: [{name: api, image: api, ports: [{name: http, containerPort: 8080}]}]
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: api, namespace: shop}
    spec:
      selector: {app.kubernetes.io/name: api}
      ports: [{port: 80, targetPort: http}]
    """)


def service(name: str, selector: str, namespace: str = "shop") -> str:
    return textwrap.dedent(f"""\
    ---
    apiVersion: v1
    kind: Service
    metadata: {{name: {name}, namespace: {namespace}}}
    spec:
      selector: {selector}
      ports: [{{port: 80, targetPort: http}}]
    """)


def test_each_case_has_its_severity_and_says_which(tmp_path):
    found = findings(tmp_path, NAMESPACE
                     + service("typo", "{app.kubernetes.io/name: apj}")
                     + service("renamed", "{app: api, tier: backend}")
                     + service("extra-key", "{app.kubernetes.io/name: api, role: primary}")
                     + service("other-value", "{app.kubernetes.io/name: api, tier: frontend}")
                     + service("foreign-key", "{k8s-app: billing}")
                     + service("foreign-and-unmatched", "{k8s-app: api, tier: frontend}"), "KP501")
    cases = {name: (f.severity, f.headline) for name, f in found.items()}
    assert {name: severity for name, (severity, _) in cases.items()} == {
        "typo": Severity.WARNING, "renamed": Severity.WARNING,  # one edit away
        "extra-key": Severity.NOTE,  # `role` may be set at run time by the api pods themselves
        "other-value": Severity.NOTE,  # `tier` is written, `frontend` is no slip of `backend`
        "foreign-key": Severity.WARNING,  # `k8s-app`: no template writes it, and no pod could
        "foreign-and-unmatched": Severity.WARNING,  # the rest (tier: frontend) selects no pod either
    }
    assert "one edit away from the pod labels of shop/Deployment/api" in cases["typo"][1]
    assert "`app: api` where those pods carry `app.kubernetes.io/name: api`" in found["renamed"].message
    assert "no pod template in namespace 'shop' writes label key `k8s-app`" in cases["foreign-key"][1]
    assert "uses label key `k8s-app`, which no pod template in namespace 'shop' writes" in found["foreign-key"].message
    assert "the pods of shop/Deployment/api carry the selector's other labels" in found["extra-key"].message
    assert "none is one edit away" in found["other-value"].message


def test_the_variants_are_data():
    policy = find_policy("KP501")
    assert policy.severity == Severity.NOTE
    assert policy.severity_for("near-miss") == policy.severity_for("unwritten") == Severity.WARNING


def test_templates_of_other_namespaces_do_not_write_a_key_for_this_one(tmp_path):
    other = NAMESPACE.replace("namespace: shop", "namespace: billing").replace("app.kubernetes.io/name", "k8s-app")
    found = findings(tmp_path, NAMESPACE + "---\n" + other + service("foreign-key", "{k8s-app: orders}"), "KP501")
    assert found["foreign-key"].severity == Severity.WARNING


def test_an_operator_resource_keeps_the_rule_silent(tmp_path):
    operator = textwrap.dedent("""\
    ---
    apiVersion: acid.zalan.do/v1
    kind: postgresql
    metadata: {name: orders-db, namespace: shop}
    spec: {numberOfInstances: 2}
    """)
    assert not findings(tmp_path, NAMESPACE + operator + service("db", "{k8s-app: orders-db}"), "KP501")


def test_a_hook_is_no_near_miss(tmp_path):
    hook = textwrap.dedent("""\
    ---
    apiVersion: batch/v1
    kind: Job
    metadata: {name: migrate, namespace: shop, annotations: {helm.sh/hook: pre-install}}
    spec:
      template:
        metadata: {labels: {app: migrate}}
        spec:
          restartPolicy: Never
          containers: [{name: migrate, image: migrate}]
    """)
    found = findings(tmp_path, NAMESPACE + hook + service("migrate", "{app: migrat}"), "KP501")
    assert found["migrate"].severity == Severity.NOTE  # `app` is written (by the hook): no evidence


# --- KP503: probes and listen flags ---------------------------------------------------------------------

def deployment(container: str, host_network: bool = False) -> str:
    """`container`: the pod spec's container lists, unindented."""
    pod_spec = textwrap.indent(textwrap.dedent(container).rstrip("\n") + "\n", " " * 6)
    return textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: app, namespace: x}
    spec:
      selector: {matchLabels: {app: app}}
      template:
        metadata: {labels: {app: app}}
        spec:
          hostNetwork: %s
    """) % ("true" if host_network else "false") + pod_spec + textwrap.dedent("""\
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: app, namespace: x}
    spec:
      selector: {app: app}
      ports: [{name: a, port: 80, targetPort: 9001}]
    """)


@pytest.mark.parametrize("probe", [
    "readinessProbe: {httpGet: {path: /, port: 9001}}",
    "livenessProbe: {tcpSocket: {port: 9001}}",
    "startupProbe: {grpc: {port: 9001}}",
])
def test_a_probe_on_the_port_silences_it(tmp_path, probe):
    text = deployment(f"""\
        containers:
          - name: c
            image: i
            {probe}
        """)
    assert not findings(tmp_path, text, "KP503")


def test_a_probe_on_another_port_does_not(tmp_path):
    text = deployment("""\
        containers:
          - {name: c, image: i, readinessProbe: {httpGet: {path: /, port: 9002}}}
        """)
    assert "no containerPort or probe of theirs names it" in findings(tmp_path, text, "KP503")["app"].message


@pytest.mark.parametrize(("args", "flag"), [
    ("[--port=9001]", "--port"),
    ("[--port, '9001']", "--port"),
    ("['--web.listen-address=0.0.0.0:9001']", "--web.listen-address"),
    ("['--metrics-bind-address=:9001']", "--metrics-bind-address"),
])
@pytest.mark.parametrize("host_network", [False, True])
def test_a_listen_flag_is_named_with_its_confidence(tmp_path, args, flag, host_network):
    text = deployment(f"""\
        containers:
          - {{name: c, image: i, args: {args}}}
        """, host_network)
    finding = findings(tmp_path, text, "KP503")["app"]
    assert finding.severity == Severity.NOTE
    assert finding.headline == "targetPort 9001 is declared by no selected container, though a listen flag names it"
    assert f"started with `{flag}` set to port 9001" in finding.message
    assert "judged from the flag's name" in finding.message
    assert finding.related  # the flag's place


@pytest.mark.parametrize("container", [
    "containers: [{name: c, image: i, args: [--redis-port=9001]}]",  # a port it connects to
    "initContainers: [{name: init, image: i, args: [--port=9001]}]\ncontainers: [{name: c, image: i}]",
])
def test_flags_that_name_no_listener_of_a_running_container(tmp_path, container):
    finding = findings(tmp_path, deployment(container, host_network=True), "KP503")["app"]
    assert "though a listen flag" not in finding.message
