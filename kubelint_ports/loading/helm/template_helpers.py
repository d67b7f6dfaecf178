"""A chart's named templates (`{{ define "name" }}`), found so the template map can follow an
`include "name" .` into the lines that wrote what it returned.

Helm shares every `define` of a chart and of its subcharts: `Defines` reads the templates of the
chart holding the template (its `templates/`, then its subcharts' kept as directories or archive
members, then the charts above it) once, when a finding first needs one, and gives a `define`'s
body as a template source of its own (`source`): the file's text with everything outside the
body blanked, so lines and columns are the file's. Only regular files inside the chart (or the
roots the chart checks let a symlink reach) are read, within the file budget.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from kubelint_ports.loading import budgets, files
from kubelint_ports.loading.helm.archive import ArchivePlace
from kubelint_ports.loading.helm.template_outline import mask_actions
from kubelint_ports.loading.helm.templatemap import TemplateSource
from kubelint_ports.loading.helm.templatemap_values import Fields
from kubelint_ports.loading.paths import display_path

_DEFINE = re.compile(r'^(?:define|block)\s+"([^"]+)"')
_OPENS = frozenset(("if", "range", "with", "define", "block"))
_MAX_TEMPLATE_FILES = 2000  # files of a chart's templates read for its `define`s
_MAX_SOURCES = 256  # bodies kept outlined (by name and argument)

Body = tuple[str, str | None, str, int, int]  # (shown path, file or None, text, body start, body end)


class Defines:
    """The `define`s of the charts at `places` (the template's own chart last, as `chart_places`
    lists them), read on first use."""

    def __init__(self, places: Sequence, roots: Sequence[str] = ()):
        self.places = list(places)
        self.roots = tuple(roots)
        self._bodies: dict[str, Body] | None = None
        self._sources: dict[tuple, object] = {}

    def source(self, name: str, top, values):
        """The body of `define "name"` as a template source whose `.` is `top`; None when the
        charts define no such name."""
        key = (name, None if top is None else top.key() if isinstance(top, Fields) else tuple(top), id(values))
        if key in self._sources:
            return self._sources[key]
        body = self.bodies().get(name)
        found = None
        if body is not None:
            shown, file, text, start, end = body
            blanked = re.sub(r"[^\n]", " ", text[:start]) + text[start:end] + re.sub(r"[^\n]", " ", text[end:])
            found = TemplateSource(shown, None, values, rendered_count=1, data=blanked.encode("utf-8"),
                                   top=top, defines=self, body_file=file)
        if len(self._sources) < _MAX_SOURCES:
            self._sources[key] = found
        return found

    def bodies(self) -> dict[str, Body]:
        if self._bodies is None:
            self._bodies = {}
            for shown, file, text in self.template_files():
                for name, start, end in define_spans(text):
                    self._bodies.setdefault(name, (shown, file, text, start, end))
        return self._bodies

    def template_files(self):
        """(shown path, file or None, text) of each template, the nearest chart's first."""
        seen = 0
        for place in reversed(self.places):
            for found in _place_templates(place, self.roots):
                seen += 1
                if seen > _MAX_TEMPLATE_FILES:
                    return
                yield found


def _place_templates(place, roots: tuple[str, ...]):
    if isinstance(place, ArchivePlace):
        for name in sorted(place.archive.members):
            if name.startswith(place.base + "templates/") or (
                    name.startswith(place.base + "charts/") and "/templates/" in name[len(place.base):]):
                found = place.file(name[len(place.base):])
                if found is not None:
                    yield found[0], None, _decoded(found[2])
        return
    directories = [os.path.join(place, "templates")]
    charts = os.path.join(place, "charts")
    try:
        directories += [os.path.join(charts, entry, "templates") for entry in sorted(os.listdir(charts))]
    except OSError:
        pass
    allowed = roots or (place,)
    for directory in directories:
        for folder, subfolders, names in os.walk(directory):
            subfolders.sort()
            for name in sorted(names):
                path = os.path.join(folder, name)
                if not (os.path.isfile(path) and any(files.inside(root, path) for root in allowed)):
                    continue
                try:
                    data = files.read_file(path, budgets.current().max_file_bytes)
                except OSError:
                    continue
                if b"define" in data or b"block" in data:
                    yield display_path(path), path, _decoded(data)


def _decoded(data: bytes) -> str:
    return data.decode("utf-8-sig", "replace").replace("\r\n", "\n").replace("\r", "\n")


def define_spans(text: str) -> list[tuple[str, int, int]]:
    """(name, body start, body end) of each `define`/`block` in a template's text: from the end of
    its action to the start of its own `end`."""
    _, actions = mask_actions(text)
    spans: list[tuple[str, int, int]] = []
    stack: list[tuple[str | None, int]] = []
    for action in actions:
        words = action.words
        if action.is_comment or not words:
            continue
        if words[0] in _OPENS:
            match = _DEFINE.match(action.body)
            stack.append((match.group(1) if match else None, action.end))
        elif words[0] == "end" and stack:
            name, start = stack.pop()
            if name is not None:
                spans.append((name, start, action.start))
    return spans
