"""Helm charts -> rendered documents whose positions are template lines.

A chart renders with `helm-python-sdk` (Helm's own engine in a native library, no binary needed)
in a worker process (`helm/worker.py`) that is killed at the `helm-seconds` deadline and whose
data size and output are capped; or, without the SDK or with `--helm-binary`, with `helm
template` under the same budgets (`helm_render.py`). Nothing here touches the network nor reads
outside what the user named: missing dependencies are an error naming them, a symlink leaving the
chart, the input named and its repository, or a FIFO, is refused before Helm could follow it, and
a values schema referring outside itself is validated with those parts left out, never fetched
(`helm_files.py`). A packaged chart (`mychart-1.2.3.tgz` named directly, `charts/*.tgz`) is read
once and checked under the budgets (`helm_archive.py`); one named directly, Helm renders from a
private copy of the bytes checked. Findings in one point at `<archive>:<member>:line:column`.

Importing this module imports neither the SDK nor `subprocess`: only linting a chart (or
`helm template` output) pays for them.
"""

from __future__ import annotations

import os
import re
import stat
import zlib
from collections.abc import Sequence

from kubelint_ports.vocabulary import Diagnostic, Location
from kubelint_ports.loading.yaml_files.documents import Document, DocumentReader, LoadResult, SourceText
from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading import files
from kubelint_ports.loading.yaml_files.manifests import load_bytes
from kubelint_ports.loading.helm.archive import forget_archives
from kubelint_ports.loading.helm.chart import (  # noqa: F401 (the API of charts is this module's)
    CHART_FILE, URL, HelmOptions, RenderError, aliased_names, chart_metadata, chart_name, chart_of_template,
    chart_places, is_chart, set_keys, values_source)
from kubelint_ports.loading.helm.chart_files import (
    ChartFiles, allowed_roots, check_chart_files, note_schemas, read_chart_archive)
from kubelint_ports.loading.helm.render import (  # noqa: F401 (as above)
    helm_template_command, planned_chart, read_line_in_thread, render_with_binary, render_worker,
    split_template_output)
from kubelint_ports.loading.helm.worker import merge_set, merge_values  # noqa: F401 (one copy, shared with the worker)
from kubelint_ports.loading.helm.templatemap import TemplateSource, chart_relative, template_document
from kubelint_ports.loading.helm.template_output import template_source

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
# Where `helm-python-sdk` ships wheels (kept in step with pyproject.toml's markers).
SDK_PLATFORMS = "Linux x86_64/aarch64 (glibc 2.28+), macOS arm64, macOS 15+ x86_64, Windows x86_64"
# No release is on PyPI yet (README, "Install and first run"): the extra is installed from a checkout
# or a commit, never `pip install 'kubelint-ports[helm]'`, which would find nothing to install.
HELM_EXTRA_FROM_A_COMMIT = ("pip install "
                            "'kubelint-ports[helm] @ git+https://github.com/kubelint-ports/kubelint-ports@COMMIT'")
# Where an object naming no namespace lands when no --namespace is given: `helm template` renders
# `.Release.Namespace` as "default", so templates that name it and templates that do not agree.
DEFAULT_NAMESPACE = "default"


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


def render_chart(chart_dir: str, options: HelmOptions, roots: Sequence[str] = (),
                 notes: list[str] | None = None) -> dict[str, str]:
    """{template path (`web/templates/x.yaml`): rendered text}, or RenderError. `chart_dir`: the
    chart's directory or its archive (`helm package`'s `.tgz`). `roots`: where the chart's
    symlinks may lead (`helm_files.allowed_roots`; default: the chart); `notes` receives what the
    user should know about how it rendered (a values schema validated in part)."""
    archive = None
    if os.path.isfile(chart_dir):  # a packaged chart, named directly
        escape = files.symlink_escape(chart_dir)
        if escape:  # as for a manifest named directly (`manifests.load_file`)
            raise RenderError(f"not read: a symlink to {escape}, outside the current directory and its own")
        archive = read_chart_archive(chart_dir)
    checked = note_schemas(archive, ChartFiles()) if archive is not None else check_chart_files(chart_dir, roots)
    check_values_files(options)
    if notes is not None:
        notes.extend(checked.notes)
    # While `lint --fix` plans, Helm renders a copy holding the planned bytes (`planned_chart`).
    with planned_chart(chart_dir, options, tuple(roots) or (chart_dir,)) as (copy, options):
        if copy is not None:
            return render_checked(chart_dir, options, checked.local_schemas, archive, copy)
        return kept_render(chart_dir, options, lambda: render_checked(chart_dir, options, checked.local_schemas,
                                                                      archive, None))


def kept_render(chart_dir: str, options: HelmOptions, render) -> dict[str, str]:
    """The render, kept with the cache on (`build_cache`): keyed by the options, the engine's
    library or the `helm` binary, and every file of the chart and its values files."""
    import importlib.util

    from kubelint_ports.loading import build_cache

    inputs = [chart_dir] if os.path.isfile(chart_dir) else build_cache.tree_files(chart_dir)
    if inputs is None:
        return render()
    try:  # found, not imported: a kept render never loads the engine
        engine = None if options.helm_binary else getattr(importlib.util.find_spec("helm_python"), "origin", None)
    except (ImportError, ValueError):
        engine = None
    parts = [list(options.values), list(options.set), list(options.set_string), options.release_name,
             options.namespace, options.kube_version, options.chart_root, options.include_tests]
    return build_cache.kept_output("chart", parts, [engine, find_helm_binary(options)], [*inputs, *options.values],
                                   render, build_cache.is_text_map)


def render_checked(chart_dir: str, options: HelmOptions, local_schemas: bool, archive, copy: str | None):
    """Render the checked chart (or `copy`, a private copy of it) with the embedded engine, else
    the `helm` binary."""
    if not options.helm_binary:
        worker = render_worker()
        if in_process_engine() is not None:
            if copy is not None:
                manifests = worker.request(copy, chart_dir, options, local_schemas)
            else:
                manifests = worker.render(chart_dir, options, local_schemas, archive)
            if manifests is not None:
                return manifests
        else:
            worker.stop()
    binary = find_helm_binary(options)
    if binary is None:
        if os.environ.get("PRE_COMMIT") == "1":  # pre-commit sets it for hooks: the fix is the other hook
            raise RenderError(
                "no Helm engine to render it in this hook's environment: use the `kubelint-ports-charts` hook, "
                "which installs Helm's engine, for repositories with charts (docs/integrations.md)")
        raise RenderError(
            "no Helm engine to render it: install the Helm extra for in-process rendering (in a checkout, "
            f"`pip install '.[helm]'`; or from a commit, `{HELM_EXTRA_FROM_A_COMMIT}`; wheels for "
            f"{SDK_PLATFORMS}), or put a `helm` binary on PATH (or pass --helm-binary PATH)")
    return render_with_binary(binary, chart_dir, options, local_schemas, archive, copy)


def check_values_files(options: HelmOptions) -> None:
    """Values files are local regular files: never a URL (Helm would fetch it), never a FIFO."""
    for path in options.values:
        if URL.match(path):
            raise RenderError(f"values file {path}: kubelint-ports reads local files only, never the network")
        try:
            mode = os.stat(path).st_mode
        except OSError as error:
            raise RenderError(f"cannot read values file {display_path(path)}: {error.strerror or error}") from None
        if not stat.S_ISREG(mode):
            raise RenderError(f"values file {display_path(path)} is {files.kind_of(mode)}, not a file to read")


# --- loading -------------------------------------------------------------------------------------


def load_chart(chart_dir: str, options: HelmOptions | None, result: LoadResult,
               reader: DocumentReader | None = None, named: Sequence[str] = ()) -> None:
    """Render a chart and add its objects, positioned on template lines, to `result`. `named`: the
    paths the user named (command line, config `paths:`); a symlink in the chart may lead inside
    the one holding it (and inside the repository holding it, named or not)."""
    options = options or HelmOptions()
    shown = display_path(chart_dir)
    roots = allowed_roots(chart_dir, named)
    try:
        manifests = render_chart(chart_dir, options, roots, result.notes)
        add_rendered(manifests, chart_dir, options, result, reader, roots)
    except RenderError as error:
        result.files += 1
        where = error.location or Location(shown, 0, 0)
        result.diagnostics.append(Diagnostic(where, f"cannot render Helm chart {shown}: {error}"))
    finally:
        forget_archives()  # the templates and values read from them keep their own bytes


# Helm splits rendered text into documents at `---` followed by anything (releaseutil's
# `(?:^|\s*\n)---\s*`), so a template that chomps the line break after `---` and writes
# `---# comment` (cert-manager's) is two documents to Helm and a syntax error to YAML.
_GLUED_SEPARATOR = re.compile(r"(?m)^---(?=[^\s-])")


def helm_separators(text: str) -> str:
    """Rendered text with each `---` that Helm splits at written as YAML reads it: a space after
    it (lines do not move, so template positions hold)."""
    return _GLUED_SEPARATOR.sub("--- ", text)


def add_rendered(manifests: dict[str, str], chart_dir: str, options: HelmOptions, result: LoadResult,
                 reader: DocumentReader | None = None, roots: Sequence[str] = ()) -> None:
    for origin in sorted(manifests):
        text = manifests[origin]
        if not is_manifest(origin, options) or not text.strip():
            continue
        source = template_source(chart_dir, origin, options, roots)
        rendered = LoadResult()
        data = helm_separators(text).encode("utf-8")
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
        placed.namespace = self.options.namespace or DEFAULT_NAMESPACE
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


__all__ = ["HelmOptions", "RenderError", "is_chart", "chart_of_template", "load_chart",
           "render_chart", "helm_template_command", "split_template_output"]
