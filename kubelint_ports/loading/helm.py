"""Helm charts -> rendered documents whose positions are template lines.

A chart renders with `helm-python-sdk` (Helm's own engine in a native library, no binary needed)
in a worker process (`helm_worker.py`) that is killed at the `helm-seconds` deadline and whose
data size and output are capped; or, without the SDK or with `--helm-binary`, with `helm
template` under the same budgets. Nothing here touches the network nor reads outside the chart:
missing dependencies are an error naming them, and a chart with a values schema referring to
anything but itself, a symlink leaving it, or a FIFO is refused before Helm could follow it.

Importing this module imports neither the SDK nor `subprocess`: only linting a chart (or
`helm template` output) pays for them.
"""

from __future__ import annotations

import json
import os
import re
import stat
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import yaml

from kubelint_ports.findings import Diagnostic, Location
from kubelint_ports.loading import (Document, DocumentReader, LoadResult, SourceText, budgets, display_path, files,
                                     load_bytes)
from kubelint_ports.loading import yamltree as yt
from kubelint_ports.loading.helm_worker import merge_set, merge_values  # noqa: F401 (one copy, shared with the worker)
from kubelint_ports.loading.templatemap import (
    Segment, TemplateSource, ValuesFile, ValuesSource, chart_relative, template_document)

CHART_FILE = "Chart.yaml"
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
# Where `helm-python-sdk` ships wheels (kept in step with pyproject.toml's markers).
SDK_PLATFORMS = "Linux x86_64/aarch64 (glibc 2.28+), macOS arm64, macOS 15+ x86_64, Windows x86_64"
_TEMPLATE_POSITION = re.compile(r"\(?([\w.-]+(?:/[\w.-]+)*?/templates/[^\s:()]+):([0-9]{1,9})(?::([0-9]{1,9}))?")
_SCHEMA_POINTER = re.compile(r"([\w.-]+): - at '(/[^']*)'")  # "<chart>: - at '/a/b': ..." (one line)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True, slots=True)
class HelmOptions:
    """How charts are rendered: `helm template`'s options, plus where `# Source:` paths live."""

    values: tuple[str, ...] = ()  # --values/-f files, in order (later ones win)
    set: tuple[str, ...] = ()  # --set a.b=1,c=2
    set_string: tuple[str, ...] = ()  # --set-string
    release_name: str | None = None  # default: the chart's name
    namespace: str | None = None  # default: Helm's ("default")
    kube_version: str | None = None  # .Capabilities.KubeVersion, e.g. "1.30.0"
    helm_binary: str | None = None  # render with `helm template` from this binary
    chart_root: str | None = None  # the chart directory `helm template` output came from
    include_tests: bool = False  # templates/tests/ and `helm.sh/hook: test` objects


class RenderError(Exception):
    """A chart that cannot be rendered: Helm's message, and where, when Helm says."""

    def __init__(self, message: str, location: Location | None = None):
        super().__init__(message)
        self.location = location


# --- finding charts ------------------------------------------------------------------------------


def is_chart(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, CHART_FILE))


def chart_of_template(path: str) -> str | None:
    """The chart to render instead of a raw template file (`chart/templates/x.yaml`, also inside a
    vendored subchart, whose top chart is rendered), or None for any other file."""
    directory = os.path.dirname(os.path.abspath(path))
    chart = None
    while True:
        if os.path.basename(directory) == "templates" and is_chart(os.path.dirname(directory)):
            chart = os.path.dirname(directory)
            break
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent
    # A subchart in `charts/` renders with its parent.
    while os.path.basename(os.path.dirname(chart)) == "charts" and is_chart(os.path.dirname(os.path.dirname(chart))):
        chart = os.path.dirname(os.path.dirname(chart))
    return os.path.relpath(chart) if not os.path.isabs(path) else chart


def subchart_location(chart_dir: str, names: Sequence[str]) -> tuple[str, str] | None:
    """("dir", path) or ("archive", path) of the subchart reached by `names` from `chart_dir`."""
    current = chart_dir
    for name in names:
        charts = os.path.join(current, "charts")
        found = None
        candidate = os.path.join(charts, name)
        if is_chart(candidate):
            found = ("dir", candidate)
        else:
            wanted = {name, *aliased_names(current, name)}
            try:
                entries = sorted(os.listdir(charts))
            except OSError:
                entries = []
            for entry in entries:
                full = os.path.join(charts, entry)
                if os.path.isdir(full) and is_chart(full) and chart_name(full) in wanted:
                    found = ("dir", full)
                    break
                if entry.endswith(".tgz") and any(re.match(re.escape(w) + r"-v?\d", entry) for w in wanted):
                    found = ("archive", full)
                    break
        if found is None:
            return None
        if found[0] == "archive":  # deeper subcharts are inside the archive too
            return found
        current = found[1]
    return "dir", current


def chart_metadata(chart_dir: str) -> dict:
    """Chart.yaml as plain data (strings), within the budgets; {} when unreadable."""
    try:
        root = budgets.compose(files.read_file(os.path.join(chart_dir, CHART_FILE), budgets.current().max_file_bytes))
        data = yt.to_plain(root)
    except (OSError, yaml.YAMLError, yt.FieldTypeError):
        return {}
    return data if isinstance(data, dict) else {}


def chart_name(chart_dir: str) -> str:
    return str(chart_metadata(chart_dir).get("name") or os.path.basename(os.path.abspath(chart_dir)))


def aliased_names(chart_dir: str, alias: str) -> list[str]:
    """Dependency names declared under `alias` in the chart's Chart.yaml."""
    dependencies = chart_metadata(chart_dir).get("dependencies") or []
    return [str(d.get("name")) for d in dependencies if isinstance(d, dict) and d.get("alias") == alias]


# --- values --------------------------------------------------------------------------------------


def set_keys(expressions: Iterable[str]) -> list[list[Segment]]:
    """The keys `--set a.b[0].c=1,d={x,y}` writes: [["a", "b", 0, "c"], ["d"]]."""
    keys: list[list[Segment]] = []
    for expression in expressions:
        depth, start = 0, 0
        parts = []
        for index, char in enumerate(expression):
            if char == "{":
                depth += 1
            elif char == "}":
                depth = max(0, depth - 1)
            elif char == "," and depth == 0 and (index == 0 or expression[index - 1] != "\\"):
                parts.append(expression[start:index])
                start = index + 1
        parts.append(expression[start:])
        for part in parts:
            name = part.split("=", 1)[0].strip()
            if not name:
                continue
            segments: list[Segment] = []
            for piece in re.split(r"(?<!\\)\.", name):
                match = re.match(r"^([^\[]*)((?:\[\d+\])*)$", piece)
                if not match:
                    segments.append(piece)
                    continue
                if match.group(1):
                    segments.append(match.group(1).replace("\\.", "."))
                segments.extend(int(i) for i in re.findall(r"\[([0-9]{1,9})\]", match.group(2)))
            keys.append(segments)
    return keys


def values_source(chart_dir: str, names: Sequence[str], options: HelmOptions) -> ValuesSource:
    """Where the values of a template in subchart `names` of `chart_dir` come from."""
    prefix = tuple(names)
    layers: list[tuple[ValuesFile, tuple[str, ...]]] = [
        (_values_file(path), prefix) for path in reversed(options.values) if not _URL.match(path)]
    layers.append((_values_file(os.path.join(chart_dir, "values.yaml")), prefix))
    for depth, _ in enumerate(names):
        found = subchart_location(chart_dir, names[:depth + 1])
        if found is None or found[0] != "dir":
            break
        layers.append((_values_file(os.path.join(found[1], "values.yaml")), prefix[depth + 1:]))
    return ValuesSource(layers, set_keys(options.set + options.set_string), prefix)


_VALUES_FILES: dict[tuple, ValuesFile] = {}


def _values_file(path: str) -> ValuesFile:
    """One composed tree per values file, however many templates use it (a changed file is
    composed again: the key holds its modification time and size)."""
    try:
        status = os.stat(path)
        key = (os.path.abspath(path), status.st_mtime_ns, status.st_size)
    except OSError:
        key = (os.path.abspath(path), 0, 0)
    if key not in _VALUES_FILES:
        _VALUES_FILES[key] = ValuesFile(path)
    return _VALUES_FILES[key]


# --- rendering -----------------------------------------------------------------------------------


def in_process_engine():
    """The `helm_python` module, or None when it is not installed or its library does not load."""
    try:
        import helm_python
    except (ImportError, OSError):
        return None
    except Exception as error:  # HelmLibraryError: a wheel for another platform, a broken library
        if type(error).__name__ == "HelmLibraryError":
            return None
        raise
    return helm_python


def find_helm_binary(options: HelmOptions) -> str | None:
    import shutil

    if options.helm_binary:
        return options.helm_binary
    return shutil.which("helm")


def render_chart(chart_dir: str, options: HelmOptions) -> dict[str, str]:
    """{template path (`web/templates/x.yaml`): rendered text}, or RenderError."""
    check_chart_files(chart_dir)
    check_values_files(options)
    if not options.helm_binary:
        worker = render_worker()
        if in_process_engine() is not None:
            manifests = worker.render(chart_dir, options)
            if manifests is not None:
                return manifests
        else:
            worker.stop()
    binary = find_helm_binary(options)
    if binary is None:
        raise RenderError(
            "no Helm engine to render it: install the Helm extra for in-process rendering "
            f"(`pip install 'kubelint-ports[helm]'`; wheels for {SDK_PLATFORMS}), or put a `helm` binary on "
            "PATH (or pass --helm-binary PATH)")
    return render_with_binary(binary, chart_dir, options)


def check_values_files(options: HelmOptions) -> None:
    """Values files are local regular files: never a URL (Helm would fetch it), never a FIFO."""
    for path in options.values:
        if _URL.match(path):
            raise RenderError(f"values file {path}: kubelint-ports reads local files only, never the network")
        try:
            mode = os.stat(path).st_mode
        except OSError as error:
            raise RenderError(f"cannot read values file {display_path(path)}: {error.strerror or error}") from None
        if not stat.S_ISREG(mode):
            raise RenderError(f"values file {display_path(path)} is {files.kind_of(mode)}, not a file to read")


class RenderWorker:
    """The process `helm_worker.py` runs in: started on the first chart of a run, reused for the
    next ones, killed (and started again when needed) when a render outlives `helm-seconds`,
    outgrows `helm-memory-mib`, or its answer outgrows `helm-output-mib`."""

    def __init__(self) -> None:
        self.process = None
        self.errors = None  # the worker's stderr: Go's reason when it dies

    def start(self) -> None:
        import subprocess
        import sys
        import tempfile

        limits = budgets.current()
        self.errors = tempfile.TemporaryFile()
        environment = {**os.environ, "GOTRACEBACK": "single"}
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "helm_worker.py"),
             str(limits.helm_memory_mib * budgets.MIB)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors, env=environment)

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                stream.close()
            self.process = None
        if self.errors is not None:
            self.errors.close()
            self.errors = None

    def render(self, chart_dir: str, options: HelmOptions) -> dict[str, str] | None:
        """The rendered chart; None when the worker has no engine (the SDK does not load here)."""
        import time

        limits = budgets.current()
        request = {"chart": os.path.abspath(chart_dir), "values": [os.path.abspath(v) for v in options.values],
                   "set": list(options.set), "set_string": list(options.set_string),
                   "release_name": options.release_name, "namespace": options.namespace,
                   "kube_version": options.kube_version, "max_file_bytes": limits.max_file_bytes,
                   "max_output_bytes": limits.helm_output_mib * budgets.MIB}
        deadline = time.monotonic() + limits.helm_seconds
        # JSON may escape every character of the output (\u0000): 6 bytes each, at most.
        cap = 6 * request["max_output_bytes"] + budgets.MIB
        finished = False
        try:
            if self.process is None:
                self.start()
                hello = self.answer(deadline, budgets.MIB)
                if "ready" not in hello:
                    self.stop()
                    return None
            self.process.stdin.write(json.dumps(request).encode("utf-8") + b"\n")
            self.process.stdin.flush()
            answer = self.answer(deadline, cap)
            finished = True
        except BrokenPipeError:
            raise self.died() from None
        finally:
            if not finished:
                self.stop()
        if "manifests" in answer:
            return answer["manifests"]
        raise worker_failure(answer, chart_dir, options)

    def answer(self, deadline: float, cap: int) -> dict:
        """One line from the worker, within the deadline and the size cap."""
        try:
            if os.name == "nt":  # select() takes only sockets there: a thread reads instead
                line = read_line_in_thread(self.process.stdout, deadline, cap)
            else:
                line = read_line(self.process.stdout.fileno(), deadline, cap)
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
        self.process.wait()
        self.errors.seek(0)
        reason = self.errors.read(budgets.MIB).decode("utf-8", "replace")
        if "out of memory" in reason or "cannot allocate memory" in reason or "MemoryError" in reason:
            return RenderError(f"rendering needed more than {budgets.current().helm_memory_mib} MiB "
                               "(limit helm-memory-mib; a template building a huge string?)")
        last = next((line for line in reason.splitlines() if line.strip()), "")[:300]
        return RenderError(f"the Helm engine stopped (exit {self.process.returncode}){': ' + last if last else ''}")


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
        return RenderError(f"not a loadable chart: {one_line(message)}")
    if kind == "missing":
        return RenderError(
            f"missing dependencies: {message}: declared in Chart.yaml but not in charts/; "
            f"run `helm dependency build {display_path(chart_dir)}` (kubelint-ports never downloads them)")
    if kind == "values-file":
        path, _, error = message.partition("\0")
        return RenderError(f"values file {display_path(path)}: {one_line(error)}")
    if kind == "release":
        return RenderError(f"release name {options.release_name!r}: {one_line(message)}")
    if kind == "render":
        return render_failure(message, chart_dir, options)
    if kind == "output":
        return RenderError(f"the rendered output is over {budgets.current().helm_output_mib} MiB "
                           "(limit helm-output-mib)")
    if kind == "memory":
        return RenderError(f"rendering needed more than {budgets.current().helm_memory_mib} MiB "
                           "(limit helm-memory-mib)")
    return RenderError(one_line(message) or f"the Helm engine failed ({kind})")


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


def render_with_binary(binary: str, chart_dir: str, options: HelmOptions) -> dict[str, str]:
    """`helm template`, within the same budgets as the embedded engine: deadline, output cap and
    (on POSIX) the data size of the process."""
    import subprocess
    import tempfile
    import time

    limits = budgets.current()
    command = helm_template_command(binary, chart_dir, options.release_name or chart_name(chart_dir), options)
    deadline = time.monotonic() + limits.helm_seconds
    with tempfile.TemporaryFile() as errors:
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors,
                                       preexec_fn=memory_limiter(limits.helm_memory_mib * budgets.MIB))
        except OSError as error:
            raise RenderError(f"cannot run {binary}: {error.strerror or error}") from None
        try:
            output = files.read_stream(process.stdout.fileno(), limits.helm_output_mib * budgets.MIB, deadline)
            if len(output) > limits.helm_output_mib * budgets.MIB:
                raise OverflowError()
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except (files.InputTimeout, subprocess.TimeoutExpired):
            raise RenderError(f"`helm template` took longer than {limits.helm_seconds:g} s (limit helm-seconds)") from None
        except OverflowError:
            raise RenderError(f"`helm template` printed more than {limits.helm_output_mib} MiB "
                              "(limit helm-output-mib)") from None
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
            process.stdout.close()
        errors.seek(0)
        stderr = errors.read(1 << 20).decode("utf-8", "replace")
    if process.returncode != 0:
        message = stderr.strip() or f"`helm template` exited with {process.returncode}"
        raise render_failure(re.sub(r"^Error: ", "", message), chart_dir, options)
    return split_template_output(output.decode("utf-8", "replace"))


def memory_limiter(limit: int):
    """A preexec_fn capping the child's data size (Go reports "out of memory" and stops)."""
    try:
        import resource
    except ImportError:
        return None

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    return apply


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
    message = one_line(message)
    position = _TEMPLATE_POSITION.search(message)
    if position:
        relative, names = chart_relative(position.group(1))
        found = subchart_location(chart_dir, names) if names else ("dir", chart_dir)
        if found and found[0] == "dir" and os.path.isfile(os.path.join(found[1], relative)):
            return RenderError(message, Location(display_path(os.path.join(found[1], relative)),
                                                 int(position.group(2)), int(position.group(3) or 1)))
    pointer = _SCHEMA_POINTER.search(message)
    if pointer:
        segments: list[Segment] = [int(p) if re.fullmatch("[0-9]{1,9}", p) else p.replace("~1", "/").replace("~0", "~")
                                   for p in pointer.group(2).split("/")[1:]]
        names = () if pointer.group(1) == chart_name(chart_dir) else (pointer.group(1),)
        location = values_source(chart_dir, names, options).locate(segments) if segments else None
        if location is not None:
            return RenderError(message, location)
    return RenderError(message)


MAX_ARCHIVE_MEMBERS = 10_000
MAX_NESTED_ARCHIVES = 4


def check_chart_files(chart_dir: str) -> None:
    """Refuse a chart Helm would make read or fetch something outside it: a symlink leaving the
    chart (or looping inside it), a FIFO or device (Helm would block on it), a values schema
    referring to anything but itself, an archived subchart with links or such a schema."""
    root = os.path.realpath(chart_dir)
    for directory, subdirs, entries, notes in files.walk_tree(chart_dir, budgets.current().max_depth):
        if notes:
            raise RenderError(notes[0])
        for name in list(subdirs):
            if os.path.islink(os.path.join(directory, name)):  # walk_tree lists links with files
                subdirs.remove(name)
        for entry in entries:
            shown = display_path(entry.path)
            if entry.is_symlink():
                target = os.path.realpath(entry.path)
                if not files.inside(root, entry.path):
                    raise RenderError(f"{shown} is a symlink to {target}, outside the chart: "
                                      "Helm would read it; kubelint-ports reads nothing outside its inputs")
                if os.path.isdir(target) and files.inside(target, directory):
                    raise RenderError(f"{shown} is a symlink to its own parent directory: Helm would walk it forever")
            try:
                mode = os.stat(entry.path).st_mode
            except OSError as error:
                raise RenderError(f"{shown}: {error.strerror or error}") from None
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise RenderError(f"{shown} is {files.kind_of(mode)}: Helm would block reading it")
            if entry.name == "values.schema.json":
                problem = schema_problem(read_limited(entry.path))
                if problem:
                    raise RenderError(f"{shown} {problem}")
            elif entry.name.endswith(".tgz") and os.path.basename(directory) == "charts":
                problem = archive_problem(entry.path)
                if problem:
                    raise RenderError(f"{shown}: {problem}")


def read_limited(path: str) -> bytes:
    try:
        return files.read_file(path, budgets.current().max_file_bytes)
    except OSError as error:
        raise RenderError(f"{display_path(path)}: {error.strerror or error}") from None


def schema_problem(data: bytes) -> str | None:
    """Why Helm must not validate with this values schema (`files.schema_reference_problem`)."""
    try:
        schema = json.loads(data)
    except RecursionError:
        return "is nested too deeply to check (limit max-depth)"
    except ValueError:
        return None  # Helm reports an unreadable schema itself
    problem = files.schema_reference_problem(schema, budgets.current().max_depth)
    return problem.replace("a validator", "Helm") if problem else None


def archive_problem(path, nesting: int = 0) -> str | None:
    """Why a packaged subchart (`charts/*.tgz`) must not be rendered: links or paths leaving the
    archive, a remote values schema inside, or more data than the budgets (a decompression bomb)."""
    import io
    import tarfile

    limit = budgets.current().max_file_bytes
    total = 0
    try:
        opened = tarfile.open(path, mode="r:*") if isinstance(path, str) else tarfile.open(fileobj=path, mode="r:*")
        with opened as archive:
            for count, member in enumerate(archive):
                if count > MAX_ARCHIVE_MEMBERS:
                    return f"more than {MAX_ARCHIVE_MEMBERS:,} members"
                parts = member.name.split("/")
                if member.issym() or member.islnk() or member.name.startswith("/") or ".." in parts:
                    return f"member {member.name!r} is a link or leaves the archive; not rendered"
                if not (member.isfile() or member.isdir()):
                    return f"member {member.name!r} is not a file"
                total += member.size
                if member.size > limit or total > limit:
                    return f"more than {limit // budgets.MIB} MiB once unpacked (limit max-file-mib)"
                if member.isfile() and (parts[-1] == "values.schema.json" or parts[-1].endswith(".tgz")):
                    data = archive.extractfile(member).read()
                    if parts[-1] == "values.schema.json":
                        problem = schema_problem(data)
                        if problem:
                            return f"{member.name} {problem}"
                    elif nesting < MAX_NESTED_ARCHIVES:
                        problem = archive_problem(io.BytesIO(data), nesting + 1)
                        if problem:
                            return f"{member.name}: {problem}"
                    else:
                        return f"archives nested deeper than {MAX_NESTED_ARCHIVES} levels"
    except (OSError, tarfile.TarError, EOFError, ValueError, zlib_error()) as error:
        return f"not a readable chart archive ({error})"
    return None


def zlib_error():
    import zlib

    return zlib.error


def one_line(message: str) -> str:
    return re.sub(r"\s*\n\s*", " ", message.strip())


# --- loading -------------------------------------------------------------------------------------


def load_chart(chart_dir: str, options: HelmOptions | None, result: LoadResult,
               reader: DocumentReader | None = None) -> None:
    """Render a chart and add its objects, positioned on template lines, to `result`."""
    options = options or HelmOptions()
    shown = display_path(chart_dir)
    try:
        manifests = render_chart(chart_dir, options)
    except RenderError as error:
        result.files += 1
        where = error.location or Location(shown, 0, 0)
        result.diagnostics.append(Diagnostic(where, f"cannot render Helm chart {shown}: {error}"))
        return
    add_rendered(manifests, chart_dir, options, result, reader)


def add_rendered(manifests: dict[str, str], chart_dir: str, options: HelmOptions, result: LoadResult,
                 reader: DocumentReader | None = None) -> None:
    for origin in sorted(manifests):
        text = manifests[origin]
        if not is_manifest(origin, options) or not text.strip():
            continue
        source = template_source(chart_dir, origin, options)
        rendered = LoadResult()
        data = text.encode("utf-8")
        wrap = TemplateWrapper(source, origin, options)
        # The rendered text is kept: positions compose it again when findings need them.
        load_bytes(data, source.path, rendered, reader=reader, source=SourceText(data=data, digest=zlib.crc32(data)),
                   wrap=wrap, finish=wrap.finish)
        result.files += 1
        result.skipped += rendered.skipped
        for diagnostic in rendered.diagnostics:
            line = diagnostic.location.line
            result.diagnostics.append(Diagnostic(
                Location(source.path, 0, 0),
                f"{origin} renders to invalid Kubernetes YAML (line {line} of its output): {diagnostic.message}"))
        result.documents += rendered.documents


class TemplateWrapper:
    """Rendered documents of one template -> TemplateDocuments (test hooks dropped), numbered."""

    def __init__(self, source: TemplateSource, origin: str, options: HelmOptions):
        self.source, self.origin, self.options = source, origin, options
        self.count = 0

    def __call__(self, document: Document) -> Document | None:
        ordinal = self.count
        self.count += 1
        if not self.options.include_tests and is_test_hook(document):
            return None
        placed = template_document(document, self.source.path, self.origin, self.source, ordinal)
        placed.namespace = self.options.namespace or ""
        return placed

    def finish(self) -> None:
        self.source.rendered_count = self.count


def is_manifest(origin: str, options: HelmOptions) -> bool:
    """YAML outputs only: not NOTES.txt, partials or other files, nor tests/ unless asked."""
    base = origin.rsplit("/", 1)[-1]
    if base.startswith("_") or not base.endswith(MANIFEST_SUFFIXES):
        return False
    relative, _ = chart_relative(origin)
    return options.include_tests or not relative.startswith("templates/tests/")


def is_test_hook(document: Document) -> bool:
    hook = (document.annotations or {}).get("helm.sh/hook")
    if hook is None:
        return False
    return any(part.strip() in ("test", "test-success") for part in hook.split(","))


def template_source(chart_dir: str, origin: str, options: HelmOptions) -> TemplateSource:
    """Where a `# Source:` path's template is: only ever a regular file inside the chart (a path
    with `..`, or one leaving the chart through a symlink, has no lines to open)."""
    relative, names = chart_relative(origin)
    if any(part in ("", ".", "..") for part in origin.split("/")):
        return TemplateSource(display_path(chart_dir), None, None)
    found = subchart_location(chart_dir, names) if names else ("dir", chart_dir)
    values = values_source(chart_dir, names, options)
    if found is None:
        return TemplateSource(display_path(os.path.join(chart_dir, *origin.split("/")[1:])), None, values)
    kind, location = found
    if kind == "archive":  # the origin below the archived chart's own name is its path inside
        parts = origin.split("/")
        depth = next(k for k in range(1, len(names) + 1) if subchart_location(chart_dir, names[:k])[0] == "archive")
        inside = "/".join(parts[1 + 2 * depth:])
        return TemplateSource(display_path(location), None, values, member=(location, inside))
    file = os.path.join(location, *relative.split("/"))
    if not (files.inside(chart_dir, file) and os.path.isfile(file)):
        return TemplateSource(display_path(file), None, values)
    return TemplateSource(display_path(file), file, values)


# --- `helm template` output read as manifests --------------------------------------------------


class TemplateOutput:
    """Documents of `helm template` output (`# Source:` comments), one file's worth, positioned on
    the templates of the chart at --chart-root (or the current directory, or `./<chart name>`),
    when found there. `finish` tells each template how many objects it rendered."""

    def __init__(self, options: HelmOptions | None):
        self.options = options or HelmOptions()
        self.sources: dict[str, TemplateSource | None] = {}
        self.counts: dict[str, int] = {}

    def __call__(self, document: Document) -> Document:
        origin = document.origin
        if not origin or "/" not in origin:
            return document
        if origin not in self.sources:
            self.sources[origin] = output_source(origin, self.options)
        source = self.sources[origin]
        ordinal = self.counts.get(origin, 0)
        self.counts[origin] = ordinal + 1
        if source is None:
            return document
        return template_document(document, source.path, origin, source, ordinal)

    def finish(self) -> None:
        for origin, source in self.sources.items():
            if source is not None:
                source.rendered_count = self.counts[origin]


def output_source(origin: str, options: HelmOptions) -> TemplateSource | None:
    chart_dir = chart_root_for(origin.split("/")[0], options)
    if chart_dir is None:
        return None
    source = template_source(chart_dir, origin, options)
    if source.file is None or not os.path.isfile(source.file):
        return None
    return source


def chart_root_for(name: str, options: HelmOptions) -> str | None:
    if options.chart_root:
        return options.chart_root if is_chart(options.chart_root) else None
    for candidate in (os.curdir, name):
        if is_chart(candidate) and chart_name(candidate) == name:
            return candidate
    return None


__all__ = ["HelmOptions", "RenderError", "is_chart", "chart_of_template", "load_chart",
           "render_chart", "helm_template_command", "split_template_output"]
