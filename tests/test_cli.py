"""The command line: exit codes, formats, options, determinism, and the bundled examples."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
runner = CliRunner()

HOSTPORT_ONLY = """\
apiVersion: v1
kind: Pod
metadata: {name: agent, namespace: ops}
spec:
  containers:
    - name: agent
      ports:
        - containerPort: 9100
          hostPort: 9100
"""
COLLISION = HOSTPORT_ONLY.replace("9100", "31123") + """\
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: ops}
spec:
  type: NodePort
  ports: [{port: 80, nodePort: 31123}]
"""


def run(*args: str, input: str | None = None):
    return runner.invoke(app, list(args), input=input)


@pytest.fixture
def manifests(tmp_path):
    def make(text: str, name: str = "m.yaml") -> str:
        path = tmp_path / name
        path.write_text(text)
        return str(path)
    return make


def test_exit_0_when_nothing_at_or_above_threshold(manifests):
    result = run("lint", manifests(HOSTPORT_ONLY))
    assert result.exit_code == 0, result.output
    assert ":9:11: warning KP101 container 'agent' claims hostPort 9100/TCP\n" in result.output
    line = next(line for line in result.output.splitlines() if "KP101" in line)
    assert Path(line.split(":", 1)[0]).is_file(), "the line starts with the file's path: a terminal can open it"


def test_exit_1_on_errors(manifests):
    result = run("lint", manifests(COLLISION))
    assert result.exit_code == 1
    assert ": error   KP201 hostPort 31123/TCP collides with nodePort 31123 of ops/Service/svc\n" \
        in result.output


@pytest.mark.parametrize("fail_on, code", [("warning", 1), ("note", 1), ("error", 0), ("never", 0)])
def test_fail_on(manifests, fail_on, code):
    assert run("lint", "--fail-on", fail_on, manifests(HOSTPORT_ONLY)).exit_code == code


def test_fail_on_never_still_exits_2_on_input_errors(manifests):
    result = run("lint", "--fail-on", "never", manifests("a: [\n"))
    assert result.exit_code == 2
    assert "input-error" in result.output


def test_exit_2_on_input_errors_but_other_files_are_linted(manifests):
    bad = manifests("kind: [unclosed\n", "bad.yaml")
    good = manifests(COLLISION, "good.yaml")
    result = run("lint", bad, good)
    assert result.exit_code == 2
    assert "bad.yaml:2:1: input-error invalid YAML" in result.output
    assert "KP201" in result.output


@pytest.mark.parametrize("value", ["30000", "a-b", "32767-30000", "0-10", "1-70000"])
def test_bad_node_port_range_is_a_usage_error(manifests, value):
    assert run("lint", "--node-port-range", value, manifests(HOSTPORT_ONLY)).exit_code == 2


def test_node_port_range_option_changes_findings(manifests):
    path = manifests(HOSTPORT_ONLY)
    assert "KP102" not in run("lint", path).output
    assert "KP102" in run("lint", "--node-port-range", "9000-9999", path).output


def test_unknown_format_is_a_usage_error(manifests):
    assert run("lint", "--format", "xml", manifests(HOSTPORT_ONLY)).exit_code == 2


def test_json_shape(manifests):
    result = run("lint", "--format", "json", manifests(COLLISION))
    data = json.loads(result.output)
    finding = next(f for f in data["findings"] if f["rule"] == "KP201")
    assert finding["name"] == "host-port-node-port-collision"
    assert finding["severity"] == "error"
    assert (finding["line"], finding["column"]) == (9, 11)
    assert finding["object"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "ops", "name": "agent"}
    assert finding["related"][0]["line"] == 16 and "svc" in finding["related"][0]["message"]
    assert finding["suppressed"] is None
    assert data["summary"]["error"] == 1 and data["summary"]["files"] == 1


def test_output_file_and_byte_identical_runs(manifests, tmp_path):
    path = manifests(COLLISION)
    outputs = []
    for index in range(2):
        target = tmp_path / f"out{index}.json"
        run("lint", "--format", "json", "--output", str(target), path)
        outputs.append(target.read_bytes())
    assert outputs[0] == outputs[1]
    assert b'"KP201"' in outputs[0]


def test_findings_are_sorted_by_place(manifests, tmp_path):
    second = manifests(COLLISION, "b.yaml")
    first = manifests(HOSTPORT_ONLY, "a.yaml")
    data = json.loads(run("lint", "--format", "json", second, first).output)
    keys = [(f["file"], f["line"], f["column"], f["rule"]) for f in data["findings"]]
    assert keys == sorted(keys)
    assert keys[0][0].endswith("a.yaml")


def test_stdin(manifests):
    result = run("lint", "-", input=COLLISION)
    assert result.exit_code == 1
    assert result.output.startswith("<stdin>:9:11: ")


def test_no_color_when_not_a_terminal(manifests):
    assert "\033[" not in run("lint", manifests(COLLISION)).output
    assert "\033[" in run("lint", "--color", manifests(COLLISION)).output


def test_rules_and_explain():
    listing = run("rules").output
    assert "KP201  host-port-node-port-collision" in listing
    for reference in ("KP201", "kp201", "host-port-node-port-collision"):
        text = run("explain", reference).output
        assert text.startswith("# KP201 host-port-node-port-collision")
        assert "## Why is this bad?" in text and "## Fix" in text
    assert run("explain", "nope").exit_code == 2


def test_python_dash_m_and_version():
    from kubelint_ports import __version__

    done = subprocess.run([sys.executable, "-m", "kubelint_ports", "--version"], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"kubelint-ports {__version__}\n", "")
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_examples_show_every_rule_firing():
    """The README's first command lints examples/ with its node inventory: every rule that is on by
    default fires there and clean.yaml stays clean; examples/.kubelint-ports.yaml turns the
    organisation policies on, and they fire too."""
    from kubelint_ports.policies import builtin_policies

    data = json.loads(run("lint", "--format", "json", "--nodes", str(EXAMPLES / "inventory" / "nodes.yaml"),
                          str(EXAMPLES)).output)
    fired = {f["name"] for f in data["findings"]}
    from kubelint_ports.checks import CHECKS

    expected = {policy.name for policy in builtin_policies() if policy.enabled and CHECKS[policy.check].reads == "cluster"}
    assert expected <= fired, f"rules not shown by examples/: {sorted(expected - fired)}"
    assert not [f for f in data["findings"] if f["file"].endswith("clean.yaml")]
    assert data["errors"] == []
    strict = json.loads(run("lint", "--format", "json", "--config", str(EXAMPLES / ".kubelint-ports.yaml")).output)
    everything = {policy.name for policy in builtin_policies() if CHECKS[policy.check].reads == "cluster"}
    fired = {f["name"] for f in strict["findings"]}
    assert everything <= fired, f"rules not shown by examples/.kubelint-ports.yaml: {sorted(everything - fired)}"
    assert strict["errors"] == []


def test_installed_console_script_ships_the_policies(tmp_path):
    """Run from outside the checkout, the installed tool must find its policies (wheel data)."""
    import shutil

    from kubelint_ports.policies import builtin_policies

    script = shutil.which("kubelint-ports")
    if script is None:
        pytest.skip("this test needs the `kubelint-ports` command, which is not on PATH: pip install -e . (or activate the virtualenv it is installed in)")
    done = subprocess.run([script, "rules"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len([line for line in done.stdout.splitlines() if line.startswith("KP")]) == len(builtin_policies())


# --- configuration, policies, baselines, scope, extra reports -----------------------------------

def test_config_file_drives_a_run_without_arguments(tmp_path, monkeypatch):
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "app.yaml").write_text(HOSTPORT_ONLY)
    (tmp_path / "k8s" / "skip.generated.yaml").write_text(COLLISION)
    (tmp_path / ".kubelint-ports.yaml").write_text(
        "paths: [k8s]\nexclude: ['*.generated.yaml']\nfail-on: warning\nrules:\n  host-port: error\n")
    monkeypatch.chdir(tmp_path / "k8s")  # found from a subdirectory upward, paths relative to the file
    result = run("lint", "--format", "json")
    data = json.loads(result.output)
    assert result.exit_code == 1
    assert {f["file"] for f in data["findings"]} == {"app.yaml"}
    assert ("KP101", "error") in {(f["rule"], f["severity"]) for f in data["findings"]}
    assert run("lint", "--fail-on", "never").exit_code == 0, "the command line wins over the file"


def test_bad_config_exits_2_naming_file_and_line(tmp_path, monkeypatch):
    (tmp_path / ".kubelint-ports.yaml").write_text("fail-on: warning\nfial-on: error\n")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["lint", "."])
    assert result.exit_code == 2
    assert ".kubelint-ports.yaml:2:" in result.output and "unknown key" in result.output


def test_config_command_prints_the_effective_configuration(tmp_path, monkeypatch):
    (tmp_path / ".kubelint-ports.yaml").write_text(
        "proxy-mode: ipvs\nrules:\n  KP101: off\n  node-reserved-port: {extra_ports: [{port: 4240, daemon: cilium}]}\n")
    monkeypatch.chdir(tmp_path)
    import yaml

    data = yaml.safe_load(run("config").output)
    assert data["config-file"] == ".kubelint-ports.yaml" and data["proxy-mode"] == "ipvs"
    assert "KP101" not in data["rules"]
    assert data["rules"]["KP303"]["params"]["extra_ports"] == [{"port": 4240, "daemon": "cilium"}]
    assert data["fail-on"] == "error" and data["paths"] == ["."]


def test_user_policies_on_the_command_line(manifests):
    path = manifests(HOSTPORT_ONLY)
    result = run("lint", "--policies", str(ROOT / "examples" / "policies"), path)
    assert " KP901 hostPorts are allowed only in namespace ingress" in result.output and result.exit_code == 1
    broken = Path(path).parent / "broken"
    broken.mkdir()
    (broken / "KP999-x.yaml").write_text("id: KP999\nname: x\n")
    result = runner.invoke(app, ["lint", "--policies", str(broken), path])
    assert result.exit_code == 2 and "KP999-x.yaml" in result.output


def test_write_baseline_then_report_only_new_findings(manifests, tmp_path):
    path = manifests(COLLISION)
    baseline = tmp_path / "baseline.json"
    result = runner.invoke(app, ["lint", "--write-baseline", str(baseline), path])
    assert result.exit_code == 0 and baseline.exists()
    assert run("lint", "--baseline", str(baseline), path).exit_code == 0
    Path(path).write_text(COLLISION + "---\n" + HOSTPORT_ONLY.replace("agent", "agent-2").replace("9100", "31123"))
    result = run("lint", "--baseline", str(baseline), "--format", "json", path)
    standing = [f for f in json.loads(result.output)["findings"] if not f["suppressed"]]
    assert result.exit_code == 1 and {f["object"]["name"] for f in standing} == {"agent-2"}


def test_scope_object_leaves_cross_object_rules_out(manifests):
    path = manifests(COLLISION)
    assert "KP201" in run("lint", path).output
    result = run("lint", "--scope", "object", path)
    assert "KP201" not in result.output and "KP101" in result.output


def test_extra_reports_in_one_run(manifests, tmp_path):
    path = manifests(COLLISION)
    sarif, markdown = tmp_path / "r.sarif", tmp_path / "r.md"
    result = run("lint", "--report", f"sarif:{sarif}", "--report", f"markdown:{markdown}", path)
    assert result.exit_code == 1 and "KP201" in result.output
    assert json.loads(sarif.read_text())["version"] == "2.1.0"
    assert "| error | KP201" in markdown.read_text()
    assert run("lint", "--report", "xml:out.xml", path).exit_code == 2


def test_suppressed_findings_are_hidden_unless_asked(manifests):
    annotated = HOSTPORT_ONLY.replace("metadata: {name: agent, namespace: ops}",
                                      "metadata:\n  name: agent\n  namespace: ops\n"
                                      "  annotations: {kubelint-ports.io/ignore: host-port}")
    path = manifests(annotated)
    assert "KP101" not in run("lint", path).output
    shown = run("lint", "--show-suppressed", path).output
    assert " KP101 container 'agent' claims hostPort 9100/TCP (suppressed)\n" in shown
    assert "      suppressed: kubelint-ports.io/ignore annotation\n" in run("lint", "--show-suppressed", "-v", path).output


def test_shared_options_are_one_declaration():
    """`lint`, `ports` and `node` take their shared options as groups declared once
    (`cli_options`): each option they share reads the same on every command."""
    import typer.main

    from kubelint_ports.cli_options import BudgetArgs, ConfigArgs, FactArgs, HelmArgs, ReportArgs, RuleChoice

    group = typer.main.get_group(app)
    commands = {name: {param.name: param for param in group.commands[name].params} for name in ("lint", "ports", "node")}

    def shown(param):
        return param.opts, param.secondary_opts, param.help, getattr(param, "rich_help_panel", None), param.default

    for fields in (ReportArgs, RuleChoice, ConfigArgs, FactArgs, HelmArgs, BudgetArgs):
        names = [field.name for field in fields.__dataclass_fields__.values()]
        takers = [command for command, params in commands.items() if all(name in params for name in names)]
        assert len(takers) >= 2, (fields.__name__, takers)
        for name in names:
            first, *others = [commands[command][name] for command in takers]
            assert all(shown(other) == shown(first) for other in others), name
    # ports and lint share every option but the report's own (format, output, colour).
    assert set(commands["ports"]) - {"output_format", "output", "color", "free", "near", "count"} <= set(commands["lint"])
