"""Node-snapshot benchmark: `kubelint-ports node` on a 200,000-line iptables-save, timed whole.

    python benchmarks/bench_node.py                        # generate, then 7 interleaved rounds
    python benchmarks/bench_node.py --repeat 11 --baseline /tmp/kubelint-ports-before
    python benchmarks/bench_node.py --ipvs --ss --repeat 5  # and the two large dumps of issue 31

Writes, with `gen_iptables_save.py` (deterministic), OUT/node-1/iptables-save: kube-proxy in
iptables mode for 8,139 Services and the CNI portmap chains of 40 pods with hostPorts, 200,028
lines (22 MB), and OUT/node-1/ss; and OUT/small/node-1, the same for 60 Services (1,596 lines).
Then, in interleaved rounds, each command a fresh process with the repository first on sys.path:

  yardstick   python -c "import yaml, json"
  node small  kubelint-ports node OUT/small/node-1 --format json -o FILE   (start-up and little else)
  node        kubelint-ports node OUT/node-1 --format json -o FILE
  baseline    `node` with the source tree --baseline TREE instead (a `git worktree` of an older
              commit, say), whose report must be byte-identical
  bare        a tiny script that reads the dump, splits its lines and matches one compiled regular
              expression per line (`BARE`, with the fields a reader of the format takes): the floor
              a reader is compared with (ratio = `node` / `bare`, wall and CPU)

and prints medians of wall and CPU seconds (user + system) and of peak RSS, the goal (issue 26:
`node` in 0.7 s at most), the load average before and after, and one in-process run of each
tree split into read (detect and parse every dump), model (node state) and checks (every KP8xx
policy), best of 3, the cyclic GC paused as the command pauses it. Figures, never assertions.

With --ipvs, also OUT/ipvs/node-1/ipvsadm: `ipvsadm -Sn` of 1,000,000 IPv4 services (`-A -t
10.x.y.z:port -s rr`), 30 MB, the input of issue 31 (before: 5.6 s, 638 MiB); `--ipvs-real-servers
1` adds an `-a ... -r ... -m -w 1` line to each (a real server doubles the size: with one each, 64
MiB, the default max-file-mib, holds some 800,000 services; `--ipvs-services 500000` is 42 MB).
With --ss, OUT/ss/node-1/ss: 800,000 listening sockets as `ss -Htlnup` prints them, each on an
address of its own with one process of 40,000 (61 MiB). The goal for both (issue 31): `node`
within 4x the bare pass and 250 MiB peak RSS.

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

Issue 31 (ss and ipvsadm read a run of lines per match, their records kept as columns), load
average 4.5 (other sessions' tests), `--ipvs --ss --repeat 5 --baseline TREE`, TREE a copy of
58759a5, before the change; the x-bare columns are node / bare (wall, CPU):

    command                         wall s  cpu s peak RSS MiB  x bare (wall, cpu)
    bare ipvsadm                     0.613  0.340          122
    node ipvsadm                     2.039  1.203          202       3.3       3.5
    baseline ipvsadm                12.660  7.927          654      20.6      23.3
    bare ss                          0.920  0.550          180
    node ss                          2.723  1.766          172       3.0       3.2
    baseline ss                     11.714  7.419          571      12.7      13.5
    (iptables-save, unchanged: bare 0.244 s, node 0.952 s: 3.9x wall, 4.8x CPU, 108 MiB)
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
GOAL_RATIO, GOAL_MIB = 4, 250  # large dumps (issue 31): times the bare pass, peak RSS
# The bare pass over a dump: read it, split its lines, match one compiled pattern per line.
BARE = """
import re, sys
pattern = re.compile(sys.argv[1])
with open(sys.argv[2], encoding="utf-8", errors="replace") as handle:
    text = handle.read()
print(sum(1 for line in text.split("\\n") if pattern.match(line)))
"""
# kind -> the dump's file name and the pattern of its lines: the fields its reader takes
BARE_PATTERNS = {
    "iptables-save": ("iptables-save", r"(?:-A (\S+) (.*)|:(\S+) (\S+)|\*(\S+)|COMMIT|#)"),
    "ipvsadm": ("ipvsadm", r"(-[Aa]) (-[tuf]|--[a-z]+-service) (\S+)"),
    "ss": ("ss", r"(?:([a-z_]+)\s+)?(LISTEN|UNCONN)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)"),
}
PROCESS_NAMES = ("nginx", "sshd", "envoy", "haproxy", "java", "node", "python3", "redis-server")
PHASES = """
import gc, json, sys, time
gc.disable()  # as the node command runs (engine.collector_paused)
from kubelint_ports.engine import run_checks
from kubelint_ports.loading.snapshot import load_snapshot
from kubelint_ports.model.node_state import NodeSnapshots, build_node_state
from kubelint_ports.policies import builtin_policies

best = {}
for _ in range(3):
    started = time.process_time()
    snapshot, problems = load_snapshot(sys.argv[1])
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


def phases(tree: Path, snapshot: Path) -> dict:
    with first_on_path(tree):
        done = subprocess.run([sys.executable, "-c", PHASES, str(snapshot)], cwd=snapshot.parent, capture_output=True,
                              text=True, check=True)
    return json.loads(done.stdout)


def ipvsadm_lines(services: int, real_servers: int):
    """`ipvsadm -Sn` of `services` IPv4 services with `real_servers` each, deterministic."""
    for index in range(services):
        address = f"10.{96 + index // 65536 % 32}.{index // 256 % 256}.{index % 256}"
        port = (80, 443, 8080, 53, 9090)[index % 5]
        yield f"-A -t {address}:{port} -s rr\n"
        for server in range(real_servers):
            yield f"-a -t {address}:{port} -r 10.244.{index // 256 % 256}.{server}:{port + 8000} -m -w 1\n"


def ss_lines(sockets: int):
    """`ss -Htlnup` of `sockets` listening sockets: each on an address of its own (nothing to
    share), three in four TCP, one process of 40,000 each, its own file descriptor."""
    for index in range(sockets):
        protocol, state = ("tcp", "LISTEN") if index % 4 else ("udp", "UNCONN")
        process = f'("{PROCESS_NAMES[index % len(PROCESS_NAMES)]}",pid={300 + index % 40_000},fd={3 + index // 40_000})'
        yield (f"{protocol} {state} 0 4096 10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}:"
               f"{1024 + index % 60_000} 0.0.0.0:* users:({process})\n")


def write_lines(path: Path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        batch: list[str] = []
        for line in lines:
            batch.append(line)
            if len(batch) == 10_000:
                out.write("".join(batch))
                batch.clear()
        out.write("".join(batch))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/kubelint-ports-node-bench"))
    parser.add_argument("--repeat", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--baseline", type=Path, help="another source tree of kubelint-ports to time alike")
    parser.add_argument("--ipvs", action="store_true", help="also a large `ipvsadm -Sn` (issue 31)")
    parser.add_argument("--ipvs-services", type=int, default=1_000_000)
    parser.add_argument("--ipvs-real-servers", type=int, default=0, help="`-a` lines per service (default 0)")
    parser.add_argument("--ss", action="store_true", help="also a large `ss -Htlnup` (issue 31)")
    parser.add_argument("--ss-sockets", type=int, default=800_000)
    parser.add_argument("--write", nargs=2, metavar=("KIND", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:  # in a process of its own, as below
        kind, path = args.write
        write_lines(Path(path), ipvsadm_lines(args.ipvs_services, args.ipvs_real_servers) if kind == "ipvsadm"
                    else ss_lines(args.ss_sockets))
        return
    # In a process of its own: a child forked from a process holding the generated lines would
    # count them in its peak RSS.
    for snapshot, services, pods in ((args.out / "node-1", 8_139, 40), (args.out / "small" / "node-1", 60, 5)):
        subprocess.run([sys.executable, str(Path(__file__).with_name("gen_iptables_save.py")), "--out", str(snapshot),
                        "--services", str(services), "--host-port-pods", str(pods)], check=True)
    dumps = {"iptables-save": args.out / "node-1"}  # kind -> snapshot directory
    for kind, wanted, folder in (("ipvsadm", args.ipvs, "ipvs"), ("ss", args.ss, "ss")):
        if wanted:
            dumps[kind] = args.out / folder / "node-1"
            subprocess.run([sys.executable, __file__, "--write", kind, str(dumps[kind] / BARE_PATTERNS[kind][0]),
                            "--ipvs-services", str(args.ipvs_services), "--ipvs-real-servers",
                            str(args.ipvs_real_servers), "--ss-sockets", str(args.ss_sockets)], check=True)
            size = (dumps[kind] / BARE_PATTERNS[kind][0]).stat().st_size
            print(f"{dumps[kind] / BARE_PATTERNS[kind][0]}: {size / 1e6:.1f} MB")
    trees = {"node": ROOT} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    for tree in trees.values():  # as installed: with bytecode
        compileall.compile_dir(tree / "kubelint_ports", quiet=1)

    def node(snapshot: Path, report: str) -> list[str]:
        return [sys.executable, "-m", "kubelint_ports", "node", str(snapshot), "--format", "json", "-o",
                str(args.out / report)]

    def label(kind: str, name: str) -> str:
        return name if kind == "iptables-save" else f"{name} {kind}"

    commands = {'python -c "import yaml, json"': (ROOT, [sys.executable, "-c", "import yaml, json"]),
                "node small": (ROOT, node(args.out / "small" / "node-1", "small.json"))}
    for kind, snapshot in dumps.items():
        file_name, pattern = BARE_PATTERNS[kind]
        commands[label(kind, "bare")] = (ROOT, [sys.executable, "-c", BARE, pattern, str(snapshot / file_name)])
        commands |= {label(kind, name): (tree, node(snapshot, f"{label(kind, name).replace(' ', '-')}.json"))
                     for name, tree in trees.items()}
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
    print(f"\n{args.repeat} interleaved rounds, medians; goal for `node`: <= {GOAL_SECONDS} s; for the large dumps: "
          f"<= {GOAL_RATIO}x their bare pass, <= {GOAL_MIB} MiB")
    print(f"{'command':30} {'wall s':>7} {'cpu s':>6} {'peak RSS MiB':>12} {'x bare (wall, cpu)':>19}")
    medians = {key: {measure: statistics.median(t[measure] for t in timings) for measure in ("wall", "cpu", "peak")}
               for key, timings in runs.items()}
    for key, median in medians.items():
        kind = next((kind for kind in dumps if key == label(kind, key.split()[0])), None)
        bare = medians.get(label(kind, "bare")) if kind and not key.startswith("bare") else None
        ratio = f"{median['wall'] / bare['wall']:9.1f} {median['cpu'] / bare['cpu']:9.1f}" if bare else ""
        print(f"{key:30} {median['wall']:7.3f} {median['cpu']:6.3f} {median['peak'] / 2**20:12.0f} {ratio}")
    if args.baseline:
        for kind in dumps:
            same = all((args.out / f"{label(kind, name).replace(' ', '-')}.json").read_bytes() ==
                       (args.out / f"{label(kind, 'node').replace(' ', '-')}.json").read_bytes() for name in trees)
            print(f"reports of node and baseline ({kind}) byte-identical: {'yes' if same else 'NO'}")
    print("\nin-process, best of 3 (CPU seconds):")
    for kind, snapshot in dumps.items():
        for name, tree in trees.items():
            split = phases(tree, snapshot)
            print(f"{label(kind, name):22} read {split['read']:.3f}, model {split['model']:.3f}, "
                  f"checks {split['checks']:.3f}; {split['findings']} findings")


if __name__ == "__main__":
    main()
