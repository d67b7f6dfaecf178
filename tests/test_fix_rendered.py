"""`lint --fix` on what is rendered: a Helm chart's fix lands in the values key or the template
literal that wrote the value, a Kustomize build's in the patch or resource file its position
names; a base other overlays read is edited only with `--unsafe-fixes`. Byte for byte: comments,
quoting, anchors, CRLF and every other line stay (docs/fix.md).

Fixtures: tests/fix/charts/shop (a chart written for these tests), tests/fix/kustomize (a base,
an overlay with patch files, one with an inline patch), tests/charts/web; each test copies them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.loading.helm.charts import in_process_engine

ROOT = Path(__file__).resolve().parents[1]
SHOP_CHART = ROOT / "tests" / "fix" / "charts" / "shop"
KUSTOMIZE = ROOT / "tests" / "fix" / "kustomize"
runner = CliRunner()
needs_engine = pytest.mark.skipif(in_process_engine() is None,
                                  reason="this test needs Helm's in-process engine, `helm-python-sdk`, which is not installed "
                                       "(or has no wheel for this platform): pip install '.[helm]'")


def run(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture
def shop(tmp_path, monkeypatch) -> Path:
    shutil.copytree(SHOP_CHART, tmp_path / "shop")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "shop"


def findings(*args: str) -> list[dict]:
    return json.loads(run("lint", "--format", "json", *args).stdout)["findings"]


# --- Helm -------------------------------------------------------------------------------------


@needs_engine
def test_chart_fix_edits_the_values_keys_and_template_literals_and_nothing_else(shop):
    values = (shop / "values.yaml").read_text()
    template = (shop / "templates" / "web.yaml").read_text()
    agent = (shop / "templates" / "agent.yaml").read_text()
    result = run("lint", "--fix", "--unsafe-fixes", "shop")
    assert (shop / "values.yaml").read_text() == values.replace(
        'containerPort: "9113"   # quoted', "containerPort: 9113   # quoted").replace(
        "nodePort: 30080   # collides", "nodePort: 30000   # collides").replace(
        "hostPort: 10250   # kubelet's", "hostPort: 10251   # kubelet's"), result.output
    assert (shop / "templates" / "web.yaml").read_text() == template.replace(
        'containerPort: "{{ .Values.web.port }}"', "containerPort: {{ .Values.web.port }}").replace(
        'containerPort: "8081"   # a literal', "containerPort: 8081   # a literal").replace(
        "      nodePort: 8081\n", "      nodePort: 30001\n")
    assert (shop / "templates" / "agent.yaml").read_text() == agent  # its fixes go to values.yaml or nowhere
    assert "fixed 6 findings in 2 files" in result.output
    # What is left says why it has no fix.
    assert ("shop/templates/web.yaml:21:15: KP001 fix not applied: the template quotes it with `| quote` "
            "(shop/templates/web.yaml:21); remove that pipe") in result.output
    assert ("shop/templates/agent.yaml:17:15: KP104 fix not applied: the fix removes what the chart's template "
            "shop/templates/agent.yaml writes; rendered output is not edited, so remove it in the template") in result.output


@needs_engine
def test_chart_findings_say_where_their_fix_goes(shop):
    fixes = {(f["rule"], f["line"], f["object"]["name"]): f.get("fix") for f in findings("--unsafe-fixes", "shop")}
    assert fixes[("KP001", 38, "shop-exporter")] == {
        "applicability": "safe",
        "description": "remove the quotes: containerPort: 9113 (set .Values.web.extraPorts[0].containerPort in "
                       "shop/values.yaml:7)"}
    assert fixes[("KP001", 17, "shop-web")]["description"] == \
        "remove the quotes around {{ .Values.web.port }} (shop/templates/web.yaml:17)"
    assert fixes[("KP203", 64, "shop-api")]["description"].endswith("(set .Values.api.nodePort in shop/values.yaml:9)")
    assert fixes[("KP203", 51, "shop-web")] is None  # of the two colliding Services, the first keeps its port
    assert fixes[("KP001", 21, "shop-web")]["notApplied"].startswith("the template quotes it with `| quote`")


@needs_engine
def test_chart_fix_edits_the_values_file_the_user_passed_keeping_crlf(shop):
    prod = shop / "values-prod.yaml"
    crlf = prod.read_bytes().replace(b"\n", b"\r\n")
    prod.write_bytes(crlf)
    chart_values = (shop / "values.yaml").read_bytes()
    result = run("lint", "--diff", "--unsafe-fixes", "--select", "KP203", "shop", "-f", "shop/values-prod.yaml")
    assert result.stdout_bytes == (
        b"--- a/shop/values-prod.yaml\n+++ b/shop/values-prod.yaml\n@@ -1,4 +1,4 @@\n"
        b" # Production: the user's own values file, passed with -f.\r\n api:\r\n"
        b"-  nodePort: 30080\r\n+  nodePort: 30000\r\n   port: 9091\r\n")
    run("lint", "--fix", "--unsafe-fixes", "--select", "KP203", "shop", "-f", "shop/values-prod.yaml")
    assert prod.read_bytes() == crlf.replace(b"nodePort: 30080", b"nodePort: 30000")
    assert (shop / "values.yaml").read_bytes() == chart_values  # the chart's default is not what was rendered


@needs_engine
def test_a_value_set_on_the_command_line_gets_no_fix(shop):
    found = findings("--select", "KP203", "shop", "--set", "api.nodePort=30080")
    api = next(f for f in found if f["object"]["name"] == "shop-api")
    assert api["fix"]["notApplied"] == ".Values.api.nodePort (shop/templates/web.yaml:64) is not set in a values file " \
                                       "this run read (--set, or the template's default)"


@needs_engine
def test_a_values_key_an_alias_repeats_gets_no_fix(shop):
    values = shop / "values.yaml"
    values.write_text(values.read_text() + "sidecar:\n  ports: *extra\n")
    before = values.read_bytes()
    result = run("lint", "--fix", "--select", "KP001", "shop")
    assert values.read_bytes() == before
    assert ("KP001 fix not applied: .Values.web.extraPorts[0].containerPort in shop/values.yaml is an anchor's value "
            "that aliases repeat") in result.output


@needs_engine
@pytest.mark.parametrize(("written", "reason"), [
    ("{{ add .Values.api.nodePort 0 }}",
     "the template computes it (`{{ add .Values.api.nodePort 0 }}` at shop/templates/web.yaml:64): there is no "
     "literal to edit"),
    ("{{ .Values.web.nodePort }}",  # the Service that keeps the port reads it too
     "default/Service/shop-web takes its nodePort from .Values.web.nodePort too: moving it moves both"),
], ids=["computed", "one-key-two-services"])
def test_a_node_port_the_template_does_not_write_alone_gets_no_move(written, reason, shop):
    template = shop / "templates" / "web.yaml"
    template.write_text(template.read_text().replace("nodePort: {{ .Values.api.nodePort }}", f"nodePort: {written}"))
    api = next(f for f in findings("--select", "KP203", "shop") if f["object"]["name"] == "shop-api")
    assert api["fix"]["notApplied"] == reason


@needs_engine
def test_a_template_literal_inside_range_is_not_moved(tmp_path, monkeypatch):
    chart = tmp_path / "ranged"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: ranged\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("names: [a, b]\n")
    (chart / "templates" / "svc.yaml").write_text(
        "{{- range .Values.names }}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {{ . }}\nspec:\n"
        "  type: NodePort\n  ports:\n    - port: 80\n      nodePort: 8080\n{{- end }}\n")
    monkeypatch.chdir(tmp_path)
    found = [f for f in findings("--select", "KP204", "ranged")]
    assert [f["fix"]["notApplied"] for f in found] == [
        "ranged/templates/svc.yaml:11 is inside a `range`: the port would move for every item"] * 2


@needs_engine
def test_the_test_chart_moves_its_host_port_in_the_values_file_passed(tmp_path, monkeypatch):
    shutil.copytree(ROOT / "tests" / "charts" / "web", tmp_path / "web")
    monkeypatch.chdir(tmp_path)
    values = (tmp_path / "web" / "values-hostports.yaml").read_text()
    result = run("lint", "--fix", "--unsafe-fixes", "web", "-f", "web/values-hostports.yaml")
    assert (tmp_path / "web" / "values-hostports.yaml").read_text() == values.replace(
        "  hostPort: 30080\n", "  hostPort: 29999\n"), result.output
    assert "KP201" not in run("lint", "web", "-f", "web/values-hostports.yaml").stdout


# --- Kustomize --------------------------------------------------------------------------------


@pytest.fixture
def overlays(tmp_path, monkeypatch) -> Path:
    shutil.copytree(KUSTOMIZE, tmp_path / "kustomize")
    (tmp_path / ".git").mkdir()  # a repository: an overlay's fix may reach its base (docs/fix.md, the root)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "kustomize"


def test_kustomize_fix_edits_the_overlays_own_patches_and_only_unquotes_the_shared_base(overlays):
    texts = {path: path.read_bytes() for path in overlays.rglob("*") if path.is_file()}
    result = run("lint", "--fix", "kustomize/overlays")
    edge_patch = overlays / "overlays" / "edge" / "metrics-port.yaml"
    lab = overlays / "overlays" / "lab" / "kustomization.yaml"
    service = overlays / "base" / "service.yaml"
    assert edge_patch.read_bytes() == texts[edge_patch].replace(b'hostPort: "9113"   # quoted', b"hostPort: 9113   # quoted")
    assert lab.read_bytes() == texts[lab].replace(b'nodePort: "30090"   # inline', b"nodePort: 30090   # inline")
    # the base's unquote renders the same value in every overlay: safe; its init container's removal is not
    assert service.read_bytes() == texts[service].replace(b'targetPort: "8080"   # was', b"targetPort: 8080   # was")
    assert {path for path, text in texts.items() if path.read_bytes() != text} == {edge_patch, lab, service}, \
        result.output
    assert "fixed 4 findings in 3 files" in result.output


def test_kustomize_base_fix_says_which_overlays_read_it_and_is_unsafe_unless_neutral(overlays):
    found = findings("kustomize/overlays")
    base = [f for f in found if f["file"] == "kustomize/base/service.yaml" and f["rule"] == "KP001"]
    assert [f["units"] for f in base] == [["kustomize/overlays/edge"], ["kustomize/overlays/lab"]]
    assert base[0]["fix"] == {
        "applicability": "safe",
        "description": "remove the quotes: targetPort: 8080 (kustomize/base/service.yaml:11); kustomize/base/service.yaml "
                       "is a base of kustomize/overlays/edge that kustomize/overlays/lab also builds on: the edit "
                       "reaches every overlay that reads it"}
    removal = [f for f in found if f["file"] == "kustomize/base/deployment.yaml" and f["rule"] == "KP104"]
    assert {f["fix"]["applicability"] for f in removal} == {"unsafe"}


def test_kustomize_unsafe_fixes_edit_the_base_once_and_the_json_patch(overlays):
    service = overlays / "base" / "service.yaml"
    deployment = overlays / "base" / "deployment.yaml"
    json_patch = overlays / "overlays" / "edge" / "nodeport.json"
    before = {path: path.read_text() for path in (service, deployment, json_patch)}
    result = run("lint", "--fix", "--unsafe-fixes", "kustomize/overlays")
    assert service.read_text() == before[service].replace('targetPort: "8080"   # was', "targetPort: 8080   # was")
    assert deployment.read_text() == before[deployment].replace(
        "              hostPort: 2020   # copied from the agent by mistake\n", ""), result.output
    assert json_patch.read_text() == before[json_patch].replace('"value": 8080}', '"value": 30000}')
    after = run("lint", "kustomize/overlays").stdout
    assert "KP001" not in after and "KP104" not in after and "KP204" not in after


def test_kustomize_removal_under_a_patched_list_is_not_made(overlays):
    patch = overlays / "overlays" / "edge" / "metrics-port.yaml"
    patch.write_text(patch.read_text() + "      initContainers:\n        - name: wait\n          image: busybox:1.37\n")
    found = [f for f in findings("--unsafe-fixes", "kustomize/overlays/edge") if f["rule"] == "KP104"]
    assert found[0]["fix"]["notApplied"] == (
        "a patch of kustomize/overlays/edge writes spec.template.spec.initContainers: list positions in "
        "kustomize/base/deployment.yaml may not be the built ones; remove it by hand")


def test_kustomize_base_linted_on_its_own_is_its_own_file(overlays):
    result = run("lint", "--fix", "kustomize/base")
    assert 'targetPort: 8080   # was' in (overlays / "base" / "service.yaml").read_text(), result.output


@needs_engine
def test_chart_sarif_fixes_change_the_values_file_and_are_schema_valid(shop):
    from test_sarif import validate

    log = json.loads(run("lint", "--format", "sarif", "shop").stdout)
    validate(log)
    changed = {change["artifactLocation"]["uri"] for result in log["runs"][0]["results"]
               for fix in result.get("fixes", ()) for change in fix["artifactChanges"]}
    assert changed == {"shop/values.yaml", "shop/templates/web.yaml"}


def test_a_base_value_two_overlays_report_is_moved_once_to_one_port(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()  # a repository: the overlays' fix may reach their base (docs/fix.md, the root)
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "kustomization.yaml").write_text("resources: [service.yaml]\n")
    service = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  type: NodePort\n" \
              "  ports:\n    - port: 80\n      nodePort: 9999   # outside the range\n"
    (tmp_path / "base" / "service.yaml").write_text(service)
    for overlay in ("east", "west"):
        (tmp_path / overlay).mkdir()
        (tmp_path / overlay / "kustomization.yaml").write_text(f"namespace: {overlay}\nresources: [../base]\n")
    monkeypatch.chdir(tmp_path)
    fixes = [f["fix"] for f in findings("--unsafe-fixes", "east", "west") if f["rule"] == "KP204"]
    assert [fix["description"].split(",")[0] for fix in fixes] == ["move nodePort 9999 to 30000"] * 2
    result = run("lint", "--fix", "--unsafe-fixes", "east", "west")
    assert (tmp_path / "base" / "service.yaml").read_text() == service.replace("9999   #", "30000   #"), result.output
    assert "fixed 2 findings in 1 file" in result.output
