"""The configuration's quick gate (schema_gate) never says "valid" where jsonschema finds
an error, says it for the configurations users write, and spares `lint` jsonschema's import."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubelint_ports.config import SCHEMA_PATH
from kubelint_ports.schema_gate import INVALID, UNSURE, VALID, Gate, certainly_valid, json_equal

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def jsonschema_valid(instance) -> bool:
    return not any(True for _ in VALIDATOR.iter_errors(instance))


def repository_configs() -> dict[str, dict]:
    """The configuration files of the repository, and every YAML block of the docs that is a
    configuration (each top-level key one the schema knows): what users copy."""
    found = {str(path.relative_to(ROOT)): yaml.safe_load(path.read_text(encoding="utf-8"))
             for path in sorted(set(ROOT.rglob(".kubelint-ports.yaml"))) if ".git" not in path.parts}
    for page in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]):
        for number, block in enumerate(re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), re.S)):
            try:
                data = yaml.safe_load(textwrap.dedent(block))
            except yaml.YAMLError:
                continue
            if isinstance(data, dict) and data and set(data) <= SCHEMA["properties"].keys():
                found[f"{page.relative_to(ROOT)}#{number}"] = data
    return found


CONFIGS = repository_configs()


def test_the_repository_has_configurations_to_check():
    assert len(CONFIGS) >= 5, sorted(CONFIGS)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_gate_agrees_with_jsonschema_on_every_configuration_in_the_repository(name):
    data = CONFIGS[name]
    if jsonschema_valid(data):
        assert certainly_valid(SCHEMA, data), "a valid configuration of ours takes the slow path"
    else:
        assert not certainly_valid(SCHEMA, data)


# Values near the configuration's own: its keys, the kinds of values they take, and near misses.
KEYS = sorted(SCHEMA["properties"]) + ["pathz", "rules", "facts", "units", "fix", "paths", "charts"]
LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 70000), st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["", ".", "k8s/", "30000-32767", "30000-", "ipvs", "iptables", "nftables", "error", "warning",
                     "note", "off", "on", "KP101", "host-port", "apps/DaemonSet", "a.b", "10.0.0.0/8", "move", "remove"]),
)
VALUES = st.recursive(
    LEAVES,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.sampled_from(KEYS + ["path", "values", "nodes", "min", "max"]),
                                               children, max_size=4)),
    max_leaves=12,
)


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=5))
def test_the_gate_never_passes_what_jsonschema_refuses(data):
    if certainly_valid(SCHEMA, data):
        assert jsonschema_valid(data), data


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(CONFIGS)), st.data())
def test_mutated_repository_configurations_never_pass_wrongly(name, data):
    config = copy.deepcopy(CONFIGS[name])
    key = data.draw(st.sampled_from(sorted(config)))
    config[key] = data.draw(VALUES)
    if certainly_valid(SCHEMA, config):
        assert jsonschema_valid(config), config


def test_json_equality_keeps_booleans_apart_from_numbers():
    assert not json_equal(True, 1) and not json_equal(0, False)
    assert json_equal(1, 1.0) and json_equal([1, {"a": True}], [1.0, {"a": True}])
    assert not json_equal({"a": 1}, {"a": True})


@pytest.mark.parametrize("schema, instance, verdict", [
    ({"type": "integer"}, 3, VALID),
    ({"type": "integer"}, 3.0, VALID),  # as jsonschema: an integral float is an integer
    ({"type": "integer"}, True, INVALID),
    ({"enum": [1, 2]}, True, INVALID),
    ({"const": False}, 0, INVALID),
    ({"type": "string", "pattern": "^[0-9]+-[0-9]+$"}, "1-2", VALID),
    ({"type": "string", "pattern": "^[0-9]+-[0-9]+$"}, "1-", INVALID),
    ({"uniqueItems": True}, [1, 1], UNSURE),  # a keyword it does not know: jsonschema decides
    ({"$ref": "https://example.com/schema"}, 1, UNSURE),  # never fetched, never guessed
    ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, 1, UNSURE),  # a loop ends, unsure
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 5, INVALID),  # both: not exactly one
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"minimum": 3}}, "a", INVALID),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"minimum": 3}}, 4, VALID),
    ({"properties": {"a": {"type": "integer"}}, "additionalProperties": False}, {"a": 1, "b": 2}, INVALID),
    ({"patternProperties": {"^x": {}}, "additionalProperties": False}, {"x": 1}, UNSURE),
])
def test_each_keyword_answers_as_jsonschema_or_is_unsure(schema, instance, verdict):
    assert Gate(schema).check(schema, instance, 0) == verdict
    if verdict != UNSURE:
        assert jsonschema.Draft202012Validator(schema).is_valid(instance) == (verdict == VALID)


def test_lint_with_a_valid_configuration_does_not_import_jsonschema(tmp_path):
    (tmp_path / ".kubelint-ports.yaml").write_text("paths: [.]\nrules:\n  host-network: on\nfail-on: warning\n")
    (tmp_path / "svc.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n"
                                       "spec:\n  selector: {app: web}\n  ports: [{port: 80}]\n")
    script = ("import sys\nfrom kubelint_ports.cli import main\nsys.argv = ['kubelint-ports', 'lint', 'svc.yaml']\n"
              "try:\n    main()\nexcept SystemExit:\n    pass\n"
              "print('jsonschema' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr


def test_an_invalid_configuration_still_gets_jsonschemas_error_at_its_line(tmp_path):
    (tmp_path / ".kubelint-ports.yaml").write_text("paths: [.]\nproxy-mode: ipvz\n")
    (tmp_path / "svc.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n")
    done = subprocess.run([sys.executable, "-m", "kubelint_ports", "lint", "svc.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert ".kubelint-ports.yaml:2" in done.stderr and "proxy-mode" in done.stderr and "ipvz" in done.stderr
