"""The shape we keep (docs/architecture.md): data flows one way, loading -> model -> checks ->
engine -> formatters -> the command line, and no import runs back up, not even inside a function.
Imports under `if TYPE_CHECKING:` never run and are allowed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kubelint_ports"

# Each top-level room of the package and its place in the pipeline; a module may import from its
# own stage and earlier ones only.
STAGES = {
    "records": 0,       # `record`: the dataclass every stage defines, made cheaply (no project imports)
    "vocabulary": 0,    # the words every stage speaks: Location, ObjectRef, Severity, Diagnostic
    "findings": 0,      # what a run says: Finding (and its fix), Report
    "sourceroot": 0,    # where the repository's top is (no project imports)
    "workload_kinds": 0,  # the kinds that make pods and where their pod template is (no project imports)
    "schema_gate": 0,   # start-up only: a quick yes for our own JSON Schemas before jsonschema (no project imports)
    "policy_data": 0,   # the built-in policies as data, read through their index (no project imports)
    "policy_schemas": 3,  # a user's JSON Schema (a port-schema policy's) made safe to validate with
    "loading": 1,       # every input format: files, charts, Kustomize, stdin, node dumps
    "model": 2,         # workloads, Services, nodes, proxy config, placement, the datapath model
    "policies": 3,      # the rules as data, validated
    "checks": 3,        # small registered functions that ask the model
    "suppressions": 4,  # annotations, exemptions and baselines applied to findings
    "portmap": 4,       # the per-node port map: a view of the model and the findings
    "engine": 4,        # one pipeline
    "fixes": 4,         # `lint --fix`: each fixable rule's edit, worked out from the findings and the files
    "docs": 5,          # rule pages, generated from the policies
    "formatters": 5,    # text, JSON, SARIF, ... : format a Report, nothing else
    "config": 6,        # the configuration file
    "settings": 6,      # command line + configuration -> one run's options
    "cli": 6,
    "cli_options": 6,   # option groups the commands share, declared once
    "__main__": 6,
    "__init__": 0,
}


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1] if len(parts) > 1 else parts
    return ".".join(parts)


def type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every project import in a file, wherever it stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = type_checking_lines(tree)
    found = []
    package = module_name(path).rsplit(".", 0 if path.name == "__init__.py" else 1)[0]
    for node in ast.walk(tree):
        if node.lineno in skip if hasattr(node, "lineno") else False:
            continue
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                base = ".".join(anchor[: len(anchor) - node.level + 1] + ([base] if base else []))
            if base.startswith("kubelint_ports"):
                found += [(node.lineno, f"{base}.{alias.name}" if base == "kubelint_ports" else base)
                          for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("kubelint_ports")]
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_room_has_a_stage():
    rooms = {room(module_name(path)) for path in MODULES}
    assert rooms <= STAGES.keys(), f"rooms without a stage in docs/architecture.md: {sorted(rooms - STAGES.keys())}"


@pytest.mark.parametrize("path", MODULES, ids=[str(path.relative_to(PACKAGE)) for path in MODULES])
def test_no_import_runs_back_up_the_pipeline(path):
    importer = room(module_name(path))
    upward = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
              for line, target in imports(path)
              if target != "kubelint_ports" and STAGES.get(room(target), 0) > STAGES.get(importer, 0)]
    assert not upward, "\n".join(upward)


def test_the_scan_sees_imports_inside_functions(tmp_path):
    """The check itself can fail: a function-level import is found."""
    probe = PACKAGE / "loading" / "__probe_for_test__.py"
    probe.write_text("def f():\n    from kubelint_ports.formatters import text\n")
    try:
        assert imports(probe) == [(2, "kubelint_ports.formatters")]
    finally:
        probe.unlink()


@pytest.mark.parametrize("path", MODULES, ids=[str(path.relative_to(PACKAGE)) for path in MODULES])
def test_no_module_grows_past_600_lines(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 600
