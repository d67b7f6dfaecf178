"""Fix safety as docs/fix.md defines it, and reasons for fixes not made that are true and name a
place (issue 32, "Words and output"). Fixtures: tests/fix/reasons (an OpenTelemetry-collector-like
chart whose ports are a map), tests/fix/kp401 and tests/fix/kustomize; each test copies what it
uses. The KP401 file with an invalid document is written here: under tests/fix, the never-worse
test would lint it and meet its input error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.loading.helm.charts import in_process_engine

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fix"
runner = CliRunner()
needs_engine = pytest.mark.skipif(in_process_engine() is None,
                                  reason="this test needs Helm's in-process engine, `helm-python-sdk`, which is not installed "
                                       "(or has no wheel for this platform): pip install '.[helm]'")


def run(*args: str):
    return runner.invoke(app, list(args))


def fixes(*args: str) -> list[dict]:
    result = run("lint", "--format", "json", *args)
    return [finding for finding in json.loads(result.stdout)["findings"] if finding.get("fix")]


# --- KP401: safe only with the cluster's own pod range --------------------------------------------


@pytest.mark.parametrize("name, applicability, source", [
    ("configmap-kubeadm.yaml", "safe", "kubeadm networking.podSubnet (configmap-kubeadm.yaml:26)"),
    ("standalone-controller-manager.yaml", "safe",
     "kube-controller-manager --cluster-cidr (standalone-controller-manager.yaml:22)"),
    ("configmap-flannel.yaml", "unsafe", "flannel net-conf.json Network (configmap-flannel.yaml:25)"),
])
def test_kp401_is_safe_only_with_the_controller_managers_or_kubeadms_range(
        tmp_path, monkeypatch, name, applicability, source):
    shutil.copyfile(FIXTURES / "kp401" / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    [found] = fixes("--select", "KP401", name)
    assert found["fix"]["applicability"] == applicability
    assert f"the pod CIDR from {source}" in found["fix"]["description"]


def test_kp401_from_flannel_is_not_applied_without_unsafe_fixes(tmp_path, monkeypatch):
    path = tmp_path / "configmap-flannel.yaml"
    shutil.copyfile(FIXTURES / "kp401" / "configmap-flannel.yaml", path)
    monkeypatch.chdir(tmp_path)
    before = path.read_bytes()
    run("lint", "--fix", "--select", "KP401", path.name)
    assert path.read_bytes() == before
    run("lint", "--fix", "--unsafe-fixes", "--select", "KP401", path.name)
    assert b"      clusterCIDR: 10.42.0.0/16\n" in path.read_bytes()


KP401_WITH_INVALID_DOCUMENT = """\
# kube-proxy's clusterCIDR is empty and kubeadm states the pod subnet, but the file's third
# document is not valid YAML: the fix, which checks the whole file around its edit, names it.
apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-proxy
  namespace: kube-system
data:
  config.conf: |
    apiVersion: kubeproxy.config.k8s.io/v1alpha1
    kind: KubeProxyConfiguration
    mode: ipvs
    clusterCIDR: ""
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: kubeadm-config
  namespace: kube-system
data:
  ClusterConfiguration: |
    apiVersion: kubeadm.k8s.io/v1beta3
    kind: ClusterConfiguration
    networking:
      podSubnet: 10.244.0.0/16
---
apiVersion: v1
kind: Service
metadata: {name: broken
spec: [
"""


def test_kp401_names_an_invalid_document_of_the_file_as_the_cause(tmp_path, monkeypatch):
    path = tmp_path / "kp401.yaml"
    path.write_text(KP401_WITH_INVALID_DOCUMENT)
    monkeypatch.chdir(tmp_path)
    [found] = fixes("--select", "KP401", path.name)
    assert found["fix"]["notApplied"].startswith(
        "kp401.yaml:30: YAML document 3 of kp401.yaml is not valid YAML (")


# --- Kustomize: a base edit that renders the same value is safe ----------------------------------


def test_unquote_in_a_kustomize_base_is_safe_and_made_by_fix(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES / "kustomize", tmp_path / "kustomize")
    (tmp_path / ".git").mkdir()  # a repository: an overlay's fix may reach its base
    monkeypatch.chdir(tmp_path)
    base = [f for f in fixes("kustomize/overlays") if f["file"] == "kustomize/base/service.yaml"]
    assert [f["fix"]["applicability"] for f in base] == ["safe", "safe"]
    removal = [f for f in fixes("kustomize/overlays") if f["rule"] == "KP104"]
    assert {f["fix"]["applicability"] for f in removal} == {"unsafe"}  # a removal shifts other overlays' lists
    service = tmp_path / "kustomize" / "base" / "service.yaml"
    before = service.read_text()
    run("lint", "--fix", "kustomize/overlays")
    assert service.read_text() == before.replace('targetPort: "8080"', "targetPort: 8080")


# --- Helm: a values key under a map a `range` walks ------------------------------------------------


@needs_engine
def test_a_key_of_a_ranged_map_is_found_where_the_values_file_holds_it(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES / "reasons" / "otel-ports", tmp_path / "otel-ports")
    monkeypatch.chdir(tmp_path)
    [moved] = [f for f in fixes("--unsafe-fixes", "otel-ports") if f["rule"] == "KP301"]
    assert "notApplied" not in moved["fix"], moved["fix"]
    assert "(set .Values.ports.otlp.hostPort in otel-ports/values.yaml:8)" in moved["fix"]["description"]
    values = tmp_path / "otel-ports" / "values.yaml"
    before = values.read_text()
    run("lint", "--fix", "--unsafe-fixes", "otel-ports")
    assert values.read_text() == before.replace("    hostPort: 4317\n", "    hostPort: 4316\n")


# Two entries of one Service written by one `include` line: the finding and the entry it collides
# with sit on the same template line, which is no other finding, so this finding's entry moves
# (seen on the traefik chart). The include writes it: the move follows it into the `define`, whose
# line reads `.Values.websecure`, and edits that key (issue 34; it said "the include writes it").
SERVICE_PORTS = """\
{{- define "web.ports" }}
    - name: web
      port: 80
      nodePort: {{ .Values.web }}
    - name: websecure
      port: 443
      nodePort: {{ .Values.websecure }}
{{- end }}
"""
SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  type: NodePort
  selector: {app: web}
  ports:
  {{- include "web.ports" . }}
"""


@needs_engine
def test_a_duplicate_nodeport_written_by_one_include_line_is_moved_in_the_key_its_define_reads(
        tmp_path, monkeypatch):
    chart = tmp_path / "web"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: web\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("web: 32080\nwebsecure: 32080\n")
    (chart / "templates" / "_ports.tpl").write_text(SERVICE_PORTS)
    (chart / "templates" / "service.yaml").write_text(SERVICE)
    monkeypatch.chdir(tmp_path)
    [kp203] = [f for f in fixes("--unsafe-fixes", "web") if f["rule"] == "KP203"]
    assert kp203["fix"]["description"].startswith("move nodePort 32080 to 30000"), kp203["fix"]
    assert kp203["fix"]["description"].endswith("(set .Values.websecure in web/values.yaml:2)"), kp203["fix"]
    assert "notApplied" not in kp203["fix"], kp203["fix"]
