"""A chart given several values sets (the configuration's `charts:` naming the same chart more
than once, one entry per environment): which charts, and the deployment unit each set renders
into. `inputs.Loading` sets such a chart aside and renders it once per set, after the other
inputs, each set's objects in its own unit (`Document.unit`); the engine receives them expanded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kubelint_ports.loading.paths import display_path

if TYPE_CHECKING:
    from kubelint_ports.loading.helm.chart import HelmOptions

ChartHelm = Sequence[tuple[str, "HelmOptions"]]  # (chart's absolute path, how it renders), in the config's order


def chart_pairs(chart_helm: Mapping[str, HelmOptions] | ChartHelm | None) -> tuple[tuple[str, HelmOptions], ...]:
    """The per-chart options as (chart, options) pairs, whether given as a mapping (one set per
    chart) or as the configuration's list (a chart may come more than once)."""
    if not chart_helm:
        return ()
    return tuple(chart_helm.items()) if isinstance(chart_helm, Mapping) else tuple(chart_helm)


def several_value_sets(chart_helm: ChartHelm) -> dict[str, list[HelmOptions]]:
    """Charts (absolute paths) the configuration's `charts:` gives more than one values set: the
    same chart once per environment, each set its own deployment unit."""
    by_chart: dict[str, list[HelmOptions]] = {}
    for chart, helm in chart_helm:
        by_chart.setdefault(chart, []).append(helm)
    return {chart: sets for chart, sets in by_chart.items() if len(sets) > 1}


def value_set_units(chart: str, sets: Sequence[HelmOptions]) -> list[str]:
    """`charts/web[values-prod]`: a chart's values sets named by the stems of their values files
    (`+` between them, `defaults` without any), numbered where two sets would share a name."""
    labels = ["+".join(Path(values).stem for values in helm.values) or "defaults" for helm in sets]
    shown = display_path(chart)
    return [f"{shown}[{label}]" if labels.count(label) == 1 else f"{shown}[{label} #{number}]"
            for number, label in enumerate(labels, 1)]
