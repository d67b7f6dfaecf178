"""Helm charts: the options they render with, the errors rendering gives, where a chart and its
subcharts are (directories, or places inside archives: `helm_archive.py`), and where the values a
template reads come from.

Split from `helm.py` (which renders and loads charts) so that the renderer (`helm_render.py`) and
the file checks (`helm_files.py`) share these without importing each other.
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kubelint_ports.vocabulary import Location
from kubelint_ports.loading import budgets, files
from kubelint_ports.loading.helm.archive import (
    ArchiveError, ArchivePlace, ChartArchive, aliased, chart_archive, parse_chart_yaml, pick_subchart)
from kubelint_ports.loading.helm.templatemap_values import Segment, ValuesFile, ValuesSource

CHART_FILE = "Chart.yaml"
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

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


# A chart's place: its directory, or where it is inside an archive (a packaged chart named
# directly, `charts/*.tgz`, a subchart inside either).
ChartPlace = str | ArchivePlace


def top_place(chart: str) -> ChartPlace | None:
    """The place of a chart named by its directory or its archive (None: an archive not readable)."""
    if os.path.isdir(chart):
        return chart
    try:
        return ArchivePlace(chart_archive(chart))
    except (OSError, ArchiveError):
        return None


def subchart_place(place: ChartPlace, name: str) -> ChartPlace | None:
    """The subchart Helm names `name` in the chart at `place` (`helm_archive.pick_subchart`)."""
    if isinstance(place, ArchivePlace):
        return place.subchart(name)
    charts = os.path.join(place, "charts")
    if is_chart(os.path.join(charts, name)):
        return os.path.join(charts, name)
    try:
        listing = sorted(os.listdir(charts))
    except OSError:
        return None
    entries = [(entry, "dir" if is_chart(os.path.join(charts, entry)) else "archive") for entry in listing
               if entry.endswith(".tgz") or is_chart(os.path.join(charts, entry))]
    chosen = pick_subchart(name, {name, *aliased_names(place, name)}, entries,
                           lambda entry: chart_name(os.path.join(charts, entry)))
    if chosen is None:
        return None
    return os.path.join(charts, chosen) if dict(entries)[chosen] == "dir" else top_place(os.path.join(charts, chosen))


def chart_places(chart: str, names: Sequence[str]) -> list[ChartPlace]:
    """The chart and each subchart down `names` (from the top chart), as far as they are found."""
    places: list[ChartPlace] = []
    place = top_place(chart)
    for name in names:
        if place is None:
            return places
        places.append(place)
        place = subchart_place(place, name)
    if place is not None:
        places.append(place)
    return places


def chart_metadata(chart_dir: str) -> dict:
    """Chart.yaml as plain data (strings), within the budgets; {} when unreadable."""
    try:
        data = files.read_file(os.path.join(chart_dir, CHART_FILE), budgets.current().max_file_bytes)
    except OSError:
        return {}
    return parse_chart_yaml(data)


def chart_name(chart_dir: str) -> str:
    return str(chart_metadata(chart_dir).get("name") or os.path.basename(os.path.abspath(chart_dir)))


def aliased_names(chart_dir: str, alias: str) -> list[str]:
    """Dependency names declared under `alias` in the chart's Chart.yaml."""
    return aliased(chart_metadata(chart_dir), alias)


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
        (_values_file(path), prefix) for path in reversed(options.values) if not URL.match(path)]
    for depth, place in enumerate(chart_places(chart_dir, names) or [chart_dir]):
        values = _values_file(os.path.join(place, "values.yaml")) if isinstance(place, str) else _archived_values(place)
        if values is not None:
            layers.append((values, prefix[depth:]))
    return ValuesSource(layers, set_keys(options.set + options.set_string), prefix)


_VALUES_FILES: dict[tuple, ValuesFile] = {}
_ARCHIVED_VALUES: weakref.WeakKeyDictionary[ChartArchive, dict[str, ValuesFile]] = weakref.WeakKeyDictionary()


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


def _archived_values(place: ArchivePlace) -> ValuesFile | None:
    """The values.yaml of a chart inside an archive, composed once per archive read."""
    found = place.file("values.yaml")
    if found is None:
        return None
    _, absolute, content = found
    per_archive = _ARCHIVED_VALUES.setdefault(place.archive, {})
    if absolute not in per_archive:
        per_archive[absolute] = ValuesFile(absolute, data=content)
    return per_archive[absolute]
