"""Whole-run benchmark against the PyYAML compose floor: figures, never assertions.

    python benchmarks/bench_lint.py                        # every corpus, 3 interleaved rounds
    python benchmarks/bench_lint.py --sizes 1k 10k --repeat 5

Generates the corpora with `gen_corpus.py` (seed 42; found beside the repository in
`shared/bench/`, or `--generator PATH`) under `--work` (default /tmp/kubelint-bench):

    1k      1,000 workloads, 50 nodes          10k     10,000 workloads, 500 nodes
    50k     50,000 workloads, 2,500 nodes      50k5k   50,000 workloads, 5,000 nodes

Then, per corpus and round, it runs four commands in turn, each a fresh process:
  floor     the PyYAML C-compose floor: read each file, `yaml.compose_all(text, Loader=CSafeLoader)`,
            walk the nodes (one process, the cyclic GC off as the linter runs)
  lint      `kubelint-ports lint manifests --nodes cluster/nodes.yaml --format json -o FILE`
            (its default: one worker process per processor for large inputs)
  lint -j1  the same with `--jobs 1`
  page      `kubelint-ports ports ... --format html -o FILE` (its peak RSS over the input bytes)
and prints medians of wall and CPU seconds (user + system, worker processes included), the
median of the per-round ratios lint / floor, peak RSS of the largest process and of all of them
together (sampled; pages shared after fork count in each) over the input bytes, t(10k)/t(1k) and
t(50k)/t(10k), the checks (one in-process run: the rules, then the positions of their findings)
in seconds and as a share of the `--jobs 1` run, and the
planted problems found (an error at the planted line) and decoys reported. Cold starts are timed
on one small file and on 100 files. With `--busy [N]`, each corpus is linted again with the
default `--jobs` and with `--jobs 1` while N processes (default: one per processor) spin, as on a
shared CI runner, and the default's note says how many workers it started and why.

Start-up (what every pre-commit run pays), with bytecode as installed, needs no corpus:

    python benchmarks/bench_lint.py --startup               # 21 interleaved rounds
    python benchmarks/bench_lint.py --startup --repeat 41

runs, in turn and each a fresh process, `python -c "import yaml, json"` (the yardstick: the
interpreter and the parser alone), `lint` of one small plain file (examples/clean.yaml),
`--help` and `--version`, and prints each one's median wall and CPU seconds and the median of
its per-round ratios to the yardstick, with the load average before and after. (A corpus run
prints these too, after the corpora.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPORA = {"1k": (1000, 50), "10k": (10000, 500), "50k": (50000, 2500), "50k5k": (50000, 5000)}
FLOOR = """\
import gc, os, sys, yaml
from yaml.nodes import MappingNode, SequenceNode
gc.disable()
nodes = 0
for directory, subdirs, files in os.walk(sys.argv[1]):
    subdirs.sort()
    for name in sorted(files):
        if name.endswith((".yaml", ".yml", ".json")):
            with open(os.path.join(directory, name), "rb") as handle:
                text = handle.read()
            for root in yaml.compose_all(text, Loader=yaml.CSafeLoader):
                stack = [root]
                while stack:
                    node = stack.pop()
                    nodes += 1
                    if isinstance(node, MappingNode):
                        for key, value in node.value:
                            stack.append(key)
                            stack.append(value)
                    elif isinstance(node, SequenceNode):
                        stack.extend(node.value)
print(nodes)
"""


def best_of(repeat: int, function):
    """(fewest seconds, result) of `repeat` calls in this process (benchmarks/bench_node.py uses it)."""
    import gc

    timings, result = [], None
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        result = function()
        timings.append(time.perf_counter() - started)
    return min(timings), result


def find_generator(given: Path | None) -> Path:
    candidates = [given] if given else [ROOT.parent / "shared" / "bench" / "gen_corpus.py",
                                        ROOT.parent.parent / "shared" / "bench" / "gen_corpus.py"]
    for candidate in candidates:
        if candidate and candidate.is_file():
            return candidate
    sys.exit(f"gen_corpus.py not found (looked at {', '.join(map(str, candidates))}); pass --generator PATH")


def corpus(work: Path, name: str, generator: Path) -> Path:
    directory = work / name
    workloads, nodes = CORPORA[name]
    marker = directory / "corpus.json"
    if not marker.exists():
        subprocess.run([sys.executable, str(generator), "--workloads", str(workloads), "--nodes", str(nodes),
                        "--out", str(directory), "--seed", "42"], check=True, stdout=subprocess.DEVNULL)
    return directory


def input_bytes(directory: Path) -> int:
    total = (directory / "cluster" / "nodes.yaml").stat().st_size
    for path in (directory / "manifests").rglob("*"):
        if path.is_file() and path.suffix in (".yaml", ".yml", ".json"):
            total += path.stat().st_size
    return total


class TreeMemory(threading.Thread):
    """Samples the summed RSS of a process and its children (Linux /proc; 0 elsewhere)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, False

    def run(self) -> None:
        while not self.done:
            self.peak = max(self.peak, self.sample())
            time.sleep(0.02)

    def sample(self) -> int:
        total = 0
        try:
            pids = [self.pid] + [int(child) for task in Path(f"/proc/{self.pid}/task").iterdir()
                                 for child in (task / "children").read_text().split()]
            for pid in pids:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except (OSError, ValueError):
            pass
        return total


def run(command: list[str], cwd: Path) -> dict:
    """Wall and CPU seconds of a whole process (its children included), its peak RSS (largest
    process) and the sampled peak of all its processes together."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampler = TreeMemory(process.pid)
    sampler.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    sampler.done = True
    stderr = process.stderr.read().decode(errors="replace")
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} failed ({process.returncode}):\n{stderr}")
    scale = 1024 if sys.platform != "darwin" else 1
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak": usage.ru_maxrss * scale,
            "tree": max(sampler.peak, usage.ru_maxrss * scale), "stderr": stderr}


def lint_command(directory: Path, output: Path, jobs: int | None) -> list[str]:
    command = [sys.executable, "-m", "kubelint_ports", "lint", "manifests", "--nodes", "cluster/nodes.yaml",
               "--format", "json", "-o", str(output)]
    return command + (["--jobs", str(jobs)] if jobs else [])


def page_command(output: Path) -> list[str]:
    """The port map as one HTML page: the whole lint run, then the page (memory: its peak RSS)."""
    return [sys.executable, "-m", "kubelint_ports", "ports", "manifests", "--nodes", "cluster/nodes.yaml",
            "--format", "html", "-o", str(output)]


class Spinners:
    """`count` processes that keep a processor busy each (a shared CI runner), for the rounds inside."""

    def __init__(self, count: int):
        self.count, self.processes = count, []

    def __enter__(self) -> Spinners:
        self.processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.count)]
        time.sleep(1.0)  # running before the first round
        return self

    def __exit__(self, *exc) -> None:
        for process in self.processes:
            process.kill()
            process.wait()


def busy_runner(directory: Path, work: Path, spinners: int, repeat: int) -> None:
    """The default (`--jobs 0`) against `--jobs 1` while `spinners` processes keep processors busy:
    the default must not start workers that find no free processor."""
    commands = {"lint": [*lint_command(directory, work / "busy.json", None), "--statistics"],
                "lint -j1": [*lint_command(directory, work / "busy.j1.json", 1), "--statistics"]}
    runs: dict[str, list[dict]] = {key: [] for key in commands}
    with Spinners(spinners):
        for round_ in range(repeat):
            for key in (list(commands) if round_ % 2 == 0 else list(reversed(commands))):
                runs[key].append(run(commands[key], directory))
    said = sorted({line.split("note: ", 1)[-1].split(" (")[0] for r in runs["lint"] for line in r["stderr"].splitlines()
                   if "input read" in line})
    ratio = statistics.median(a["wall"] / b["wall"] for a, b in zip(runs["lint"], runs["lint -j1"]))
    print(f"\nbusy runner, {directory.name}: {spinners} processes spinning, {repeat} interleaved rounds, medians:")
    print(f"  lint (default jobs) {statistics.median(r['wall'] for r in runs['lint']):.2f} s wall "
          f"{statistics.median(r['cpu'] for r in runs['lint']):.2f} s cpu; --jobs 1 "
          f"{statistics.median(r['wall'] for r in runs['lint -j1']):.2f} s wall "
          f"{statistics.median(r['cpu'] for r in runs['lint -j1']):.2f} s cpu; default / --jobs 1 = {ratio:.3f} "
          f"(goal <= 1.05); the default said: {'; '.join(said) or 'nothing'}")


def planted(directory: Path, report: Path) -> tuple[int, int, int, int]:
    """(problems found, problems, decoys reported, decoys): an error finding at a planted line."""
    data = json.loads((directory / "planted.json").read_text())
    errors = {(f["file"].split("manifests/", 1)[-1], f["line"]) for f in json.loads(report.read_text())["findings"]
              if f["severity"] == "error"}

    def hit(entry) -> bool:
        return any((o["file"].split("manifests/", 1)[-1], o["line"]) in errors for o in entry["objects"])

    return (sum(map(hit, data["problems"])), len(data["problems"]), sum(map(hit, data["decoys"])),
            len(data["decoys"]))


def phases(directory: Path) -> dict:
    """One in-process run, --jobs 1: loading with the model, the rules, the findings' positions."""
    script = f"""
import gc, json, time
gc.disable()
from kubelint_ports.engine import LintOptions, load_cluster, positions, to_finding
from kubelint_ports.checks import CHECKS
from kubelint_ports.policies import builtin_policies, enabled_by_default
started = time.perf_counter()
cluster, loaded, diagnostics = load_cluster(["manifests"], LintOptions(node_files=("cluster/nodes.yaml",), jobs=1))
loaded_at = time.perf_counter()
policies = enabled_by_default(builtin_policies())  # what a run without configuration uses
hits = [(hit, policy) for policy in policies if CHECKS[policy.check].reads == "cluster"
        for hit in CHECKS[policy.check].function(cluster, policy.params) if not getattr(hit.subject, "live", False)]
checked_at = time.perf_counter()
places = positions(hits)
findings = sorted({{to_finding(hit, policy, places) for hit, policy in hits}})
done = time.perf_counter()
print(json.dumps({{"load": loaded_at - started, "rules": checked_at - loaded_at, "positions": done - checked_at,
                  "documents": len(loaded.documents), "findings": len(findings)}}))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=directory, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def cold_start(work: Path, one_k: Path, repeat: int) -> tuple[float, float]:
    """Median wall seconds of `lint` on one small file, and on 100 small files."""
    hundred = work / "hundred"
    if not hundred.exists():
        files = sorted(p for p in (one_k / "manifests").rglob("*.yml"))[:100]
        hundred.mkdir()
        for index, path in enumerate(files):
            shutil.copy(path, hundred / f"{index:03}-{path.name}")
    one = ROOT / "examples" / "clean.yaml"
    timings: dict[str, list[float]] = {"one": [], "hundred": []}
    for _ in range(repeat):
        for key, target in (("one", one), ("hundred", hundred)):
            timings[key].append(run([sys.executable, "-m", "kubelint_ports", "lint", str(target)], work)["wall"])
    return statistics.median(timings["one"]), statistics.median(timings["hundred"])


def compile_package() -> None:
    """As installed: with bytecode (an environment may say not to write it; pip compiles it)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "kubelint_ports")], check=True)


STARTUP_GOALS = {"lint examples/clean.yaml": "<= 0.10 s and <= 2.5x", "lint, with a config file": "<= 0.10 s and <= 2.5x",
                 "--help": "<= 0.10 s"}


def startup(work: Path, repeat: int) -> None:
    """Start-up figures against `python -c "import yaml, json"`, interleaved, ratios per round."""
    compile_package()
    base = [sys.executable, "-m", "kubelint_ports"]
    # A repository with a configuration file, as most pre-commit users have: the file is read and
    # validated on every run.
    configured = work / "configured"
    configured.mkdir(parents=True, exist_ok=True)
    (configured / ".kubelint-ports.yaml").write_text("paths: [.]\nfail-on: warning\nrules:\n  host-network: on\n")
    (configured / "clean.yaml").write_bytes((ROOT / "examples" / "clean.yaml").read_bytes())
    commands = {
        'python -c "import yaml, json"': [sys.executable, "-c", "import yaml, json"],
        "lint examples/clean.yaml": [*base, "lint", str(ROOT / "examples" / "clean.yaml")],
        "lint, with a config file": [*base, "lint", "clean.yaml"],
        "--help": [*base, "--help"],
        "--version": [*base, "--version"],
    }
    yardstick = next(iter(commands))
    where = {"lint, with a config file": configured}
    for key, command in commands.items():  # warm the file cache; not counted
        run(command, where.get(key, work))
    runs: dict[str, list[dict]] = {key: [] for key in commands}
    for round_ in range(repeat):
        order = list(commands) if round_ % 2 == 0 else list(reversed(commands))
        for key in order:
            runs[key].append(run(commands[key], where.get(key, work)))
    print(f"\nstart-up, {repeat} interleaved rounds, medians (`python -m kubelint_ports ...`, with bytecode):")
    print(f"{'command':32} {'wall s':>7} {'cpu s':>6} {'wall / yardstick':>16}  goal (issue 26)")
    for key, timings in runs.items():
        ratio = statistics.median(a["wall"] / b["wall"] for a, b in zip(timings, runs[yardstick]))
        print(f"{key:32} {statistics.median(t['wall'] for t in timings):7.3f} "
              f"{statistics.median(t['cpu'] for t in timings):6.3f} {ratio:15.2f}x  {STARTUP_GOALS.get(key, '')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", choices=list(CORPORA), default=list(CORPORA))
    parser.add_argument("--repeat", type=int, default=None,
                        help="interleaved rounds per corpus, default 3 (with --startup: of the start-up, default 21)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "kubelint-bench")
    parser.add_argument("--generator", type=Path, help="gen_corpus.py (default: ../shared/bench/gen_corpus.py)")
    parser.add_argument("--busy", type=int, nargs="?", const=0, default=None, metavar="N",
                        help="also time the default --jobs against --jobs 1 while N processes (default: one per "
                             "processor) keep processors busy")
    parser.add_argument("--startup", action="store_true",
                        help="only the start-up figures (no corpus); --repeat rounds, default 21")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.startup:
        print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} processors, Python "
              f"{platform.python_version()}, load average {os.getloadavg()[0]:.2f} at start")
        startup(args.work, args.repeat or 21)
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
        return
    args.repeat = args.repeat or 3
    generator = find_generator(args.generator)
    floor_script = args.work / "floor.py"
    floor_script.write_text(FLOOR)
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} processors, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, Python {platform.python_version()}"
          f", load average {os.getloadavg()[0]:.2f} at start")
    rows, medians = [], {}
    for name in args.sizes:
        directory = corpus(args.work, name, generator)
        size = input_bytes(directory)
        output = args.work / f"{name}.json"
        runs: dict[str, list[dict]] = {"floor": [], "lint": [], "lint -j1": [], "page": []}
        commands = {"floor": [sys.executable, str(floor_script), "manifests"],
                    "lint": lint_command(directory, output, None),
                    "lint -j1": lint_command(directory, output.with_suffix(".j1.json"), 1),
                    "page": page_command(output.with_suffix(".html"))}
        for round_ in range(args.repeat):
            order = list(commands) if round_ % 2 == 0 else list(reversed(commands))
            for key in order:
                runs[key].append(run(commands[key], directory))
        same = output.read_bytes() == output.with_suffix(".j1.json").read_bytes()
        found, problems, noisy, decoys = planted(directory, output)
        split = phases(directory)

        def median(key: str, field: str) -> float:
            return statistics.median(run_[field] for run_ in runs[key])

        def ratio(key: str, field: str) -> float:
            return statistics.median(a[field] / b[field] for a, b in zip(runs[key], runs["floor"]))

        medians[name] = median("lint", "wall")
        rows.append((name, size, {key: (median(key, "wall"), median(key, "cpu")) for key in runs},
                     ratio("lint", "wall"), ratio("lint", "cpu"), ratio("lint -j1", "wall"), ratio("lint -j1", "cpu"),
                     max(r["peak"] for r in runs["lint"]), max(r["tree"] for r in runs["lint"]),
                     max(r["peak"] for r in runs["lint -j1"]), split, (found, problems, noisy, decoys),
                     same, max(r["peak"] for r in runs["page"])))
    print(f"\n{'corpus':7} {'input':>8} {'floor s':>8} {'lint s':>7} {'cpu s':>6} {'-j1 s':>6} "
          f"{'wall/floor':>10} {'cpu/floor':>9} {'-j1 wall':>8} {'-j1 cpu':>7} {'RSS/input':>9} {'all procs':>9} "
          f"{'-j1 RSS':>7} {'checks':>14} {'planted':>9} {'decoys':>6} {'-j1 same':>8}")
    for (name, size, times, wall_ratio, cpu_ratio, j1_wall, j1_cpu, peak, tree, j1_peak, split,
         (found, problems, noisy, decoys), same, page_peak) in rows:
        checks = f"{split['rules']:.2f}+{split['positions']:.2f}s {100 * (split['rules'] + split['positions']) / times['lint -j1'][0]:.1f}%"
        print(f"{name:7} {size / 1e6:6.1f}MB {times['floor'][0]:8.2f} {times['lint'][0]:7.2f} {times['lint'][1]:6.2f} "
              f"{times['lint -j1'][0]:6.2f} {wall_ratio:9.2f}x {cpu_ratio:8.2f}x {j1_wall:7.2f}x {j1_cpu:6.2f}x "
              f"{peak / size:8.2f}x {tree / size:8.2f}x {j1_peak / size:6.2f}x {checks:>14} "
              f"{found:>4}/{problems:<4} {noisy:>2}/{decoys:<3} {'yes' if same else 'NO':>8}")
        print(f"{'':7} peak RSS: lint {peak / 2**20:.0f} MiB (all processes {tree / 2**20:.0f} MiB), "
              f"-j1 {j1_peak / 2**20:.0f} MiB; {split['documents']:,} documents, {split['findings']:,} findings")
        print(f"{'':7} ports --format html: {times['page'][0]:.2f} s wall, peak RSS {page_peak / 2**20:.0f} MiB = "
              f"{page_peak / size:.2f}x input (issue 26: <= 2x at 10k)")
    if args.busy is not None:
        for name in args.sizes:
            busy_runner(args.work / name, args.work, args.busy or os.cpu_count() or 1, args.repeat)
    for small, big in (("1k", "10k"), ("10k", "50k")):
        if small in medians and big in medians:
            print(f"t({big})/t({small}) = {medians[big] / medians[small]:.2f}")
    if "1k" in args.sizes:
        compile_package()
        one, hundred = cold_start(args.work, args.work / "1k", max(args.repeat, 5))
        print(f"cold start: one small file {one:.3f} s, 100 files {hundred:.3f} s (median wall)")
    startup(args.work, max(args.repeat, 11))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
