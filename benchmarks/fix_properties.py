"""Check the promises of `lint --fix` on real Helm charts (issue 32): figures and PASS/FAIL, no timing.

    python benchmarks/fix_properties.py --corpus-dir /tmp/corpus --entry traefik --entry consul:clients-hostports
    python benchmarks/fix_properties.py path/to/chart:my-values.yaml,more-values.yaml --namespace web
    python benchmarks/fix_properties.py --corpus-dir /tmp/corpus --entry podinfo --extra podinfo:quoted=/tmp/quoted.yaml
    python benchmarks/fix_properties.py --entry traefik:nodeport --lint-arg=--node-port-range=30000-30100

The charts come from the corpus of benchmarks/real_charts.yaml (`--entry NAME` runs every values
set of the entry, `--entry NAME:SET` one of them; the corpus is CORPUS/OWNER/NAME, populated as
`python benchmarks/real_charts.py --fetch-hint` or `--from-git` says, and dependencies are placed
the way real_charts.py does), from `--extra ENTRY:LABEL=FILE[,FILE]` (one more values set for an
entry, made of these files alone, with the entry's chart and namespace: e.g. values that quote a
hostPort or make two nodePorts collide so that something is fixed), or from positional `CHART[:VALUES,VALUES]`
arguments (any chart directory and its values files). `--lint-arg` adds an argument to every lint
command (a narrow `--node-port-range` makes the nodePorts of the real values sets fixable).

Each chart, values set and mode (`safe`: `--fix`; `unsafe`: `--fix --unsafe-fixes`; --modes picks)
is run in a fresh temporary directory WORK/run-*/ that holds two identical copies, `diff/` and `fix/`,
each with an empty `.git` at its top (the copy is the repository root): the chart as `chart/`, the
values files given outside the chart as `values/NN-NAME` (values files inside the chart, such as
ci/*.yaml, stay where they are in the chart copy). Every command runs with the copy as its current
directory and relative paths. Then:

1. `--diff is what --fix writes`: `lint --diff` in diff/ writes nothing; its diff is applied with
   `patch -p1` in the directory its stderr names ("apply with `git apply` (or `patch -p1`) in
   DIR"); `lint --fix` in fix/; the two trees are byte for byte equal, and "would fix N findings
   in M files" says the same N and M as "fixed N findings in M files".
2. `never worse`: `lint --format json` of fix/ after the fix has no finding, keyed by (rule,
   namespace/kind/name, fieldPath) and counted, that the lint before did not have, except a KP101
   on a field that had another finding before (an unquoted hostPort reveals KP101); and no input
   error that was not there before.
3. `converges`: a second `lint --fix` (same mode) on fix/ says "fixed 0 findings in 0 files" and
   changes no byte; after `--unsafe-fixes`, a plain `--fix` then says the same.
4. `no damage`: every file the fix changed that parsed as YAML before (values files) still parses
   (PyYAML, every document); no file was added to or removed from the copy; nothing outside the
   copy changed (a sentinel file beside the copies, the source chart and the values files given).

Per run it prints: findings before (and after), the findings a plain lint marks fixable for the mode
(a fix with no `notApplied`; a plain lint does not work out the plan, so --fix may still withdraw
some, and "not applied" counts those marked with a reason), "would fix" and "fixed" (N/M), the second pass's fixed N/M, and PASS/FAIL per
invariant with the details of a failure (the diff, the differing files, the new findings), and at
the end a table by chart (runs, failures and the figures summed over its values sets, per mode).
Exit 1 when any invariant fails, 2 when a run could not be made (a crash, no JSON). --report
writes every run as JSON. --keep keeps the temporary copies (to reproduce a failure by hand).
"""

from __future__ import annotations

import argparse
import collections
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import real_charts  # noqa: E402  (benchmarks/real_charts.py: the corpus definition and its helpers)

WOULD = re.compile(r"would fix (\d+) findings? in (\d+) files?")
FIXED = re.compile(r"fixed (\d+) findings? in (\d+) files?")
APPLY_IN = re.compile(r"apply with `git apply` \(or `patch -p1`\) in (.+?)\s*$", re.M)


class Case:
    def __init__(self, label: str, chart: Path, values: list[Path], namespace: str | None):
        self.label = label
        self.chart = chart.resolve()
        self.values = [v.resolve() for v in values]
        self.namespace = namespace


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root (not .git, not following directory links) by relative path."""
    files = {}
    for directory, dirs, names in os.walk(root):
        if Path(directory) == root and ".git" in dirs:
            dirs.remove(".git")
        for name in names:
            path = Path(directory) / name
            files[str(path.relative_to(root))] = path.read_bytes() if not path.is_symlink() else b"->" + os.readlink(path).encode()
    return files


def digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for path in paths:
        if path.is_dir():
            for rel, data in sorted(tree(path).items()):
                h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
        elif path.exists():
            h.update(str(path).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def parses(data: bytes) -> str | None:
    """None when the text reads as YAML (every document), else the error."""
    try:
        for _ in yaml.safe_load_all(data.decode("utf-8-sig")):
            pass
        return None
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        return str(error).splitlines()[0]


def run(command: list[str], cwd: Path, stdin: bytes | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """stdout stays bytes (a diff keeps its CRLF line ends: text mode would turn them into LF); stderr is text."""
    done = subprocess.run(command, cwd=cwd, input=stdin, capture_output=True, timeout=timeout, check=False)
    done.stderr = done.stderr.decode("utf-8", "replace")
    return done


def findings_of(kubelint: list[str], base: list[str], cwd: Path) -> dict:
    done = run([*kubelint, *base, "--format", "json", "--fail-on", "never"], cwd)
    try:
        data = json.loads(done.stdout.decode("utf-8"))
    except ValueError:
        raise RuntimeError(f"no JSON from {' '.join(base)} (exit {done.returncode}): {done.stderr.strip()[-1500:]}")
    return data


def key(finding: dict) -> tuple[str, str, str]:
    obj = finding.get("object") or {}
    return (finding["rule"], f"{obj.get('namespace') or ''}/{obj.get('kind')}/{obj.get('name')}", finding.get("fieldPath") or "")


def unified(old: dict[str, bytes], new: dict[str, bytes], a: str = "a", b: str = "b", limit: int = 60) -> str:
    lines = []
    for rel in sorted(set(old) | set(new)):
        if old.get(rel) == new.get(rel):
            continue
        before = old.get(rel, b"").decode("utf-8", "replace").splitlines(keepends=True)
        after = new.get(rel, b"").decode("utf-8", "replace").splitlines(keepends=True)
        lines += difflib.unified_diff(before, after, f"{a}/{rel}", f"{b}/{rel}", n=1)
    text = "".join(lines)
    cut = text.splitlines()
    return "\n".join(cut[:limit] + ([f"... ({len(cut) - limit} more lines)"] if len(cut) > limit else []))


def prepare_copy(case: Case, root: Path, extra: list[str]) -> list[str]:
    """The chart and its values in root (an empty .git at its top); the lint arguments, relative."""
    (root / ".git").mkdir(parents=True)
    shutil.copytree(case.chart, root / "chart", symlinks=False)
    args = ["lint", "chart"]
    for index, values in enumerate(case.values):
        if values.is_relative_to(case.chart):
            args += ["-f", str(Path("chart") / values.relative_to(case.chart))]
        else:
            target = root / "values" / f"{index:02d}-{values.name}"
            target.parent.mkdir(exist_ok=True)
            shutil.copyfile(values, target)
            args += ["-f", str(target.relative_to(root))]
    if case.namespace:
        args += ["--namespace", case.namespace]
    return args + ["-j", "1", *extra]


def check(case: Case, mode: str, kubelint: list[str], work: Path, keep: bool, extra: list[str]) -> dict:
    base = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    flags = ["--unsafe-fixes"] if mode == "unsafe" else []
    result: dict = {"label": case.label, "mode": mode, "chart": str(case.chart), "values": [str(v) for v in case.values],
                    "workdir": str(base), "invariants": {}, "details": {}}
    inv, details = result["invariants"], result["details"]
    sentinel = base / "outside.yaml"
    sentinel.write_text("outside: the copies\n", encoding="utf-8")
    outside_before = digest([case.chart, *case.values])
    diff_root, fix_root = base / "diff", base / "fix"
    args = prepare_copy(case, diff_root, extra)
    if prepare_copy(case, fix_root, extra) != args:
        raise RuntimeError("the two copies differ in arguments")
    original = tree(diff_root)
    result["command"] = " ".join(["kubelint-ports", *args, "--fix", *flags])

    before = findings_of(kubelint, args, diff_root)
    live = [f for f in before["findings"] if not f.get("suppressed")]
    result["before"] = len(live)
    result["before_errors"] = len(before.get("errors", []))
    allowed = {"safe"} if mode == "safe" else {"safe", "unsafe"}
    marked = [f for f in live if (f.get("fix") or {}).get("applicability") in allowed]
    result["fixable"] = sum(1 for f in marked if not f["fix"].get("notApplied"))
    result["marked_not_applied"] = len(marked) - result["fixable"]

    # 1. --diff is what --fix writes
    problems = []
    diffed = run([*kubelint, *args, "--diff", *flags], diff_root)
    would = WOULD.search(diffed.stderr)
    result["would_fix"] = [int(would.group(1)), int(would.group(2))] if would else None
    if tree(diff_root) != original:
        problems.append("--diff wrote to the copy:\n" + unified(original, tree(diff_root)))
    if not would:
        problems.append(f"no 'would fix N findings in M files' on stderr (exit {diffed.returncode}): {diffed.stderr.strip()[-800:]}")
    if diffed.returncode not in (0, 1) or (diffed.returncode == 1) != bool(diffed.stdout.strip()):
        problems.append(f"--diff exit {diffed.returncode} with {'a' if diffed.stdout.strip() else 'no'} diff")
    result["diff"] = diffed.stdout.decode("utf-8", "replace")
    if diffed.stdout.strip():
        where = APPLY_IN.search(diffed.stderr)
        if not where:
            problems.append("no 'apply with `git apply` (or `patch -p1`) in DIR' on stderr")
            apply_dir = diff_root
        else:
            apply_dir = (diff_root / where.group(1)).resolve()
            result["apply_in"] = where.group(1)
        patched = run(["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch"], apply_dir, stdin=diffed.stdout)
        if patched.returncode:
            problems.append(f"patch -p1 in {apply_dir} failed (exit {patched.returncode}): "
                            f"{(patched.stdout.decode('utf-8', 'replace') + patched.stderr).strip()[-800:]}")
    fixed = run([*kubelint, *args, "--fix", *flags], fix_root)
    got = FIXED.search(fixed.stderr)
    result["fixed"] = [int(got.group(1)), int(got.group(2))] if got else None
    if not got:
        problems.append(f"no 'fixed N findings in M files' on stderr (exit {fixed.returncode}): {fixed.stderr.strip()[-800:]}")
    if fixed.returncode == 2:
        problems.append(f"--fix exit 2: {fixed.stderr.strip()[-800:]}")
    after_diff, after_fix = tree(diff_root), tree(fix_root)
    if after_diff != after_fix:
        problems.append("the patched diff/ and the fixed fix/ differ:\n" + unified(after_diff, after_fix, "diff+patch", "fix"))
    if would and got and result["would_fix"] != result["fixed"]:
        problems.append(f"would fix {result['would_fix']} but fixed {result['fixed']}")
    inv["1 diff==fix"], details["1 diff==fix"] = not problems, problems
    result["fix_diff"] = unified(original, after_fix)
    result["notes"] = [line for line in fixed.stderr.splitlines() if "fix not applied" in line]

    # 2. never worse
    problems = []
    after = findings_of(kubelint, args, fix_root)
    after_live = [f for f in after["findings"] if not f.get("suppressed")]
    result["after"] = len(after_live)
    fields_before = {(k[1], k[2]) for k in map(key, live)}
    new = collections.Counter(map(key, after_live)) - collections.Counter(map(key, live))
    revealed = []
    for (rule, obj, field), count in sorted(new.items()):
        if rule == "KP101" and (obj, field) in fields_before:
            revealed.append(f"{rule} {obj} {field} (x{count}, revealed: the field had another finding)")
            continue
        where = [f"{f.get('file')}:{f.get('line')}: {f.get('message', '')[:200]}" for f in after_live if key(f) == (rule, obj, field)]
        problems.append(f"new {rule} on {obj} at {field} (x{count}): {where[0] if where else ''}")
    old_errors = collections.Counter(e.get("message") for e in before.get("errors", []))
    for message, count in (collections.Counter(e.get("message") for e in after.get("errors", [])) - old_errors).items():
        problems.append(f"new input error (x{count}): {message}")
    result["revealed"] = revealed
    inv["2 never worse"], details["2 never worse"] = not problems, problems

    # 3. converges
    problems = []
    second = run([*kubelint, *args, "--fix", *flags], fix_root)
    again = FIXED.search(second.stderr)
    result["second_fixed"] = [int(again.group(1)), int(again.group(2))] if again else None
    if result["second_fixed"] != [0, 0]:
        problems.append(f"second --fix: {again.group(0) if again else second.stderr.strip()[-800:]}")
    after_second = tree(fix_root)
    if after_second != after_fix:
        problems.append("the second --fix changed:\n" + unified(after_fix, after_second, "first", "second"))
    if mode == "unsafe":
        # what --fix --unsafe-fixes wrote holds no safe fix either: a plain --fix writes nothing
        third = run([*kubelint, *args, "--fix"], fix_root)
        safe_again = FIXED.search(third.stderr)
        result["safe_after_unsafe"] = [int(safe_again.group(1)), int(safe_again.group(2))] if safe_again else None
        if result["safe_after_unsafe"] != [0, 0]:
            problems.append(f"a plain --fix after --fix --unsafe-fixes: {safe_again.group(0) if safe_again else third.stderr.strip()[-800:]}")
        if tree(fix_root) != after_second:
            problems.append("a plain --fix after --fix --unsafe-fixes changed:\n" + unified(after_second, tree(fix_root), "unsafe", "safe"))
    inv["3 converges"], details["3 converges"] = not problems, problems

    # 4. no damage: YAML still YAML, nothing outside the copy
    problems = []
    changed = sorted(rel for rel in set(original) | set(after_fix) if original.get(rel) != after_fix.get(rel))
    result["changed_files"] = changed
    for rel in changed:
        if rel not in original or rel not in after_fix:
            problems.append(f"{rel} {'added' if rel not in original else 'removed'} by --fix")
            continue
        if parses(original[rel]) is None and (error := parses(after_fix[rel])) is not None:
            problems.append(f"{rel} read as YAML before, no longer does: {error}")
    if sentinel.read_text(encoding="utf-8") != "outside: the copies\n":
        problems.append("the sentinel beside the copies changed")
    extra = sorted(p.name for p in base.iterdir() if p.name not in ("diff", "fix", "outside.yaml"))
    if extra:
        problems.append(f"new entries beside the copies: {extra}")
    if digest([case.chart, *case.values]) != outside_before:
        problems.append("the source chart or a source values file changed")
    inv["4 no damage"], details["4 no damage"] = not problems, problems

    if not keep and all(inv.values()):
        shutil.rmtree(base)
    return result


def show(result: dict) -> None:
    def nm(pair):
        return "-" if pair is None else f"{pair[0]}/{pair[1]}"
    verdicts = "  ".join(f"{name.split(' ', 1)[0]}:{'PASS' if ok else 'FAIL'}" for name, ok in result["invariants"].items())
    print(f"  {result['label'][:58]:58} {result['mode']:6} before {result['before']:3} (after {result['after']:3})  "
          f"fixable {result['fixable']:2} (+{result['marked_not_applied']} not applied)  would {nm(result['would_fix']):5} "
          f"fixed {nm(result['fixed']):5} second {nm(result['second_fixed']):5}  {verdicts}")
    for name, problems in result["details"].items():
        for problem in problems:
            print(f"      FAIL {name}: " + problem.replace("\n", "\n        "))
    if any(not ok for ok in result["invariants"].values()):
        print(f"      reproduce in {result['workdir']}/fix (or a fresh copy): {result['command']}")


def cases_from_corpus(args, parser) -> list[Case]:
    definition = real_charts.load_definition(args.definition)
    corpus_dir = args.corpus_dir.resolve()
    corpus = real_charts.Corpus(definition, corpus_dir, corpus_dir / real_charts.WORK)
    extras: dict[str, list[tuple[str, list[Path]]]] = collections.defaultdict(list)
    for spec in args.extra or []:
        name, _, rest = spec.partition(":")
        label, _, files = rest.partition("=")
        if not files:
            parser.error(f"--extra {spec}: ENTRY:LABEL=FILE[,FILE] expected")
        extras[name].append((label, [Path(f) for f in files.split(",")]))
    wanted: dict[str, set[str] | None] = {}
    for spec in args.entry or []:
        name, _, set_name = spec.partition(":")
        if set_name:
            if wanted.get(name, set()) is not None:
                wanted.setdefault(name, set()).add(set_name)
        else:
            wanted[name] = None
    for name in extras:
        wanted.setdefault(name, set())
    cases = []
    for name, sets in wanted.items():
        if name not in corpus.entries:
            parser.error(f"no such entry: {name}")
        entry = corpus.entries[name]
        if entry.get("kind", "chart") not in ("chart", "archive"):
            parser.error(f"{name} is a {entry.get('kind')}, not a chart")
        state = corpus.prepare(name)
        for placed in state["placed"]:
            print(f"{name}: dependency placed in charts/: {placed}")
        if state.get("absent"):
            print(f"{name}: {state['absent']} (skipped)")
            continue
        chart = state["path"]
        for declared in entry.get("values") or [{"name": "defaults"}]:
            # a set is picked by its name in real_charts.yaml (a `ci:` set by that name, or by ci/FILE)
            for value_set in real_charts.expand_sets({**entry, "values": [declared]}, chart):
                selected = sets is None or declared["name"] in sets or value_set["name"] in sets
                if not selected or value_set.get("missing"):
                    continue
                cases.append(Case(f"{name} {value_set['name']}", chart, corpus.values_files(entry, value_set, chart), entry.get("namespace")))
        for label, files in extras.get(name, []):
            cases.append(Case(f"{name} {label}", chart, files, entry.get("namespace")))
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("charts", nargs="*", metavar="CHART[:VALUES,...]", help="a chart directory and its values files")
    parser.add_argument("--namespace", help="release namespace for the positional charts")
    parser.add_argument("--corpus-dir", type=Path, default=Path("/tmp/corpus"), help="the corpus of real_charts.yaml (default /tmp/corpus)")
    parser.add_argument("--definition", type=Path, default=real_charts.DEFINITION)
    parser.add_argument("--entry", action="append", metavar="NAME[:SET]", help="an entry of real_charts.yaml (all its sets, or one; repeatable)")
    parser.add_argument("--extra", action="append", metavar="ENTRY:LABEL=FILE[,FILE]", help="one more values set for an entry (repeatable)")
    parser.add_argument("--modes", default="safe,unsafe", help="safe, unsafe or both (default safe,unsafe)")
    parser.add_argument("--kubelint", help="the command to run (default: kubelint-ports beside this Python)")
    parser.add_argument("--lint-arg", action="append", default=[], metavar="ARG",
                        help="an argument added to every lint command, e.g. --lint-arg=--node-port-range=30000-30100 (repeatable)")
    parser.add_argument("--work", type=Path, help="where the temporary copies go (default: a new temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep every copy (failed runs' copies are always kept)")
    parser.add_argument("--report", type=Path, help="write every run as JSON here")
    args = parser.parse_args(argv)

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or set(modes) - {"safe", "unsafe"}:
        parser.error("--modes: safe, unsafe or safe,unsafe")
    cases = cases_from_corpus(args, parser) if (args.entry or args.extra) else []
    for spec in args.charts:
        chart, _, values = spec.partition(":")
        if not (Path(chart) / "Chart.yaml").is_file():
            parser.error(f"{chart}: no Chart.yaml")
        files = [Path(v) for v in values.split(",") if v]
        cases.append(Case(f"{chart}{':' + values if values else ''}", Path(chart), files, args.namespace))
    if not cases:
        parser.error("nothing to check: give CHART arguments or --entry")
    kubelint = real_charts.kubelint_command(args.kubelint)
    version = run([*kubelint, "--version"], Path.cwd()).stdout.decode("utf-8", "replace").strip()
    work = (args.work or Path(tempfile.mkdtemp(prefix="fix-properties-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(f"{version or kubelint[0]}; copies under {work}" + (f"; every lint with {' '.join(args.lint_arg)}" if args.lint_arg else "") + "\n")
    started = time.monotonic()
    results, crashed = [], 0
    for case in cases:
        for mode in modes:
            try:
                result = check(case, mode, kubelint, work, args.keep, args.lint_arg)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
                crashed += 1
                print(f"  {case.label[:58]:58} {mode:6} COULD NOT RUN: {error}")
                results.append({"label": case.label, "mode": mode, "crash": str(error)})
                continue
            show(result)
            results.append(result)
    checked = [r for r in results if "invariants" in r]
    print(f"\nby chart: {'chart':44} {'runs':>4} {'fail':>4} {'before':>6} {'fixable':>7} {'would':>5} {'fixed':>5} {'2nd':>3}  (N summed over sets; safe | unsafe)")
    charts: dict[str, dict[str, list[dict]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in checked:
        charts[r["chart"]][r["mode"]].append(r)
    for chart, by_mode in charts.items():
        cells = []
        for mode in modes:
            rs = by_mode.get(mode, [])
            cells.append(f"{len(rs):4} {sum(1 for r in rs if not all(r['invariants'].values())):4} {sum(r['before'] for r in rs):6} "
                         f"{sum(r['fixable'] for r in rs):7} {sum((r['would_fix'] or [0])[0] for r in rs):5} "
                         f"{sum((r['fixed'] or [0])[0] for r in rs):5} {sum((r['second_fixed'] or [0])[0] for r in rs):3}")
        name = os.path.relpath(chart, args.corpus_dir.resolve()) if chart.startswith(str(args.corpus_dir.resolve())) else chart
        print(f"          {name[-44:]:44} " + " | ".join(cells))
    failed = [r for r in checked if not all(r["invariants"].values())]
    by_invariant = collections.Counter(name for r in checked for name, ok in r["invariants"].items() if not ok)
    print(f"\n{len(checked)} runs checked ({len(cases)} chart/values sets x {len(modes)} modes), {len(failed)} with a failure"
          + (f" ({', '.join(f'{n}: {c}' for n, c in sorted(by_invariant.items()))})" if by_invariant else "")
          + f", {crashed} could not run; {sum(1 for r in checked if r['fixed'] and r['fixed'][0])} runs fixed something, "
          f"{sum(r['fixed'][0] for r in checked if r['fixed'])} findings fixed in all; {time.monotonic() - started:.0f} s")
    if args.report:
        args.report.write_text(json.dumps({"tool": version, "runs": results}, indent=1, default=str), encoding="utf-8")
        print(f"report: {args.report}")
    return 2 if crashed else (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
