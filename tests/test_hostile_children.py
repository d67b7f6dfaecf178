"""Every child process goes through `loading/children.py` (issue 31): no other module starts one;
what a child receives from our environment is what that module builds, whatever the caller's
environment plants (git, loader, Python, shell, Helm and kubeconfig variables); a child past its
deadline or its output cap is killed with everything it started; its error output is bounded."""

from __future__ import annotations

import ast
import json
import os
import socket
import stat
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kubelint_ports.loading import budgets, children

pytestmark = pytest.mark.slow  # children killed at their deadlines and caps: not in the quick subset

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kubelint_ports"
WEB = ROOT / "tests" / "charts" / "web"
MIB = 1 << 20

posix_only = pytest.mark.skipif(os.name != "posix", reason="process groups and rlimits are POSIX's")
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


# --- one module starts children ----------------------------------------------------------------------

# Calls that start a process, by module; importing `subprocess` or `pty` at all counts too.
STARTERS = {
    "subprocess": {"Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"},
    "os": {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "startfile",
           "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe",
           "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe"},
    "pty": {"spawn", "fork"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
}
FORBIDDEN_IMPORTS = {"subprocess", "pty", "asyncio.subprocess", "multiprocessing", "concurrent.futures.process",
                     "concurrent.futures.ProcessPoolExecutor"}
# The one module that starts children; the worker pool's processes are forks of this one running
# our own code (multiprocessing), not programs.
ALLOWED = {"loading/children.py": {"subprocess"}, "loading/pool.py": {"multiprocessing", "ProcessPoolExecutor"}}


def process_starts(source: str) -> list[tuple[int, str]]:
    """(line, what) for every import of a module that starts processes and every call of a
    function that does, however it was imported or renamed."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}  # local name -> module
    functions: dict[str, tuple[str, str]] = {}  # local name -> (module, function)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in FORBIDDEN_IMPORTS or alias.name.split(".")[0] in FORBIDDEN_IMPORTS:
                    found.append((node.lineno, f"import {alias.name}"))
                top = alias.name.split(".")[0]
                modules[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module in FORBIDDEN_IMPORTS or node.module.split(".")[0] in FORBIDDEN_IMPORTS:
                found.append((node.lineno, f"from {node.module} import ..."))
            for alias in node.names:
                if f"{node.module}.{alias.name}" in FORBIDDEN_IMPORTS:
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
                if alias.name in STARTERS.get(node.module, ()):
                    functions[alias.asname or alias.name] = (node.module, alias.name)
                elif alias.name in STARTERS:
                    modules[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
            module = modules.get(function.value.id)
            if module in STARTERS and function.attr in STARTERS[module]:
                found.append((node.lineno, f"{module}.{function.attr}()"))
        elif isinstance(function, ast.Name) and function.id in functions:
            found.append((node.lineno, "{}.{}()".format(*functions[function.id])))
    return sorted(set(found))


def test_the_scan_sees_every_way_of_starting_a_process():
    """The control: each form below is found (else the test below would pass on anything)."""
    source = textwrap.dedent("""\
        import os as system_calls
        import subprocess as sp
        from os import execvp as replace
        from pty import spawn
        import multiprocessing
        system_calls.system("x")
        system_calls.posix_spawn("x", ["x"], {})
        sp.run(["x"])
        replace("x", ["x"])
        spawn(["x"])
        """)
    found = {what for _, what in process_starts(source)}
    assert {"import subprocess", "import multiprocessing", "from pty import ...", "os.system()", "os.posix_spawn()",
            "subprocess.run()", "os.execvp()", "pty.spawn()"} <= found
    assert process_starts("import os\nos.path.join('a', 'b')\nos.read(0, 1)\n") == []


def test_only_the_children_module_starts_processes():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        allowed = ALLOWED.get(relative, set())
        found = [(line, what) for line, what in process_starts(path.read_text(encoding="utf-8"))
                 if not any(name in what for name in allowed)]
        if found:
            offenders[relative] = found
    assert offenders == {}, "start child processes through kubelint_ports/loading/children.py"


# --- what a child receives -----------------------------------------------------------------------------

def plant(tmp_path: Path, monkeypatch) -> dict[str, Path]:
    """A caller's environment as a hostile CI step or a careless user could leave it: every variable
    here would make a child run code, read configuration or reach a cluster. Returns the markers
    that code would write."""
    markers = {name: tmp_path / "markers" / name for name in ("sitecustomize", "startup", "bash-env", "plugin")}
    (tmp_path / "markers").mkdir()
    python = tmp_path / "python-path"
    python.mkdir()
    (python / "sitecustomize.py").write_text(f"open({str(markers['sitecustomize'])!r}, 'w').close()\n")
    (tmp_path / "startup.py").write_text(f"open({str(markers['startup'])!r}, 'w').close()\n")
    (tmp_path / "bash-env.sh").write_text(f": > {markers['bash-env']}\n")
    plugin = tmp_path / "helm-plugins" / "marker"
    plugin.mkdir(parents=True)
    (plugin / "plugin.yaml").write_text(f"name: marker\nversion: 0.1.0\ncommand: touch {markers['plugin']}\n"
                                        "platformHooks: {}\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: prod\nclusters:\n- name: prod\n  cluster:\n"
                          "    server: https://10.0.0.1:6443\ncontexts:\n- name: prod\n  context: {cluster: prod, "
                          "user: admin, namespace: payments}\nusers:\n- name: admin\n  user: {token: secret}\n")
    planted = {
        "GIT_DIR": str(tmp_path / "elsewhere.git"), "GIT_WORK_TREE": str(tmp_path),
        "GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='touch /tmp/owned'", "GIT_SSH_COMMAND": "touch /tmp/owned",
        "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"), "GIT_EXEC_PATH": str(tmp_path),
        "LD_PRELOAD": str(tmp_path / "preload.so"), "LD_LIBRARY_PATH": str(tmp_path),
        "PYTHONPATH": str(python), "PYTHONSTARTUP": str(tmp_path / "startup.py"), "PYTHONINSPECT": "1",
        "PYTHONHOME": str(tmp_path / "no-python"), "BASH_ENV": str(tmp_path / "bash-env.sh"),
        "ENV": str(tmp_path / "bash-env.sh"), "HELM_PLUGINS": str(plugin.parent), "HELM_NAMESPACE": "payments",
        "HELM_REPOSITORY_CONFIG": str(tmp_path / "repositories.yaml"), "KUBECONFIG": str(kubeconfig),
        "KUBERNETES_SERVICE_HOST": "10.0.0.1", "NO_PROXY": "*", "AWS_SECRET_ACCESS_KEY": "secret",
    }
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    return markers


PLANTED_NAMES = {"GIT_DIR", "GIT_WORK_TREE", "GIT_CONFIG_PARAMETERS", "GIT_SSH_COMMAND", "GIT_EXEC_PATH",
                 "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONHOME",
                 "BASH_ENV", "ENV", "HELM_NAMESPACE", "HELM_REPOSITORY_CONFIG", "KUBERNETES_SERVICE_HOST",
                 "NO_PROXY", "no_proxy", "AWS_SECRET_ACCESS_KEY"}


def assert_our_environment(environment: dict[str, str], tmp_path: Path, markers: dict[str, Path]) -> None:
    assert not PLANTED_NAMES & set(environment), PLANTED_NAMES & set(environment)
    assert not [name for name, value in environment.items() if str(tmp_path) in value and name != "PATH"]
    assert environment["GIT_CONFIG_GLOBAL"] == os.devnull and environment["GIT_CONFIG_NOSYSTEM"] == "1"
    assert environment["GIT_ALLOW_PROTOCOL"] == "" and environment["GIT_NO_LAZY_FETCH"] == "1"
    assert environment["HELM_NO_PLUGINS"] == "1"
    assert environment["HTTPS_PROXY"] == environment["HTTP_PROXY"] == children.CLOSED_PROXY
    assert [path.name for path in markers.values() if path.exists()] == []


def environment_dump(tmp_path: Path) -> list[str]:
    """A Python program (run as any program is, not isolated) that prints its environment, the
    entries of its HELM_PLUGINS directory and its working directory as JSON."""
    return [sys.executable, "-c", "import json, os; print(json.dumps([dict(os.environ), "
            "sorted(os.listdir(os.environ.get('HELM_PLUGINS') or '.')), os.getcwd(), "
            "open(os.environ['KUBECONFIG']).read()]))"]


def test_a_child_receives_none_of_the_planted_environment(tmp_path, monkeypatch):
    markers = plant(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    done = children.run(environment_dump(tmp_path), deadline=time.monotonic() + 60, output_bytes=MIB,
                        memory_bytes=512 * MIB)
    assert done.status == 0, done.errors
    environment, plugins, cwd, kubeconfig = json.loads(done.output)
    assert_our_environment(environment, tmp_path, markers)
    assert plugins == [] and environment["HELM_PLUGINS"] != str(tmp_path / "helm-plugins")
    assert os.path.realpath(cwd) != os.path.realpath(tmp_path) and not os.path.exists(cwd)  # private, then removed
    assert [cluster["cluster"]["server"] for cluster in json.loads(kubeconfig)["clusters"]] == ["http://127.0.0.1:0"]
    assert environment["HOME"] != os.environ.get("HOME")


@posix_only
def test_helm_receives_none_of_the_planted_environment(tmp_path, monkeypatch):
    """`helm template` (a stand-in that records what it got) through the binary fallback."""
    from kubelint_ports.loading.helm.chart import HelmOptions
    from kubelint_ports.loading.helm.render import render_with_binary

    markers = plant(tmp_path, monkeypatch)
    record = tmp_path / "helm-saw.json"
    helm = tmp_path / "bin" / "helm"
    helm.parent.mkdir()
    helm.write_text(f"#!{sys.executable}\nimport json, os\n"
                    f"json.dump([dict(os.environ), sorted(os.listdir(os.environ['HELM_PLUGINS']))], "
                    f"open({str(record)!r}, 'w'))\n")
    helm.chmod(helm.stat().st_mode | stat.S_IXUSR)
    monkeypatch.chdir(ROOT)
    render_with_binary(str(helm), "tests/charts/web", HelmOptions())
    environment, plugins = json.loads(record.read_text())
    assert_our_environment(environment, tmp_path, markers)
    assert plugins == []


@posix_only
def test_kustomize_receives_none_of_the_planted_environment(tmp_path, monkeypatch):
    from kubelint_ports.loading.kustomize import build as kustomize_build

    markers = plant(tmp_path, monkeypatch)
    record = tmp_path / "kubectl-saw.json"
    kubectl = tmp_path / "bin" / "kubectl"
    kubectl.parent.mkdir()
    kubectl.write_text(f"#!{sys.executable}\nimport json, os\n"
                       f"json.dump(dict(os.environ), open({str(record)!r}, 'w'))\n")
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "app").mkdir()
    kustomize_build.run_build([[str(kubectl), "kustomize"]], str(tmp_path / "app"))
    assert_our_environment(json.loads(record.read_text()), tmp_path, markers)


needs_engine = pytest.mark.skipif(
    __import__("kubelint_ports.loading.helm.charts", fromlist=["in_process_engine"]).in_process_engine() is None,
    reason="helm-python-sdk does not load here")


@needs_engine
@linux_only
def test_the_render_worker_is_isolated(tmp_path, monkeypatch):
    """The worker renders with `-I -S`: neither PYTHONPATH's sitecustomize nor a module in the
    working directory (the linted tree) named like one it imports runs; it works in a private
    directory, receives our environment and, where a namespace can be made, has no network."""
    from kubelint_ports.loading.helm.chart import HelmOptions
    from kubelint_ports.loading.helm.render import RenderWorker

    markers = plant(tmp_path, monkeypatch)
    shadow = tmp_path / "markers" / "shadow"
    (tmp_path / "helm_python.py").write_text(f"open({str(shadow)!r}, 'w').close()\n")  # this process has the real one
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", *sys.path])  # as `python -m kubelint_ports` run here would have it
    worker = RenderWorker()
    try:
        manifests = worker.render(str(WEB), HelmOptions())
        assert manifests and "web/templates/deployment.yaml" in manifests
        pid = worker.child.process.pid
        environment = dict(entry.split("=", 1) for entry in
                           Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in entry)
        cwd = os.readlink(f"/proc/{pid}/cwd")
        if children.network_sandbox().prefix:
            assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    finally:
        worker.stop()
    assert_our_environment(environment, tmp_path, markers)
    assert not shadow.exists()
    assert cwd.startswith(tempfile_root()) and not os.path.exists(cwd)


def tempfile_root() -> str:
    import tempfile

    return os.path.realpath(tempfile.gettempdir())


# --- limits ----------------------------------------------------------------------------------------------


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie waiting for its reaper does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def gone(pid: int) -> bool:
    """SIGKILL is delivered at once, but the kernel ends the process a moment later."""
    for _ in range(200):
        if not alive(pid):
            return True
        time.sleep(0.01)
    return False


@posix_only
@pytest.mark.parametrize("holds_output", [True, False], ids=["child-waits", "grandchild-holds-the-output"])
def test_a_child_past_its_deadline_is_killed_with_its_whole_group(tmp_path, holds_output):
    """A child that starts a grandchild sleeping forever: at the deadline both are killed, whether
    the child itself waits or has left the grandchild holding its output."""
    grandchild = tmp_path / "grandchild"
    script = f"sleep 600 & echo $! > {grandchild}; " + ("sleep 600" if holds_output else "exit 0")
    started = time.monotonic()
    with pytest.raises(children.TimedOut):
        children.run(["sh", "-c", script], deadline=time.monotonic() + 1, output_bytes=MIB, memory_bytes=512 * MIB)
    assert time.monotonic() - started < 30
    assert gone(int(grandchild.read_text()))


@posix_only
def test_nothing_a_child_started_outlives_it(tmp_path):
    """A grandchild left behind by a child that ended well is killed too."""
    done = children.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"], deadline=time.monotonic() + 30,
                        output_bytes=MIB, memory_bytes=512 * MIB)
    assert done.status == 0
    assert gone(int(done.output))


@posix_only
def test_output_over_the_cap_is_cut_and_reported(tmp_path):
    """A child printing without end: stopped once it passes the cap, and the caller told."""
    forever = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"]
    started = time.monotonic()
    with pytest.raises(children.OutputOverflow) as raised:
        children.run(forever, deadline=time.monotonic() + 60, output_bytes=256 * 1024, memory_bytes=512 * MIB)
    assert raised.value.cap == 256 * 1024
    assert time.monotonic() - started < 30


@posix_only
def test_kustomize_printing_without_end_is_an_error_naming_the_limit(tmp_path):
    from kubelint_ports.loading.kustomize import build as kustomize_build
    from kubelint_ports.loading.kustomize.tree import KustomizeError

    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f"#!{sys.executable}\nimport sys\nwhile True: sys.stdout.write('x' * 65536)\n")
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IXUSR)
    with budgets.applied(budgets.Limits(max_file_mib=1)):
        with pytest.raises(KustomizeError, match=r"printed more than 1 MiB \(limit max-file-mib\)"):
            kustomize_build.run_build([[str(kubectl), "kustomize"]], str(tmp_path))


@posix_only
def test_error_output_is_bounded(tmp_path):
    """Error output goes to a file no larger than the child may write: past it the child's writes
    fail (it goes on), and the caller reads the first `ERRORS_BYTES`."""
    program = textwrap.dedent("""\
        import os
        written = 0
        try:
            for _ in range(64):
                written += os.write(2, b"e" * 65536)
        except OSError as error:
            print("stopped", error.errno)
        else:
            print("wrote", written)
        """)
    done = children.run([sys.executable, "-c", program], deadline=time.monotonic() + 60, output_bytes=MIB,
                        memory_bytes=512 * MIB, file_bytes=256 * 1024)
    assert done.output.split()[0] == b"stopped"
    assert len(done.errors) == 256 * 1024
    done = children.run([sys.executable, "-c", program], deadline=time.monotonic() + 60, output_bytes=MIB,
                        memory_bytes=512 * MIB, file_bytes=8 * MIB)
    assert done.output.split() == [b"wrote", str(64 * 65536).encode()]
    assert len(done.errors) == children.ERRORS_BYTES


@posix_only
def test_a_child_runs_within_its_limits(tmp_path):
    program = ("import resource\nprint(*(resource.getrlimit(getattr(resource, name))[0] for name in "
               "('RLIMIT_DATA', 'RLIMIT_FSIZE', 'RLIMIT_CORE')))")
    done = children.run([sys.executable, "-c", program], deadline=time.monotonic() + 60, output_bytes=MIB,
                        memory_bytes=300 * MIB, file_bytes=3 * MIB)
    data, size, core = map(int, done.output.split())
    import resource

    hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
    assert data == (300 * MIB if hard == resource.RLIM_INFINITY else min(300 * MIB, hard))
    assert (size, core) == (3 * MIB, 0)


def test_a_program_that_cannot_run_is_an_os_error(tmp_path):
    with pytest.raises(OSError) as missing:
        children.run([str(tmp_path / "no-such-program")], deadline=time.monotonic() + 30, output_bytes=MIB,
                     memory_bytes=512 * MIB)
    assert missing.value.strerror
    if os.name == "posix":
        not_executable = tmp_path / "not-executable"
        not_executable.write_text("#!/bin/sh\n")
        with pytest.raises(OSError):
            children.run([str(not_executable)], deadline=time.monotonic() + 30, output_bytes=MIB,
                         memory_bytes=512 * MIB)


@linux_only
def test_a_sandboxed_child_reaches_no_server(tmp_path):
    """A server on this machine's loopback, which an unsandboxed child reaches (the control)."""
    if reason := children.network_sandbox().note:
        pytest.skip(reason)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    connect = [sys.executable, "-c", f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), "
               "timeout=5).close()\n    print('connected')\nexcept OSError:\n    print('refused')"]
    with listener:
        for sandbox, expected in ((False, b"connected"), (True, b"refused")):
            done = children.run(connect, deadline=time.monotonic() + 60, output_bytes=MIB, memory_bytes=512 * MIB,
                                sandbox=sandbox)
            assert done.output.strip() == expected, done.errors
