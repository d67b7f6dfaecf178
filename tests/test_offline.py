"""The hostile cases that would reach the network, run with networking disabled: a new network
namespace (`unshare -n`) where every address routes through loopback and every outgoing packet is
dropped and counted by netfilter, and a Python audit hook that reports any socket or URL opened in
the CLI's process. The test fails on any connection attempt, by either layer; the Helm render
worker (Go code) is seen by the packet counters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from external_tools import require_tools
from test_hostile import DEPLOYMENT, POLICY, SCHEMAS, needs_engine, write_chart

TOOLS = (("unshare", "util-linux"), ("ip", "iproute2"), ("iptables", "iptables"), ("ip6tables", "iptables"))
pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="network namespaces are Linux's"),
    pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() != 0,
                       reason="the offline test needs root, for a network namespace"),
    pytest.mark.slow,  # the hostile cases again, in a network namespace: not in the quick subset
]


@pytest.fixture(autouse=True)
def _tools():
    """A missing tool skips with the package to install (fails under CI=true)."""
    require_tools(*TOOLS)

AUDITED = textwrap.dedent("""\
    import os, sys
    WATCHED = {"socket.connect", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
               "socket.gethostbyname", "socket.gethostbyaddr", "urllib.Request", "http.client.connect"}
    def hook(event, args):
        if event in WATCHED:
            os.write(2, f"NETWORK-ATTEMPT {event} {args!r}\\n".encode())
    sys.addaudithook(hook)
    sys.argv = ["kubelint-ports", *sys.argv[1:]]
    from kubelint_ports.cli import main
    main()
    """)


def hostile_cases(tmp_path: Path) -> dict[str, list[str]]:
    """name -> CLI arguments, run in `tmp_path`."""
    (tmp_path / "m.yaml").write_text(DEPLOYMENT)
    cases: dict[str, list[str]] = {}
    for name, schema in SCHEMAS.items():
        chart = write_chart(tmp_path / f"schema-{name}")
        (chart / "values.schema.json").write_text(json.dumps(schema))
        cases[f"chart schema {name}"] = ["lint", chart.name]
    local = write_chart(tmp_path / "schema-local")
    (local / "values.schema.json").write_text(json.dumps(
        {"$schema": "https://json-schema.org/draft-07/schema#", "$defs": {"p": {"type": "integer"}},
         "properties": {"port": {"$ref": "#/$defs/p"}}}))
    cases["chart with a local schema, validated offline"] = ["lint", local.name]
    lookup = write_chart(tmp_path / "lookup", '{{ $s := lookup "v1" "Service" "default" "x" }}\n'
                                              "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    cases["chart calling lookup"] = ["lint", lookup.name]
    dependency = write_chart(tmp_path / "dependency")
    (dependency / "Chart.yaml").write_text("apiVersion: v2\nname: dependency\nversion: 0.1.0\ndependencies:\n"
                                           "  - {name: db, version: 1.0.0, repository: https://127.0.0.1:9/charts}\n")
    cases["chart with a dependency to download"] = ["lint", dependency.name]
    cases["values file as a URL"] = ["lint", local.name, "-f", "http://127.0.0.1:9/values.yaml"]
    for index, schema in enumerate(['{properties: {hostPort: {$ref: "http://127.0.0.1:9/p.json"}}}',
                                    '{$id: "http://127.0.0.1:9/", properties: {hostPort: {$ref: "p.json"}}}',
                                    '{$schema: "http://127.0.0.1:9/meta"}']):
        folder = tmp_path / f"policies-{index}"
        folder.mkdir()
        (folder / "KP951-ref-test.yaml").write_text(POLICY.format(schema=schema))
        cases[f"policy schema {index}"] = ["lint", "m.yaml", "--policies", folder.name]
    return cases


def test_the_packet_counters_see_a_connection_attempt(tmp_path):
    """The control: the same namespace set-up counts a fetch from a remote address."""
    program = ("import urllib.request\ntry:\n    urllib.request.urlopen('http://10.9.9.9/', timeout=0.5)\n"
               "except OSError:\n    pass\n")
    script = "\n".join(["ip link set lo up", "ip route add local 0.0.0.0/0 dev lo", "iptables -A OUTPUT -j DROP",
                        f"'{sys.executable}' -c \"{program}\"", "iptables -L OUTPUT -v -x -n"])
    done = subprocess.run(["unshare", "-n", "sh", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0 and "Operation not permitted" in done.stderr:
        pytest.skip(f"cannot create a network namespace here: {done.stderr.strip()}")
    [counted] = [int(line.split()[0]) for line in done.stdout.splitlines() if line.strip().split()[2:3] == ["DROP"]]
    assert counted > 0, done.stdout + done.stderr


@needs_engine  # most cases are charts, rendered: without an engine they are refused before Helm runs
def test_hostile_inputs_make_no_connection_attempt(tmp_path):
    cases = hostile_cases(tmp_path)
    (tmp_path / "audited.py").write_text(AUDITED)
    # Every address is made local (routed through lo), so an attempt to reach any host or DNS server
    # leaves a packet for the counters instead of failing before netfilter sees it.
    lines = ["ip link set lo up", "ip route add local 0.0.0.0/0 dev lo", "ip -6 route add local ::/0 dev lo || true",
             "iptables -A OUTPUT -j DROP", "ip6tables -A OUTPUT -j DROP"]
    for index, args in enumerate(cases.values()):
        quoted = " ".join(f"'{arg}'" for arg in args)
        lines.append(f"'{sys.executable}' audited.py {quoted} >out-{index}.txt 2>err-{index}.txt; "
                     f"echo $? >code-{index}.txt")
    lines += ["iptables -L OUTPUT -v -x -n > counters.txt", "ip6tables -L OUTPUT -v -x -n >> counters.txt"]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]))}
    done = subprocess.run(["unshare", "-n", "sh", "-c", "\n".join(lines)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env=environment)
    if done.returncode != 0 and "Operation not permitted" in done.stderr:
        pytest.skip(f"cannot create a network namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    problems = []
    for index, name in enumerate(cases):
        code = int((tmp_path / f"code-{index}.txt").read_text())
        errors = (tmp_path / f"err-{index}.txt").read_text()
        if "NETWORK-ATTEMPT" in errors:
            problems.append(f"{name}: {errors}")
        if code not in (0, 1, 2):
            problems.append(f"{name}: exit {code}: {errors[-500:]}")
    counters = (tmp_path / "counters.txt").read_text()
    packets = [int(line.split()[0]) for line in counters.splitlines() if line.strip().split()[2:3] == ["DROP"]]
    assert len(packets) == 2, counters
    assert not problems, "\n".join(problems)
    assert packets == [0, 0], f"packets left the process:\n{counters}"
    refused = [name for index, name in enumerate(cases) if (tmp_path / f"code-{index}.txt").read_text().strip() == "2"]
    assert len(refused) >= 5  # the refusals are reported, not silent
    for index, name in enumerate(cases):  # charts whose schema refers outside render, with a note
        if name.startswith("chart schema"):
            assert (tmp_path / f"code-{index}.txt").read_text().strip() in ("0", "1"), name
            errors = (tmp_path / f"err-{index}.txt").read_text() + (tmp_path / f"out-{index}.txt").read_text()
            assert "does not fetch" in errors or "meta-schema" in errors, (name, errors[-500:])
