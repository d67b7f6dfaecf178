"""Where a rendered template's lines are (`template_source`: a `# Source:` path -> the template
file, or archive member, and the values it reads), and `helm template` output given as a file,
positioned on the templates of a chart found beside it (`TemplateOutput`: the manifest reader asks
for it when a document carries a `# Source:` comment).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading.yaml_files.documents import Document
from kubelint_ports.loading.helm.archive import ArchivePlace
from kubelint_ports.loading.helm.chart import HelmOptions, chart_name, chart_places, is_chart, values_source
from kubelint_ports.loading.helm.chart_files import allowed_roots, inside_any
from kubelint_ports.loading.helm.template_helpers import Defines
from kubelint_ports.loading.helm.templatemap import TemplateSource, chart_relative, template_document


def template_source(chart_dir: str, origin: str, options: HelmOptions, roots: Sequence[str] = ()) -> TemplateSource:
    """Where a `# Source:` path's template is: only ever a regular file inside the chart, or inside
    `roots` through a symlink the chart checks let through, or a member of the chart's archive or
    of a packaged subchart's (a path with `..`, or one leaving them through a symlink, has no lines
    to open)."""
    relative, names = chart_relative(origin)
    if any(part in ("", ".", "..") for part in origin.split("/")):
        return TemplateSource(display_path(chart_dir), None, None)
    places = chart_places(chart_dir, names)
    values = values_source(chart_dir, names, options)
    if len(places) != len(names) + 1:
        shown = chart_dir if os.path.isfile(chart_dir) else os.path.join(chart_dir, *origin.split("/")[1:])
        return TemplateSource(display_path(shown), None, values)
    place = places[-1]
    defines = Defines(places, tuple(roots) or (chart_dir,))  # read when a finding follows an `include`
    if isinstance(place, ArchivePlace):
        found = place.file(relative)
        if found is None:
            return TemplateSource(place.archive.shown, None, values)
        return TemplateSource(found[0], None, values, data=found[2], defines=defines)
    file = os.path.join(place, *relative.split("/"))
    if not (inside_any(tuple(roots) or (chart_dir,), file) and os.path.isfile(file)):
        return TemplateSource(display_path(file), None, values)
    return TemplateSource(display_path(file), file, values, defines=defines)


class TemplateOutput:
    """Documents of `helm template` output (`# Source:` comments), one file's worth, positioned on
    the templates of the chart at --chart-root (or the current directory, or `./<chart name>`),
    when found there. `finish` tells each template how many objects it rendered."""

    def __init__(self, options: HelmOptions | None):
        self.options = options or HelmOptions()
        self.sources: dict[str, TemplateSource | None] = {}
        self.counts: dict[str, int] = {}
        self.chart_dirs: dict[str, str | None] = {}  # chart name -> its directory (a file names one chart, often)

    def __call__(self, document: Document) -> Document:
        origin = document.origin
        if not origin or "/" not in origin:
            return document
        if origin not in self.sources:
            name = origin.split("/")[0]
            if name not in self.chart_dirs:
                self.chart_dirs[name] = chart_root_for(name, self.options)
            self.sources[origin] = output_source(origin, self.chart_dirs[name], self.options)
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


def output_source(origin: str, chart_dir: str | None, options: HelmOptions) -> TemplateSource | None:
    if chart_dir is None:
        return None
    source = template_source(chart_dir, origin, options, allowed_roots(chart_dir))
    if not source.readable or (source.file is not None and not os.path.isfile(source.file)):
        return None
    return source


def chart_root_for(name: str, options: HelmOptions) -> str | None:
    if options.chart_root:
        return options.chart_root if is_chart(options.chart_root) else None
    for candidate in (os.curdir, name):
        if is_chart(candidate) and chart_name(candidate) == name:
            return candidate
    return None
