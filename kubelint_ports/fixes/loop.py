"""`lint --fix` and `--diff` end to end: plan the fixes in memory (`fixes.apply.Planner`, linting
again between passes), then either the unified diff `--diff` prints, or the files `--fix` writes
(`fixes.write`, every file or none), and the lines said on stderr about it (docs/fix.md).

The command line passes plain values in (the run's paths, options and policies, its fix
arguments, the configuration's fix choices) and prints what comes back: this module prints
nothing, exits nothing and reads no command line.
"""

from __future__ import annotations

from typing import Sequence

from kubelint_ports.findings import Report
from kubelint_ports.records import record

MAX_FIX_PASSES = 4  # passes of one plan: a fix left out for overlapping another is made on the next


@record(frozen=True, slots=True)
class FixRun:
    """What one `--fix` or `--diff` did, for the command line to print, in this order: `before`
    on stderr, `patch` on stdout, `after` on stderr. `failure`: why `--fix` wrote nothing (or not
    everything; then nothing else is said)."""

    report: Report  # the lint of the planned texts: what `--fix` leaves
    changed: bool  # the plan changes a file (`--diff` exits 1)
    before: tuple[str, ...] = ()  # `--diff`: where to apply the patch
    patch: str = ""  # `--diff`: the unified diff of every change
    after: tuple[str, ...] = ()  # how many findings were (would be) fixed, each fix not made and why, the notes
    failure: str = ""


def run_fixes(report: Report, paths: Sequence[str], options, policies: Sequence, args, *, choices,
              quiet: bool = False) -> FixRun:
    """Plan the fixes of `report` (the lint of `paths` with `options` and `policies`) and print
    (`args.diff`) or write them. `args`: what the command line said, read as `unsafe_fixes`,
    `diff` and `show_fixes`; `choices`: the configuration's fix choices (`fixes.Choices`)."""
    from kubelint_ports.engine import lint_paths
    from kubelint_ports.fixes import reserved_ports_of
    from kubelint_ports.fixes.apply import Planner, fix_roots, outcome_lines, patch_of
    from kubelint_ports.fixes.write import WriteFailure, write_changes

    def relint() -> Report:
        return lint_paths(paths, options, policies=policies)

    roots = fix_roots(paths)
    planner = Planner(relint, unsafe=args.unsafe_fixes, reserved=reserved_ports_of(report), choices=choices,
                      roots=roots, passes=MAX_FIX_PASSES,
                      presence=frozenset(policy.id for policy in policies if policy.presence))
    plan = planner.plan(report)
    changed = bool(plan.changes)
    if args.diff:
        base, patch = patch_of(plan, roots)
        before = (f"kubelint-ports: apply with `git apply` (or `patch -p1`) in {base}",) if changed and not quiet else ()
        return FixRun(plan.report, changed, before, patch,
                      tuple(outcome_lines(plan, plan.report, plan.notes, args, quiet)))
    try:
        write_changes(plan.changes)
    except WriteFailure as failure:
        return FixRun(plan.report, changed, failure=str(failure))
    return FixRun(plan.report, changed, after=tuple(outcome_lines(plan, plan.report, plan.notes, args, quiet)))
