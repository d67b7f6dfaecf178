"""KP401's fix: kube-proxy's missing clusterCIDR set to the pod CIDR another input states, in a
KubeProxyConfiguration, inside a ConfigMap's `config.conf` block, or as `--cluster-cidr`; never
guessed (docs/fix.md). Fixtures: tests/fix/kp401, copied by each test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from kubelint_ports.cli import app

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fix" / "kp401"
runner = CliRunner()


def fixed(tmp_path, monkeypatch, name: str, text: bytes | None = None,
          *options: str) -> tuple[bytes, bytes, str]:
    """(the file before, after `lint --fix` with `options`, the command's output)."""
    path = tmp_path / name
    if text is None:
        shutil.copyfile(FIXTURES / name, path)
    else:
        path.write_bytes(text)
    monkeypatch.chdir(tmp_path)
    before = path.read_bytes()
    result = runner.invoke(app, ["lint", "--fix", *options, "--select", "KP401", name])
    return before, path.read_bytes(), result.output


def test_empty_cluster_cidr_in_config_conf_gets_the_kubeadm_pod_subnet(tmp_path, monkeypatch):
    before, after, output = fixed(tmp_path, monkeypatch, "configmap-kubeadm.yaml")
    assert after == before.replace(b'    clusterCIDR: ""\n', b"    clusterCIDR: 10.244.0.0/16\n"), output
    assert "fixed 1 finding in 1 file" in output and "KP401" not in output.split("fixed")[1]


def test_absent_cluster_cidr_is_added_inside_the_block_at_its_indentation(tmp_path, monkeypatch):
    # unsafe: flannel's Network is not the cluster's own controller-manager or kubeadm range
    before, after, output = fixed(tmp_path, monkeypatch, "configmap-flannel.yaml", None, "--unsafe-fixes")
    assert after == before.replace(b"      kind: KubeProxyConfiguration\n",
                                   b"      kind: KubeProxyConfiguration\n      clusterCIDR: 10.42.0.0/16\n"), output


def test_crlf_config_map_keeps_its_line_ends(tmp_path, monkeypatch):
    crlf = (FIXTURES / "configmap-flannel.yaml").read_bytes().replace(b"\n", b"\r\n")
    before, after, output = fixed(tmp_path, monkeypatch, "crlf.yaml", crlf, "--unsafe-fixes")
    assert after == before.replace(b"      kind: KubeProxyConfiguration\r\n",
                                   b"      kind: KubeProxyConfiguration\r\n      clusterCIDR: 10.42.0.0/16\r\n"), output


def test_standalone_configuration_gets_both_families_after_kind(tmp_path, monkeypatch):
    before, after, output = fixed(tmp_path, monkeypatch, "standalone-controller-manager.yaml")
    assert after == before.replace(b"kind: KubeProxyConfiguration   # read by kube-proxy --config\n",
                                   b"kind: KubeProxyConfiguration   # read by kube-proxy --config\n"
                                   b"clusterCIDR: 10.244.0.0/16,fd00:10:244::/56\n"), output


def test_flags_are_completed_or_added_where_kube_proxy_reads_them(tmp_path, monkeypatch):
    before, after, output = fixed(tmp_path, monkeypatch, "flags-static-pod.yaml")
    expected = before.replace(  # a block list: a new item
        b"        - --proxy-mode=ipvs   # the incident's mode\n",
        b"        - --proxy-mode=ipvs   # the incident's mode\n        - --cluster-cidr=10.244.0.0/16\n").replace(
        b"exec kube-proxy --kubeconfig", b"exec kube-proxy --cluster-cidr=10.244.0.0/16 --kubeconfig").replace(
        b"'--cluster-cidr=']", b"'--cluster-cidr=10.244.0.0/16']")  # a shell string; an empty flag
    assert after == expected, output
    assert "fixed 3 findings in 1 file" in output


def test_a_flow_list_gets_the_flag_at_its_end(tmp_path, monkeypatch):
    text = (FIXTURES / "flags-static-pod.yaml").read_bytes().replace(
        b"      args: [--proxy-mode=ipvs, '--cluster-cidr=']", b"      args: [--proxy-mode=ipvs]  # flow")
    before, after, output = fixed(tmp_path, monkeypatch, "flow.yaml", text)
    assert b"      args: [--proxy-mode=ipvs, --cluster-cidr=10.244.0.0/16]  # flow\n" in after, output


def test_no_stated_pod_cidr_means_no_fix_and_says_why(tmp_path, monkeypatch):
    source = ROOT / "tests" / "policies" / "KP401" / "fail-incident-configmap.yaml"
    before, after, output = fixed(tmp_path, monkeypatch, "incident.yaml", source.read_bytes())
    assert after == before
    assert ("incident.yaml:16:5: KP401 fix not applied: no input states the pod CIDR (kubeadm networking.podSubnet, "
            "flannel's Network, kube-controller-manager --cluster-cidr, or --pod-cidr): the fix never guesses it") in output
    shown = json.loads(runner.invoke(app, ["lint", "--format", "json", "incident.yaml"]).stdout)["findings"]
    assert shown[0]["fix"]["applicability"] == "safe" and "never guesses" in shown[0]["fix"]["notApplied"]


def test_the_pod_cidr_option_states_it(tmp_path, monkeypatch):
    source = ROOT / "tests" / "policies" / "KP401" / "fail-standalone-nftables.yaml"
    shutil.copyfile(source, tmp_path / "kpc.yaml")
    monkeypatch.chdir(tmp_path)
    # unsafe: the option is not the cluster's own controller-manager or kubeadm range
    runner.invoke(app, ["lint", "--fix", "--unsafe-fixes", "--pod-cidr", "10.32.0.0/12", "kpc.yaml"])
    assert "\nkind: KubeProxyConfiguration\nclusterCIDR: 10.32.0.0/12\nmode: nftables\n" in (tmp_path / "kpc.yaml").read_text()


def test_a_config_conf_written_as_a_quoted_string_is_not_edited(tmp_path, monkeypatch):
    text = (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kube-proxy, namespace: kube-system}\ndata:\n"
            b'  config.conf: "apiVersion: kubeproxy.config.k8s.io/v1alpha1\\nkind: KubeProxyConfiguration\\nmode: ipvs\\n"\n'
            + b"---\n" + (FIXTURES / "configmap-kubeadm.yaml").read_bytes().split(b"---\n", 1)[1])
    before, after, output = fixed(tmp_path, monkeypatch, "quoted.yaml", text)
    assert after == before
    assert 'KP401 fix not applied: data."config.conf" is not a literal block (|): its lines cannot be edited in place' \
        in output
