"""Kustomize directories: built, never read file by file, and findings on the resource or patch line.

The fixture tree `tests/kustomize/shop/` is a base, a component and three overlays, each patching
the base another way (a strategic-merge patch file, a JSON 6902 file plus a component's JSON 6902
patch, an inline strategic-merge patch). Building needs `kustomize` or `kubectl` with origin
annotations (kustomize 4.5+, kubectl 1.24+); the tests that build skip, saying so, without one.
The others replace the binary by a script to test refusals, errors and the timeout.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.loading import budgets, discover, load
from kubelint_ports.loading.kustomize import load as kustomize
from kubelint_ports.loading.yaml_files import yamltree as yt

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "kustomize"


def origin_annotations_supported() -> str | None:
    """Why building cannot be tested here, or None when it can."""
    commands = kustomize.kustomize_commands()
    if not commands:
        return ("the kustomize tests need `kustomize` (4.5 or later) or `kubectl` (1.24 or later), neither of "
                "which is installed: see https://kubectl.docs.kubernetes.io/installation/kustomize/ "
                "(Debian's kubernetes-client is kubectl 1.20, too old)")
    try:
        kustomize.build(str(FIXTURES / "shop" / "base"))
    except kustomize.KustomizeError as error:
        return (f"the kustomize tests need `kustomize` 4.5 or later or `kubectl` 1.24 or later (origin "
                f"annotations), and the one installed cannot build with them: {error}")
    return None


_SKIP_REASON = origin_annotations_supported()
needs_kustomize = pytest.mark.skipif(_SKIP_REASON is not None, reason=_SKIP_REASON or "")


@pytest.fixture
def shop(monkeypatch):
    monkeypatch.chdir(FIXTURES)
    return FIXTURES


def found(report) -> list[tuple[str, str, str]]:
    """(location, rule, template) of every finding."""
    return [(f"{f.location.path}:{f.location.line}:{f.location.column}", f.rule_id, f.template)
            for f in report.findings]


def fake_binary(tmp_path: Path, monkeypatch, script: str, name: str = "kubectl") -> Path:
    """A stand-in for kubectl as the only program on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    program = bin_dir / name
    program.write_text("#!/bin/sh\nPATH=/usr/bin:/bin\n" + script)
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))
    return program


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# --- where findings land ---------------------------------------------------------------------------


@needs_kustomize
def test_strategic_merge_patch_file_and_base_lines(shop):
    report = lint_paths(["shop/overlays/prod"], LintOptions())
    assert report.diagnostics == []
    assert found(report) == [
        # hostPort 9113 is written in the base; the overlay pins 3 replicas to one node
        ("shop/base/deployment.yaml:22:15", "KP101", "shop/overlays/prod"),
        ("shop/base/deployment.yaml:22:15", "KP301", "shop/overlays/prod"),
        # hostPort 8080 is written by the patch
        ("shop/overlays/prod/pin-and-scale.yaml:17:15", "KP101", "shop/overlays/prod"),
        ("shop/overlays/prod/pin-and-scale.yaml:17:15", "KP301", "shop/overlays/prod"),
    ]
    # The rendered object keeps the overlay's name, namespace and replicas
    conflict = next(f for f in report.findings if f.rule_id == "KP301")
    assert (conflict.subject.namespace, conflict.subject.name) == ("shop", "prod-web")
    assert "3 pods" in conflict.message


def only_finding(directory: str, rule: str):
    report = lint_paths([directory], LintOptions())
    assert report.diagnostics == []
    return next(f for f in report.findings if f.rule_id == rule)


def place(location) -> tuple[str, int, int]:
    return location.path, location.line, location.column


@needs_kustomize
def test_json6902_patches_of_overlay_and_component(shop):
    collision = only_finding("shop/overlays/edge", "KP201")
    # The component's operation writes a whole port item: the line of its hostPort inside `value`
    assert place(collision.location) == ("shop/components/metrics-hostport/hostport.yaml", 6, 5)
    # The overlay's JSON file sets the nodePort: its `"value"` in the operation
    assert [place(related) for related in collision.related] == [("shop/overlays/edge/nodeport.json", 2, 55)]


@needs_kustomize
def test_inline_patch_lands_inside_the_kustomization(shop):
    collision = only_finding("shop/overlays/inline", "KP202")
    assert place(collision.location) == ("shop/overlays/inline/kustomization.yaml", 20, 21)
    assert Path(collision.location.path).read_text().splitlines()[19].strip() == "containerPort: 30080"
    assert [place(related)[:2] for related in collision.related] == [("shop/base/service.yaml", 11)]


@needs_kustomize
def test_every_position_points_at_the_number_it_reports(shop):
    report = lint_paths(["shop"], LintOptions())
    assert report.findings
    for finding in report.findings:
        for location in (finding.location, *finding.related):
            line = Path(location.path).read_text().splitlines()[location.line - 1]
            assert location.line > 1 and str(finding.port) in line[location.column - 1:], (location, line)


# --- what is built ---------------------------------------------------------------------------------


def test_discover_yields_kustomize_directories_once_and_never_their_files(shop):
    assert list(discover(["shop"])) == [
        "shop/base", "shop/components/metrics-hostport", "shop/overlays/edge", "shop/overlays/inline",
        "shop/overlays/prod"]
    # A patch or a base resource named directly (a pre-commit hook does that) yields its directory
    assert list(discover(["shop/overlays/prod/pin-and-scale.yaml", "shop/overlays/prod/kustomization.yaml",
                          "shop/base/service.yaml"])) == ["shop/overlays/prod", "shop/base"]


@needs_kustomize
def test_bases_and_components_are_built_only_through_their_users(shop):
    loaded = load(["shop"])
    assert loaded.diagnostics == []
    assert sorted({document.origin for document in loaded.documents}) == [
        "shop/overlays/edge", "shop/overlays/inline", "shop/overlays/prod"]
    assert len(loaded.documents) == 6  # a Deployment and a Service per overlay, no raw patch
    # Named on the command line, a base is built on its own too
    named = load(["shop/base", "shop/overlays/prod"])
    assert sorted({document.origin for document in named.documents}) == ["shop/base", "shop/overlays/prod"]


@needs_kustomize
def test_origin_annotation_is_removed_and_user_files_are_untouched(shop):
    before = {path: (path.stat().st_mtime_ns, path.read_bytes()) for path in FIXTURES.rglob("*") if path.is_file()}
    loaded = load(["shop/overlays/prod"])
    after = {path: (path.stat().st_mtime_ns, path.read_bytes()) for path in FIXTURES.rglob("*") if path.is_file()}
    assert before == after
    for document in loaded.documents:
        assert yt.get(yt.get(document.root, "metadata"), "annotations") is None


@needs_kustomize
def test_output_is_byte_identical_across_runs(shop):
    from kubelint_ports.formatters import FormatOptions, get_formatter

    def render() -> str:
        import io

        out = io.StringIO()
        get_formatter("json")(lint_paths(["shop"], LintOptions()), out, FormatOptions())
        return out.getvalue()

    assert render() == render()


@needs_kustomize
def test_generated_config_map_lands_on_its_generator(tmp_path, monkeypatch):
    write(tmp_path / "app" / "kustomization.yaml", """\
        resources: [deployment.yaml]
        configMapGenerator:
          - name: web-settings
            literals: [PORT=8080]
        """)
    write(tmp_path / "app" / "deployment.yaml", """\
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: web
        spec:
          template:
            spec:
              containers:
                - name: web
                  ports:
                    - containerPort: 8080
                      hostPort: 8080
        """)
    monkeypatch.chdir(tmp_path)
    loaded = load(["app"])
    by_kind = {yt.as_str(yt.get(d.root, "kind")): d for d in loaded.documents}
    config_map = by_kind["ConfigMap"]
    assert config_map.location("data.PORT").path == "app/kustomization.yaml"
    assert config_map.location("data.PORT").line == 3
    report = lint_paths(["app"], LintOptions())
    assert found(report) == [("app/deployment.yaml:12:15", "KP101", "app")]


@needs_kustomize
def test_build_error_names_the_kustomization_line(tmp_path, monkeypatch):
    write(tmp_path / "app" / "kustomization.yaml", "resources:\n  - deployment.yaml\n  - missing.yaml\n")
    write(tmp_path / "app" / "deployment.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    monkeypatch.chdir(tmp_path)
    [diagnostic] = load(["app"]).diagnostics
    assert (diagnostic.location.path, diagnostic.location.line) == ("app/kustomization.yaml", 3)
    assert "missing.yaml" in diagnostic.message and "cannot build Kustomize directory app" in diagnostic.message


# --- refusals and failures -------------------------------------------------------------------------


@pytest.mark.parametrize("entry", [
    "github.com/example/deploy//base?ref=v1.2.0",
    "https://raw.githubusercontent.com/example/deploy/main/service.yaml",
    "git@github.com:example/deploy.git//base",
])
def test_remote_resources_are_refused_before_building(tmp_path, monkeypatch, entry):
    write(tmp_path / "app" / "kustomization.yaml", f"namespace: x\nresources:\n  - service.yaml\n  - {entry}\n")
    write(tmp_path / "app" / "service.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(kustomize, "build", lambda directory, reads=None: pytest.fail("must not build"))
    [diagnostic] = load(["app"]).diagnostics
    assert (diagnostic.location.path, diagnostic.location.line, diagnostic.location.column) == (
        "app/kustomization.yaml", 4, 5)
    assert "remote" in diagnostic.message and "never uses the network" in diagnostic.message


def test_remote_base_of_a_base_is_refused(tmp_path, monkeypatch):
    write(tmp_path / "base" / "kustomization.yaml", "resources:\n  - github.com/example/deploy//base\n")
    write(tmp_path / "overlay" / "kustomization.yaml", "resources:\n  - ../base\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(kustomize, "build", lambda directory, reads=None: pytest.fail("must not build"))
    [diagnostic] = load(["overlay"]).diagnostics
    assert (diagnostic.location.path, diagnostic.location.line) == ("base/kustomization.yaml", 2)


@pytest.mark.parametrize("kustomization, line", [
    ("components:\n  - https://127.0.0.1:9/org/repo//component\n", 2),
    ("resources: [pod.yaml]\npatches:\n  - path: HTTPS://127.0.0.1:9/patch.yaml\n", 3),
    ("resources: [pod.yaml]\ncrds: [http://127.0.0.1:9/crd.yaml]\n", 2),
    ("resources:\n  - file:///srv/git/deploy.git//base\n", 2),  # a clone of another local repository
    ("resources:\n  - gh:example/deploy//base\n", 2),
    ("resources:\n  - deploy@git.example.com:org/deploy.git\n", 2),
    ("helmCharts:\n  - name: db\n    repo: oci://127.0.0.1:9/charts\n", 3),
    ("helmCharts:\n  - name: db\n    valuesFile: https://127.0.0.1:9/values.yaml\n", 3),
    ("configMapGenerator:\n  - name: c\n    env: https://127.0.0.1:9/app.env\n", 3),
    ("resources: [pod.yaml]\nvalidators:\n  - |\n    kind: ReplacementTransformer\n    replacements:\n"
     "      - path: https://127.0.0.1:9/r.yaml\n", 6),
])
def test_every_remote_form_is_refused_on_its_line(tmp_path, monkeypatch, kustomization, line):
    write(tmp_path / "app" / "kustomization.yaml", kustomization)
    write(tmp_path / "app" / "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(kustomize, "build", lambda directory, reads=None: pytest.fail("must not build"))
    [diagnostic] = load(["app"]).diagnostics
    assert (diagnostic.location.path, diagnostic.location.line) == ("app/kustomization.yaml", line)
    assert "remote resource" in diagnostic.message


def test_a_local_directory_does_not_make_a_repository_local(tmp_path, monkeypatch):
    """kustomize clones `github.com/...` even when a directory has that name; a file of that name it
    reads (and a `host.tld/...` directory, for kustomize 5)."""
    write(tmp_path / "app" / "github.com" / "example" / "deploy" / "base" / "kustomization.yaml", "resources: []\n")
    write(tmp_path / "app" / "github.com" / "example" / "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    write(tmp_path / "app" / "example.org" / "base" / "kustomization.yaml", "resources: []\n")
    write(tmp_path / "app" / "kustomization.yaml",
          "resources:\n  - github.com/example/pod.yaml\n  - example.org/base\n  - github.com/example/deploy//base\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(kustomize, "build", lambda directory, reads=None: pytest.fail("must not build"))
    [diagnostic] = load(["app"]).diagnostics
    assert (diagnostic.location.path, diagnostic.location.line) == ("app/kustomization.yaml", 4)
    assert "'github.com/example/deploy//base' is a remote resource" in diagnostic.message


def test_without_a_network_namespace_a_note_says_what_remains(tmp_path, monkeypatch):
    from kubelint_ports.loading import children
    from kubelint_ports.loading.kustomize import build as kustomize_build

    fake_binary(tmp_path, monkeypatch, "exit 1\n")  # PATH holds only it: no `unshare`
    monkeypatch.setattr(children, "SYSTEM_DIRECTORIES", str(tmp_path / "nothing-here"))
    monkeypatch.setattr(children, "_SANDBOX", [])
    write(tmp_path / "app" / "kustomization.yaml", "resources: [pod.yaml]\n")
    monkeypatch.chdir(tmp_path)
    loaded = load(["app"])
    [note] = loaded.notes
    if sys.platform.startswith("linux"):
        assert "no `unshare` (util-linux) found" in note
    assert "without a network namespace" in note and "NO_PROXY cleared" in note and "port 0" in note
    assert kustomize_build.network_sandbox().prefix == ()


def test_missing_binary_is_a_clear_error_and_exit_2(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    write(tmp_path / "app" / "kustomization.yaml", "resources: [pod.yaml]\n")
    write(tmp_path / "app" / "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    result = CliRunner().invoke(app, ["lint", "app"])
    assert result.exit_code == 2
    assert "no kustomize to build it" in result.output and "kubectl" in result.output


def test_kustomize_without_origin_annotations_is_named_too_old(tmp_path, monkeypatch):
    fake_binary(tmp_path, monkeypatch, 'echo \'Error: json: unknown field "buildMetadata"\' >&2\nexit 1\n')
    write(tmp_path / "app" / "kustomization.yaml", "resources: [pod.yaml]\n")
    monkeypatch.chdir(tmp_path)
    [diagnostic] = load(["app"]).diagnostics
    assert "too old" in diagnostic.message and "kubectl 1.24" in diagnostic.message


def test_build_is_bounded_in_time(tmp_path, monkeypatch):
    fake_binary(tmp_path, monkeypatch, "exec /bin/sleep 30\n")
    write(tmp_path / "app" / "kustomization.yaml", "resources: [pod.yaml]\n")
    monkeypatch.chdir(tmp_path)
    with budgets.applied(budgets.Limits(kustomize_seconds=0.5)):
        [diagnostic] = load(["app"]).diagnostics
    assert "took longer than 0.5 s (limit kustomize-seconds)" in diagnostic.message


def test_build_runs_offline_on_a_temporary_kustomization(tmp_path, monkeypatch):
    record = tmp_path / "record"
    app = tmp_path / "app"
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    # As kustomize does, the origin path is relative to the kustomization built (the temporary one)
    fake_binary(tmp_path, monkeypatch, f"""\
env > {record}.env
cp "$KUBECONFIG" {record}.kubeconfig
cat "$2/kustomization.yaml" > {record}.kustomization
echo "$@" > {record}.args
relative=$(/usr/bin/realpath --relative-to="$2" {app})
cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: p
  annotations:
    config.kubernetes.io/origin: |
      path: $relative/pod.yaml
spec:
  containers:
  - name: c
    ports:
    - containerPort: 80
      hostPort: 80
EOF
""")
    write(app / "kustomization.yaml", "resources: [pod.yaml]\n")
    write(app / "pod.yaml", """\
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          containers:
            - name: c
              ports:
                - containerPort: 80
                  hostPort: 80
        """)
    monkeypatch.chdir(tmp_path)
    report = lint_paths(["app"], LintOptions())
    assert report.diagnostics == []
    assert found(report) == [("app/pod.yaml:9:11", "KP101", "app")]
    environment = dict(line.split("=", 1) for line in Path(f"{record}.env").read_text().splitlines() if "=" in line)
    assert environment["GIT_ALLOW_PROTOCOL"] == ""  # no protocol at all: a clone is refused before the build
    assert environment["HTTPS_PROXY"].startswith("http://127.0.0.1:")
    assert not {"NO_PROXY", "no_proxy", "KUBERNETES_SERVICE_HOST"} & set(environment)
    # An empty kubeconfig would make client-go try localhost:8080: its only server is port 0
    kubeconfig = json.loads(Path(f"{record}.kubeconfig").read_text())
    assert [cluster["cluster"]["server"] for cluster in kubeconfig["clusters"]] == ["http://127.0.0.1:0"]
    wrapper = Path(f"{record}.kustomization").read_text()
    assert "buildMetadata: [originAnnotations]" in wrapper and "app" in wrapper
    assert Path(f"{record}.args").read_text().startswith("kustomize ")
    assert (app / "kustomization.yaml").read_text() == "resources: [pod.yaml]\n"


def test_plain_manifests_never_import_the_kustomize_module():
    code = ("import sys; from kubelint_ports.engine import lint_paths; lint_paths(['examples/clean.yaml']); "
            "print('kubelint_ports.loading.kustomize.load' in sys.modules, 'subprocess' in sys.modules)")
    output = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert output.stdout.split()[0] == "False"


# --- pieces of the mapping -------------------------------------------------------------------------


def compose(text: str) -> yt.Node:
    return kustomize.compose_text(textwrap.dedent(text))[0]


def test_list_items_match_by_merge_key_then_by_position():
    rendered = compose("- {name: sidecar}\n- {name: web, image: x}\n")
    patch = compose("- {name: web, image: y}\n")
    assert kustomize.matching_item(patch, rendered.value[1], 1, 2) == 0
    assert kustomize.matching_item(patch, rendered.value[0], 0, 2) is None  # the patch has no sidecar
    ports = compose("- {containerPort: 80}\n- {containerPort: 9113, hostPort: 9113}\n")
    assert kustomize.matching_item(compose("- {containerPort: 9113, hostPort: 1}\n"), ports.value[1], 1, 2) == 0
    args = compose("[--a, --b]")
    assert kustomize.matching_item(compose("[--x, --y]"), args.value[1], 1, 2) == 1
    assert kustomize.matching_item(compose("[--x]"), args.value[1], 1, 2) is None


def test_json_pointer_covers_the_field_and_its_parents():
    rendered = compose("spec: {ports: [{port: 80}, {port: 81, nodePort: 30081}]}")
    segments = ["spec", "ports", 1, "nodePort"]
    assert kustomize.pointer_covers(["spec", "ports", "1", "nodePort"], segments, rendered)
    assert kustomize.pointer_covers(["spec", "ports", "-"], segments, rendered)  # appended last
    assert kustomize.pointer_covers(["spec"], segments, rendered)
    assert not kustomize.pointer_covers(["spec", "ports", "0"], segments, rendered)
    assert not kustomize.pointer_covers(["spec", "ports", "1", "nodePort", "x"], segments, rendered)
    assert kustomize.json_pointer("/metadata/annotations/a~1b~0c") == ["metadata", "annotations", "a/b~c"]


def test_patch_targets():
    selects = kustomize.selects
    assert selects({"kind": "Deployment", "name": "web.*"}, "Deployment", {"web-1"}, {"default"}, {})
    assert not selects({"kind": "Service"}, "Deployment", {"web"}, {"default"}, {})
    assert selects({"labelSelector": "app=web,tier!=db"}, "Deployment", {"x"}, {""}, {"app": "web"})
    assert not selects({"labelSelector": "app=api"}, "Deployment", {"x"}, {""}, {"app": "web"})
    assert not selects({"namespace": "prod"}, "Deployment", {"x"}, {"dev"}, {})


def test_kubectl_log_wrapping_is_removed_from_messages():
    stderr = ("# Warning: 'patchesStrategicMerge' is deprecated.\n"
              'E1123 11:32:17.390054   11186 run.go:72] "command failed" err=<\n'
              "\taccumulating resources: accumulation err='accumulating resources from '../app': "
              "'/tmp/app' must resolve to a file': recursed accumulation of path '/tmp/app': "
              "trouble configuring builtin PatchTransformer\n >\n")
    assert kustomize.kustomize_message(stderr) == "trouble configuring builtin PatchTransformer"
    assert kustomize.kustomize_message("Error: must build at directory: not a valid directory\n") == \
        "must build at directory: not a valid directory"


def test_a_file_above_the_repository_is_not_a_kustomization(tmp_path, monkeypatch):
    write(tmp_path / "kustomization.yaml", "resources: []\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo / "k8s" / "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    monkeypatch.chdir(repo)
    assert list(discover(["k8s/pod.yaml"])) == ["k8s/pod.yaml"]
    assert list(discover([str(repo / "k8s" / "pod.yaml")])) == [str(repo / "k8s" / "pod.yaml")]


@needs_kustomize
def test_legacy_patch_fields_and_the_last_patch_wins(tmp_path, monkeypatch):
    write(tmp_path / "base" / "kustomization.yaml", "resources: [workloads.yaml]\n")
    write(tmp_path / "base" / "workloads.yaml", """\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: api}
        spec:
          template:
            spec:
              containers:
                - name: api
                  ports: [{containerPort: 8000}]
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: worker}
        spec:
          template:
            spec:
              containers:
                - name: worker
                  ports: [{containerPort: 9000, hostPort: 9000}]
        """)
    # One strategic-merge file patches both objects; a JSON 6902 patch, applied after it, rewrites
    # the api's hostPort, so the api's finding is on the operation and the worker's in the file.
    write(tmp_path / "overlay" / "kustomization.yaml", """\
        resources: [../base]
        patchesStrategicMerge: [ports.yaml]
        patchesJson6902:
          - target: {group: apps, version: v1, kind: Deployment, name: api}
            path: api-port.yaml
        """)
    write(tmp_path / "overlay" / "ports.yaml", """\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: worker}
        spec:
          template:
            spec:
              containers:
                - name: worker
                  ports:
                    - containerPort: 9000
                      hostPort: 9001
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: api}
        spec:
          template:
            spec:
              containers:
                - name: api
                  ports:
                    - containerPort: 8000
                      hostPort: 8000
        """)
    write(tmp_path / "overlay" / "api-port.yaml", """\
        - op: replace
          path: /spec/template/spec/containers/0/ports/0/hostPort
          value: 8001
        """)
    monkeypatch.chdir(tmp_path)
    report = lint_paths(["overlay"], LintOptions())
    assert report.diagnostics == []
    assert sorted((f.subject.name, place(f.location), f.port) for f in report.findings if f.rule_id == "KP101") == [
        ("api", ("overlay/api-port.yaml", 3, 3), 8001),
        ("worker", ("overlay/ports.yaml", 11, 15), 9001),
    ]
