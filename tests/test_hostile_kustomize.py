"""Hostile Kustomize directories: one reproducer per class of attack on the build.

- fetches: remote forms kustomize downloads (generator `files:`/`envs:`, inline and file transformer
  and generator configurations, a URL that also names a local directory, the kubeconfig's
  cluster) must reach a loopback HTTP server started here with NO request, with the check before
  the build on (it refuses them, naming the line) and off (the sandbox alone blocks them);
- origins: an origin annotation naming a file outside the build is never opened;
- files outside a kustomization's directory or the allowed root (patches, symlinked kustomization
  files, bases) are never opened;
- alias bombs in any file kustomize reads are refused before it runs, and a bomb that reaches it
  anyway stops at `kustomize-memory-mib`;
- too many generator entries are refused before the build, and a build stops at `kustomize-seconds`.

Tests that build need `kubectl` (1.24+) or `kustomize` (4.5+), and the fetch tests a network
namespace (`unshare`); they skip, saying so, without one. Which of the new modules they exercise is
imported inside the tests, so every test here fails on its own on code without them.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from test_kustomize import fake_binary, needs_kustomize, write

from kubelint_ports.loading import budgets, load
from kubelint_ports.loading.kustomize import load as kustomize

pytestmark = pytest.mark.slow  # builds hostile kustomizations to their budgets: not in the quick subset

ROOT = Path(__file__).resolve().parents[1]
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: c
      ports: [{containerPort: 80, hostPort: 80}]
"""
CONFIG_MAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n"


def bomb(levels: int = 9, indent: str = "") -> str:
    """A 'billion laughs' mapping: 9 ** (levels + 1) strings once its aliases are expanded."""
    lines = [f"a0: &a0 [{', '.join(['x'] * 9)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "".join(f"{indent}{line}\n" for line in lines)


def bomb_config_map(levels: int = 9) -> str:
    return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: laughs\n  annotations:\n" + bomb(levels, "    ")


def never_build(monkeypatch) -> None:
    monkeypatch.setattr(kustomize, "build", lambda directory, reads=None: pytest.fail("kustomize must not run"))


# --- fetches ---------------------------------------------------------------------------------------


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request with a ConfigMap, and records it."""

    timeout = 5  # a client that connects and says nothing cannot hold the server

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.server.requests.append(f"{self.command} {self.path}")
        body = CONFIG_MAP.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_HEAD = do_CONNECT = do_GET  # noqa: N815

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """A loopback HTTP server for this test only: (base URL, requests received)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    httpd.daemon_threads = True
    httpd.requests = []
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd.requests
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def remote_forms(url: str) -> dict[str, tuple[dict[str, str], int]]:
    """name -> (files of the kustomization directory `app`, line of the remote reference)."""
    port = url.rsplit(":", 1)[1]
    return {
        "configMapGenerator files": ({"kustomization.yaml": f"""\
            resources: [cm.yaml]
            configMapGenerator:
              - name: fetched
                files: [{url}/file]
            """}, 4),
        "configMapGenerator envs": ({"kustomization.yaml": f"""\
            resources: [cm.yaml]
            configMapGenerator:
              - name: fetched
                envs:
                  - {url}/env
            """}, 5),
        "secretGenerator files key=URL": ({"kustomization.yaml": f"""\
            resources: [cm.yaml]
            secretGenerator:
              - name: fetched
                files: [token={url}/secret]
            """}, 4),
        "inline transformer": ({"kustomization.yaml": f"""\
            resources: [cm.yaml]
            transformers:
              - |
                apiVersion: builtin
                kind: PatchTransformer
                metadata: {{name: fetch}}
                path: {url}/patch
                target: {{kind: ConfigMap}}
            """}, 7),
        "transformer configuration file": ({"kustomization.yaml": "resources: [cm.yaml]\ntransformers: [fetch.yaml]\n",
                                            "fetch.yaml": f"""\
            apiVersion: builtin
            kind: PatchTransformer
            metadata: {{name: fetch}}
            path: {url}/patch
            target: {{kind: ConfigMap}}
            """}, 4),
        "inline generator": ({"kustomization.yaml": f"""\
            resources: [cm.yaml]
            generators:
              - |
                apiVersion: builtin
                kind: ConfigMapGenerator
                metadata: {{name: fetched}}
                files: [{url}/generated]
            """}, 7),
        "resource URL naming a local directory": ({"kustomization.yaml": f"""\
            resources:
              - cm.yaml
              - {url}/resource.yaml
            """, f"http:/127.0.0.1:{port}/resource.yaml/.keep": ""}, 3),
    }


def write_form(tmp_path: Path, files: dict[str, str]) -> None:
    write(tmp_path / "app" / "cm.yaml", CONFIG_MAP)
    for name, text in files.items():
        write(tmp_path / "app" / name, text)


def disable_precheck(monkeypatch) -> None:
    """Let every remote reference through the check before the build: only the sandbox is left."""
    from kubelint_ports.loading.kustomize import guard as kustomize_guard

    monkeypatch.setattr(kustomize_guard, "is_remote", lambda text, local: False)
    monkeypatch.setattr(kustomize_guard.KustomizationCheck, "fetched_values", lambda self, node, place: None)


def sandboxed() -> str | None:
    """Why the sandbox cannot be tested here, or None."""
    from kubelint_ports.loading.kustomize import build as kustomize_build

    return kustomize_build.network_sandbox().note or None


FORMS = list(remote_forms("http://127.0.0.1:1"))


@needs_kustomize
@pytest.mark.parametrize("precheck", ["on", "off"])
@pytest.mark.parametrize("form", FORMS)
def test_remote_forms_reach_no_server(tmp_path, monkeypatch, server, form, precheck):
    url, requests = server
    files, line = remote_forms(url)[form]
    write_form(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    if precheck == "off":
        if reason := sandboxed():
            pytest.skip(reason)
        disable_precheck(monkeypatch)
    loaded = load(["app"])
    assert requests == []
    [diagnostic] = loaded.diagnostics
    if precheck == "on":  # the clear message, on the line
        where = diagnostic.location
        assert (where.path, where.line) == (f"app/{next(iter(files))}" if form != "transformer configuration file"
                                            else "app/fetch.yaml", line), diagnostic
        assert "remote resource" in diagnostic.message and "never uses the network" in diagnostic.message
    else:  # kustomize tried, and failed
        assert "cannot build Kustomize directory app" in diagnostic.message


@needs_kustomize
def test_the_server_sees_an_unsandboxed_fetch(tmp_path, monkeypatch, server):
    """The control: without the sandbox and the check, kustomize does fetch from the test's server."""
    from kubelint_ports.loading import children

    url, requests = server
    write_form(tmp_path, remote_forms(url)["configMapGenerator files"][0])
    monkeypatch.chdir(tmp_path)
    disable_precheck(monkeypatch)
    monkeypatch.setattr(children, "_SANDBOX", [children.Sandbox(note="none, for this test")])
    load(["app"])
    assert requests == ["GET /file"]


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{url}"}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
users: [{{name: u, user: {{}}}}]
current-context: c
"""


@needs_kustomize
@pytest.mark.parametrize("where", ["KUBECONFIG", "~/.kube/config"])
def test_the_kubeconfig_cluster_is_never_asked(tmp_path, monkeypatch, server, where):
    """Some kubectl builds ask the cluster's `/version` on every `kubectl kustomize`."""
    url, requests = server
    config = tmp_path / "home" / ".kube" / "config"
    write(config, KUBECONFIG.format(url=url))
    if where == "KUBECONFIG":
        monkeypatch.setenv("KUBECONFIG", str(config))
    else:
        monkeypatch.delenv("KUBECONFIG", raising=False)
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
    write(tmp_path / "app" / "kustomization.yaml", "resources: [cm.yaml]\n")
    write(tmp_path / "app" / "cm.yaml", CONFIG_MAP)
    monkeypatch.chdir(tmp_path)
    loaded = load(["app"])
    assert loaded.diagnostics == [] and len(loaded.documents) == 1
    assert requests == []


# --- files outside: never opened -------------------------------------------------------------------

# Runs the CLI's lint in a process whose every `open` of a path under WATCHED is recorded.
WATCHING = textwrap.dedent("""\
    import json, os, sys
    watched = os.path.realpath(sys.argv[1])
    opened = []

    def hook(event, args):
        if event == "open" and args and isinstance(args[0], (str, bytes)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if path == watched or path.startswith(watched + os.sep):
                opened.append(path)

    sys.addaudithook(hook)
    from kubelint_ports.engine import LintOptions, lint_paths
    report = lint_paths(sys.argv[2:], LintOptions())
    print(json.dumps({
        "opened": opened,
        "findings": [[f.location.path, f.location.line, f.rule_id] for f in report.findings],
        "diagnostics": [[d.location.path, d.location.line, d.message] for d in report.diagnostics],
        "notes": list(report.notes)}))
    """)


def lint_watching(cwd: Path, watched: Path, *paths: str) -> dict:
    environment = {**os.environ, "TMPDIR": str(cwd / "tmp"),
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))}
    (cwd / "tmp").mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-c", WATCHING, str(watched), *paths], cwd=cwd, capture_output=True,
                          text=True, env=environment, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_kustomize
@pytest.mark.parametrize("origin", ["absolute", "relative"])
def test_an_origin_outside_the_build_is_never_opened(tmp_path, origin):
    """`commonAnnotations` overrides the origin kustomize writes: it must not make us open a file."""
    secret = write(tmp_path / "outside" / "secret.yaml", "token: hunter2\n" * 20)
    # The temporary kustomization is built in TMPDIR (`tmp/kubelint-ports-kustomize-*`): origins are
    # relative to it.
    named = str(secret) if origin == "absolute" else "../../outside/secret.yaml"
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo / "app" / "kustomization.yaml", f"""\
        resources: [pod.yaml]
        commonAnnotations:
          config.kubernetes.io/origin: "path: {named}"
        """)
    write(repo / "app" / "pod.yaml", POD)
    outcome = lint_watching(tmp_path, tmp_path / "outside", "repo/app")
    assert outcome["opened"] == []
    assert outcome["diagnostics"] == []
    assert outcome["findings"] == [["repo/app/kustomization.yaml", 1, "KP101"]]  # the object's own place
    [note] = [note for note in outcome["notes"] if "origin" in note]
    assert "did not read" in note and "secret.yaml" in note


@pytest.mark.parametrize("case", ["patchesStrategicMerge ../", "patchesStrategicMerge symlink", "patches symlink",
                                  "symlinked kustomization", "base outside the repository"])
def test_files_outside_the_root_are_never_opened(tmp_path, case):
    outside = tmp_path / "outside"
    write(outside / "patch.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    write(outside / "kustomization.yaml", "resources: [pod.yaml]\n")
    write(outside / "pod.yaml", POD)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    app = repo / "app"
    write(app / "pod.yaml", POD)
    kustomization, line = {
        "patchesStrategicMerge ../": ("resources: [pod.yaml]\npatchesStrategicMerge: [../../outside/patch.yaml]\n", 2),
        "patchesStrategicMerge symlink": ("resources: [pod.yaml]\npatchesStrategicMerge: [link.yaml]\n", 2),
        "patches symlink": ("resources: [pod.yaml]\npatches:\n  - path: link.yaml\n", 3),
        "symlinked kustomization": (None, 0),
        "base outside the repository": ("resources:\n  - ../../outside\n", 2),
    }[case]
    if kustomization is None:
        app.mkdir(parents=True, exist_ok=True)
        (app / "kustomization.yaml").symlink_to(outside / "kustomization.yaml")
    else:
        write(app / "kustomization.yaml", kustomization)
        (app / "link.yaml").symlink_to(outside / "patch.yaml")
    outcome = lint_watching(tmp_path, outside, "repo/app")
    assert outcome["opened"] == []
    [[path, at, message]] = outcome["diagnostics"]
    assert (path, at) == ("repo/app/kustomization.yaml", line)
    assert "outside" in message and "cannot build Kustomize directory repo/app" in message


# --- alias bombs -----------------------------------------------------------------------------------


# where the bomb is: (files below tmp_path, the file and line reported: that of `a6`, the first anchor
# whose expansion passes max-aliases' 1,000,000 nodes)
BOMBS = {
    "resource": ({"app/kustomization.yaml": "resources: [cm.yaml]\n", "app/cm.yaml": bomb_config_map()},
                 ("app/cm.yaml", 12)),
    "inline patch": ({"app/kustomization.yaml": "resources: [cm.yaml]\npatches:\n  - patch: |\n"
                      "      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: settings\n"
                      "      data:\n" + bomb(indent="        "), "app/cm.yaml": CONFIG_MAP},
                     ("app/kustomization.yaml", 15)),
    "patch file": ({"app/kustomization.yaml": "resources: [cm.yaml]\npatchesStrategicMerge: [patch.yaml]\n",
                    "app/cm.yaml": CONFIG_MAP, "app/patch.yaml": bomb_config_map()}, ("app/patch.yaml", 12)),
    "base's kustomization": ({"app/kustomization.yaml": "resources: [../base]\n",
                              "base/kustomization.yaml": "resources: [cm.yaml]\ncommonAnnotations:\n" + bomb(indent="  "),
                              "base/cm.yaml": CONFIG_MAP}, ("base/kustomization.yaml", 9)),
    "component's resource": ({"app/kustomization.yaml": "resources: [cm.yaml]\ncomponents: [../extra]\n",
                              "app/cm.yaml": CONFIG_MAP,
                              "extra/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\n"
                                                          "kind: Component\nresources: [laughs.yaml]\n",
                              "extra/laughs.yaml": bomb_config_map()}, ("extra/laughs.yaml", 12)),
    "transformer configuration": ({"app/kustomization.yaml": "resources: [cm.yaml]\ntransformers: [labels.yaml]\n",
                                   "app/cm.yaml": CONFIG_MAP,
                                   "app/labels.yaml": "apiVersion: builtin\nkind: LabelTransformer\nmetadata: {name: l}\n"
                                                      "labels:\n" + bomb(indent="  ")}, ("app/labels.yaml", 11)),
}


@pytest.mark.parametrize("where", list(BOMBS))
def test_alias_bombs_never_reach_kustomize(tmp_path, monkeypatch, where):
    files, (path, line) = BOMBS[where]
    for name, text in files.items():
        write(tmp_path / name, text)
    monkeypatch.chdir(tmp_path)
    never_build(monkeypatch)
    [diagnostic] = load(["app"]).diagnostics
    assert (diagnostic.location.path, diagnostic.location.line) == (path, line)
    assert "limit max-aliases" in diagnostic.message and "which kustomize would read" in diagnostic.message


@needs_kustomize
def test_a_bomb_past_the_check_stops_at_the_memory_budget(tmp_path, monkeypatch):
    """The child's own budget, should a file get past the check: 9 ** 7 strings need about 2 GiB in
    kubectl; it stops at 128 MiB."""
    from kubelint_ports.loading.kustomize import guard as kustomize_guard

    write(tmp_path / "app" / "kustomization.yaml", "resources: [cm.yaml]\n")
    write(tmp_path / "app" / "cm.yaml", bomb_config_map(levels=6))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(kustomize_guard.Guard, "build", lambda self, directory: kustomize_guard.BuildReads())
    with budgets.applied(budgets.Limits(kustomize_memory_mib=128)):
        [diagnostic] = load(["app"]).diagnostics
    assert "needed more than 128 MiB (limit kustomize-memory-mib" in diagnostic.message


# --- generators and time ---------------------------------------------------------------------------


def generators(count: int, start: int = 0) -> str:
    return "".join(f"  - name: settings-{i}\n    literals: [K{i}=v]\n" for i in range(start, start + count))


def test_too_many_generator_entries_stop_before_the_build(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    write(tmp_path / "app" / "kustomization.yaml", "configMapGenerator:\n" + generators(501))
    monkeypatch.chdir(tmp_path)
    never_build(monkeypatch)
    [diagnostic] = load(["app"]).diagnostics
    assert (diagnostic.location.path, diagnostic.location.line) == ("app/kustomization.yaml", 1 + 2 * 500 + 1)
    assert "more than 500 configMapGenerator/secretGenerator entries (limit kustomize-generators)" \
        in diagnostic.message
    result = CliRunner().invoke(app, ["lint", "app"])
    assert result.exit_code == 2 and "app/kustomization.yaml:1002:5" in result.output


def test_generator_entries_are_counted_across_the_build(tmp_path, monkeypatch):
    """A base's entries, and configurations listed under `generators:`, count for the overlay."""
    write(tmp_path / "base" / "kustomization.yaml", "secretGenerator:\n" + generators(300))
    write(tmp_path / "app" / "kustomization.yaml",
          "resources: [../base]\ngenerators: [more.yaml]\nconfigMapGenerator:\n" + generators(100, 300))
    write(tmp_path / "app" / "more.yaml", "".join(
        f"---\napiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {{name: g{i}}}\nliterals: [A=b]\n"
        for i in range(101)))
    monkeypatch.chdir(tmp_path)
    never_build(monkeypatch)
    [diagnostic] = load(["app"]).diagnostics
    assert "limit kustomize-generators" in diagnostic.message
    # the overlay's 100 entries and 101 configurations, then the base's: its 300th is the 501st
    assert (diagnostic.location.path, diagnostic.location.line) == ("base/kustomization.yaml", 1 + 2 * 299 + 1)
    def failing_build(directory, reads=None):
        raise kustomize.KustomizeError("built")

    with budgets.applied(budgets.Limits(kustomize_generators=501)):
        monkeypatch.setattr(kustomize, "build", failing_build)
        [diagnostic] = load(["app"]).diagnostics
    assert diagnostic.message.endswith(": built")  # within the raised limit, the build runs


def test_a_build_stops_at_its_time_budget_with_what_it_started(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    started = tmp_path / "started"
    fake_binary(tmp_path, monkeypatch, f"/bin/sleep 60 &\necho $! > {started}\nwait\n")
    write(tmp_path / "app" / "kustomization.yaml", "resources: [pod.yaml]\n")
    write(tmp_path / "app" / "pod.yaml", POD)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["lint", "app", "--limit", "kustomize-seconds=0.5"])
    assert result.exit_code == 2
    assert "took longer than 0.5 s (limit kustomize-seconds)" in result.output
    # The build's own child (git, for kustomize) is killed with it
    child = int(started.read_text())
    stat = Path(f"/proc/{child}/stat")
    for _ in range(100):  # a hang guard: reaping is asynchronous
        if not stat.exists() or stat.read_text().split(") ")[1].startswith("Z"):
            break
        import time

        time.sleep(0.1)
    else:
        pytest.fail(f"the build's child {child} outlived it")
