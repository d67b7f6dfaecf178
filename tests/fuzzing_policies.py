"""The fuzzer's hostile custom policies at run time (issue 31; tests/fuzzing.py runs them):
`port-schema` policies whose patterns backtrack (nested quantifiers, polynomial `.*` runs,
backreferences, lookarounds, alternations of thousands of words) and whose messages iterate big
lists, over manifests with many ports, long and repeated names and many labels.

`check_policy_budget` loads a policy as a repository's own and lints with it, and fails (an
AssertionError) on an unexpected exception, an internal error, a message past the cap, more
findings than a policy may show, output past what those allow, or patterns that matched past
their budget. It runs with budgets scaled down (`SMALL`: the same code, a tenth of the pattern
budgets, a thirtieth of the checking time, 200 findings), so a campaign of thousands of inputs
takes minutes, not hours (`values=None` runs the real ones).

Every generator takes the `random.Random` that decides everything, so a seed replays an input.
"""

from __future__ import annotations

import io
import json
import random
import shutil
import zlib
from contextlib import contextmanager
from pathlib import Path

# --- policies ------------------------------------------------------------------------------------

STRING_FIELDS = {"container-port": ["name", "namespace", "container", "portName", "protocol", "hostIP", "role"],
                 "service-port": ["name", "namespace", "portName", "protocol", "type"],
                 "service": ["name", "namespace", "type"]}
LIST_FIELDS = {"container-port": [], "service-port": [], "service": ["ports"]}
WORDS = ["web", "api", "metrics", "http", "grpc", "admin", "tenant", "edge", "ingress", "db"]


def hostile_pattern(rng: random.Random) -> str:
    """A pattern Python's re may spend long on, that the load-time check may or may not refuse."""
    star = rng.choice([".*", "a*", "\\w*", "[a-z]*", ".*?"])
    kinds = [
        lambda: star * rng.randint(3, 8) + rng.choice(["=", "b", "$x", "!"]),  # polynomial, let through
        lambda: rng.choice(["^(a+)+$", "(x+x+)+y", "^([a-z0-9]+-?)+$", "^(\\w+\\s?)*$", "(a|aa)*b", "^(.*?,){11}P"]),
        lambda: rng.choice(["^(\\w*)\\1\\1\\1$", "^(.+)\\1+$", "(a*)\\1*b", "^(\\w+)-\\1-\\1=", "(.*)(.*)\\2\\1="]),
        lambda: rng.choice(["^(?=.*a)(?=.*b)(?=.*c).*=$", "(?<=a)b", "^(?!.*a.*a.*a.*a.*a).*=", "(?=.*.*.*.*.*=)",
                            "^(?:(?!ab).)*=$", "(?=(a*)*b)"]),
        lambda: "^(?:" + "|".join(f"{rng.choice(WORDS)}-{index}" for index in range(rng.choice([10, 1000, 5000])))
                + ")" + rng.choice(["$", "", "=", "+$"]),
        lambda: rng.choice(["[", "(", "\\", "a{2,1}", "(?P<x>a)(?P<x>b)", "\\p{L}", "a{1000000}", "(?<=a+)b"]),
        lambda: rng.choice(["^[a-z0-9]+(-[a-z0-9]+)*$", "^tenant-", "(?i)web", "^(ingress|edge)$", "", "\\d{2,}"]),
    ]
    # Mostly patterns that load and then run (polynomial, backreferences, lookarounds, alternations);
    # what the loader refuses (nested quantifiers, invalid) only now and then: a refused policy runs nothing.
    return rng.choices(kinds, weights=[30, 6, 15, 15, 15, 4, 15])[0]()


def pattern_schema(rng: random.Random, target: str) -> dict:
    """A schema whose keywords put patterns on the context's strings, its labels' keys and values,
    and (for Services) each port's name; now and then a pattern a parameter gives."""
    def one() -> dict:
        choice = rng.random()
        if choice < 0.5:
            return {"properties": {rng.choice(STRING_FIELDS[target]): {"pattern": hostile_pattern(rng)}}}
        if choice < 0.65:
            return {"properties": {"labels": {"patternProperties": {hostile_pattern(rng): {"pattern": hostile_pattern(rng)}},
                                              "additionalProperties": rng.choice([True, False, {"type": "string"}])}}}
        if choice < 0.75:
            return {"properties": {"labels": {"propertyNames": {"pattern": hostile_pattern(rng)}}}}
        if choice < 0.85 and LIST_FIELDS[target]:
            return {"properties": {"ports": {"items": {"properties": {"portName": {"pattern": hostile_pattern(rng)}}}}}}
        if choice < 0.92:
            return {"properties": {"name": {"pattern": {"$param": "shape"}}}}
        return {"anyOf": [{"properties": {rng.choice(STRING_FIELDS[target]): {"pattern": hostile_pattern(rng)}}}
                          for _ in range(rng.randint(2, 6))]}

    parts = [one() for _ in range(rng.randint(1, 4))]
    return parts[0] if len(parts) == 1 else {rng.choice(["allOf", "anyOf", "oneOf"]): parts}


def message_template(rng: random.Random, target: str) -> str:
    """A message naming the context and iterating the policy's big lists, or a huge one."""
    port = {"container-port": "{containerPort}", "service-port": "{port}", "service": "{name}"}[target]
    pieces = [f"port {port} of {{name}} breaks the rule"]
    for _ in range(rng.randint(0, 4)):
        pieces.append(rng.choice([
            "allowed: {ranges:{min}-{max}}", "names: {names}", "also {ranges:{min}..{max} ({reason})}",
            "{labels}", "{ranges.reason}", "{name} " * rng.choice([10, 10_000]), "x" * rng.choice([100, 100_000]),
            "\x1b[2J\u202e::error::", "{ports}" if target == "service" else "{protocol}",
            "{ranges:{nope}}", "{{name}}", "{",
        ] + (["{nope}"] if rng.random() < 0.2 else [])))
    return " ".join(pieces) if rng.random() < 0.99 else rng.choice(["x", "ab", ""])  # too short: refused


def policy_with_patterns(rng: random.Random) -> str:
    """A user policy (KP9xx, `check: port-schema`) with hostile patterns and a message template
    over big parameter lists, as YAML (JSON flow); now and then one the loader must refuse."""
    target = rng.choice(list(STRING_FIELDS))
    size = rng.choices([0, 1, 3, 100, 2_000, 20_000], weights=[3, 3, 3, 3, 3, 1])[0]
    ranges = [{"min": 1000 + index, "max": 1000 + index + rng.randint(0, 9), "reason": rng.choice(WORDS)}
              for index in range(size)]
    names = [rng.choice(WORDS) * rng.randint(1, 8) for _ in range(rng.choice([0, 5, 500]))]
    shape = hostile_pattern(rng)
    params = {"target": target, "message": message_template(rng, target), "schema": pattern_schema(rng, target),
              "parameters": {"ranges": {"type": "array", "items": {"type": "object"}},
                             "names": {"type": "array", "items": {"type": "string", "pattern": (
                                 hostile_pattern(rng) if rng.random() < 0.1 else "^[a-z]+$")}},
                             "shape": {"type": "string"}},
              "ranges": ranges, "names": names, "shape": shape}
    if rng.random() < 0.3:  # `each`: a subschema per range, the failing one named by `{ranges.reason}`
        params["schema"] = {"allOf": [params["schema"], {"properties": {"hostPort": {"anyOf": [
            {"type": "null"}, {"$param": "ranges", "each": {"minimum": {"$item": "min"}, "maximum": {"$item": "max"}}}]}}}]}
    policy = {"id": "KP950", "name": "fuzzed-patterns", "severity": rng.choice(["error", "warning", "note"]),
              "summary": "A fuzzed policy with hostile patterns.", "check": "port-schema", "params": params,
              "docs": {"what": "Flags what the fuzzed patterns refuse.",
                       "why": "The fuzzer checks that a policy's patterns and messages stay within their budgets.",
                       "example": "apiVersion: v1", "fix": "apiVersion: v1", "references": ["https://example.com"]}}
    return json.dumps(policy, indent=1)  # JSON is YAML: patterns and templates need no quoting rules


# --- manifests with many ports ---------------------------------------------------------------------

def many_ports_manifest(rng: random.Random) -> bytes:
    """Pods and Services with many ports: names long enough to make a pattern backtrack, distinct
    or repeated, many labels, hostPorts now and then."""
    def name(index: int) -> str:
        kind = rng.random()
        if kind < 0.4:
            return "a" * rng.choice([20, 30, 45])  # the same on every port
        if kind < 0.7:
            return f"{'a' * rng.choice([20, 30, 45])}{index}"  # distinct
        return f"{rng.choice(WORDS)}-{index % 7}"

    documents = []
    for number in range(rng.randint(1, 3)):
        ports = rng.choice([1, 20, 200, 2_000])
        labels = ", ".join(f"{name(index)}: {name(index + 1)}" for index in range(rng.choice([0, 3, 300])))
        entries = "\n".join(
            f"    - {{containerPort: {1 + (index * 7) % 65535}, name: {name(index)}"
            + (f", hostPort: {1000 + index}" if rng.random() < 0.2 else "") + "}" for index in range(ports))
        documents.append(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name(number)}, namespace: {name(number)}, "
                         f"labels: {{{labels}}}}}\nspec:\n  containers:\n  - name: {name(number)}\n    image: x\n"
                         f"    ports:\n{entries}\n")
        service_ports = "\n".join(f"  - {{name: {name(index)}, port: {1 + index}, targetPort: {8000 + index}}}"
                                  for index in range(rng.choice([1, 50, 500])))
        documents.append(f"apiVersion: v1\nkind: Service\nmetadata: {{name: {name(number)}, labels: {{{labels}}}}}\n"
                         f"spec:\n  type: {rng.choice(['ClusterIP', 'NodePort'])}\n  ports:\n{service_ports}\n")
    return "---\n".join(documents).encode()


# --- the check ---------------------------------------------------------------------------------------

# The budgets a campaign runs with (seconds, findings), scaled down from the real ones.
SMALL = {"PATTERN_SECONDS": 0.2, "POLICY_PATTERN_SECONDS": 0.4, "RUN_PATTERN_SECONDS": 1.6, "MAX_FINDINGS": 200,
         "POLICY_SECONDS": 1.0, "RUN_POLICY_SECONDS": 4.0}
PORT_SCHEMA_BUDGETS = ("MAX_FINDINGS", "POLICY_SECONDS", "RUN_POLICY_SECONDS")  # the rest are user_schemas'
TIMER_SLACK = 1.0  # seconds a timer signal may arrive late on a loaded machine, once per budget
FINDING_OVERHEAD = 4096  # bytes of place, subject and fingerprint around a finding's message in JSON


@contextmanager
def budgets(values: dict | None):
    """The pattern and findings budgets set to `values` inside the block, restored after; every
    compiled pattern forgotten after, so one input's given-up patterns do not leak into the next."""
    from kubelint_ports.checks.manifest import port_schema
    from kubelint_ports import policy_schemas as user_schemas

    saved = {}
    for name, value in (values or {}).items():
        module = port_schema if name in PORT_SCHEMA_BUDGETS else user_schemas
        saved[name] = (module, getattr(module, name))
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, (module, value) in saved.items():
            setattr(module, name, value)
        user_schemas.matcher.cache_clear()


@contextmanager
def shares_watched():
    """The run shares (`policies.RuleRun`) the port-schema check is given inside the block, in a
    list: what its budgets spent, looked at after the run has spoken."""
    from kubelint_ports.checks.manifest import port_schema

    shares: list = []
    real = port_schema.rule_run

    def watched(params):
        shares.append(real(params))
        return shares[-1]

    port_schema.rule_run = watched
    try:
        yield shares
    finally:
        port_schema.rule_run = real


def check_policy_budget(policy_text: str, manifest_bytes: bytes, scratch: Path, values: dict | None = SMALL) -> str:
    """`policy_text` as a repository's own policy over `manifest_bytes` and a many-ports manifest
    made from the policy (its CRC32 seeds it, so the input replays): "refused" (a clear error at
    load), or it ran: "stopped" (a time budget ran out), "capped" (findings past the cap), "cut"
    (a message at its cap) or "ran". Raises AssertionError on anything else, or past a budget."""
    from kubelint_ports.checks.manifest import port_schema
    from kubelint_ports.config import ConfigError
    from kubelint_ports.engine import LintOptions, lint_paths
    from kubelint_ports.formatters import FormatOptions, get_formatter
    from kubelint_ports import policy_schemas as user_schemas
    from kubelint_ports.policies import PolicyError
    from kubelint_ports.settings import CommandLine, resolve
    from kubelint_ports.suppressions import BaselineError

    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "policies").mkdir(parents=True)
    (scratch / "policies" / "KP950-fuzzed-patterns.yaml").write_text(policy_text, encoding="utf-8")
    (scratch / "empty.yaml").write_text("")
    (scratch / "given.yaml").write_bytes(manifest_bytes)
    (scratch / "ports.yaml").write_bytes(many_ports_manifest(random.Random(zlib.crc32(policy_text.encode()))))
    with budgets(values):
        try:
            settings = resolve(CommandLine(config=str(scratch / "empty.yaml"), policies=(str(scratch / "policies"),)))
        except (ConfigError, PolicyError, BaselineError, ValueError):
            return "refused"
        except Exception as error:  # noqa: BLE001 (that is the finding)
            raise AssertionError(f"loading the policy raised {type(error).__name__}: {error}") from error
        policies = [policy for policy in settings.policies if policy.id == "KP950"]
        assert len(policies) == 1, "the fuzzed policy did not load as KP950"
        [policy] = policies
        try:
            with shares_watched() as shares:
                report = lint_paths([str(scratch / "given.yaml"), str(scratch / "ports.yaml")],
                                    LintOptions(jobs=1), policies=policies)
        except Exception as error:  # noqa: BLE001
            raise AssertionError(f"lint_paths raised {type(error).__name__}: {error}") from error
        assert len({id(share) for share in shares}) <= 1, "the policy's budgets were not the run's"
        spent = shares[0].spent if shares else {}
        limit, cap = port_schema.MESSAGE_CHARS, port_schema.MAX_FINDINGS
        policy_seconds, run_seconds = user_schemas.POLICY_PATTERN_SECONDS, user_schemas.RUN_PATTERN_SECONDS
    internal = [problem.message for problem in report.diagnostics if problem.internal]
    assert not internal, f"internal error: {internal[0][:500]}"
    mine = [finding for finding in report.findings if finding.rule_id == "KP950"]
    long = [finding.message for finding in mine if len(finding.message) > limit]
    assert not long, f"a message of {len(long[0]):,} characters (cap {limit:,}): {long[0][:200]}..."
    assert len(mine) <= cap, f"{len(mine):,} findings of one policy (cap {cap:,})"
    remarks = [problem.message for problem in report.diagnostics if problem.message.startswith("rule KP950 ")]
    assert len(remarks) <= 2, f"{len(remarks)} remarks of one policy (one per budget at most): {remarks}"
    counts, findings = spent.get("counts", {}), spent.get("findings", {})
    if findings.get("hidden"):
        assert any("more not" in remark for remark in remarks), "findings were left out without a word"
    if counts.get("unchecked"):
        assert any("unchecked" in remark for remark in remarks), "ports were left unchecked without a word"
    budget = spent.get("patterns")
    if budget is not None:
        assert budget.used <= policy_seconds + TIMER_SLACK, f"the policy's patterns matched for {budget.used:.2f} s"
        assert budget.parent.used <= run_seconds + TIMER_SLACK, f"the run's patterns matched for {budget.parent.used:.2f} s"
    for name in ("json", "sarif", "text"):
        stream = io.StringIO()
        try:
            get_formatter(name)(report, stream, FormatOptions(show_suppressed=True))
        except Exception as error:  # noqa: BLE001
            raise AssertionError(f"formatter {name} raised {type(error).__name__}: {error}") from error
        # Each finding is a capped message (at most 6 bytes a character, escaped) plus its place and
        # subject, which quote the input at most twice; the rest of the output is the run's.
        bound = 65_536 + sum(6 * len(f.message) + FINDING_OVERHEAD + 2 * len(str(f.subject)) + 2 * len(f.location.path)
                             for f in report.findings) + 8 * sum(len(d.message) for d in report.diagnostics)
        assert len(stream.getvalue()) <= bound + 6 * len(manifest_bytes), (
            f"{name} wrote {len(stream.getvalue()):,} characters for {len(report.findings):,} findings")
    if counts.get("unchecked"):
        return "stopped"  # a budget of the run ran out, and the policy said so
    if findings.get("hidden"):
        return "capped"
    return "cut" if any(len(finding.message) >= limit - 40 for finding in mine) else "ran"


def campaign(count: int, seed: int = 0, scratch: Path | None = None, progress: bool = False) -> dict:
    """`count` policies with their own many-ports manifests (the given manifest a small pod):
    counts of what ran and was refused; the first failure raises, naming its index and seed."""
    import tempfile

    rng = random.Random(seed)
    counts = {"ran": 0, "cut": 0, "capped": 0, "stopped": 0, "refused": 0}
    pod = b"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: app, ports: [{containerPort: 80}]}]\n"
    with tempfile.TemporaryDirectory() as temporary:
        where = scratch or Path(temporary)
        for index in range(count):
            policy = policy_with_patterns(rng)
            try:
                counts[check_policy_budget(policy, pod, where / "policy-budget")] += 1
            except AssertionError as error:
                raise AssertionError(f"input {index} of seed {seed}: {error}") from error
            if progress and index % 100 == 99:
                print(f"{index + 1} inputs: {counts}", flush=True)
    return counts


if __name__ == "__main__":
    import argparse
    import time

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    started = time.monotonic()
    result = campaign(arguments.count, arguments.seed, progress=True)
    print(f"{arguments.count} inputs, seed {arguments.seed}: {result}, 0 failures, {time.monotonic() - started:.0f} s")
