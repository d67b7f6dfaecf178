"""`LintOptions.shown` (the language server's open files): the rules that read one object at a
time look only at shown files' objects, and a shown file's findings are exactly those of a run
that looks at every object, on the examples and on every rule's fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelint_ports.engine import LintOptions, lint_paths

ROOT = Path(__file__).resolve().parents[1]
TREES = [ROOT / "examples", *sorted(p for p in (ROOT / "tests" / "policies").iterdir() if p.is_dir())]


def shown_findings(report, shown):
    return sorted((f.location.path, f.location.line, f.location.column, f.rule_id, f.message, f.related)
                  for f in report.findings if shown(f.location.path))


@pytest.mark.parametrize("tree", TREES, ids=[p.name for p in TREES])
def test_a_shown_file_has_the_findings_of_a_whole_run(tree, monkeypatch):
    monkeypatch.chdir(tree)
    files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
    whole = lint_paths(["."], LintOptions(jobs=1))
    assert whole.findings or tree.name != "examples"
    for name in files[:6]:
        shown = (lambda wanted: lambda path: Path(path).resolve() == wanted)((tree / name).resolve())
        narrowed = lint_paths(["."], LintOptions(jobs=1, shown=shown))
        assert shown_findings(narrowed, shown) == shown_findings(whole, shown), name


def test_objects_of_other_files_are_not_read_by_single_object_rules(monkeypatch):
    monkeypatch.chdir(ROOT / "examples")
    nothing = lint_paths(["."], LintOptions(jobs=1, shown=lambda path: False))
    whole = lint_paths(["."], LintOptions(jobs=1))
    assert {f.rule_id for f in whole.findings} & {"KP101", "KP001"}
    assert not {f.rule_id for f in nothing.findings} & {"KP101", "KP001"}, "single-object rules looked at no object"
