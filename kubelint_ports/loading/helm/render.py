"""Running Helm: the render worker (`helm/worker.py`, the in-process engine in a process of its
own) and `helm template`, each within the budgets (deadline, memory, output size), and Helm's
failures turned into errors placed where Helm says. Both are started as every child is
(`children`): an environment of our making (Helm's directories empty, no plugin), in a network
namespace where one can be made, their process group killed when they end or overrun; the
worker as `python -I -S` in a private directory.

Importing this module imports neither the SDK nor `subprocess`: only rendering pays for them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from kubelint_ports.loading import budgets, children, files
from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading.helm.archive import ChartArchive, private_copy
from kubelint_ports.loading.helm.chart import HelmOptions, RenderError, chart_name, chart_places, values_source
from kubelint_ports.loading.helm.templatemap import chart_relative
from kubelint_ports.loading.helm.templatemap_values import Segment
from kubelint_ports.vocabulary import Location

_TEMPLATE_POSITION = re.compile(r"\(?([\w.-]+(?:/[\w.-]+)*?/templates/[^\s:()]+):([0-9]{1,9})(?::([0-9]{1,9}))?")
_SCHEMA_POINTER = re.compile(r"([\w.-]+): - at '(/[^']*)'")  # "<chart>: - at '/a/b': ..." (one line)


class RenderWorker:
    """The process `helm/worker.py` runs in: started on the first chart of a run, reused for the
    next ones, killed (and started again when needed) when a render outlives `helm-seconds`,
    outgrows `helm-memory-mib`, or its answer outgrows `helm-output-mib`."""

    def __init__(self) -> None:
        self.child: children.Child | None = None

    def start(self, deadline: float | None = None) -> None:
        limits = budgets.current()
        memory = limits.helm_memory_mib * budgets.MIB
        worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
        # It writes its error output and, for a chart whose schemas are made local, Helm's archive
        # of the chart (refused past max-file-mib when read back).
        try:
            self.child = children.start(children.PythonScript(worker, (str(memory),)), memory_bytes=memory,
                                        file_bytes=limits.max_file_bytes + budgets.MIB, sandbox=True,
                                        stdin_pipe=True, deadline=deadline)
        except children.TimedOut:
            raise RenderError(f"the Helm engine did not start within {limits.helm_seconds:g} s (limit "
                              "helm-seconds)") from None

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None

    def render(self, chart_dir: str, options: HelmOptions, local_schemas: bool = False,
               archive: ChartArchive | None = None) -> dict[str, str] | None:
        """The rendered chart; None when the worker has no engine (the SDK does not load here).
        `local_schemas`: a values schema refers outside itself, Helm validates against a copy
        made local (`worker.local_schema`). `archive`: the packaged chart `chart_dir` names,
        as checked; Helm loads a private copy of it."""
        if archive is not None:
            with private_copy(archive.data, chart_dir) as copy:
                return self.request(copy, chart_dir, options, local_schemas)
        return self.request(chart_dir, chart_dir, options, local_schemas)

    def request(self, chart: str, chart_dir: str, options: HelmOptions, local_schemas: bool) -> dict[str, str] | None:
        """Render the chart at `chart` (`chart_dir`, or the private copy of its archive)."""
        import time

        limits = budgets.current()
        request = {"chart": os.path.abspath(chart), "values": [os.path.abspath(v) for v in options.values],
                   "set": list(options.set), "set_string": list(options.set_string),
                   "release_name": options.release_name, "namespace": options.namespace,
                   "kube_version": options.kube_version, "max_file_bytes": limits.max_file_bytes,
                   "max_output_bytes": limits.helm_output_mib * budgets.MIB,
                   "local_schemas": local_schemas, "known_meta_schemas": sorted(files.KNOWN_META_SCHEMAS)}
        deadline = time.monotonic() + limits.helm_seconds
        # JSON may escape every character of the output (\u0000): 6 bytes each, at most.
        cap = 6 * request["max_output_bytes"] + budgets.MIB
        finished = False
        try:
            if self.child is None:
                self.start(deadline)
                hello = self.answer(deadline, budgets.MIB)
                if "ready" not in hello:
                    self.stop()
                    return None
            self.child.stdin.write(json.dumps(request).encode("utf-8") + b"\n")
            self.child.stdin.flush()
            answer = self.answer(deadline, cap)
            finished = True
        except BrokenPipeError:
            raise self.died() from None
        finally:
            if not finished:
                self.stop()
        if "manifests" in answer:
            return answer["manifests"]
        if chart != chart_dir:  # Helm names the copy it read: name what the user did
            answer["message"] = str(answer.get("message", "")).replace(os.path.abspath(chart), display_path(chart_dir))
        raise worker_failure(answer, chart_dir, options)

    def answer(self, deadline: float, cap: int) -> dict:
        """One line from the worker, within the deadline and the size cap."""
        try:
            if os.name == "nt":  # select() takes only sockets there: a thread reads instead
                line = read_line_in_thread(self.child.stdout, deadline, cap)
            else:
                line = read_line(self.child.stdout.fileno(), deadline, cap)
        except files.InputTimeout:
            raise RenderError(f"rendering took longer than {budgets.current().helm_seconds:g} s (limit helm-seconds; "
                              "a template that never ends?)") from None
        except OverflowError:
            raise RenderError(f"the rendered output is over {budgets.current().helm_output_mib} MiB "
                              "(limit helm-output-mib)") from None
        if not line.endswith(b"\n"):
            raise self.died()
        return json.loads(line)

    def died(self) -> RenderError:
        """Why the worker stopped answering: its error output once it has ended."""
        import time

        self.child.wait(time.monotonic() + 5)  # its output closed: it is ending
        reason = self.child.error_text(budgets.MIB)
        status = self.child.stop()
        self.child = None
        if "out of memory" in reason or "cannot allocate memory" in reason or "MemoryError" in reason:
            return RenderError(f"rendering needed more than {budgets.current().helm_memory_mib} MiB "
                               "(limit helm-memory-mib; a template building a huge string?)")
        last = next((line for line in reason.splitlines() if line.strip()), "")[:300]
        return RenderError(f"the Helm engine stopped (exit {status}){': ' + last if last else ''}")


def read_line(descriptor: int, deadline: float, cap: int) -> bytes:
    """Bytes up to and including a newline (or the end of the stream); InputTimeout past the
    deadline, OverflowError past `cap` bytes."""
    import select
    import time

    chunks: list[bytes] = []
    size = 0
    while True:
        wait = deadline - time.monotonic()
        if wait <= 0:
            raise files.InputTimeout()
        ready, _, _ = select.select([descriptor], [], [], wait)
        if not ready:
            continue
        chunk = os.read(descriptor, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(chunks)
        if size > cap:
            raise OverflowError()


def read_line_in_thread(stream, deadline: float, cap: int) -> bytes:
    """`read_line` where pipes cannot be polled: the worker is killed on expiry, which ends the read."""
    import threading
    import time

    result: list[bytes] = []
    reader = threading.Thread(target=lambda: result.append(stream.readline(cap + 1)), daemon=True)
    reader.start()
    reader.join(max(0.0, deadline - time.monotonic()))
    if reader.is_alive():
        raise files.InputTimeout()
    line = result[0] if result else b""
    if len(line) > cap:
        raise OverflowError()
    return line


_WORKER: list[RenderWorker] = []


def render_worker() -> RenderWorker:
    if not _WORKER:
        import atexit

        _WORKER.append(RenderWorker())
        atexit.register(_WORKER[0].stop)
    return _WORKER[0]


def worker_failure(answer: dict, chart_dir: str, options: HelmOptions) -> RenderError:
    kind, message = answer.get("error"), str(answer.get("message", ""))
    if kind == "load":
        return RenderError(f"not a loadable chart: {files.one_line(message)}")
    if kind == "missing" and os.path.isfile(chart_dir):
        return RenderError(f"missing dependencies: {message}: declared in Chart.yaml but not in the archive's "
                           "charts/; package it again after `helm dependency build` (kubelint-ports never "
                           "downloads them)")
    if kind == "missing":
        return RenderError(
            f"missing dependencies: {message}: declared in Chart.yaml but not in charts/; "
            f"run `helm dependency build {display_path(chart_dir)}` (kubelint-ports never downloads them)")
    if kind == "values-file":
        path, _, error = message.partition("\0")
        return RenderError(f"values file {display_path(path)}: {files.one_line(error)}")
    if kind == "local-schema":
        return RenderError(f"cannot make the values schemas local to validate offline: {files.one_line(message)}")
    if kind == "release":
        return RenderError(f"release name {options.release_name!r}: {files.one_line(message)}")
    if kind == "render":
        return render_failure(message, chart_dir, options)
    if kind == "output":
        return RenderError(f"the rendered output is over {budgets.current().helm_output_mib} MiB "
                           "(limit helm-output-mib)")
    if kind == "memory":
        return RenderError(f"rendering needed more than {budgets.current().helm_memory_mib} MiB "
                           "(limit helm-memory-mib)")
    return RenderError(files.one_line(message) or f"the Helm engine failed ({kind})")


def helm_template_command(binary: str, chart_dir: str, release_name: str, options: HelmOptions) -> list[str]:
    """`helm template` with the same options; never `--dependency-update` (no network)."""
    chart = chart_dir if not chart_dir.startswith("-") else os.path.join(".", chart_dir)
    command = [binary, "template", release_name, chart]
    if options.namespace:
        command += ["--namespace", options.namespace]
    if options.kube_version:
        command += ["--kube-version", options.kube_version]
    for path in options.values:
        command += ["--values", path]
    for expression in options.set:
        command += ["--set", expression]
    for expression in options.set_string:
        command += ["--set-string", expression]
    if not options.include_tests:
        command.append("--skip-tests")
    return command


def render_with_binary(binary: str, chart_dir: str, options: HelmOptions, local_schemas: bool = False,
                       archive: ChartArchive | None = None, copy: str | None = None) -> dict[str, str]:
    """`helm template`, within the same budgets as the embedded engine: deadline, output cap and
    (on POSIX) the data size of the process. With `local_schemas` the chart is first packaged by
    `helm package` (Helm's own reading of it) and its values schemas made local in the archive,
    which is what `helm template` renders: Helm never sees a reference it would fetch. `archive`:
    the packaged chart `chart_dir` names, as checked; a private copy of it is rendered. `copy`: a
    private copy of the chart directory to render instead (`planned_chart`)."""
    import tempfile
    import time

    limits = budgets.current()
    deadline = time.monotonic() + limits.helm_seconds
    name = options.release_name or (archive.name if archive is not None else chart_name(chart_dir))
    with tempfile.TemporaryDirectory(prefix="kubelint-ports-chart-") as directory:
        if archive is not None:
            chart = write_private(directory, os.path.basename(chart_dir), local_schema_bytes(archive.data)
                                  if local_schemas else archive.data)
        elif local_schemas:
            chart = local_schema_package(binary, copy or chart_dir, directory, deadline)
        else:
            chart = copy or chart_dir
        command = helm_template_command(binary, chart, name, options)
        status, output, stderr = run_helm(binary, command, deadline, limits.helm_output_mib * budgets.MIB)
    for read in {chart, copy} - {None, chart_dir}:  # Helm names the copy it read: name what the user did
        stderr = stderr.replace(read, display_path(chart_dir))
    if status != 0:
        message = stderr.strip() or f"`helm template` exited with {status}"
        raise render_failure(re.sub(r"^Error: ", "", message), chart_dir, options)
    return split_template_output(output.decode("utf-8", "replace"))


def local_schema_package(binary: str, chart_dir: str, directory: str, deadline: float) -> str:
    """`helm package` the chart into `directory`, then write beside it the archive `helm template`
    renders: every values schema in it made local (`worker.local_schema`)."""
    chart = chart_dir if not chart_dir.startswith("-") else os.path.join(".", chart_dir)
    status, _, stderr = run_helm(binary, [binary, "package", chart, "--destination", directory], deadline, budgets.MIB)
    archives = sorted(name for name in os.listdir(directory) if name.endswith(".tgz"))
    if status != 0 or len(archives) != 1:
        message = re.sub(r"^Error: ", "", stderr.strip()) or f"`helm package` exited with {status}"
        raise RenderError(f"cannot package the chart to validate its values schema offline: {files.one_line(message)}")
    limit = budgets.current().max_file_bytes
    try:
        data = files.read_file(os.path.join(directory, archives[0]), limit)
        if len(data) > limit:
            raise ValueError(f"the packaged chart is over {limit // budgets.MIB} MiB (limit max-file-mib)")
    except (OSError, ValueError) as error:
        raise RenderError(f"cannot make the values schemas local to validate offline: {error}") from None
    return write_private(directory, "local-" + archives[0], local_schema_bytes(data))


def local_schema_bytes(data: bytes) -> bytes:
    """A chart archive with its values schemas made local (`worker.local_schema_archive`)."""
    from kubelint_ports.loading.helm.worker import local_schema_archive

    try:
        return local_schema_archive(data, files.KNOWN_META_SCHEMAS, budgets.current().max_file_bytes)
    except (ValueError, EOFError) as error:
        raise RenderError(f"cannot make the values schemas local to validate offline: {error}") from None


def write_private(directory: str, name: str, data: bytes) -> str:
    path = os.path.join(directory, name)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def run_helm(binary: str, command: list[str], deadline: float, cap: int) -> tuple[int, bytes, str]:
    """(exit status, stdout, stderr) of a Helm command, within the deadline, `cap` bytes of
    output and the memory budget (RenderError past them)."""
    limits = budgets.current()
    what = f"`helm {command[1]}`"
    try:
        # In the working directory: Helm reads the chart and values files by the paths the user
        # typed (and names them so in its messages); nothing else of it (no configuration there).
        # `helm package` writes the chart's archive, refused past max-file-mib when read back.
        done = children.run(command, deadline=deadline, output_bytes=cap,
                            memory_bytes=limits.helm_memory_mib * budgets.MIB,
                            file_bytes=limits.max_file_bytes + budgets.MIB, sandbox=True, cwd=os.getcwd())
    except children.TimedOut:
        raise RenderError(f"{what} took longer than {limits.helm_seconds:g} s (limit helm-seconds)") from None
    except children.OutputOverflow:
        raise RenderError(f"{what} printed more than {cap // budgets.MIB} MiB (limit helm-output-mib)") from None
    except OSError as error:
        raise RenderError(f"cannot run {binary}: {error.strerror or error}") from None
    return done.status, done.output, done.errors


def split_template_output(text: str) -> dict[str, str]:
    """`helm template` output -> {`# Source:` path: its documents, `---` between them}."""
    manifests: dict[str, list[str]] = {}
    for chunk in re.split(r"(?m)^---[ \t]*\r?$", text):
        match = re.match(r"\s*# Source: ([^\r\n]+?)[ \t]*\r?\n", chunk)
        if not match or not chunk[match.end():].strip():
            continue
        manifests.setdefault(match.group(1), []).append(chunk[match.end():])
    return {origin: "---\n".join(parts) for origin, parts in manifests.items()}


def render_failure(message: str, chart_dir: str, options: HelmOptions) -> RenderError:
    """Helm's message, placed at the template line it names or the values key the schema rejects."""
    message = files.one_line(message)
    position = _TEMPLATE_POSITION.search(message)
    if position:
        relative, names = chart_relative(position.group(1))
        places = chart_places(chart_dir, names)
        shown = None
        if len(places) == len(names) + 1 and isinstance(places[-1], str):
            file = os.path.join(places[-1], relative)
            shown = display_path(file) if os.path.isfile(file) else None
        elif len(places) == len(names) + 1:
            found = places[-1].file(relative)
            shown = found[0] if found is not None else None
        if shown is not None:
            return RenderError(message, Location(shown, int(position.group(2)), int(position.group(3) or 1)))
    pointer = _SCHEMA_POINTER.search(message)
    if pointer:
        segments: list[Segment] = [int(p) if re.fullmatch("[0-9]{1,9}", p) else p.replace("~1", "/").replace("~0", "~")
                                   for p in pointer.group(2).split("/")[1:]]
        names = () if pointer.group(1) == chart_name(chart_dir) else (pointer.group(1),)
        location = values_source(chart_dir, names, options).locate(segments) if segments else None
        if location is not None:
            return RenderError(message, location)
    return RenderError(message)



# --- rendering what `lint --fix` planned ----------------------------------------------------------


@contextmanager
def planned_chart(chart_dir: str, options: HelmOptions, roots: Sequence[str]) -> Iterator[tuple[str | None, HelmOptions]]:
    """(a private copy of the chart to render, or None for the chart itself; the options with each
    values file `lint --fix` has planned bytes for replaced by a private copy of those bytes).

    While `--fix` works out its plan (`fixes.apply`), a file it changed reads as its planned bytes
    (`files.PLANNED`); Helm reads the chart and the values files from disk, so it renders a copy
    with them substituted, and the plan's next pass sees what the fixes make of the chart. The
    copy holds what Helm reads: the chart's files, a symlink's target copied in its place (the
    chart checks let only links inside `roots` through), within the budgets (`copy_chart`).
    Outside a plan, or when nothing planned is the chart's or its values', nothing is copied."""
    planned = files.PLANNED
    values = [os.path.realpath(path) for path in options.values]
    touched = bool(planned) and not os.path.isfile(chart_dir) and any(
        any(files.inside(os.path.realpath(root), path) for root in roots) for path in planned)
    if not planned or not (touched or any(real in planned for real in values)):
        yield None, options
        return
    import dataclasses
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kubelint-ports-planned-") as directory:
        copy = None
        if touched:
            copy = os.path.join(directory, "chart", os.path.basename(os.path.abspath(chart_dir)))
            if not copy_chart(chart_dir, copy):  # no file of the chart is planned: render it as it is
                copy = None
        substituted = []
        for number, (path, real) in enumerate(zip(options.values, values)):
            if real in planned:
                substituted.append(write_private(makedirs(os.path.join(directory, "values", str(number))),
                                                 os.path.basename(path), planned[real]))
            else:
                substituted.append(path)
        try:
            yield copy, dataclasses.replace(options, values=tuple(substituted))
        except RenderError as error:  # name the values files the user did, not their copies
            message = str(error)
            for path, private in zip(options.values, substituted):
                message = message.replace(os.path.abspath(private), display_path(path)).replace(private, display_path(path))
            raise RenderError(message, error.location) from None


def makedirs(directory: str) -> str:
    os.makedirs(directory)
    return directory


def copy_chart(chart_dir: str, copy: str) -> bool:
    """Copy the chart directory to `copy`, each file read as the plan has it (`files.read_file`),
    a symlink followed (to a file or a directory, each copied in its place); whether any file
    copied is planned. Bounded as reading the chart is: max-depth levels, max-file-mib a file and
    in all (a chart is small), and a directory linked into itself is not entered again."""
    limits = budgets.current()
    budget = limits.max_file_bytes
    planned_any = False
    pending = [(chart_dir, copy, 0, (os.path.realpath(chart_dir),))]
    while pending:
        source, target, depth, ancestors = pending.pop()
        os.makedirs(target, exist_ok=True)
        if depth > limits.max_depth:
            raise RenderError(f"{display_path(source)} is nested deeper than {limits.max_depth} levels (limit max-depth)")
        with os.scandir(source) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
        for entry in entries:
            real = os.path.realpath(entry.path)
            if entry.is_dir():  # a symlinked directory too: Helm follows it
                if real not in ancestors:  # a link to its own parent: the chart checks refused it
                    pending.append((entry.path, os.path.join(target, entry.name), depth + 1, (*ancestors, real)))
                continue
            try:
                data = files.read_file(entry.path, budget)
            except OSError as error:
                raise RenderError(f"{display_path(entry.path)}: {error.strerror or error}") from None
            budget -= len(data)
            if budget < 0:
                raise RenderError(f"the chart is over {limits.max_file_mib} MiB, too big to render a copy with "
                                  "the planned fixes (limit max-file-mib)")
            planned_any = planned_any or real in files.PLANNED
            write_private(target, entry.name, data)
    return planned_any
