"""Lint the real-chart corpus of issue 24 and count what comes out: figures, never assertions.

    python benchmarks/real_charts.py --corpus-dir /tmp/corpus          # every entry, set and group
    python benchmarks/real_charts.py --only traefik --only cilium        # some entries (and their groups)
    python benchmarks/real_charts.py --fetch-hint                        # how to populate the corpus
    python benchmarks/real_charts.py --write-values                      # rewrite real_charts_values/

`benchmarks/real_charts.yaml` names each repository at a commit, the charts and folders taken
from it and the values sets to lint them with. The corpus directory holds the pinned copies as
CORPUS/OWNER/NAME (a `git clone` checked out at the commit: see --fetch-hint); nothing is
downloaded. An entry whose copy is missing is reported as "not present". `--from-git TEMPLATE`
fills the corpus from local git directories instead (`git archive COMMIT PATHS`; TEMPLATE names
the git directory of a repository with {owner} and {name}, e.g. '/srv/mirrors/{owner}/{name}.git').

For every entry and values set it runs `kubelint-ports lint PATH --format json` (the chart's
release namespace from the entry, `-f` for each values file) and prints the exit code, the input
errors and the findings by rule and severity; each group (charts deployed to one cluster) is one
run through a generated config file whose `charts:` gives every member its own values, release
and namespace. Then a table by rule over all runs, and a JSON report (--report, default CORPUS/real_charts_report.json) with every run's
command, exit code, errors and findings (rule, severity, object, file:line, message).

Preparing a chart, the script changes the corpus copy the way `helm dependency build` would:
dependencies that Chart.yaml declares and charts/ lacks are copied there from the pinned paths
the entry names (reported per entry). Archives are extracted, and inline values written, under
CORPUS/.real-charts-work/; group configs are CORPUS/.real-charts-GROUP.yaml (paths in a config
must stay inside the folder that holds it).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
DEFINITION = HERE / "real_charts.yaml"
VALUES_DIR = HERE / "real_charts_values"
SEVERITIES = ("error", "warning", "note")
WORK = ".real-charts-work"


def load_definition(path: Path) -> dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def repo_dir(corpus: Path, repository: str) -> Path:
    owner, name = repository.split("/", 1)
    return corpus / owner / name


def fetch_hint(definition: dict, corpus: Path) -> str:
    lines = [f"Populate {corpus} with a pinned copy of each repository (any copy of the same commit will do):", ""]
    for repository, spec in definition["repositories"].items():
        target = repo_dir(corpus, repository)
        lines.append(f"git clone --filter=blob:none https://github.com/{repository} {target} && "
                     f"git -C {target} checkout --quiet {spec['commit']}")
    lines += ["", "The entries need only these paths of each checkout (a sparse checkout is enough):"]
    for repository, spec in definition["repositories"].items():
        lines.append(f"  {repository}: {' '.join(spec.get('paths') or ['.'])}")
    return "\n".join(lines)


def populate_from_git(definition: dict, corpus: Path, template: str, only: set[str] | None) -> None:
    """Extract each repository's paths at its commit from local git directories (no network)."""
    wanted = None
    if only:
        wanted = {entry["repository"] for entry in definition["entries"] if entry["name"] in only}
    for repository, spec in definition["repositories"].items():
        if wanted is not None and repository not in wanted:
            continue
        owner, name = repository.split("/", 1)
        git_dir = template.format(owner=owner, name=name)
        target = repo_dir(corpus, repository)
        if not os.path.isdir(git_dir):
            print(f"  {repository}: no git directory at {git_dir}", file=sys.stderr)
            continue
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", f"--git-dir={git_dir}", "archive", spec["commit"], *(spec.get("paths") or ["."])],
                                 capture_output=True, check=False)
        if archive.returncode:
            print(f"  {repository}: git archive failed: {archive.stderr.decode(errors='replace').strip()}", file=sys.stderr)
            continue
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
        print(f"  {repository} @ {spec['commit'][:12]} -> {target}")


def set_file_name(entry: str, set_name: str) -> str:
    return f"{entry}--{set_name}.yaml"


def write_values(definition: dict, directory: Path) -> list[Path]:
    """The inline values of every set, one file each (the files committed beside this script)."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for entry in definition["entries"]:
        for value_set in entry.get("values") or []:
            if value_set.get("values"):
                path = directory / set_file_name(entry["name"], value_set["name"])
                header = (f"# {entry['name']} ({entry['repository']} {entry['path']}), values set "
                          f"{value_set['name']!r}: written by benchmarks/real_charts.py --write-values from "
                          f"benchmarks/real_charts.yaml\n")
                if value_set.get("note"):
                    header += f"# {value_set['note']}\n"
                path.write_text(header + yaml.safe_dump(value_set["values"], sort_keys=False), encoding="utf-8")
                written.append(path)
    return written


def expand_sets(entry: dict, chart: Path) -> list[dict]:
    """One run per values set; `ci: all` is one run per ci/*.yaml of the chart."""
    runs = []
    for value_set in entry.get("values") or [{"name": "defaults"}]:
        ci = value_set.get("ci")
        if ci is None:
            runs.append(value_set)
            continue
        names = sorted(p.name for p in (chart / "ci").glob("*.yaml")) if ci == "all" else list(ci)
        if not names and ci == "all":
            runs.append({**value_set, "missing": f"no ci/*.yaml in {chart}"})
        for name in names:
            runs.append({**value_set, "name": f"ci/{name}", "files": [f"ci/{name}", *value_set.get("files", [])]})
    return runs


class Corpus:
    def __init__(self, definition: dict, root: Path, work: Path):
        self.definition = definition
        self.root = root
        self.work = work
        self.entries = {entry["name"]: entry for entry in definition["entries"]}
        self.prepared: dict[str, dict] = {}

    def commit_state(self, repository: str) -> str:
        """'ok', 'differs: SHA' or 'unverified' (no .git: an extracted copy)."""
        directory = repo_dir(self.root, repository)
        if not (directory / ".git").exists():
            return "unverified (no .git)"
        head = subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
        want = self.definition["repositories"][repository]["commit"]
        return "ok" if head.stdout.strip() == want else f"differs: HEAD is {head.stdout.strip()[:12]}"

    def prepare(self, name: str) -> dict:
        """The path to lint (relative to the corpus), or why it is absent, and what was placed."""
        if name in self.prepared:
            return self.prepared[name]
        entry = self.entries[name]
        source = repo_dir(self.root, entry["repository"]) / entry["path"]
        kind = entry.get("kind", "chart")
        state: dict = {"kind": kind, "placed": [], "commit": None}
        if not source.exists() and not source.is_symlink():
            state["absent"] = f"not present: {source}"
        elif kind == "chart" and not (source / "Chart.yaml").is_file():
            state["absent"] = f"not present: {source}/Chart.yaml"
        else:
            state["commit"] = self.commit_state(entry["repository"])
            chart = source
            if kind == "archive":
                target = self.work / "archives" / source.name.removesuffix(".tgz")
                if target.exists():
                    shutil.rmtree(target)
                target.mkdir(parents=True)
                with tarfile.open(source) as archive:
                    archive.extractall(target, filter="data")
                inner = [p for p in target.iterdir() if (p / "Chart.yaml").is_file()]
                if len(inner) != 1:
                    state["absent"] = f"the archive {source} holds no single chart"
                chart = inner[0] if inner else target
            if "absent" not in state and kind in ("chart", "archive"):
                for dependency in entry.get("dependencies") or []:
                    placed = self.place_dependency(chart, dependency)
                    if placed:
                        state["placed"].append(placed)
            state["path"] = chart
        self.prepared[name] = state
        return state

    def place_dependency(self, chart: Path, dependency: dict) -> str | None:
        charts = chart / "charts"
        target = charts / dependency.get("as", dependency["name"])
        present = {p.name for p in charts.iterdir()} if charts.is_dir() else set()
        if any(item == target.name or item.startswith(f"{dependency['name']}-") and item.endswith(".tgz") for item in present):
            return None
        source = repo_dir(self.root, dependency["repository"]) / dependency["path"]
        if not (source / "Chart.yaml").is_file():
            return f"{dependency['name']}: not present ({source})"
        charts.mkdir(exist_ok=True)
        shutil.copytree(source, target, symlinks=True)
        version = f", version {dependency['version']}" if dependency.get("version") else ""
        return f"{dependency['name']} <- {dependency['repository']} {dependency['path']}{version}"

    def values_files(self, entry: dict, value_set: dict, chart: Path) -> list[Path]:
        files = [chart / name for name in value_set.get("files", [])]
        if value_set.get("values"):
            path = self.work / "values" / set_file_name(entry["name"], value_set["name"].replace("/", "_"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(yaml.safe_dump(value_set["values"], sort_keys=False), encoding="utf-8")
            files.append(path)
        return files


def run_lint(command: list[str], cwd: Path, timeout: float) -> dict:
    report = cwd / WORK / "report.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    if report.exists():
        report.unlink()
    started = time.monotonic()
    try:
        done = subprocess.run([*command, "--format", "json", "-o", str(report)], cwd=cwd, capture_output=True,
                              text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"exit": None, "seconds": timeout, "crash": f"timed out after {timeout:.0f} s"}
    result = {"exit": done.returncode, "seconds": round(time.monotonic() - started, 2)}
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        result["crash"] = f"no JSON report ({error}); stderr: {done.stderr.strip()[-2000:]}"
        return result
    result["summary"] = data.get("summary", {})
    result["errors"] = [{"file": e.get("file"), "line": e.get("line"), "message": e.get("message"),
                         "internal": e.get("internal")} for e in data.get("errors", [])]
    result["findings"] = [{
        "rule": f["rule"], "name": f.get("name"), "severity": f["severity"], "suppressed": f.get("suppressed"),
        "object": "{namespace}/{kind}/{name}".format(namespace=(f.get("object") or {}).get("namespace") or "",
                                                   kind=(f.get("object") or {}).get("kind"),
                                                   name=(f.get("object") or {}).get("name")),
        "location": f"{f.get('file')}:{f.get('line')}:{f.get('column')}",
        "fieldPath": f.get("fieldPath"), "template": f.get("template"), "message": f.get("message"), "short": f.get("short"),
        "related": [f"{r.get('file')}:{r.get('line')}: {r.get('message')}" for r in f.get("related") or []],
    } for f in data.get("findings", [])]
    if done.stderr.strip():
        result["stderr"] = done.stderr.strip()[-2000:]
    return result


def counts(findings: list[dict]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = collections.defaultdict(lambda: collections.Counter())
    for finding in findings:
        if not finding.get("suppressed"):
            table[finding["rule"]][finding["severity"]] += 1
    return {rule: dict(table[rule]) for rule in sorted(table)}


def print_run(label: str, result: dict) -> None:
    if result.get("absent"):
        print(f"  {label:58} not present ({result['absent']})")
        return
    if result.get("crash"):
        print(f"  {label:58} exit {result.get('exit')}  CRASH: {result['crash'][:300]}")
        return
    summary = result.get("summary", {})
    by_rule = counts(result.get("findings", []))
    rules = " ".join(f"{rule}:" + "/".join(f"{n}{s[0].upper()}" for s, n in sorted(sev.items())) for rule, sev in by_rule.items())
    print(f"  {label:58} exit {result['exit']}  objects {summary.get('objects', 0):4}  "
          f"input errors {len(result.get('errors', []))}  E{summary.get('error', 0)} W{summary.get('warning', 0)} "
          f"N{summary.get('note', 0)}  {result['seconds']:.1f}s  {rules}")
    for error in result.get("errors", []):
        print(f"      input error: {error['file']}:{error['line']}: {error['message'][:400]}")


def lint_entries(corpus: Corpus, kubelint: list[str], only: set[str] | None, timeout: float, jobs: int) -> list[dict]:
    runs = []
    for entry in corpus.definition["entries"]:
        if only and entry["name"] not in only:
            continue
        state = corpus.prepare(entry["name"])
        header = f"{entry['name']}  ({entry['repository']} {entry['path']})"
        print(header)
        if state.get("commit") and state["commit"] != "ok":
            print(f"  commit {corpus.definition['repositories'][entry['repository']]['commit'][:12]}: {state['commit']}")
        for placed in state["placed"]:
            print(f"  dependency placed in charts/: {placed}")
        if state.get("absent"):
            result = {"entry": entry["name"], "set": "*", "absent": state["absent"]}
            print_run("*", result)
            runs.append(result)
            continue
        path = state["path"]
        kind = state["kind"]
        target = path if kind != "tgz" else repo_dir(corpus.root, entry["repository"]) / entry["path"]
        sets = expand_sets(entry, path) if kind in ("chart", "archive") else (entry.get("values") or [{"name": "as-is"}])
        for value_set in sets:
            if value_set.get("missing"):
                result = {"entry": entry["name"], "set": value_set["name"], "absent": value_set["missing"]}
                print_run(value_set["name"], result)
                runs.append(result)
                continue
            command = [*kubelint, "lint", os.path.relpath(target, corpus.root), "-j", str(jobs)]
            if entry.get("namespace") and kind in ("chart", "archive", "tgz"):
                command += ["--namespace", entry["namespace"]]
            if kind in ("chart", "archive"):
                for values in corpus.values_files(entry, value_set, path):
                    command += ["-f", os.path.relpath(values, corpus.root)]
            result = {"entry": entry["name"], "set": value_set["name"], "command": command, **run_lint(command, corpus.root, timeout)}
            print_run(value_set["name"], result)
            runs.append(result)
    return runs


def lint_groups(corpus: Corpus, kubelint: list[str], only: set[str] | None, timeout: float, jobs: int) -> list[dict]:
    runs = []
    for group in corpus.definition.get("groups") or []:
        members = group["members"]
        if only and not any(member["entry"] in only for member in members):
            continue
        print(f"group {group['name']}: " + ", ".join(f"{m['entry']} ({m['values']})" for m in members))
        charts, paths, absent = [], [], []
        for member in members:
            entry = corpus.entries[member["entry"]]
            state = corpus.prepare(member["entry"])
            if state.get("absent"):
                absent.append(f"{member['entry']}: {state['absent']}")
                continue
            value_set = next((s for s in expand_sets(entry, state["path"]) if s["name"] == member["values"]), None)
            if value_set is None:
                absent.append(f"{member['entry']}: no values set {member['values']!r}")
                continue
            relative = os.path.relpath(state["path"], corpus.root)
            paths.append(relative)
            charts.append({"path": relative, "release-name": entry["name"], "namespace": entry.get("namespace", "default"),
                           "values": [os.path.relpath(p, corpus.root) for p in corpus.values_files(entry, value_set, state["path"])]})
        if absent:
            result = {"group": group["name"], "absent": "; ".join(absent)}
            print_run("*", result)
            runs.append(result)
            continue
        config = corpus.root / f".real-charts-{group['name']}.yaml"
        config.write_text(yaml.safe_dump({"charts": charts}, sort_keys=False), encoding="utf-8")
        command = [*kubelint, "lint", *paths, "--config", config.name, "-j", str(jobs)]
        result = {"group": group["name"], "members": members, "command": command, **run_lint(command, corpus.root, timeout)}
        print_run("(together)", result)
        runs.append(result)
    return runs


def print_totals(runs: list[dict]) -> None:
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for run in runs:
        for rule, severities in counts(run.get("findings", [])).items():
            table[rule].update(severities)
    print()
    print(f"{'rule':8} {'error':>7} {'warning':>8} {'note':>6}")
    for rule in sorted(table):
        print(f"{rule:8} {table[rule]['error']:7} {table[rule]['warning']:8} {table[rule]['note']:6}")
    total = collections.Counter()
    for severities in table.values():
        total.update(severities)
    print(f"{'total':8} {total['error']:7} {total['warning']:8} {total['note']:6}")
    linted = [r for r in runs if not r.get("absent")]
    print(f"\n{len(runs)} runs: {len(linted)} linted, {len(runs) - len(linted)} not present, "
          f"{sum(1 for r in linted if r.get('errors'))} with input errors "
          f"({sum(len(r.get('errors', [])) for r in linted)} errors), {sum(1 for r in linted if r.get('crash'))} crashed")


def kubelint_command(given: str | None) -> list[str]:
    if given:
        return given.split()
    beside = Path(sys.executable).with_name("kubelint-ports")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "kubelint_ports"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus-dir", type=Path, default=Path("/tmp/corpus"), help="pinned copies as OWNER/NAME (default /tmp/corpus)")
    parser.add_argument("--definition", type=Path, default=DEFINITION)
    parser.add_argument("--fetch-hint", action="store_true", help="print how to populate the corpus (git clone + checkout) and exit")
    parser.add_argument("--from-git", metavar="TEMPLATE", help="first extract each repository from a local git directory, e.g. '/srv/git/{owner}/{name}.git'")
    parser.add_argument("--write-values", action="store_true", help=f"rewrite {VALUES_DIR.name}/ from the inline values and exit")
    parser.add_argument("--only", action="append", metavar="ENTRY", help="lint only these entries (and the groups holding one)")
    parser.add_argument("--no-groups", action="store_true", help="skip the groups")
    parser.add_argument("--report", type=Path, help="JSON report (default CORPUS/real_charts_report.json)")
    parser.add_argument("--kubelint", help="the command to run (default: kubelint-ports beside this Python)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per lint run")
    parser.add_argument("--jobs", type=int, default=1, help="kubelint-ports --jobs (default 1: a modest run)")
    args = parser.parse_args(argv)

    definition = load_definition(args.definition)
    corpus_dir = args.corpus_dir.resolve()
    if args.fetch_hint:
        print(fetch_hint(definition, corpus_dir))
        return 0
    if args.write_values:
        for path in write_values(definition, VALUES_DIR):
            print(path.relative_to(HERE.parent))
        return 0
    only = set(args.only) if args.only else None
    if only and only - {entry["name"] for entry in definition["entries"]}:
        parser.error(f"no such entry: {', '.join(sorted(only - {e['name'] for e in definition['entries']}))}")
    if args.from_git:
        populate_from_git(definition, corpus_dir, args.from_git, only)
    if not corpus_dir.is_dir():
        print(f"no corpus at {corpus_dir}: every entry is not present.\n"
              f"Run `python {Path(__file__).name} --fetch-hint` for the commands that populate it.")
    corpus = Corpus(definition, corpus_dir, corpus_dir / WORK)
    report_path = args.report or corpus_dir / "real_charts_report.json"
    kubelint = kubelint_command(args.kubelint)
    version = subprocess.run([*kubelint, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"{version or kubelint[0]}; corpus {corpus_dir}\n")
    started = time.monotonic()
    if not corpus_dir.is_dir():
        runs = [{"entry": entry["name"], "set": "*", "absent": f"not present: no corpus at {corpus_dir}"}
                for entry in definition["entries"] if not only or entry["name"] in only]
    else:
        runs = lint_entries(corpus, kubelint, only, args.timeout, args.jobs)
        if not args.no_groups:
            print()
            runs += lint_groups(corpus, kubelint, only, args.timeout, args.jobs)
    print_totals(runs)
    absent = [r for r in runs if r.get("absent")]
    if absent:
        print(f"\n{len(absent)} runs had no input: `python {Path(__file__).name} --fetch-hint` prints how to populate {corpus_dir}.")
    report = {"tool": version, "corpus": str(corpus_dir), "definition": str(args.definition),
              "seconds": round(time.monotonic() - started, 1), "runs": runs}
    if not report_path.parent.is_dir():
        report_path = Path("real_charts_report.json")
    report_path.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    print(f"report: {report_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
