"""Helm charts -> rendered documents whose positions are template lines.

A chart renders in-process with `helm-python-sdk` (Helm's own engine in a native library, no
binary needed) or, without it or with `--helm-binary`, with `helm template`. Nothing here touches
the network: missing dependencies are an error naming them, and a values schema that refers to a
remote schema is refused before Helm could fetch it.

Importing this module imports neither the SDK nor `subprocess`: only linting a chart (or
`helm template` output) pays for them.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import yaml

from kubelint_ports.findings import Diagnostic, Location
from kubelint_ports.loading import Document, DocumentReader, LoadResult, SourceText, display_path, load_bytes
from kubelint_ports.loading.templatemap import (
    Segment, TemplateSource, ValuesFile, ValuesSource, chart_relative, template_document)

CHART_FILE = "Chart.yaml"
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
BINARY_TIMEOUT_SECONDS = 300
# Where `helm-python-sdk` ships wheels (kept in step with pyproject.toml's markers).
SDK_PLATFORMS = "Linux x86_64/aarch64 (glibc 2.28+), macOS arm64, macOS 15+ x86_64, Windows x86_64"
_TEMPLATE_POSITION = re.compile(r"\(?([\w.-]+(?:/[\w.-]+)*?/templates/[^\s:()]+):(\d+)(?::(\d+))?")
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
    try:
        with open(os.path.join(chart_dir, CHART_FILE), encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def chart_name(chart_dir: str) -> str:
    return str(chart_metadata(chart_dir).get("name") or os.path.basename(os.path.abspath(chart_dir)))


def aliased_names(chart_dir: str, alias: str) -> list[str]:
    """Dependency names declared under `alias` in the chart's Chart.yaml."""
    dependencies = chart_metadata(chart_dir).get("dependencies") or []
    return [str(d.get("name")) for d in dependencies if isinstance(d, dict) and d.get("alias") == alias]


# --- values --------------------------------------------------------------------------------------


def merge_values(base: dict, override: dict) -> dict:
    """Helm's merge of values files: maps merge key by key, anything else replaces."""
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge_values(base[key], value)
        else:
            base[key] = value
    return base


def merge_set(base, parsed):
    """`--set` parsed alone, applied onto the values like Helm's strvals.ParseInto: maps merge,
    and a list written with indexes (`a[1]=x`, parsed as [None, "x"]) keeps the other items."""
    if isinstance(parsed, dict) and isinstance(base, dict):
        for key, value in parsed.items():
            base[key] = merge_set(base.get(key), value)
        return base
    if isinstance(parsed, list) and isinstance(base, list):
        merged = list(base) + [None] * max(0, len(parsed) - len(base))
        for index, value in enumerate(parsed):
            if value is not None:
                merged[index] = merge_set(merged[index], value)
        return merged
    return parsed


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
                segments.extend(int(i) for i in re.findall(r"\[(\d+)\]", match.group(2)))
            keys.append(segments)
    return keys


def read_values_files(helm, options: HelmOptions) -> dict:
    values: dict = {}
    for path in options.values:
        if _URL.match(path):
            raise RenderError(f"values file {path}: kubelint-ports reads local files only, never the network")
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as error:
            raise RenderError(f"cannot read values file {display_path(path)}: {error.strerror or error}") from None
        try:
            parsed = helm.values_from_yaml(text) if text.strip() else {}
        except helm.HelmError as error:
            raise RenderError(f"values file {display_path(path)}: {one_line(str(error))}") from None
        merge_values(values, parsed or {})
    try:
        for expression in options.set:
            values = merge_set(values, helm.parse_set_string(expression))
        for expression in options.set_string:
            values = merge_set(values, helm.parse_set_string_values(expression))
    except helm.HelmError as error:
        raise RenderError(f"--set {expression!r}: {one_line(str(error))}") from None
    return values


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
    check_local_schemas(chart_dir)
    if not options.helm_binary:
        helm = in_process_engine()
        if helm is not None:
            return render_in_process(helm, chart_dir, options)
    binary = find_helm_binary(options)
    if binary is None:
        raise RenderError(
            "no Helm engine to render it: install the Helm extra for in-process rendering "
            f"(`pip install 'kubelint-ports[helm]'`; wheels for {SDK_PLATFORMS}), or put a `helm` binary on "
            "PATH (or pass --helm-binary PATH)")
    return render_with_binary(binary, chart_dir, options)


def render_in_process(helm, chart_dir: str, options: HelmOptions) -> dict[str, str]:
    try:
        chart = helm.Chart.load(chart_dir)
    except helm.HelmError as error:
        raise RenderError(f"not a loadable chart: {one_line(str(error))}") from None
    try:
        missing = missing_dependencies(chart)
        if missing:
            raise RenderError(
                f"missing dependencies: {', '.join(missing)}: declared in Chart.yaml but not in charts/; "
                f"run `helm dependency build {display_path(chart_dir)}` (kubelint-ports never downloads them)")
        values = read_values_files(helm, options)
        name = options.release_name or chart.name
        if options.release_name:
            try:
                helm.validate_release_name(options.release_name)
            except helm.HelmError as error:
                raise RenderError(f"release name {options.release_name!r}: {one_line(str(error))}") from None
        try:
            return render_call(helm, chart, values, name, options)
        except helm.HelmError as error:
            raise render_failure(str(error), chart_dir, options) from None
    finally:
        chart.close()


def render_call(helm, chart, values: dict, name: str, options: HelmOptions) -> dict[str, str]:
    if not options.kube_version:
        return chart.render(values, name=name, namespace=options.namespace)
    # `Chart.render` has no kube_version keyword (0.2.x); the C ABI's render options do
    # (`kube_version`, documented and append-only), so call it the way `Chart.render` does.
    import inspect

    if "kube_version" in inspect.signature(chart.render).parameters:
        return chart.render(values, name=name, namespace=options.namespace, kube_version=options.kube_version)
    from helm_python import _native

    render_options = {"name": name, "kube_version": normalized_kube_version(options.kube_version)}
    if options.namespace:
        render_options["namespace"] = options.namespace
    rendered = _native.call_string("helm_render", chart._raw(), json.dumps(values), json.dumps(render_options))
    return json.loads(rendered)


def normalized_kube_version(version: str) -> str:
    return f"v{version}" if version[:1].isdigit() else version


def missing_dependencies(chart) -> list[str]:
    """Dependencies Chart.yaml declares that charts/ does not hold (Helm's CheckDependencies)."""
    present = {str(dependency.get("name")) for dependency in chart.dependencies}
    missing = []
    for dependency in chart.metadata.get("dependencies") or []:
        name = str(dependency.get("name"))
        if name not in present:
            details = " ".join(str(dependency[key]) for key in ("version", "repository") if dependency.get(key))
            missing.append(f"{name} ({details})" if details else name)
    return missing


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
    import subprocess

    for path in options.values:
        if _URL.match(path):
            raise RenderError(f"values file {path}: kubelint-ports reads local files only, never the network")
    command = helm_template_command(binary, chart_dir, options.release_name or chart_name(chart_dir), options)
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=BINARY_TIMEOUT_SECONDS,
                                   stdin=subprocess.DEVNULL)
    except OSError as error:
        raise RenderError(f"cannot run {binary}: {error.strerror or error}") from None
    except subprocess.TimeoutExpired:
        raise RenderError(f"`helm template` took longer than {BINARY_TIMEOUT_SECONDS} s") from None
    if completed.returncode != 0:
        message = completed.stderr.strip() or f"`helm template` exited with {completed.returncode}"
        raise render_failure(re.sub(r"^Error: ", "", message), chart_dir, options)
    return split_template_output(completed.stdout)


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
        segments: list[Segment] = [int(p) if p.isdigit() else p.replace("~1", "/").replace("~0", "~")
                                   for p in pointer.group(2).split("/")[1:]]
        names = () if pointer.group(1) == chart_name(chart_dir) else (pointer.group(1),)
        location = values_source(chart_dir, names, options).locate(segments) if segments else None
        if location is not None:
            return RenderError(message, location)
    return RenderError(message)


def check_local_schemas(chart_dir: str) -> None:
    """Helm fetches a values schema's remote `$ref`s while validating: refuse them instead."""
    for directory, subdirs, files in os.walk(chart_dir):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        if "values.schema.json" not in files:
            continue
        path = os.path.join(directory, "values.schema.json")
        try:
            with open(path, encoding="utf-8") as handle:
                schema = json.load(handle)
        except (OSError, ValueError):
            continue  # Helm reports an unreadable schema itself
        remote = next(remote_references(schema), None)
        if remote:
            raise RenderError(
                f"{display_path(path)} refers to the remote schema {remote}, which Helm would download: "
                "kubelint-ports never uses the network; put that schema in the chart and refer to it locally")


def remote_references(schema) -> Iterable[str]:
    if isinstance(schema, dict):
        for key, value in schema.items():
            if (key in ("$ref", "$dynamicRef", "$recursiveRef", "$schema") and isinstance(value, str)
                    and re.match(r"^https?://", value) and not re.match(r"^https?://json-schema\.org/", value)):
                yield value
            else:
                yield from remote_references(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from remote_references(item)


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
        return template_document(document, self.source.path, self.origin, self.source, ordinal)

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
    relative, names = chart_relative(origin)
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


def map_template_output(documents: list[Document], options: HelmOptions | None) -> list[Document]:
    """`TemplateOutput` over a list of documents."""
    mapper = TemplateOutput(options)
    mapped = [mapper(document) for document in documents]
    mapper.finish()
    return mapped


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


__all__ = ["HelmOptions", "RenderError", "is_chart", "chart_of_template", "load_chart", "map_template_output",
           "render_chart", "helm_template_command", "split_template_output"]
