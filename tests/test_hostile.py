"""Hostile input: one minimal reproducer per class of issue 10 (crashes, hangs, memory, reads and
fetches outside the inputs, exit codes). Big inputs are generated here, never committed.

Cases that used to kill the process run the CLI in a subprocess, so a regression shows as a
signal exit instead of taking pytest down. The time bounds below are hang guards, not
performance assertions (figures are in docs/safety.md).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.loading import budgets, load, load_bytes, LoadResult
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.model import placement
from kubelint_ports.model import cluster_network as network

pytestmark = pytest.mark.slow  # inputs run to their budgets and deadlines: not in the quick subset

ROOT = Path(__file__).resolve().parents[1]
HANG_GUARD = 120  # seconds: only a hang (or a machine far slower than any seen) reaches it
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: web
          ports: [{containerPort: 8080, hostPort: 8080}]
"""


def cli(*args: str, cwd: Path | None = None, stdin: bytes | None = None, env: dict | None = None
        ) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "kubelint_ports", *args], cwd=cwd, input=stdin or b"",
                          capture_output=True, timeout=HANG_GUARD, env={**os.environ, **(env or {})})
    assert done.returncode >= 0, f"killed by signal {-done.returncode}: {done.stderr[-2000:]!r}"
    return done


def lint_text(tmp_path: Path, text: str | bytes, name: str = "m.yaml", **options):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return lint_paths([str(path)], LintOptions(**options))


def messages(report) -> str:
    return "\n".join(d.message for d in report.diagnostics)


# --- uncaught exceptions: ValueError --------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("9" * 5000, None), ("1" * 70, None),  # longer than any number an API field holds: not converted
    ("0x_", None), ("0b_", None), ("-0b_", None), ("0o17", None), ("08", None), ("１２", None), ("", None),
    ("1.0", None), ("0_", 0), ("8080", 8080), ("+12", 12), ("-3", -3), ("1_000", 1000), ("0x1F", 31),
    ("017", 15), ("0b101", 5), ("9223372036854775808", 9223372036854775808),
])
def test_parse_int_reads_yaml_1_1_integers_and_never_raises(text, expected):
    """YAML 1.1 integers as the API server's YAML reader takes them; anything else is None."""
    assert yt.parse_int(text) == expected


def test_huge_and_malformed_port_numbers_are_invalid_ports(tmp_path):
    report = lint_text(tmp_path, DEPLOYMENT.replace("hostPort: 8080", "hostPort: " + "9" * 5000)
                       .replace("containerPort: 8080", "containerPort: 0x_"))
    assert not [d for d in report.diagnostics if d.internal]
    assert {f.rule_id for f in report.findings} >= {"KP001"}
    assert all(len(f.message) < 600 for f in report.findings)  # the 5,000 digits are not quoted whole


def test_affinity_gt_lt_values_past_int64_match_nothing():
    requirement = placement.Requirement("rank", "Gt", ("9" * 5000,))
    node = placement.Node("n", {"rank": "1" * 5000})
    assert not placement.matches_term(placement.NodeSelectorTerm((requirement,)), node)


@pytest.mark.parametrize("text", ["10.0.0.0/²", "10.0.0.0/" + "1" * 5000, "1" * 5000 + ".0.0.0/8",
                                  "١٠.0.0.0/8", "10.0.0.0/١٦"])
def test_cidr_parser_never_raises(text):
    networks, problem = network.parse_cidrs(text)
    assert problem and not networks


@pytest.mark.parametrize("text", ["30000-" + "9" * 5000, "٣٠٠٠٠-٣٢٧٦٧", "1+" + "9" * 30])
def test_port_range_parser_never_raises(text):
    assert network.parse_port_range(text) is None


def test_apiserver_node_port_range_flag_with_huge_numbers(tmp_path):
    pod = textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: kube-apiserver, namespace: kube-system}}
        spec:
          containers:
            - name: kube-apiserver
              command: [kube-apiserver, "--service-node-port-range=1-{'9' * 5000}"]
        """)
    report = lint_text(tmp_path, pod)
    assert not [d for d in report.diagnostics if d.internal]


# --- uncaught exceptions: FieldTypeError from the node inventory ----------------------------------


@pytest.mark.parametrize("spec", ["{podCIDRs: 10.0.0.0/24}", "{podCIDRs: [[a]]}", "{taints: x, podCIDR: [1]}"])
def test_wrong_types_in_the_node_inventory_are_input_errors(tmp_path, spec):
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(f"apiVersion: v1\nkind: Node\nmetadata: {{name: n1, labels: [a]}}\nspec: {spec}\n")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(DEPLOYMENT)
    report = lint_paths([str(manifest)], LintOptions(node_files=(str(nodes),)))
    assert not [d for d in report.diagnostics if d.internal], messages(report)
    assert report.findings  # the manifest is still linted


# --- RecursionError, and the C stack: nesting is bounded before composing ------------------------


@pytest.mark.parametrize("deep", ["[" * 30000, "- " * 30000 + "x",
                                  "".join(" " * i + "- \n" for i in range(0, 6000, 2)),
                                  "{a: " * 30000, "a:\n" + "".join(" " * (i + 1) + "b:\n" for i in range(3000))],
                         # Short ids: pytest puts the id in PYTEST_CURRENT_TEST, and the CLI's
                         # environment must stay under the kernel's limit for one variable.
                         ids=["flow-sequences", "block-sequence-line", "block-sequences", "flow-mappings",
                              "block-mappings"])
def test_deep_nesting_is_refused_without_a_crash(tmp_path, deep):
    (tmp_path / "deep.yaml").write_text(deep)
    (tmp_path / "ok.yaml").write_text(DEPLOYMENT)
    done = cli("lint", "deep.yaml", "ok.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert b"nested deeper than 200 levels" in done.stdout
    assert b"KP101" in done.stdout  # the other input is still linted


@pytest.mark.parametrize("where", ["config", "values", "policy", "embedded", "stdin", "nodes"])
def test_deep_nesting_is_refused_everywhere_yaml_is_read(tmp_path, where):
    deep = "[" * 30000
    (tmp_path / "m.yaml").write_text(DEPLOYMENT)
    args = ["lint", "m.yaml"]
    stdin = None
    if where == "config":
        (tmp_path / ".kubelint-ports.yaml").write_text(deep)
    elif where == "values":
        write_chart(tmp_path / "chart")
        (tmp_path / "values.yaml").write_text("a: " + deep)
        args = ["lint", "chart", "-f", "values.yaml"]
    elif where == "policy":
        (tmp_path / "policies").mkdir()
        (tmp_path / "policies" / "KP950-deep.yaml").write_text("id: " + deep)
        args += ["--policies", "policies"]
    elif where == "embedded":
        (tmp_path / "cm.yaml").write_text(config_map("kind: KubeProxyConfiguration\nx: " + deep))
        args.append("cm.yaml")
    elif where == "stdin":
        args.append("-")
        stdin = deep.encode()
    else:
        (tmp_path / "nodes.yaml").write_text(deep)
        args += ["--nodes", "nodes.yaml"]
    done = cli(*args, cwd=tmp_path, stdin=stdin)  # no signal: checked in cli()
    if where == "values":  # Helm's own reader takes it (Go grows its stack); ours refuses it
        assert done.returncode in (0, 1, 2)
        return
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert b"deeper than 200 levels" in done.stdout + done.stderr


def test_the_depth_limit_is_an_option_and_a_config_key(tmp_path):
    """The command line raises it; a configuration file (the repository's) may only lower it."""
    (tmp_path / "m.yaml").write_text("a: " + "[" * 300 + "]" * 300 + "\n")
    (tmp_path / "n.yaml").write_text("a: " + "[" * 150 + "]" * 150 + "\n")
    assert b"deeper than 200" in cli("lint", "m.yaml", cwd=tmp_path).stdout
    assert cli("lint", "m.yaml", "--limit", "max-depth=400", cwd=tmp_path).returncode == 0
    assert cli("lint", "n.yaml", cwd=tmp_path).returncode == 0
    (tmp_path / ".kubelint-ports.yaml").write_text("limits: {max-depth: 100}\n")
    assert b"deeper than 100" in cli("lint", "n.yaml", cwd=tmp_path).stdout
    assert b"deeper than 250" in cli("lint", "m.yaml", "--limit", "max-depth=250", cwd=tmp_path).stdout
    (tmp_path / ".kubelint-ports.yaml").write_text("limits: {max-depth: 400}\n")
    raised = cli("lint", "m.yaml", cwd=tmp_path)
    assert raised.returncode == 2 and b".kubelint-ports.yaml:1: limits.max-depth: 400 is over the default" in raised.stderr
    (tmp_path / ".kubelint-ports.yaml").unlink()
    bad = cli("lint", "m.yaml", "--limit", "max-depth=5000", cwd=tmp_path)
    assert bad.returncode == 2 and b"--limit max-depth=5000: '5000' is out of range (allowed: 1 to 1,000)" in bad.stderr
    assert cli("lint", "m.yaml", "--limit", "nonsense=1", cwd=tmp_path).returncode == 2


def test_alias_chains_expanding_past_the_depth_limit_are_refused():
    chain = ["a0: &a0 [x]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, 3000)]
    result = LoadResult()
    load_bytes(("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n" +
                "\n".join("  " + line for line in chain)).encode(), "m.yaml", result)
    assert "nest deeper than 200 levels once expanded" in result.diagnostics[0].message


def test_recursive_alias_is_refused():
    result = LoadResult()
    load_bytes(b"apiVersion: v1\nkind: ConfigMap\nmetadata: &m {name: c, self: *m}\n", "m.yaml", result)
    assert result.diagnostics  # PyYAML itself refuses a forward alias; no hang either way


def test_deep_json_baseline_and_schema_are_errors_not_crashes(tmp_path):
    (tmp_path / "m.yaml").write_text(DEPLOYMENT)
    (tmp_path / "baseline.json").write_text("[" * 100000)
    done = cli("lint", "m.yaml", "--baseline", "baseline.json", cwd=tmp_path)
    assert done.returncode == 2 and b"not a kubelint-ports baseline" in done.stderr
    chart = write_chart(tmp_path / "chart")
    (chart / "values.schema.json").write_text('{"a":' * 100000 + "1" + "}" * 100000)
    done = cli("lint", "chart", cwd=tmp_path)
    assert done.returncode == 2 and b"nested too deeply" in done.stdout


def test_deep_chart_yaml_and_pyproject_are_errors_not_crashes(tmp_path):
    chart = write_chart(tmp_path / "chart")
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\nx: " + "[" * 30000)
    assert cli("lint", "chart", cwd=tmp_path).returncode in (0, 2)
    (tmp_path / "pyproject.toml").write_text("[tool.kubelint-ports]\npaths = " + "[" * 30000 + "\n")
    done = cli("lint", cwd=tmp_path)
    assert done.returncode == 2 and b"invalid TOML" in done.stderr


def test_a_1100_level_directory_tree_is_walked_without_recursion():
    """Made outside pytest's tmp_path: pytest's own clean-up (shutil.rmtree) recurses per level."""
    import shutil
    import tempfile

    top = tempfile.mkdtemp(prefix="kp-deep-tree-")
    try:
        os.chdir(top)  # relative steps keep each path short enough for the kernel
        for _ in range(1100):
            os.mkdir("d")
            os.chdir("d")
        Path("x.yaml").write_text(DEPLOYMENT)
        os.chdir(ROOT)
        result = load([top])
    finally:
        os.chdir(ROOT)
        if shutil.which("rm"):
            subprocess.run(["rm", "-rf", top], check=False)
    assert not [d for d in result.diagnostics if d.internal]
    assert any("deeper than 200 levels" in note for note in result.notes)


# --- FrozenInstanceError / network: a user policy's remote $ref -----------------------------------


POLICY = """\
id: KP951
name: ref-test
severity: error
summary: a policy whose schema refers elsewhere
check: port-schema
params:
  target: container-port
  message: refers elsewhere
  schema: {schema}
docs:
  what: A test policy with a reference.
  why: To prove the reference is refused.
  example: "apiVersion: v1"
  fix: "apiVersion: v1"
  references: [https://example.com]
"""


@pytest.mark.parametrize("schema", [
    '{properties: {hostPort: {$ref: "http://127.0.0.1:9/p.json"}}}',
    '{properties: {hostPort: {$ref: "HTTP://127.0.0.1:9/p.json"}}}',
    '{$id: "http://127.0.0.1:9/", properties: {hostPort: {$ref: "p.json"}}}',
    '{properties: {hostPort: {$ref: "file:///etc/passwd"}}}',
    '{properties: {hostPort: {$ref: "https://json-schema.org/draft/2020-12/schema"}}}',
    '{$schema: "http://127.0.0.1:9/meta", type: object}',
])
def test_policy_schemas_may_refer_only_to_themselves(tmp_path, schema):
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "KP951-ref-test.yaml").write_text(POLICY.format(schema=schema))
    (tmp_path / "m.yaml").write_text(DEPLOYMENT)
    done = cli("lint", "m.yaml", "--policies", "policies", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert b"KP951-ref-test.yaml:" in done.stderr and (b"refers to the schema" in done.stderr
                                                        or b"meta-schema" in done.stderr)


def test_policy_schema_with_a_local_ref_still_works(tmp_path):
    (tmp_path / "policies").mkdir()
    schema = '{$defs: {p: {maximum: 100}}, properties: {hostPort: {$ref: "#/$defs/p"}}}'
    (tmp_path / "policies" / "KP951-ref-test.yaml").write_text(POLICY.format(schema=schema))
    (tmp_path / "m.yaml").write_text(DEPLOYMENT)
    done = cli("lint", "m.yaml", "--policies", "policies", "--format", "json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "KP951" in {f["rule"] for f in json.loads(done.stdout)["findings"]}


# --- hangs and memory -------------------------------------------------------------------------------


def config_map(embedded: str) -> str:
    body = "\n".join("    " + line for line in embedded.splitlines())
    return ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kube-proxy, namespace: kube-system}\n"
            f"data:\n  config.conf: |\n{body}\n")


def test_merge_key_bomb_in_an_embedded_config_is_refused(tmp_path):
    lines = ["kind: KubeProxyConfiguration", "apiVersion: kubeproxy.config.k8s.io/v1alpha1", "a0: &a0 {x: 1}"]
    lines += [f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}], z{i}: 1}}" for i in range(1, 40)]
    lines.append("m: {<<: *a39}")
    report = lint_text(tmp_path, config_map("\n".join(lines)))
    assert "aliases expand to more than" in messages(report)


def test_merged_annotations_are_not_re_expanded_per_finding(tmp_path, monkeypatch):
    """A 100 KB file took 60 s: every finding re-expanded the object's merged annotations."""
    anchors = ["x-a0: &a0 {k0: v}"] + [f"x-a{i}: &a{i} {{<<: *a{i - 1}, k{i}: v}}" for i in range(1, 150)]
    ports = ", ".join(f"{{containerPort: {port}, hostPort: {port}}}" for port in range(2000, 2300))
    text = textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata:
          name: p
          annotations: {{<<: *a149}}
        spec:
          containers: [{{name: c, ports: [{ports}]}}]
        """)
    calls = []
    real = yt.pairs

    def counting(mapping):
        calls.append(1)
        return real(mapping)

    monkeypatch.setattr(yt, "pairs", counting)
    report = lint_text(tmp_path, "\n".join(anchors) + "\n" + text)
    assert len(report.findings) >= 300
    assert len(calls) < 1000  # one expansion per merge level, not one per finding


def test_63_mib_of_empty_flow_lists_is_refused_by_the_node_budget(tmp_path):
    (tmp_path / "flow.yaml").write_bytes(b"[" + b"[]," * (21 * 1024 * 1024) + b"[]]\n")
    done = cli("lint", "flow.yaml", cwd=tmp_path)
    assert done.returncode == 2 and b"more than 500,000 nodes (limit max-nodes)" in done.stdout


def test_a_big_file_of_small_documents_is_not_refused(tmp_path):
    documents = "".join(f"---\n{DEPLOYMENT.replace('name: web', f'name: web{i}')}" for i in range(3000))
    documents += "---\nx: " + "[" * 150 + "]" * 150 + "\n"  # brackets beyond the file-wide cheap bound
    report = lint_text(tmp_path, documents)
    assert not report.diagnostics and report.objects == 3000


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifos_sockets_in_directories_are_skipped_with_a_note(tmp_path):
    (tmp_path / "k8s").mkdir()
    os.mkfifo(tmp_path / "k8s" / "a-fifo.yaml")
    (tmp_path / "k8s" / "b.yaml").write_text(DEPLOYMENT)
    done = cli("lint", "k8s", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert b"k8s/a-fifo.yaml: skipped, a FIFO" in done.stderr
    assert b"KP101" in done.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_named_directly_without_a_writer_does_not_block(tmp_path):
    os.mkfifo(tmp_path / "f.yaml")
    done = cli("lint", "f.yaml", cwd=tmp_path)
    assert done.returncode == 0  # no writer: an empty input


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_with_a_silent_writer_stops_at_the_input_deadline(tmp_path):
    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"exec 3>'{fifo}'; exec sleep 60"])
    try:
        done = cli("lint", "f.yaml", "--limit", "input-seconds=1", cwd=tmp_path)
    finally:
        writer.kill()
        writer.wait()
    assert done.returncode == 2 and b"longer than 1 s (limit input-seconds)" in done.stdout


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timers on this platform")
def test_the_input_deadline_holds_inside_the_loop_and_leaves_the_handler_as_it_found_it():
    import threading
    import time

    from kubelint_ports.loading import files

    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    def own(signum, frame):
        raise AssertionError("the previous handler ran")

    previous = signal.signal(signal.SIGALRM, own)
    try:
        with files.time_limits():
            with files.time_limit(5):
                spin(0.01)  # a quick input: no timeout, and its timer is cleared after
            with pytest.raises(files.InputTimeout):
                with files.time_limit(0.05):
                    spin(2)
            with files.time_limit(5):  # an outer deadline survives an inner one
                with files.time_limit(1):
                    pass
                assert signal.getitimer(signal.ITIMER_REAL)[0] > 1
            assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
        assert signal.getsignal(signal.SIGALRM) is own
        with pytest.raises(files.InputTimeout):  # alone, it installs its handler itself
            with files.time_limit(0.05):
                spin(2)
        assert signal.getsignal(signal.SIGALRM) is own

        outcome = []

        def off_the_main_thread():  # no signal arrives there: unbounded, and no timer set
            with files.time_limits(), files.time_limit(0.05):
                spin(0.2)
                outcome.append(signal.getitimer(signal.ITIMER_REAL)[0])

        with files.time_limits():
            thread = threading.Thread(target=off_the_main_thread)
            thread.start()
            thread.join()
        assert outcome == [0]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_devices_named_directly_are_refused(tmp_path):
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    done = cli("lint", "/dev/zero", cwd=tmp_path)
    assert done.returncode == 2 and b"a character device" in done.stdout


def test_symlink_loops_and_links_leaving_the_tree(tmp_path):
    (tmp_path / "secret.yaml").write_text(DEPLOYMENT.replace("name: web", "name: leaked-secret"))
    tree = tmp_path / "repo" / "k8s"
    tree.mkdir(parents=True)
    (tree / "loop").symlink_to(tree)
    (tree / "evil.yaml").symlink_to(tmp_path / "secret.yaml")
    (tree / "ok.yaml").write_text(DEPLOYMENT)
    done = cli("lint", "k8s", cwd=tmp_path / "repo")
    assert done.returncode == 0 and b"KP101" in done.stdout
    assert b"leaked-secret" not in done.stdout + done.stderr
    assert b"evil.yaml: skipped, a symlink" in done.stderr
    done = cli("lint", "k8s/evil.yaml", cwd=tmp_path / "repo")  # named directly (a pre-commit hook)
    assert done.returncode == 2 and b"leaked-secret" not in done.stdout
    assert b"not read: a symlink" in done.stdout


@pytest.mark.skipif(not hasattr(os, "O_NOFOLLOW"), reason="no O_NOFOLLOW on this platform")
def test_a_walked_file_swapped_for_a_symlink_before_it_is_read_is_not_followed(tmp_path, monkeypatch):
    from kubelint_ports.loading import Loading

    (tmp_path / "secret.yaml").write_text(DEPLOYMENT.replace("name: web", "name: leaked-secret"))
    tree = tmp_path / "repo" / "k8s"
    tree.mkdir(parents=True)
    (tree / "app.yaml").write_text(DEPLOYMENT)
    monkeypatch.chdir(tmp_path / "repo")
    loading = Loading(["k8s"])  # walked: a regular file, so no symlink test when read
    assert loading.walked_files == {os.path.join("k8s", "app.yaml")}
    (tree / "app.yaml").unlink()
    (tree / "app.yaml").symlink_to(tmp_path / "secret.yaml")
    result = loading.finish()
    assert not result.documents
    assert [d.message.startswith("cannot read: ") for d in result.diagnostics] == [True]  # ELOOP, in the system's words
    assert "leaked-secret" not in repr(result)


# --- Helm: hostile charts ----------------------------------------------------------------------------


def write_chart(path: Path, template: str = "") -> Path:
    (path / "templates").mkdir(parents=True)
    (path / "Chart.yaml").write_text(f"apiVersion: v2\nname: {path.name}\nversion: 0.1.0\n")
    (path / "templates" / "cm.yaml").write_text(template or "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    return path


needs_engine = pytest.mark.skipif(
    __import__("kubelint_ports.loading.helm.charts", fromlist=["in_process_engine"]).in_process_engine() is None,
    reason="helm-python-sdk does not load here")


@needs_engine
def test_a_template_that_never_ends_is_stopped_at_the_deadline(tmp_path):
    write_chart(tmp_path / "loop", "{{- range until 100000 }}{{- range until 100000 }}{{- range until 100000 }}"
                                   "{{- end }}{{- end }}{{- end }}\n")
    write_chart(tmp_path / "ok")
    done = cli("lint", "loop", "ok", "--limit", "helm-seconds=1", cwd=tmp_path)
    assert done.returncode == 2
    assert b"took longer than 1 s (limit helm-seconds" in done.stdout
    assert b"ok:0:0" not in done.stdout  # the worker is started again for the next chart


@needs_engine
def test_a_template_building_a_huge_string_is_stopped_by_the_memory_budget(tmp_path):
    write_chart(tmp_path / "bomb", '{{- $s := "aaaaaaaaaaaaaaaa" }}{{- range until 26 }}{{- $s = printf "%s%s" $s $s }}'
                                   '{{- end }}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n'
                                   'data: {a: {{ len $s | quote }}}\n')
    done = cli("lint", "bomb", cwd=tmp_path)
    assert done.returncode == 2 and b"limit helm-memory-mib" in done.stdout


@needs_engine
def test_rendered_output_over_the_cap_is_refused(tmp_path):
    write_chart(tmp_path / "big", '{{- range until 3000 }}\n---\napiVersion: v1\nkind: ConfigMap\n'
                                  'metadata: {name: "c{{ . }}"}\ndata: {a: "{{ repeat 1000 "x" }}"}\n{{- end }}\n')
    done = cli("lint", "big", "--limit", "helm-output-mib=1", cwd=tmp_path)
    assert done.returncode == 2 and b"limit helm-output-mib" in done.stdout


SCHEMAS = {
    "http": {"properties": {"a": {"$ref": "http://127.0.0.1:9/s.json"}}},
    "upper": {"properties": {"a": {"$ref": "HTTP://127.0.0.1:9/s.json"}}},
    "id-relative": {"$id": "http://127.0.0.1:9/root.json", "properties": {"a": {"$ref": "s.json"}}},
    "json-schema-org": {"properties": {"a": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}},
    "file": {"properties": {"a": {"$ref": "file:///etc/passwd"}}},
    "meta": {"$schema": "http://127.0.0.1:9/meta.json"},
}


@needs_engine
@pytest.mark.parametrize("case", sorted(SCHEMAS))
def test_chart_values_schemas_referring_outside_are_never_fetched_and_the_chart_is_linted(tmp_path, case):
    """As `helm template --skip-schema-validation` for those parts only: the chart renders, a
    note says which reference was left out, and nothing is fetched (tests/test_offline.py)."""
    chart = write_chart(tmp_path / "c")
    (chart / "values.schema.json").write_text(json.dumps(SCHEMAS[case]))
    report = lint_paths([str(chart)])
    assert report.diagnostics == []
    assert any("which kubelint-ports does not fetch" in note or "names the meta-schema" in note for note in report.notes)
    assert report.objects >= 1


@needs_engine
def test_a_remote_schema_inside_a_packaged_subchart_is_noted_not_fetched(tmp_path):
    chart = write_chart(tmp_path / "parent")
    (chart / "charts").mkdir()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in (("sub/Chart.yaml", b"apiVersion: v2\nname: sub\nversion: 0.1.0\n"),
                           ("sub/values.schema.json", json.dumps(SCHEMAS["http"]).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    (chart / "charts" / "sub-0.1.0.tgz").write_bytes(buffer.getvalue())
    report = lint_paths([str(chart)])
    assert report.diagnostics == []
    assert any("sub-0.1.0.tgz:sub/values.schema.json:1:" in note and ": refers to the schema" in note
               for note in report.notes)


# --- packaged charts named directly (`lint mychart-1.2.3.tgz`) ---------------------------------------

CHART_YAML = b"apiVersion: v2\nname: c\nversion: 0.1.0\n"
CONFIG_MAP = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"


def member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, link: str = "", size: int | None = None
           ) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = len(data) if size is None else size
    return info, data


def tgz(*members: tuple[tarfile.TarInfo, bytes], chart: bool = True) -> bytes:
    """A gzip tar of `members` (after a Chart.yaml and a template, unless `chart` is False)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for info, data in ((member("c/Chart.yaml", CHART_YAML), member("c/templates/cm.yaml", CONFIG_MAP))
                           if chart else ()) + members:
            archive.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buffer.getvalue()


def zeros_member(name: str, size: int, extra: bytes = b"") -> bytes:
    """A gzip tar whose member `name` is `size` zero bytes, written as a stream (a bomb costs
    milliseconds to make, 60 KiB per 60 MiB)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as packed:
        for info, data in (member("c/Chart.yaml", CHART_YAML),):
            packed.write(info.tobuf() + data + b"\0" * (-len(data) % 512))
        info = tarfile.TarInfo(name)
        info.size = size
        packed.write(info.tobuf())
        chunk = b"\0" * (1 << 20)
        for start in range(0, size, len(chunk)):
            packed.write(chunk[:min(len(chunk), size - start)])
        packed.write(b"\0" * (-size % 512) + extra + b"\0" * 1024)
    return out.getvalue()


def numbered_lines(first: int, count: int) -> bytes:
    """19-byte lines `key-0000001: value` (gzip packs them about 8:1: no bomb, but big unpacked)."""
    return b"".join(b"key-%07d: value\n" % number for number in range(first, first + count))


def text_noise(size: int) -> bytes:
    """Text that gzip packs about 2:1 (hex digits of a hash chain): no bomb, but big unpacked."""
    import hashlib

    block, blocks = b"seed", []
    while sum(map(len, blocks)) < size:
        block = hashlib.sha256(block).hexdigest().encode()
        blocks.append(block)
    return b"".join(blocks)[:size]


HOSTILE_ARCHIVES = {
    "gzip-bomb": (lambda: zeros_member("c/templates/zeros.yaml", 60 * 2**20), "unpacks to more than 100 times"),
    "member-over-the-size-budget": (lambda: gzip.compress(
        member("c/templates/big.yaml", size=100 * 2**20)[0].tobuf() + b"\0" * 1024),  # refused at its header
        "is more than 64 MiB once unpacked (limit max-file-mib)"),
    "total-over-the-size-budget": (lambda: tgz(*(member(f"c/files/{n}", numbered_lines(n * 55_000, 55_000))
                                                 for n in range(5))),  # 5 x 1.0 MB, packed 8:1
                                   "more than 4 MiB once unpacked, archives inside it included "
                                   "(4 x limit max-file-mib)"),
    "parent-directory": (lambda: tgz(member("c/../../kubelint-evil.yaml", CONFIG_MAP)), "a path leaving the archive"),
    "absolute-path": (lambda: tgz(member("/tmp/kubelint-evil.yaml", CONFIG_MAP)), "a path leaving the archive"),
    "symlink-leaving": (lambda: tgz(member("c/templates/passwd.yaml", kind=tarfile.SYMTYPE,
                                           link="../../../../etc/passwd")), "outside the archive"),
    "symlink-absolute": (lambda: tgz(member("c/templates/passwd.yaml", kind=tarfile.SYMTYPE, link="/etc/passwd")),
                         "outside the archive"),
    "hardlink-absolute": (lambda: tgz(member("c/templates/passwd.yaml", kind=tarfile.LNKTYPE, link="/etc/passwd")),
                          "outside the archive"),
    "device": (lambda: tgz(member("c/templates/tty.yaml", kind=tarfile.CHRTYPE)), "is not a file"),
    "fifo": (lambda: tgz(member("c/templates/pipe.yaml", kind=tarfile.FIFOTYPE)), "is not a file"),
    "too-many-members": (lambda: tgz(*(member(f"c/files/{n}") for n in range(10_001))), "more than 10,000 members"),
    "not-gzip": (lambda: tarfile_bytes(), "not a gzip-compressed chart archive"),
    "truncated": (lambda: tgz(member("c/files/a", text_noise(100_000)))[:20_000], "not a readable chart archive"),
    "bomb-inside": (lambda: tgz(member("c/charts/sub-0.1.0.tgz", zeros_member("sub/templates/z.yaml", 60 * 2**20))),
                    "c/charts/sub-0.1.0.tgz: unpacks to more than 100 times"),
}


def tarfile_bytes() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info, data = member("c/Chart.yaml", CHART_YAML)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


# The most gzip may unpack of a hostile archive, archives inside it included, before reading stops:
# a bomb stops at its ratio budget (100 x its packed size, at least 1 MiB) one read (1 MiB) past
# it, not at the 256 MiB total; the largest case, a bomb inside an archive, stops near 6 MiB.
# Reading any bomb here whole is 60 MiB or more.
HOSTILE_ARCHIVE_UNPACKED_BOUND = 8 * budgets.MIB


@pytest.mark.parametrize("case", sorted(HOSTILE_ARCHIVES))
def test_hostile_chart_archives_are_input_errors_within_the_budgets(tmp_path, monkeypatch, case):
    """Read once, under the budgets, before Helm sees it: an input error naming the archive and
    what is wrong, after a bounded amount of unpacking (counted in bytes gzip produces, not in
    seconds, which a busy machine stretches), and nothing unpacked or written anywhere (no
    temporary file left)."""
    import tempfile

    build, expected = HOSTILE_ARCHIVES[case]
    (tmp_path / "tmp").mkdir()
    (tmp_path / "in").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    archive = tmp_path / "in" / "c-0.1.0.tgz"
    archive.write_bytes(build())
    limits = budgets.parse_limits({"max-file-mib": 1}) if case.startswith("total") else budgets.DEFAULT_LIMITS
    unpacked = [0]
    read = gzip.GzipFile.read

    def counted_read(self, *args, **kwargs):
        chunk = read(self, *args, **kwargs)
        unpacked[0] += len(chunk)
        return chunk

    monkeypatch.setattr(gzip.GzipFile, "read", counted_read)
    report = lint_paths([str(archive)], LintOptions(limits=limits))
    # One read (1 MiB) past whichever budget stops it (the total is 4 x max-file-mib, as its
    # message says), and never past the bound above.
    assert unpacked[0] <= min(HOSTILE_ARCHIVE_UNPACKED_BOUND, 4 * limits.max_file_bytes + budgets.MIB), unpacked[0]
    assert [(d.location.path, d.internal) for d in report.diagnostics] == [(str(archive), False)]
    assert report.diagnostics[0].message.startswith(f"cannot render Helm chart {archive}: ")
    assert expected in report.diagnostics[0].message, report.diagnostics[0].message
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["in", "in/c-0.1.0.tgz", "tmp"]
    assert not (tmp_path.parent / "kubelint-evil.yaml").exists()


def test_a_gzip_bomb_exits_2_naming_the_archive(tmp_path):
    (tmp_path / "c-0.1.0.tgz").write_bytes(HOSTILE_ARCHIVES["gzip-bomb"][0]())
    done = cli("lint", "c-0.1.0.tgz", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert b"c-0.1.0.tgz: input-error cannot render Helm chart c-0.1.0.tgz: unpacks to more than 100 times its size" \
        in done.stdout


@needs_engine
def test_links_that_stay_inside_a_chart_archive_read_as_helm_reads_them(tmp_path):
    """Helm reads a link in an archive as an empty file: one that stays inside is no danger."""
    archive = tmp_path / "c-0.1.0.tgz"
    archive.write_bytes(tgz(member("c/templates/same.yaml", kind=tarfile.SYMTYPE, link="cm.yaml"),
                            member("c/templates/again.yaml", kind=tarfile.LNKTYPE, link="c/templates/cm.yaml")))
    report = lint_paths([str(archive)])
    assert report.diagnostics == [] and report.objects == 1


def test_chart_symlinks_leaving_the_chart_are_refused(tmp_path):
    (tmp_path / "secret").write_text("password: hunter2\n")
    chart = write_chart(tmp_path / "c")
    (chart / "files").mkdir()
    (chart / "files" / "s").symlink_to(tmp_path / "secret")
    report = lint_paths([str(chart)])
    assert "outside the chart" in messages(report) and "hunter2" not in messages(report)
    (chart / "files" / "s").unlink()
    (chart / "templates" / "loop").symlink_to(chart / "templates")
    assert "its own parent directory" in messages(lint_paths([str(chart)]))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_inside_a_chart_is_refused(tmp_path):
    chart = write_chart(tmp_path / "c")
    os.mkfifo(chart / "templates" / "f.yaml")
    assert "a FIFO: Helm would block" in messages(lint_paths([str(chart)]))


def test_source_comments_pointing_outside_the_chart_root_are_not_read(tmp_path):
    chart = write_chart(tmp_path / "web")
    (tmp_path / "outside.yaml").write_text("hostPort: {{ .Values.secretKeyNamedHere }}\n")
    rendered = ("---\n# Source: web/templates/../../outside.yaml\n" + DEPLOYMENT).encode()
    from kubelint_ports.loading.helm.charts import HelmOptions

    report = lint_paths(["-"], LintOptions(helm=HelmOptions(chart_root=str(chart))), stdin=io.BytesIO(rendered))
    text = json.dumps([[str(r) for r in f.related] + [f.message, str(f.location)] for f in report.findings])
    assert "secretKeyNamedHere" not in text and "outside.yaml" not in text


# --- exit codes that cannot lie ---------------------------------------------------------------------


def test_an_unexpected_exception_on_one_input_is_an_internal_error_naming_it(tmp_path, monkeypatch):
    import kubelint_ports.loading.yaml_files.manifests as loading

    real = loading.add_document

    def broken(root, path, *args, **kwargs):
        if path.endswith("bad.yaml"):
            raise KeyError("a bug")
        return real(root, path, *args, **kwargs)

    monkeypatch.setattr(loading, "add_document", broken)
    (tmp_path / "bad.yaml").write_text(DEPLOYMENT)
    (tmp_path / "good.yaml").write_text(DEPLOYMENT.replace("name: web", "name: good"))
    report = lint_paths([str(tmp_path / "bad.yaml"), str(tmp_path / "good.yaml")])
    [internal] = [d for d in report.diagnostics if d.internal]
    assert internal.location.path.endswith("bad.yaml") and "KeyError" in internal.message
    assert [f.subject.name for f in report.findings if f.rule_id == "KP101"] == ["good"]


def test_internal_errors_exit_3_never_1(tmp_path):
    (tmp_path / "m.yaml").write_text(DEPLOYMENT)
    program = textwrap.dedent("""\
        import sys
        import kubelint_ports.model.build as build
        def broken(*args, **kwargs):
            raise RuntimeError("injected bug")
        build.read_workload = broken
        sys.argv = ["kubelint-ports", "lint", "m.yaml"]
        from kubelint_ports.cli import main
        main()
        """)
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, timeout=HANG_GUARD)
    assert done.returncode == 3, done.stdout + done.stderr
    assert b"internal-error" in done.stdout and b"m.yaml" in done.stdout


def test_a_crash_outside_any_input_exits_3_with_a_short_traceback(tmp_path):
    (tmp_path / "m.yaml").write_text(DEPLOYMENT)
    program = textwrap.dedent("""\
        import sys
        import kubelint_ports.formatters as formatters
        def broken(name):
            raise RuntimeError("formatter bug")
        formatters.get_formatter = broken
        sys.argv = ["kubelint-ports", "lint", "m.yaml"]
        from kubelint_ports.cli import main
        main()
        """)
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, timeout=HANG_GUARD)
    assert done.returncode == 3
    assert b"internal error" in done.stderr and b"formatter bug" in done.stderr


def test_a_failing_rule_is_an_internal_error_and_the_other_rules_run(tmp_path, monkeypatch):
    from kubelint_ports.checks import CHECKS

    check = CHECKS["host-port"]
    monkeypatch.setitem(CHECKS, "host-port", type(check)(check.name, lambda cluster, params: iter([1 / 0]),
                                                        check.params_schema))
    report = lint_text(tmp_path, DEPLOYMENT.replace("8080", "30080"))
    assert any(d.internal and "KP101" in d.message for d in report.diagnostics)
    assert "KP102" in {f.rule_id for f in report.findings}


# --- what reaches a terminal or a CI log -----------------------------------------------------------


FORGED = DEPLOYMENT.replace("name: web,", 'name: "web\\n::add-mask::x\\n::error file=a::forged\\u001b[2J",')


def test_text_output_escapes_control_characters_and_new_lines(tmp_path):
    (tmp_path / "m.yaml").write_text(FORGED)
    done = cli("lint", "m.yaml", "--format", "text", "--explain", cwd=tmp_path)
    lines = done.stdout.decode().splitlines()
    assert not [line for line in lines if line.startswith("::")]
    assert "\x1b" not in done.stdout.decode() and "\\x1b[2J" in done.stdout.decode()


def test_github_output_cannot_forge_workflow_commands(tmp_path):
    (tmp_path / "m.yaml").write_text(FORGED)
    done = cli("lint", "m.yaml", "--format", "github", cwd=tmp_path)
    commands = [line for line in done.stdout.decode().splitlines() if line.startswith("::")]
    assert commands and all(line.startswith(("::warning ", "::error ", "::notice ")) for line in commands)
    assert all("::add-mask::" not in line.split("::", 2)[1] for line in commands)


def test_a_file_named_like_an_option_is_linted_after_double_dash(tmp_path):
    (tmp_path / "--output=victim.yaml").write_text(DEPLOYMENT)
    (tmp_path / "victim.yaml").write_text("precious\n")
    done = cli("lint", "--scope", "object", "--", "--output=victim.yaml", cwd=tmp_path)
    assert done.returncode == 0 and b"KP101" in done.stdout  # a warning: fail-on is error
    assert (tmp_path / "victim.yaml").read_text() == "precious\n"


def test_the_per_file_hook_entry_ends_options():
    import yaml

    hooks = {hook["id"]: hook for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert hooks["kubelint-ports-files"]["entry"].split()[-1] == "--"


def test_signals_never_kill_the_process_on_garbage(tmp_path):
    garbage = bytes(range(256)) * 64 + b"\n- " * 20000 + b"{" * 20000
    (tmp_path / "g.yaml").write_bytes(garbage)
    done = cli("lint", "g.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert signal.SIGSEGV  # (the assertion that matters is in cli(): no signal exit)


def test_the_worker_answer_is_read_within_deadline_and_cap_where_pipes_cannot_be_polled():
    """Windows reads the render worker's answer in a thread; the same bounds hold."""
    import time

    from kubelint_ports.loading import files
    from kubelint_ports.loading.helm.charts import read_line_in_thread

    read, write = os.pipe()
    with os.fdopen(read, "rb") as stream, os.fdopen(write, "wb") as sink:
        sink.write(b'{"ready": "x"}\n')
        sink.flush()
        assert read_line_in_thread(stream, time.monotonic() + 5, 100) == b'{"ready": "x"}\n'
        with pytest.raises(files.InputTimeout):
            read_line_in_thread(stream, time.monotonic() + 0.2, 100)
        sink.write(b"x" * 200 + b"\n")
        sink.flush()
        time.sleep(0.2)
    read, write = os.pipe()
    with os.fdopen(read, "rb") as stream, os.fdopen(write, "wb") as sink:
        sink.write(b"y" * 200 + b"\n")
        sink.flush()
        with pytest.raises(OverflowError):
            read_line_in_thread(stream, time.monotonic() + 5, 100)


def test_values_files_and_chart_yaml_are_composed_within_the_budgets(tmp_path):
    """Values files are composed to point findings at their keys; Chart.yaml for names."""
    from kubelint_ports.loading.helm.charts import chart_metadata
    from kubelint_ports.loading.helm.templatemap import ValuesFile

    (tmp_path / "values.yaml").write_text("a: " + "[" * 30000)
    assert ValuesFile(str(tmp_path / "values.yaml")).root is None
    laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))
    (tmp_path / "laughs.yaml").write_text(laughs)
    assert ValuesFile(str(tmp_path / "laughs.yaml")).root is None
    chart = write_chart(tmp_path / "c")
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n" + laughs)
    assert chart_metadata(str(chart)) == {}
