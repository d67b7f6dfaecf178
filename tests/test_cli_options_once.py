"""The command-line option set is declared once (issue 33, "One engine"): an option that several
commands take is one declaration (`cli_options`) that each of them reads, and `node` and `config`
take every option of `lint` that means something to them; the ones they leave out say why here."""

from __future__ import annotations

import ast
import inspect
import json
from collections import defaultdict
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kubelint_ports import cli
from kubelint_ports.cli_options import Declared, with_option_groups

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SNAPSHOTS = EXAMPLES / "node-snapshots" / "incident-000"

# Options named alike that are different options: each command's own choice of formats.
SAME_NAME_OTHER_OPTION = {
    "--format": "lint and node: the report formats; ports: text, json or html; rules: text or json",
    "--output-format": "lint and node: the report formats; rules: text or json",
}

# What `lint` takes that `node` does not, and why.
NOT_FOR_NODE = {
    "--fix": "node's rules have no fix, and its inputs are dumps of a live node, never rewritten",
    "--unsafe-fixes": "likewise",
    "--diff": "likewise",
    "--show-fixes": "likewise",
    "--scope": "every node rule reads a node's dumps: none is an object-only rule of the pre-commit hook",
    "--proxy-mode": "each node's dumps say its kube-proxy mode (iptables-save, ipvsadm, nft); no node rule reads "
                    "the option",
    "--cni-plugins-version": "each node's dumps show the portmap rules' order itself; no node rule reads the option",
    "--node-port-range": "no node rule reads the node-port range: they compare the dumps with the Services",
    "--ephemeral-port-range": "no node rule reads the ephemeral port range",
    "--watch": "node reads dumps taken once, not files being edited",
}

# What `lint` takes that `config` does not, and why: `config` prints the effective configuration
# (YAML on standard output) and reports no finding.
NOT_FOR_CONFIG = {
    "--format": "config prints YAML, the configuration's own format",
    "--output-format": "likewise",
    "--output": "config prints to standard output",
    "--report": "config writes no report",
    "--color": "config prints YAML, uncoloured",
    "--no-color": "likewise",
    "--explain": "config reports no finding to explain",
    "--verbose": "likewise",
    "-v": "likewise",
    "--quiet": "config prints nothing but the configuration and input errors",
    "-q": "likewise",
    "--statistics": "config counts no finding",
    "--fix": "config changes no file",
    "--unsafe-fixes": "likewise",
    "--diff": "likewise",
    "--show-fixes": "likewise",
    "--show-suppressed": "config reports no finding",
    "--sarif-category": "config writes no SARIF",
    "--sarif-full-rules": "likewise",
    "--link-base": "config writes no Markdown or HTML report",
    "--write-baseline": "config writes no file",
    "-o": "config prints to standard output",
    "--watch": "config prints the configuration once; lint --watch lints again on each change",
}


def option_names(declared: Declared) -> list[str]:
    return [name.strip() for names in declared.names for name in names.split("/") if name.strip()]


def declarations() -> dict[str, set[int]]:
    """Each option name of the app's commands -> the declarations it comes from (by identity)."""
    found: dict[str, set[int]] = defaultdict(set)
    for _, command in cli.COMMANDS:
        for parameter in inspect.signature(with_option_groups(command)).parameters.values():
            declared = parameter.default
            if isinstance(declared, Declared) and not declared.argument:
                for name in option_names(declared):
                    found[name].add(id(declared))
    return found


def click_options(command_name: str) -> set[str]:
    group = typer.main.get_command(cli.make_app())
    command = group.commands[command_name]
    return {name for param in command.params if param.param_type_name == "option"
            for name in (*param.opts, *param.secondary_opts)} - {"--help"}


def test_every_option_of_the_app_comes_from_one_declaration():
    found = declarations()
    twice = {name: len(ids) for name, ids in found.items() if len(ids) > 1 and name not in SAME_NAME_OTHER_OPTION}
    assert not twice, f"options declared in more than one place (declare them once in cli_options): {twice}"
    # The scan sees what typer shows: every option of every command.
    for command_name, _ in cli.COMMANDS:
        assert click_options(command_name) <= found.keys(), command_name


def test_an_option_is_written_out_once_in_the_source():
    """Also a declaration no command takes yet: each `option(...)`/`group_option(...)` call names
    its options, and no two calls name the same one."""
    calls: dict[str, list[str]] = defaultdict(list)
    for module in ("cli.py", "cli_options.py"):
        tree = ast.parse((ROOT / "kubelint_ports" / module).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("option", "group_option"):
                for arg in node.args[1:]:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        for name in arg.value.split("/"):
                            calls[name.strip()].append(f"{module}:{node.lineno}")
    twice = {name: places for name, places in calls.items() if len(places) > 1 and name not in SAME_NAME_OTHER_OPTION}
    assert not twice, twice


def test_the_config_option_is_one_declaration():
    assert len(declarations()["--config"]) == 1
    for command_name in ("lint", "ports", "node", "config"):
        assert "--config" in click_options(command_name)


@pytest.mark.parametrize("command_name, left_out", [("node", NOT_FOR_NODE), ("config", NOT_FOR_CONFIG)])
def test_node_and_config_take_every_meaningful_option_of_lint(command_name, left_out):
    lint, other = click_options("lint"), click_options(command_name)
    missing = lint - other - left_out.keys()
    assert not missing, f"{command_name} lacks lint's {sorted(missing)}: take it, or say in this test why not"
    stale = left_out.keys() & other
    assert not stale, f"{command_name} takes {sorted(stale)} now: drop them from the list of those it leaves out"
    assert left_out.keys() <= lint, "a reason given for an option lint does not have"


def run(*args: str):
    return CliRunner().invoke(cli.app, list(args))


def test_config_accepts_the_shared_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"version": 2, "findings": []}))
    result = run("config", "--config", str(EXAMPLES / ".kubelint-ports.yaml"), "--policies", str(EXAMPLES / "policies"),
                 "--select", "KP1,KP2", "--ignore", "KP101", "--fail-on", "warning", "--scope", "object",
                 "--baseline", str(baseline), "--node-port-range", "20000-22767",
                 "--ephemeral-port-range", "40000-50000", "--service-cidr", "10.96.0.0/12",
                 "--pod-cidr", "10.244.0.0/16", "--proxy-mode", "ipvs", "--limit", "max-depth=10", "-j", "1",
                 "--release-name", "r", "--namespace", "n")
    assert result.exit_code == 0, result.output
    import yaml

    data = yaml.safe_load(result.stdout)
    assert data["fail-on"] == "warning"
    assert data["node-port-range"] == "20000-22767"
    assert data["ephemeral-port-range"] == "40000-50000"
    assert (data["service-cidr"], data["pod-cidr"], data["proxy-mode"]) == ("10.96.0.0/12", "10.244.0.0/16", "ipvs")
    assert data["limits"]["max-depth"] == 10
    assert data["baseline"] == {"file": str(baseline), "findings": 0}
    assert "KP101" not in data["rules"] and all(rule[:3] in ("KP1", "KP2") for rule in data["rules"])


def test_node_accepts_the_shared_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    snapshots = [str(SNAPSHOTS / "node-1"), str(SNAPSHOTS / "node-2")]
    baseline = tmp_path / "baseline.json"
    shared = ("--policies", str(EXAMPLES / "policies"), "--limit", "max-depth=50", "-j", "1",
              "--release-name", "r", "-f", str(tmp_path / "none.yaml"))
    recorded = run("node", *snapshots, *shared, "--write-baseline", str(baseline))
    assert recorded.exit_code == 0, recorded.output
    count = len(json.loads(baseline.read_text())["findings"])
    assert count > 0
    again = run("node", *snapshots, *shared, "--baseline", str(baseline), "--format", "json")
    assert again.exit_code == 0, again.output
    assert [f for f in json.loads(again.stdout)["findings"] if not f.get("suppressed")] == []
    shown = run("node", *snapshots, "--baseline", str(baseline), "--show-suppressed")
    assert shown.stdout.count("(suppressed)") == count
