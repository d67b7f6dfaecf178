"""What a move may do (issue 32, docs/fix.md "Move rules"): a fix lands on what Helm rendered, one
move per conflict that a move can help, a port's TCP and UDP halves together, a values key moved
only when every use is a port of the same object, and the user's values file edited, not the
chart's.

Fixtures: tests/fix/charts/branch-twins (the same port entry in both branches of an `if`),
tests/fix/move-rules (plain manifests); each test copies what it edits.
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
FIXTURES = ROOT / "tests" / "fix"
runner = CliRunner()
needs_engine = pytest.mark.skipif(in_process_engine() is None,
                                  reason="this test needs Helm's in-process engine, `helm-python-sdk`, which is not installed "
                                       "(or has no wheel for this platform): pip install '.[helm]'")


def run(*args: str):
    return runner.invoke(app, list(args))


def findings(*args: str) -> list[dict]:
    return json.loads(run("lint", "--format", "json", "--unsafe-fixes", *args).stdout)["findings"]


def changed_lines(diff: str) -> list[tuple[str, str]]:
    """The removed and added lines of a unified diff, without its file headers."""
    return [(line[0], line[1:]) for line in diff.splitlines()
            if line[:1] in "-+" and not line.startswith(("---", "+++"))]


def copied(tmp_path, monkeypatch, relative: str) -> Path:
    source = FIXTURES / relative
    target = tmp_path / source.name
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copy(source, target)
    monkeypatch.chdir(tmp_path)
    return target


# --- edits what was rendered ------------------------------------------------------------------


@needs_engine
def test_a_finding_and_its_fix_land_on_the_branch_helm_rendered(tmp_path, monkeypatch):
    copied(tmp_path, monkeypatch, "charts/branch-twins")
    kp303 = {f["object"]["name"]: f for f in findings("branch-twins") if f["rule"] == "KP303"}
    assert kp303["agent"]["line"] == 25  # the `else` branch's hostPort, not the `if`'s at 21
    assert kp303["agent"]["fix"]["description"].endswith("(the template's literal, branch-twins/templates/agent.yaml:25)")
    assert changed_lines(run("lint", "--diff", "--unsafe-fixes", "branch-twins").output) == [
        ("-", "              hostPort: 10250"), ("+", "              hostPort: 10251")]
    assert "would fix 1 finding in 1 file" in run("lint", "--diff", "--unsafe-fixes", "branch-twins").output


@needs_engine
def test_identical_text_in_branches_the_values_do_not_decide_gets_no_fix(tmp_path, monkeypatch):
    copied(tmp_path, monkeypatch, "charts/branch-twins")
    kp303 = {f["object"]["name"]: f for f in findings("branch-twins") if f["rule"] == "KP303"}
    fix = kp303["probe"]["fix"]
    assert kp303["probe"]["line"] == 22  # the best known place: the first branch
    assert "not known here" in fix["notApplied"] and "branch-twins/templates/probe.yaml:24" in fix["notApplied"]
    diff = run("lint", "--diff", "--unsafe-fixes", "branch-twins").output
    assert "+++ b/branch-twins/templates/agent.yaml" in diff and "templates/probe.yaml\n" not in diff


# --- one move per conflict that helps ---------------------------------------------------------


@needs_engine
def test_no_move_for_a_replica_overflow_or_a_host_network_port_of_a_chart(tmp_path, monkeypatch):
    chart = copied(tmp_path, monkeypatch, "charts/no-move")
    values = (chart / "values.yaml").read_text()
    found = findings("--nodes", "no-move/nodes.yaml", "no-move")
    overflow = next(f for f in found if f["rule"] == "KP301")
    host_network = next(f for f in found if f["rule"] == "KP303")
    assert overflow["related"], "a chart's finding names its values key: the rule must not read `related`"
    assert "fix" not in overflow and "fix" not in host_network
    result = run("lint", "--fix", "--unsafe-fixes", "--nodes", "no-move/nodes.yaml", "no-move")
    assert (chart / "values.yaml").read_text() == values, result.output


HOST_NETWORK = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: probe}
spec:
  selector: {matchLabels: {app: probe}}
  template:
    metadata: {labels: {app: probe}}
    spec:
      hostNetwork: true
      containers:
        - name: probe
          image: probe:1
          ports:
            - {containerPort: 10250, hostPort: 10250}
"""


def test_no_move_for_a_host_network_port_of_a_manifest(tmp_path, monkeypatch):
    (tmp_path / "m.yaml").write_text(HOST_NETWORK)
    monkeypatch.chdir(tmp_path)
    assert not [f for f in findings("m.yaml") if "fix" in f]


# --- a port's TCP and UDP halves move together ------------------------------------------------


def test_tcp_and_udp_halves_of_a_port_move_together_and_the_least_referenced_object_keeps(tmp_path, monkeypatch):
    copied(tmp_path, monkeypatch, "move-rules/gossip.yaml")
    fixes = {(f["object"]["name"], f["line"]): f.get("fix") for f in findings("gossip.yaml") if f["rule"] == "KP301"}
    # The server is listed first, but two Services select it and none the client: the client keeps.
    assert fixes[("consul-client", 40)] is None and fixes[("consul-client", 41)] is None
    assert fixes[("consul-server", 22)]["description"].startswith("move hostPort 8301 to 8300, the free host port")
    assert fixes[("consul-server", 23)]["description"].startswith(
        "move hostPort 8301 to 8300, where this run moves the other protocol's half of port 8301")
    assert changed_lines(run("lint", "--diff", "--unsafe-fixes", "gossip.yaml").output) == [
        ("-", "            - {name: serflan-tcp, containerPort: 8301, hostPort: 8301, protocol: TCP}"),
        ("-", "            - {name: serflan-udp, containerPort: 8301, hostPort: 8301, protocol: UDP}"),
        ("+", "            - {name: serflan-tcp, containerPort: 8301, hostPort: 8300, protocol: TCP}"),
        ("+", "            - {name: serflan-udp, containerPort: 8301, hostPort: 8300, protocol: UDP}")]


def test_a_kept_side_whose_partner_cannot_move_gets_the_fix_instead(tmp_path, monkeypatch):
    gossip = copied(tmp_path, monkeypatch, "move-rules/gossip.yaml")
    # The server runs on the node's network now: its process listens on 8301, wherever it is told.
    text = gossip.read_text().replace("    spec:\n      containers:\n        - name: consul\n",
                                      "    spec:\n      hostNetwork: true\n      containers:\n        - name: consul\n", 1)
    gossip.write_text(text)
    fixes = {(f["object"]["name"], f["line"]): f.get("fix") for f in findings("gossip.yaml") if f["rule"] == "KP301"}
    assert fixes[("consul-server", 23)] is None and fixes[("consul-server", 24)] is None
    assert fixes[("consul-client", 41)]["description"].startswith("move hostPort 8301 to 8300")
    assert fixes[("consul-client", 42)]["description"].startswith("move hostPort 8301 to 8300")


# --- a values key used elsewhere ----------------------------------------------------------------


@needs_engine
def test_a_values_key_read_beyond_the_objects_ports_is_not_moved(tmp_path, monkeypatch):
    copied(tmp_path, monkeypatch, "charts/gossip")
    serflan = next(f for f in findings("gossip") if f["rule"] == "KP301" and f["object"]["name"] == "client")
    assert serflan["fix"]["notApplied"].startswith(
        ".Values.client.serflan.port, which gossip/templates/client.yaml:23 reads, is also read at "
        "gossip/templates/client.yaml:19 (`{{ .Values.client.serflan.port }}`)")
    assert "    port: 8301       # the hostPort" not in "".join(
        text for _, text in changed_lines(run("lint", "--diff", "--unsafe-fixes", "gossip").output))


@needs_engine
def test_a_values_key_read_only_as_ports_of_the_object_moves_and_says_every_field(tmp_path, monkeypatch):
    copied(tmp_path, monkeypatch, "charts/gossip")
    grpc = next(f for f in findings("gossip") if f["rule"] == "KP303" and f["object"]["name"] == "client")
    assert grpc["fix"]["description"].endswith(
        "; this edits the chart's defaults: pass your own values file with -f to keep the move (set "
        ".Values.client.grpc.port in gossip/values.yaml:5; the key also sets containerPort at "
        "gossip/templates/client.yaml:25)")
    assert changed_lines(run("lint", "--diff", "--unsafe-fixes", "gossip").output) == [
        ("-", "    port: 9100       # node-exporter's port; the hostPort and the containerPort only"),
        ("+", "    port: 9099       # node-exporter's port; the hostPort and the containerPort only")]


# --- the user's values, not the vendored chart --------------------------------------------------


@needs_engine
def test_with_a_users_values_file_the_moved_key_is_added_there_not_in_the_charts(tmp_path, monkeypatch):
    chart = copied(tmp_path, monkeypatch, "charts/gossip")
    (chart / "my-values.yaml").write_text("# mine\nclient:\n  serflan:\n    port: 8301\n")
    grpc = next(f for f in findings("gossip", "-f", "gossip/my-values.yaml")
                if f["rule"] == "KP303" and f["object"]["name"] == "client")
    assert ("(add .Values.client.grpc.port: 9099 to gossip/my-values.yaml, the values file passed with -f; the "
            "chart's default stays at gossip/values.yaml:5; ") in grpc["fix"]["description"]
    diff = run("lint", "--diff", "--unsafe-fixes", "gossip", "-f", "gossip/my-values.yaml").output
    assert "+++ b/gossip/my-values.yaml" in diff and "gossip/values.yaml" not in diff.replace("my-values", "")
    assert changed_lines(diff) == [("+", "  grpc:"), ("+", "    port: 9099")]


@needs_engine
def test_a_vendored_subcharts_default_is_overridden_in_the_top_charts_values(tmp_path, monkeypatch):
    app = tmp_path / "app"
    shutil.copytree(FIXTURES / "charts" / "gossip", app / "charts" / "gossip")
    (app / "Chart.yaml").write_text("apiVersion: v2\nname: app\nversion: 0.1.0\n"
                                    "dependencies:\n  - {name: gossip, version: 0.1.0}\n")
    (app / "values.yaml").write_text("# the umbrella chart\nreplicas: 1\n")
    monkeypatch.chdir(tmp_path)
    grpc = next(f for f in findings("app") if f["rule"] == "KP303")
    assert "the chart's defaults, pass your own values file with -f" in grpc["fix"]["description"]
    diff = run("lint", "--diff", "--unsafe-fixes", "app").output
    assert "charts/gossip/values.yaml" not in diff
    assert changed_lines(diff) == [("+", "gossip:"), ("+", "  client:"), ("+", "    grpc:"), ("+", "      port: 9099")]


# --- several deployment units -----------------------------------------------------------------


def overlays_on_one_base(tmp_path, monkeypatch, base: str, west_own: str) -> Path:
    """A base read by the overlays east and west; west also builds an object of its own."""
    (tmp_path / ".git").mkdir()  # a repository: the overlays' fix may reach their base
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "kustomization.yaml").write_text("resources: [object.yaml]\n")
    (tmp_path / "base" / "object.yaml").write_text(base)
    for overlay in ("east", "west"):
        (tmp_path / overlay).mkdir()
        own = ", own.yaml" if overlay == "west" else ""
        (tmp_path / overlay / "kustomization.yaml").write_text(f"namespace: {overlay}\nresources: [../base{own}]\n")
    (tmp_path / "west" / "own.yaml").write_text(west_own)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "base" / "object.yaml"


SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: NAME}
spec:
  type: NodePort
  ports:
    - port: 80
      nodePort: PORT
"""


def test_a_base_node_port_moves_to_a_port_free_in_every_unit_that_reads_it(tmp_path, monkeypatch):
    base = overlays_on_one_base(tmp_path, monkeypatch, SERVICE.replace("NAME", "web").replace("PORT", "9999"),
                                SERVICE.replace("NAME", "admin").replace("PORT", "30000"))  # west holds 30000
    fixes = [f["fix"]["description"] for f in findings("east", "west") if f["rule"] == "KP204"]
    assert fixes[0].startswith("move nodePort 9999 to 30001, the lowest nodePort of 30000-32767 that no Service or "
                               "pod of the units that read base/object.yaml (east, west) claims")
    assert fixes[1].startswith("move nodePort 9999 to 30001")
    assert changed_lines(run("lint", "--diff", "--unsafe-fixes", "east", "west").output) == [
        ("-", "      nodePort: 9999"), ("+", "      nodePort: 30001")]
    assert base.read_text().endswith("nodePort: 9999\n")


DAEMON = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: NAME}
spec:
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      containers:
        - name: NAME
          image: busybox:1.36
          ports:
            - containerPort: PORT
              hostPort: PORT
"""


def test_a_base_host_port_moves_to_a_port_free_in_every_unit_that_reads_it(tmp_path, monkeypatch):
    overlays_on_one_base(tmp_path, monkeypatch, DAEMON.replace("NAME", "probe").replace("PORT", "10250"),
                         DAEMON.replace("NAME", "relay").replace("PORT", "10251"))  # west holds 10251
    fixes = [f["fix"]["description"] for f in findings("east", "west") if f["rule"] == "KP303"]
    assert fixes[0].startswith("move hostPort 10250 to 10252, the free host port nearest 10250 on any node (no "
                               "inventory) and in every unit that reads base/object.yaml (east, west)")
    assert changed_lines(run("lint", "--diff", "--unsafe-fixes", "east", "west").output) == [
        ("-", "              hostPort: 10250"), ("+", "              hostPort: 10252")]  # 10249, 10248: kube-proxy, kubelet
