"""What a start-up imports. Every pre-commit run lints a few small plain files, so `lint` imports
only what such a run uses: not typer (its command line is read without it), not the node-dump
machinery (`node`), not Helm or Kustomize (charts), not the fix machinery when no finding is
fixable, not the readers of kube-proxy, kubeadm and CNI configurations when no input holds one,
not jsonschema (custom policies), networkx, sarif-om or a process pool, and no formatter but the
one it writes; and the built-in policies come from their index, not from 40-odd YAML files. Each
command runs in a fresh interpreter, which prints the modules it ended with. No timings here:
`benchmarks/bench_lint.py` measures them (docs/development.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
INCIDENT = EXAMPLES / "node-snapshots" / "incident-001"

# Runs the command line in this interpreter, as `kubelint-ports ARGS` would, then writes the
# imported module names to stderr as JSON (the command's own output goes to stdout).
RUN = """
import io, json, sys
sys.argv = ["kubelint-ports", *sys.argv[1:]]
from kubelint_ports.cli import main
try:
    main()
except SystemExit:
    pass
sys.stdout.flush()
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""

# Never imported by `lint` of a small plain file (a module, or any module under a package).
NOT_FOR_PLAIN_LINT = (
    "kubelint_ports.loading.snapshot",
    "kubelint_ports.model.node_state",
    "kubelint_ports.model.node_context",
    "kubelint_ports.checks.node",  # the node-snapshot rules' room, and every module under it
    "kubelint_ports.checks.node.dump_context",  # what the node-snapshot rules share
    "kubelint_ports.checks.node.host_ports",
    "kubelint_ports.checks.node.kube_proxy",
    "kubelint_ports.checks.node.listeners",
    "kubelint_ports.checks.node.drift",
    "kubelint_ports.checks.node.phrases",
    "kubelint_ports.checks.manifest.port_schema",  # custom policies' `check: port-schema` only
    "kubelint_ports.loading.helm.charts",
    "kubelint_ports.loading.helm.chart",
    "kubelint_ports.loading.helm.render",
    "kubelint_ports.loading.children",  # child processes: charts and Kustomize only
    "kubelint_ports.loading.helm.templatemap",
    "kubelint_ports.loading.kustomize.load",
    "kubelint_ports.loading.kustomize.build",
    "kubelint_ports.portmap",  # made only when a formatter or `ports` asks for the map
    "kubelint_ports.docs",
    "jsonschema",
    "networkx",
    "sarif_om",
    "ruamel",
    "multiprocessing",
    "concurrent.futures",
    "kubelint_ports.formatters.json_format",
    "kubelint_ports.formatters.sarif",
    "kubelint_ports.formatters.html",
    "kubelint_ports.formatters.concise",
    "kubelint_ports.formatters.markdown",
    "kubelint_ports.formatters.junit",
    "kubelint_ports.formatters.gitlab",
    "kubelint_ports.formatters.github",
    "typer",  # lint's command line is read without it (cli_options.parse_command_line)
    "click",
    "rich",
    "kubelint_ports.fixes.run",  # the fix machinery: only for a fixable finding
    "kubelint_ports.fixes.rules",
    "kubelint_ports.fixes.source",
    "kubelint_ports.loading.cluster.kube_proxy_config",  # the network readers: only for such documents
    "kubelint_ports.loading.cluster.kubeadm_config",
    "kubelint_ports.loading.cluster.cni_config",
    "kubelint_ports.loading.cluster.embedded_config",
)


def imported(*args: str, cwd: Path = ROOT) -> set[str]:
    done = subprocess.run([sys.executable, "-c", RUN, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    marker = done.stderr.rfind("\nMODULES ")
    assert marker >= 0, f"no module list (exit {done.returncode}):\n{done.stderr[-2000:]}"
    return set(json.loads(done.stderr[marker + len("\nMODULES "):]))


def present(modules: set[str], names) -> list[str]:
    return sorted(name for name in names
                  if name in modules or any(module.startswith(name + ".") for module in modules))


def test_lint_of_a_plain_file_imports_only_what_it_uses():
    modules = imported("lint", str(EXAMPLES / "clean.yaml"))
    assert "kubelint_ports.engine" in modules and "kubelint_ports.formatters.text" in modules  # it did run
    assert present(modules, NOT_FOR_PLAIN_LINT) == []


def test_lint_with_findings_and_json_imports_only_its_formatter():
    modules = imported("lint", "--format", "json", str(EXAMPLES / "nginx-hostport-nodeport.yaml"))
    assert "kubelint_ports.formatters.json_format" in modules
    # KP201 is fixable: its fix is described (the fix machinery loads, still without ruamel).
    fixing = {"kubelint_ports.fixes.run", "kubelint_ports.fixes.rules", "kubelint_ports.fixes.source"}
    assert fixing <= modules
    assert present(modules, set(NOT_FOR_PLAIN_LINT) - {"kubelint_ports.formatters.json_format"} - fixing) == []


def test_lint_of_kube_proxy_configuration_loads_its_reader():
    """The other side of the network readers' entry above: a document they read loads them."""
    modules = imported("lint", str(EXAMPLES / "cluster-config" / "kube-proxy.yaml"))
    assert {"kubelint_ports.loading.cluster.kube_proxy_config", "kubelint_ports.loading.cluster.embedded_config"} <= modules


def test_a_usage_error_is_said_by_typer():
    """A command line the fast path cannot vouch for goes to typer, which says what is wrong."""
    modules = imported("lint", "--format", "bogus", str(EXAMPLES / "clean.yaml"))
    assert "typer" in modules


def test_the_per_file_hook_imports_only_what_it_uses():
    """`--scope object` (the kubelint-ports-files pre-commit hook) runs the single-object rules."""
    modules = imported("lint", "--scope", "object", str(EXAMPLES / "clean.yaml"))
    assert present(modules, NOT_FOR_PLAIN_LINT) == []


def test_node_imports_the_snapshot_machinery():
    """The other side of the list above: `node` does load what `lint` must not (so the list
    names modules that exist and the lint test can fail)."""
    modules = imported("node", str(INCIDENT / "node-26"), "--cluster", str(INCIDENT / "pods-wide.txt"))
    for name in ("kubelint_ports.loading.snapshot", "kubelint_ports.model.node_state",
                 "kubelint_ports.model.node_context", "kubelint_ports.checks.node.dump_context",
                 "kubelint_ports.checks.node.host_ports", "kubelint_ports.checks.node.drift"):
        assert name in modules, name


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("lint", "--help")])
def test_help_and_version_import_no_engine(args):
    modules = imported(*args)
    assert "typer" in modules  # typer writes the help
    assert present(modules, ("kubelint_ports.engine", "kubelint_ports.model", "kubelint_ports.checks",
                             "kubelint_ports.loading", "yaml")) == []
    # Plain help (rich_markup_mode=None): rich's import alone doubled --help's start-up.
    assert present(modules, ("rich", "rich.markdown", "rich.traceback")) == []


def test_help_lists_every_command_with_its_whole_first_sentence():
    """Plain click help cuts a command's line at 45 characters with "..."; ours gives it whole."""
    done = subprocess.run([sys.executable, "-m", "kubelint_ports", "--help"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    commands = " ".join(done.stdout.split("Commands:")[1].split())  # click wraps at 80 columns
    assert "..." not in commands
    assert "Lint Kubernetes manifests and Helm charts for port-allocation mistakes." in commands


def test_the_fixable_rules_are_the_fixes():
    """`fixes.FIXABLE` says which rules have a fix without importing them; it must be `FIXES`' keys."""
    from kubelint_ports import fixes
    from kubelint_ports.fixes.rules import FIXES

    assert fixes.FIXABLE == set(FIXES) and fixes.fixable_rules() == tuple(sorted(FIXES))


def test_the_policy_index_is_fresh():
    """Start-up reads the built-in policies from their index; a stale entry is read from its YAML
    (correct, slower). Regenerate it with `python -m kubelint_ports.docs`."""
    from kubelint_ports import policies

    directory = policies.builtin_policy_dir()
    index = policies.read_index(directory)
    assert index, f"no index: run `python -m kubelint_ports.docs` ({directory / policies.INDEX})"
    fresh = {entry["name"]: entry for entry in policies.policy_index(directory)["policies"]}
    stale = sorted(name for name in fresh.keys() | index.keys() if fresh.get(name) != index.get(name))
    assert not stale, f"the policy index is stale for {stale}: run `python -m kubelint_ports.docs`"


def test_policies_from_the_index_are_the_policies_from_their_files(tmp_path):
    """The index gives the policies their YAML gives; an entry whose file changed is read from it."""
    import shutil

    from kubelint_ports import policies

    directory = policies.builtin_policy_dir()
    from_yaml = [policies.policy_from_data(policies.read_policy_file(path, shipped=True), str(path))
                 for path in sorted(directory.glob("*.y*ml"))]
    assert policies.load_policies() == from_yaml
    copy = tmp_path / "policies"
    shutil.copytree(directory, copy)
    first = sorted(copy.glob("*.yaml"))[0]
    first.write_text(first.read_text(encoding="utf-8").replace("\nsummary: ", "\nsummary: Edited. ", 1),
                     encoding="utf-8")
    entry = policies.read_index(copy)[first.name]
    assert policies.indexed_data(first, policies.read_index(copy))["summary"].startswith("Edited. ")
    assert not entry["data"]["summary"].startswith("Edited. ")


def test_the_check_registry_names_every_check_in_its_module():
    """The built-in policies say where each check lives (`module:`), so `lint` loads only the
    families it uses; `register` refuses a check placed elsewhere. Every placement exists, with
    what it reads."""
    from kubelint_ports import checks

    registered = dict(checks.CHECKS.items())  # imports every family
    places = checks.placements()
    assert set(registered) == set(places)
    for name, check in registered.items():
        assert check.function.__module__ == f"kubelint_ports.checks.{places[name].module}", name
        assert checks.reads_of(name) == check.reads, name
        assert checks.cross_object_of(name) == check.cross_object, name
    # The modules of checks/ that hold no check: the registry and its rooms' faces, the helpers the
    # manifest rules (traffic) and the node-snapshot rules (dump_context) share, and each room's
    # stories (phrases).
    helpers = {"__init__", "traffic", "dump_context", "phrases", "network_phrases", "scheduling_phrases"}
    family_files = {str(path.relative_to(ROOT / "kubelint_ports" / "checks").with_suffix("")).replace("/", ".")
                    for path in (ROOT / "kubelint_ports" / "checks").rglob("*.py")}
    assert {name for name in family_files if name.rpartition(".")[2] not in helpers} == {
        place.module for place in places.values()}


def test_every_built_in_policy_places_its_check_and_no_policy_of_ones_own_may(tmp_path):
    from kubelint_ports import policies
    from kubelint_ports.policy_data import builtin_policy_data

    assert all("module" in data for _, data in builtin_policy_data())
    (tmp_path / "KP901-mine.yaml").write_text(
        "id: KP901\nname: mine\nseverity: error\nsummary: a policy of my own here\ncheck: host-port\n"
        "cross-object: true\ndocs: {what: x}\n")
    with pytest.raises(policies.PolicyError, match="cross-object: only the built-in policies say where a check lives"):
        policies.load_policies(tmp_path)
    # a copy of a built-in policy made one's own repeats what the built-in one says: it loads
    (tmp_path / "KP901-mine.yaml").write_text(
        (ROOT / "policies" / "KP301-host-port-conflict.yaml").read_text().replace("id: KP301", "id: KP901"))
    [mine] = policies.load_policies(tmp_path)
    assert mine.id == "KP901" and mine.check == "host-port-conflict"
