"""JSON node dumps read in linear time: doubling a dump must double its reading time, not quadruple
it. Figures, never assertions (a test that timed this failed on a busy machine; tests count work,
benchmarks measure time).

    python benchmarks/bench_json_dumps.py                  # 4,000 nft objects, 3,000 crictl pods, x1 x2 x4
    python benchmarks/bench_json_dumps.py --scale 2 --repeat 5

Two dumps that were read in quadratic time once (issue 21), each at N, 2N and 4N items:

  nft-json        `nft -j list ruleset` rules with a 1,000-character comment: the old reader
                  counted the lines before each object from the start of the text, so its time
                  grew with objects x bytes (40,000 objects took 53 s)
  crictl-pods     `crictl pods -o json` whose sandbox IDs are written with JSON escapes
                  (`\\u0061...`): the text never holds an ID as decoded, which made the reader
                  rescan the file for each one

Each size is read in-process with `loading.snapshot.read.parse`, best of --repeat, in CPU
seconds (other processes on a shared machine do not count). Printed per doubling: the ratio of
the times, ~2 when reading is linear, ~4 when it is quadratic; "linear" below 3.5, the bound the
test used to assert, leaving room for noise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubelint_ports.loading.snapshot.read import parse  # noqa: E402

LINEAR_RATIO = 3.5  # per doubling: 2 is linear, 4 quadratic


def dport(port: int) -> dict:
    return {"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": port}}


def nft_json_objects(count: int) -> str:
    """Rules with a long comment: the old reader counted the lines before each object from the
    start of the text, so its time grew with objects x bytes."""
    table = {"table": {"family": "ip", "name": "nat"}}
    chain = {"chain": {"family": "ip", "table": "nat", "name": "X"}}
    objects = [table, chain] + [{"rule": {"family": "ip", "table": "nat", "chain": "X", "comment": "c" * 1000,
                                          "expr": [dport(1 + index % 65535), {"jump": {"target": "X"}}]}}
                                for index in range(count)]
    return json.dumps({"nftables": objects})


def crictl_escaped_ids(count: int) -> str:
    """Sandboxes whose IDs are written with JSON escapes (`\\u0061...`): the text never holds the ID
    as decoded, which made the reader rescan the file for each one."""
    items = ",\n".join('  {"id": "\\u0061%062x", "metadata": {"name": "p%d", "namespace": "d"}, '
                       '"state": "SANDBOX_READY"}' % (index, index) for index in range(count))
    return '{"items": [\n' + items + "\n]}\n"


DUMPS = {  # kind -> (what makes a dump of N items, N)
    "nft-json": (nft_json_objects, 4_000),
    "crictl-pods": (crictl_escaped_ids, 3_000),
}


def seconds_to_read(kind: str, text: str, repeat: int) -> float:
    """CPU seconds, the best of `repeat`; the dump must read without a problem."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        _, problems = parse(kind, text, "dump")
        best = min(best, time.process_time() - started)
        assert not problems, problems  # a dump read as an error would measure nothing
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every N (default 1)")
    parser.add_argument("--repeat", type=int, default=3, help="reads per size, the best kept (default 3)")
    args = parser.parse_args()
    print(f"{'dump':12} {'items':>8} {'cpu s':>8} {'x prev':>7}")
    for kind, (make, count) in DUMPS.items():
        previous = None
        for factor in (1, 2, 4):
            items = int(count * args.scale * factor)
            seconds = seconds_to_read(kind, make(items), args.repeat)
            ratio = seconds / previous if previous else None
            verdict = "" if ratio is None else ("linear" if ratio < LINEAR_RATIO else "QUADRATIC?")
            print(f"{kind:12} {items:>8,} {seconds:>8.3f} {'' if ratio is None else f'{ratio:.2f}':>7} {verdict}")
            previous = seconds


if __name__ == "__main__":
    main()
