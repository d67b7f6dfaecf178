"""Running kustomize so that it cannot reach any network, within time and memory budgets.

`kustomize build` and `kubectl kustomize` fetch remote resources and generator files over HTTP,
clone git repositories, and some kubectl builds (a version dispatcher) ask the cluster of the
kubeconfig for `/version` on every call; the check before the build (`kustomize_guard`) only names
what it finds. So the build itself runs as every child does (`children`):

- in a network namespace of its own: every connection fails, loopback included. Where no namespace
  can be made (not Linux, no `unshare`, namespaces forbidden), a note says what remains;
- with proxy variables pointing at a closed port and NO_PROXY cleared, git allowed no protocol and
  ignoring the user's git configuration, and a kubeconfig whose only server is port 0;
- within `kustomize-seconds` (the whole process group is killed past it), `max-file-mib` of output,
  and `kustomize-memory-mib` of data (RLIMIT_DATA).
"""

from __future__ import annotations

import json
import os
import re

from kubelint_ports.loading import budgets, children, files as input_files
from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading.children import network_sandbox
from kubelint_ports.loading.kustomize.guard import BuildReads
from kubelint_ports.loading.kustomize.tree import KustomizeError

# Origin annotations appeared in kustomize 4.x; kubectl 1.24 bundles kustomize 4.5.4.
NEEDS = "kustomize 4.5 or later, or kubectl 1.24 or later, which bundles it"
# How kustomize introduces an error inside the directory the temporary kustomization lists.
_WRAPPER_CONTEXT = re.compile(r"^accumulating resources: accumulation err='accumulating resources from '[^']*': "
                              r"'[^']*' must resolve to a file': recursed accumulation of path '[^']*': ")


def kustomize_commands() -> list[list[str]]:
    """The builds to try, best first: a standalone kustomize is usually newer than kubectl's."""
    import shutil

    commands = []
    if kustomize := shutil.which("kustomize"):
        commands.append([kustomize, "build"])
    if kubectl := shutil.which("kubectl"):
        commands.append([kubectl, "kustomize"])
    return commands


def sandbox_note() -> str:
    """What the user should know before a build: nothing, or what keeps it offline without a
    network namespace."""
    why = network_sandbox().note
    return unsandboxed(why) if why else ""


def unsandboxed(why: str) -> str:
    return (f"Kustomize builds run without a network namespace of their own ({why}). What keeps them offline "
            "is the refusal of remote references before the build, proxy variables pointing at a closed port "
            "(NO_PROXY cleared), git allowed no protocol and a kubeconfig whose server is port 0; "
            "Go never proxies loopback addresses, so a remote reference the check missed could still reach a "
            "service on this machine")


# --- building ------------------------------------------------------------------------------------


def build(directory: str, reads: BuildReads | None = None) -> tuple[str, str]:
    """The rendered YAML of a Kustomize directory and the directory its origin paths are relative
    to (a temporary one, gone by then: only the paths are needed). While `lint --fix` works out its
    plan and a file of `reads` has planned bytes (`files.PLANNED`), the build reads a private copy
    of the tree holding them (`planned_tree`), as a chart renders one (`helm_render.planned_chart`)."""
    import tempfile

    commands = kustomize_commands()
    if not commands:
        raise KustomizeError(f"no kustomize to build it: put `kustomize` or `kubectl` on PATH ({NEEDS})")
    try:
        with tempfile.TemporaryDirectory(prefix="kubelint-ports-kustomize-") as scratch:
            scratch = os.path.realpath(scratch)  # `..` in the relative path climbs the real directories
            target, origins = os.path.abspath(directory), scratch
            if reads is not None and input_files.PLANNED and any(real in input_files.PLANNED for _, real in reads.named):
                scratch = os.path.join(scratch, "build")
                os.mkdir(scratch)
                target, origins = planned_tree(directory, reads, scratch)
            try:
                relative = os.path.relpath(target, scratch)
            except ValueError:  # another drive (Windows)
                raise KustomizeError("cannot build a directory on another drive than the temporary "
                                     "directory") from None
            with open(os.path.join(scratch, "kustomization.yaml"), "w", encoding="utf-8") as handle:
                handle.write(f"resources:\n- {json.dumps(relative.replace(os.sep, '/'))}\n"
                             "buildMetadata: [originAnnotations]\n")
            return run_build(commands, scratch), origins
    except OSError as error:
        raise KustomizeError(f"cannot prepare the build in a temporary directory: {error.strerror or error}") from None


def planned_tree(directory: str, reads: BuildReads, scratch: str) -> tuple[str, str]:
    """(the copy of `directory` to build, the directory the build's origin paths are then relative
    to). Every file the build reads is copied to its place below `scratch`, as `lint --fix` plans it
    (`files.read_file`), within max-file-mib in all. The tree is laid out as kustomize names its
    files: below the folder holding all of them (`top`), copied to `scratch/<top's name>`, so an
    origin path (relative to `scratch`) joined to `top`'s parent names the user's own file."""
    named = [path for path, _ in reads.named]
    top = os.path.commonpath([os.path.abspath(directory), *named])
    name = os.path.basename(top)
    if not name or name.lower() in ("kustomization.yaml", "kustomization.yml", "kustomization"):
        raise KustomizeError(f"cannot build the fixes planned for it from a copy of {display_path(top)}")
    copy = os.path.join(scratch, name)
    budget = budgets.current().max_file_bytes
    for path in named:
        data = input_files.read_file(path, budget)
        budget -= len(data)
        if budget < 0:
            raise KustomizeError(f"its files are over {budgets.current().max_file_mib} MiB in all, too many to build a "
                                 "copy with the planned fixes (limit max-file-mib)")
        place = os.path.join(copy, os.path.relpath(path, top))
        os.makedirs(os.path.dirname(place), exist_ok=True)
        with open(place, "wb") as handle:
            handle.write(data)
    target = os.path.join(copy, os.path.relpath(os.path.abspath(directory), top))
    os.makedirs(target, exist_ok=True)
    return target, os.path.dirname(top)


def run_build(commands: list[list[str]], scratch: str) -> str:
    """The output of the first command that builds the temporary kustomization in `scratch`."""
    failures = []
    limits = budgets.current()
    for command in commands:
        name = " ".join([os.path.basename(command[0]), *command[1:]])
        try:
            code, output, stderr = run_bounded([*command, scratch], name)
        except OSError as error:
            failures.append(f"cannot run {command[0]}: {error.strerror or error}")
            continue
        if code == 0:
            return output.decode("utf-8", "replace")
        if "buildMetadata" in stderr and "unknown field" in stderr:
            failures.append(f"`{name}` is too old to report where objects come from (origin annotations "
                            f"need {NEEDS})")
            continue
        if "out of memory" in stderr or "cannot allocate memory" in stderr:
            raise KustomizeError(f"`{name}` needed more than {limits.kustomize_memory_mib} MiB (limit "
                                 "kustomize-memory-mib; YAML that expands as kustomize reads it?)")
        raise KustomizeError(kustomize_message(stderr) or f"`{name}` exited with {code}")
    raise KustomizeError("; ".join(failures))


def run_bounded(argv: list[str], name: str) -> tuple[int, bytes, str]:
    """(exit code, output, stderr) of one build in the sandbox, within the budgets."""
    import time

    limits = budgets.current()
    try:
        done = children.run(argv, deadline=time.monotonic() + limits.kustomize_seconds,
                            output_bytes=limits.max_file_bytes, memory_bytes=limits.kustomize_memory_mib * budgets.MIB,
                            sandbox=True)
    except children.TimedOut:
        raise KustomizeError(f"`{name}` took longer than {limits.kustomize_seconds:g} s (limit "
                             "kustomize-seconds)") from None
    except children.OutputOverflow:
        raise KustomizeError(f"`{name}` printed more than {limits.max_file_mib} MiB "
                             "(limit max-file-mib)") from None
    return done.status, done.output, done.errors


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
