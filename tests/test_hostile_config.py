"""A repository's own configuration and policies as hostile input: paths leading out of the
repository, files quoted into reports, patterns that backtrack for ever, schemas that refer to
themselves, and inputs named twice (issue 21)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.config import ConfigError
from kubelint_ports.engine import lint_paths
from kubelint_ports.policies import PolicyError, policies_with
from kubelint_ports.settings import CommandLine, resolve

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
POLICY = yaml.safe_load((EXAMPLES / "policies" / "KP901-ingress-host-ports.yaml").read_text())
HANG_GUARD = 120  # seconds: a guard against a hang, never a measurement

SECRET = "password: hunter2-" + "s3cr3t-" * 20  # one YAML scalar: the whole file is a string
PORT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME, namespace: shop}
spec:
  template:
    spec:
      containers:
        - name: api
          ports: [{containerPort: 8080}]
"""


@pytest.fixture
def repository(tmp_path, monkeypatch):
    """A git work tree (a `.git` directory is all it takes) with one manifest, a file outside
    it, and the working directory inside it."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "k8s").mkdir()
    (repo / "k8s" / "app.yaml").write_text(PORT.replace("NAME", "api"))
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.yaml").write_text(SECRET + "\n")
    monkeypatch.chdir(repo)
    return repo


def write_policy(directory: Path, schema: dict, name: str = "KP901-ingress-host-ports.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    data = json.loads(json.dumps(POLICY))
    data["params"]["schema"] = schema
    path = directory / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def line_of(path: Path, text: str) -> int:
    return next(number for number, line in enumerate(path.read_text().splitlines(), 1) if text in line)


# --- paths a config names stay inside the repository ----------------------------------------------

@pytest.mark.parametrize("key", ["paths", "nodes", "cluster", "policies", "baseline"])
@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_config_paths_outside_the_repository_are_refused_at_their_key(repository, key, how):
    outside = repository.parent / "outside" / ("" if key == "policies" else "secret.yaml")
    if how == "dotdot":
        named = os.path.relpath(outside, repository)
    elif how == "absolute":
        named = str(outside)
    else:  # a link committed in the repository, pointing out of it
        (repository / "link").symlink_to(outside)
        named = "link"
    value = json.dumps(named) if key == "baseline" else json.dumps([named])
    (repository / ".kubelint-ports.yaml").write_text(f"fail-on: error\n{key}: {value}\n")
    with pytest.raises(ConfigError) as raised:
        resolve(CommandLine(paths=("k8s",) if key != "paths" else ()))
    assert raised.value.line == 2 and raised.value.path == ".kubelint-ports.yaml"
    assert raised.value.message.startswith(key) and "outside the repository" in raised.value.message


def test_chart_paths_outside_the_repository_are_refused(repository):
    chart = repository.parent / "outside" / "chart"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    (repository / ".kubelint-ports.yaml").write_text(f"charts:\n  - path: {chart}\n")
    with pytest.raises(ConfigError, match=r"charts\.0\.path: .* outside the repository") as raised:
        resolve(CommandLine(paths=("k8s",)))
    assert raised.value.line == 2


def test_inside_the_git_work_tree_and_on_the_command_line_is_allowed(repository):
    """The config may sit in a subdirectory and name the work tree's other files; the user may
    name any file on the command line."""
    (repository / "cluster").mkdir()
    (repository / "cluster" / "nodes.yaml").write_text("apiVersion: v1\nkind: List\nitems: []\n")
    (repository / "deploy").mkdir()
    config = repository / "deploy" / ".kubelint-ports.yaml"
    config.write_text("nodes: [../cluster/nodes.yaml]\npaths: [../k8s]\n")
    settings = resolve(CommandLine(config=str(config)))
    assert [Path(path).resolve() for path in settings.options.node_files] == [repository / "cluster" / "nodes.yaml"]
    outside = str(repository.parent / "outside" / "secret.yaml")
    settings = resolve(CommandLine(config=str(config), nodes=(outside,), cluster=(outside,)))
    assert settings.options.node_files == (outside,) and settings.options.cluster_files == (outside,)


# --- input errors quote a short, escaped excerpt at most ---------------------------------------------

def test_a_file_that_is_one_scalar_is_not_quoted_whole(tmp_path):
    path = tmp_path / "secret.yaml"
    path.write_text(json.dumps("\x1b]0;owned\x07" + SECRET) + "\n")
    report = lint_paths([str(path)])
    [diagnostic] = report.diagnostics
    assert "not a Kubernetes object" in diagnostic.message
    assert "s3cr3t-" * 4 not in diagnostic.message  # 40 characters at most of it
    assert "\x1b" not in diagnostic.message and "\x07" not in diagnostic.message
    assert "\\x1b" in diagnostic.message


def test_a_long_tag_in_a_policy_or_config_is_not_quoted_whole(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tag = "!" + "t" * 500
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "KP901-x.yaml").write_text(f"id: {tag} KP901\n")
    with pytest.raises(PolicyError) as raised:
        policies_with([str(tmp_path / "policies")])
    assert "t" * 60 not in str(raised.value)
    (tmp_path / ".kubelint-ports.yaml").write_text(f"fail-on: {'x' * 500}\nnodes: {tag} a\n")
    with pytest.raises(ConfigError) as raised:
        resolve(CommandLine(paths=(".",)))
    assert "x" * 60 not in str(raised.value) and "t" * 60 not in str(raised.value)


# --- a custom pattern cannot backtrack for ever ---------------------------------------------------

CATASTROPHIC = "^([a-z0-9]+-?)+$"  # 85 s on a 28-letter name and `!` in Python's re
NO_RE2 = "raise ImportError('google-re2 hidden by the test')\n"


def run_isolated(tmp_path: Path, *args: str, re2: bool) -> subprocess.CompletedProcess:
    """The command line in its own process, re2 hidden when asked: a backtracking pattern must not
    hang the test run even when the fix is missing."""
    environment = dict(os.environ)
    first = [str(ROOT)]  # the code under test, whatever the environment installed
    if not re2:
        (tmp_path / "shim").mkdir(exist_ok=True)
        (tmp_path / "shim" / "re2.py").write_text(NO_RE2)
        first.insert(0, str(tmp_path / "shim"))
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, (*first, environment.get("PYTHONPATH"))))
    command = [sys.executable, "-c", "from kubelint_ports.cli import main; main()", *args]
    try:
        return subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True,
                              timeout=HANG_GUARD)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kubelint-ports {' '.join(args)} hung (over {HANG_GUARD} s)")


@pytest.fixture
def redos(tmp_path):
    write_policy(tmp_path / "policies", {"properties": {"name": {"pattern": CATASTROPHIC}}})
    (tmp_path / "app.yaml").write_text(PORT.replace("NAME", '"' + "a" * 36 + '!"'))  # hours in Python's re
    return tmp_path


def test_backtracking_pattern_is_refused_at_load_without_re2(redos):
    result = run_isolated(redos, "lint", "app.yaml", "--policies", "policies", re2=False)
    policy = redos / "policies" / "KP901-ingress-host-ports.yaml"
    assert result.returncode == 2, result.stderr
    assert f"policies/KP901-ingress-host-ports.yaml:{line_of(policy, 'pattern:')}:" in result.stderr
    assert "params.schema.properties.name.pattern" in result.stderr and "exponential" in result.stderr


def test_backtracking_pattern_runs_in_linear_time_with_re2(redos):
    pytest.importorskip("re2")
    result = run_isolated(redos, "lint", "app.yaml", "--policies", "policies", "--format", "json", re2=True)
    assert result.returncode == 1, result.stderr
    [finding] = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "KP901"]
    assert "does not match" in finding["message"]


@pytest.mark.parametrize("schema, keys", [
    ({"properties": {"labels": {"patternProperties": {"^(a+)+$": {"type": "string"}}}}}, "patternProperties"),
    ({"properties": {"labels": {"propertyNames": {"pattern": "^(\\w+\\s?)*$"}}}}, "propertyNames.pattern"),
])
def test_pattern_properties_and_property_names_are_checked_too(tmp_path, monkeypatch, schema, keys):
    from kubelint_ports import policy_schemas as user_schemas

    monkeypatch.setattr(user_schemas, "re2_compiled", lambda pattern: None)  # as without google-re2
    user_schemas.matcher.cache_clear()
    try:
        write_policy(tmp_path / "policies", schema)
        with pytest.raises(PolicyError, match=f"params.schema.properties.labels.{keys}"):
            policies_with([str(tmp_path / "policies")])
    finally:
        user_schemas.matcher.cache_clear()


def test_every_pattern_keyword_goes_through_the_bounded_matcher(monkeypatch):
    """jsonschema's own `pattern`, `patternProperties` and `additionalProperties` call `re.search`
    unbounded: the port-schema validator must call the matcher for each."""
    from kubelint_ports.checks.manifest import port_schema

    seen = []
    real = port_schema.matcher

    def spy(pattern):
        seen.append(pattern)
        return real(pattern)

    monkeypatch.setattr(port_schema, "matcher", spy)
    schema = {"properties": {"name": {"pattern": "^n"},
                             "labels": {"patternProperties": {"^p": {}}, "additionalProperties": False}}}
    validator = port_schema.validator_for.__wrapped__(json.dumps(schema))
    errors = list(validator.iter_errors({"name": "x", "labels": {"q": "1", "p": "2"}}))
    assert {"^n", "^p"} <= set(seen)
    assert len(errors) == 2  # the name, and the label `q` no pattern takes


def test_a_pattern_past_its_deadline_fails_the_port_once(monkeypatch):
    """What the load-time check misses runs under a deadline in Python's re: the port fails, and
    the pattern is not tried again."""
    import threading

    from kubelint_ports.checks.manifest import port_schema
    from kubelint_ports import policy_schemas as user_schemas

    # The deadline is a timer signal, which only the main thread receives; pytest-xdist before 3.6
    # ran a worker's tests in another thread now and then (execnet's "thread" model).
    assert threading.current_thread() is threading.main_thread(), "tests must run in the main thread"
    monkeypatch.setattr(user_schemas, "re2_compiled", lambda pattern: None)
    monkeypatch.setattr(user_schemas, "PATTERN_SECONDS", 0.2)
    user_schemas.matcher.cache_clear()
    try:
        polynomial = ".*.*.*=x"  # cubic, no repeated group: some 5 s on 600 characters, unbounded
        assert port_schema.schema_problem_at({"properties": {"name": {"pattern": polynomial}}}) is None
        validator = port_schema.validator_for.__wrapped__(json.dumps({"properties": {"name": {"pattern": polynomial}}}))
        for _ in range(2):
            [error] = list(validator.iter_errors({"name": "a" * 600}))
            assert "took over 0.2 s" in error.message
    finally:
        user_schemas.matcher.cache_clear()


# --- schemas that refer to themselves ---------------------------------------------------------------

LOOPS = [
    ({"$ref": "#"}, "$ref"),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "$ref: '#/$defs/a'"),
    ({"$dynamicAnchor": "port", "$dynamicRef": "#port"}, "$dynamicRef"),
    ({"properties": {"labels": {"additionalProperties": {"$ref": "#"}}}}, "$ref"),
    # not a loop, but the same class (found by the fuzzer): a $ref that lands on a keyword's value
    ({"$ref": "#/$defs/port/minimum", "$defs": {"port": {"type": "integer", "minimum": 1}}}, "$ref"),
]


@pytest.mark.parametrize("schema, marker", LOOPS)
def test_self_referring_policy_schema_is_refused_at_load(tmp_path, schema, marker):
    path = write_policy(tmp_path / "policies", schema)
    with pytest.raises(PolicyError) as raised:
        policies_with([str(tmp_path / "policies")])
    assert raised.value.path == str(path)
    assert raised.value.line == line_of(path, marker)
    assert "params.schema" in raised.value.message


@pytest.mark.parametrize("schema, marker", LOOPS)
def test_self_referring_schema_in_the_config_rules_is_refused_at_load(repository, schema, marker):
    write_policy(repository / "policies", POLICY["params"]["schema"])
    settings = yaml.safe_dump({"policies": ["policies"], "rules": {"KP901": {"schema": schema}}}, sort_keys=False)
    config = repository / ".kubelint-ports.yaml"
    config.write_text(settings)
    with pytest.raises(ConfigError) as raised:
        resolve(CommandLine(paths=("k8s",)))
    assert raised.value.line == line_of(config, marker)
    assert raised.value.message.startswith("rules.KP901.schema")


def test_referring_to_definitions_without_a_loop_still_works(tmp_path):
    schema = {"$defs": {"band": {"minimum": 9000, "maximum": 9099}},
              "properties": {"hostPort": {"$ref": "#/$defs/band"}, "containerPort": {"$ref": "#/$defs/band"}}}
    write_policy(tmp_path / "policies", schema)
    [policy] = [p for p in policies_with([str(tmp_path / "policies")]) if p.id == "KP901"]
    (tmp_path / "app.yaml").write_text(PORT.replace("NAME", "api"))
    report = lint_paths([str(tmp_path / "app.yaml")], policies=[policy])
    assert [f.rule_id for f in report.findings] == ["KP901"] and not report.diagnostics


# --- a policy's own parameters: their schemas and what they fill in are bounded too --------------------

def write_parameterised_policy(directory: Path, declared: dict, value) -> Path:
    path = write_policy(directory, {"properties": {"name": {"pattern": {"$param": "names"}}}})
    data = yaml.safe_load(path.read_text())
    data["params"] |= {"parameters": {"names": declared}, "names": value}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_parameters_own_schema_that_refers_to_itself_is_refused_at_load(tmp_path):
    path = write_parameterised_policy(tmp_path / "policies", {"$ref": "#"}, "^api$")
    with pytest.raises(PolicyError) as raised:
        policies_with([str(tmp_path / "policies")])
    assert raised.value.message.startswith("params.parameters.names.$ref refers back to itself")
    assert raised.value.line == line_of(path, "$ref")


@pytest.mark.parametrize("where", ["policy", "config"])
def test_a_backtracking_pattern_a_parameter_fills_in_is_refused_at_load(repository, monkeypatch, where):
    """A parameter's value lands in the schema before the schema is judged: a pattern that Python's
    re could take hours on is refused whether the policy or the configuration sets it."""
    from kubelint_ports import policy_schemas as user_schemas

    monkeypatch.setattr(user_schemas, "re2_compiled", lambda pattern: None)  # as without google-re2
    user_schemas.matcher.cache_clear()
    try:
        write_parameterised_policy(repository / "policies", {"type": "string"},
                                   CATASTROPHIC if where == "policy" else "^api$")
        rules = {"rules": {"KP901": {"names": CATASTROPHIC}}} if where == "config" else {}
        (repository / ".kubelint-ports.yaml").write_text(yaml.safe_dump({"policies": ["policies"], **rules}))
        with pytest.raises((PolicyError, ConfigError)) as raised:
            resolve(CommandLine(paths=("k8s",)))
        assert "params.schema.properties.name.pattern" in raised.value.message
        assert "exponential" in raised.value.message
    finally:
        user_schemas.matcher.cache_clear()


# --- a file named twice is read once ----------------------------------------------------------------

def test_a_directory_and_its_parent_are_read_once(monkeypatch):
    monkeypatch.chdir(ROOT)
    once = CliRunner().invoke(app, ["lint", "examples", "--format", "json"])
    twice = CliRunner().invoke(app, ["lint", "examples/cluster-config", "examples", "./examples/clean.yaml",
                                     "--format", "json"])
    first, second = json.loads(once.stdout), json.loads(twice.stdout)
    assert second["summary"] == first["summary"]  # 42 objects from 21 files when written, not 49 from 27
    assert [f["rule"] for f in second["findings"]].count("KP401") == 1
    assert sorted(map(json.dumps, second["findings"])) == sorted(map(json.dumps, first["findings"]))


def test_config_paths_and_links_named_twice_are_read_once(repository):
    (repository / "k8s" / "link.yaml").symlink_to("app.yaml")
    (repository / ".kubelint-ports.yaml").write_text("paths: [k8s, k8s/app.yaml, ./k8s, k8s/link.yaml]\n")
    settings = resolve(CommandLine())
    report = lint_paths(settings.paths, settings.options)
    assert (report.files, report.objects) == (1, 1)
