"""Deployment units (model.units): only objects deployed together are compared (issue 24)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.model.units import UnitRules

ROOT = Path(__file__).resolve().parents[1]
SERVICE = """\
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: shop}}
spec: {{type: NodePort, ports: [{{port: 80, nodePort: 30080}}]}}
"""


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def collisions(root: Path, options: LintOptions = LintOptions()) -> dict[str, tuple[str, ...]]:
    """KP203 findings: the Service reported -> its units."""
    cwd = os.getcwd()
    os.chdir(root)
    try:
        report = lint_paths(["."], options)
    finally:
        os.chdir(cwd)
    return {f.subject.name: f.units for f in report.findings if f.rule_id == "KP203"}


@pytest.fixture
def chdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_overlays_of_one_base_are_two_environments():
    """tests/kustomize: the `prod` and `inline` overlays both claim nodePort 30080 for their own
    cluster; each overlay's own findings stay, named by unit."""
    report = lint_paths([str(ROOT / "tests" / "kustomize")], LintOptions())
    rules = {f.rule_id for f in report.findings}
    assert "KP203" not in rules
    assert {"KP202", "KP301"} <= rules
    assert all(len(f.units) == 1 and f.units[0].endswith(("overlays/prod", "overlays/inline", "overlays/edge"))
               for f in report.findings)


def test_plain_files_are_one_unit(tmp_path):
    write(tmp_path, {"a/one.yaml": SERVICE.format(name="one"), "b/two.yaml": SERVICE.format(name="two")})
    assert collisions(tmp_path) == {"one": (), "two": ()}


def test_configured_units_separate_clusters_and_join_paths(chdir):
    write(chdir, {"prod/one.yaml": SERVICE.format(name="one"), "staging/two.yaml": SERVICE.format(name="two"),
                  "prod-extra/three.yaml": SERVICE.format(name="three")})
    (chdir / ".kubelint-ports.yaml").write_text("units:\n  prod: [prod, prod-extra]\n  staging: [staging]\n")
    data = json.loads(CliRunner().invoke(app, ["lint", "--format", "json"]).stdout)
    found = {f["object"]["name"]: f.get("units") for f in data["findings"] if f["rule"] == "KP203"}
    assert found == {"one": ["prod"], "three": ["prod"]}


ARGO_APP = """\
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {{name: {name}, namespace: argocd}}
spec:
  source: {{repoURL: https://example.com/repo.git, path: {path}}}
  destination: {{{destination}, namespace: shop}}
"""


def test_argo_cd_applications_group_paths_by_destination(tmp_path):
    write(tmp_path, {
        "apps/web-prod.yaml": ARGO_APP.format(name="web-prod", path="envs/prod/web", destination="name: prod"),
        "apps/api-prod.yaml": ARGO_APP.format(name="api-prod", path="envs/prod/api", destination="name: prod"),
        "apps/web-dev.yaml": ARGO_APP.format(name="web-dev", path="envs/dev/web",
                                             destination="server: https://dev.example.com"),
        "envs/prod/web/svc.yaml": SERVICE.format(name="web"),
        "envs/prod/api/svc.yaml": SERVICE.format(name="api"),
        "envs/dev/web/svc.yaml": SERVICE.format(name="web-dev"),
    })
    assert collisions(tmp_path) == {"web": ("argocd:prod",), "api": ("argocd:prod",)}


def test_an_application_set_list_generator_names_each_destination(tmp_path):
    write(tmp_path, {
        "appset.yaml": """\
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: web, namespace: argocd}
spec:
  generators:
    - list:
        elements:
          - {cluster: prod, env: prod}
          - {cluster: dev, env: dev}
  template:
    metadata: {name: 'web-{{cluster}}'}
    spec:
      source: {repoURL: https://example.com/repo.git, path: 'envs/{{env}}'}
      destination: {name: '{{cluster}}', namespace: shop}
""",
        "envs/prod/a.yaml": SERVICE.format(name="a"), "envs/prod/b.yaml": SERVICE.format(name="b"),
        "envs/dev/c.yaml": SERVICE.format(name="c"),
    })
    assert collisions(tmp_path) == {"a": ("argocd:prod",), "b": ("argocd:prod",)}


FLUX = """\
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: apps, namespace: flux-system}}
spec: {{interval: 10m, path: {path}, prune: true, sourceRef: {{kind: GitRepository, name: flux-system}}}}
"""


def test_flux_kustomizations_group_paths_by_the_cluster_directory(tmp_path):
    write(tmp_path, {
        "clusters/production/apps.yaml": FLUX.format(path="./apps/production"),
        "clusters/staging/apps.yaml": FLUX.format(path="./apps/staging"),
        "apps/production/a.yaml": SERVICE.format(name="a"), "apps/production/b.yaml": SERVICE.format(name="b"),
        "apps/staging/c.yaml": SERVICE.format(name="c"),
    })
    assert collisions(tmp_path) == {"a": ("flux:clusters/production",), "b": ("flux:clusters/production",)}


def test_a_path_deployed_to_two_clusters_is_linted_in_both(tmp_path):
    """One finding, naming both units: the shared path collides with each cluster's own Service."""
    write(tmp_path, {
        "apps/prod.yaml": ARGO_APP.format(name="p", path="common", destination="name: prod"),
        "apps/dev.yaml": ARGO_APP.format(name="d", path="common", destination="name: dev"),
        "apps/prod-own.yaml": ARGO_APP.format(name="po", path="prod", destination="name: prod"),
        "common/svc.yaml": SERVICE.format(name="common"),
        "prod/svc.yaml": SERVICE.format(name="own"),
    })
    assert collisions(tmp_path) == {"common": ("argocd:prod",), "own": ("argocd:prod",)}


def test_output_names_the_unit(chdir):
    write(chdir, {"prod/one.yaml": SERVICE.format(name="one"), "prod/two.yaml": SERVICE.format(name="two"),
                  "staging/three.yaml": SERVICE.format(name="three")})
    (chdir / ".kubelint-ports.yaml").write_text("units:\n  prod: [prod]\n  staging: [staging]\n")
    text = CliRunner().invoke(app, ["lint"]).output
    assert "prod/one.yaml:4:43: error   KP203 nodePort 30080 is also claimed by shop/Service/two [prod]\n" in text
    assert "in unit prod" in CliRunner().invoke(app, ["lint", "-v"]).output
    sarif = json.loads(CliRunner().invoke(app, ["lint", "--format", "sarif"]).stdout)
    assert {tuple(r["properties"]["units"]) for r in sarif["runs"][0]["results"]} == {("prod",)}


def test_unit_rules_match_paths_below_a_unit_only():
    rules = UnitRules((("prod", ("deploy/prod",)),), root="/repo")

    class Document:
        unit = ""

        def __init__(self, path):
            self.path = path

    assert rules.units_of(Document("/repo/deploy/prod/a.yaml")) == ("prod",)
    assert rules.units_of(Document("/repo/deploy/production/a.yaml")) == ("",)
