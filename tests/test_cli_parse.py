"""`lint`'s command line read without typer (`cli_options.parse_command_line`) hands the command
exactly what typer would, or leaves the command line to typer: never a different value, never a
command line typer would refuse. Typer reads each command line here through an app with the same
declarations whose `lint` only records what it is given."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubelint_ports import cli
from kubelint_ports.cli_options import Declared, parse_command_line, typer_app

ROOT = Path(__file__).resolve().parents[1]
CLEAN = str(ROOT / "examples" / "clean.yaml")
FINDINGS = str(ROOT / "examples" / "nginx-hostport-nodeport.yaml")


def typer_reads(args: list[str], name: str = "lint"):
    """What typer calls the command `name` with for `args`, or "refused" (a usage error)."""
    import typer.main

    seen: dict = {}
    real = cli.WITHOUT_TYPER[name]

    def command(**given):
        seen.update(given)

    command.__signature__ = inspect.signature(real)
    command.__annotations__ = dict(real.__annotations__)
    app = typer_app([(name, command)], name="kubelint-ports", release="0", help="test")
    try:
        typer.main.get_command(app).main(args=[name, *args], prog_name="kubelint-ports", standalone_mode=False)
    except Exception as error:  # noqa: BLE001 (click's usage errors, whatever their class)
        if cli.is_a(error, "ClickException"):
            return "refused"
        raise
    return seen


def same(fast: dict, slow: dict) -> bool:
    """Equal values of the same types (a Path is not a str, an enum member not its value)."""
    return fast.keys() == slow.keys() and all(
        fast[name] == slow[name] and type(fast[name]) is type(slow[name]) for name in fast)


ORDINARY = [
    [],
    [CLEAN],
    [CLEAN, FINDINGS],
    ["--format", "json", CLEAN],
    ["--format=sarif", "-o", "out.sarif", CLEAN],
    ["-oout.txt", "-vq", "--no-color", CLEAN],
    ["-qv", "-j", "2", "--select", "KP1,KP2", "--select", "KP3", "--ignore=KP201", CLEAN],
    ["--fail-on", "note", "--scope", "object", "--proxy-mode", "ipvs", "--", "-", CLEAN],
    ["--report", "json:a.json", "--report", "sarif:b.sarif", "--statistics", CLEAN],
    ["--values", "v.yaml", "-f", "w.yaml", "--set", "a=1", "--set-string", "b=2", "--release-name", "r"],
    ["--fix", "--unsafe-fixes", "--diff", "--show-suppressed", "--color", "--explain", "--verbose"],
    ["--fix", "--show-fixes", CLEAN],
    ["--config", "c.yaml", "--policies", "p", "--baseline", "b.json", "--write-baseline", "c.json"],
    ["--node-port-range", "30000-32767", "--ephemeral-port-range=32768-60999", "--nodes", "n.yaml",
     "--cluster", "c.yaml", "--service-cidr", "10.96.0.0/12", "--pod-cidr", "10.244.0.0/16"],
    ["--cni-plugins-version", "1.1.1", "--sarif-category", "k8s", "--link-base", "https://x", "--limit", "max-depth=9",
     "--jobs=0", "--namespace", "ns", "--kube-version", "1.30", "--helm-binary", "helm", "--chart-root", "."],
    ["--format", "sarif", "--sarif-full-rules", "--sarif-category=k8s", CLEAN],
    ["-", "--", "--format", "-v"],  # after --, options are paths
    ["--format", "json", "--format", "text", "--color", "--no-color"],  # the last one wins
    ["-o=x", CLEAN],  # click reads "=x" as -o's value
]

LEFT_TO_TYPER = [
    ["--help"], ["-h"], ["--format"], ["--format", "JSON"], ["--format", "bogus"], ["--fail-on", "fatal"],
    ["--jobs", "-1"], ["--jobs", "x"], ["-jx"], ["--unknown"], ["-x"], ["--fix=yes"], ["-v=1"], ["--show-fixes=1"], ["--scope", ""],
    ["--proxy-mode"], ["-o"],
]


@pytest.mark.parametrize("args", ORDINARY, ids=" ".join)
def test_ordinary_command_lines_are_read_as_typer_reads_them(args):
    fast = parse_command_line(cli.lint, args)
    assert fast is not None, "left to typer: the fast path would never run"
    slow = typer_reads(args)
    assert slow != "refused" and same(fast, slow), (fast, slow)


@pytest.mark.parametrize("args", LEFT_TO_TYPER, ids=" ".join)
def test_what_typer_must_say_is_left_to_typer(args):
    assert parse_command_line(cli.lint, args) is None


def test_shell_completion_and_unknown_commands_go_to_typer(monkeypatch):
    monkeypatch.setenv("_KUBELINT_PORTS_COMPLETE", "bash_complete")
    assert parse_command_line(cli.lint, [CLEAN]) is None
    assert cli.WITHOUT_TYPER == {"lint": cli.lint, "ports": cli.ports}  # pre-commit's, and the page's
    assert parse_command_line(cli.ports, [CLEAN]) is None


PORTS_ORDINARY = [
    [],
    [CLEAN, "--format", "html", "-o", "map.html", "--link-base", "https://example.com/blob/abc"],
    ["--free", "--near", "8080", "--count", "3", "--format=json", "--nodes", "n.yaml", CLEAN],
    ["--no-color", "--color", "-j", "1", "--select", "KP3", "--proxy-mode", "ipvs", "--", "-"],
]
PORTS_LEFT_TO_TYPER = [["--near", "0"], ["--near", "65536"], ["--count", "0"], ["--format", "sarif"], ["--help"],
                       ["--free=1"], ["-v"]]


@pytest.mark.parametrize("args", PORTS_ORDINARY, ids=" ".join)
def test_ports_command_lines_are_read_as_typer_reads_them(args):
    fast = parse_command_line(cli.ports, args)
    assert fast is not None, "left to typer: the fast path would never run"
    slow = typer_reads(args, "ports")
    assert slow != "refused" and same(fast, slow), (fast, slow)


@pytest.mark.parametrize("args", PORTS_LEFT_TO_TYPER, ids=" ".join)
def test_what_typer_must_say_of_ports_is_left_to_typer(args):
    assert parse_command_line(cli.ports, args) is None


def lint_options(command=None) -> list[str]:
    names = []
    for parameter in inspect.signature(command or cli.lint).parameters.values():
        if isinstance(parameter.default, Declared):
            for declared in parameter.default.names:
                names += [name.strip() for name in declared.split("/")]
    return names


TOKENS = st.one_of(
    st.sampled_from(lint_options()),
    st.sampled_from(["json", "text", "JSON", "bogus", "0", "2", "-1", "x", "", "-", "--", "=x", "a.yaml", CLEAN,
                     "KP1,KP2", "ipvs", "object", "note", "sarif:out.sarif", "bad:", "-vq", "-qo", "-j3", "-vx",
                     "--format=json", "--jobs=7", "--fix=1", "--color=no", "-f", "-o-", "--out"]),
    st.text(alphabet="-=abjoqvf:.0123456789", max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(TOKENS, max_size=8))
def test_any_command_line_is_typer_s_reading_or_left_to_typer(args):
    assert_read_as_typer_reads_or_left(args, "lint")


def assert_read_as_typer_reads_or_left(args: list[str], name: str) -> None:
    """The fast path reads `args` exactly as typer does, or leaves them to typer."""
    fast = parse_command_line(cli.WITHOUT_TYPER[name], args)
    if fast is None:
        return
    slow = typer_reads(args, name)
    assert slow != "refused", f"typer refuses {args!r}, the fast path read {fast!r}"
    assert same(fast, slow), (args, fast, slow)


PORTS_TOKENS = st.one_of(
    st.sampled_from(lint_options(cli.ports)),
    st.sampled_from(["json", "html", "sarif", "0", "3", "65536", "-1", "x", "", "-", "--", "a.yaml", CLEAN,
                     "--near=80", "--count=0", "-j2", "-o-", "--free=yes"]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(PORTS_TOKENS, max_size=8))
def test_any_ports_command_line_is_typer_s_reading_or_left_to_typer(args):
    assert_read_as_typer_reads_or_left(args, "ports")


def run(*args: str) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "kubelint_ports", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("args", [
    ("lint", CLEAN), ("lint", "-v", FINDINGS), ("lint", "--format", "json", FINDINGS),
    ("lint", "--format", "bogus", CLEAN), ("lint", "--report", "bad", CLEAN), ("lint", "--statistics", "--format",
                                                                                 "sarif", CLEAN),
    ("ports", FINDINGS), ("ports", "--format", "json", FINDINGS), ("ports", "--free", "--near", "8080", FINDINGS),
    ("ports", "--free", "--format", "html", FINDINGS), ("ports", "--near", "0", FINDINGS),
], ids=" ".join)
def test_the_command_line_says_what_the_typer_app_says(args):
    """The same run through `main` (the fast path where it applies) and through the typer app."""
    from typer.testing import CliRunner

    code, out, err = run(*args)
    expected = CliRunner().invoke(cli.app, list(args))
    assert (code, out) == (expected.exit_code, expected.stdout)
    if code == 2:  # a usage error, said by typer either way
        assert "Usage: " in err and "Error: " in err
