"""Every process kubelint-ports starts goes through here: the Helm render worker (`helm/worker.py`),
`helm template` and `helm package`, and `kustomize build` / `kubectl kustomize`. The linted tree is
attacker input, and these programs read it; what they may do besides is decided once, here:

- **The environment is built, not inherited.** From ours a child gets PATH and the locale (LANG,
  LANGUAGE, LC_*), and on Windows what a program needs to start there; nothing else: no GIT_*,
  LD_PRELOAD, LD_LIBRARY_PATH, PYTHON*, BASH_ENV, ENV, HELM_*, KUBECONFIG, proxies or cloud
  credentials. It gets a private directory of its own (removed when it ends) as HOME, TMPDIR and
  working directory, so no user configuration applies either (kubectl's kuberc, git's
  ~/.gitconfig, kustomize's plugin directory, Helm's repositories); Helm's cache, configuration,
  data and plugin directories are empty ones in it, with HELM_NO_PLUGINS=1: no plugin or
  repository configuration from anywhere runs; KUBECONFIG is a file there whose only cluster is
  port 0 (an empty kubeconfig is not enough: client-go then falls back to localhost:8080, or to
  the in-cluster service when run in a pod); the proxy variables point at a closed port and
  NO_PROXY is absent; git, should any child start it (kustomize clones remote bases, refused before
  the build), reads no system or global configuration, allows no protocol, never prompts, never
  fetches lazily, and has fsmonitor and hooks off.
- **Limits** (set by a tiny Python launcher that then execs the program, since builds run in
  threads where `preexec_fn` is unsafe): RLIMIT_DATA (Go reserves its heap's address space with
  PROT_NONE mappings that RLIMIT_AS counts and RLIMIT_DATA does not, so RLIMIT_AS would stop
  kubectl before it starts while RLIMIT_DATA lets it run in 64 MiB; where the system refuses a
  limit, macOS may, the deadline still holds), RLIMIT_FSIZE (the largest file a child may write,
  its error output included: a write past it fails, as SIGXFSZ stays ignored across the exec),
  RLIMIT_CORE 0. Not RLIMIT_NPROC: it counts every process of the user (a CI runner's too) and
  root ignores it; no child here runs code that forks more than git.
- **Its own process group**, killed whole (SIGKILL) when the child ends, overruns its deadline or
  its output cap: nothing it started outlives it. The leader is reaped only after the group is
  killed, so its id cannot have been reused by then.
- **Input and output**: stdin is /dev/null unless the caller talks to it (the render worker);
  stdout is read up to a cap; stderr goes to a temporary file bounded by RLIMIT_FSIZE, of which
  `ERRORS_BYTES` are read.
- **No network where the system allows it**: a child that asks for the sandbox runs in a network
  namespace of its own (`unshare --net`, or as an unprivileged user `unshare --user
  --map-root-user --net`): only a loopback interface that is down, so every connection fails,
  loopback included. Where none can be made (not Linux, no `unshare`, namespaces forbidden),
  `network_sandbox().note` says why and the child runs without it; the environment above is then
  the only line of defence inside the child.
- **A Python child** (`PythonScript`, the render worker) runs as `python -I -S`: no PYTHON*
  variable, no user site, no `.pth` file or sitecustomize runs; its import path is this
  process's, without the working directory (the linted tree, usually).

Importing this module imports neither `subprocess` nor `tempfile`: only starting a child pays.
"""

from __future__ import annotations

import json
import os
import threading

from kubelint_ports.loading import files, read_log
from kubelint_ports.records import record

# What is read of a child's error output, and the default largest file it may write (which bounds
# the temporary file its error output goes to).
ERRORS_BYTES = 1 << 20
# Where util-linux lives when PATH is narrowed (a CI step, a test's stand-in kubectl).
SYSTEM_DIRECTORIES = os.pathsep.join(("/usr/bin", "/bin", "/usr/sbin", "/sbin"))
# Passed from our environment: the program's search path and the language of its messages.
PASSED = frozenset({"PATH", "LANG", "LANGUAGE"})
# What a program needs to start on Windows (its runtime finds its own files through them).
PASSED_ON_WINDOWS = frozenset({"SYSTEMROOT", "WINDIR", "PATHEXT", "COMSPEC"})
# Nothing listens on the discard port: a proxied connection fails at once.
CLOSED_PROXY = "http://127.0.0.1:9"
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
# A cluster nobody can listen on: connecting to port 0 fails at once, on any host.
NO_CLUSTER = json.dumps({
    "apiVersion": "v1", "kind": "Config", "current-context": "none",
    "clusters": [{"name": "none", "cluster": {"server": "http://127.0.0.1:0"}}],
    "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
    "users": [{"name": "none", "user": {}}]})
# git settings no repository or user configuration can turn back on (GIT_CONFIG_COUNT outranks
# every configuration file); the protocol allow-list, both ways, is empty.
GIT_SETTINGS = (("protocol.allow", "never"), ("core.fsmonitor", "false"), ("core.hooksPath", os.devnull))

# Runs in the child's process (`python -I -S -c`, the standard library only): sets the limits, then
# execs the program, or runs our Python script in this same interpreter. An exec that fails is
# reported on the status pipe (closed on a successful exec), as subprocess itself does.
_LAUNCHER = """\
import json, os, sys
spec = json.loads(sys.argv[1])
try:
    import resource
except ImportError:
    resource = None
for name, value in spec["limits"] if resource is not None else ():
    which = getattr(resource, name, None)
    if which is None:
        continue
    try:
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):
        pass
status = spec.get("status")
if "script" in spec:
    if status is not None:
        os.close(status)
    sys.path[:] = [os.path.dirname(spec["script"]), *spec["path"]]
    sys.argv[:] = spec["argv"]
    import runpy
    runpy.run_path(spec["script"], run_name="__main__")
else:
    import signal
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.set_inheritable(status, False)
    try:
        os.execvp(spec["argv"][0], spec["argv"])
    except OSError as error:
        os.write(status, json.dumps([error.errno or 0, error.strerror or str(error)]).encode())
        os._exit(127)
"""


class CannotStart(OSError):
    """The program could not be run (missing, not executable, not a program)."""


class TimedOut(Exception):
    """The child outlived its deadline; its process group was killed."""


class OutputOverflow(Exception):
    """The child printed more than its cap; its process group was killed."""

    def __init__(self, cap: int):
        super().__init__(f"more than {cap} bytes of output")
        self.cap = cap


@record(frozen=True, slots=True)
class PythonScript:
    """A Python script of ours (by path) with its arguments, run in isolation by this interpreter."""

    path: str
    args: tuple[str, ...] = ()


@record(frozen=True, slots=True)
class Finished:
    status: int  # the exit status; negative: the signal that ended it
    output: bytes
    errors: str  # the first `ERRORS_BYTES` of its error output, decoded


# --- the network namespace -----------------------------------------------------------------------


@record(frozen=True, slots=True)
class Sandbox:
    """The command prefix that runs a child without network, or none and a note saying why."""

    prefix: tuple[str, ...] = ()
    note: str = ""


_SANDBOX: list[Sandbox] = []
_SANDBOX_LOCK = threading.Lock()


def network_sandbox() -> Sandbox:
    """Found once per process: a probe costs a process start."""
    with _SANDBOX_LOCK:
        if not _SANDBOX:
            _SANDBOX.append(find_sandbox())
        return _SANDBOX[0]


def find_sandbox() -> Sandbox:
    import shutil
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        return Sandbox(note="network namespaces are Linux's")
    unshare = shutil.which("unshare") or shutil.which("unshare", path=SYSTEM_DIRECTORIES)
    if unshare is None:
        return Sandbox(note="no `unshare` (util-linux) found")
    # root needs no user namespace (and some containers allow one but not the other)
    candidates = ([("--net",)] if os.geteuid() == 0 else []) + [("--user", "--map-root-user", "--net")]
    reason = ""
    for flags in candidates:
        prefix = (unshare, *flags, "--")
        try:
            done = subprocess.run([*prefix, sys.executable, "-I", "-S", "-c", ""], capture_output=True,
                                  stdin=subprocess.DEVNULL, timeout=30, check=False, cwd="/",
                                  env={name: value for name, value in os.environ.items() if name in PASSED})
        except (OSError, subprocess.SubprocessError) as error:
            reason = str(error)
            continue
        if done.returncode == 0:
            return Sandbox(prefix)
        reason = files.one_line(done.stderr.decode("utf-8", "replace")) or f"exit {done.returncode}"
    return Sandbox(note=f"`unshare` cannot make one here: {files.excerpt(reason, 200)}")


# --- the environment -----------------------------------------------------------------------------


def private_directory() -> str:
    """A new directory for one child: its working directory, HOME, TMPDIR, Helm's empty
    directories and the kubeconfig without a cluster (`child_environment`)."""
    import shutil
    import tempfile

    private = os.path.realpath(tempfile.mkdtemp(prefix="kubelint-ports-child-"))
    try:
        for name in ("home", "tmp", "helm/cache", "helm/config", "helm/data", "helm/plugins"):
            os.makedirs(os.path.join(private, *name.split("/")))
        with open(os.path.join(private, "no-cluster.kubeconfig"), "w", encoding="utf-8") as handle:
            handle.write(NO_CLUSTER)
    except BaseException:
        shutil.rmtree(private, ignore_errors=True)
        raise
    return private


def child_environment(private: str) -> dict[str, str]:
    """What every child gets (the module's docstring says why), around its `private_directory`."""
    windows = os.name == "nt"
    environment = {name: value for name, value in os.environ.items()
                   if name in PASSED or name.startswith("LC_") or (windows and name.upper() in PASSED_ON_WINDOWS)}
    home, temporary, helm = (os.path.join(private, name) for name in ("home", "tmp", "helm"))
    environment.update({name: CLOSED_PROXY for name in PROXIES})
    environment.update(
        HOME=home, TMPDIR=temporary, KUBECONFIG=os.path.join(private, "no-cluster.kubeconfig"),
        HELM_CACHE_HOME=os.path.join(helm, "cache"), HELM_CONFIG_HOME=os.path.join(helm, "config"),
        HELM_DATA_HOME=os.path.join(helm, "data"), HELM_PLUGINS=os.path.join(helm, "plugins"), HELM_NO_PLUGINS="1",
        GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0", GIT_NO_LAZY_FETCH="1",
        GIT_PROTOCOL_FROM_USER="0", GIT_ALLOW_PROTOCOL="", GIT_CONFIG_COUNT=str(len(GIT_SETTINGS)),
        GOTRACEBACK="single")  # one goroutine's trace: the reason a Go child died, within ERRORS_BYTES
    for index, (key, value) in enumerate(GIT_SETTINGS):
        environment[f"GIT_CONFIG_KEY_{index}"], environment[f"GIT_CONFIG_VALUE_{index}"] = key, value
    if windows:
        environment.update(USERPROFILE=home, TEMP=temporary, TMP=temporary, APPDATA=home, LOCALAPPDATA=home)
    return environment


def import_path() -> list[str]:
    """This process's import path for a Python child, without the working directory (usually the
    linted tree: a module there must not shadow one the child imports); relative entries made
    absolute, as the child runs elsewhere."""
    import sys

    here = os.getcwd()
    path = []
    for entry in sys.path:
        if entry in ("", os.curdir):
            continue
        entry = os.path.abspath(entry)
        if entry != here and entry not in path:
            path.append(entry)
    return path


# --- starting and ending -------------------------------------------------------------------------


class Child:
    """A started child: its process (the leader of its own process group), its error output (a
    temporary file) and its private directory. `stop` ends all three."""

    def __init__(self, process, errors, private: str):
        self.process = process
        self.errors = errors
        self.private = private
        self.status: int | None = None

    @property
    def stdin(self):
        return self.process.stdin

    @property
    def stdout(self):
        return self.process.stdout

    def error_text(self, limit: int = ERRORS_BYTES) -> str:
        """What it wrote to stderr so far, its first `limit` bytes."""
        self.errors.seek(0)
        return self.errors.read(limit).decode("utf-8", "replace")

    def exited(self) -> bool:
        """Whether the leader has ended; it is left a zombie, so its process group id stays its own
        until `stop` kills the group."""
        if not hasattr(os, "waitid"):
            return self.process.poll() is not None
        try:
            info = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None and info.si_pid != 0

    def wait(self, deadline: float) -> bool:
        """Whether the leader ended by the deadline (time.monotonic)."""
        import time

        pause = 0.001
        while not self.exited():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.05)
        return True

    def stop(self) -> int | None:
        """Kill the child's whole process group, reap the leader, close its pipes and remove its
        private directory; its exit status (negative: the signal)."""
        import shutil

        if self.process is None:
            return self.status
        process, self.process = self.process, None
        try:
            if os.name == "posix":
                import signal

                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except OSError:  # the group is empty already
                    pass
            elif process.poll() is None:
                process.kill()
            self.status = process.wait()
        finally:
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:  # a request left unread in the pipe of a dead child
                        pass
            self.errors.close()
            shutil.rmtree(self.private, ignore_errors=True)
        return self.status


def start(command: list[str] | PythonScript, *, memory_bytes: int, file_bytes: int = ERRORS_BYTES,
          sandbox: bool = False, cwd: str | None = None, stdin_pipe: bool = False,
          deadline: float | None = None) -> Child:
    """Start `command` (a program's argv, or one of our Python scripts) as the module's docstring
    says: `memory_bytes` of data, files of at most `file_bytes`, in the network sandbox when asked
    and one can be made, in `cwd` (default: its private directory; give one only where the
    program must resolve paths the user typed). stdin is a pipe to write to when `stdin_pipe`,
    else /dev/null. CannotStart (an OSError) when the program cannot run; TimedOut when even the
    launcher does not start by the deadline."""
    import shutil
    import subprocess
    import sys
    import tempfile

    spec: dict = {"limits": [["RLIMIT_DATA", memory_bytes], ["RLIMIT_FSIZE", file_bytes], ["RLIMIT_CORE", 0]]}
    if isinstance(command, PythonScript):
        spec.update(script=os.path.abspath(command.path), argv=[os.path.abspath(command.path), *command.args],
                    path=import_path())
        launched = True
    else:
        spec["argv"] = list(command)
        launched = os.name == "posix"  # on Windows an exec is a new process: the limits are POSIX's anyway
    private = private_directory()
    errors = status_read = status_write = None
    try:
        errors = tempfile.TemporaryFile()
        if os.name == "posix":
            status_read, status_write = os.pipe()
            spec["status"] = status_write
        argv = [sys.executable, "-I", "-S", "-c", _LAUNCHER, json.dumps(spec)] if launched else list(command)
        if sandbox:
            argv = [*network_sandbox().prefix, *argv]
        read_log.child_ran(str(argv[0]))  # hook: what a child reads, the run memo cannot list
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=errors, env=child_environment(private), cwd=cwd or private, start_new_session=True,
            pass_fds=(status_write,) if status_write is not None else ())
    except BaseException:
        for descriptor in (status_read, status_write):
            if descriptor is not None:
                os.close(descriptor)
        if errors is not None:
            errors.close()
        shutil.rmtree(private, ignore_errors=True)
        raise
    child = Child(process, errors, private)
    if status_read is not None:
        os.close(status_write)
        try:
            failure = launcher_status(status_read, deadline)
        except BaseException:
            child.stop()
            raise
        if failure is not None:
            child.stop()
            number, reason = failure
            raise CannotStart(number, reason, spec["argv"][0])
    return child


def launcher_status(descriptor: int, deadline: float | None) -> tuple[int, str] | None:
    """(errno, reason) when the launcher could not exec the program; None once it did (or once it
    runs our script). Closes `descriptor`."""
    import time

    if deadline is None:
        deadline = time.monotonic() + 60
    try:
        report = files.read_stream(descriptor, 4096, deadline)
    except files.InputTimeout:
        raise TimedOut() from None
    finally:
        os.close(descriptor)
    if not report:
        return None
    try:
        number, reason = json.loads(report)
        return int(number), str(reason)
    except (ValueError, TypeError):
        return 0, report.decode("utf-8", "replace")


def run(command: list[str] | PythonScript, *, deadline: float, output_bytes: int, memory_bytes: int,
        file_bytes: int = ERRORS_BYTES, sandbox: bool = False, cwd: str | None = None) -> Finished:
    """Run `command` to its end (`start` says how), its stdin /dev/null: its exit status, at most
    `output_bytes` of output and the start of its error output. TimedOut past the deadline
    (time.monotonic), OutputOverflow past `output_bytes`: its whole process group is killed then,
    as it is once it ends (nothing it started outlives it)."""
    import time

    child = start(command, memory_bytes=memory_bytes, file_bytes=file_bytes, sandbox=sandbox, cwd=cwd,
                  deadline=deadline)
    try:
        try:
            output = files.read_stream(child.stdout.fileno(), output_bytes, deadline)
        except files.InputTimeout:
            raise TimedOut() from None
        if len(output) > output_bytes:
            raise OutputOverflow(output_bytes)
        # A child that closed its output is ending: a moment's grace past the deadline for that.
        if not child.wait(max(deadline, time.monotonic() + 0.1)):
            raise TimedOut()
        errors = child.error_text()
    finally:
        status = child.stop()
    return Finished(status, output, errors)
