"""`lint --fix` and `--diff` from one plan, worked out in memory before anything is written
(docs/fix.md, "What --fix promises").

A plan makes passes: each describes the findings of the last lint, takes the chosen fixes
(`run.changes`) and lints again with the texts planned so far standing in for the files
(`loading.files.PLANNED`), so a fix left out for overlapping another is made on the next pass.
`--diff` prints the plan's final texts against the originals; `--fix` writes exactly those bytes
(`fixes.write`, all or nothing). Each pass's changes are screened first, and a fix that fails is
withdrawn (its finding keeps the fix, `blocked` saying why) and the plan made again without it:

- its file is outside the run's root (`fix_roots`): nothing outside is ever written (a values
  file the user named with `-f` or in the configuration's `charts:` counts as inside);
- its text would not compose again (PyYAML, the run's budgets), would hold another number of
  YAML documents, would change a character outside its edits, or a document it does not edit
  would read differently;
- it does not settle: the finding is still there once its fix is made (a self-colliding
  hostNetwork pod moved 8080 -> 8076 -> ...), or the file's fixes still change it after
  `MAX_PASSES` passes (then every fix of that file is withdrawn). So a second `--fix` on what
  the first wrote finds the same withdrawals and writes nothing;
- it makes the run worse: the last lint of the plan has a finding (by rule, object and field,
  not by line) that the run did not have, and the fix brought it (`made_worse`), or an input
  that read before no longer does (a chart that no longer renders, a Kustomize build that fails:
  `new_problems`).

Helm and kustomize read their files from disk, where the planned texts are not: a chart renders
from a private copy holding them (`helm_render.planned_chart`), and a Kustomize build builds one
(`kustomize_build.planned_tree`), so their plans are made and judged like a plain manifest's.
"""

from __future__ import annotations

import os

import yaml

from dataclasses import field

from kubelint_ports.findings import Finding, Report
from kubelint_ports.fixes.plan import Choices
from kubelint_ports.fixes.run import FileChange, Places, changes, describe
from kubelint_ports.loading import ManifestLoader, budgets, files
from kubelint_ports.records import record

MAX_PASSES = 4  # a fix left out for overlapping another is made on the next pass
MAX_PLANS = 4  # a plan that withdrew fixes is made again; past this many, no fix is made at all
NEW_FINDINGS_NAMED = 3  # a withdrawn fix's reason names this many of the new findings it brought

# A finding across passes: its rule, object and field by the names of the items on its way (a
# pass's edits shift its line, a removal the indexes of the items after it).
Key = tuple


def key_of(finding: Finding) -> Key:
    return finding.rule_id, finding.subject, finding.identity_path or finding.field_path


@record(slots=True)
class FixPlan:
    """What `--diff` prints and `--fix` writes: each changed file's original and final bytes and
    the findings fixed there (every pass); the report of the last lint, described."""

    changes: list[FileChange]
    report: Report  # the lint of the final texts
    notes: tuple[str, ...] = ()
    withdrawn: dict = field(default_factory=dict)  # finding (key_of) -> why its fix is not made

    @property
    def fixed(self) -> int:
        return sum(len(change.fixed) for change in self.changes)


@record(slots=True)
class Attempt:
    plan: FixPlan | None
    withdrawals: dict


def fix_roots(paths) -> tuple[str, ...]:
    """Where `--fix` may write: the git work tree holding each linted path, else the directory
    named (a file's own directory). Real paths. A values file the user named is inside too
    (`Planner.named`, found on the report's charts)."""
    from kubelint_ports.sourceroot import git_work_tree

    roots: list[str] = []
    for path in paths:
        if path == "-" or not os.path.exists(path):
            continue
        # A file's own directory, not its symlink's target's: a link named is no root of its target.
        directory = os.path.realpath(path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path)))
        root = git_work_tree(directory) or directory
        if root not in roots:
            roots.append(root)
    return tuple(roots)


def diff_base(plan: FixPlan, roots: tuple[str, ...]) -> str:
    """Where the diff applies (`git apply`, `patch -p1`): the repository holding every changed
    file, else the current directory when it holds them all, else their common directory."""
    from kubelint_ports.sourceroot import git_work_tree

    reals = [os.path.realpath(change.file) for change in plan.changes]
    tops = {git_work_tree(os.path.dirname(real)) for real in reals}
    if len(tops) == 1 and None not in tops:
        return tops.pop()
    here = os.path.realpath(os.getcwd())
    if all(files.inside(here, real) for real in reals):
        return here
    return os.path.commonpath([os.path.dirname(real) for real in reals]) if reals else here


def patch_of(plan: FixPlan, roots: tuple[str, ...]) -> tuple[str, str]:
    """(the directory to apply it in, as the user would type it, and the unified diff of every
    change, its paths relative to that directory)."""
    from kubelint_ports.fixes.run import unified_diff

    base = diff_base(plan, roots)
    shown = os.path.relpath(base)
    return (base if shown.startswith("..") else shown), "".join(unified_diff(change, base) for change in plan.changes)


class Planner:
    def __init__(self, relint, *, unsafe: bool, reserved=frozenset(), choices: Choices = Choices(),
                 roots: tuple[str, ...] = (), passes: int = MAX_PASSES, presence=frozenset()) -> None:
        self.passes = passes
        self.relint = relint  # () -> Report: the run linted again (the planned texts read in place of the files)
        self.unsafe = unsafe
        self.reserved = reserved
        self.choices = choices
        self.roots = roots
        self.presence = presence  # the ids of the rules that flag a field for being set (`made_worse`)
        self.named: set[str] = set()  # real paths of the values files the user named: inside the root

    def plan(self, report: Report) -> FixPlan:
        withdrawn: dict[Key, str] = {}
        before = {key_of(finding) for finding in report.findings}  # suppressed ones too: not new
        self.named = named_values_files(report)
        for _ in range(MAX_PLANS):
            attempt = self.attempt(report, withdrawn)
            if attempt.plan is not None:
                worse = made_worse(before, attempt.plan, self.presence) or new_problems(report, attempt.plan)
                if not worse:
                    attempt.plan.withdrawn = withdrawn
                    return attempt.plan
                attempt.withdrawals = worse
            withdrawn.update(attempt.withdrawals)
        # Still withdrawing: no fix at all, each finding's fix says why.
        self.described(report, withdrawn, every=f"its fixes did not settle in {MAX_PLANS} plans")
        return FixPlan([], report, withdrawn=withdrawn)

    def described(self, report: Report, withdrawn: dict, every: str = "") -> Report:
        describe(report, edits=True, reserved=self.reserved, choices=self.choices)
        if withdrawn or every:
            report.findings = [withdraw(finding, every or withdrawn.get(key_of(finding), "")) for finding in report.findings]
        return report

    def attempt(self, first: Report, withdrawn: dict) -> Attempt:
        planned = files.PLANNED
        planned.clear()
        final: dict[str, bytes] = {}  # real path -> its last planned bytes (kept once `planned` is cleared)
        originals: dict[str, FileChange] = {}  # real path -> the file's first change (its original bytes)
        fixed: dict[str, list[Finding]] = {}  # real path -> the findings fixed there, every pass
        claimed: dict[Key, int] = {}  # a fixed finding of a file the lint reads again -> how many may remain
        report = first
        try:
            for number in range(self.passes + 1):
                self.described(report, withdrawn)
                if number:
                    still = unsettled(report, claimed)
                    if still:
                        return Attempt(None, still)
                found = changes(report, self.unsafe)
                if not found:
                    break
                refused = self.screen(found)
                if refused:
                    return Attempt(None, refused)
                if number == self.passes:
                    return Attempt(None, not_settled(found, fixed, self.passes))
                claimed = {}
                reported = counted(report)
                for change in found:
                    real = os.path.realpath(change.file)
                    originals.setdefault(real, change)
                    planned[real] = final[real] = change.new
                    fixed.setdefault(real, []).extend(change.fixed)
                    for finding in change.fixed:
                        key = key_of(finding)
                        claimed[key] = claimed.get(key, reported.get(key, 0)) - 1
                report = self.relint()
        finally:
            planned.clear()
        result = [FileChange(change.path, change.file, change.old, final[real], tuple(fixed[real]))
                  for real, change in sorted(originals.items()) if final[real] != change.old]
        return Attempt(FixPlan(result, report), {})

    def screen(self, found: list[FileChange]) -> dict[Key, str]:
        """Why some of a pass's fixes must not be made: (finding -> reason)."""
        refused: dict[Key, str] = {}
        for change in found:
            real = os.path.realpath(change.file)
            if real not in self.named and not any(files.inside(root, real) for root in self.roots):
                where = " or ".join(self.roots) or "the linted directories"
                reason = (f"{change.path} is outside {where}, the run's root (the repository, else the "
                          f"directories named): --fix writes nothing outside it")
                refused.update((key_of(finding), reason) for finding in change.fixed)
                continue
            old, new = decoded(change.old), decoded(change.new)
            problem = corruption(old, new, change.edits)
            if problem is None:
                continue
            culprits = [finding for finding in change.fixed
                        if corruption(old, *single(old, finding)) is not None] or list(change.fixed)
            refused.update((key_of(finding), problem) for finding in culprits)
        return refused


def outcome_lines(plan: FixPlan, report: Report, notes, args, quiet: bool) -> list[str]:
    """What `--fix` (or `--diff`) says on stderr once the plan is written (or printed): how many
    findings it fixed in how many files, each of them with `--show-fixes`, then each fix not made
    and why (only those this run would have made: a safe run is silent on unsafe fixes), then the
    plan's notes. `args`: the command line's FixArgs."""
    verb = "would fix" if args.diff else "fixed"
    files = f"{len(plan.changes)} file{'s' if len(plan.changes) != 1 else ''}"
    lines = [] if quiet else [f"kubelint-ports: {verb} {plan.fixed} finding{'s' if plan.fixed != 1 else ''} in {files}"]
    if args.show_fixes:
        made = sorted((finding for change in plan.changes for finding in change.fixed),
                      key=lambda finding: (finding.location.path, finding.location.line, finding.location.column))
        lines += [f"kubelint-ports: {verb} {finding.location}: {finding.rule_id} {finding.fix.description}"
                  for finding in made]
    for finding in report.findings:
        fix = finding.fix
        if fix is not None and fix.blocked and (fix.applicability == "safe" or args.unsafe_fixes):
            lines.append(f"kubelint-ports: note: {finding.location}: {finding.rule_id} fix not applied: {fix.blocked}")
    return lines + [f"kubelint-ports: note: {note}" for note in notes]


def made_worse(before: set, plan: FixPlan, presence=frozenset()) -> dict[Key, str]:
    """Invariant 2, never worse: the fixes behind each finding of the plan's last lint (the final
    texts) that the run did not have before, by rule, object and field (not by line: the fixes
    move lines), withdrawn with the finding named. A finding of a `presence` rule (KP101: the
    field is set) on the very field a fix made valid is revealed, not brought: the user wrote the
    hostPort, the quotes only kept the API server from accepting it."""
    fixed = [finding for change in plan.changes for finding in change.fixed]
    made_valid = {key_of(finding)[1:] for finding in fixed}
    brought: dict[Key, list[str]] = {}  # a fix -> the new findings it may have brought, named
    for finding in plan.report.findings:
        if finding.suppressed or key_of(finding) in before:
            continue
        if finding.rule_id in presence and key_of(finding)[1:] in made_valid:
            continue
        named = f"{finding.rule_id} on {finding.subject} at {finding.field_path or 'the object'} ({finding.location})"
        for culprit in culprits_of(finding, fixed, plan.changes):
            named_already = brought.setdefault(key_of(culprit), [])
            if named not in named_already:
                named_already.append(named)
    refused: dict[Key, str] = {}
    for key, names in brought.items():
        shown = "; ".join(names[:NEW_FINDINGS_NAMED])
        more = f" and {len(names) - NEW_FINDINGS_NAMED} more" if len(names) > NEW_FINDINGS_NAMED else ""
        refused[key] = (f"the fixed files would have {'a new finding' if len(names) == 1 else 'new findings'}, "
                        f"{shown}{more}: --fix never makes a run worse")
    return refused


def new_problems(first: Report, plan: FixPlan) -> dict[Key, str]:
    """Invariant 2 for what the inputs say, not the rules: a problem reading them (a chart that no
    longer renders, a Kustomize build that fails, YAML that no longer reads) that the run did not
    have. Compared by message without its place (the fixes move lines); blamed on the fixes of the
    files it names, else on every fix of the plan."""
    before = {diagnostic.message for diagnostic in first.diagnostics}
    new = [diagnostic for diagnostic in plan.report.diagnostics if diagnostic.message not in before]
    if not new:
        return {}
    refused: dict[Key, str] = {}
    for diagnostic in new:
        named = [change for change in plan.changes
                 if change.path == diagnostic.location.path or change.path in diagnostic.message]
        reason = (f"the fixed files would no longer read cleanly ({diagnostic.location.path}: "
                  f"{files.shortened(diagnostic.message)}): --fix never makes a run worse")
        for change in named or plan.changes:
            for finding in change.fixed:
                refused.setdefault(key_of(finding), reason)
    return refused


def culprits_of(new: Finding, fixed: list[Finding], changed) -> list[Finding]:
    """The fixes that may have brought `new`, the nearest first: those of its own field, else those
    of an object it names as a partner (the other side of a collision), else those of its own
    object, else those made in a file it or one of its related places is in, else every fix of the
    plan. The plan is made again without them; a culprit missed shows again then."""
    field = [finding for finding in fixed if finding.subject == new.subject and key_of(finding)[2] == key_of(new)[2]]
    if field:
        return field
    # A partner is "Kind/namespace/name/field" (engine.partners).
    named = [finding for finding in fixed if any(
        partner.startswith(f"{finding.subject.kind}/{finding.subject.namespace}/{finding.subject.name}/")
        for partner in new.partners)]
    own = [finding for finding in fixed if finding.subject == new.subject]
    if named or own:
        return named or own
    places = {new.location.path, *(related.path for related in new.related)}
    in_files = [finding for change in changed if change.path in places for finding in change.fixed]
    return in_files or fixed


def withdraw(finding: Finding, reason: str) -> Finding:
    from dataclasses import replace

    fix = finding.fix
    if not reason or fix is None or fix.blocked:
        return finding
    return replace(finding, fix=replace(fix, blocked=reason))


def counted(report: Report) -> dict[Key, int]:
    """How many findings the report holds of each key (several entries may repeat one port)."""
    seen: dict[Key, int] = {}
    for finding in report.findings:
        if not finding.suppressed:
            seen[key_of(finding)] = seen.get(key_of(finding), 0) + 1
    return seen


def unsettled(report: Report, claimed: dict[Key, int]) -> dict[Key, str]:
    """The fixed findings the lint after their fix still reports (more of them at that field than
    the pass left unfixed): their fix would be made again and again."""
    if not claimed:
        return {}
    seen = counted(report)
    return {key: "the finding is still there once its fix is made: a further --fix would change the file again"
            for key, may_remain in claimed.items() if seen.get(key, 0) > may_remain}


def not_settled(found: list[FileChange], fixed: dict[str, list[Finding]], passes: int) -> dict[Key, str]:
    """A file whose fixes still change it after all the passes keeps none of them."""
    refused: dict[Key, str] = {}
    for change in found:
        reason = f"the fixes of {change.path} still change it after {passes} passes: none of them is made"
        for finding in [*fixed.get(os.path.realpath(change.file), ()), *change.fixed]:
            refused[key_of(finding)] = reason
    return refused


def named_values_files(report: Report) -> set[str]:
    """The real paths of the values files the user named for the run's charts (`-f`, the
    configuration's `charts:` `values`): the user pointed the run at them, so they count as inside
    its root wherever they are. A chart's own `values.yaml` is not among them: it is inside the
    chart, which the root holds or not."""
    if report.cluster is None:
        return set()
    named: set[str] = set()
    for documents in Places(report.cluster).rendered.values():
        for document in documents:
            values = getattr(getattr(document, "source", None), "values", None)
            if values is None:
                continue
            passed = len(values.layers) - values.chart_layers()  # the first layers: the files passed
            named.update(os.path.realpath(values_file.path) for values_file, _ in values.layers[:passed]
                         if values_file.data is None)
    return named


def decoded(data: bytes) -> str:
    text = data.decode("utf-8")
    return text[1:] if text.startswith("\ufeff") else text


def single(old: str, finding: Finding) -> tuple[str, tuple]:
    edit = finding.fix.edits[0]
    return old[:edit.start] + edit.text + old[edit.end:], ((edit.start, edit.end, edit.text),)


def corruption(old: str, new: str, edits) -> str | None:
    """Why `new` must not replace `old`: a character outside `edits` ((start, end, text) in `old`,
    in order) changed, the text does not compose within the budgets, it holds another number of
    YAML documents, or a document no edit touches reads differently. None when it may."""
    if edits:
        before = after = 0
        for start, end, text in edits:
            kept = old[before:start]
            if new[after:after + len(kept)] != kept or new[after + len(kept):after + len(kept) + len(text)] != text:
                return "the fixed text would change characters outside the fix"
            after += len(kept) + len(text)
            before = end
        if new[after:] != old[before:]:
            return "the fixed text would change characters outside the fix"
    try:
        old_roots = list(budgets.compose_all(old, loader=ManifestLoader))
    except (yaml.YAMLError, ValueError):
        return None  # not YAML before either (a Helm template): its edits are checked above
    try:
        new_roots = list(budgets.compose_all(new, loader=ManifestLoader))
    except (yaml.YAMLError, ValueError) as error:
        return f"the fixed text would not read as YAML ({yaml_problem(error)})"
    if len(new_roots) != len(old_roots):
        return f"the fixed text would hold {len(new_roots)} YAML documents instead of {len(old_roots)}"
    for number, (was, now) in enumerate(zip(old_roots, new_roots), 1):
        if was is None or now is None:
            if (was is None) != (now is None):
                return f"YAML document {number} would become {'empty' if now is None else 'a node'}"
            continue
        span = (was.start_mark.index, was.end_mark.index)
        if edits and any(start <= span[1] and end >= span[0] for start, end, _ in edits):
            continue
        if not same_tree(was, now):
            return f"YAML document {number}, which no fix edits, would read differently"
    return None


def yaml_problem(error: Exception) -> str:
    """PyYAML's complaint, short: what and on which line (its own words, cut)."""
    problem = getattr(error, "problem", None) or str(error).split("\n")[0] or type(error).__name__
    mark = getattr(error, "problem_mark", None)
    where = f" on line {mark.line + 1}" if mark is not None else ""
    return files.shortened(f"{problem}{where}")


def same_tree(first: yaml.Node, second: yaml.Node) -> bool:
    """Whether two composed documents say the same: kinds, tags, scalars and shape (not places)."""
    stack = [(first, second)]
    entered: set[tuple[int, int]] = set()
    while stack:
        a, b = stack.pop()
        if (id(a), id(b)) in entered:
            continue
        entered.add((id(a), id(b)))
        if type(a) is not type(b) or a.tag != b.tag:
            return False
        if isinstance(a, yaml.ScalarNode):
            if a.value != b.value:
                return False
        elif len(a.value) != len(b.value):
            return False
        elif isinstance(a, yaml.MappingNode):
            for (key_a, value_a), (key_b, value_b) in zip(a.value, b.value):
                stack += [(key_a, key_b), (value_a, value_b)]
        else:
            stack += list(zip(a.value, b.value))
    return True
