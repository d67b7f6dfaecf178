"""Policies as data with parameters of their own: the `port-schema` check fills a policy's
parameters into its JSON Schema and its message (`$param`, `each`, `$item`, `{placeholders}`).
The organisation policies KP552-KP555 are written so; the configuration sets their parameters as
it sets a built-in check's, and a wrong one is refused at its line, never at run time."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest
import yaml

from kubelint_ports.checks import CHECKS
from kubelint_ports.checks.manifest.port_schema import TARGETS, TemplateError, filled, params_problem
from kubelint_ports.config import ConfigError, apply_rules, load_config
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.policies import PolicyError, builtin_policies, find_policy, line_of_key, policies_with

DATA_POLICIES = ("KP552", "KP553", "KP554", "KP555")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def manifest(kind: str, name: str, spec: str) -> str:
    """One object of namespace x, its spec in YAML's flow style (on the object's 4th line)."""
    return f"apiVersion: v1\nkind: {kind}\nmetadata: {{name: {name}, namespace: x}}\nspec: {spec}\n"


def findings(tmp_path: Path, text: str, policy) -> list:
    report = lint_paths([str(write(tmp_path / "in.yaml", text))], LintOptions(), policies=[policy])
    assert not report.diagnostics, report.diagnostics
    return [f for f in report.findings if f.rule_id == policy.id]


def with_params(reference: str, **params):
    policy = find_policy(reference)
    return dataclasses.replace(policy, params={**policy.params, **params})


# --- the organisation policies are data --------------------------------------------------------------

@pytest.mark.parametrize("rule_id", DATA_POLICIES)
def test_organisation_policies_are_port_schema_data_with_documented_parameters(rule_id):
    policy = find_policy(rule_id)
    assert policy.check == "port-schema"
    assert set(policy.docs["parameters"]) == set(policy.params["parameters"]), "document every parameter"
    assert params_problem(policy.params) is None


def test_the_allowed_host_port_ranges_are_named_in_the_message(tmp_path):
    policy = with_params("KP552", allowed=[{"min": 8000, "max": 8099}, {"min": 9000, "max": 9099}])
    spec = "{containers: [{name: c, image: i, ports: [{containerPort: 80, hostPort: 8080}, {containerPort: 81, " \
           "hostPort: 8443}]}]}"
    [finding] = findings(tmp_path, manifest("Pod", "edge", spec), policy)
    assert finding.port == 8443
    assert "the host ports this cluster permits: 8000-8099, 9000-9099" in finding.message


def test_a_forbidden_service_type_is_one_finding_per_service_whatever_its_ports(tmp_path):
    two_ports = manifest("Service", "two", "{type: NodePort, ports: [{name: a, port: 80}, {name: b, port: 81}]}")
    found = findings(tmp_path, two_ports + "---\n" + manifest("Service", "none", "{type: LoadBalancer}"),
                     with_params("KP553", types=["NodePort", "LoadBalancer"]))
    assert [(f.subject.name, f.location.line, f.port) for f in found] == [("two", 4, None), ("none", 9, None)]
    assert "the cluster's policy forbids types NodePort, LoadBalancer" in found[0].message


def test_a_forbidden_port_finding_gives_the_reason_of_the_entry_it_matched(tmp_path):
    policy = with_params("KP555", ports=[{"port": 22, "reason": "SSH"},
                                         {"port": 2375, "protocol": "TCP", "reason": "the Docker API unencrypted"}])
    spec = "{containers: [{name: c, image: i, ports: [{containerPort: 2375}, {containerPort: 22, protocol: UDP}, " \
           "{containerPort: 22, hostPort: 2222}]}]}"
    found = findings(tmp_path, manifest("Pod", "box", spec), policy)
    assert [(f.port, f.field_path.rsplit(".", 1)[1]) for f in found] == [(2375, "containerPort"), (22, "containerPort")]
    assert "is not allowed here: the Docker API unencrypted. Use another port" in found[0].message
    assert "containerPort 22/TCP (container 'c') is not allowed here: SSH." in found[1].message


def test_privileged_ports_of_every_container_kind_below_the_threshold(tmp_path):
    spec = ("{initContainers: [{name: acme, image: i, ports: [{containerPort: 80}]}], "
            "containers: [{name: web, image: i, ports: [{containerPort: 443}, {containerPort: 999}, "
            "{containerPort: 0}]}]}")
    found = findings(tmp_path, manifest("Pod", "web", spec), with_params("KP554", below=500))
    assert [f.port for f in found] == [80, 443]
    assert "binding below 500 needs root" in found[0].message


# --- the configuration sets parameters, checked where it sets them -----------------------------------

@pytest.mark.parametrize("setting, line, words", [
    ("privileged-port: {below: low}", 2, "rules.privileged-port.below: 'low' is not of type 'integer'"),
    ("privileged-port: {bellow: 1000}", 2, "rules.privileged-port.bellow: params.bellow is not a parameter of this "
                                           "policy (declared: below)"),
    ("host-port-not-allowed:\n    allowed: [{min: 8000}]", 3, "rules.host-port-not-allowed.allowed.0: 'max' is a "
                                                               "required property"),
    ("forbidden-service-type: {types: [Nodeport]}", 2,
     "rules.forbidden-service-type.types.0: 'Nodeport' is not one of"),
])
def test_a_wrong_parameter_in_the_configuration_is_refused_at_its_line(tmp_path, setting, line, words):
    config = load_config(str(write(tmp_path / "c.yaml", f"rules:\n  {setting}\n")))
    with pytest.raises(ConfigError) as raised:
        apply_rules(list(builtin_policies()), config)
    assert raised.value.line == line and raised.value.message.startswith(words), raised.value


def test_parameters_set_in_the_configuration_reach_the_check(tmp_path):
    config = load_config(str(write(tmp_path / "c.yaml", "rules:\n  privileged-port: {below: 8500}\n")))
    [policy] = [p for p in apply_rules(list(builtin_policies()), config) if p.id == "KP554"]
    spec = "{containers: [{name: web, image: i, ports: [{containerPort: 8443}, {containerPort: 9000}]}]}"
    [finding] = findings(tmp_path, manifest("Pod", "web", spec), policy)
    assert finding.port == 8443 and "Listen on 8500 or above" in finding.message


# --- a policy of your own with parameters ------------------------------------------------------------

def user_policy(directory: Path, params: dict) -> Path:
    data = {"id": "KP970", "name": "team-ports", "severity": "error", "summary": "Ports a team may use, as data",
            "check": "port-schema", "params": params,
            "docs": {"what": "Flags ports outside the team's list.", "why": "The platform hands ports out.",
                     "example": "apiVersion: v1", "fix": "apiVersion: v1", "references": ["https://example.com"]}}
    path = directory / "KP970-team-ports.yaml"
    directory.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


TEAM_PORTS = {"target": "service-port", "parameters": {"ports": {"type": "array", "items": {"type": "integer"}}},
              "ports": [80, 443], "schema": {"properties": {"port": {"enum": {"$param": "ports"}}}},
              "message": "port {port} of Service {name} is not one the team may expose: use {ports}"}


def test_a_user_policy_with_a_parameter_runs_with_its_message(tmp_path):
    [policy] = [p for p in policies_with([user_policy(tmp_path / "p", TEAM_PORTS).parent]) if p.id == "KP970"]
    spec = "{ports: [{name: http, port: 80}, {name: alt, port: 8080}]}"
    [finding] = findings(tmp_path, manifest("Service", "web", spec), policy)
    assert finding.message == "port 8080 of Service web is not one the team may expose: use 80, 443"
    assert finding.location.line == 4 and finding.port == 8080


@pytest.mark.parametrize("change, key, words", [
    ({"schema": {"properties": {"port": {"enum": {"$param": "port"}}}}}, "$param",
     "params.schema.properties.port.enum.$param names 'port', which is no parameter of this policy (declared: ports)"),
    ({"schema": {"properties": {"port": {"const": {"$item": "port"}}}}}, "$item", "stands outside the `each`"),
    ({"schema": {"anyOf": [{"$param": "ports", "each": {"const": {"$item": "number"}}}]}}, "$item",
     "names a key, but the parameter's items are int, not mappings"),
    ({"message": "port {number} is not allowed"}, "message", "params.message names {number}, which is neither"),
    ({"ports": "80"}, "ports", "'80' is not of type 'array'"),
    ({"extra": 1}, "extra", "params.extra is not a parameter of this policy"),
    ({"parameters": {"ports": {"type": "array"}, "band": {"type": "integer"}}}, "band",
     "params.parameters.band has no value"),
])
def test_a_broken_parameterised_policy_is_refused_at_its_line(tmp_path, change, key, words):
    path = user_policy(tmp_path / "p", {**TEAM_PORTS, **change})
    with pytest.raises(PolicyError) as raised:
        policies_with([path.parent])
    assert words in raised.value.message
    text = path.read_text(encoding="utf-8").splitlines()
    assert key in text[raised.value.line - 1] or raised.value.line == line_of_key(path, ["params", key])


# --- filling, in detail ------------------------------------------------------------------------------

def test_each_subschema_is_spliced_where_the_node_stands_and_remembers_its_item():
    params = {"allowed": [{"min": 1, "max": 2}, {"min": 5, "max": 6}], "types": ["A"]}
    schema = {"anyOf": [{"type": "null"}, {"$param": "allowed", "each": {"minimum": {"$item": "min"}}}],
              "allOf": {"$param": "allowed", "each": {"maximum": {"$item": "max"}}},
              "enum": [None, {"$param": "types"}], "const": {"$param": "types"}}
    result = filled(schema, params)
    assert result.schema == {"anyOf": [{"type": "null"}, {"minimum": 1}, {"minimum": 5}],
                             "allOf": [{"maximum": 2}, {"maximum": 6}], "enum": [None, "A"], "const": ["A"]}
    assert result.items == {("anyOf", 1): ("allowed", params["allowed"][0]),
                            ("anyOf", 2): ("allowed", params["allowed"][1]),
                            ("allOf", 0): ("allowed", params["allowed"][0]),
                            ("allOf", 1): ("allowed", params["allowed"][1])}


def test_an_each_inside_an_each_is_refused():
    with pytest.raises(TemplateError, match="inside another"):
        filled({"allOf": [{"$param": "a", "each": {"allOf": [{"$param": "a", "each": {}}]}}]}, {"a": [{}]})


def test_every_target_names_its_context_keys():
    """The keys a message may name are what the contexts hold (checked on one object of each)."""
    from kubelint_ports.checks.manifest import port_schema
    from kubelint_ports.loading import LoadResult, load_bytes
    from kubelint_ports.model import build_cluster

    loaded = LoadResult()
    text = manifest("Pod", "p", "{containers: [{name: c, image: i, ports: [{containerPort: 80}]}]}") + "---\n" + \
        manifest("Service", "s", "{ports: [{port: 80}]}")
    load_bytes(text.encode(), "in.yaml", loaded)
    cluster, _ = build_cluster(loaded.documents)
    assert CHECKS["port-schema"].params_schema["properties"]["target"]["enum"] == list(TARGETS)
    for target, keys in TARGETS.items():
        [context] = list(port_schema.CONTEXTS[target](cluster))
        assert tuple(context.values) == keys, target
