"""SARIF output: schema-valid, levels kept, stable fingerprints, byte-stable, GitHub's limits."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
import sarif_om as om

from external_tools import sarif_multitool, vendored
from kubelint_ports import __version__
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.findings import Finding, Report
from kubelint_ports.vocabulary import Location, ObjectRef, Severity
from kubelint_ports.formatters import FormatOptions, get_formatter
from kubelint_ports.formatters.sarif import FINGERPRINT_KEY, MAX_RESULTS, to_sarif_dict
from dataclasses import replace as replaced
from kubelint_ports.policies import builtin_policies, enabled_by_default

ROOT = Path(__file__).resolve().parents[1]

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx-hostport, namespace: web}
spec:
  template:
    spec:
      containers:
        - name: nginx
          ports:
            - containerPort: 80
              hostPort: 31123
"""
SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: nginx-nodeport, namespace: web}
spec:
  type: NodePort
  ports:
    - port: 80
      nodePort: 31123
"""
MALFORMED = "apiVersion: v1\nkind: [\n"


@pytest.fixture
def manifests(tmp_path, monkeypatch):
    """A hostPort/NodePort collision across two files (so a related location) and a broken file."""
    monkeypatch.chdir(tmp_path)  # findings' paths are relative to the working directory
    (tmp_path / ".git").mkdir()  # the repository's top level: SARIF paths are relative to it
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy/app.yaml").write_text(DEPLOYMENT)
    (tmp_path / "service.yaml").write_text(SERVICE)
    (tmp_path / "broken.yaml").write_text(MALFORMED)
    return tmp_path


def render(report: Report, category: str = "", full_rules: bool = False) -> str:
    out = io.StringIO()
    options = FormatOptions(sarif_category=category)
    get_formatter("sarif")(report, out, replaced(options, sarif_full_rules=True) if full_rules else options)
    return out.getvalue()


def sarif_for(paths, category: str = "", full_rules: bool = False) -> dict:
    return json.loads(render(lint_paths(paths, LintOptions()), category, full_rules))


def validate(log: dict) -> None:
    import jsonschema

    schema = vendored("sarif-schema-2.1.0.json")
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in jsonschema.Draft4Validator(
        json.loads(schema.read_text(encoding="utf-8"))).iter_errors(log)]
    assert errors == []


def make_finding(line: int, severity: Severity = Severity.WARNING, **changes) -> Finding:
    finding = Finding(Location("app.yaml", line, 3, line, 9), "KP101", "host-port", severity, "message",
                      ObjectRef("v1", "Pod", "default", f"pod-{line}"), field_path="spec.x")
    return dataclasses.replace(finding, **changes)


def test_real_run_is_schema_valid_with_diagnostics_and_related_locations(manifests):
    log = sarif_for(["."])
    validate(log)
    run = log["runs"][0]
    assert log["version"] == "2.1.0" and "$schema" in log
    driver = run["tool"]["driver"]
    assert driver["name"] == "kubelint-ports" and driver["version"] == driver["semanticVersion"]
    collision = next(r for r in run["results"] if r["ruleId"] == "KP201")
    assert collision["level"] == "error"
    assert collision["locations"][0]["logicalLocations"] == [
        {"name": "nginx-hostport", "fullyQualifiedName": "web/Deployment/nginx-hostport", "kind": "resource"}]
    related = collision["relatedLocations"]
    assert related[0]["id"] == 1 and "nginx-nodeport" in related[0]["message"]["text"]
    assert related[0]["physicalLocation"]["artifactLocation"] == {"uri": "service.yaml", "uriBaseId": "%SRCROOT%"}
    assert related[0]["physicalLocation"]["region"]["startLine"] == 8
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    [notification] = invocation["toolExecutionNotifications"]
    assert notification["level"] == "error" and notification["message"]["text"].startswith("invalid YAML")
    assert notification["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "broken.yaml"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == manifests.resolve().as_uri() + "/"
    assert run["columnKind"] == "unicodeCodePoints"


def test_rules_table_and_rule_index(manifests):
    """The table holds the rules with a result, in the rules' order, each with its summary and a
    link (issue 35); `ruleIndex` points into that table."""
    log = sarif_for(["."])
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    results = log["runs"][0]["results"]
    assert {r["ruleId"] for r in results} >= {"KP101", "KP102", "KP201"}
    ran = enabled_by_default(builtin_policies())
    with_results = [policy for policy in ran if policy.id in {r["ruleId"] for r in results}]
    assert [rule["id"] for rule in rules] == [policy.id for policy in with_results]
    assert len(rules) < len(ran)
    for rule, policy in zip(rules, with_results):
        assert rule["name"] == policy.name
        assert rule["defaultConfiguration"]["level"] == str(policy.severity)  # kept even for "warning"
        # the summary, also as fullDescription (GitHub wants one: the multitool's GH2012); the
        # full docs only with --sarif-full-rules
        assert rule["shortDescription"]["text"] == rule["fullDescription"]["text"] == rule["help"]["text"] == (
            policy.summary)
        assert rule["help"]["markdown"].startswith(policy.summary + "\n\n")
        assert f"]({rule['helpUri']})" in rule["help"]["markdown"]
        assert len(rule["help"]["markdown"]) < len(policy.summary) + 300
        assert rule["properties"]["precision"] == "high"
        assert "security-severity" not in rule["properties"]
    for result in results:
        assert result["level"] in ("error", "warning", "note")
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]


def test_full_rules_table_has_every_rule_that_ran_with_its_docs(manifests):
    """`--sarif-full-rules`: the whole table with each rule's docs, as before issue 35."""
    log = sarif_for(["."], full_rules=True)
    validate(log)
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == [policy.id for policy in enabled_by_default(builtin_policies())]
    for rule, policy in zip(rules, enabled_by_default(builtin_policies())):
        assert rule["defaultConfiguration"]["level"] == str(policy.severity)
        assert rule["help"]["markdown"].startswith(f"# {policy.id} {policy.name}")
        assert rule["help"]["text"].startswith(policy.summary + "\n\n") and "Fix:" in rule["help"]["text"]
        assert 0 < len(rule["fullDescription"]["text"]) <= 1024
        assert rule["helpUri"].endswith(f"/docs/rules/{policy.slug}.md")
    for result in log["runs"][0]["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    short = sarif_for(["."])
    assert short["runs"][0]["results"] != log["runs"][0]["results"], "ruleIndex differs: the tables differ"
    for result in short["runs"][0]["results"]:
        result.pop("ruleIndex")
    for result in log["runs"][0]["results"]:
        result.pop("ruleIndex")
    assert short["runs"][0]["results"] == log["runs"][0]["results"], "the results are the same otherwise"


def test_end_columns_cover_the_key_and_value(manifests):
    [result] = [r for r in sarif_for(["deploy/app.yaml"])["runs"][0]["results"] if r["ruleId"] == "KP101"]
    line = DEPLOYMENT.splitlines().index("              hostPort: 31123") + 1
    start = "              hostPort: 31123".index("hostPort") + 1
    assert result["locations"][0]["physicalLocation"]["region"] == {
        "startLine": line, "startColumn": start, "endLine": line, "endColumn": start + len("hostPort: 31123")}


def test_missing_end_falls_back_to_one_character():
    finding = make_finding(4, location=Location("app.yaml", 4, 7))
    log = json.loads(render(Report([finding], [], builtin_policies())))
    assert log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 4, "startColumn": 7, "endLine": 4, "endColumn": 8}


def test_fingerprint_survives_line_shifts(manifests):
    def fingerprints():
        results = sarif_for(["deploy/app.yaml", "service.yaml"])["runs"][0]["results"]
        return [(r["ruleId"], r["partialFingerprints"][FINGERPRINT_KEY],
                 r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results]

    before = fingerprints()
    (manifests / "deploy/app.yaml").write_text("\n\n\n" + DEPLOYMENT)
    after = fingerprints()
    assert [(rule, key) for rule, key, _ in after] == [(rule, key) for rule, key, _ in before]
    assert [line for *_, line in after] == [line + 3 for *_, line in before]
    assert len({key for _, key, _ in before}) == len(before)  # distinct rules -> distinct keys
    assert all("primaryLocationLineHash" not in r["partialFingerprints"]
               for r in sarif_for(["."])["runs"][0]["results"])


def test_output_is_byte_identical_across_runs(manifests):
    first = render(lint_paths(["."], LintOptions()))
    second = render(lint_paths(["."], LintOptions()))
    assert first == second and first.endswith("}\n")


def test_automation_details_only_with_a_category(manifests):
    assert "automationDetails" not in sarif_for(["service.yaml"])["runs"][0]
    log = sarif_for(["service.yaml"], category="manifests/prod")
    assert log["runs"][0]["automationDetails"] == {"id": "manifests/prod"}
    validate(log)


def test_empty_report_still_has_results(manifests):
    log = sarif_for(["service.yaml"])
    assert log["runs"][0]["results"] == []
    assert log["runs"][0]["invocations"] == [{"executionSuccessful": True}]
    validate(log)


def test_uris_relative_encoded_absolute_and_stdin(manifests, tmp_path_factory):
    (manifests / "my dir").mkdir()
    (manifests / "my dir/a b#1.yaml").write_text(DEPLOYMENT)
    inside = str((manifests / "deploy/app.yaml").resolve())
    outside = str(tmp_path_factory.mktemp("elsewhere") / "app.yaml")
    results = sarif_for(["my dir"])["runs"][0]["results"]
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "my%20dir/a%20b%231.yaml", "uriBaseId": "%SRCROOT%"}
    report = Report([make_finding(2, location=Location(inside, 2, 1, 2, 5)),
                     make_finding(3, location=Location(outside, 3, 1, 3, 5)),
                     make_finding(4, location=Location("<stdin>", 4, 1, 4, 5))], [], builtin_policies())
    log = json.loads(render(report))
    validate(log)
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in log["runs"][0]["results"]]
    assert uris == [{"uri": "deploy/app.yaml", "uriBaseId": "%SRCROOT%"}, {"uri": Path(outside).as_uri()},
                    {"uri": "stdin"}]


def uris(log: dict) -> set[str]:
    run = log["runs"][0]
    found = set()
    for result in run["results"]:
        for location in result["locations"] + result.get("relatedLocations", []):
            artifact = location["physicalLocation"]["artifactLocation"]
            found.add((artifact["uri"], artifact.get("uriBaseId")))
    return found


def test_paths_are_relative_to_the_repository_root_from_a_subdirectory(manifests, monkeypatch):
    """`cd deploy && kubelint-ports lint . ../service.yaml`: the same URIs as from the top level."""
    from_root = sarif_for(["deploy", "service.yaml"])
    monkeypatch.chdir(manifests / "deploy")
    from_subdirectory = sarif_for([".", "../service.yaml"])
    assert uris(from_subdirectory) == uris(from_root) == {("deploy/app.yaml", "%SRCROOT%"),
                                                          ("service.yaml", "%SRCROOT%")}
    assert from_subdirectory["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == manifests.resolve().as_uri() + "/"
    absolute = sarif_for([str(manifests / "deploy"), str(manifests / "service.yaml")])
    assert uris(absolute) == uris(from_root)


def test_without_git_the_config_directory_is_the_root(tmp_path, monkeypatch):
    from kubelint_ports.sourceroot import find_source_root

    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "app.yaml").write_text(DEPLOYMENT)
    (tmp_path / ".kubelint-ports.yaml").write_text("paths: [k8s]\n")
    if find_source_root(start=str(tmp_path)) != str(tmp_path):
        # the temporary directory lies inside some repository: the git rule would win
        assert (Path(find_source_root(start=str(tmp_path))) / ".git").exists()
        return
    monkeypatch.chdir(tmp_path / "k8s")
    assert find_source_root(str(tmp_path / ".kubelint-ports.yaml")) == str(tmp_path)
    assert find_source_root() == str(tmp_path / "k8s")  # nothing else: the current directory


def test_rules_link_their_docs_page(manifests):
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    repository = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    assert repository.startswith("https://"), "helpUri is an absolute URI (the schema: `format: uri`)"
    policies = {policy.id: policy for policy in builtin_policies()}
    for full_rules in (False, True):
        rules = sarif_for(["."], full_rules=full_rules)["runs"][0]["tool"]["driver"]
        assert rules["informationUri"] == repository
        assert rules["rules"]
        for rule in rules["rules"]:
            policy = policies[rule["id"]]
            assert rule["helpUri"] == f"{repository}/blob/v{__version__}/docs/rules/{policy.slug}.md"
            assert (ROOT / "docs" / "rules" / f"{policy.slug}.md").is_file()


def test_own_policies_have_no_help_uri(manifests):
    from kubelint_ports.policies import policies_with

    policies = policies_with([str(ROOT / "examples" / "policies")])
    findings = [make_finding(2, rule_id="KP901", rule_name="ingress-host-ports"), make_finding(3)]
    for full_rules in (False, True):
        log = json.loads(render(Report(findings, [], tuple(policies)), full_rules=full_rules))
        validate(log)
        rules = log["runs"][0]["tool"]["driver"]["rules"]
        own = [rule for rule in rules if rule["id"].startswith("KP9")]
        assert own and all("helpUri" not in rule for rule in own)
        assert full_rules or [rule["id"] for rule in rules] == ["KP101", "KP901"]
    [own] = [rule for rule in json.loads(render(Report(findings, [], tuple(policies))))["runs"][0]["tool"]["driver"][
        "rules"] if rule["id"] == "KP901"]
    assert "--sarif-full-rules" in own["help"]["markdown"], "where its docs are, without a page to link"


SIDECAR = """\
        - name: sidecar
          ports:
            - containerPort: 9000
"""


def test_fingerprints_survive_a_sidecar_and_reordered_ports(manifests):
    def fingerprints():
        results = sarif_for(["deploy/app.yaml", "service.yaml"])["runs"][0]["results"]
        return sorted((r["ruleId"], r["partialFingerprints"][FINGERPRINT_KEY]) for r in results)

    before = fingerprints()
    with_sidecar = DEPLOYMENT.replace("      containers:\n", "      containers:\n" + SIDECAR)
    with_sidecar = with_sidecar.replace("          ports:\n            - containerPort: 80\n",
                                        "          ports:\n            - containerPort: 8443\n"
                                        "            - containerPort: 80\n")
    (manifests / "deploy/app.yaml").write_text(with_sidecar)
    assert fingerprints() == before
    (manifests / "service.yaml").write_text(SERVICE.replace("nginx-nodeport", "other-nodeport"))
    after = dict(fingerprints())
    assert after["KP201"] != dict(before)["KP201"], "another partner: another finding"
    assert after["KP101"] == dict(before)["KP101"]


@pytest.mark.parametrize("kind", ["inSource", "external"])
def test_suppressed_findings_are_kept_with_a_suppression(kind):
    finding = dataclasses.replace(make_finding(2, suppressed="ports are fixed by the appliance"), suppressed_by=kind)
    log = json.loads(render(Report([finding], [], builtin_policies())))
    validate(log)
    assert log["runs"][0]["results"][0]["suppressions"] == [
        {"kind": kind, "justification": "ports are fixed by the appliance"}]


@pytest.mark.slow
def test_results_are_capped_with_a_notification():
    findings = [make_finding(line) for line in range(1, MAX_RESULTS + 11)]
    findings[-1] = dataclasses.replace(findings[-1], severity=Severity.ERROR)  # past the cap, but most severe
    log = json.loads(render(Report(findings, [], builtin_policies())))
    run = log["runs"][0]
    assert len(run["results"]) == MAX_RESULTS
    assert run["results"][-1]["level"] == "error"
    [notification] = run["invocations"][0]["toolExecutionNotifications"]
    assert notification["level"] == "warning" and "25,000" in notification["message"]["text"]
    assert run["invocations"][0]["executionSuccessful"] is True


def test_serializer_keeps_default_level_and_sorts_sets():
    result = om.Result(message=om.Message(text="m"), level="warning", rule_id="KP101")
    assert to_sarif_dict(result) == {"message": {"text": "m"}, "level": "warning", "ruleId": "KP101"}
    assert to_sarif_dict(om.ReportingConfiguration(level="warning")) == {"level": "warning"}
    assert to_sarif_dict(om.PropertyBag(tags={"b", "a"})) == {"tags": ["a", "b"]}
    assert to_sarif_dict(om.Run(tool=om.Tool(driver=om.ToolComponent(name="x")), results=[]))["results"] == []


def test_no_python_reprs_leak_into_output(manifests):
    text = render(lint_paths(["."], LintOptions()))
    assert "{'" not in text and "<sarif_om" not in text and "NOTHING" not in text


MULTITOOL_CASES = [(".", ["."]), ("deploy", [".", "../service.yaml", "../broken.yaml"]), ("deploy", [])]


@pytest.mark.slow
def test_github_accepts_our_sarif_per_the_multitool(manifests, tmp_path_factory, monkeypatch):
    """`sarif-multitool validate` with GitHub's rules, on logs made from the top level and from a
    subdirectory (no PATH: the config's paths, which resolve outside the current directory). One
    validator run for the three logs (its start-up is most of its time); its exit code is always
    0, so read its log, whose results name the file they are about."""
    import subprocess

    from kubelint_ports.settings import CommandLine, resolve

    tool, github_rules = sarif_multitool()
    (manifests / ".kubelint-ports.yaml").write_text("paths: [deploy, service.yaml]\n")
    out = tmp_path_factory.mktemp("multitool")
    logs = []
    for number, (where, paths) in enumerate(MULTITOOL_CASES):
        monkeypatch.chdir(manifests / where)
        settings = resolve(CommandLine(paths=tuple(paths)))
        report = lint_paths(settings.paths, settings.options)
        assert [r for r in report.findings if r.rule_id == "KP201"], "the cross-file collision is found"
        log_file = out / f"case-{number}.sarif"
        log_file.write_text(render(report))
        assert {uri for uri, _ in uris(json.loads(log_file.read_text()))} == {"deploy/app.yaml", "service.yaml"}
        logs.append(log_file)
        if number == 0:  # and the whole table with the rules' full docs
            full_file = out / "case-full.sarif"
            full_file.write_text(render(report, full_rules=True))
            logs.append(full_file)
    # A control the validator must reject (a result without a location: GH1001), so a run that
    # read nothing, or not every file, cannot pass.
    control = json.loads(logs[0].read_text())
    control["runs"][0]["results"][0].pop("locations")
    (out / "control.sarif").write_text(json.dumps(control))
    result_file = out / "validation.sarif"
    done = subprocess.run([str(tool), "validate", *map(str, logs), str(out / "control.sarif"),
                           "--rule-kind", "\"Gh;Sarif\"", "--config",
                           str(github_rules), "-o", str(result_file), "--log", "ForceOverwrite"],
                          capture_output=True, text=True, timeout=300)
    assert result_file.exists(), done.stdout + done.stderr
    validation = json.loads(result_file.read_text(encoding="utf-8-sig"))
    errors = [r for run in validation["runs"] for r in run.get("results", []) if r.get("level") == "error"]
    where = {location["physicalLocation"]["artifactLocation"]["uri"].rsplit("/", 1)[-1]
             for r in errors for location in r.get("locations", [])}
    assert "control.sarif" in where, "the validator read the files and applies GitHub's rules"
    problems = [(r.get("ruleId"), r["message"].get("text") or r["message"].get("arguments"))
                for r in errors if any(not location["physicalLocation"]["artifactLocation"]["uri"].endswith(
                    "control.sarif") for location in r.get("locations", []))]
    assert not problems, problems
    assert validation["runs"][0]["tool"]["driver"]["name"].lower().startswith("sarif"), "the validator ran"
