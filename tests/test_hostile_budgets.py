"""Budgets the input could get around (issue 31): one reproducer per class.

- Chart archives whose members unpack to more than their headers say: GNU and PAX sparse files,
  a PAX `size` over the header's, oversized long names and PAX records, negative sizes; and the
  total an archive unpacks to, archives inside it included (4 x max-file-mib).
- A repository's configuration that raises a limit: refused at its line, exit 2; lowering works,
  and only the command line (`--limit`) raises one.
- Limit values out of their range (zero, negative, NaN, infinite, huge, text, booleans) are a
  usage error from the command line and a config error from the file, both exit 2 naming the limit
  and its range, never an internal error (`input-seconds=1e10` was exit 3; `helm-seconds=1e10`
  read every chart as "over 16 MiB").

The archives are built by `tests/fuzzing_budgets.py`, which fuzzes both surfaces. Time bounds
below are hang guards; the memory bound on the sparse archive is the point of the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

import fuzzing_budgets as build  # tests/ is on sys.path: pytest's rootdir
from kubelint_ports.config import ConfigError, load_config
from kubelint_ports.loading import budgets
from kubelint_ports.loading.helm import archive as helm_archive
from kubelint_ports.loading.helm.archive import ArchiveError, read_archive

pytestmark = pytest.mark.slow  # archives run to their budgets: not in the quick subset

ROOT = Path(__file__).resolve().parents[1]
HANG_GUARD = 120  # seconds
MIB = budgets.MIB


def cli(*args: str, cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "kubelint_ports", *args], cwd=cwd, input=stdin,
                          capture_output=True, timeout=HANG_GUARD)
    assert done.returncode >= 0, f"killed by signal {-done.returncode}: {done.stderr[-2000:]!r}"
    return done


# Measures the CLI from a small process of its own: a child forked from the test process counts
# the pages it shares with it (a pytest worker grown to 260 MiB) in its peak until it execs.
MEASURE = """
import os, subprocess, sys
process = subprocess.Popen(sys.argv[2:], stdout=sys.stdout, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(process.pid, 0)
with open(sys.argv[1], "w") as peak:
    peak.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def cli_measured(*args: str, cwd: Path) -> tuple[int, bytes, float, float]:
    """(exit code, stdout, wall seconds, peak resident MiB) of the CLI in its own process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryDirectory() as scratch:
        started = time.monotonic()
        peak_file = os.path.join(scratch, "peak")
        process = subprocess.Popen([sys.executable, "-I", "-c", MEASURE, peak_file, sys.executable, "-m",
                                    "kubelint_ports", *args], cwd=cwd, stdout=out, stderr=subprocess.DEVNULL)
        guard = threading.Timer(HANG_GUARD, process.kill)
        guard.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            guard.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - started
        out.seek(0)
        with open(peak_file, encoding="ascii") as measured:
            peak = int(measured.read()) / (MIB if sys.platform == "darwin" else 1024)
        return process.returncode, out.read(), seconds, peak


def read(data: bytes, max_file_mib: int = 64):
    with budgets.applied(budgets.Limits(max_file_mib=max_file_mib)):
        return read_archive(data, "c-0.1.0.tgz")


def refusal(data: bytes, max_file_mib: int = 64) -> str:
    with pytest.raises(ArchiveError) as caught:
        read(data, max_file_mib)
    return str(caught.value)


# --- archives whose members are not what their headers say ---------------------------------------------


@pytest.mark.skipif(not hasattr(os, "wait4"), reason="measures the child's peak memory with wait4")
def test_a_tiny_archive_of_sparse_members_is_refused_at_the_first_one_in_little_memory(tmp_path):
    """100 GNU-sparse members of 63 MiB each, packed into a few hundred bytes: tarfile fills their
    holes with zeros on reading (20 of them held 1.36 GB, 100 held 6.5 GB in 19 s). The first one
    is refused at its header, naming it, before any is read."""
    archive = build.chart_archive(*(build.gnu_sparse(f"c/files/s{n}", 63 * MIB) for n in range(100)))
    assert len(archive) < 2000
    (tmp_path / "c-0.1.0.tgz").write_bytes(archive)
    code, out, seconds, peak = cli_measured("lint", "c-0.1.0.tgz", cwd=tmp_path)
    assert code == 2, out
    assert b"c-0.1.0.tgz: input-error cannot render Helm chart c-0.1.0.tgz: member 'c/files/s0' is a sparse file" \
        in out
    assert peak < 200, f"peak {peak:.0f} MiB"  # a one-file lint's own size, nowhere near 63 MiB per member
    assert seconds < 60


@pytest.mark.parametrize("version", ["0.0", "0.1", "1.0"])
def test_pax_sparse_members_are_refused_before_they_are_read(version):
    archive = build.chart_archive(*(build.pax_sparse(f"c/files/s{n}", 63 * MIB, version) for n in range(20)))
    assert refusal(archive) == "member 'c/files/s0' is a sparse file (PAX GNU.sparse); a chart archive holds none"


def test_sparse_members_under_the_size_budget_are_refused_too():
    """Each under max-file-mib, together 20 times it: refused as sparse, not summed after reading."""
    archive = build.chart_archive(*(build.gnu_sparse(f"c/files/s{n}", MIB - 1, b"x" * 100, extensions=2)
                                    for n in range(20)))
    assert "member 'c/files/s0' is a sparse file" in refusal(archive, max_file_mib=1)


def test_a_pax_size_other_than_the_header_is_refused_and_the_same_size_is_read():
    """Readers disagree on where such a member ends: what we check must be what Helm reads."""
    message = refusal(build.chart_archive(build.pax_size_override("c/templates/x.yaml", b"a: 1\n" * 2, 20)))
    assert message == ("member 'c/templates/x.yaml' has a PAX size (20 bytes) other than its header's (10): "
                       "readers would disagree on where it ends")
    huge = refusal(build.chart_archive(build.pax_size_override("c/templates/x.yaml", b"a: 1\n", 10 ** 12)))
    assert "has a PAX size (1,000,000,000,000 bytes)" in huge
    same = read(build.chart_archive(build.pax_size_override("c/templates/x.yaml", b"a: 1\n", 5)))
    assert same.content("templates/x.yaml") == b"a: 1\n"


@pytest.mark.parametrize("kind", [b"L", b"K", b"x", b"g"])
def test_long_names_and_pax_records_over_1_mib_are_refused_before_they_are_read(kind):
    """tarfile reads a long name or PAX record whole before its member is seen; Helm's reader (Go's
    archive/tar) refuses one over 1 MiB, and so do we, at its header."""
    archive = build.chart_archive(build.long_header(kind, 2 ** 40) + build.regular("c/files/a", b"x"))
    assert refusal(archive) == "member '././@LongLink' is a long name or PAX record of 1,099,511,627,776 bytes, " \
                               "over 1 MiB"
    readable = build.chart_archive(build.long_header(b"L", 11, b"c/files/b\0\0") + build.regular("c/files/a", b"x"))
    assert read(readable).content("files/b") == b"x"


def test_a_negative_declared_size_is_refused():
    archive = build.chart_archive(build.declared_size("c/files/a", b"\xff" * 12))
    assert refusal(archive) == "member 'c/files/a' declares a negative size"


def test_a_member_declared_over_the_budget_is_refused_at_its_header():
    archive = build.chart_archive(build.declared_size("c/files/a", b"\x80" + (2 ** 40).to_bytes(11, "big")))
    assert refusal(archive) == "member 'c/files/a' is more than 64 MiB once unpacked (limit max-file-mib)"


# --- the total an archive unpacks to -------------------------------------------------------------------


def numbered(first: int, size: int = 1_000_000) -> bytes:
    """`size` bytes of numbered lines: packs about 8:1 (no gzip bomb), unpacks big."""
    lines = b"".join(b"key-%07d: value\n" % number for number in range(first, first + size // 17 + 1))
    return lines[:size]


def test_an_archive_unpacks_to_at_most_4_times_max_file_mib_in_all():
    members = [build.regular(f"c/files/{n}", numbered(n * 100_000)) for n in range(5)]  # 5 x 1.0 MB, 1 MiB each
    assert "more than 4 MiB once unpacked, archives inside it included (4 x limit max-file-mib)" \
        in refusal(build.chart_archive(*members), max_file_mib=1)
    assert len(read(build.chart_archive(*members[:3]), max_file_mib=1).members) == 5  # 3 MB: within


def test_archives_inside_an_archive_count_in_its_total():
    inner = build.gzip_tar(build.regular("sub/Chart.yaml", build.CHART_YAML),
                           *(build.regular(f"sub/files/{n}", numbered(n * 100_000)) for n in range(2)))
    outer = build.chart_archive(*(build.regular(f"c/files/{n}", numbered(500_000 + n * 100_000)) for n in range(2)),
                                build.regular("c/charts/sub-0.1.0.tgz", inner))
    message = refusal(outer, max_file_mib=1)
    assert message.startswith("c/charts/sub-0.1.0.tgz: more than 4 MiB once unpacked, archives inside it included")
    assert "sub/Chart.yaml" in read(outer, max_file_mib=2).nested["charts/sub-0.1.0.tgz"].members["Chart.yaml"][0]


def test_the_archives_kept_while_a_chart_loads_stay_within_one_archives_budget(tmp_path):
    """A chart directory with many `charts/*.tgz` files: each is read on its own budget, and the
    cache of those read holds at most one archive's total (4 x max-file-mib), not 16 of them."""
    for n in range(8):
        (tmp_path / f"sub{n}-0.1.0.tgz").write_bytes(build.chart_archive(
            *(build.regular(f"c/files/{k}", numbered(n * 1_000_000 + k * 100_000)) for k in range(3)), top="c"))
    helm_archive.forget_archives()
    try:
        with budgets.applied(budgets.Limits(max_file_mib=1)):
            for n in range(8):
                assert helm_archive.chart_archive(str(tmp_path / f"sub{n}-0.1.0.tgz")).unpacked > 3_000_000
            held = sum(archive.unpacked for archive in helm_archive._ARCHIVES.values())
        assert held <= 4 * MIB and len(helm_archive._ARCHIVES) == 1
    finally:
        helm_archive.forget_archives()


# --- a repository's configuration may lower a limit, never raise it --------------------------------------

NODES_BOMB = b"a: [" + b"1," * 4_000_000 + b"1]\n"  # 8 MB, 4 million nodes in one document


@pytest.mark.parametrize(("name", "text", "line"), [
    (".kubelint-ports.yaml", "fail-on: error\nlimits:\n  max-nodes: 100000000000\n", 3),
    ("pyproject.toml", "[tool.kubelint-ports]\nfail-on = \"error\"\n\n[tool.kubelint-ports.limits]\n"
                       "max-nodes = 100000000000\n", 4),
])
def test_a_repository_config_raising_max_nodes_is_a_config_error_and_reads_nothing(tmp_path, name, text, line):
    """It turned an 8 MB file refused in 0.5 s into 986 MB and 7.6 s. Now the run stops before
    reading anything, naming the limit, the default and the way to raise it."""
    (tmp_path / "bomb.yaml").write_bytes(NODES_BOMB)
    started = time.monotonic()
    default = cli("lint", "bomb.yaml", cwd=tmp_path)
    assert default.returncode == 2 and b"more than 500,000 nodes (limit max-nodes)" in default.stdout
    (tmp_path / name).write_text(text)
    raised = cli("lint", "bomb.yaml", cwd=tmp_path)
    assert time.monotonic() - started < 60
    assert raised.returncode == 2 and raised.stdout == b""
    assert raised.stderr.decode() == (
        f"kubelint-ports: error: {name}:{line}: limits.max-nodes: 100000000000 is over the default, 500,000: a "
        "repository's configuration may lower a limit, never raise it (allowed: 1 to 500,000); whoever runs "
        "kubelint-ports raises it on the command line, --limit max-nodes=N (up to 1,000,000,000)\n")


def test_a_repository_config_lowers_limits_and_the_command_line_raises_them(tmp_path):
    nodes = b"a: [" + b"1," * 300_000 + b"1]\n"  # 600 KB, 300,001 nodes
    (tmp_path / "m.yaml").write_bytes(nodes)
    assert cli("lint", "m.yaml", cwd=tmp_path).returncode == 0  # under the default
    (tmp_path / ".kubelint-ports.yaml").write_text("limits: {max-nodes: 1000, helm-seconds: 2.5}\n")
    lowered = cli("lint", "m.yaml", cwd=tmp_path)
    assert lowered.returncode == 2 and b"more than 1,000 nodes (limit max-nodes)" in lowered.stdout
    assert cli("lint", "m.yaml", "--limit", "max-nodes=400000", cwd=tmp_path).returncode == 0
    shown = yaml.safe_load(cli("config", cwd=tmp_path).stdout)["limits"]
    assert (shown["max-nodes"], shown["helm-seconds"], shown["max-depth"]) == (1000, 2.5, 200)
    (tmp_path / ".kubelint-ports.yaml").unlink()
    big = b"a: [" + b"1," * 600_000 + b"1]\n"
    (tmp_path / "m.yaml").write_bytes(big)
    assert b"more than 500,000 nodes" in cli("lint", "m.yaml", cwd=tmp_path).stdout
    assert cli("lint", "m.yaml", "--limit", "max-nodes=1000000", cwd=tmp_path).returncode == 0


def test_a_repository_config_may_set_every_limit_to_its_default(tmp_path):
    defaults = budgets.DEFAULT_LIMITS
    text = "limits:\n" + "".join(f"  {name}: {getattr(defaults, name.replace('-', '_'))}\n"
                                 for name in budgets.limit_names())
    (tmp_path / "c.yaml").write_text(text)
    from kubelint_ports.settings import run_limits

    assert run_limits(load_config(str(tmp_path / "c.yaml")), {}) == defaults


# --- limit values and their ranges ---------------------------------------------------------------------

# name -> (the range as messages write it, a value just past each end)
RANGES = {
    "max-depth": ("1 to 1,000", "0", "1001"),
    "max-aliases": ("1 to 1,000,000,000", "0", "1000000001"),
    "max-nodes": ("1 to 1,000,000,000", "0", "1000000001"),
    "max-file-mib": ("1 to 1,024", "0", "1025"),
    "helm-seconds": ("0.1 to 86,400", "0.09", "86401"),
    "helm-output-mib": ("1 to 1,024", "0", "1025"),
    "helm-memory-mib": ("64 to 1,048,576", "63", "1048577"),
    "kustomize-seconds": ("0.1 to 86,400", "0.05", "86400.5"),
    "kustomize-memory-mib": ("64 to 1,048,576", "63", "1048577"),
    "kustomize-generators": ("1 to 1,000,000", "0", "1000001"),
    "input-seconds": ("0.1 to 86,400", "0", "1e10"),
}
BAD_VALUES = ["-1", "nan", "inf", "-inf", "1e400", "9" * 5000, "abc", "true", "", "0x10", "1,5"]


def test_the_ranges_here_are_the_ones_in_force():
    assert {name: budgets.limit_range(name) for name in budgets.limit_names()} == {
        name: text for name, (text, _, _) in RANGES.items()}


def test_the_config_schema_allows_each_limit_from_its_low_to_its_default():
    schema = json.loads((ROOT / "kubelint_ports" / "schemas" / "config.schema.json").read_text())
    properties = schema["properties"]["limits"]["properties"]
    assert sorted(properties) == sorted(budgets.limit_names())
    for name, rule in properties.items():
        field = name.replace("-", "_")
        assert (rule["minimum"], rule["maximum"]) == (budgets.RANGES[field][0], getattr(budgets.DEFAULT_LIMITS, field))


@pytest.mark.parametrize("name", sorted(RANGES))
def test_out_of_range_limits_on_the_command_line_are_usage_errors_naming_the_range(tmp_path, name):
    """Every bad value of every limit: in-process the error (exit 2 in the CLI); through the CLI,
    the ends of the range, where exit 3 and "over 16 MiB" used to be."""
    from kubelint_ports.settings import CommandLine, resolve

    allowed, below, above = RANGES[name]
    for value in [below, above, *BAD_VALUES]:
        with pytest.raises(ValueError) as caught:
            resolve(CommandLine(paths=(str(tmp_path),), limits=(f"{name}={value}",)))
        assert str(caught.value).startswith(f"--limit {name}={value}: "), caught.value
        assert str(caught.value).endswith(f"(allowed: {allowed})"), caught.value
    (tmp_path / "m.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    for value in (below, above):
        done = cli("lint", "m.yaml", "--limit", f"{name}={value}", cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.decode().startswith(f"kubelint-ports: error: --limit {name}={value}: ")
        assert f"(allowed: {allowed})" in done.stderr.decode() and done.stdout == b""


def written(number: float) -> str:
    return f"{int(number):,}" if float(number).is_integer() else f"{number:,}"


@pytest.mark.parametrize("name", sorted(RANGES))
def test_out_of_range_limits_in_the_config_are_config_errors_at_their_line(tmp_path, name):
    """From the file, the range ends at the default: `allowed: LOW to DEFAULT`."""
    field = name.replace("-", "_")
    default, low = getattr(budgets.DEFAULT_LIMITS, field), budgets.RANGES[field][0]
    path = tmp_path / ".kubelint-ports.yaml"
    for value in ["0", "-1", ".nan", ".inf", "-.inf", "true", "'12'", "[1]", "{a: 1}", "null", "1e10",
                  str(default * 2), "9" * 30]:
        path.write_text(f"fail-on: error\nlimits:\n  {name}: {value}\n")
        with pytest.raises(ConfigError) as caught:
            load_config(str(path))
        assert caught.value.line == 3, (value, caught.value)
        assert caught.value.message.startswith(f"limits.{name}: "), caught.value
        assert f"(allowed: {written(low)} to {written(default)})" in caught.value.message, caught.value


def test_a_bad_limit_in_the_config_exits_2_through_the_cli(tmp_path):
    (tmp_path / "m.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    (tmp_path / ".kubelint-ports.yaml").write_text("limits:\n  input-seconds: .nan\n")
    done = cli("lint", "m.yaml", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.decode() == (
        "kubelint-ports: error: .kubelint-ports.yaml:2: limits.input-seconds: '.nan' is not a number "
        "(allowed: 0.1 to 300)\n")


def test_the_highest_limits_work_where_1e10_crashed(tmp_path):
    """`input-seconds=1e10` was exit 3 (OverflowError in setitimer) and `helm-seconds=1e10` read
    every chart as over 16 MiB (select's timeout overflowed): both are now refused (above), and
    each limit's highest value runs."""
    from kubelint_ports.loading.helm.charts import in_process_engine

    (tmp_path / "m.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    inputs = ["m.yaml"]
    if in_process_engine() is not None:  # a chart renders within helm-seconds=86400
        (tmp_path / "c" / "templates").mkdir(parents=True)
        (tmp_path / "c" / "Chart.yaml").write_bytes(build.CHART_YAML)
        (tmp_path / "c" / "templates" / "cm.yaml").write_bytes(build.CONFIG_MAP)
        inputs.append("c")
    highest = [f"{name}={budgets.RANGES[name.replace('-', '_')][1]}" for name in budgets.limit_names()
               if name != "max-file-mib"]  # one buffer of it for standard input: tested on files only
    done = cli("lint", *inputs, *(word for pair in highest for word in ("--limit", pair)), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"in {len(inputs)} object".encode() in done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    done = cli("lint", "m.yaml", "--limit", "max-file-mib=1024", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_action_passes_no_value_from_the_repository_to_limit():
    """The Action's options come from the workflow's inputs (its author's); it reads nothing from
    the repository's configuration that could become `--limit`."""
    for script in (ROOT / "action").glob("*.sh"):
        assert "limit" not in script.read_text().lower(), script
    assert "--limit" not in (ROOT / "action.yml").read_text()


def test_the_input_deadline_inside_a_reader_that_keeps_going_after_bugs_is_a_timeout(monkeypatch):
    """The `input-seconds` timer fires wherever the reader is: inside the kube-proxy reader, whose
    `except Exception` keeps the other objects after a bug, it is still the input's deadline (a
    clear input error), never an internal error."""
    from kubelint_ports.engine import LintOptions, lint_paths
    from kubelint_ports.loading import files
    from kubelint_ports.loading.cluster import network_readers as network

    def expire(*arguments, **keywords):
        raise files.InputTimeout()

    monkeypatch.setattr(network, "read_document", expire)
    report = lint_paths([str(ROOT / "examples" / "cluster-config" / "kube-proxy.yaml")], LintOptions())
    assert not [d for d in report.diagnostics if d.internal]
    assert any("limit input-seconds" in d.message for d in report.diagnostics)
