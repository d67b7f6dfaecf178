"""The file cache (docs/cache.md) on the 10k corpus: figures, never assertions.

    python benchmarks/bench_cache.py                       # 10k corpus, 3 interleaved rounds
    python benchmarks/bench_cache.py --sizes 1k --repeat 5 --jobs 1

Generates the corpus as bench_lint.py does (gen_corpus.py, seed 42, under --work), then per round,
each a fresh process of `kubelint-ports lint manifests --nodes cluster/nodes.yaml --format json`:
  plain     --no-cache
  cold      --cache-dir DIR on a DIR that does not exist (every entry written); a new DIR per round,
            all removed at the end: a file system creates files slowly for seconds after many were
            deleted (measured here: 6,775 files in 1.7 to 2.6 s instead of 0.2 s, even 15 s after the
            deletion), which would bill the previous round's clean-up to this one's cold run
  warm      the same DIR, nothing changed: the run memo replays the cold run's report (run_memo.py)
  edited    the same DIR after one manifest changed (its first containerPort made another port, so
            findings change too; put back after the round): the memo cannot hold, the file cache
            reads every other file from its entry and the checks run over the whole model
and prints medians of wall seconds and peak RSS (largest process and all together), the median of
the per-round ratios to `cold` and to `plain`, the cache's size on disk over the input, and
whether every run's report is byte for byte the plain one's. With --profile, one warm run in
this process under cProfile: where the time of a warm run goes.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_lint import CORPORA, corpus, find_generator, input_bytes, run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def lint(directory: Path, output: Path, cache: list[str], jobs: int | None) -> list[str]:
    command = [sys.executable, "-m", "kubelint_ports", "lint", "manifests", "--nodes", "cluster/nodes.yaml",
               "--format", "json", "-o", str(output), *cache]
    return command + (["--jobs", str(jobs)] if jobs else [])


def disk_bytes(directory: Path, allocated: bool = True) -> int:
    """The files' bytes on disk (blocks allocated), or their apparent size."""
    files = [path for path in directory.rglob("*") if path.is_file()]
    return sum(path.stat().st_blocks * 512 if allocated else path.stat().st_size for path in files)


def profile(directory: Path, cache: Path) -> None:
    import cProfile
    import os
    import pstats

    os.chdir(directory)
    from kubelint_ports.engine import LintOptions, lint_paths

    options = LintOptions(node_files=("cluster/nodes.yaml",), jobs=1, cache_dir=str(cache))
    profiler = cProfile.Profile()
    profiler.enable()
    lint_paths(["manifests"], options)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)


def settle(directory: Path) -> None:
    """Wait until the newest file of a corpus just generated is older than the run memo's settling
    time (run_memo.SETTLED_NS): a memo vouches only for inputs whose times can vouch for them."""
    import time

    from kubelint_ports.run_memo import SETTLED_NS

    newest = max(path.stat().st_ctime for path in directory.rglob("*"))  # 0.1 s on the 50k corpus
    wait = newest + SETTLED_NS / 1e9 + 0.2 - time.time()
    if wait > 0:
        time.sleep(wait)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["10k"], choices=sorted(CORPORA))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=None, help="--jobs for every run (default: the linter's)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kubelint-bench"))
    parser.add_argument("--generator", type=Path)
    parser.add_argument("--profile", action="store_true", help="also profile one warm run in this process")
    args = parser.parse_args()
    generator = find_generator(args.generator)
    args.work.mkdir(parents=True, exist_ok=True)
    for name in args.sizes:
        directory = corpus(args.work, name, generator)
        settle(directory)
        size = input_bytes(directory)
        caches = args.work / f"caches-{name}"
        shutil.rmtree(caches, ignore_errors=True)  # an interrupted benchmark's
        edited = sorted((directory / "manifests").rglob("*.yaml"))[len(list((directory / "manifests").rglob("*.yaml"))) // 2]
        original = edited.read_bytes()
        runs: dict[str, list[dict]] = {key: [] for key in ("plain", "cold", "warm", "edited")}
        same = True
        reference = None
        cache_size = cache_apparent = 0
        for round_ in range(args.repeat):
            cache = caches / f"round-{round_}"
            out = args.work / f"cache-out-{name}"
            out.mkdir(exist_ok=True)
            plain = run(lint(directory, out / "plain.json", ["--no-cache"], args.jobs), directory)
            runs["plain"].append(plain)
            reference = (out / "plain.json").read_bytes()
            for key in ("cold", "warm"):  # one command line, so the warm run may replay the cold run's memo
                runs[key].append(run(lint(directory, out / "cached.json", ["--cache-dir", str(cache)], args.jobs),
                                     directory))
                same &= (out / "cached.json").read_bytes() == reference
            cache_size, cache_apparent = disk_bytes(cache), disk_bytes(cache, allocated=False)
            try:
                edited.write_bytes(original.replace(b"containerPort: ", b"containerPort: 1", 1)
                                   if b"containerPort: " in original else original + b"\n# edited\n")
                runs["edited"].append(run(lint(directory, out / "cached.json", ["--cache-dir", str(cache)],
                                               args.jobs), directory))
                changed_plain = run(lint(directory, out / "edited-plain.json", ["--no-cache"], args.jobs), directory)
                del changed_plain
                same &= (out / "cached.json").read_bytes() == (out / "edited-plain.json").read_bytes()
            finally:
                edited.write_bytes(original)
                settle(directory)  # the next round's cold run may keep a memo

        def median(key: str, field: str) -> float:
            return statistics.median(r[field] for r in runs[key])

        def ratio(key: str, to: str) -> float:
            return statistics.median(a["wall"] / b["wall"] for a, b in zip(runs[key], runs[to]))

        print(f"\n{name}: {size / 1e6:.1f} MB input, {args.repeat} interleaved rounds, medians "
              f"(jobs {args.jobs or 'default'})")
        print(f"{'run':8} {'wall s':>7} {'/cold':>6} {'/plain':>7} {'peak MiB':>9} {'tree MiB':>9}")
        for key in runs:
            print(f"{key:8} {median(key, 'wall'):7.2f} {ratio(key, 'cold'):6.3f} {ratio(key, 'plain'):7.3f} "
                  f"{median(key, 'peak') / 2**20:9.0f} {median(key, 'tree') / 2**20:9.0f}")
        input_allocated = disk_bytes(directory / "manifests") + disk_bytes(directory / "cluster")
        print(f"cache: {cache_apparent / 1e6:.1f} MB of entries = {cache_apparent / size:.2f}x the input's "
              f"{size / 1e6:.1f} MB; on disk (blocks) {cache_size / 1e6:.1f} MB = {cache_size / input_allocated:.2f}x "
              f"the input's {input_allocated / 1e6:.1f} MB")
        print(f"reports byte-identical to --no-cache: {'yes' if same else 'NO'}")
        if args.profile:
            profile(directory, cache)
        shutil.rmtree(caches, ignore_errors=True)


if __name__ == "__main__":
    main()
