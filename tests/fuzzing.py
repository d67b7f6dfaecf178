"""The fuzzer: hostile inputs made from the project's own examples and fixtures, and generated
Kubernetes-shaped documents with type confusion, tags, anchors, merge keys and odd encodings; node
dumps of every format the `node` command reads, Kustomize directories and user policies with
generated JSON Schemas (their generators: `tests/fuzzing_generators.py`).

One engine, two drivers:
- `tests/test_fuzz.py` runs a short, seeded, deterministic campaign in the normal test suite
  (hypothesis chooses the mutations through the `random.Random` it controls, and shrinks);
- `python tests/fuzzing.py --count 100000 --seed 1` is the long campaign (docs/safety.md, "Fuzzing").

The oracle: `lint_paths` / `lint_snapshots` return (no exception escapes), report no internal
error, and every formatter writes the report; through the CLI, the exit code is 0, 1 or 2, never 3
or a signal. A user policy or a configuration may instead be refused with a clear error. For node
dumps also: the clean node next to the fuzzed one keeps its finding, no message quotes a file
reached through a symlink, and none is longer than a few sentences. An input that runs past the
watchdog is a hang: the campaign says which and stops.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import fuzzing_generators as generators  # tests/ is on sys.path: pytest's rootdir, or the script's own

ROOT = Path(__file__).resolve().parents[1]
FORMATS = ("text", "json", "sarif", "github", "markdown")


def seed_corpus() -> list[bytes]:
    """Every YAML file of examples/ and tests/policies/, and the rendered chart fixtures."""
    paths = sorted([*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("tests/policies/**/*.yaml"),
                    *ROOT.glob("tests/charts/*.yaml")])
    return [path.read_bytes() for path in paths]


HOSTILE_SCALARS = [
    "9" * 5000, "0x_", "0b_", "-1", "0", "65536", "1e309", "-.inf", ".nan", "null", "~", "''", '""', "[]", "{}",
    "true", "on", "0o777", "0777", "1_000", "١٢٣", "²", "\u202eevil", "\u2028", "\x1b[2J", "::error::x",
    '"\\u0000"', '"\\x85"', "'it''s'", "!!binary aGk=", "!!python/object:os.system x", "!custom x",
    "&a x", "*a", "*undefined", "10.0.0.0/8", "10.0.0.0/33", "fd00::/200", "300.1.2.3/8", "1.2.3.4",
    "10.0.0.0/8,fd00::/64", "10.0.0.0/8;10.1.0.0/16", "30000-32767", "32767-30000", "1+65535", "a" * 3000,
    "TCP", "udp", "SCTP", "http", "${PORT}", "$(PORT)", "{{ .Values.x }}", "? x", "- x", "|\n  block", ">-",
    "--cluster-cidr=10.0.0.0/8", "--proxy-mode=ipvs", "--service-node-port-range=1-" + "9" * 50,
    "ipvs", "iptables", "nftables", "ClusterCIDR", "In", "NotIn", "Gt", "Lt", "Exists", "NoSchedule",
]
KINDS = ["Pod", "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob", "Service", "Node",
         "ConfigMap", "KubeProxyConfiguration", "ClusterConfiguration", "IPPool", "ServiceCIDR", "List", "PodList"]
API = {"Deployment": "apps/v1", "DaemonSet": "apps/v1", "StatefulSet": "apps/v1", "ReplicaSet": "apps/v1",
       "Job": "batch/v1", "CronJob": "batch/v1", "KubeProxyConfiguration": "kubeproxy.config.k8s.io/v1alpha1",
       "ClusterConfiguration": "kubeadm.k8s.io/v1beta3", "IPPool": "crd.projectcalico.org/v1",
       "ServiceCIDR": "networking.k8s.io/v1"}
FIELDS = ["containers", "initContainers", "ports", "hostPort", "containerPort", "nodePort", "port", "targetPort",
          "protocol", "hostIP", "hostNetwork", "nodeName", "nodeSelector", "affinity", "tolerations", "replicas",
          "type", "clusterIP", "externalTrafficPolicy", "healthCheckNodePort", "labels", "annotations", "taints",
          "podCIDR", "podCIDRs", "unschedulable", "clusterCIDR", "mode", "detectLocalMode", "networking",
          "podSubnet", "serviceSubnet", "extraArgs", "command", "args", "data", "items", "spec", "template",
          "metadata", "name", "namespace", "cidr", "cidrs", "restartPolicy", "volumeMounts", "volumes",
          "livenessProbe", "httpGet", "matchExpressions", "nodeSelectorTerms", "key", "operator", "values",
          "kubelint-ports.io/ignore", "config.conf", "net-conf.json", "<<", "status", "phase", "ownerReferences"]


def scalar(rng: random.Random) -> str:
    choice = rng.random()
    if choice < 0.35:
        return str(rng.choice([rng.randint(-5, 70000), rng.randint(30000, 32767), rng.randint(1, 1024)]))
    if choice < 0.7:
        return rng.choice(HOSTILE_SCALARS)
    return rng.choice(FIELDS)


def value(rng: random.Random, depth: int) -> object:
    roll = rng.random()
    if depth > 5 or roll < 0.45:
        return scalar(rng)
    if roll < 0.7:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(FIELDS): value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def render(node: object, indent: int, rng: random.Random) -> str:
    """Block or flow YAML, quoting chosen at random (so type confusion reaches every field)."""
    pad = " " * indent
    if isinstance(node, (dict, list)) and (not node or rng.random() < 0.2):
        return " " + flow(node, rng)
    if isinstance(node, dict):
        return "\n" + "\n".join(f"{pad}{key_text(key, rng)}:{render(item, indent + 2, rng)}"
                                 for key, item in node.items())
    if isinstance(node, list):
        return "\n" + "\n".join(f"{pad}-{render(item, indent + 2, rng)}" for item in node)
    return " " + scalar_text(str(node), rng)


def flow(node: object, rng: random.Random) -> str:
    if isinstance(node, dict):
        return "{" + ", ".join(f"{key_text(key, rng)}: {flow(item, rng)}" for key, item in node.items()) + "}"
    if isinstance(node, list):
        return "[" + ", ".join(flow(item, rng) for item in node) + "]"
    return scalar_text(str(node), rng, in_flow=True)


def scalar_text(text: str, rng: random.Random, in_flow: bool = False) -> str:
    special = "\n" in text or text[:1] in "&*!|>-?{[%@`'\"" or (in_flow and any(c in text for c in ",[]{}"))
    if rng.random() < 0.2 or (special and rng.random() < 0.7):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


def key_text(key: str, rng: random.Random) -> str:
    return f'"{key}"' if ("/" in key or "." in key) and rng.random() < 0.7 else key


def generated_document(rng: random.Random) -> str:
    """A Kubernetes-shaped object: real kinds and field names, values of any type."""
    kind = rng.choice(KINDS)
    body: dict = {"metadata": {"name": scalar(rng), "namespace": rng.choice(["a", "b", scalar(rng)])}}
    for _ in range(rng.randint(1, 6)):
        body[rng.choice(FIELDS)] = value(rng, 1)
    if kind in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
        body["spec"] = {"replicas": scalar(rng), "template": {"spec": {
            "hostNetwork": rng.choice(["true", "false", scalar(rng)]),
            "containers": [{"name": scalar(rng), "ports": [{"containerPort": scalar(rng), "hostPort": scalar(rng),
                                                             "protocol": scalar(rng)}], "args": [scalar(rng)]}]}}}
    elif kind == "Service":
        body["spec"] = {"type": rng.choice(["NodePort", "ClusterIP", "LoadBalancer", scalar(rng)]),
                        "ports": [{"port": scalar(rng), "nodePort": scalar(rng), "targetPort": scalar(rng)}]}
    elif kind == "ConfigMap":
        inner = f"kind: KubeProxyConfiguration\nclusterCIDR: {scalar(rng)}\nmode: {scalar(rng)}\n"
        body["data"] = {"config.conf": inner}
    text = f"apiVersion: {API.get(kind, 'v1')}\nkind: {kind}" + render(body, 0, rng) + "\n"
    return text


def mutate(data: bytes, rng: random.Random, corpus: list[bytes]) -> bytes:
    """One to four mutations: bytes, lines, scalars, structure, encoding."""
    for _ in range(rng.randint(1, 4)):
        data = rng.choice(MUTATIONS)(data, rng, corpus)
    return data


def _flip(data, rng, corpus):
    if not data:
        return data
    position = rng.randrange(len(data))
    return data[:position] + bytes([rng.randrange(256)]) + data[position + 1:]


def _insert_bytes(data, rng, corpus):
    position = rng.randint(0, len(data))
    noise = rng.choice([b"\x00", b"\t", b"\r", b"\xef\xbb\xbf", b"\xc2\x85", b"\xe2\x80\xa8", b"\xff", b"%",
                        b"&a ", b"*a", b"<<: *a\n", b"!!str ", b"? ", b": ", b"- ", b"---\n", b"...\n",
                        b"#", b"'", b'"', b"{", b"[", b"]", b"}", b",", b"|", b">", b"\\"])
    return data[:position] + noise * rng.randint(1, 3) + data[position:]


def _delete_range(data, rng, corpus):
    if not data:
        return data
    start = rng.randrange(len(data))
    return data[:start] + data[start + rng.randint(1, 64):]


def _duplicate_lines(data, rng, corpus):
    lines = data.split(b"\n")
    if not lines:
        return data
    index = rng.randrange(len(lines))
    return b"\n".join(lines[:index] + [lines[index]] * rng.randint(2, 5) + lines[index:])


def _splice(data, rng, corpus):
    other = rng.choice(corpus)
    cut_a, cut_b = rng.randint(0, len(data)), rng.randint(0, len(other))
    return data[:cut_a] + other[cut_b:]


def _append_document(data, rng, corpus):
    return data + b"\n---\n" + generated_document(rng).encode()


def _pick_pair(data: bytes, rng: random.Random):
    """The lines of `data` and a random `key: value` line's index, key and value (None: no such line)."""
    lines = data.split(b"\n")
    candidates = [i for i, line in enumerate(lines) if b": " in line]
    if not candidates:
        return None
    index = rng.choice(candidates)
    key, _, rest = lines[index].partition(b": ")
    return lines, index, key, rest


def _replace_scalar(data, rng, corpus):
    picked = _pick_pair(data, rng)
    if picked is None:
        return data
    lines, index, key, _ = picked
    lines[index] = key + b": " + scalar(rng).encode("utf-8", "surrogatepass")
    return b"\n".join(lines)


def _wrap_value(data, rng, corpus):
    """A value nested a little (still within budgets) or a lot (over them)."""
    picked = _pick_pair(data, rng)
    if picked is None:
        return data
    lines, index, key, rest = picked
    levels = rng.choice([1, 3, 50, 199, 201, 3000])
    opener, closer = rng.choice([(b"[", b"]"), (b"{a: ", b"}")])
    lines[index] = key + b": " + opener * levels + (rest or b"x") + closer * levels
    return b"\n".join(lines)


def _aliases(data, rng, corpus):
    """Anchors and aliases, a merge key, or a small laugh bomb."""
    lines = data.split(b"\n")
    if rng.random() < 0.3:
        bomb = [b"x0: &x0 [a, a]"] + [b"x%d: &x%d [*x%d, *x%d]" % (i, i, i - 1, i - 1) for i in range(1, 25)]
        return b"\n".join(bomb) + b"\n" + data
    candidates = [i for i, line in enumerate(lines) if b": " in line]
    if len(candidates) < 2:
        return data
    first, second = rng.sample(candidates, 2)
    lines[first] = lines[first].replace(b": ", b": &k ", 1)
    key = lines[second].partition(b": ")[0]
    lines[second] = key + rng.choice([b": *k", b": {<<: *k}", b": [*k, *k]", b": *nowhere"])
    return b"\n".join(lines)


def _encoding(data, rng, corpus):
    text = data.decode("utf-8", "replace")
    return rng.choice([lambda: text.encode("utf-16"), lambda: text.encode("utf-16-be"),
                       lambda: text.encode("latin-1", "replace"), lambda: text.replace("\n", "\r").encode(),
                       lambda: text.replace("\n", "\r\n").encode(), lambda: b"\xef\xbb\xbf" + data])()


def _indent(data, rng, corpus):
    lines = data.split(b"\n")
    if not lines:
        return data
    index = rng.randrange(len(lines))
    lines[index] = rng.choice([b" ", b"\t", b"  " * 40]) + lines[index]
    return b"\n".join(lines)


MUTATIONS = [_flip, _insert_bytes, _delete_range, _duplicate_lines, _splice, _append_document, _replace_scalar,
             _replace_scalar, _wrap_value, _aliases, _encoding, _indent]

_TOKEN = re.compile(rb"[0-9a-fA-F]*[0-9][0-9a-fA-F.:/]*")  # a port, an address, a prefix, a range


def _hostile_token(data, rng, corpus):
    """A number or address of a dump replaced by a hostile one (a port past 65535, `999.0.0.1`)."""
    tokens = [match.span() for _, match in zip(range(5000), _TOKEN.finditer(data))]
    if not tokens:
        return data
    start, end = rng.choice(tokens)
    value = rng.choice(generators.HOSTILE_PORTS + generators.HOSTILE_ADDRESSES)
    return data[:start] + value.encode("utf-8", "surrogatepass") + data[end:]


def _cut_line(data, rng, corpus):
    """A dump cut at a line, as a full disk or a dropped ssh session leaves it."""
    lines = data.split(b"\n")
    return b"\n".join(lines[:rng.randrange(len(lines))]) if len(lines) > 1 else data[:len(data) // 2]


DUMP_MUTATIONS = [_flip, _insert_bytes, _delete_range, _duplicate_lines, _splice, _encoding, _indent, _cut_line,
                  _hostile_token, _hostile_token, _hostile_token]


def node_input(rng: random.Random, node_corpus: list[tuple[str, bytes]]) -> dict[str, bytes]:
    """One to four dump files for a node: generated (every format) or shipped, most of them mutated."""
    corpus = [data for _, data in node_corpus]
    files = {}
    for index in range(rng.randint(1, 4)):
        if rng.random() < 0.5:
            name = rng.choice(sorted(generators.NODE_DUMPS))
            data = generators.NODE_DUMPS[name](rng).encode("utf-8", "surrogatepass")
        else:
            name, data = rng.choice(node_corpus)
        for _ in range(rng.randint(1, 3) if rng.random() < 0.7 else 0):
            data = rng.choice(DUMP_MUTATIONS)(data, rng, corpus)
        files[f"{index}-{name}"] = data
    return files


def make_input(rng: random.Random, corpus: list[bytes]) -> bytes:
    if rng.random() < 0.25:
        base = "".join(f"---\n{generated_document(rng)}" for _ in range(rng.randint(1, 3))).encode()
    else:
        base = rng.choice(corpus)
    return mutate(base, rng, corpus) if rng.random() < 0.9 else base


# --- the oracle ----------------------------------------------------------------------------------


class Bug(AssertionError):
    pass


def check_in_process(data: bytes, nodes: Path | None = None, policies=None) -> None:
    """Lint `data` as standard input (and, with `nodes`, as a node inventory too); every failure
    of the tool itself raises Bug with the input's size, to save it for a reproducer."""
    from kubelint_ports.engine import LintOptions, lint_paths
    from kubelint_ports.policies import builtin_policies

    options = LintOptions(node_files=(str(nodes),) if nodes else ())
    check_report(lambda: lint_paths(["-"], options, stdin=io.BytesIO(data),
                                    policies=builtin_policies() if policies is None else policies), "lint_paths")


def check_report(run, what: str) -> tuple[object, list[str]]:
    """Run `run()` (a report), then every formatter on its report: (report, their outputs). An
    exception, an internal error or a formatter's failure raises Bug."""
    from kubelint_ports.formatters import FormatOptions, get_formatter

    try:
        report = run()
    except Exception as error:  # noqa: BLE001 (that is the finding)
        raise Bug(f"{what} raised {type(error).__name__}: {error}") from error
    internal = [d for d in report.diagnostics if d.internal]
    if internal:
        raise Bug(f"internal error: {internal[0].message}")
    outputs = []
    for name in FORMATS:
        stream = io.StringIO()
        try:
            get_formatter(name)(report, stream, FormatOptions(show_suppressed=True))
        except Exception as error:  # noqa: BLE001
            raise Bug(f"formatter {name} raised {type(error).__name__}: {error}") from error
        outputs.append(stream.getvalue())
    return report, outputs


GOOD_NODE = ROOT / "tests" / "policies" / "KP805" / "fail-incident-003" / "node-5"  # one KP805 finding
SECRET = "FUZZ-SECRET-" + "c2VjcmV0" * 4  # the content of a file outside the snapshot
MAX_MESSAGE = 1500  # characters: a message about a dump is a few sentences, never the dump


def check_node(files: dict[str, bytes], scratch: Path, rng: random.Random | None = None) -> None:
    """`files` as one node's snapshot, next to a clean node, through the `node` pipeline in-process.
    With `rng`, the snapshot sometimes also holds a subdirectory and symlinks in and out of it."""
    from kubelint_ports.engine import lint_snapshots
    from kubelint_ports.policies import builtin_policies

    node, good = scratch / "node-fuzzed", scratch / "node-good"
    shutil.rmtree(node, ignore_errors=True)
    node.mkdir(parents=True)
    if not good.exists():
        shutil.copytree(GOOD_NODE, good)
        (scratch / "outside.txt").write_text(f"{SECRET}\n")
    for name, data in files.items():
        (node / name).write_bytes(data)
    if rng is not None and rng.random() < 0.1:
        (node / "subdirectory").mkdir()
        (node / "subdirectory" / "iptables-save").write_bytes(next(iter(files.values())))
        (node / "out").symlink_to(scratch / "outside.txt")
        (node / "in").symlink_to(node / next(iter(files)))
        (node / "up").symlink_to(scratch, target_is_directory=True)
    report, outputs = check_report(lambda: lint_snapshots([str(node), str(good)], policies=builtin_policies()),
                                   "lint_snapshots")
    if not any(f.rule_id == "KP805" and "node-good" in f.location.path for f in report.findings):
        raise Bug("the clean node lost its KP805 finding next to the fuzzed one")
    if any(SECRET[:16] in output for output in outputs):
        raise Bug("a report quotes a file reached through a symlink out of the snapshot")
    long = [d.message for d in report.diagnostics if len(d.message) > MAX_MESSAGE]
    if long:
        raise Bug(f"a message of {len(long[0]):,} characters: {long[0][:200]!r}")


def check_kustomize(rng: random.Random, scratch: Path, documents: list[str]) -> None:
    """A generated Kustomize directory linted in-process (kubectl or kustomize builds it)."""
    from kubelint_ports.engine import LintOptions, lint_paths
    from kubelint_ports.policies import builtin_policies

    top = scratch / "kustomize"
    shutil.rmtree(top, ignore_errors=True)
    generators.kustomize_directory(rng, top / "app", documents, scalar)
    (top / "outside.yaml").write_text(f"# {SECRET}\n" + rng.choice(documents))
    check_report(lambda: lint_paths([str(top / "app")], LintOptions(), policies=builtin_policies()),
                 "lint_paths (Kustomize)")


def check_policy(data: bytes, manifest: bytes, scratch: Path) -> str:
    """`data` as a user policy: refused with a clear error ("refused"), or loaded and run over
    `manifest` like the built-in ones ("ran"). Anything else raises Bug."""
    from kubelint_ports.config import ConfigError
    from kubelint_ports.policies import PolicyError
    from kubelint_ports.settings import CommandLine, resolve
    from kubelint_ports.suppressions import BaselineError

    directory = scratch / "user-policies"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    (directory / "KP950-fuzzed-ports.yaml").write_bytes(data)
    (scratch / "empty.yaml").write_text("")
    try:
        settings = resolve(CommandLine(config=str(scratch / "empty.yaml"), policies=(str(directory),)))
    except (ConfigError, PolicyError, BaselineError, ValueError):
        return "refused"
    except Exception as error:  # noqa: BLE001
        raise Bug(f"loading the policy raised {type(error).__name__}: {error}") from error
    check_in_process(manifest, policies=settings.policies)
    return "ran"


HANG_SECONDS = 300.0  # one input; kubectl and a 2 s regex deadline per pattern fit well inside


@contextmanager
def watchdog(seconds: float, what: str):
    """Past `seconds` the input is stuck (a C loop Python cannot interrupt): say which, and end
    the campaign with exit 3, since the process cannot go on."""
    def hung():
        print(f"HANG: {what} ran past {seconds:g} s", file=sys.stderr, flush=True)
        os._exit(3)

    timer = threading.Timer(seconds, hung)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def check_settings(data: bytes, scratch: Path) -> None:
    """`data` as the configuration file, then as a user policy: a clear error or settings, never
    another exception (the CLI turns those four into exit 2)."""
    from kubelint_ports.config import ConfigError
    from kubelint_ports.policies import PolicyError
    from kubelint_ports.settings import CommandLine, resolve
    from kubelint_ports.suppressions import BaselineError

    config = scratch / "config.yaml"
    config.write_bytes(data)
    policies = scratch / "policies"
    policies.mkdir(exist_ok=True)
    (policies / "KP950-fuzzed.yaml").write_bytes(data)
    for command in (CommandLine(config=str(config)), CommandLine(config=str(scratch / "empty.yaml"),
                                                                 policies=(str(policies),))):
        (scratch / "empty.yaml").write_text("")
        try:
            resolve(command)
        except (ConfigError, PolicyError, BaselineError, ValueError):
            pass
        except Exception as error:  # noqa: BLE001
            raise Bug(f"settings raised {type(error).__name__}: {error}") from error


def check_cli(data: bytes, output_format: str, timeout: float = 120) -> int:
    """The CLI in its own process: exit 0, 1 or 2; 3 (internal error) or a signal is a Bug."""
    done = subprocess.run([sys.executable, "-m", "kubelint_ports", "lint", "-", "--format", output_format],
                          input=data, capture_output=True, timeout=timeout)
    if done.returncode not in (0, 1, 2):
        raise Bug(f"CLI exit {done.returncode}: {done.stderr[-1500:].decode('utf-8', 'replace')}")
    return done.returncode


# The untrusted-repository surfaces (issue 31), each from its own generator module and random
# stream: name -> (module, how often by default, the check). A check gets (rng, scratch) and raises
# AssertionError (a Bug) when the tool ran something from the tree, went past a budget, or failed.
def _git(rng: random.Random, scratch: Path, corpus: list[bytes]) -> None:
    import fuzzing_git

    fuzzing_git.check_git_tree(rng, scratch)


def _archive(rng: random.Random, scratch: Path, corpus: list[bytes]) -> None:
    import fuzzing_budgets

    fuzzing_budgets.check_archive(fuzzing_budgets.hostile_archive(rng), scratch)


def _repository_config(rng: random.Random, scratch: Path, corpus: list[bytes]) -> None:
    import fuzzing_budgets

    fuzzing_budgets.check_repository_config(fuzzing_budgets.repository_config(rng), scratch)


def _policy_budget(rng: random.Random, scratch: Path, corpus: list[bytes]) -> None:
    import fuzzing_policies

    manifest = fuzzing_policies.many_ports_manifest(rng) if rng.random() < 0.7 else rng.choice(corpus)
    fuzzing_policies.check_policy_budget(fuzzing_policies.policy_with_patterns(rng), manifest, scratch)


def _fix(rng: random.Random, scratch: Path, corpus: list[bytes]) -> None:
    import fuzzing_fix

    data = mutate(rng.choice(corpus), rng, corpus) if rng.random() < 0.5 else rng.choice(corpus)
    fuzzing_fix.check_fix(data, scratch)


UNTRUSTED = {"git": (_git, 50), "archive": (_archive, 20), "repository-config": (_repository_config, 20),
             "policy-budget": (_policy_budget, 50), "fix": (_fix, 10)}


def check_untrusted(name: str, rng: random.Random, scratch: Path, corpus: list[bytes]) -> None:
    """One input of an untrusted-repository surface; an AssertionError or an exception is a Bug."""
    check = UNTRUSTED[name][0]
    try:
        (scratch / name).mkdir(parents=True, exist_ok=True)
        check(rng, scratch / name, corpus)
    except Bug:
        raise
    except Exception as error:  # noqa: BLE001 (AssertionError included: that is the finding)
        raise Bug(f"{name}: {type(error).__name__}: {str(error)[:500]}") from error


def campaign(count: int, seed: int, cli_every: int, save: Path | None, progress: bool = True, *,
             node_every: int = 4, policy_every: int = 20, kustomize_every: int = 500,
             untrusted_every: dict[str, int] | None = None) -> dict:
    import tempfile

    rng = random.Random(seed)  # the manifests: the stream of earlier releases, so a seed replays them
    other = random.Random(f"{seed}:nodes-policies-kustomize")  # a stream of its own (str seeds: sha512)
    corpus = seed_corpus()
    node_corpus = generators.node_seed_corpus()
    failures: list[tuple[int, str, str]] = []
    untrusted = random.Random(f"{seed}:untrusted")  # a stream of its own: earlier seeds replay as before
    every = {name: period for name, (_, period) in UNTRUSTED.items()} | (untrusted_every or {})
    counts = {"inputs": 0, "cli": 0, "as-nodes": 0, "as-settings": 0, "node-dumps": 0, "policies": 0,
              "policies-refused": 0, "kustomize": 0, **{name: 0 for name in UNTRUSTED}}
    started = time.monotonic()

    def failed(index: int, kind: str, error: BaseException, keep) -> None:
        failures.append((index, kind, str(error)[:300]))
        if save is not None:
            keep(save / f"failure-{seed}-{index}-{kind}")

    def keep_bytes(data: bytes, suffix: str):
        def keep(path: Path) -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.with_name(path.name + suffix).write_bytes(data)
        return keep

    def keep_tree(tree: Path):
        return lambda path: shutil.copytree(tree, path, symlinks=True, dirs_exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="kp-fuzz-") as scratch:
        nodes_file = Path(scratch) / "nodes.yaml"
        for index in range(count):
            data = make_input(rng, corpus)
            as_nodes = rng.random() < 0.05
            as_settings = rng.random() < 0.03
            with watchdog(HANG_SECONDS, f"input {index} of seed {seed} (files in {scratch})"):
                try:
                    if as_settings:
                        check_settings(data, Path(scratch))
                        counts["as-settings"] += 1
                    if as_nodes:
                        nodes_file.write_bytes(data)
                        counts["as-nodes"] += 1
                    check_in_process(data, nodes_file if as_nodes else None)
                    if cli_every and index % cli_every == 0:
                        check_cli(data, FORMATS[index // cli_every % len(FORMATS)])
                        counts["cli"] += 1
                except (Bug, subprocess.TimeoutExpired) as error:
                    failed(index, "settings" if as_settings and "settings raised" in str(error) else "lint", error,
                           keep_bytes(data, ".yaml"))
                if node_every and index % node_every == 0:
                    files = node_input(other, node_corpus)
                    try:
                        check_node(files, Path(scratch), other)
                    except Bug as error:
                        failed(index, "node", error, keep_tree(Path(scratch) / "node-fuzzed"))
                    counts["node-dumps"] += 1
                if policy_every and index % policy_every == 0:
                    policy = generators.policy_file(other).encode()
                    if other.random() < 0.2:
                        policy = mutate(policy, other, corpus)
                    try:
                        if check_policy(policy, other.choice(corpus), Path(scratch)) == "refused":
                            counts["policies-refused"] += 1
                    except Bug as error:
                        failed(index, "policy", error, keep_bytes(policy, ".yaml"))
                    counts["policies"] += 1
                if kustomize_every and index % kustomize_every == kustomize_every - 1:
                    documents = [(make_input(other, corpus) if other.random() < 0.3 else other.choice(corpus))
                                 .decode("utf-8", "replace") for _ in range(3)]
                    try:
                        check_kustomize(other, Path(scratch), documents)
                    except Bug as error:
                        failed(index, "kustomize", error, keep_tree(Path(scratch) / "kustomize"))
                    counts["kustomize"] += 1
                for name, period in every.items():
                    if period and index % period == period - 1:
                        (Path(scratch) / name).mkdir(exist_ok=True)
                        try:
                            check_untrusted(name, untrusted, Path(scratch), corpus)
                        except Bug as error:
                            failed(index, name, error, keep_tree(Path(scratch) / name))
                        counts[name] += 1
            counts["inputs"] += 1
            if progress and (index + 1) % 1000 == 0:
                print(f"{index + 1:,} inputs, {len(failures)} failures, {time.monotonic() - started:.0f} s",
                      file=sys.stderr, flush=True)
    counts["failures"] = len(failures)
    kinds = [kind for _, kind, _ in failures]
    counts["by-class"] = {kind: kinds.count(kind) for kind in sorted(set(kinds))}
    counts["seconds"] = round(time.monotonic() - started)
    counts["examples"] = failures[:20]
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000, help="inputs to generate")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cli-every", type=int, default=200,
                        help="also run every Nth input through the CLI in a subprocess (signals, exit codes)")
    parser.add_argument("--save", type=Path, default=None, help="directory for inputs that found a bug")
    parser.add_argument("--node-every", type=int, default=4, help="also fuzz a node's dumps every Nth input")
    parser.add_argument("--policy-every", type=int, default=20, help="also fuzz a user policy every Nth input")
    parser.add_argument("--kustomize-every", type=int, default=500,
                        help="also fuzz a Kustomize directory every Nth input (kubectl is slow)")
    for name, (_, period) in UNTRUSTED.items():
        parser.add_argument(f"--{name}-every", type=int, default=period,
                            help=f"also fuzz the {name} surface every Nth input (0: never)")
    arguments = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("PYTHONHASHSEED", "0")
    result = campaign(arguments.count, arguments.seed, arguments.cli_every, arguments.save,
                      node_every=arguments.node_every, policy_every=arguments.policy_every,
                      kustomize_every=arguments.kustomize_every,
                      untrusted_every={name: getattr(arguments, name.replace("-", "_") + "_every") for name in UNTRUSTED})
    print(result)
    sys.exit(1 if result["failures"] else 0)


if __name__ == "__main__":
    main()
