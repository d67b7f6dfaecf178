"""Running kustomize so that it cannot reach any network, within time and memory budgets.

`kustomize build` and `kubectl kustomize` fetch remote resources and generator files over HTTP,
clone git repositories, and some kubectl builds (a version dispatcher) ask the cluster of the
kubeconfig for `/version` on every call; the check before the build (`kustomize_guard`) only names
what it finds. So the build itself runs:

- in a network namespace of its own (`unshare --net`, or as an unprivileged user `unshare --user
  --map-root-user --net`): only a loopback interface that is down, so every connection fails,
  loopback included. Where no namespace can be made (not Linux, no `unshare`, namespaces
  forbidden), a note says what remains;
- with proxy variables pointing at a closed port and NO_PROXY cleared, git limited to local
  repositories and ignoring the user's git configuration, and a kubeconfig whose only server is
  port 0 (an empty kubeconfig is not enough: client-go then falls back to localhost:8080, or to the
  in-cluster service when run in a pod);
- within `kustomize-seconds` (the whole process group is killed past it), `max-file-mib` of output,
  and `kustomize-memory-mib` of data (RLIMIT_DATA, as for the Helm worker: Go reserves its heap's
  address space with PROT_NONE mappings that RLIMIT_AS counts and RLIMIT_DATA does not, so
  RLIMIT_AS would stop kubectl before it starts while RLIMIT_DATA lets it run in 64 MiB).

The limit is set by a tiny Python launcher that then execs the build: builds run in threads, where
`preexec_fn` is unsafe.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass

from kubelint_ports.loading import budgets, files as input_files
from kubelint_ports.loading.kustomize_tree import KustomizeError

# Origin annotations appeared in kustomize 4.x; kubectl 1.24 bundles kustomize 4.5.4.
NEEDS = "kustomize 4.5 or later, or kubectl 1.24 or later, which bundles it"
# Where util-linux lives when PATH is narrowed (a CI step, a test's stand-in kubectl).
SYSTEM_DIRECTORIES = os.pathsep.join(("/usr/bin", "/bin", "/usr/sbin", "/sbin"))
# How kustomize introduces an error inside the directory the temporary kustomization lists.
_WRAPPER_CONTEXT = re.compile(r"^accumulating resources: accumulation err='accumulating resources from '[^']*': "
                              r"'[^']*' must resolve to a file': recursed accumulation of path '[^']*': ")
# A cluster nobody can listen on: connecting to port 0 fails at once, on any host.
NO_CLUSTER = json.dumps({
    "apiVersion": "v1", "kind": "Config", "current-context": "none",
    "clusters": [{"name": "none", "cluster": {"server": "http://127.0.0.1:0"}}],
    "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
    "users": [{"name": "none", "user": {}}]})
# Where the system refuses the limit (macOS may), the time budget still holds.
_LAUNCHER = """\
import os, resource, sys
limit = int(sys.argv[1])
try:
    hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
except (ValueError, OSError):
    pass
try:
    os.execv(sys.argv[2], sys.argv[2:])
except OSError as error:
    sys.stderr.write(f"cannot run {sys.argv[2]}: {error.strerror or error}\\n")
    sys.exit(127)
"""


def kustomize_commands() -> list[list[str]]:
    """The builds to try, best first: a standalone kustomize is usually newer than kubectl's."""
    import shutil

    commands = []
    if kustomize := shutil.which("kustomize"):
        commands.append([kustomize, "build"])
    if kubectl := shutil.which("kubectl"):
        commands.append([kubectl, "kustomize"])
    return commands


# --- the network namespace -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sandbox:
    """The command prefix that runs a build without network, or none and a note saying what remains."""

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
        return Sandbox(note=unsandboxed("network namespaces are Linux's"))
    unshare = shutil.which("unshare") or shutil.which("unshare", path=SYSTEM_DIRECTORIES)
    if unshare is None:
        return Sandbox(note=unsandboxed("no `unshare` (util-linux) found"))
    # root needs no user namespace (and some containers allow one but not the other)
    candidates = ([("--net",)] if os.geteuid() == 0 else []) + [("--user", "--map-root-user", "--net")]
    reason = ""
    for flags in candidates:
        prefix = (unshare, *flags, "--")
        try:
            done = subprocess.run([*prefix, sys.executable, "-I", "-S", "-c", ""], capture_output=True,
                                  stdin=subprocess.DEVNULL, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError) as error:
            reason = str(error)
            continue
        if done.returncode == 0:
            return Sandbox(prefix)
        reason = kustomize_message(done.stderr.decode("utf-8", "replace")) or f"exit {done.returncode}"
    return Sandbox(note=unsandboxed(f"`unshare` cannot make one here: {input_files.excerpt(reason, 200)}"))


def unsandboxed(why: str) -> str:
    return (f"Kustomize builds run without a network namespace of their own ({why}). What keeps them offline "
            "is the refusal of remote references before the build, proxy variables pointing at a closed port "
            "(NO_PROXY cleared), git limited to local repositories and a kubeconfig whose server is port 0; "
            "Go never proxies loopback addresses, so a remote reference the check missed could still reach a "
            "service on this machine")


def offline_environment(kubeconfig: str) -> dict[str, str]:
    """The build's environment: the second line of defence, and the only one without a namespace."""
    environment = dict(os.environ)
    nowhere = "http://127.0.0.1:9"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        environment[name] = nowhere
    # No exceptions to the proxy; no in-cluster configuration (client-go's fallback in a pod).
    for name in ("NO_PROXY", "no_proxy", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        environment.pop(name, None)
    environment.update(KUBECONFIG=kubeconfig, GIT_ALLOW_PROTOCOL="file", GIT_TERMINAL_PROMPT="0",
                       GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return environment


# --- building ------------------------------------------------------------------------------------


def build(directory: str) -> tuple[str, str]:
    """The rendered YAML of a Kustomize directory and the temporary directory its origin paths are
    relative to (gone by then: only the paths are needed)."""
    import tempfile

    commands = kustomize_commands()
    if not commands:
        raise KustomizeError(f"no kustomize to build it: put `kustomize` or `kubectl` on PATH ({NEEDS})")
    try:
        with tempfile.TemporaryDirectory(prefix="kubelint-ports-kustomize-") as scratch:
            scratch = os.path.realpath(scratch)  # `..` in the relative path climbs the real directories
            try:
                relative = os.path.relpath(os.path.abspath(directory), scratch)
            except ValueError:  # another drive (Windows)
                raise KustomizeError("cannot build a directory on another drive than the temporary "
                                     "directory") from None
            with open(os.path.join(scratch, "kustomization.yaml"), "w", encoding="utf-8") as handle:
                handle.write(f"resources:\n- {json.dumps(relative.replace(os.sep, '/'))}\n"
                             "buildMetadata: [originAnnotations]\n")
            kubeconfig = os.path.join(scratch, "no-cluster.kubeconfig")
            with open(kubeconfig, "w", encoding="utf-8") as handle:
                handle.write(NO_CLUSTER)
            return run_build(commands, scratch, offline_environment(kubeconfig)), scratch
    except OSError as error:
        raise KustomizeError(f"cannot prepare the build in a temporary directory: {error.strerror or error}") from None


def run_build(commands: list[list[str]], scratch: str, environment: dict[str, str]) -> str:
    """The output of the first command that builds the temporary kustomization in `scratch`."""
    failures = []
    limits = budgets.current()
    for command in commands:
        name = " ".join([os.path.basename(command[0]), *command[1:]])
        try:
            code, output, stderr = run_bounded([*command, scratch], environment, name)
        except OSError as error:
            failures.append(f"cannot run {command[0]}: {error.strerror or error}")
            continue
        if code == 0:
            return output.decode("utf-8", "replace")
        if code == 127 and stderr.startswith("cannot run "):  # the launcher's exec failed
            failures.append(stderr.strip())
            continue
        if "buildMetadata" in stderr and "unknown field" in stderr:
            failures.append(f"`{name}` is too old to report where objects come from (origin annotations "
                            f"need {NEEDS})")
            continue
        if "out of memory" in stderr or "cannot allocate memory" in stderr:
            raise KustomizeError(f"`{name}` needed more than {limits.kustomize_memory_mib} MiB (limit "
                                 "kustomize-memory-mib; YAML that expands as kustomize reads it?)")
        raise KustomizeError(kustomize_message(stderr) or f"`{name}` exited with {code}")
    raise KustomizeError("; ".join(failures))


def run_bounded(argv: list[str], environment: dict[str, str], name: str) -> tuple[int, bytes, str]:
    """(exit code, output, stderr) of one build in the sandbox, within the budgets."""
    import subprocess
    import sys
    import tempfile
    import time

    limits = budgets.current()
    argv = [*network_sandbox().prefix, *argv]
    if os.name == "posix":
        argv = [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(limits.kustomize_memory_mib * budgets.MIB), *argv]
    deadline = time.monotonic() + limits.kustomize_seconds
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors,
                                   env=environment, start_new_session=True)
        try:
            output = input_files.read_stream(process.stdout.fileno(), limits.max_file_bytes, deadline)
            if len(output) > limits.max_file_bytes:
                raise OverflowError()
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except (input_files.InputTimeout, subprocess.TimeoutExpired):
            raise KustomizeError(f"`{name}` took longer than {limits.kustomize_seconds:g} s (limit "
                                 "kustomize-seconds)") from None
        except OverflowError:
            raise KustomizeError(f"`{name}` printed more than {limits.max_file_mib} MiB "
                                 "(limit max-file-mib)") from None
        finally:
            if process.poll() is None:
                kill_group(process)
            process.wait()
            process.stdout.close()
        errors.seek(0)
        stderr = errors.read(budgets.MIB).decode("utf-8", "replace")
    return process.returncode, output, stderr


def kill_group(process) -> None:
    """The build and whatever it started (git): it leads its own session."""
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (AttributeError, OSError):  # Windows; or gone already
        process.kill()


def kustomize_message(message: str) -> str:
    """kustomize's message on one line (`files.one_line`), without deprecation warnings, its
    `Error: ` prefix and kubectl's log wrapping (`E1123 ... "command failed" err=< ... >`)."""
    lines = [line for line in message.splitlines() if not re.match(r"\s*#?\s*Warning:", line)]
    message = "\n".join(lines)
    wrapped = re.search(r'"command failed" err=(?:<(.*)>|"(.*)")\s*$', message, re.DOTALL)
    if wrapped:
        message = wrapped.group(1) if wrapped.group(1) is not None else wrapped.group(2).replace('\\"', '"')
    message = input_files.one_line(re.sub(r"^Error: ", "", message.strip()))
    return _WRAPPER_CONTEXT.sub("", message)
