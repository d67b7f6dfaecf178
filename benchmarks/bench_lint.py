"""Lint-time benchmark on a generated corpus: figures, never assertions.

    python benchmarks/bench_lint.py --workloads 1000 --nodes 50
    python benchmarks/bench_lint.py --corpus /tmp/c10k          # an existing corpus

Generates the corpus with ../shared/bench/gen_corpus.py when --corpus is not given, then times
(one process, files already in the page cache, best of --repeat runs):
  compose   PyYAML CSafeLoader compose_all of every file: the reference floor for a marked parse
  load      kubelint-ports loading (files -> documents with positions)
  model     documents -> cluster model
  checks    every built-in policy (placement and host port allocation included)
and prints the ratio lint / compose, which the design keeps under 2.
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT.parent / "shared" / "bench" / "gen_corpus.py"


def best_of(repeat: int, function):
    timings, result = [], None
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        result = function()
        timings.append(time.perf_counter() - started)
    return min(timings), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-inventory", action="store_true", help="ignore the corpus's cluster/nodes.yaml")
    args = parser.parse_args()
    corpus = args.corpus
    if corpus is None:
        corpus = Path(f"/tmp/kubelint-bench-{args.workloads}-{args.nodes}")
        subprocess.run([sys.executable, str(GENERATOR), "--workloads", str(args.workloads), "--nodes",
                        str(args.nodes), "--out", str(corpus), "--seed", str(args.seed)], check=True)
    manifests = corpus / "manifests"

    import yaml

    from kubelint_ports.engine import collector_paused, run_checks
    from kubelint_ports.loading import discover, load
    from kubelint_ports.model import build_cluster
    from kubelint_ports.policies import builtin_policies, enabled_by_default

    files = list(discover([str(manifests)]))
    size = sum(Path(f).stat().st_size for f in files)

    def compose_all():
        kept = []
        for name in files:
            kept.extend(yaml.compose_all(Path(name).read_bytes(), Loader=yaml.CSafeLoader))
        return kept

    inventory_file = corpus / "cluster" / "nodes.yaml"
    use_inventory = inventory_file.exists() and not args.no_inventory
    with collector_paused():
        compose_seconds, _ = best_of(args.repeat, compose_all)
        load_seconds, loaded = best_of(args.repeat, lambda: load([str(manifests)]))
        inventory = load([str(inventory_file)]).documents if use_inventory else None
        model_seconds, (cluster, _) = best_of(
            args.repeat, lambda: build_cluster(loaded.documents, node_documents=inventory))
        policies = enabled_by_default(builtin_policies())  # what a run without configuration uses

        def checks():
            cluster.allocation = None  # the allocation is built on first use: time it every run
            return run_checks(cluster, policies)

        check_seconds, findings = best_of(args.repeat, checks)
    lint_seconds = load_seconds + model_seconds + check_seconds
    print(f"corpus      {corpus} ({len(files)} files, {size / 1e6:.1f} MB, {len(loaded.documents)} objects)")
    print(f"compose     {compose_seconds:7.3f} s  {size / 1e6 / compose_seconds:5.1f} MB/s  (PyYAML CSafeLoader)")
    print(f"load        {load_seconds:7.3f} s  {size / 1e6 / load_seconds:5.1f} MB/s")
    print(f"model       {model_seconds:7.3f} s")
    print(f"checks      {check_seconds:7.3f} s  ({len(findings)} findings)")
    print(f"lint total  {lint_seconds:7.3f} s  = {lint_seconds / compose_seconds:.2f} x compose")
    nodes = len(cluster.nodes) if cluster.nodes is not None else 0
    print(f"inventory   {nodes} nodes" if use_inventory else "inventory   none")
    report_planted(corpus, findings)


def report_planted(corpus: Path, findings) -> None:
    """How many planted problems were found (an error at the planted line), and decoys kept quiet."""
    import json

    planted_file = corpus / "planted.json"
    if not planted_file.exists():
        return
    planted = json.loads(planted_file.read_text())
    errors = {(f.location.path.split("manifests/", 1)[-1], f.location.line) for f in findings
              if str(f.severity) == "error"}
    found = sum(1 for problem in planted["problems"]
                if any((o["file"].split("manifests/", 1)[-1], o["line"]) in errors for o in problem["objects"]))
    noisy = sum(1 for decoy in planted["decoys"]
                if any((o["file"].split("manifests/", 1)[-1], o["line"]) in errors for o in decoy["objects"]))
    print(f"planted     {found}/{len(planted['problems'])} problems found, {noisy}/{len(planted['decoys'])} "
          f"decoys reported")


if __name__ == "__main__":
    main()
