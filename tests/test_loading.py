"""Loading: positions, document forms, typing, and bad input that must never crash."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kubelint_ports.engine import lint_paths
from kubelint_ports.loading import load, load_bytes, LoadResult
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.model import build_cluster

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: web
          ports:
            - containerPort: 80
            - containerPort: 8443
              hostPort: 8443
"""


def load_text(text: str | bytes, path: str = "m.yaml") -> LoadResult:
    result = LoadResult()
    load_bytes(text.encode() if isinstance(text, str) else text, path, result)
    return result


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_location_of_nested_key_and_value():
    document = load_text(DEPLOYMENT).documents[0]
    location = document.location("spec.template.spec.containers[0].ports[1].hostPort")
    assert (location.line, location.column) == (15, 15)
    assert (location.end_line, location.end_column) == (15, 29)  # after "hostPort: 8443"
    key_node, value_node = yt.resolve(document.root, "spec.template.spec.containers[0].ports[1].hostPort")
    assert (key_node.start_mark.line + 1, value_node.start_mark.column + 1) == (15, 25)


def test_location_falls_back_to_deepest_existing_field():
    document = load_text(DEPLOYMENT).documents[0]
    location = document.location("spec.template.spec.nodeSelector.zone")
    assert (location.line, location.column) == (9, 5)  # the `spec:` of the pod template


def test_list_item_location_points_at_the_item():
    document = load_text(DEPLOYMENT).documents[0]
    location = document.location("spec.template.spec.containers[0].ports[1]")
    assert (location.line, location.column) == (14, 15)

def test_descend_stops_at_the_deepest_segment_present():
    root = load_text(DEPLOYMENT).documents[0].root
    segments = yt.parse_field_path("spec.template.spec.containers[0].ports[1].hostPort")
    key_node, value_node, depth = yt.descend(root, segments)
    assert (depth, key_node.value, value_node.value) == (len(segments), "hostPort", "8443")
    assert yt.at_segments(root, segments) is value_node
    key_node, value_node, depth = yt.descend(root, segments[:6] + [7, "hostPort"])  # ports[7]: absent
    assert (depth, key_node.value) == (6, "ports") and isinstance(value_node, yt.SequenceNode)
    assert yt.at_segments(root, segments[:6] + [7]) is None
    assert yt.descend(None, ["spec"]) == (None, None, 0)



def test_multi_document_and_kind_list_expansion():
    text = DEPLOYMENT + "---\n" + """\
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Service
    metadata: {name: a}
    spec: {ports: [{port: 80}]}
  - apiVersion: v1
    kind: ServiceList
    items:
      - apiVersion: v1
        kind: Service
        metadata: {name: b}
"""
    result = load_text(text)
    kinds = [yt.as_str(yt.get(d.root, "kind")) for d in result.documents]
    assert kinds == ["Deployment", "Service", "Service"]
    assert result.documents[2].location("metadata.name").line == 29


def test_helm_source_comments_become_the_origin():
    text = """\
---
# Source: shop/templates/service.yaml
apiVersion: v1
kind: Service
metadata: {name: web}
---
apiVersion: v1
kind: Service
metadata: {name: no-source}
---
# Source: shop/templates/deployment.yaml
""" + DEPLOYMENT
    documents = load_text(text).documents
    assert [d.origin for d in documents] == ["shop/templates/service.yaml", "", "shop/templates/deployment.yaml"]


def test_non_kubernetes_yaml_is_skipped_quietly_and_counted():
    result = load_text("name: my-chart\nversion: 1.0.0\n---\n---\n" + DEPLOYMENT)
    assert result.skipped == 1
    assert len(result.documents) == 1
    assert result.diagnostics == []


def test_malformed_yaml_reports_file_and_line_and_keeps_earlier_documents():
    result = load_text(DEPLOYMENT + "---\napiVersion: v1\nkind: Service\nmetadata: {name: x\n  bad: [\n")
    assert len(result.documents) == 1
    [diagnostic] = result.diagnostics
    assert diagnostic.location.path == "m.yaml"
    assert diagnostic.location.line >= 19
    assert "invalid YAML" in diagnostic.message


def test_document_that_is_not_a_mapping_is_an_error():
    result = load_text("- just\n- a list\n")
    [diagnostic] = result.diagnostics
    assert (diagnostic.location.line, diagnostic.location.column) == (1, 1)
    assert "not a Kubernetes object mapping" in diagnostic.message


def test_wrong_field_type_is_an_error_with_line(tmp_path):
    bad = write(tmp_path, "bad.yaml", DEPLOYMENT.replace(
        "          ports:\n            - containerPort: 80\n            - containerPort: 8443\n              hostPort: 8443\n",
        "          ports: http\n"))
    good = write(tmp_path, "good.yaml", DEPLOYMENT)
    report = lint_paths([str(bad), str(good)])
    [diagnostic] = report.diagnostics
    assert diagnostic.location.line == 12
    assert "must be a list" in diagnostic.message
    assert any(f.location.path.endswith("good.yaml") for f in report.findings), "other files still linted"


def billion_laughs(levels: int = 10) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        refs = ",".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n" + "\n".join("  " + l for l in lines) + "\n"


def test_billion_laughs_is_refused_at_the_alias_budget():
    """10^10 nodes once expanded: refused by counting (memoised sizes), never by expanding, at the
    first line whose alias crosses the budget; docs/safety.md has the figures."""
    result = load_text(billion_laughs())
    [diagnostic] = result.diagnostics
    assert "aliases expand to more than 1,000,000 nodes" in diagnostic.message
    assert diagnostic.location.line == 10  # a5: 10^6 strings and their lists, the first level past it
    assert result.documents == []
    smaller = load_text(billion_laughs(levels=5))  # a4: about 111,000 nodes, within the budget
    assert smaller.diagnostics == [] and len(smaller.documents) == 1


def test_recursive_alias_is_rejected():
    result = load_text("apiVersion: v1\nkind: Pod\nmetadata: &m\n  name: x\n  self: *m\n")
    [diagnostic] = result.diagnostics
    assert "recursive" in diagnostic.message


def test_arbitrary_tags_are_never_constructed(tmp_path):
    marker = tmp_path / "pwned"
    text = DEPLOYMENT.replace("replicas: 2", f'replicas: !!python/object/apply:os.system ["touch {marker}"]')
    result = load_text(text)
    cluster, diagnostics = build_cluster(result.documents)
    assert not marker.exists()
    [diagnostic] = diagnostics
    assert "unsupported YAML tag" in diagnostic.message
    assert diagnostic.location.line == 7


@pytest.mark.parametrize("word, expected", [("yes", True), ("on", True), ("True", True), ("off", False), ("n", False)])
def test_yaml_11_booleans(word, expected):
    result = load_text(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  hostNetwork: {word}\n"
                       "  containers: [{name: c, ports: [{containerPort: 9100}]}]\n")
    cluster, diagnostics = build_cluster(result.documents)
    assert diagnostics == []
    assert cluster.workloads[0].host_network is expected


def test_quoted_boolean_is_a_type_error():
    result = load_text('apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  hostNetwork: "true"\n')
    _, [diagnostic] = build_cluster(result.documents)
    assert "expected true or false" in diagnostic.message
    assert (diagnostic.location.line, diagnostic.location.column) == (5, 16)


@pytest.mark.parametrize("text, value", [("80", 80), ("0x50", 80), ("+80", 80), ("0120", 80), ("8_080", 8080)])
def test_yaml_11_integers(text, value):
    node = load_text(f"apiVersion: v1\nkind: X\nport: {text}\n").documents[0]
    assert yt.as_int(yt.get(node.root, "port")) == value


def test_merge_keys_are_applied():
    text = """\
apiVersion: v1
kind: Service
metadata: {name: s}
spec:
  <<: {type: NodePort}
  ports:
    - &base {port: 80, nodePort: 30080}
    - <<: *base
      port: 81
      nodePort: 30081
"""
    cluster, _ = build_cluster(load_text(text).documents)
    service = cluster.services[0]
    assert service.type == "NodePort"
    assert [p.node_port for p in service.ports] == [30080, 30081]


def test_bom_and_crlf_keep_positions():
    text = "\ufeff" + DEPLOYMENT.replace("\n", "\r\n")
    document = load_text(text.encode("utf-8")).documents[0]
    location = document.location("spec.template.spec.containers[0].ports[1].hostPort")
    assert (location.line, location.column) == (15, 15)


def test_invalid_encoding_is_an_error_naming_the_line():
    result = load_text(b"apiVersion: v1\nkind: Pod\nmetadata: {name: \xff\xfe}\n")
    [diagnostic] = result.diagnostics
    assert "unreadable YAML" in diagnostic.message or "invalid YAML" in diagnostic.message
    assert diagnostic.location.line == 3


def test_huge_file_is_refused_with_a_clear_error(tmp_path):
    from kubelint_ports.loading import budgets

    path = write(tmp_path, "huge.yaml", DEPLOYMENT + "#" * (1 << 20))
    with budgets.applied(budgets.Limits(max_file_mib=1)):
        result = load([str(path)])
    [diagnostic] = result.diagnostics
    assert "limit" in diagnostic.message and diagnostic.location.path.endswith("huge.yaml")


def test_missing_file_is_an_error_on_the_command_line(tmp_path):
    (tmp_path / "ok.yaml").write_text(DEPLOYMENT)
    result = load([str(tmp_path / "nope.yaml"), str(tmp_path / "gone"), str(tmp_path / "ok.yaml")])
    assert [(str(d.location), d.message) for d in result.diagnostics] == [
        ("command line", f"no such file or directory {str(tmp_path / 'nope.yaml')!r}"),
        ("command line", f"no such file or directory {str(tmp_path / 'gone')!r}")]
    assert len(result.documents) == 1, "the other inputs are still read"


@pytest.mark.parametrize("data", [b"", b"\n  \n"])
def test_empty_standard_input_is_an_input_error(data):
    from kubelint_ports.loading import EMPTY_STDIN

    result = load(["-"], stdin=io.BytesIO(data))
    assert [(str(d.location), d.message) for d in result.diagnostics] == [("<stdin>", EMPTY_STDIN)]


def test_directories_are_walked_recursively_sorted_and_hidden_skipped(tmp_path):
    write(tmp_path, "b.yaml", DEPLOYMENT)
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "a.yml", DEPLOYMENT)
    write(tmp_path / "sub", "c.json", '{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "j"}}')
    write(tmp_path / "sub", "notes.txt", "not yaml")
    (tmp_path / ".git").mkdir()
    write(tmp_path / ".git", "x.yaml", ": : :")
    result = load([str(tmp_path)])
    assert result.files == 3
    assert result.diagnostics == []
    assert [Path(d.path).name for d in result.documents] == ["b.yaml", "a.yml", "c.json"]


def test_standard_input():
    result = load(["-"], stdin=io.BytesIO(DEPLOYMENT.encode()))
    assert result.documents[0].path == "<stdin>"


def test_sidecar_init_containers_count_and_ordinary_ones_do_not():
    text = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  initContainers:
    - name: setup
      ports: [{containerPort: 1000, hostPort: 1000}]
    - name: proxy
      restartPolicy: Always
      ports: [{containerPort: 2000, hostPort: 2000}]
  containers:
    - name: app
      ports: [{containerPort: 3000, hostPort: 3000}]
"""
    cluster, _ = build_cluster(load_text(text).documents)
    assert sorted(claim.port for claim in cluster.workloads[0].claims) == [2000, 3000]


def test_host_network_ports_are_host_ports_and_defaults_apply():
    text = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: d}
spec:
  template:
    spec:
      hostNetwork: true
      containers:
        - name: agent
          ports:
            - containerPort: 9100
            - containerPort: 8125
              protocol: UDP
              hostIP: 10.0.0.1
"""
    cluster, _ = build_cluster(load_text(text).documents)
    workload = cluster.workloads[0]
    assert workload.replicas is None
    assert [(c.port, c.protocol, c.host_ip, c.via) for c in workload.claims] == [
        (9100, "TCP", "0.0.0.0", "hostNetwork"), (8125, "UDP", "10.0.0.1", "hostNetwork")]


@pytest.mark.parametrize("kind, api, prefix, replicas_field", [
    ("Deployment", "apps/v1", "spec.template.spec", "replicas: 3"),
    ("ReplicaSet", "apps/v1", "spec.template.spec", "replicas: 3"),
    ("StatefulSet", "apps/v1", "spec.template.spec", "replicas: 3"),
    ("ReplicationController", "v1", "spec.template.spec", "replicas: 3"),
    ("Job", "batch/v1", "spec.template.spec", "parallelism: 3"),
])
def test_workload_kinds_reduce_to_one_pod_template(kind, api, prefix, replicas_field):
    text = f"""\
apiVersion: {api}
kind: {kind}
metadata: {{name: w, namespace: ns}}
spec:
  {replicas_field}
  template:
    metadata: {{labels: {{app: w}}}}
    spec:
      nodeSelector: {{zone: a}}
      containers: [{{name: c, ports: [{{containerPort: 80, hostPort: 8080}}]}}]
"""
    cluster, diagnostics = build_cluster(load_text(text).documents)
    assert diagnostics == []
    [workload] = cluster.workloads
    assert workload.replicas == 3
    assert workload.pod_labels == {"app": "w"}
    assert workload.scheduling.node_selector == {"zone": "a"}
    assert workload.claims[0].field_path == f"{prefix}.containers[0].ports[0].hostPort"


def test_cronjob_template_and_crd_kinds_named_like_builtins():
    text = """\
apiVersion: batch/v1
kind: CronJob
metadata: {name: c}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers: [{name: c, ports: [{containerPort: 80, hostPort: 8080}]}]
---
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: knative}
spec: {template: {spec: {containers: [{image: x}]}}}
"""
    cluster, _ = build_cluster(load_text(text).documents)
    assert [w.ref.kind for w in cluster.workloads] == ["CronJob"]
    assert cluster.workloads[0].claims[0].field_path == \
        "spec.jobTemplate.spec.template.spec.containers[0].ports[0].hostPort"
    assert cluster.services == []


def test_service_fields():
    text = """\
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: ns}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.10
  externalTrafficPolicy: Local
  healthCheckNodePort: 32000
  allocateLoadBalancerNodePorts: false
  externalIPs: [192.0.2.10]
  selector: {app: web}
  ports:
    - {name: http, port: 80, targetPort: http, nodePort: 31080}
    - {name: dns, port: 53, protocol: UDP, targetPort: 5353}
status:
  loadBalancer:
    ingress: [{ip: 203.0.113.7}, {hostname: lb.example.com}]
"""
    cluster, diagnostics = build_cluster(load_text(text).documents)
    assert diagnostics == []
    [service] = cluster.services
    assert service.type == "LoadBalancer" and service.cluster_ip == "10.96.0.10"
    assert service.health_check_node_port == 32000
    assert service.allocate_load_balancer_node_ports is False
    assert service.external_ips == ("192.0.2.10",)
    assert service.load_balancer_ips == ("203.0.113.7",)
    assert [(p.port, p.protocol, p.target_port, p.node_port) for p in service.ports] == [
        (80, "TCP", "http", 31080), (53, "UDP", 5353, None)]
    assert [c.label for c in service.node_port_claims] == ["nodePort", "healthCheckNodePort"]


def test_lowercase_protocol_is_invalid():
    text = ("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
            "spec: {type: NodePort, ports: [{port: 80, protocol: tcp, nodePort: 30600}]}\n")
    cluster, _ = build_cluster(load_text(text).documents)
    [invalid] = cluster.services[0].invalid_ports
    assert invalid.field_path == "spec.ports[0].protocol" and "case-sensitive" in invalid.message


def test_health_check_node_port_needs_local_traffic_policy():
    base = ("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
            "spec: {type: LoadBalancer, healthCheckNodePort: 32000, ports: [{port: 80}]POLICY}\n")
    cluster, _ = build_cluster(load_text(base.replace("POLICY", "")).documents)
    service = cluster.services[0]
    assert service.health_check_node_port is None
    assert [i.field_path for i in service.invalid_ports] == ["spec.healthCheckNodePort"]
    cluster, _ = build_cluster(load_text(base.replace("POLICY", ", externalTrafficPolicy: Local")).documents)
    assert cluster.services[0].health_check_node_port == 32000 and not cluster.services[0].invalid_ports


def test_node_modules_is_never_walked(tmp_path):
    (tmp_path / "node_modules" / "pkg").mkdir(parents=True)
    write(tmp_path / "node_modules" / "pkg", "x.yaml", "- not\n- kubernetes\n")
    write(tmp_path, "app.yaml", DEPLOYMENT)
    result = load([str(tmp_path)])
    assert result.files == 1 and result.diagnostics == []


def test_what_git_ignores_and_virtualenvs_are_not_walked_unless_named(tmp_path, monkeypatch):
    """Issue 24: `paths: []` walked into venv/. As ruff: skip what .gitignore (and git's other
    excludes) ignore and directories that are virtualenvs; a path named explicitly is linted."""
    import subprocess

    from external_tools import missing_tools_reason
    from kubelint_ports.loading import discover

    missing = missing_tools_reason(("git", "git"))
    if missing:
        pytest.skip(missing)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name in ("k8s/app.yaml", "build/out.yaml", "k8s/app.generated.yaml", "venv/lib/site/data.yaml",
                 "tools/env/nested.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(DEPLOYMENT)
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / ".gitignore").write_text("build/\n*.generated.yaml\n")
    monkeypatch.chdir(tmp_path)
    assert sorted(discover(["."])) == ["./k8s/app.yaml", "./tools/env/nested.yaml"]
    assert sorted(discover(["build", "venv", "k8s/app.generated.yaml"])) == [
        "build/out.yaml", "k8s/app.generated.yaml", "venv/lib/site/data.yaml"]
