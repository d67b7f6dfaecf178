"""One engine (issue 33): the engine only puts load -> model -> checks -> report in order.

- A chart the configuration gives several values sets is expanded by loading
  (`loading.inputs.Loading`), not by the engine: the engine receives each set's objects in its
  own unit, and `LoadResult.value_sets` names them.
- `ports --free` and the port map (its page) answer from one view: each unit's free runs are
  worked out once (`model.free_ports.free_runs_of`) from the models the map views, with the same
  node daemons; `portmap.free_ports_of` is `ports --free`'s answer, `PortMap.free_view` the page's.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
from io import StringIO
from pathlib import Path

import pytest
from test_portmap import embedded_data
from typer.testing import CliRunner

from kubelint_ports import engine
from kubelint_ports.cli import app
from kubelint_ports.engine import lint_paths
from kubelint_ports.formatters.port_map_writer import free_ports_data, write_free_text
from kubelint_ports.loading import Loading
from kubelint_ports.loading.helm.charts import HelmOptions, in_process_engine
from kubelint_ports.loading.helm.value_sets import several_value_sets, value_set_units
from kubelint_ports.model.free_ports import free_ports, free_runs_of, nearest_in_runs
from kubelint_ports.portmap import free_ports_of, map_units, port_map_of, unit_node_name
from kubelint_ports.settings import CommandLine, resolve

ROOT = Path(__file__).resolve().parents[1]
INVENTORY = "examples/inventory/nodes.yaml"
runner = CliRunner()
needs_engine = pytest.mark.skipif(in_process_engine() is None and shutil.which("helm") is None,
                                  reason="no Helm engine (helm-python-sdk) nor `helm` binary here")


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


# --- values sets: expanded in loading -------------------------------------------------------------------

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
    "chart/values-prod.yaml": "nodePorts: {a: 30002}\n",
    "plain.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: plain, namespace: shop}\n"
                  "spec: {type: NodePort, ports: [{port: 80, nodePort: 30100}]}\n",
}


def test_the_engine_does_not_expand_values_sets():
    """engine.py hands the configuration's per-chart options to loading as they are."""
    source = inspect.getsource(engine)
    for name in ("several_value_sets", "value_set_units", "load_value_sets", "setting_aside", "set_aside"):
        assert name not in source, name
    assert not hasattr(engine, "several_value_sets")


def test_values_sets_are_named_by_their_values_files():
    dev, prod, again = (HelmOptions(values=(v,)) for v in ("chart/values-dev.yaml", "chart/values-prod.yaml",
                                                           "other/values-prod.yaml"))
    assert several_value_sets([("/c", dev), ("/d", prod), ("/c", prod)]) == {"/c": [dev, prod]}
    assert value_set_units("chart", [dev, prod]) == ["chart[values-dev]", "chart[values-prod]"]
    assert value_set_units("chart", [prod, again, HelmOptions()]) == [
        "chart[values-prod #1]", "chart[values-prod #2]", "chart[defaults]"]


@needs_engine
def test_loading_renders_a_chart_once_per_values_set(tmp_path, monkeypatch):
    """Given the configuration's (chart, options) pairs, loading sets the chart aside, renders it
    once per set after the other inputs, each set's objects in its unit, and says which unit each
    set is; a chart given one set (a mapping) renders once, in no unit."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path, CHART)
    chart = os.path.abspath("chart")
    pairs = ((chart, HelmOptions(values=("chart/values-dev.yaml",))),
             (chart, HelmOptions(values=("chart/values-prod.yaml",))))
    result = Loading(["."], chart_helm=pairs).finish()
    assert [(d.unit, os.path.basename(d.path)) for d in result.documents] == [
        ("", "plain.yaml"), ("chart[values-dev]", "services.yaml"), ("chart[values-dev]", "services.yaml"),
        ("chart[values-prod]", "services.yaml")]
    assert result.value_sets == (("chart[values-dev]", ("chart/values-dev.yaml",)),
                                 ("chart[values-prod]", ("chart/values-prod.yaml",)))
    assert result.files == 2  # plain.yaml, and the chart's one template read once for both sets
    once = Loading(["."], chart_helm={chart: pairs[1][1]}).finish()
    assert [(d.unit, os.path.basename(d.path)) for d in once.documents] == [("", "plain.yaml"), ("", "services.yaml")]
    assert once.value_sets == ()
    excluded = Loading(["."], chart_helm=pairs, exclude=lambda path: path.endswith("chart")).finish()
    assert [d.path for d in excluded.documents] == ["plain.yaml"] and excluded.value_sets == ()


@needs_engine
def test_the_engine_receives_each_values_set_as_its_own_unit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {**CHART, ".kubelint-ports.yaml": "charts:\n  - {path: chart, values: [chart/values-dev.yaml]}\n"
                                                      "  - {path: chart, values: [chart/values-prod.yaml]}\n"})
    report = report_of()
    assert [name for name, _ in report.cluster.units] == ["", "chart[values-dev]", "chart[values-prod]"]
    assert not [f for f in report.findings if f.rule_id == "KP203"]  # 30002 twice, in two clusters
    assert_one_view()


# --- `ports --free` answers from the port map's view ---------------------------------------------------

def report_of(*paths: str, nodes: tuple[str, ...] = (), policies: tuple[str, ...] = ()):
    """The report `ports` makes of these arguments (settings as the command line resolves them)."""
    settings = resolve(CommandLine(paths=paths, nodes=nodes, policies=policies))
    return lint_paths(settings.paths, settings.options, policies=settings.policies)


def cli_args(paths: tuple[str, ...], nodes: tuple[str, ...], policies: tuple[str, ...]) -> list[str]:
    return [*paths, *(arg for node in nodes for arg in ("--nodes", node)),
            *(arg for policy in policies for arg in ("--policies", policy))]


def run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def by_unit(data: dict) -> list[tuple[str, dict]]:
    """`ports --free --format json` as (unit, answer) per unit ("" for the run's one unnamed unit)."""
    return [(unit["name"], unit) for unit in data["units"]] if "units" in data else [("", data)]


def assert_one_view(*paths: str, nodes: tuple[str, ...] = (), policies: tuple[str, ...] = (),
                    near: int | None = None, count: int = 5) -> None:
    """What `ports --free` prints (text and JSON) is the port map's free view, unit by unit and
    node by node, and is what the page embeds; nothing is worked out twice."""
    report = report_of(*paths, nodes=nodes, policies=policies)
    port_map = port_map_of(report)
    maps = port_map.units or [port_map]
    answers = free_ports_of(report, near, count)
    assert [name for name, _ in answers] == [m.unit for m in maps] == [name for name, _ in map_units(report.cluster)]
    for unit_map, (name, answer) in zip(maps, answers):
        view = unit_map.free_view()
        node_ports, *hosts = answer.scopes
        assert node_ports.node is None and all(scope.node is not None for scope in hosts)
        assert (view.node_ports_free, view.node_ports_free_count) == (node_ports.free, node_ports.count), name
        low, high = view.node_port_range
        assert {port for port, _ in view.node_ports_taken} == set(node_ports.held) | {
            port for port in unit_map.reserved if low <= port <= high}, name
        assert [(h.node, h.free, h.count) for h in view.host_ports] == [(s.node, s.free, s.count) for s in hosts], name
        assert unit_map.free_ports(near, count) == answer
        runs = free_runs_of(unit_map.cluster, unit_map.reserved)
        assert view.node_ports_free is runs.node_ports  # the same runs, not a second computation
        if near is not None:
            for scope in answer.scopes:
                assert list(scope.suggested) == nearest_in_runs(scope.free, near, count)
        # worked out from scratch, on a cluster that has not been asked before, the answer is the same
        unit_map.cluster.derived.clear()
        assert free_ports(unit_map.cluster, unit_map.reserved, near, count) == answer
    args = cli_args(paths, nodes, policies)
    extra = ["--near", str(near), "--count", str(count)] if near is not None else []
    printed = json.loads(run("ports", "--free", "--format", "json", *args, *extra))
    assert [(name, free_ports_data(answer)) for name, answer in answers] == [
        (name, {key: value for key, value in unit.items() if key != "name"}) for name, unit in by_unit(printed)]
    text = run("ports", "--free", *args, *extra)
    expected = StringIO()
    write_free_text(answers, expected)
    assert text == expected.getvalue()
    if near is not None:
        return
    page = embedded_data(run("ports", "--format", "html", *args))["free"]
    several = len(answers) > 1
    hosts = {unit_node_name(name, scope["node"]) if several else scope["node"]: (scope["free"], scope["freeCount"])
             for name, unit in by_unit(printed) for scope in unit["scopes"] if scope["kind"] == "hostPort"}
    assert {name: (page["runs"][runs], count) for name, runs, count in page["hosts"]} == hosts
    assert [name for name, _, _ in page["hosts"]] == list(hosts)
    node_ports = [next(scope["free"] for scope in unit["scopes"] if scope["kind"] == "nodePort")
                  for _, unit in by_unit(printed)]
    if several:
        assert page["nodePortsByUnit"] == node_ports
    else:
        assert [page["nodePorts"]] == node_ports
        assert page["nodePortCount"] == by_unit(printed)[0][1]["scopes"][0]["freeCount"]


@pytest.mark.parametrize("nodes, policies, near", [
    ((), (), None),
    ((INVENTORY,), (), None),
    ((INVENTORY,), ("examples/policies",), None),
    ((INVENTORY,), ("examples/policies",), 9100),
    ((), (), 30080),
], ids=["no-inventory", "inventory", "inventory-policies", "inventory-near", "near-nodeport"])
def test_ports_free_is_the_port_maps_view_on_the_examples(nodes, policies, near, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert_one_view("examples/", nodes=nodes, policies=policies, near=near)


def node(name: str, labels: dict, taints: list | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                                                     **labels}},
            "spec": {"taints": taints} if taints else {}}


def workload(kind: str, name: str, namespace: str, ports: list[int], replicas: int = 1, **pod_spec) -> dict:
    labels = {"app": name}
    spec = {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
        "containers": [{"name": name, "image": name, "ports": [
            {"containerPort": port, **({} if pod_spec.get("hostNetwork") else {"hostPort": port})}
            for port in ports]}], **pod_spec}}}
    if kind == "Deployment":
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def service(name: str, namespace: str, node_ports: list[int]) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
            "spec": {"type": "NodePort", "selector": {"app": name},
                     "ports": [{"name": f"p{port}", "port": 80 + index, "nodePort": port}
                               for index, port in enumerate(node_ports)]}}


def generated_inventory(root: Path, units: bool) -> None:
    """A generated cluster: 24 nodes in three pools (one tainted, one cordoned node), DaemonSets
    and Deployments with hostPorts pinned to pools by selectors, hostNetwork pods, NodePort
    Services, a node daemon's port taken by a pod; with `units`, split in two environments."""
    pools = ("gpu", "edge", "general")
    nodes = [node(f"{pool}-{index}", {"pool": pool},
                  [{"key": "dedicated", "value": pool, "effect": "NoSchedule"}] if pool == "gpu" else None)
             for pool in pools for index in range(8)]
    nodes[-1]["spec"]["unschedulable"] = True
    write(root, {"inventory/nodes.json": json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes})})
    for environment in ("prod", "staging"):
        offset = 0 if environment == "prod" else 7
        objects = []
        for number, pool in enumerate(pools):
            objects.append(workload("DaemonSet", f"{pool}-agent", "ops", [9100 + number, 9400 + offset],
                                    nodeSelector={"pool": pool},
                                    tolerations=[{"key": "dedicated", "operator": "Exists"}]))
            objects.append(workload("Deployment", f"{pool}-web", "web", [8080 + number + offset, 8443],
                                    replicas=3 + number, nodeSelector={"pool": pool}))
        objects.append(workload("Deployment", "roamer", "web", [8500 + offset, 10250], replicas=30))
        objects.append(workload("DaemonSet", "netmon", "ops", [9600 + offset, 2049], hostNetwork=True))
        objects += [service(f"svc-{number}", "web", [30000 + 7 * number + offset, 30400 + number])
                    for number in range(12)]
        text = "\n---\n".join(json.dumps(item) for item in objects)
        write(root, {f"{environment}/app.yaml": text})
    config = "nodes: [inventory/nodes.json]\n"
    if units:
        config += "units:\n  prod: {paths: [prod]}\n  staging: {paths: [staging], node-port-range: 30000-30099}\n"
    write(root, {".kubelint-ports.yaml": config})


@pytest.mark.parametrize("units", [False, True], ids=["one-cluster", "two-units"])
@pytest.mark.parametrize("near", [None, 8081])
def test_ports_free_is_the_port_maps_view_on_a_generated_inventory(units, near, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    generated_inventory(tmp_path, units)
    report = report_of()
    assert len(report.cluster.nodes) == 24 and len(report.cluster.units) == (2 if units else 0)
    assert_one_view(near=near)


def test_ports_free_takes_each_units_own_node_daemons(tmp_path, monkeypatch):
    """Each unit's answer counts the node daemons of that unit's model, as its map does."""
    monkeypatch.chdir(tmp_path)
    generated_inventory(tmp_path, True)
    report = report_of()
    for (name, answer), (unit, cluster) in zip(free_ports_of(report), report.cluster.units):
        assert name == unit
        reserved = set(cluster.node_daemons)
        assert reserved and all(not any(first <= port <= last for port in reserved for first, last in scope.free)
                                for scope in answer.scopes[1:])
