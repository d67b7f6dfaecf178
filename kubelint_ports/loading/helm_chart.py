"""Helm charts as directories: the options they render with, the errors rendering gives, where a
chart and its subcharts are, and where the values a template reads come from.

Split from `helm.py` (which renders and loads charts) so that the renderer (`helm_render.py`) and
the file checks (`helm_files.py`) share these without importing each other.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import yaml

from kubelint_ports.findings import Location
from kubelint_ports.loading import budgets, files
from kubelint_ports.loading import yamltree as yt
from kubelint_ports.loading.templatemap import Segment, ValuesFile, ValuesSource

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
        (_values_file(path), prefix) for path in reversed(options.values) if not URL.match(path)]
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
