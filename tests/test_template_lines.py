"""Issue 34 ("Locations"): a rendered port lands on the template line that wrote it, and on the
values key that fed it, when it was written by one of several `range` loops or by a `define` an
`include` calls. The fixture charts are in tests/charts/lines/ (written for these tests).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.loading.helm.charts import HelmOptions, in_process_engine

ROOT = Path(__file__).resolve().parents[1]
LINES = "tests/charts/lines"

pytestmark = pytest.mark.skipif(in_process_engine() is None,
                                reason="this test needs Helm's in-process engine, `helm-python-sdk`, which is not installed "
                                       "(or has no wheel for this platform): pip install '.[helm]'")


@pytest.fixture(autouse=True)
def at_repository_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def host_ports(chart: str) -> dict[str, tuple[tuple[str, int, int], list[tuple[str, int]]]]:
    """KP101 findings by hostPort: (template file, line, column) and the values (file, line) related."""
    report = lint_paths([f"{LINES}/{chart}"], LintOptions(helm=HelmOptions()), stdin=io.BytesIO(b""))
    assert report.diagnostics == []
    found = {}
    for finding in report.findings:
        if finding.rule_id == "KP101":
            port = finding.message.split("hostPort ")[1].split("/")[0]
            location = finding.location
            found[port] = ((location.path, location.line, location.column),
                           [(related.path, related.line) for related in finding.related])
    return found


def test_ports_of_identical_range_loops_land_on_the_loop_that_wrote_them():
    """ingress-nginx's controller: a `range` over the controller's ports, a literal `webhook` item, then
    a `range` over `.Values.tcp` and one over `.Values.udp` writing the same lines. 443 landed on the
    tcp loop (39), 5432 and 30000 on the udp loop (47): the items were matched one by one."""
    template = f"{LINES}/ranges/templates/deployment.yaml"
    values = f"{LINES}/ranges/values.yaml"
    found = host_ports("ranges")
    assert found["80"] == ((template, 21, 15), [(values, 3)])  # controller.containerPort.http
    assert found["443"] == ((template, 21, 15), [(values, 4)])  # controller.containerPort.https
    for port in ("5432", "30000"):
        assert found[port][0] == (template, 39, 15), port
    assert found["53"][0] == (template, 47, 15)


def test_ports_a_define_writes_land_in_the_define_and_on_the_values_it_reads():
    """`ports:` then `{{- include "helper.ports" . | nindent 12 }}`: the finding was on the include,
    with no values line."""
    found = host_ports("helper")
    assert found == {"8443": ((f"{LINES}/helper/templates/_helpers.tpl", 5, 3),
                              [(f"{LINES}/helper/values.yaml", 2)])}


def test_a_pod_template_written_by_a_define_through_fromyaml_lands_in_the_define():
    """traefik's `template: {{ include "traefik.podTemplate" . | fromYaml | toYaml | nindent 4 }}`:
    every hostPort landed on `template:` (line 10 here), none on the values."""
    template = f"{LINES}/podtemplate/templates/_podtemplate.tpl"
    values = f"{LINES}/podtemplate/values.yaml"
    found = host_ports("podtemplate")
    assert found == {"80": ((template, 16, 11), [(values, 4)]),
                     "443": ((template, 16, 11), [(values, 7)])}


def test_the_agents_chart_points_into_each_container_define():
    """tests/charts/agents (Datadog's shape): each container an `include` at the indent of
    `containers:`; `container-agent` is told from `container-trace-agent` for `agent`."""
    found = host_ports("../agents")
    assert found == {
        "8125": (("tests/charts/agents/templates/_container-agent.yaml", 6, 7), [("tests/charts/agents/values.yaml", 2)]),
        "8126": (("tests/charts/agents/templates/_container-trace-agent.yaml", 6, 7),
                 [("tests/charts/agents/values.yaml", 5)]),
    }


def findings(chart: str, rule: str) -> dict[int, tuple[tuple[str, int, int], list[tuple[str, int, str]]]]:
    """`rule`'s findings by port: (template file, line, column) and the related (file, line, message)."""
    report = lint_paths([f"{LINES}/{chart}"], LintOptions(helm=HelmOptions()), stdin=io.BytesIO(b""))
    assert report.diagnostics == []
    return {finding.port: ((finding.location.path, finding.location.line, finding.location.column),
                           [(related.path, related.line, related.message) for related in finding.related])
            for finding in report.findings if finding.rule_id == rule}


def test_a_port_a_range_over_a_map_writes_lands_on_the_values_key_of_its_element():
    """`range $name, $port := .Values.ports` in a container's ports: Go goes over the keys sorted
    (`admin` before `http`), so the second item is `ports.http`. The values line was there, but
    named `.Values.ports[1] of the subchart`."""
    template = f"{LINES}/maprange/templates/daemonset.yaml"
    values = f"{LINES}/maprange/values.yaml"
    used = f"used at {template}:19"
    assert findings("maprange", "KP101") == {
        8080: ((template, 19, 15), [(values, 2, f".Values.ports.http, {used}")]),
        9090: ((template, 19, 15), [(values, 3, f".Values.ports.admin, {used}")]),
    }


def test_a_port_of_a_document_a_range_over_a_map_writes_lands_on_its_elements_key():
    """`range $name, $svc := .Values.services` around a whole Service: `api` renders first, `web`
    second. The first had the values line of the element numbered by its list item (0: `api`),
    the second none."""
    template = f"{LINES}/maprange/templates/services.yaml"
    values = f"{LINES}/maprange/values.yaml"
    used = f"used at {template}:14"
    assert findings("maprange", "KP204") == {
        40080: ((template, 14, 7), [(values, 6, f".Values.services.web.nodePort, {used}")]),
        40081: ((template, 14, 7), [(values, 9, f".Values.services.api.nodePort, {used}")]),
    }


def test_a_port_a_helper_is_passed_in_a_dict_lands_on_the_values_key_passed():
    """`include "dictarg.port" (dict "name" "relay" "port" .Values.relay.port "ctx" $)` and the
    define's `hostPort: {{ .port }}`: the finding was on the define's line, with no values line."""
    template = f"{LINES}/dictarg/templates/_ports.tpl"
    values = f"{LINES}/dictarg/values.yaml"
    used = f"used at {template}:5"
    assert findings("dictarg", "KP101") == {
        7443: ((template, 5, 3), [(values, 3, f".Values.relay.port, {used}")]),
        9100: ((template, 5, 3), [(values, 5, f".Values.exporter.port, {used}")]),
    }


def lint_diff(*args: str) -> str:
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    return CliRunner().invoke(app, ["lint", "--diff", "--unsafe-fixes", "--show-fixes", *args]).output


def test_a_host_port_a_define_writes_is_moved_in_the_values_key_it_reads():
    """KP201 on `hostPort: {{ .Values.proxy.hostPort }}` inside `define "definefix.ports"`: the
    fix was not made (`{{ include ... }} writes it: there is no literal to edit`)."""
    output = lint_diff(f"{LINES}/definefix")
    assert "-  hostPort: 30443   # the edge's port on every node\n+  hostPort: " in output, output
    assert f"(set .Values.proxy.hostPort in {LINES}/definefix/values.yaml:2)" in output, output
    assert "_helpers.tpl" not in output.split("would fix")[0], output  # the template is not edited


def test_a_host_port_a_define_is_passed_in_a_dict_is_moved_in_the_key_passed():
    """KP303 on the define's `hostPort: {{ .port }}`, `.port` being `$.Values.exporter.port`: the
    key moves, and the description says it moves the containerPort the same line pair writes."""
    output = lint_diff(f"{LINES}/dictarg")
    assert "-  port: 9100\n+  port: " in output, output
    assert (f"(set .Values.exporter.port in {LINES}/dictarg/values.yaml:5; the key also sets containerPort at "
            f"{LINES}/dictarg/templates/_ports.tpl:4)") in output, output


def test_a_host_port_a_define_included_twice_reads_is_not_moved(tmp_path, monkeypatch):
    """Two objects include the define that reads `.Values.proxy.hostPort`: moving the key moves both."""
    import shutil

    chart = tmp_path / "definefix"
    shutil.copytree(ROOT / LINES / "definefix", chart)
    deployment = (chart / "templates" / "daemonset.yaml").read_text()
    (chart / "templates" / "canary.yaml").write_text(deployment.replace("-proxy", "-canary").replace(
        "{app: proxy}", "{app: canary}"))
    monkeypatch.chdir(tmp_path)
    output = lint_diff("definefix")
    assert "+  hostPort: " not in output, output
    assert ('KP201 fix not applied: definefix/templates/_helpers.tpl:5 is in `define "definefix.ports"`, which '
            "definefix/templates/canary.yaml:16 includes too: moving .Values.proxy.hostPort would move that port "
            "as well") in output, output


def test_a_values_comment_is_cut_in_one_pass_as_the_pattern_cut_it():
    """`without_comment` reads as `re.sub(r"\\s+#.*$", "", text)` did, on 100,000 generated texts, and
    in one pass: the pattern took seconds on a line of many blanks and no `#`."""
    import random
    import re

    from kubelint_ports.loading.helm.template_outline import without_comment

    generated = random.Random(34)
    texts = ["".join(generated.choice(" \t#ab\n") for _ in range(generated.randint(0, 12))) for _ in range(100_000)]
    assert [text for text in texts if without_comment(text) != re.sub(r"\s+#.*$", "", text)] == []
    assert without_comment(" " * 1_000_000 + "x") == " " * 1_000_000 + "x"
    assert without_comment("8080   # the web port") == "8080"
