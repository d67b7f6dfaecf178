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
    "suppression_comments": 4,  # the suppression comments of a file, read
    "portmap": 4,       # the per-node port map: a view of the model and the findings
    "engine": 4,        # one pipeline
    "fixes": 4,         # `lint --fix`: each fixable rule's edit, worked out from the findings and the files
    "docs": 5,          # rule pages, generated from the policies
    "formatters": 5,    # text, JSON, SARIF, ... : format a Report, nothing else
    "config": 6,        # the configuration file
    "settings": 6,      # command line + configuration -> one run's options
    "cli": 6,
    "cli_options": 6,   # option groups the commands share, declared once
    "watch": 6,         # `lint --watch`: lint again on each change, print what changed (watchfiles)
    "run_memo": 6,      # a `lint` with nothing changed replays its last report (docs/cache.md)
    "report_files": 6,  # report files (-o, --report) written whole or not at all
    "server": 6,        # `kubelint-ports server`: the language server, after the engine like the CLI (pygls)
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


def imported_names(path: Path) -> list[tuple[int, str, str | None, str | None]]:
    """(line, module, name, bound as) for every project import in a file, wherever it stands, but
    not under `if TYPE_CHECKING:`: `from M import X as Y` gives (line, M, X, Y), `import M` gives
    (line, M, None, None)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = type_checking_lines(tree)
    found: list[tuple[int, str, str | None, str | None]] = []
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
                found += [(node.lineno, base, alias.name, alias.asname or alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None, None)
                      for alias in node.names if alias.name.startswith("kubelint_ports")]
    return found


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every project import in a file, wherever it stands."""
    return [(line, f"{base}.{name}" if base == "kubelint_ports" and name else base)
            for line, base, name, _ in imported_names(path)]


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


# ---------------------------------------------------------------------------------------------
# No import cycle at all, between rooms or inside one (issue 33). The graph has one node per
# module and one edge per import, top-level or inside a function (never under TYPE_CHECKING).
# `from package import X` goes to the module that defines X: the submodule X itself, or, when the
# package's face only re-exports X, the module the face took it from. A face importing its own
# submodules to re-export them is an edge face -> submodule. So a lazy import through a face is
# seen for what it is, and a face is no hiding place.

MODULE_PATHS = {module_name(path): path for path in MODULES}
FACES = {module_name(path) for path in MODULES if path.name == "__init__.py"}


def face_definitions(face: str) -> dict[str, str]:
    """What a package face re-exports: bound name -> the module that defines it (followed through
    other faces). Names the face defines itself are not listed."""
    tree = ast.parse(MODULE_PATHS[face].read_text(encoding="utf-8"))
    top = {node.lineno for node in tree.body if isinstance(node, ast.ImportFrom | ast.Import)}
    found = {}
    for line, base, name, bound in imported_names(MODULE_PATHS[face]):
        if line in top and name is not None:
            found[bound] = resolve(base, name)
    return found


def resolve(base: str, name: str | None) -> str:
    """The module an import of `name` from `base` runs for: see above."""
    if name is None or base not in MODULE_PATHS:
        return base if base in MODULE_PATHS else base.rsplit(".", 1)[0]
    if f"{base}.{name}" in MODULE_PATHS:
        return f"{base}.{name}"
    if base in FACES and base != "kubelint_ports":
        return face_definitions(base).get(name, base)
    return base


def import_graph() -> dict[str, dict[str, list[str]]]:
    """module -> imported module -> the import lines ("path:line"), self-imports left out."""
    graph: dict[str, dict[str, list[str]]] = {name: {} for name in MODULE_PATHS}
    for name, path in MODULE_PATHS.items():
        for line, base, imported, _ in imported_names(path):
            target = resolve(base, imported)
            if target != name and target in MODULE_PATHS:
                where = f"{path.relative_to(PACKAGE.parent)}:{line}"
                if where not in graph[name].setdefault(target, []):
                    graph[name][target].append(where)
    return graph


def import_cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Every strongly connected component of more than one module, each sorted, largest first."""
    import networkx

    digraph = networkx.DiGraph([(source, target) for source, targets in graph.items() for target in targets])
    return sorted((sorted(component) for component in networkx.strongly_connected_components(digraph)
                   if len(component) > 1), key=lambda component: (-len(component), component))


def cycle_report(graph: dict[str, dict[str, list[str]]], cycles: list[list[str]]) -> str:
    lines = []
    for component in cycles:
        members = set(component)
        lines.append(f"{len(component)} modules import one another: " + ", ".join(component))
        lines += [f"    {source} -> {target}  ({', '.join(graph[source][target])})"
                  for source in component for target in sorted(graph[source]) if target in members]
    return "\n".join(lines)


def test_no_import_cycle_between_modules():
    graph = import_graph()
    cycles = import_cycles(graph)
    assert not cycles, "\n" + cycle_report(graph, cycles)


def test_the_cycle_scan_sees_lazy_imports_through_a_face():
    """The check itself can fail: a function-level import through a package face, of a name the
    face re-exports, is an edge to the module that defines the name."""
    assert resolve("kubelint_ports.loading", "load") == "kubelint_ports.loading.inputs"
    assert resolve("kubelint_ports.loading", "files") == "kubelint_ports.loading.files"
    assert resolve("kubelint_ports.model", "Cluster") == "kubelint_ports.model.objects"
    graph = {"a": {"b": ["a.py:1"]}, "b": {"c": ["b.py:2"]}, "c": {"a": ["c.py:3"]}, "d": {"a": ["d.py:4"]}}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_the_tree_in_the_architecture_doc_is_the_tree_on_disk():
    """docs/architecture.md's tree block names every folder of the package (in order, each with its
    parent) and every module at its top, and nothing that is not there."""
    import re

    text = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("<!-- tree -->\n```\n", 1)[1].split("```", 1)[0].splitlines()
    assert block[0] == "kubelint_ports/"
    folders, modules, stack = [], set(), []
    for line in block[1:]:
        depth = (len(line) - len(line.lstrip())) // 2
        word = line.split()[0]
        if word.endswith("/"):
            stack[depth - 1:] = [word.rstrip("/")]
            folders.append("/".join(stack))
        else:
            modules.update(re.findall(r"[a-z_]+\.py", line))
    on_disk = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*")
                     if path.is_dir() and path.name != "__pycache__")
    assert sorted(folders) == on_disk
    assert modules == {path.name for path in PACKAGE.glob("*.py")}
