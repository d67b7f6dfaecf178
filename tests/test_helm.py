"""Helm charts: rendering, position mapping to template and values lines, failures, stdin input.

The fixture charts in tests/charts/ were written for these tests (see its README). Positions
are checked to the line and column, relative to the repository root like a user would run it.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from external_tools import missing_tools_reason

from kubelint_ports.cli import app
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.vocabulary import Location
from kubelint_ports.loading import LoadResult, discover, display_path, load, load_bytes
from kubelint_ports.loading.helm import charts as helm_module
from kubelint_ports.loading.helm.charts import (
    HelmOptions, helm_template_command, in_process_engine, merge_set, set_keys, split_template_output)
from kubelint_ports.loading.helm.chart_files import repository_root
from kubelint_ports.loading.helm.templatemap import TemplateDocument, TemplateSource, ValuesFile, ValuesSource

ROOT = Path(__file__).resolve().parents[1]
CHARTS = "tests/charts"
WEB = f"{CHARTS}/web"
HOSTPORTS = f"{WEB}/values-hostports.yaml"
RENDERED = ROOT / CHARTS / "web-rendered.yaml"

needs_engine = pytest.mark.skipif(
    in_process_engine() is None,
    reason="this test needs Helm's in-process engine, `helm-python-sdk`, which is not installed (or has no "
           "wheel for this platform): pip install '.[helm]'")
HELM_BINARY_MISSING = missing_tools_reason(("helm", "see https://helm.sh/docs/intro/install/"),
                                           who="comparing with a real `helm`")
needs_helm_binary = pytest.mark.skipif(HELM_BINARY_MISSING is not None, reason=HELM_BINARY_MISSING or "")


@pytest.fixture(autouse=True)
def at_repository_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def lint(*paths: str, stdin: bytes | None = None, **helm):
    return lint_paths(list(paths), LintOptions(helm=HelmOptions(**helm) if helm else None),
                      stdin=io.BytesIO(stdin) if stdin is not None else None)


def where(location) -> tuple[str, int, int]:
    return location.path, location.line, location.column


def findings_of(report, rule_id: str) -> list:
    return [finding for finding in report.findings if finding.rule_id == rule_id]


def one(report, rule_id: str, name: str):
    found = [f for f in findings_of(report, rule_id) if f.subject.name == name]
    assert len(found) == 1, [str(f.location) + " " + f.rule_id for f in report.findings]
    return found[0]


# --- rendering and positions ------------------------------------------------------------------


@needs_engine
def test_defaults_render_quietly_and_skip_notes_and_test_hooks():
    report = lint(WEB)
    assert report.diagnostics == []
    assert report.findings == []  # the tests/ hook's hostPort 31999 is not linted
    assert (report.objects, report.files) == (5, 4)  # NOTES.txt and tests/ are not files either


@needs_engine
def test_test_hooks_are_linted_when_asked():
    report = lint(WEB, include_tests=True)
    hook = one(report, "KP101", "web-test-connection")
    assert where(hook.location) == (f"{WEB}/templates/tests/test-connection.yaml", 15, 11)


@needs_engine
def test_values_override_lands_on_template_and_values_lines():
    report = lint(WEB, values=(HOSTPORTS,))
    assert report.diagnostics == []
    host_port = one(report, "KP101", "web-web")
    assert where(host_port.location) == (f"{WEB}/templates/deployment.yaml", 31, 15)
    assert (host_port.location.end_line, host_port.location.end_column) == (31, 51)
    assert host_port.template == "web/templates/deployment.yaml"
    assert [where(r) for r in host_port.related] == [(HOSTPORTS, 3, 3)]
    assert host_port.related[0].message == ".Values.web.hostPort, used at tests/charts/web/templates/deployment.yaml:31"

    collision = one(report, "KP201", "web-web")
    assert [where(r) for r in collision.related] == [(f"{WEB}/templates/service.yaml", 14, 7), (HOSTPORTS, 3, 3)]

    reserved = one(report, "KP303", "web-agent")  # hostNetwork on, port 9100 from the defaults
    assert where(reserved.location) == (f"{WEB}/templates/daemonset.yaml", 21, 15)
    assert [where(r) for r in reserved.related] == [(f"{WEB}/values.yaml", 26, 3)]


@needs_engine
def test_host_network_line_and_its_values_line():
    loaded = load([WEB], helm=HelmOptions(values=(HOSTPORTS,)))
    agent = next(d for d in loaded.documents if d.origin.endswith("daemonset.yaml"))
    assert where(agent.location("spec.template.spec.hostNetwork")) == (f"{WEB}/templates/daemonset.yaml", 16, 7)
    assert [where(r) for r in agent.value_locations("spec.template.spec.hostNetwork")] == [(HOSTPORTS, 9, 3)]
    # A field no template line writes: the deepest line that does, never line 1.
    assert where(agent.location("spec.template.spec.nodeSelector.zone")) == (f"{WEB}/templates/daemonset.yaml", 14, 5)
    assert where(agent.location("")) == (f"{WEB}/templates/daemonset.yaml", 2, 1)  # the object's first line


@needs_engine
def test_subchart_renders_with_parent_and_its_values_come_from_the_parent_files():
    report = lint(WEB, values=(HOSTPORTS,))
    database = one(report, "KP101", "web-db")
    assert where(database.location) == (f"{WEB}/charts/db/templates/statefulset.yaml", 19, 15)
    assert [where(r) for r in database.related] == [(HOSTPORTS, 12, 3)]
    assert database.related[0].message.startswith("db.hostPort (.Values.hostPort of the subchart)")
    loaded = load([WEB])
    statefulset = next(d for d in loaded.documents if d.origin.endswith("statefulset.yaml"))
    port = "spec.template.spec.containers[0].ports[0].containerPort"
    assert [where(r) for r in statefulset.value_locations(port)] == [(f"{WEB}/charts/db/values.yaml", 1, 1)]


@needs_engine
def test_set_overrides_values_and_claims_no_values_file():
    report = lint(WEB, set=("web.hostPort=8080", "sidecar.enabled=true"))
    host_port = one(report, "KP101", "web-web")
    assert "8080" in host_port.message
    # The sidecar now comes first; the web container is still found by its name.
    assert where(host_port.location) == (f"{WEB}/templates/deployment.yaml", 31, 15)
    assert host_port.related == ()  # the value came from the command line


@needs_engine
def test_set_string_fails_the_values_schema():
    report = lint(WEB, set_string=("web.hostPort=8080",))
    assert len(report.diagnostics) == 1
    assert "at '/web/hostPort': got string, want integer" in report.diagnostics[0].message


@needs_engine
def test_documents_matched_when_a_conditional_drops_one():
    # Without metrics the template has three Services and renders two: the admin Service must
    # still map to its own lines, not to the metrics one's.
    loaded = load([WEB])
    admin = next(d for d in loaded.documents if d.origin.endswith("service.yaml") and "admin" in str(d.root.value))
    assert where(admin.location("spec.ports[0].nodePort")) == (f"{WEB}/templates/service.yaml", 41, 7)
    with_metrics = load([WEB], helm=HelmOptions(set=("metrics.enabled=true",)))
    services = [d for d in with_metrics.documents if d.origin.endswith("service.yaml")]
    assert [d.location("spec.ports[0].port").line for d in services] == [11, 27, 40]


@needs_engine
def test_release_name_namespace_and_kube_version_reach_the_templates(tmp_path):
    chart = tmp_path / "caps"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: caps\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(textwrap.dedent("""\
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{ .Release.Name }}
          namespace: {{ .Release.Namespace }}
        data:
          kube: {{ .Capabilities.KubeVersion.Version | quote }}
        """))
    default = load([str(chart)]).documents[0]
    assert "caps" in str(default.root.value)  # release name defaults to the chart's name
    loaded = load([str(chart)], helm=HelmOptions(release_name="prod", namespace="shop", kube_version="1.29.3"))
    text = str(loaded.documents[0].root.value)
    assert "'prod'" in text and "'shop'" in text and "v1.29.3" in text
    bad = load([str(chart)], helm=HelmOptions(kube_version="banana"))
    assert len(bad.diagnostics) == 1 and "banana" in bad.diagnostics[0].message


@needs_engine
def test_non_yaml_outputs_are_skipped(tmp_path):
    chart = tmp_path / "extras"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: extras\nversion: 0.1.0\n")
    (chart / "templates" / "banner.txt").write_text("Welcome to {{ .Release.Name }}: not YAML at all\n")
    (chart / "templates" / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n")
    report = lint(str(chart))
    assert report.diagnostics == [] and (report.files, report.objects) == (1, 1)


@needs_engine
def test_a_separator_glued_to_a_comment_splits_documents_as_helm_does(tmp_path):
    """cert-manager's templates chomp the line break after `---` and render `---# comment`: Helm
    splits there (releaseutil), YAML alone would call it a syntax error (issue 24's corpus)."""
    chart = tmp_path / "glued"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: glued\nversion: 0.1.0\n")
    (chart / "templates" / "two.yaml").write_text(textwrap.dedent("""\
        apiVersion: v1
        kind: ServiceAccount
        metadata: {name: a}
        ---
        {{- /* chomped */}}# the pod
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          containers: [{name: c, ports: [{containerPort: 80, hostPort: 8080}]}]
        """))
    report = lint(str(chart))
    assert report.diagnostics == [] and report.objects == 2
    [finding] = findings_of(report, "KP101")
    assert finding.location.path.endswith("glued/templates/two.yaml") and finding.location.line == 10


@needs_engine
def test_items_written_by_a_range_land_on_the_range_not_on_a_literal_neighbour(tmp_path):
    """ingress-nginx's controller: `range` writes http and https, a literal `- name: metrics`
    follows. hostPort 443 (the range's second item) landed on the metrics item (issue 24 corpus)."""
    chart = tmp_path / "ranged"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: ranged\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("ports: {http: 80, https: 443}\nmetrics: true\n")
    (chart / "templates" / "ds.yaml").write_text(textwrap.dedent("""\
        apiVersion: apps/v1
        kind: DaemonSet
        metadata: {name: controller}
        spec:
          template:
            spec:
              containers:
                - name: controller
                  ports:
                  {{- range $key, $value := .Values.ports }}
                    - name: {{ $key }}
                      containerPort: {{ $value }}
                      hostPort: {{ $value }}
                  {{- end }}
                  {{- if .Values.metrics }}
                    - name: metrics
                      containerPort: 10254
                  {{- end }}
        """))
    report = lint(str(chart))
    lines = sorted({f.location.line for f in findings_of(report, "KP101")})
    assert lines == [13], [(f.message, f.location) for f in report.findings]


@needs_engine
def test_port_name_and_routing_findings_land_on_template_lines(tmp_path):
    chart = tmp_path / "shop"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: shop\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("web:\n  metricsPortName: prometheus-metrics\nservice:\n  targetPort: http\n")
    template = chart / "templates" / "app.yaml"
    template.write_text(textwrap.dedent("""\
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {{ .Release.Name }}
        spec:
          selector:
            matchLabels: {app: shop}
          template:
            metadata:
              labels: {app: shop}
            spec:
              containers:
                - name: shop
                  image: nginx:1.27
                  ports:
                    - name: web
                      containerPort: 8080
                    - name: {{ .Values.web.metricsPortName }}
                      containerPort: 9090
        ---
        apiVersion: v1
        kind: Service
        metadata:
          name: {{ .Release.Name }}
        spec:
          selector: {app: shop}
          ports:
            - name: http
              port: 80
              targetPort: {{ .Values.service.targetPort }}
        """))
    report = lint(str(chart))
    values = str(chart / "values.yaml")
    name = one(report, "KP002", "shop")
    assert where(name.location) == (str(template), 18, 15) and name.template == "shop/templates/app.yaml"
    assert (values, 2, 3) in [where(r) for r in name.related]
    target = one(report, "KP502", "shop")
    assert where(target.location) == (str(template), 30, 7)
    assert (values, 4, 3) in [where(r) for r in target.related]


# --- failures ---------------------------------------------------------------------------------


@needs_engine
def test_values_schema_failure_is_an_input_error_at_the_offending_value():
    report = lint(WEB, f"{CHARTS}/web-rendered.yaml", values=(f"{CHARTS}/values-bad-schema.yaml",))
    assert len(report.diagnostics) == 1
    diagnostic = report.diagnostics[0]
    assert where(diagnostic.location) == (f"{CHARTS}/values-bad-schema.yaml", 3, 3)
    assert diagnostic.message.startswith(f"cannot render Helm chart {WEB}: values don't meet the specifications")
    assert "got string, want integer" in diagnostic.message
    assert report.findings  # the other input is still linted


@needs_engine
def test_template_error_names_the_chart_template_line_and_helm_message():
    report = lint(f"{CHARTS}/broken-template", "examples/mysql-hostport.yaml")
    assert len(report.diagnostics) == 1
    diagnostic = report.diagnostics[0]
    assert where(diagnostic.location) == (f"{CHARTS}/broken-template/templates/service.yaml", 8, 26)
    assert f"cannot render Helm chart {CHARTS}/broken-template" in diagnostic.message
    assert "nil pointer evaluating interface {}.http" in diagnostic.message
    assert findings_of(report, "KP101")  # the manifest beside it is linted


@needs_engine
def test_missing_dependency_is_named_and_never_fetched():
    report = lint(f"{CHARTS}/missing-dep")
    assert len(report.diagnostics) == 1
    diagnostic = report.diagnostics[0]
    assert where(diagnostic.location) == (f"{CHARTS}/missing-dep", 0, 0)
    assert "missing dependencies: redis (19.6.0 oci://registry.example.com/charts)" in diagnostic.message
    assert "helm dependency build tests/charts/missing-dep" in diagnostic.message


REMOTE = f"{CHARTS}/remote-schema"
REMOTE_REF = ("http://127.0.0.1:9/v1.32.2/_definitions.json"
              "#/definitions/io.k8s.api.core.v1.PodSpec/properties/nodeSelector")


@needs_engine
def test_a_remote_schema_reference_is_left_out_of_validation_with_a_note_at_its_line():
    """NGINX Ingress's schema refers to Kubernetes' published schemas: the chart lints, validated
    against its local parts, and a note says what was not validated, at the first such `$ref`."""
    report = lint(REMOTE)
    assert report.diagnostics == []
    agent = one(report, "KP101", "remote-schema-agent")
    assert where(agent.location) == (f"{REMOTE}/templates/daemonset.yaml", 21, 15)
    assert report.notes == [
        f"{REMOTE}/values.schema.json:10:11: refers to the schema {REMOTE_REF}, outside it, which kubelint-ports "
        "does not fetch: the chart is rendered with its values validated against the rest of the schema only "
        "(Helm's --skip-schema-validation, for those parts alone)"]


@needs_engine
def test_the_local_parts_of_a_schema_with_a_remote_reference_still_validate():
    bad = lint(REMOTE, values=(f"{REMOTE}/values-bad-port.yaml",))
    assert [where(d.location) for d in bad.diagnostics] == [(f"{REMOTE}/values-bad-port.yaml", 2, 3)]
    assert "at '/agent/hostPort': got string, want integer" in bad.diagnostics[0].message
    # The part behind the remote reference accepts anything (Helm would have checked it against a
    # schema it fetched; we check nothing rather than guess).
    report = lint(REMOTE, set=("agent.nodeSelector=linux",))
    assert report.diagnostics == [] and findings_of(report, "KP101")


def remote_chart_served_locally(tmp_path):
    """The fixture chart with its remote `$ref` pointing at a listening socket of this test: any
    fetch, by this process or by Helm's Go code in the worker, would connect to it."""
    import socket

    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    chart = tmp_path / "remote-schema"
    shutil.copytree(ROOT / REMOTE, chart)
    schema = chart / "values.schema.json"
    schema.write_text(schema.read_text().replace("127.0.0.1:9/", f"127.0.0.1:{server.getsockname()[1]}/"))
    return chart, server


def assert_never_connected(server) -> None:
    with server:
        with pytest.raises(BlockingIOError):  # nothing waiting to be accepted: no one connected
            server.accept()


@needs_engine
def test_a_remote_schema_reference_is_never_fetched(tmp_path, monkeypatch):
    import socket

    chart, server = remote_chart_served_locally(tmp_path)

    def refuse(*args, **kwargs):
        raise AssertionError(f"a network connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    valid = lint(str(chart))
    invalid = lint(str(chart), values=(str(chart / "values-bad-port.yaml"),))
    assert valid.diagnostics == [] and findings_of(valid, "KP101")
    assert ":10:11: refers to the schema http://127.0.0.1:" in valid.notes[0]
    assert len(invalid.diagnostics) == 1 and "got string, want integer" in invalid.diagnostics[0].message
    assert_never_connected(server)


def test_no_engine_and_no_binary_is_a_clear_input_error(monkeypatch):
    monkeypatch.setattr(helm_module, "in_process_engine", lambda: None)
    monkeypatch.setenv("PATH", "")
    report = lint(WEB, "examples/mysql-hostport.yaml")
    assert [d.location.path for d in report.diagnostics] == [WEB]
    message = report.diagnostics[0].message
    assert "no Helm engine" in message and "pip install '.[helm]'" in message
    assert "a `helm` binary on PATH" in message and "--helm-binary" in message
    assert findings_of(report, "KP101")


def test_no_engine_exits_2_from_the_command_line(monkeypatch):
    monkeypatch.setattr(helm_module, "in_process_engine", lambda: None)
    monkeypatch.setenv("PATH", "")
    result = CliRunner().invoke(app, ["lint", WEB])
    assert result.exit_code == 2, result.output
    assert "input-error cannot render Helm chart tests/charts/web: no Helm engine" in result.output


# --- the `helm template` fallback ---------------------------------------------------------------


def test_helm_template_command_building():
    options = HelmOptions(values=("a.yaml", "b.yaml"), set=("x=1", "y.z=2"), set_string=("tag=010",),
                          namespace="shop", kube_version="1.30.0", helm_binary="/opt/helm")
    assert helm_template_command("/opt/helm", "charts/web", "web", options) == [
        "/opt/helm", "template", "web", "charts/web", "--namespace", "shop", "--kube-version", "1.30.0",
        "--values", "a.yaml", "--values", "b.yaml", "--set", "x=1", "--set", "y.z=2",
        "--set-string", "tag=010", "--skip-tests"]
    assert helm_template_command("helm", "-odd", "r", HelmOptions(include_tests=True)) == [
        "helm", "template", "r", os.path.join(".", "-odd")]
    assert "--dependency-update" not in helm_template_command("helm", "c", "r", options)


def test_split_template_output():
    text = RENDERED.read_text()
    manifests = split_template_output(text)
    assert sorted(manifests) == ["web/charts/db/templates/statefulset.yaml", "web/templates/daemonset.yaml",
                                 "web/templates/deployment.yaml", "web/templates/service.yaml"]
    assert manifests["web/templates/service.yaml"].count("kind: Service") == 2


@pytest.fixture
def fake_helm(tmp_path):
    """A stand-in `helm` that records its arguments and prints `helm template` output."""
    script = tmp_path / "helm"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import os, sys
        with open({str(tmp_path / "args.txt")!r}, "w") as handle:
            handle.write("\\n".join(sys.argv[1:]))
        if os.path.exists({str(tmp_path / "fail")!r}):  # Helm gets none of our environment to be told by
            sys.stderr.write("Error: template: web/templates/service.yaml:14:20: executing boom\\n")
            sys.exit(1)
        sys.stdout.write(open({str(RENDERED)!r}).read())
        """))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.skipif(sys.platform == "win32", reason="a shebang script stands in for helm")
def test_binary_fallback_runs_helm_template_and_maps_positions(fake_helm, tmp_path):
    report = lint(WEB, values=(HOSTPORTS,), helm_binary=str(fake_helm))
    assert (tmp_path / "args.txt").read_text().split("\n") == [
        "template", "web", WEB, "--values", HOSTPORTS, "--skip-tests"]
    assert report.diagnostics == []
    host_port = one(report, "KP101", "web-web")
    assert where(host_port.location) == (f"{WEB}/templates/deployment.yaml", 31, 15)
    assert [where(r) for r in host_port.related] == [(HOSTPORTS, 3, 3)]


@pytest.mark.skipif(sys.platform == "win32", reason="a shebang script stands in for helm")
def test_binary_failure_is_an_input_error_at_the_template_line(fake_helm, tmp_path):
    (tmp_path / "fail").touch()
    report = lint(WEB, helm_binary=str(fake_helm))
    assert len(report.diagnostics) == 1
    assert where(report.diagnostics[0].location) == (f"{WEB}/templates/service.yaml", 14, 20)
    assert report.diagnostics[0].message.endswith("template: web/templates/service.yaml:14:20: executing boom")


REMOTE_RENDERED = """\
---
# Source: remote-schema/templates/daemonset.yaml
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: remote-schema-agent
spec:
  selector:
    matchLabels:
      app: agent
  template:
    metadata:
      labels:
        app: agent
    spec:
      nodeSelector:
        kubernetes.io/os: linux
      containers:
        - name: agent
          image: datadog/agent:7
          ports:
            - containerPort: 8125
              hostPort: 8125
              protocol: UDP
"""


@pytest.mark.skipif(sys.platform == "win32", reason="a shebang script stands in for helm")
def test_binary_renders_a_packaged_copy_whose_schemas_refer_to_nothing_outside(tmp_path):
    """`helm template` would fetch the remote `$ref`: it renders Helm's own package of the chart
    (`helm package`) with the schema made local instead, never the chart directory."""
    chart, server = remote_chart_served_locally(tmp_path)
    script = tmp_path / "helm"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import os, shutil, sys, tarfile
        with open({str(tmp_path / "calls.txt")!r}, "a") as handle:
            handle.write(" ".join(sys.argv[1:]) + "\\n")
        if sys.argv[1] == "package":
            chart, destination = sys.argv[2], sys.argv[4]
            with tarfile.open(os.path.join(destination, "remote-schema-0.1.0.tgz"), "w:gz") as archive:
                archive.add(chart, arcname="remote-schema")
        else:
            shutil.copy(sys.argv[3], {str(tmp_path / "rendered.tgz")!r})
            sys.stdout.write({REMOTE_RENDERED!r})
        """))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    report = lint(str(chart), helm_binary=str(script))
    assert report.diagnostics == []
    package, template = (tmp_path / "calls.txt").read_text().splitlines()
    assert package.startswith(f"package {chart} --destination ")
    assert template.startswith("template remote-schema ") and template.split()[2].endswith(".tgz")
    import tarfile

    with tarfile.open(tmp_path / "rendered.tgz") as archive:
        schema = json.load(archive.extractfile("remote-schema/values.schema.json"))
    agent = schema["properties"]["agent"]["properties"]
    assert agent["nodeSelector"] == {}  # the remote part accepts anything
    assert agent["hostPort"] == {"type": "integer", "minimum": 1, "maximum": 65535}  # the local part stays
    assert where(one(report, "KP101", "remote-schema-agent").location) == (
        where(Location(display_path(str(chart / "templates" / "daemonset.yaml")), 21, 15)))
    assert report.notes and "refers to the schema http://127.0.0.1:" in report.notes[0]
    assert_never_connected(server)


def test_binary_that_cannot_run_is_an_input_error(tmp_path):
    report = lint(WEB, helm_binary=str(tmp_path / "no-such-helm"))
    assert len(report.diagnostics) == 1 and "cannot run" in report.diagnostics[0].message


@needs_helm_binary
def test_real_helm_binary_agrees_with_the_embedded_engine():
    binary = lint(WEB, values=(HOSTPORTS,), helm_binary=shutil.which("helm"))
    assert binary.diagnostics == []
    rendered = [(f.rule_id, where(f.location), [where(r) for r in f.related]) for f in binary.findings]
    assert ("KP101", (f"{WEB}/templates/deployment.yaml", 31, 15), [(HOSTPORTS, 3, 3)]) in rendered
    if in_process_engine() is not None:
        embedded = lint(WEB, values=(HOSTPORTS,))
        assert rendered == [(f.rule_id, where(f.location), [where(r) for r in f.related]) for f in embedded.findings]


# --- `helm template` output on stdin --------------------------------------------------------------


def test_stdin_helm_template_output_maps_to_the_chart_root():
    report = lint("-", stdin=RENDERED.read_bytes(), chart_root=WEB, values=(HOSTPORTS,))
    host_port = one(report, "KP101", "web-web")
    assert where(host_port.location) == (f"{WEB}/templates/deployment.yaml", 31, 15)
    assert [where(r) for r in host_port.related] == [(HOSTPORTS, 3, 3)]
    collision = one(report, "KP201", "web-web")
    assert where(collision.related[0]) == (f"{WEB}/templates/service.yaml", 14, 7)
    database = one(report, "KP101", "web-db")
    assert where(database.location) == (f"{WEB}/charts/db/templates/statefulset.yaml", 19, 15)
    assert report.files == 1


def test_stdin_without_the_values_used_claims_no_values_line(monkeypatch):
    monkeypatch.chdir(ROOT / CHARTS)  # ./web is the chart the output names
    report = lint("-", stdin=RENDERED.read_bytes())
    host_port = one(report, "KP101", "web-web")
    assert where(host_port.location) == ("web/templates/deployment.yaml", 31, 15)
    assert host_port.related == ()  # values.yaml says 0: the 30080 came from a file not given
    reserved = one(report, "KP303", "web-agent")
    assert [where(r) for r in reserved.related] == [("web/values.yaml", 26, 3)]  # 9100 matches


def test_stdin_with_no_chart_found_keeps_stdin_positions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report = lint("-", stdin=RENDERED.read_bytes())
    host_port = one(report, "KP101", "web-web")
    assert where(host_port.location) == ("<stdin>", 77, 15)
    assert host_port.template == "web/templates/deployment.yaml"


def test_cli_reads_helm_template_output_from_stdin_with_chart_root():
    result = CliRunner().invoke(app, ["lint", "-", "--chart-root", WEB, "-f", HOSTPORTS, "--format", "json"],
                                input=RENDERED.read_text())
    assert result.exit_code == 1, result.output
    findings = json.loads(result.output)["findings"]
    host_port = next(f for f in findings if f["rule"] == "KP101" and f["object"]["name"] == "web-web")
    assert (host_port["file"], host_port["line"], host_port["column"]) == (f"{WEB}/templates/deployment.yaml", 31, 15)
    assert [(r["file"], r["line"]) for r in host_port["related"]] == [(HOSTPORTS, 3)]


def test_cli_rejects_a_chart_root_without_chart_yaml():
    result = CliRunner().invoke(app, ["lint", "-", "--chart-root", CHARTS], input="")
    assert result.exit_code == 2
    assert "not a chart directory" in result.output


# --- symlinks -------------------------------------------------------------------------------------

LINKED = f"{CHARTS}/linked"
needs_symlinks = pytest.mark.skipif(not os.path.islink(ROOT / LINKED / "app" / "charts" / "library"),
                                    reason="this checkout has no symlinks (git's core.symlinks=false)")


def copy_linked(destination: Path) -> Path:
    """tests/charts/linked (a chart whose charts/library -> ../../library) copied with its link."""
    shutil.copytree(ROOT / LINKED, destination, symlinks=True)
    assert repository_root(destination) is None or repository_root(destination) == str(destination.parent), \
        "the copy must not sit inside a git work tree"
    return destination


@needs_engine
@needs_symlinks
def test_a_symlink_inside_the_directory_named_is_followed(tmp_path):
    """rook's deploy/charts: each chart's charts/library links to the library chart beside it, inside
    the directory the user named (here outside any repository, so only the name allows it)."""
    named = copy_linked(tmp_path / "linked")
    app = str(named / "app")
    result = LoadResult()
    helm_module.load_chart(app, None, result, named=[str(named)])
    assert result.diagnostics == [] and [d.origin for d in result.documents] == ["app/templates/deployment.yaml"]
    alone = LoadResult()  # the chart named alone: the library lies outside what was named
    helm_module.load_chart(app, None, alone)
    assert [d.message for d in alone.diagnostics] == [
        f"cannot render Helm chart {display_path(app)}: {display_path(app + '/charts/library')} is a symlink to "
        f"{named / 'library'}, outside the chart: Helm would read it; kubelint-ports reads nothing outside its inputs"]


@needs_engine
@needs_symlinks
def test_a_symlink_inside_the_repository_is_followed_and_one_leaving_it_is_refused(tmp_path):
    """A chart in a git checkout (NGINX's `crds -> ../../config/crd/bases`) may link anywhere in the
    repository; a link leaving it is refused, as before."""
    repository = tmp_path / "repository"
    (repository / ".git").mkdir(parents=True)
    copy_linked(repository / "deploy")
    report = lint_paths([str(repository / "deploy" / "app")])
    assert report.diagnostics == []
    assert where(one(report, "KP101", "app").location) == (
        display_path(str(repository / "deploy" / "app" / "templates" / "deployment.yaml")), 21, 15)

    elsewhere = copy_linked(tmp_path / "elsewhere")  # the library now outside the repository
    link = repository / "deploy" / "app" / "charts" / "library"
    link.unlink()
    link.symlink_to(elsewhere / "library")
    report = lint_paths([str(repository / "deploy")])
    assert len(report.diagnostics) == 1
    assert f"is a symlink to {elsewhere / 'library'}, outside the chart and " in report.diagnostics[0].message
    assert display_path(str(repository)) in report.diagnostics[0].message


@needs_engine
@needs_symlinks
def test_a_symlinked_directory_is_checked_like_the_chart(tmp_path):
    """What a followed link leads to is walked too: a FIFO or a link leaving the repository there is
    refused as it would be in the chart itself."""
    repository = tmp_path / "repository"
    (repository / ".git").mkdir(parents=True)
    named = copy_linked(repository / "deploy")
    (tmp_path / "secret").write_text("password: hunter2\n")
    (named / "library" / "templates" / "secret.yaml").symlink_to(tmp_path / "secret")
    report = lint_paths([str(named / "app")])
    assert len(report.diagnostics) == 1 and "hunter2" not in report.diagnostics[0].message
    assert "app/charts/library/templates/secret.yaml is a symlink to" in report.diagnostics[0].message


# --- discovery ----------------------------------------------------------------------------------


def test_charts_found_while_walking_are_rendered_once_and_templates_never_read_as_yaml():
    found = list(discover([CHARTS, WEB, f"{WEB}/templates/deployment.yaml",
                           f"{WEB}/charts/db/templates/statefulset.yaml"]))
    assert found == [f"{CHARTS}/values-bad-schema.yaml", f"{CHARTS}/web-rendered.yaml", f"{CHARTS}/agents",
                     f"{CHARTS}/branches", f"{CHARTS}/broken-template", f"{CHARTS}/lines/definefix",
                     f"{CHARTS}/lines/dictarg", f"{CHARTS}/lines/helper", f"{CHARTS}/lines/maprange",
                     f"{CHARTS}/lines/podtemplate", f"{CHARTS}/lines/ranges", f"{CHARTS}/linked/app",
                     f"{CHARTS}/linked/library",
                     f"{CHARTS}/missing-dep", f"{CHARTS}/remote-schema", f"{CHARTS}/web"]


@needs_engine
def test_a_raw_template_given_directly_lints_its_chart():
    report = lint(f"{WEB}/templates/deployment.yaml", values=(HOSTPORTS,))
    assert report.diagnostics == []
    assert where(one(report, "KP101", "web-web").location) == (f"{WEB}/templates/deployment.yaml", 31, 15)


def test_plain_manifests_never_import_helm():
    code = ("import sys; from kubelint_ports.cli import app; from typer.testing import CliRunner; "
            "CliRunner().invoke(app, ['lint', 'examples/']); "
            "print(sorted(m for m in sys.modules if 'helm' in m))")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert completed.stdout.strip() == "[]"


# --- the mapping on its own ------------------------------------------------------------------------

TEMPLATE = """\
{{- $ports := .Values.ports }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  annotations:
    note: |
      hostPort: 1
      containers: none
spec:
  template:
    spec:
      {{- if .Values.agent.hostNetwork }}
      hostNetwork: true
      {{- end }}
      containers:
      - name: app
        ports:
        {{- range .Values.ports }}
        - containerPort: {{ .containerPort }}
          hostPort: {{ .hostPort }}
        {{- end }}
        resources:
          {{- toYaml .Values.resources | nindent 10 }}
      - name: {{ index .Values "extra" "name" }}
        ports:
          - containerPort: {{ index .Values "extra" "port" }}
            hostPort: {{ $ports | len }}
"""
RENDERED_TEMPLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: r
  annotations:
    note: |
      hostPort: 1
      containers: none
spec:
  template:
    spec:
      hostNetwork: true
      containers:
      - name: app
        ports:
        - containerPort: 80
          hostPort: 80
        - containerPort: 443
          hostPort: 8443
        resources:
          limits:
            cpu: 100m
      - name: extra
        ports:
          - containerPort: 9000
            hostPort: 2
"""
VALUES = """\
agent:
  hostNetwork: true
ports:
  - containerPort: 80
    hostPort: 80
  - containerPort: 443
    hostPort: 8443
resources:
  limits:
    cpu: 100m
extra:
  name: extra
  port: 9000
"""


@pytest.fixture
def mapped(tmp_path) -> TemplateDocument:
    (tmp_path / "deployment.yaml").write_text(TEMPLATE)
    (tmp_path / "values.yaml").write_text(VALUES)
    values = ValuesSource([(ValuesFile(str(tmp_path / "values.yaml")), ())])
    source = TemplateSource("t/deployment.yaml", str(tmp_path / "deployment.yaml"), values, rendered_count=1)
    result = LoadResult()
    load_bytes(RENDERED_TEMPLATE.encode(), "rendered", result)
    document = result.documents[0]
    return TemplateDocument("t/deployment.yaml", document.root, "c/templates/deployment.yaml", source=source)


def test_range_items_map_to_the_ranged_item_and_its_values_index(mapped):
    second = "spec.template.spec.containers[0].ports[1].hostPort"
    assert (mapped.location(second).line, mapped.location(second).column) == (21, 11)
    assert [(r.line, r.column) for r in mapped.value_locations(second)] == [(7, 5)]  # ports[1].hostPort


def test_literal_lines_name_the_condition_that_enables_them(mapped):
    assert mapped.location("metadata.annotations.note").line == 7
    assert mapped.location("spec.template.spec.hostNetwork").line == 14
    enabling = mapped.value_locations("spec.template.spec.hostNetwork")
    assert [(r.line, r.column) for r in enabling] == [(2, 3)]
    assert enabling[0].message.startswith(".Values.agent.hostNetwork enables this")


def test_generated_blocks_point_at_the_generator_and_the_values_inside(mapped):
    cpu = "spec.template.spec.containers[0].resources.limits.cpu"
    assert (mapped.location(cpu).line, mapped.location(cpu).column) == (24, 11)
    assert [(r.line, r.column) for r in mapped.value_locations(cpu)] == [(10, 5)]


def test_index_calls_and_items_matched_by_name(mapped):
    port = "spec.template.spec.containers[1].ports[0].containerPort"
    assert (mapped.location(port).line, mapped.location(port).column) == (27, 13)
    assert [r.line for r in mapped.value_locations(port)] == [13]
    host_port = "spec.template.spec.containers[1].ports[0].hostPort"  # `$ports | len`, $ports := .Values.ports
    assert mapped.location(host_port).line == 28
    assert [(r.line, r.message) for r in mapped.value_locations(host_port)] == [
        (3, ".Values.ports, used at t/deployment.yaml:28")]


def document_of(tmp_path, template: str, rendered: str, values: str = "") -> TemplateDocument:
    """A rendered object placed in its template (and values file), for the mapping alone."""
    (tmp_path / "t.yaml").write_text(template)
    (tmp_path / "values.yaml").write_text(values)
    source = TemplateSource("t.yaml", str(tmp_path / "t.yaml"), ValuesSource([(ValuesFile(str(tmp_path / "values.yaml")), ())]),
                            rendered_count=1)
    result = LoadResult()
    load_bytes(rendered.encode(), "rendered", result)
    return TemplateDocument("t.yaml", result.documents[0].root, "c/templates/t.yaml", source=source)


BESIDE_START = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: ids
      ports:
        - name: first
          containerPort: 1
"""
BESIDE_TEMPLATE = BESIDE_START + """\
        {{- toYaml .Values.extra | nindent 8 }}
        - name: last
          containerPort: 2
    - name: places
      ports:
        - containerPort: {{ .Values.port }}
        {{- toYaml .Values.extra | nindent 8 }}
    - name: ranged
      ports:
        {{- range .Values.ranged }}
        - containerPort: {{ . }}
        {{- end }}
        {{- toYaml .Values.extra | nindent 8 }}
"""
BESIDE_RENDERED = BESIDE_START + """\
        - name: x
          containerPort: 10
        - name: y
          containerPort: 11
        - name: last
          containerPort: 2
    - name: places
      ports:
        - containerPort: 8080
        - name: x
          containerPort: 10
        - name: y
          containerPort: 11
    - name: ranged
      ports:
        - containerPort: 80
        - containerPort: 443
        - name: x
          containerPort: 10
"""
BESIDE_VALUES = """\
port: 8080
ranged: [80, 443]
extra:
  - name: x
    containerPort: 10
  - name: y
    containerPort: 11
"""


def test_list_items_beside_a_toyaml_are_told_apart_by_their_ids_then_their_places(tmp_path):
    document = document_of(tmp_path, BESIDE_TEMPLATE, BESIDE_RENDERED, BESIDE_VALUES)

    def at(container: int, port: int) -> tuple[int, list[int]]:
        path = f"spec.containers[{container}].ports[{port}].containerPort"
        return document.location(path).line, [r.line for r in document.value_locations(path)]

    # Literal names: `first` and `last` are the template's items, x and y the toYaml's (values from [0]).
    assert [at(0, index) for index in range(4)] == [(9, []), (10, [5]), (10, [7]), (12, [])]
    # No literal id tells: the literal item comes first, then the toYaml's items.
    assert [at(1, index) for index in range(3)] == [(15, [1]), (16, [5]), (16, [7])]
    # A `range` item repeats: how many it wrote is unknown, so its items stay on it (as before).
    assert [at(2, index)[0] for index in range(2)] == [20, 20]


def test_if_else_branches_are_read_from_the_values(tmp_path):
    from kubelint_ports.loading.helm.templatemap import parse_outline
    from kubelint_ports.loading.helm.templatemap_values import branch_taken

    template = textwrap.dedent("""\
        {{- if .Values.a }}
        one
        {{- else if and .Values.b (not .Values.c) }}
        two
        {{- else if .Values.d }}
        three
        {{- else }}
        four
        {{- end }}
        {{- with .Values.missing }}
        five
        {{- else }}
        six
        {{- end }}
        {{- if eq .Values.a "x" }}
        seven
        {{- end }}
        """)
    (tmp_path / "values.yaml").write_text("a: ''\nb: yes\nc: 0\nd: [1]\n")
    _, actions, lines = parse_outline(template)
    values = ValuesSource([(ValuesFile(str(tmp_path / "values.yaml")), ())])

    def taken(values: ValuesSource) -> dict[str, bool | None]:
        return {lines[number].strip(): branch_taken(actions, number, values, None)
                for number in range(len(lines)) if not lines[number].strip().startswith("{{")}

    assert taken(values) == {"one": False, "two": True, "three": False, "four": False, "five": False, "six": True,
                             "seven": None}
    # A key set on the command line is not known here: the branches after it are not either.
    unknown = ValuesSource(values.layers, [["c"]])
    assert taken(unknown) == {"one": False, "two": None, "three": None, "four": False, "five": False, "six": True,
                              "seven": None}


AGENTS_TEMPLATE = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agents
spec:
  template:
    spec:
      containers:
        {{- include "container-agent" . | nindent 6 }}
        {{- if eq (include "should-enable-trace-agent" .) "true" }}
          {{- include "container-trace-agent" . | nindent 6 }}
        {{- end }}
        {{- if .Values.process.enabled }}
          {{- include "container-process-agent" . | nindent 6 }}
        {{- end }}
      volumes:
        - name: tmp
          emptyDir: {}
"""
AGENTS_RENDERED = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agents
spec:
  template:
    spec:
      containers:
      - name: agent
        ports:
          - containerPort: 8125
            hostPort: 8125
      - name: trace-agent
        ports:
          - containerPort: 8126
            hostPort: 8126
      - name: process-agent
      volumes:
        - name: tmp
          emptyDir: {}
"""


def test_includes_at_the_indent_of_their_key_are_its_content(tmp_path):
    """Datadog's daemonset.yaml: `containers:` then one `{{- include ... | nindent 6 }}` per
    container, at the key's own indent. Each container's fields land on the include that wrote it
    (the one named after the container), not on `containers:`; the key after them is not swallowed."""
    (tmp_path / "daemonset.yaml").write_text(AGENTS_TEMPLATE)
    source = TemplateSource("t/daemonset.yaml", str(tmp_path / "daemonset.yaml"), None, rendered_count=1)
    result = LoadResult()
    load_bytes(AGENTS_RENDERED.encode(), "rendered", result)
    agents = TemplateDocument("t/daemonset.yaml", result.documents[0].root, "c/templates/daemonset.yaml", source=source)

    def at(field_path):
        location = agents.location(field_path)
        return location.line, location.column

    assert at("spec.template.spec.containers[0].ports[0].hostPort") == (9, 9)
    assert at("spec.template.spec.containers[1].ports[0].hostPort") == (11, 11)
    assert at("spec.template.spec.containers[2].name") == (14, 11)
    assert at("spec.template.spec.containers") == (8, 7)
    assert at("spec.template.spec.volumes[0].emptyDir") == (18, 11)


@needs_engine
def test_a_chart_writing_each_container_with_an_include_points_inside_the_define():
    """The finding lands on the line of the `define` that writes the hostPort (issue 34), not on
    the `include` line."""
    report = lint(f"{CHARTS}/agents")
    assert report.diagnostics == []
    found = sorted((f.message.split()[1], where(f.location)) for f in findings_of(report, "KP101"))
    assert found == [("'agent'", (f"{CHARTS}/agents/templates/_container-agent.yaml", 6, 7)),
                     ("'trace-agent'", (f"{CHARTS}/agents/templates/_container-trace-agent.yaml", 6, 7))]


# --- values helpers ------------------------------------------------------------------------------


def test_set_keys_and_merge_follow_helm():
    assert set_keys(["a.b[0].c=1,d={x,y}", r"nodeSelector.kubernetes\.io/os=linux"]) == [
        ["a", "b", 0, "c"], ["d"], ["nodeSelector", "kubernetes.io/os"]]
    assert merge_set({"a": {"b": 1, "c": 2}, "l": [1, 2]}, {"a": {"b": 3}, "l": [None, 5]}) == {
        "a": {"b": 3, "c": 2}, "l": [1, 5]}


# --- packaged charts -------------------------------------------------------------------------------


def package(chart: Path, destination: Path) -> Path:
    """What `helm package` writes, without Helm: the chart's files under its name, gzip."""
    import tarfile

    archive = destination / f"{chart.name}-0.1.0.tgz"
    with tarfile.open(archive, "w:gz") as packed:
        packed.add(chart, arcname=chart.name)
    return archive


def placed(report, shown: str, instead: str) -> list[tuple]:
    """Each finding's rule, place, message and related places, `shown` written as `instead`."""
    def path(text: str) -> str:
        return text.replace(shown, instead)

    return sorted((f.rule_id, path(f.location.path), f.location.line, f.location.column, f.message,
                   tuple((path(r.path), r.line, r.column, path(r.message)) for r in f.related))
                  for f in report.findings)


@needs_engine
def test_a_packaged_chart_is_linted_as_its_directory_is(tmp_path):
    """`kubelint-ports lint web-0.1.0.tgz`, as `helm template web-0.1.0.tgz` renders it: the same
    findings as the chart's directory, at `<archive>:<member>:line:column`, values locations in
    the archive's values.yaml too."""
    archive = package(ROOT / WEB, tmp_path)
    shown = display_path(str(archive))
    packaged = lint(str(archive), values=(HOSTPORTS,))
    unpacked = lint(WEB, values=(HOSTPORTS,))
    assert packaged.diagnostics == [] and packaged.notes == unpacked.notes
    assert (packaged.objects, packaged.files) == (unpacked.objects, unpacked.files)
    assert len(packaged.findings) >= 5
    assert placed(packaged, f"{shown}:web/", f"{WEB}/") == placed(unpacked, "", "")
    assert one(packaged, "KP101", "web-web").location.path == f"{shown}:web/templates/deployment.yaml"
    # service.nodePort comes from the chart's own values.yaml: a place inside the archive.
    assert any(r.path == f"{shown}:web/values.yaml" for f in packaged.findings for r in f.related)
    output = CliRunner().invoke(app, ["lint", str(archive), "-f", HOSTPORTS]).output
    line = one(packaged, "KP101", "web-web").location
    assert f"{shown}:web/templates/deployment.yaml:{line.line}:{line.column}: warning KP101" in output


@needs_engine
def test_a_packaged_chart_fails_and_is_noted_where_its_directory_is(tmp_path):
    """Helm's template error at the member's line; a missing dependency says how to package it
    again; a remote schema's note at the member; per-chart options (the config's `charts:`) by
    the archive's path."""
    broken = package(ROOT / CHARTS / "broken-template", tmp_path)
    [diagnostic] = lint(str(broken)).diagnostics
    assert where(diagnostic.location) == (f"{display_path(str(broken))}:broken-template/templates/service.yaml", 8, 26)
    [missing] = lint(str(package(ROOT / CHARTS / "missing-dep", tmp_path))).diagnostics
    assert "declared in Chart.yaml but not in the archive's charts/; package it again" in missing.message
    remote = package(ROOT / CHARTS / "remote-schema", tmp_path)
    report = lint(str(remote))
    assert report.diagnostics == [] and len(report.findings) == 1
    assert report.notes[0].startswith(f"{display_path(str(remote))}:remote-schema/values.schema.json:10:11: refers to")
    web = package(ROOT / WEB, tmp_path)
    per_chart = lint_paths([str(web)], LintOptions(chart_helm=((str(web), HelmOptions(values=(HOSTPORTS,))),)))
    assert per_chart.findings and \
        placed(per_chart, f"{display_path(str(web))}:web/", f"{WEB}/") == placed(lint(WEB, values=(HOSTPORTS,)), "", "")


@needs_engine
def test_packaged_subcharts_point_at_their_members(tmp_path):
    """`charts/db-0.1.0.tgz` in a chart directory, and the same inside a packaged chart: findings
    at the subchart template's line in the archive (`<archive>:db/templates/...`, an archive
    inside an archive adds its own `:<member>`), as in the directory."""
    chart = tmp_path / "web"
    shutil.copytree(ROOT / WEB, chart)
    subchart = package(chart / "charts" / "db", chart / "charts")
    shutil.rmtree(chart / "charts" / "db")
    values = (str(chart / "values-hostports.yaml"),)
    unpacked = one(lint(WEB, values=(HOSTPORTS,)), "KP101", "web-db")
    assert unpacked.location.path == f"{WEB}/charts/db/templates/statefulset.yaml"
    database = one(lint_paths([str(chart)], LintOptions(helm=HelmOptions(values=values))), "KP101", "web-db")
    assert database.location.path == f"{display_path(str(subchart))}:db/templates/statefulset.yaml"
    assert where(database.location)[1:] == where(unpacked.location)[1:]
    assert database.related[0].line == 12  # db.hostPort in the parent's values file
    (tmp_path / "out").mkdir()
    nested = package(chart, tmp_path / "out")
    inside = one(lint_paths([str(nested)], LintOptions(helm=HelmOptions(values=values))), "KP101", "web-db")
    assert inside.location.path == f"{display_path(str(nested))}:web/charts/db-0.1.0.tgz:db/templates/statefulset.yaml"
    assert where(inside.location)[1:] == where(unpacked.location)[1:]


@pytest.mark.skipif(sys.platform == "win32", reason="a shebang script stands in for helm")
def test_helm_template_renders_a_private_copy_of_the_archive_checked(tmp_path, monkeypatch):
    """With `helm template` too, Helm reads the bytes that were checked, from a private temporary
    directory that is gone after the render; never the archive file again."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    archive = package(ROOT / WEB, tmp_path)
    script = tmp_path / "helm"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import shutil, sys
        with open({str(tmp_path / "calls.txt")!r}, "a") as handle:
            handle.write(" ".join(sys.argv[1:]) + "\\n")
        shutil.copy(sys.argv[3], {str(tmp_path / "rendered.tgz")!r})
        sys.stdout.write(open({str(RENDERED)!r}).read())
        """))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    report = lint(str(archive), values=(HOSTPORTS,), helm_binary=str(script))
    assert report.diagnostics == []
    command = (tmp_path / "calls.txt").read_text().split()
    assert command[:2] == ["template", "web"] and command[2].startswith(str(tmp_path / "tmp" / "kubelint-ports-chart-"))
    assert (tmp_path / "rendered.tgz").read_bytes() == archive.read_bytes()
    assert list((tmp_path / "tmp").iterdir()) == []  # the private copy is removed
    assert one(report, "KP101", "web-web").location.path == f"{display_path(str(archive))}:web/templates/deployment.yaml"


# --- branches, and list items beside a toYaml ------------------------------------------------------

BRANCHES = f"{CHARTS}/branches"
BRANCHES_TEMPLATE = f"{BRANCHES}/templates/deployment.yaml"


@needs_engine
@pytest.mark.parametrize("values_file, line, port", [
    (None, 26, 8443), ("values-config.yaml", 23, 7000), ("values-literal.yaml", 29, 8080)])
def test_a_port_written_in_if_else_if_else_branches_lands_in_the_branch_taken(values_file, line, port):
    """cert-manager's webhook writes `containerPort:` three times, in `if $config.securePort`,
    `else if .Values.webhook.securePort` and `else`: findings landed on the first (issue 24, N7).
    The branch is the one the values take, else the one whose values key holds the rendered port."""
    report = lint(BRANCHES, values=(f"{BRANCHES}/{values_file}",) if values_file else ())
    assert report.diagnostics == []
    found = [f for f in findings_of(report, "KP101") if f.field_path.endswith("ports[0].hostPort")]
    assert [(where(f.location), f.port) for f in found] == [((BRANCHES_TEMPLATE, line, 15), port)]


@needs_engine
def test_list_items_written_by_toyaml_after_a_literal_item_land_on_the_toyaml():
    """`- name: https` written literally, then `{{- toYaml . | nindent 12 }}` inside `with
    .Values.web.extraPorts`: the extra ports land on the toYaml line (not on the literal item),
    and their values locations count from the action's first item (extraPorts[0], [1])."""
    report = lint(BRANCHES)
    extra = sorted((f.port, where(f.location), [(r.path, r.line) for r in f.related])
                   for f in findings_of(report, "KP101") if not f.field_path.endswith("ports[0].hostPort"))
    assert extra == [(9101, (BRANCHES_TEMPLATE, 32, 13), [(f"{BRANCHES}/values.yaml", 7)]),
                     (9201, (BRANCHES_TEMPLATE, 32, 13), [(f"{BRANCHES}/values.yaml", 10)])]


# --- the render worker and the SDK's private render call ------------------------------------------


def test_kube_version_uses_the_private_render_call_only_with_a_tested_sdk():
    """--kube-version needs `_native.call_string("helm_render", ...)` while `Chart.render` has no
    `kube_version` keyword; any SDK version not read and tested is refused, never guessed at."""
    from kubelint_ports.loading.helm import worker as helm_worker

    class Chart:
        def render(self, values, *, name=None, namespace=None):
            raise AssertionError("not reached")

    class Untested:
        __version__ = "9.9.9"

    with pytest.raises(helm_worker.Unsupported, match="--helm-binary"):
        helm_worker.render_call(Untested, Chart(), {}, "r", None, "1.30.0")


@needs_engine
def test_the_installed_sdk_renders_kube_version_through_a_tested_entry_point():
    import inspect

    import helm_python
    from kubelint_ports.loading.helm import worker as helm_worker

    assert (helm_python.__version__ in helm_worker.TESTED_PRIVATE_API
            or "kube_version" in inspect.signature(helm_python.Chart.render).parameters), (
        f"helm-python-sdk {helm_python.__version__}: read its render entry point, then add it to TESTED_PRIVATE_API")


@needs_engine
def test_the_release_namespace_is_the_namespace_of_objects_that_name_none():
    """`helm install -n prod` puts an object without metadata.namespace in prod: findings, JSON and
    namespace exemptions see it there."""
    plain = lint(WEB, values=(HOSTPORTS,))
    placed = lint(WEB, values=(HOSTPORTS,), namespace="prod")
    # Without --namespace, Helm's: `helm template` renders `.Release.Namespace` as "default".
    assert {f.subject.namespace for f in findings_of(plain, "KP101")} == {"default"}
    assert {f.subject.namespace for f in findings_of(placed, "KP101")} == {"prod"}
    assert str(one(plain, "KP101", "web-web").subject) == "default/Deployment/web-web"
    assert "nodePort 30080 of default/Service/web-web:" in one(plain, "KP201", "web-web").message  # was Service/web-web
    assert [where(f.location) for f in findings_of(placed, "KP101")] == \
        [where(f.location) for f in findings_of(plain, "KP101")]
