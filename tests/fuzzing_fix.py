"""The fuzzer's oracle for `lint --fix`: a manifest linted, its fixes described and applied as the
command line applies them (`--fix`, then `--fix --unsafe-fixes`, each on a fresh copy), in process.

`check_fix(data, scratch)` raises FixBug (an AssertionError, as every check of tests/fuzzing.py's
untrusted surfaces raises) when the tool fails on the input: an exception from
linting, describing or applying the fixes, an internal diagnostic, a written file that no longer
composes (PyYAML's `yaml.compose_all`) though the original did, or (with `strict=True`) a second
`--fix` that still changes the file. That last one is issue 32's promise; it stays behind the flag
until it holds.
"""

from __future__ import annotations

import shutil
from pathlib import Path

FILE_NAME = "manifest.yaml"


class FixBug(AssertionError):
    """The tool failed on this input (not the input being refused: that is a clean diagnostic)."""


def check_fix(data: bytes, scratch: Path, *, strict: bool = False, node_port: str = "move") -> None:
    """`data` as a manifest in `scratch`, fixed with `--fix` and with `--fix --unsafe-fixes` (each
    on its own copy of `data`); `node_port`: the configuration's `fix: {node-port: ...}`."""
    from kubelint_ports.fixes import Choices

    directory = scratch / "fix"
    original_composes = composes(data)
    for unsafe in (False, True):
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        file = directory / FILE_NAME
        file.write_bytes(data)
        what = "--fix --unsafe-fixes" if unsafe else "--fix"
        fixed_all = fix_passes(file, unsafe, Choices(node_port=node_port), what)
        written = file.read_bytes()
        if written != data and original_composes and not composes(written):
            raise FixBug(f"{what} wrote a file that no longer composes as YAML ({len(data):,} bytes in)")
        if strict and not fixed_all:
            raise FixBug(f"{what} a second time still changes the file: its fixes do not converge")


def fix_passes(file: Path, unsafe: bool, choices, what: str) -> bool:
    """What `lint --fix FILE` does (cli.run_fixes): lint, describe with the edits, write the
    changes, up to the command line's number of passes. True when one more pass (a second
    `--fix`) would change nothing."""
    from kubelint_ports.cli import MAX_FIX_PASSES
    from kubelint_ports.fixes import changes, describe, reserved_ports_of, unified_diff

    policies = all_policies()
    reserved = reserved_ports_of(policies)
    for _ in range(MAX_FIX_PASSES + 1):  # the last pass is the second `--fix`: it only looks
        report = linted(file, policies, what)
        try:
            found = changes(describe(report, edits=True, reserved=reserved, choices=choices), unsafe=unsafe)
            for change in found:
                unified_diff(change)  # `--diff` prints each change
        except Exception as error:  # noqa: BLE001 (that is the finding)
            raise FixBug(f"{what}: describing or applying the fixes raised {type(error).__name__}: {error}") from error
        if not found:
            return True
        for change in found:
            if Path(change.file).resolve() != file.resolve():
                raise FixBug(f"{what} would write {change.file}, which is not the linted file")
            Path(change.file).write_bytes(change.new)
    return False


def linted(file: Path, policies, what: str):
    from kubelint_ports.engine import LintOptions, lint_paths

    try:
        report = lint_paths([str(file)], LintOptions(jobs=1), policies=policies)
    except Exception as error:  # noqa: BLE001
        raise FixBug(f"{what}: lint_paths raised {type(error).__name__}: {error}") from error
    internal = [d for d in report.diagnostics if d.internal]
    if internal:
        raise FixBug(f"{what}: internal error: {internal[0].message}")
    return report


_POLICIES: list = []


def all_policies():
    """Every built-in policy, the ones off by default too: every fixable rule gets its chance."""
    if not _POLICIES:
        from kubelint_ports.policies import builtin_policies

        _POLICIES.append(tuple(builtin_policies()))
    return _POLICIES[0]


def composes(data: bytes) -> bool:
    """Whether PyYAML composes every document of `data` (no tree is expanded: aliases stay shared).
    Text past the loading budgets (deep nesting would overflow libyaml's C stack) counts as not."""
    import yaml

    from kubelint_ports.loading import budgets

    try:
        budgets.check_text(data, budgets.DEFAULT_LIMITS)
        for _ in yaml.compose_all(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            pass
    except (yaml.YAMLError, RecursionError, ValueError):
        return False
    return True
