"""A file named on the command line inside a Kustomize directory stands for that directory's
build; when the build does not read it (a manifest beside a kustomization.yaml that does not list
it), it is linted on its own with a note, not dropped without a word (seen on a real operator's
manifests directory, issue 34)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelint_ports.engine import LintOptions, lint_paths
from test_kustomize import needs_kustomize

POD = """apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - name: c
    image: x
    ports: [{{containerPort: 80, hostPort: {port}}}]
"""


@pytest.fixture
def base(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / ".git").mkdir()
    base = tmp_path / "base"
    base.mkdir()
    (base / "kustomization.yaml").write_text("resources:\n- listed.yaml\n", encoding="utf-8")
    (base / "listed.yaml").write_text(POD.format(name="listed", port=8080), encoding="utf-8")
    (base / "beside.yaml").write_text(POD.format(name="beside", port=9090), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return base


def ports(report) -> list[tuple[str, int]]:
    return sorted((Path(f.location.path).name, f.port) for f in report.findings if f.rule_id == "KP101")


@needs_kustomize
def test_a_named_file_the_build_does_not_read_is_linted_on_its_own(base: Path):
    report = lint_paths(["base/beside.yaml"], LintOptions())
    assert ("beside.yaml", 9090) in ports(report)
    assert any("beside.yaml: not part of the Kustomize build of base; linted on its own" in note
               for note in report.notes), report.notes


@needs_kustomize
def test_a_named_file_the_build_reads_stands_for_the_build(base: Path):
    report = lint_paths(["base/listed.yaml"], LintOptions())
    assert ports(report) == [("listed.yaml", 8080)]
    assert not any("not part of the Kustomize build" in note for note in report.notes)
