"""What a start-up imports. Every pre-commit run lints a few small plain files, so `lint` imports
only what such a run uses: not the node-dump machinery (`node`), not Helm or Kustomize (charts),
not jsonschema (custom policies), networkx, sarif-om or a process pool, and no formatter but the
one it writes. Each command runs in a fresh interpreter, which prints the modules it ended with.
No timings here: `benchmarks/bench_lint.py` measures them (docs/development.md)."""

from __future__ import annotations

import json
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
    "kubelint_ports.checks.node_snapshot",
    "kubelint_ports.checks.port_schema",  # custom policies' `check: port-schema` only
    "kubelint_ports.loading.helm",
    "kubelint_ports.loading.helm_chart",
    "kubelint_ports.loading.helm_render",
    "kubelint_ports.loading.templatemap",
    "kubelint_ports.loading.kustomize",
    "kubelint_ports.loading.kustomize_build",
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
    assert present(modules, set(NOT_FOR_PLAIN_LINT) - {"kubelint_ports.formatters.json_format"}) == []


def test_the_per_file_hook_imports_only_what_it_uses():
    """`--scope object` (the kubelint-ports-files pre-commit hook) runs the single-object rules."""
    modules = imported("lint", "--scope", "object", str(EXAMPLES / "clean.yaml"))
    assert present(modules, NOT_FOR_PLAIN_LINT) == []


def test_node_imports_the_snapshot_machinery():
    """The other side of the list above: `node` does load what `lint` must not (so the list
    names modules that exist and the lint test can fail)."""
    modules = imported("node", str(INCIDENT / "node-26"), "--cluster", str(INCIDENT / "pods-wide.txt"))
    for name in ("kubelint_ports.loading.snapshot", "kubelint_ports.model.node_state",
                 "kubelint_ports.model.node_context", "kubelint_ports.checks.node_snapshot"):
        assert name in modules, name


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("lint", "--help")])
def test_help_and_version_import_no_engine(args):
    modules = imported(*args)
    assert present(modules, ("kubelint_ports.engine", "kubelint_ports.model", "kubelint_ports.checks",
                             "kubelint_ports.loading", "yaml")) == []


def test_the_check_registry_names_every_check_in_its_module():
    """`checks.MODULES` says where each check lives, so `lint` loads only the families it uses;
    `register` refuses a check it places elsewhere. Every entry exists, with what it reads."""
    from kubelint_ports import checks

    registered = dict(checks.CHECKS.items())  # imports every family
    assert set(registered) == set(checks.MODULES)
    for name, check in registered.items():
        assert check.function.__module__ == f"kubelint_ports.checks.{checks.MODULES[name]}", name
        assert checks.reads_of(name) == check.reads, name
        assert checks.cross_object_of(name) == check.cross_object, name
    family_files = {path.stem for path in (ROOT / "kubelint_ports" / "checks").glob("*.py")} - {"__init__", "traffic"}
    assert family_files == set(checks.MODULES.values())
