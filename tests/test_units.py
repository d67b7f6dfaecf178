"""Deployment units (model.units): only objects deployed together are compared (issue 24)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.loading.helm.charts import in_process_engine
from kubelint_ports.model.units import UnitRules

ROOT = Path(__file__).resolve().parents[1]
needs_engine = pytest.mark.skipif(in_process_engine() is None and shutil.which("helm") is None,
                                  reason="no Helm engine (helm-python-sdk) nor `helm` binary here")
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


# --- what each unit states of its own cluster ----------------------------------------------------

def host_port_pods(kind: str, name: str, namespace: str, port: int, **pod_spec) -> str:
    """A workload whose one container takes `port` on its node (JSON, which YAML reads)."""
    labels = {"app": name}
    container = {"name": name, "image": name, "ports": [{"containerPort": port, "hostPort": port}]}
    return json.dumps({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace},
                       "spec": {"selector": {"matchLabels": labels}, "template": {
                           "metadata": {"labels": labels}, "spec": {"containers": [container], **pod_spec}}}})


# Two node agents on hostPort 9400, each on its own pool of nodes.
AGENTS = "\n---\n".join(host_port_pods("DaemonSet", f"{pool}-agent", "ops", 9400, nodeSelector={label: pool})
                        for label, pool in (("pool", "gpu"), ("disk", "ssd")))


def inventory(*nodes: tuple[str, dict]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}} for name, labels in nodes]})


def lint_json(*args: str) -> dict:
    result = CliRunner().invoke(app, ["lint", "--format", "json", *args])
    assert result.exit_code in (0, 1) and not isinstance(result.exception, Exception), result.output
    return json.loads(result.stdout)


@pytest.fixture
def two_inventories(chdir):
    """The same two node agents in prod and staging: on prod's one node both agents run (the
    top-level inventory), on staging's two nodes each has its own node (its own inventory)."""
    write(chdir, {"prod/agents.yaml": AGENTS, "staging/agents.yaml": AGENTS,
                  "inventory/prod.json": inventory(("both", {"pool": "gpu", "disk": "ssd"})),
                  "inventory/staging.json": inventory(("gpu-1", {"pool": "gpu"}), ("ssd-1", {"disk": "ssd"})),
                  ".kubelint-ports.yaml": "nodes: [inventory/prod.json]\n"
                                          "units:\n  prod: [prod]\n"
                                          "  staging:\n    paths: [staging]\n    nodes: [inventory/staging.json]\n"})
    return chdir


def test_each_unit_places_pods_on_its_own_node_inventory(two_inventories):
    """A hostPort conflict that exists on prod's nodes only: staging's inventory keeps the agents apart."""
    found = [(f["file"], f["units"]) for f in lint_json()["findings"] if f["rule"] == "KP301"]
    assert found == [("prod/agents.yaml", ["prod"])] * 2
    assert all("on the same node (both)" in f["message"] for f in lint_json()["findings"] if f["rule"] == "KP301")


def test_the_port_map_has_a_section_per_unit_with_its_nodes(two_inventories):
    text = CliRunner().invoke(app, ["ports"]).stdout
    prod, staging = text.split("\n\n")
    assert prod.startswith("unit prod\nboth\n") and prod.count("CONFLICT KP301") == 2
    assert staging.startswith("unit staging\ngpu-1\n") and "\nssd-1\n" in staging and "CONFLICT" not in staging
    data = json.loads(CliRunner().invoke(app, ["ports", "--format", "json"]).stdout)
    assert [(unit["name"], [node["name"] for node in unit["nodes"]]) for unit in data["units"]] == [
        ("prod", ["both"]), ("staging", ["gpu-1", "ssd-1"])]
    assert "nodes" not in data


def test_the_map_of_all_units_never_puts_two_units_on_one_node(two_inventories):
    """What the page draws: every node named with its unit, the conflict only on prod's."""
    report = lint_paths(["."], settings_of().options)
    shown = report.port_map
    assert shown.nodes == ["[prod] both", "[staging] gpu-1", "[staging] ssd-1"]
    staging = {h.state_on(node) for h in shown.holders for node in h.nodes if node.startswith("[staging]")}
    assert staging == {"runs"}
    assert {h.state_on("[prod] both") for h in shown.holders if "[prod] both" in h.nodes} == {"conflict"}
    assert not shown.unplaced


def test_a_units_inventory_without_nodes_is_an_input_error(chdir):
    write(chdir, {"prod/agents.yaml": AGENTS, "lab/agents.yaml": AGENTS,
                  "inventory/wrong.yaml": SERVICE.format(name="x"),
                  ".kubelint-ports.yaml": "units:\n  prod: {paths: [prod], nodes: [inventory/wrong.yaml]}\n"
                                          "  lab: [lab]\n"})
    result = CliRunner().invoke(app, ["lint"])
    assert result.exit_code == 2
    assert "inventory/wrong.yaml: input-error the node inventory holds no Node" in result.output


def test_config_shows_each_units_own_inputs(two_inventories):
    import yaml

    shown = yaml.safe_load(CliRunner().invoke(app, ["config"]).stdout)["units"]
    assert shown["prod"] == {"paths": ["prod"]}
    assert shown["staging"] == {"paths": ["staging"], "nodes": ["inventory/staging.json"]}


def settings_of():
    from kubelint_ports.settings import CommandLine, resolve

    return resolve(CommandLine())


# A hostPort on a ClusterIP Service's port.
CAPTURE = host_port_pods("Deployment", "ingress", "shop", 443) + "\n---\n" + json.dumps(
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api", "namespace": "shop"},
     "spec": {"selector": {"app": "api"}, "ports": [{"port": 443, "targetPort": 8443}]}})


def test_each_unit_has_its_own_facts_over_the_top_level_ones(chdir):
    """A hostPort on a Service's port: in IPVS mode with nftables portmap (the top level's
    backend, prod's own mode) its DNAT takes the Service's traffic, an error; with iptables for
    both (edge's own) it does not; where the mode is unknown (lab, no facts of its own) it may,
    a note."""
    write(chdir, {"prod/m.yaml": CAPTURE, "edge/m.yaml": CAPTURE, "lab/m.yaml": CAPTURE,
                  ".kubelint-ports.yaml": "facts: {portmap-backend: nftables}\n"
                                          "units:\n  prod: {paths: [prod], proxy-mode: ipvs}\n"
                                          "  edge:\n    paths: [edge]\n    proxy-mode: iptables\n"
                                          "    facts: {portmap-backend: iptables}\n"
                                          "  lab: [lab]\n"})
    found = {tuple(f["units"]): f for f in lint_json()["findings"] if f["rule"] == "KP304"}
    assert {units: f["severity"] for units, f in found.items()} == {("prod",): "error", ("lab",): "note"}
    facts = found[("prod",)]["traffic"]["facts"]
    assert facts["proxy-mode"] == {"value": "ipvs", "source": ".kubelint-ports.yaml units.prod.proxy-mode"}
    assert facts["hostport-backend"]["source"] == ".kubelint-ports.yaml facts.portmap-backend"
    # The command line wins for every unit, as it does over the top level: with iptables mode,
    # only nftables portmap (prod's and lab's) may still take the traffic.
    found = {tuple(f["units"]): f for f in lint_json("--proxy-mode", "iptables")["findings"] if f["rule"] == "KP304"}
    assert {units: (f["severity"], f["traffic"]["facts"]["proxy-mode"]["source"]) for units, f in found.items()} == {
        ("prod",): ("note", "--proxy-mode"), ("lab",): ("note", "--proxy-mode")}


UNIT_ERRORS = {  # `units:` -> (the line of the error, what it says)
    "  prod: [../elsewhere]\n": (2, "outside the repository"),
    "  prod:\n    paths: [prod]\n    nodes: [missing.yaml]\n": (4, "no such file"),
    "  prod: {paths: [prod, prdo]}\n": (2, "no such file or directory 'prdo'"),
    "  prod:\n    paths: [prod]\n    node-port-range: 32000-31000\n": (4, "not a range of ports"),
}


def test_a_units_paths_and_facts_are_checked_at_their_line(chdir):
    from kubelint_ports.config import ConfigError

    (chdir / "prod").mkdir()
    for units, (line, words) in UNIT_ERRORS.items():
        (chdir / ".kubelint-ports.yaml").write_text("units:\n" + units)
        with pytest.raises(ConfigError) as raised:
            settings_of()
        assert raised.value.line == line and words in str(raised.value), raised.value


# --- a chart with several values sets ------------------------------------------------------------

CHART = {
    "chart/Chart.yaml": "apiVersion: v2\nname: shop\nversion: 0.1.0\n",
    "chart/values.yaml": "nodePorts: {}\n",
    "chart/templates/services.yaml": """\
{{- range $name, $port := .Values.nodePorts }}
---
apiVersion: v1
kind: Service
metadata: {name: {{ $name }}, namespace: shop}
spec:
  type: NodePort
  ports: [{port: 80, nodePort: {{ $port }}}]
{{- end }}
""",
    "chart/values-dev.yaml": "nodePorts: {a: 30001, b: 30002}\n",
    ".kubelint-ports.yaml": "charts:\n  - {path: chart, values: [chart/values-dev.yaml]}\n"
                            "  - {path: chart, values: [chart/values-prod.yaml]}\n",
}


@needs_engine
def test_each_values_set_of_a_chart_is_its_own_unit(chdir):
    """dev's b and prod's a share nodePort 30002, in two clusters: no collision (unless `units:`
    puts the chart, every set of it, in one). Within prod's set, a and b share 30005: a collision
    of that set's unit."""
    write(chdir, {**CHART, "chart/values-prod.yaml": "nodePorts: {a: 30002, b: 30003}\n"})
    data = lint_json()
    assert data["summary"]["objects"] == 4 and not [f for f in data["findings"] if f["rule"] == "KP203"]
    write(chdir, {".kubelint-ports.yaml": CHART[".kubelint-ports.yaml"] + "units:\n  one: [chart]\n"})
    assert sorted(f["object"]["name"] for f in lint_json()["findings"] if f["rule"] == "KP203") == ["a", "b"]
    write(chdir, {".kubelint-ports.yaml": CHART[".kubelint-ports.yaml"]})
    write(chdir, {"chart/values-prod.yaml": "nodePorts: {a: 30005, b: 30005}\n"})
    found = [(f["object"]["name"], f["units"]) for f in lint_json()["findings"] if f["rule"] == "KP203"]
    assert sorted(found) == [("a", ["chart[values-prod]"]), ("b", ["chart[values-prod]"])]
    text = CliRunner().invoke(app, ["ports"]).stdout
    assert text.startswith("unit chart[values-dev]\n") and "\n\nunit chart[values-prod]\n" in text


@needs_engine
def test_units_place_a_values_set_by_its_values_file(chdir):
    """The prod set lands with the prod manifests (and collides with them); dev stays its own."""
    write(chdir, {**CHART, "chart/values-prod.yaml": "nodePorts: {a: 30080}\n",
                  "prod/svc.yaml": SERVICE.format(name="web"),
                  ".kubelint-ports.yaml": CHART[".kubelint-ports.yaml"]
                  + "units:\n  prod: [prod, chart/values-prod.yaml]\n"})
    found = [(f["object"]["name"], f["units"]) for f in lint_json()["findings"] if f["rule"] == "KP203"]
    assert sorted(found) == [("a", ["prod"]), ("web", ["prod"])]


def test_free_ports_are_each_units_own(chdir):
    """`ports --free` answers per unit, from the unit's own objects and nodes: a hostPort and a
    nodePort taken in prod only are free in staging, whose nodes have the same names."""
    write(chdir, {"prod/app.yaml": host_port_pods("DaemonSet", "agent", "ops", 9400) + "\n---\n"
                  + SERVICE.format(name="web"),
                  "staging/app.yaml": SERVICE.format(name="other").replace("30080", "30081"),
                  "inventory/nodes.json": inventory(("node-1", {}), ("node-2", {})),
                  ".kubelint-ports.yaml": "nodes: [inventory/nodes.json]\nunits:\n  prod: [prod]\n  staging: [staging]\n"})
    data = json.loads(CliRunner().invoke(app, ["ports", "--free", "--near", "9400", "--count", "1",
                                               "--format", "json"]).stdout)
    assert data["version"] == 2 and [unit["name"] for unit in data["units"]] == ["prod", "staging"]
    prod, staging = ({scope["node"]: scope for scope in unit["scopes"]} for unit in data["units"])
    assert prod[None]["taken"] == {"30080": ["shop/Service/web"]}
    assert staging[None]["taken"] == {"30081": ["shop/Service/other"]}
    assert [prod[node]["suggested"] for node in ("node-1", "node-2")] == [[9399], [9399]]
    assert [staging[node]["suggested"] for node in ("node-1", "node-2")] == [[9400], [9400]]
    assert ["9400" in staging[node]["taken"] for node in ("node-1", "node-2")] == [False, False]
    text = CliRunner().invoke(app, ["ports", "--free"]).stdout
    assert text.startswith("unit prod\nnodePorts (30000-32767): 2767 free\n")
    assert "\n\nunit staging\nnodePorts (30000-32767): 2767 free\n" in text
    assert text.count("taken 9400: ops/DaemonSet/agent (hostPort)") == 2  # prod's two nodes only


def test_free_ports_of_a_run_without_units_keep_their_shape(chdir):
    write(chdir, {"app.yaml": SERVICE.format(name="web")})
    data = json.loads(CliRunner().invoke(app, ["ports", "--free", "--format", "json"]).stdout)
    assert "version" not in data and data["scopes"][0]["taken"] == {"30080": ["shop/Service/web"]}
    assert CliRunner().invoke(app, ["ports", "--free"]).stdout.startswith("nodePorts (30000-32767): 2767 free\n")


def test_a_units_nodeport_fix_moves_within_its_own_range_and_services(chdir):
    """Staging's nodePort collision is fixed within staging's cluster: its own node-port range
    (prod's Services, in another cluster, take nothing there), as its message advises."""
    colliding = "\n---\n".join(SERVICE.format(name=name).replace("30080", "31000") for name in ("one", "two"))
    write(chdir, {"prod/app.yaml": SERVICE.format(name="web").replace("30080", "31001"),
                  "staging/app.yaml": colliding,
                  ".kubelint-ports.yaml": "units:\n  prod: [prod]\n"
                                          "  staging: {paths: [staging], node-port-range: 31000-31010}\n"})
    result = CliRunner().invoke(app, ["lint", "--format", "json", "--diff", "--unsafe-fixes"])
    assert "-spec: {type: NodePort, ports: [{port: 80, nodePort: 31000}]}\n" \
           "+spec: {type: NodePort, ports: [{port: 80, nodePort: 31001}]}" in result.stdout, result.stdout
    findings = [f for f in lint_json()["findings"] if f["rule"] == "KP203"]
    assert [f["units"] for f in findings] == [["staging"], ["staging"]]
    [fix] = [f["fix"]["description"] for f in findings if "fix" in f]
    assert fix.startswith("move nodePort 31000 to 31001"), fix


def test_the_page_of_several_units_embeds_each_units_free_ports(chdir):
    """What the page's script reads: every node named with its unit, each row's unit, and each
    unit's nodePorts and host ports as its `ports --free` section has them."""
    from test_portmap import embedded_data

    write(chdir, {"prod/app.yaml": host_port_pods("DaemonSet", "agent", "ops", 9400) + "\n---\n"
                  + SERVICE.format(name="web"),
                  "staging/app.yaml": SERVICE.format(name="other").replace("30080", "30081"),
                  ".kubelint-ports.yaml": "units:\n  prod: [prod]\n  staging: [staging]\n"})
    data = embedded_data(CliRunner().invoke(app, ["ports", "--format", "html"]).stdout)
    free = json.loads(CliRunner().invoke(app, ["ports", "--free", "--format", "json"]).stdout)
    assert data["unitHosts"] == ["[prod] ", "[staging] "]
    assert [data["nodes"][row] for row in data["everyRows"]] == ["[prod] (every node)", "[staging] (every node)"]
    assert [data["nodes"][row] for row in data["anyRows"]] == ["[prod] (any node)"]
    assert [(name, data["unitOf"][index]) for index, name in enumerate(data["nodes"])] == [
        ("[prod] (any node)", 0), ("[prod] (every node)", 0), ("[staging] (every node)", 1)]
    node_ports = [[scope["free"] for scope in unit["scopes"] if scope["kind"] == "nodePort"][0]
                  for unit in free["units"]]
    assert data["free"]["nodePortsByUnit"] == node_ports
    hosts = {f"[{unit['name']}] {scope['node']}": (scope["free"], scope["freeCount"])
             for unit in free["units"] for scope in unit["scopes"] if scope["kind"] == "hostPort"}
    assert {name: (data["free"]["runs"][runs], count) for name, runs, count in data["free"]["hosts"]} == hosts
    assert list(hosts) == ["[prod] ", "[staging] "]  # no inventory: every node of the unit
