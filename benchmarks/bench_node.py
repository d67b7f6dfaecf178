"""Node-snapshot benchmark: `kubelint-ports node` on a 200,000-line iptables-save, timed whole.

    python benchmarks/bench_node.py                        # generate, then 7 interleaved rounds
    python benchmarks/bench_node.py --repeat 11 --baseline /tmp/kubelint-ports-before

Writes, with `gen_iptables_save.py` (deterministic), OUT/node-1/iptables-save: kube-proxy in
iptables mode for 8,139 Services and the CNI portmap chains of 40 pods with hostPorts, 200,028
lines (22 MB), and OUT/node-1/ss; and OUT/small/node-1, the same for 60 Services (1,596 lines).
Then, in interleaved rounds, each command a fresh process with the repository first on sys.path:

  yardstick   python -c "import yaml, json"
  node small  kubelint-ports node OUT/small/node-1 --format json -o FILE   (start-up and little else)
  node        kubelint-ports node OUT/node-1 --format json -o FILE
  baseline    `node` with the source tree --baseline TREE instead (a `git worktree` of an older
              commit, say), whose report must be byte-identical

and prints medians of wall and CPU seconds (user + system) and of peak RSS, the goal (issue 26:
`node` in 0.7 s at most), the load average before and after, and one in-process run of each
tree split into read (detect and parse every dump), model (node state) and checks (every KP8xx
policy), best of 3, the cyclic GC paused as the command pauses it. Figures, never assertions.

Measured on the project's 2-core machine (Python 3.11.7, load average 1.4: other sessions'
tests winding down), `python benchmarks/bench_node.py --repeat 7 --baseline TREE`, TREE a
checkout of 65d5601, before the reader and the node model were reworked (issue 26):

    command                         wall s  cpu s peak RSS MiB
    python -c "import yaml, json"    0.033  0.032           17
    node small                       0.147  0.146           26
    node                             0.623  0.613          108
    baseline                         0.862  0.855          179
    reports of node and baseline byte-identical: yes

    in-process, best of 3 (CPU seconds):
    node       read 0.358, model 0.060, checks 0.006; 2 findings
    baseline   read 0.510, model 0.076, checks 0.006; 2 findings
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from bench_lint import run  # same folder: `python benchmarks/bench_node.py` puts it on sys.path

ROOT = Path(__file__).resolve().parents[1]
GOAL_SECONDS = 0.7
PHASES = """
import gc, json, time
gc.disable()  # as the node command runs (engine.collector_paused)
from kubelint_ports.engine import run_checks
from kubelint_ports.loading.snapshot import load_snapshot
from kubelint_ports.model.node_state import NodeSnapshots, build_node_state
from kubelint_ports.policies import builtin_policies

best = {}
for _ in range(3):
    started = time.process_time()
    snapshot, problems = load_snapshot("node-1")
    read_at = time.process_time()
    state = build_node_state(snapshot)
    model_at = time.process_time()
    findings = run_checks(NodeSnapshots([state]), builtin_policies(), reads="node-snapshot")
    done = time.process_time()
    assert not problems, problems
    for key, seconds in (("read", read_at - started), ("model", model_at - read_at), ("checks", done - model_at)):
        best[key] = min(best.get(key, seconds), seconds)
    del snapshot, state
best.update(findings=len(findings))
print(json.dumps(best))
"""


@contextmanager
def first_on_path(tree: Path):
    """`tree` first on the sys.path of the processes started meanwhile."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree)
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def phases(tree: Path, work: Path) -> dict:
    with first_on_path(tree):
        done = subprocess.run([sys.executable, "-c", PHASES], cwd=work, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/kubelint-ports-node-bench"))
    parser.add_argument("--repeat", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--baseline", type=Path, help="another source tree of kubelint-ports to time alike")
    args = parser.parse_args()
    # In a process of its own: a child forked from a process holding the generated lines would
    # count them in its peak RSS.
    for snapshot, services, pods in ((args.out / "node-1", 8_139, 40), (args.out / "small" / "node-1", 60, 5)):
        subprocess.run([sys.executable, str(Path(__file__).with_name("gen_iptables_save.py")), "--out", str(snapshot),
                        "--services", str(services), "--host-port-pods", str(pods)], check=True)
    trees = {"node": ROOT} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    for tree in trees.values():  # as installed: with bytecode
        compileall.compile_dir(tree / "kubelint_ports", quiet=1)

    def node(snapshot: Path, report: str) -> list[str]:
        return [sys.executable, "-m", "kubelint_ports", "node", str(snapshot), "--format", "json", "-o",
                str(args.out / report)]

    commands = {'python -c "import yaml, json"': (ROOT, [sys.executable, "-c", "import yaml, json"]),
                "node small": (ROOT, node(args.out / "small" / "node-1", "small.json"))}
    commands |= {name: (tree, node(args.out / "node-1", f"{name}.json")) for name, tree in trees.items()}
    for tree, command in commands.values():  # warm the file cache; not counted
        with first_on_path(tree):
            run(command, args.out)
    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict]] = {key: [] for key in commands}
    for round_ in range(args.repeat):
        for key in list(commands) if round_ % 2 == 0 else list(reversed(commands)):
            tree, command = commands[key]
            with first_on_path(tree):
                runs[key].append(run(command, args.out))
    print(f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; {os.cpu_count()} processors, "
          f"Python {sys.version.split()[0]}")
    print(f"\n{args.repeat} interleaved rounds, medians; goal for `node`: <= {GOAL_SECONDS} s")
    print(f"{'command':30} {'wall s':>7} {'cpu s':>6} {'peak RSS MiB':>12}")
    for key, timings in runs.items():
        print(f"{key:30} {statistics.median(t['wall'] for t in timings):7.3f} "
              f"{statistics.median(t['cpu'] for t in timings):6.3f} "
              f"{statistics.median(t['peak'] for t in timings) / 2**20:12.0f}")
    if args.baseline:
        same = (args.out / "node.json").read_bytes() == (args.out / "baseline.json").read_bytes()
        print(f"reports of node and baseline byte-identical: {'yes' if same else 'NO'}")
    print("\nin-process, best of 3 (CPU seconds):")
    for name, tree in trees.items():
        split = phases(tree, args.out)
        print(f"{name:10} read {split['read']:.3f}, model {split['model']:.3f}, checks {split['checks']:.3f}; "
              f"{split['findings']} findings")


if __name__ == "__main__":
    main()
