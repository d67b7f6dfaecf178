"""The fuzzer's oracle for `lint --fix`: a manifest linted, its fixes planned by the real
`fixes.apply.Planner` (passes worked out in memory, each re-linted with the planned texts) and
written by the real writer (`fixes.write`) into a scratch copy, as `--fix` and `--fix
--unsafe-fixes` do (each on a fresh copy), in process.

`check_fix(data, scratch)` raises FixBug (an AssertionError, as every check of tests/fuzzing.py's
untrusted surfaces raises) when the tool fails on the input: an exception from linting, planning,
printing the diff or writing, an internal diagnostic, a change to a file other than the linted
one, a written file that no longer composes (PyYAML's `yaml.compose_all`) though the original did,
or (`strict`, the default: issue 32's promise, which holds now) a second `--fix` that still changes
the file.

`python tests/fuzzing_fix.py --count 3000 --seed 1 --save DIR` runs this oracle alone on inputs
made as tests/fuzzing.py makes them (a seed file, half of them mutated).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

FILE_NAME = "manifest.yaml"


class FixBug(AssertionError):
    """The tool failed on this input (not the input being refused: that is a clean diagnostic)."""


def check_fix(data: bytes, scratch: Path, *, strict: bool = True, node_port: str = "move") -> None:
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
        choices = Choices(node_port=node_port)
        fix_once(file, unsafe, choices, what)
        written = file.read_bytes()
        if written != data and original_composes and not composes(written):
            raise FixBug(f"{what} wrote a file that no longer composes as YAML ({len(data):,} bytes in)")
        if strict and fix_once(file, unsafe, choices, f"a second {what}"):
            raise FixBug(f"{what} a second time still changes the file: its fixes do not converge")


def fix_once(file: Path, unsafe: bool, choices, what: str) -> int:
    """What `lint --fix FILE` does (cli.run_fixes): lint, plan in memory, print the plan as
    `--diff` would, write it all or nothing. The number of files changed."""
    from kubelint_ports.cli import MAX_FIX_PASSES
    from kubelint_ports.fixes import reserved_ports_of
    from kubelint_ports.fixes.apply import Planner, fix_roots, patch_of
    from kubelint_ports.fixes.write import write_changes

    policies = all_policies()
    roots = fix_roots([str(file)])
    report = linted(file, policies, what)
    planner = Planner(lambda: linted(file, policies, what), unsafe=unsafe, reserved=reserved_ports_of(report),
                      choices=choices, roots=roots, passes=MAX_FIX_PASSES)
    try:
        plan = planner.plan(report)
        patch_of(plan, roots)  # `--diff` prints it
    except Exception as error:  # noqa: BLE001 (that is the finding)
        raise FixBug(f"{what}: planning the fixes raised {type(error).__name__}: {error}") from error
    for change in plan.changes:
        if Path(change.file).resolve() != file.resolve():
            raise FixBug(f"{what} would write {change.file}, which is not the linted file")
    try:
        write_changes(plan.changes)
    except Exception as error:  # noqa: BLE001
        raise FixBug(f"{what}: writing the plan raised {type(error).__name__}: {error}") from error
    return len(plan.changes)


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


def main() -> None:
    """This oracle alone, on inputs made as tests/fuzzing.py makes them; each input that fails is
    saved (with --save) and counted; exit 1 when any did."""
    import random
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import fuzzing

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="inputs to try")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--save", type=Path, default=None, help="directory for inputs that failed")
    parser.add_argument("--not-strict", action="store_true", help="do not fail when a second --fix changes the file")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    corpus = fuzzing.seed_corpus()
    failures, started = 0, time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kp-fuzz-fix-") as scratch:
        for number in range(args.count):
            data = fuzzing.mutate(rng.choice(corpus), rng, corpus) if rng.random() < 0.5 else rng.choice(corpus)
            node_port = rng.choice(("move", "remove"))
            try:
                check_fix(data, Path(scratch), strict=not args.not_strict, node_port=node_port)
            except Exception as error:  # noqa: BLE001 (FixBug, or anything else that escaped: both are findings)
                failures += 1
                print(f"input {number}: {type(error).__name__}: {str(error)[:300]}", flush=True)
                if args.save is not None:
                    args.save.mkdir(parents=True, exist_ok=True)
                    (args.save / f"fix-{args.seed}-{number}-{node_port}.yaml").write_bytes(data)
            if (number + 1) % 100 == 0:
                print(f"{number + 1} inputs, {failures} failed, {time.monotonic() - started:.0f} s", flush=True)
    print(f"{args.count} inputs, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
