"""Rendered charts and Kustomize builds kept with the cache (issue 37, loading/build_cache.py):
rendered once, then read from the cache while neither the chart's files, its values, the
options nor the engine change; findings the same as without the cache; never used while
`--fix` plans; a planted entry of the wrong shape is ignored."""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import pytest

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.formatters import FormatOptions, get_formatter
from kubelint_ports.loading import build_cache, files
from kubelint_ports.loading.helm import charts
from kubelint_ports.loading.helm.chart import HelmOptions
from kubelint_ports.loading.helm.charts import in_process_engine
from kubelint_ports.loading.kustomize import load as kustomize_load
from test_kustomize import needs_kustomize

ROOT = Path(__file__).resolve().parents[1]
needs_engine = pytest.mark.skipif(in_process_engine() is None and shutil.which("helm") is None,
                                  reason="needs Helm's engine: pip install '.[helm]' (or a helm binary on PATH)")


def as_json(report) -> str:
    import io

    out = io.StringIO()
    get_formatter("json")(report, out, FormatOptions())
    return out.getvalue()


class Counted:
    """Counts the calls of a module's function (the render, the build) while passing them on."""

    def __init__(self, monkeypatch, module, name):
        self.calls = 0
        real = getattr(module, name)

        def counting(*args, **kwargs):
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counting)


@pytest.fixture
def chart(tmp_path, monkeypatch) -> Path:
    shutil.copytree(ROOT / "tests" / "charts" / "web", tmp_path / "web")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "web"


def lint_chart(cache, helm=None):
    return lint_paths(["web"], LintOptions(cache_dir=str(cache) if cache else None, helm=helm, jobs=1))


@needs_engine
def test_a_chart_renders_once_then_its_render_is_kept(chart, tmp_path, monkeypatch):
    renders = Counted(monkeypatch, charts, "render_checked")
    plain = as_json(lint_chart(None))
    assert renders.calls == 1
    assert as_json(lint_chart(tmp_path / "cache")) == plain and renders.calls == 2
    assert as_json(lint_chart(tmp_path / "cache")) == plain and renders.calls == 2, "kept: not rendered again"
    assert len(list((tmp_path / "cache").glob("chart-*.json.z"))) == 1


CHART_CHANGES = {
    "a template edited": lambda web: (web / "templates" / "deployment.yaml").write_text(
        (web / "templates" / "deployment.yaml").read_text() + "\n# edited\n"),
    "the values edited": lambda web: (web / "values.yaml").write_text(
        (web / "values.yaml").read_text().replace("hostPort: 0", "hostPort: 8080")),
    "a template added": lambda web: (web / "templates" / "extra.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n"),
    "a subchart's file edited": lambda web: next((web / "charts").rglob("values.yaml")).write_text(
        next((web / "charts").rglob("values.yaml")).read_text() + "\nextra: 1\n"),
}


@needs_engine
@pytest.mark.parametrize("change", sorted(CHART_CHANGES))
def test_any_file_of_the_chart_changed_renders_it_again(chart, tmp_path, monkeypatch, change):
    renders = Counted(monkeypatch, charts, "render_checked")
    lint_chart(tmp_path / "cache")
    CHART_CHANGES[change](chart)
    kept = as_json(lint_chart(tmp_path / "cache"))
    assert renders.calls == 2, f"{change}: rendered again"
    assert kept == as_json(lint_chart(None))


@needs_engine
def test_the_options_and_a_values_file_are_part_of_the_key(chart, tmp_path, monkeypatch):
    renders = Counted(monkeypatch, charts, "render_checked")
    lint_chart(tmp_path / "cache")
    lint_chart(tmp_path / "cache", HelmOptions(set=("web.hostPort=8080",)))
    assert renders.calls == 2
    values = chart / "values-hostports.yaml"
    lint_chart(tmp_path / "cache", HelmOptions(values=(str(values),)))
    values.write_text(values.read_text() + "\n# edited\n")
    lint_chart(tmp_path / "cache", HelmOptions(values=(str(values),)))
    assert renders.calls == 4


@needs_engine
@pytest.mark.parametrize("planted", [b"not zlib", zlib.compress(b"[1, 2]"), zlib.compress(b'{"a": 1}'),
                                     zlib.compress(b" " * (2**20 * 4 + 1), 9)])
def test_a_planted_render_of_the_wrong_shape_is_ignored(chart, tmp_path, monkeypatch, planted):
    monkeypatch.setattr(build_cache, "MAX_ENTRY_BYTES", 2**20)  # the same bound, cheaper to plant a bomb past
    renders = Counted(monkeypatch, charts, "render_checked")
    plain = as_json(lint_chart(tmp_path / "cache"))
    entry = next((tmp_path / "cache").glob("chart-*.json.z"))
    entry.write_bytes(planted)
    assert as_json(lint_chart(tmp_path / "cache")) == plain and renders.calls == 2
    assert json.loads(zlib.decompress(entry.read_bytes())), "written again, whole"


def test_never_used_while_fix_plans(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "PLANNED", {"x": b""})
    made = []
    for _ in range(2):
        build_cache.kept_output("chart", [], [], [], lambda: made.append(1) or {"a": "b"}, build_cache.is_text_map)
    assert made == [1, 1]


@needs_kustomize
def test_a_kustomize_build_is_kept_until_a_file_it_reads_changes(tmp_path, monkeypatch):
    shutil.copytree(ROOT / "tests" / "kustomize" / "shop", tmp_path / "shop")
    monkeypatch.chdir(tmp_path)
    builds = Counted(monkeypatch, kustomize_load, "build")

    def lint(cache):
        return as_json(lint_paths(["shop/overlays/prod"], LintOptions(cache_dir=str(cache) if cache else None,
                                                                      jobs=1)))

    plain = lint(None)
    assert lint(tmp_path / "cache") == plain and builds.calls == 2
    assert lint(tmp_path / "cache") == plain and builds.calls == 2, "kept: not built again"
    deployment = tmp_path / "shop" / "base" / "deployment.yaml"
    deployment.write_text(deployment.read_text() + "\n# edited\n")
    assert lint(tmp_path / "cache") == lint(None) and builds.calls == 4
