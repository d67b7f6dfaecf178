"""YAML readers side by side on a corpus: what replacing libyaml's composer would gain, and what it
would break. Figures only, never assertions; the optional readers are measured when installed.

    python benchmarks/bench_readers.py                       # the 10k corpus of bench_lint.py
    python benchmarks/bench_readers.py --corpus DIR --repeat 5
    pip install rapidyaml yaml-rs tree-sitter-yaml           # to measure those three as well

Each reader reads every .yaml/.yml/.json file of the corpus in a fresh process (the cyclic GC off,
as the linter runs), in interleaved rounds; medians of wall and CPU seconds are printed with the
ratio to the PyYAML compose floor:

  pyyaml compose     `yaml.compose_all(Loader=CSafeLoader)`: libyaml in C, a Python node per YAML
                     node, PyYAML's Python resolver per scalar (bench_lint.py's floor)
  manifest loader    the same composer with the linter's resolver (`loading.ManifestLoader`): plain
                     scalars left untyped; what `lint` reads with
  pyyaml events      `yaml.parse(Loader=CSafeLoader)`: libyaml's events as Python objects, no tree
  rapidyaml parse    `ryml.parse_in_arena`: the tree stays in C++ (nothing read from Python)
  rapidyaml walk     the same, then every node's key and value read from Python (the least a
                     linter reading the tree from Python must do for the nodes it reads)
  yaml-rs load       `yaml_rs.loads`: Python objects, built in Rust (no node positions)
  tree-sitter parse  `tree_sitter_yaml`: a concrete syntax tree in C, positions in bytes; scalars
                     stay source text (quotes and escapes undone by the reader, not measured)

Then, per reader, how many of the files PyYAML composes it rejects, as they are and with a leading
UTF-8 byte order mark removed (Kubernetes reads files that start with one), and whether it keeps
the line and column of every node (findings point at them).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOM = b"\xef\xbb\xbf"

READ = """\
import gc, os, sys
gc.disable()
reader, root = sys.argv[1], sys.argv[2]
paths = []
for directory, subdirs, files in os.walk(root):
    subdirs.sort()
    paths += [os.path.join(directory, name) for name in sorted(files) if name.endswith((".yaml", ".yml", ".json"))]
texts = []
for path in paths:
    with open(path, "rb") as handle:
        texts.append(handle.read())
if reader.startswith("rapidyaml") or reader == "yaml-rs load":
    texts = [text[3:] if text.startswith(b"\\xef\\xbb\\xbf") else text for text in texts]
nodes = 0
if reader == "pyyaml compose":
    import yaml
    for text in texts:
        nodes += sum(1 for _ in yaml.compose_all(text, Loader=yaml.CSafeLoader))
elif reader == "manifest loader":
    import yaml
    from kubelint_ports.loading import ManifestLoader
    for text in texts:
        nodes += sum(1 for _ in yaml.compose_all(text, Loader=ManifestLoader))
elif reader == "pyyaml events":
    import yaml
    for text in texts:
        nodes += sum(1 for _ in yaml.parse(text, Loader=yaml.CSafeLoader))
elif reader.startswith("rapidyaml"):
    import ryml
    walk = reader == "rapidyaml walk"
    for text in texts:
        tree = ryml.parse_in_arena(text)
        size = tree.size()
        nodes += size
        if walk:
            for node in range(size):
                if tree.has_key(node):
                    tree.key(node)
                if tree.has_val(node):
                    tree.val(node)  # a memoryview of the source (None for a null)
elif reader == "yaml-rs load":
    import yaml_rs
    for text in texts:
        yaml_rs.loads(text.decode("utf-8"))
        nodes += 1
elif reader == "tree-sitter parse":
    import tree_sitter_yaml
    from tree_sitter import Language, Parser
    parser = Parser(Language(tree_sitter_yaml.language()))
    for text in texts:
        tree = parser.parse(text)
        if tree.root_node.has_error:
            sys.exit(1)  # counted in the conformance columns
        nodes += 1
print(nodes)
"""

CONFORMANCE = """\
import importlib.util, json, os, sys
import yaml
root = sys.argv[1]
readers = {}
if importlib.util.find_spec("ryml"):
    import ryml
    readers["rapidyaml"] = lambda text: ryml.parse_in_arena(text)
if importlib.util.find_spec("yaml_rs"):
    import yaml_rs
    readers["yaml-rs"] = lambda text: yaml_rs.loads(text.decode("utf-8"))
if importlib.util.find_spec("tree_sitter_yaml"):
    import tree_sitter_yaml
    from tree_sitter import Language, Parser
    parser = Parser(Language(tree_sitter_yaml.language()))

    def parsed(text):
        if parser.parse(text).root_node.has_error:  # tree-sitter recovers: an error is a node
            raise ValueError(text[:40])
    readers["tree-sitter"] = parsed
counts = {name: [0, 0] for name in readers}
files = 0
for directory, subdirs, names in os.walk(root):
    for name in names:
        if not name.endswith((".yaml", ".yml", ".json")):
            continue
        with open(os.path.join(directory, name), "rb") as handle:
            text = handle.read()
        try:
            list(yaml.compose_all(text, Loader=yaml.CSafeLoader))
        except yaml.YAMLError:
            continue  # PyYAML rejects it too
        files += 1
        for reader, read in readers.items():
            for column, data in enumerate((text, text[3:] if text.startswith(b"\\xef\\xbb\\xbf") else text)):
                try:
                    read(data)
                except Exception:
                    counts[reader][column] += 1
print(json.dumps({"files": files, "rejected": counts}))
"""

READERS = ("pyyaml compose", "manifest loader", "pyyaml events", "rapidyaml parse", "rapidyaml walk", "yaml-rs load",
           "tree-sitter parse")
NEEDS = {"rapidyaml parse": "ryml", "rapidyaml walk": "ryml", "yaml-rs load": "yaml_rs",
         "tree-sitter parse": "tree_sitter_yaml"}
POSITIONS = {"pyyaml compose": "yes", "manifest loader": "yes", "pyyaml events": "yes",
             "rapidyaml parse": "on request", "rapidyaml walk": "on request", "yaml-rs load": "no",
             "tree-sitter parse": "bytes"}


def timed(command: list[str]) -> tuple[float, float]:
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        return float("nan"), float("nan")  # the reader rejected a file: see the conformance columns
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=Path(tempfile.gettempdir()) / "kubelint-bench" / "10k",
                        help="a corpus of bench_lint.py (its manifests/ are read), or any directory of YAML")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    root = args.corpus / "manifests" if (args.corpus / "manifests").is_dir() else args.corpus
    if not root.is_dir():
        sys.exit(f"{root} is not a directory: run benchmarks/bench_lint.py --sizes 10k first, or pass --corpus DIR")
    readers = [name for name in READERS if name not in NEEDS or importlib.util.find_spec(NEEDS[name])]
    missing = [name for name in READERS if name not in readers]
    script = Path(tempfile.mkdtemp()) / "read.py"
    script.write_text(READ)
    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")  # the manifest loader
    print(f"corpus {root} ({sum(p.stat().st_size for p in root.rglob('*') if p.is_file()) / 1e6:.1f} MB), "
          f"{args.repeat} interleaved rounds, load average {os.getloadavg()[0]:.2f} at start")
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in readers}
    for round_ in range(args.repeat):
        for name in (readers if round_ % 2 == 0 else list(reversed(readers))):
            runs[name].append(timed([sys.executable, str(script), name, str(root)]))
    checked = subprocess.run([sys.executable, "-c", CONFORMANCE, str(root)], capture_output=True, text=True, check=True)
    conformance = json.loads(checked.stdout)
    floor = statistics.median(wall for wall, _ in runs["pyyaml compose"])
    print(f"\n{'reader':17} {'wall s':>7} {'cpu s':>6} {'/ floor':>8} {'positions':>10}  rejects of "
          f"{conformance['files']} files PyYAML reads (as they are; without a BOM)")
    for name in readers:
        wall = statistics.median(w for w, _ in runs[name])
        cpu = statistics.median(c for _, c in runs[name])
        family = name.split()[0]
        rejected = conformance["rejected"].get(family)
        rejects = "0; 0" if family == "pyyaml" or name == "manifest loader" else (
            f"{rejected[0]}; {rejected[1]}" if rejected else "")
        print(f"{name:17} {wall:7.2f} {cpu:6.2f} {wall / floor:7.2f}x {POSITIONS[name]:>10}  {rejects}")
    if missing:
        print(f"not installed, not measured: {', '.join(missing)}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
