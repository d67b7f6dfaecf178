"""Scaffold a manifest rule: the three files a rule is written in, and what is generated from them.

    python tools/new_rule.py host-ip-without-host-port --id KP107 --severity warning \
        --summary "A container port sets hostIP without hostPort, which the kubelet ignores"
    python tools/new_rule.py NAME --id KPnnn --generate     # then writes what is generated too

It writes, and refuses to overwrite:

1. the policy, `policies/KPnnn-NAME.yaml`: id, name, severity, summary, the check it uses and
   where that check lives (`module:`), whether it compares objects (`--cross-object`), and the
   docs (what it finds, what, why, a failing example, the fix, references), which the tests run;
2. the check, `kubelint_ports/checks/manifest/NAME_WITH_UNDERSCORES.py`: one registered function
   that reads the model (`Cluster`) and yields `Hit`s, its message shaped by `phrases.story`;
3. the fixtures, `tests/policies/KPnnn/fail-NAME.yaml` and `pass-NAME.yaml`;

and `examples/NAME.yaml` (the failing fixture again: the README's first command shows every rule
firing; make it a case users would meet). The scaffolded rule is a working one, the docs'
example rule (a container port with `hostIP` but no `hostPort`, which the kubelet ignores): replace
its condition, message, fixtures and docs with your rule's. `--generate` then runs what writes
the rest (docs/architecture.md, "How to add a rule"):

- `KUBELINT_UPDATE_GOLDEN=1 pytest tests/test_policies.py tests/test_node_policies.py`: the
  fixtures' expected findings and message snapshot (`tests/policies/KPnnn/expected.txt`,
  `messages.snap`);
- `python -m kubelint_ports.docs`: the rule's page, the rules index and overview table, the
  policies' index;
- `python tests/samples.py --write`: the sample outputs in the README and docs (a new example
  changes the counts).

CI runs this scaffold into a temporary copy of the repository and runs the policy tests there
(`tests/test_new_rule.py`), so the path it describes cannot rot.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
RULE_ID = re.compile(r"^KP[0-9]{3}$")

POLICY = """\
id: {id}
name: {name}
severity: {severity}
summary: {summary}
check: {name}
module: manifest.{module}
{cross_object}tags: [ports]
docs:
  finds: "a container port with `hostIP` but no `hostPort`: the kubelet maps nothing, so the address is never bound"
  what: |
    Flags a container port that sets `hostIP` without a `hostPort`.
  why: |
    `hostIP` only says where a hostPort is bound on the node; without a `hostPort` the kubelet
    hands the CNI portmap plugin nothing to map, so the field does nothing while it reads as if
    the port were published on that address.
  example: |
{example}
  fix: |
{fix}
  references:
    - https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#ports
"""

CHECK = '''\
"""{name}: {summary_lower}"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.model import Cluster
from kubelint_ports.model.datapath.phrases import story
from kubelint_ports.model.objects import WILDCARD_HOST_IP


@register("{name}")
def {function}(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    """A container port with `hostIP` but no `hostPort` (replace with your rule's condition): the
    kubelet builds port mappings from hostPorts only, so `hostIP` alone maps nothing."""
    for workload in cluster.workloads:
        for port in workload.container_ports:
            if port.host_ip != WILDCARD_HOST_IP and not port.host_port:  # the model reads no hostIP as 0.0.0.0
                yield Hit(workload, f"{{port.field_path}}.hostIP", story(
                    f"container '{{port.container}}' sets hostIP {{port.host_ip}} without a hostPort",
                    "the kubelet maps only hostPorts, so nothing is bound on that address",
                    "Add the hostPort, or drop the hostIP."), port=port.container_port)
'''

FAILING = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: shop}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - name: web
          image: nginx:1.27
          ports:
            - containerPort: 8080
{host}
"""


def manifest(host: str, indent: str = "") -> str:
    text = FAILING.format(host=host).rstrip("\n")
    return "\n".join(indent + line if line else line for line in text.splitlines()) + "\n"


def files_of(args: argparse.Namespace) -> dict[Path, str]:
    module = args.name.replace("-", "_")
    failing = "              hostIP: 10.0.0.5"
    passing = "              hostPort: 8080\n              hostIP: 10.0.0.5"
    summary = args.summary or f"{args.name.replace('-', ' ').capitalize()} (describe what the rule finds)"
    return {
        ROOT / "policies" / f"{args.id}-{args.name}.yaml": POLICY.format(
            id=args.id, name=args.name, severity=args.severity, summary=json.dumps(summary), module=module,
            cross_object="cross-object: true\n" if args.cross_object else "",
            example=manifest(failing, "    ").rstrip("\n"), fix=manifest(passing, "    ").rstrip("\n")),
        ROOT / "kubelint_ports" / "checks" / "manifest" / f"{module}.py": CHECK.format(
            name=args.name, function=module, summary_lower=summary[:1].lower() + summary[1:]),
        ROOT / "tests" / "policies" / args.id / f"fail-{args.name}.yaml":
            f"# {args.id}: a port with hostIP and no hostPort.\n" + manifest(failing),
        ROOT / "tests" / "policies" / args.id / f"pass-{args.name}.yaml":
            f"# {args.id}: hostIP with its hostPort.\n" + manifest(passing),
        ROOT / "examples" / f"{args.name}.yaml":
            f"# {args.id} {args.name}: replace with a case users meet.\n" + manifest(failing),
    }


def problems(args: argparse.Namespace) -> list[str]:
    found = []
    if not NAME.match(args.name):
        found.append(f"{args.name!r} is not a kebab-case rule name (host-ip-without-host-port)")
    if not RULE_ID.match(args.id):
        found.append(f"{args.id!r} is not a rule id (KPnnn)")
    taken = [path.name for path in (ROOT / "policies").glob("KP*.yaml")
             if path.name.startswith(f"{args.id}-") or path.stem.partition("-")[2] == args.name]
    if taken:
        found.append(f"the id or the name is taken: {', '.join(sorted(taken))}")
    return found


def generate() -> None:
    """Write what is generated from the three files (see the module's docstring)."""
    environment = {**os.environ, "KUBELINT_UPDATE_GOLDEN": "1", "PYTHONPATH": str(ROOT)}
    for command in ([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                     "tests/test_policies.py", "tests/test_node_policies.py"],
                    [sys.executable, "-m", "kubelint_ports.docs"],
                    [sys.executable, "tests/samples.py", "--write"]):
        print("$", " ".join(command[1:] if command[0] == sys.executable else command), flush=True)
        subprocess.run(command, cwd=ROOT, env=environment, check=True, stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="kebab-case rule name, also the check's name")
    parser.add_argument("--id", required=True, help="the rule id, KPnnn, not taken")
    parser.add_argument("--severity", choices=("error", "warning", "note"), default="warning")
    parser.add_argument("--summary", help="one line: what is wrong and what it breaks")
    parser.add_argument("--cross-object", action="store_true", help="the check compares several objects")
    parser.add_argument("--generate", action="store_true", help="then write what is generated from the files")
    args = parser.parse_args(argv)
    found = problems(args)
    if found:
        print("new_rule: " + "; ".join(found), file=sys.stderr)
        return 2
    files = files_of(args)
    existing = [path for path in files if path.exists()]
    if existing:
        print(f"new_rule: refusing to overwrite {', '.join(str(path.relative_to(ROOT)) for path in existing)}",
              file=sys.stderr)
        return 2
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")  # whole or not at all: written, then renamed
        partial.write_text(text, encoding="utf-8", newline="\n")
        os.replace(partial, path)
        print(f"wrote {path.relative_to(ROOT)}")
    if args.generate:
        generate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
