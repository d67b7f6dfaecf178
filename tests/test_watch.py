"""`lint --watch` (issue 37, kubelint_ports/watch.py): the first report as `lint` prints it, then
what each change made appear (+) and go away (-), then the summary; Ctrl-C ends it with 0.

The loop takes any iterable of change sets: most tests replace watchfiles' with a generator that
edits the files and then says which changed, so nothing waits on a clock. One test runs the real
watchfiles on a directory."""

from __future__ import annotations

import io
import sys
import threading
import time
from pathlib import Path

import pytest

from kubelint_ports import cli, watch
from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.formatters import FormatOptions

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = (ROOT / "examples" / "nginx-hostport-nodeport.yaml").read_text(encoding="utf-8")
CLEAN = (ROOT / "examples" / "clean.yaml").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def plain_terminal(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("KUBELINT_PORTS_CACHE_DIR", raising=False)


def run_cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """`kubelint-ports lint ARGS` as main() runs it: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["kubelint-ports", "lint", *args])
    with pytest.raises(SystemExit) as ended:
        cli.main()
    captured = capsys.readouterr()
    return ended.value.code, captured.out, captured.err


def fake_changes(monkeypatch, steps):
    """watchfiles replaced: each step edits the files (a callable) and yields the paths it names."""
    def changes(paths, **_):
        for edit, changed in steps:
            edit()
            yield {str(path) for path in changed}

    monkeypatch.setattr(watch, "file_changes", changes)


def test_changes_print_what_appeared_and_went_away(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    web = tmp_path / "web.yaml"
    web.write_text(EXAMPLE, encoding="utf-8")
    fake_changes(monkeypatch, [
        (lambda: web.write_text(EXAMPLE.replace("hostPort: 31123", "hostPort: 8080")), [web]),
        (lambda: web.write_text("# a line above moves every finding down\n" + web.read_text()), [web]),
        (lambda: web.write_text(web.read_text().replace("hostPort: 8080", "hostPort: 31123")), [web]),
    ])
    code, out, err = run_cli(monkeypatch, capsys, "--watch", "--proxy-mode", "iptables", "web.yaml")
    assert code == 0
    first, rest = out.split("kubelint-ports explain ID` prints a rule's docs.\n", 1)
    assert first.startswith("web.yaml:23:15: warning KP101 container 'nginx' claims hostPort 31123/TCP\n")
    assert "1 error, 2 warnings" in first  # the report `lint` prints
    assert rest.splitlines() == [
        "+ web.yaml:23:15: warning KP101 container 'nginx' claims hostPort 8080/TCP",
        "- web.yaml:23:15: warning KP101 container 'nginx' claims hostPort 31123/TCP",
        "- web.yaml:23:15: warning KP102 hostPort 31123/TCP (container 'nginx') lies inside the node-port range "
        "30000-32767",
        "- web.yaml:23:15: error   KP201 hostPort 31123/TCP collides with nodePort 31123 of web/Service/nginx-nodeport",
        "0 errors, 1 warning, 0 notes in 2 objects from 1 file",
        # the line moved: the same findings (fingerprints), nothing to say but the summary
        "0 errors, 1 warning, 0 notes in 2 objects from 1 file",
        "+ web.yaml:24:15: warning KP101 container 'nginx' claims hostPort 31123/TCP",
        "+ web.yaml:24:15: warning KP102 hostPort 31123/TCP (container 'nginx') lies inside the node-port range "
        "30000-32767",
        "+ web.yaml:24:15: error   KP201 hostPort 31123/TCP collides with nodePort 31123 of web/Service/nginx-nodeport",
        "- web.yaml:24:15: warning KP101 container 'nginx' claims hostPort 8080/TCP",
        "1 error, 2 warnings, 0 notes in 2 objects from 1 file; 0 fixable with --fix (1 more with --unsafe-fixes)",
    ]
    assert err.count("web.yaml changed; linting again") == 3
    assert "watching for changes (Ctrl-C stops)" in err


def test_input_errors_come_and_go(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    web = tmp_path / "web.yaml"
    web.write_text(CLEAN, encoding="utf-8")
    fake_changes(monkeypatch, [(lambda: web.write_text("kind: [unclosed\n"), [web]),
                               (lambda: web.write_text(CLEAN), [web])])
    code, out, _ = run_cli(monkeypatch, capsys, "--watch", "--quiet", "web.yaml")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2, out  # -q: no summary, the first report had nothing to show
    assert lines[0].startswith("+ web.yaml:") and " input-error " in lines[0]
    assert lines[1] == "-" + lines[0][1:]


def test_only_the_changed_file_is_read_again(tmp_path, monkeypatch, capsys):
    from kubelint_ports.loading.yaml_files import manifests

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.yaml").write_text(CLEAN, encoding="utf-8")
    (tmp_path / "b.yaml").write_text(EXAMPLE, encoding="utf-8")
    read: list[str] = []
    real = manifests._load_data

    def counted(path, *args, **kwargs):
        read.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(manifests, "_load_data", counted)
    b = tmp_path / "b.yaml"
    fake_changes(monkeypatch, [(lambda: read.clear() or b.write_text(EXAMPLE.replace("31123", "31124")), [b])])
    code, out, _ = run_cli(monkeypatch, capsys, "--watch", "-j", "1", ".")
    assert code == 0
    assert read == ["b.yaml"]  # a.yaml came from the cache (a private one: none was configured)
    assert "+ b.yaml:23:15: warning KP101 container 'nginx' claims hostPort 31124/TCP" in out


def test_a_configured_cache_directory_is_used(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI", raising=False)
    (tmp_path / "web.yaml").write_text(CLEAN, encoding="utf-8")
    fake_changes(monkeypatch, [])
    code, _, _ = run_cli(monkeypatch, capsys, "--watch", "--cache-dir", "cache", "web.yaml")
    assert code == 0
    assert list((tmp_path / "cache").glob("*.json.z"))


def test_ctrl_c_ends_the_watch_with_0(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "web.yaml").write_text(CLEAN, encoding="utf-8")

    def interrupted(paths, **_):
        raise KeyboardInterrupt
        yield

    monkeypatch.setattr(watch, "file_changes", interrupted)
    code, out, _ = run_cli(monkeypatch, capsys, "--watch", "web.yaml")
    assert code == 0
    assert out.startswith("0 errors, 0 warnings, 0 notes in 3 objects from 1 file")


@pytest.mark.parametrize("args, named", [
    (["--fix"], "--fix"), (["--diff"], "--diff"), (["--format", "json"], "--format json"),
    (["--format", "sarif"], "--format sarif"), (["--output", "out.txt"], "--output"),
    (["-o", "out.txt"], "--output"), (["--report", "sarif:out.sarif"], "--report"),
    (["--write-baseline", "b.json"], "--write-baseline"), (["--statistics"], "--statistics"),
    (["-"], "standard input"),
])
def test_watch_refuses_what_writes_files_or_fixes(tmp_path, monkeypatch, capsys, args, named):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "web.yaml").write_text(EXAMPLE, encoding="utf-8")
    monkeypatch.setattr(watch, "file_changes", lambda *a, **k: pytest.fail("watched despite the usage error"))
    code, out, err = run_cli(monkeypatch, capsys, "--watch", *args, *([] if "-" in args else ["web.yaml"]))
    assert code == 2
    assert out == ""
    assert "Error: Invalid value for --watch: prints what changed on the terminal and writes no file: not with " \
           f"{named}" in err
    assert not (tmp_path / "out.txt").exists() and not (tmp_path / "b.json").exists()
    assert (tmp_path / "web.yaml").read_text(encoding="utf-8") == EXAMPLE


def test_concise_is_watched(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "web.yaml").write_text(EXAMPLE, encoding="utf-8")
    fake_changes(monkeypatch, [])
    code, out, _ = run_cli(monkeypatch, capsys, "--watch", "--format", "concise", "web.yaml")
    assert code == 0
    assert out.splitlines()[-1].startswith("1 error, 2 warnings")


def test_without_watchfiles_one_sentence_names_the_install(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "web.yaml").write_text(EXAMPLE, encoding="utf-8")
    monkeypatch.setitem(sys.modules, "watchfiles", None)  # `import watchfiles` raises ImportError
    code, out, err = run_cli(monkeypatch, capsys, "--watch", "web.yaml")
    assert code == 2
    assert out == ""
    assert err == "kubelint-ports: error: --watch needs the watchfiles package, which is not installed: " \
                  "pip install 'watchfiles>=1.0'\n"


def test_lint_without_watch_imports_no_watcher():
    """Plain `lint` never imports watchfiles nor the watch module (tests/test_startup.py's way)."""
    import subprocess

    code = ("import sys, runpy; sys.argv = ['kubelint-ports', 'lint', %r]\n"
            "try:\n    runpy.run_module('kubelint_ports', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if 'watch' in m))" % str(ROOT / "examples" / "clean.yaml"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.splitlines()[-1] == "[]", result.stdout + result.stderr


def test_what_is_no_reason_to_lint_again(tmp_path):
    top = str(tmp_path / "k8s")
    cache = str(tmp_path / "elsewhere")
    for path in ("k8s/web.yaml", "k8s/chart/templates/deploy.yaml", "k8s/chart/.helmignore", "k8s/new-dir"):
        assert watch.relevant(str(tmp_path / path), [top], [cache]), path
    for path in ("k8s/.git/index", "k8s/.kubelint-ports_cache/ab.json.z", "k8s/sub/.kubelint-ports_cache",
                 "k8s/.web.yaml.swp", "k8s/.web.yaml.swpx", "k8s/web.yaml~", "k8s/4913", "k8s/#web.yaml#",
                 "k8s/.#web.yaml", "k8s/web.yaml___jb_tmp___", "k8s/.hidden/x.yaml", "k8s/node_modules/x.yaml",
                 "other/web.yaml", "k8s-other/web.yaml", "elsewhere/x.json.z"):
        assert not watch.relevant(str(tmp_path / path), [top, cache], [cache]), path


def test_a_file_is_watched_through_its_directory(tmp_path):
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "web.yaml").write_text("", encoding="utf-8")
    roots, targets = watch.roots_of([str(tmp_path / "k8s" / "web.yaml"), str(tmp_path / "k8s"),
                                     str(tmp_path / "not-yet" / "x.yaml")])
    assert roots == [str(tmp_path)]  # k8s/ is inside it; not-yet/ does not exist: its parent
    assert str(tmp_path / "k8s" / "web.yaml") in targets


def test_watchfiles_sees_an_edit(tmp_path):
    """The real watcher: an edit that adds a hostPort prints its `+` line within seconds; the stop
    event ends the loop."""
    web = tmp_path / "web.yaml"
    web.write_text(CLEAN, encoding="utf-8")
    out, err, stop = io.StringIO(), io.StringIO(), threading.Event()
    changes = watch.file_changes([str(tmp_path)], stop_event=stop, debounce_ms=400, step_ms=50)
    codes: list[int] = []
    loop = threading.Thread(target=lambda: codes.append(watch.watch_loop(
        lambda: lint_paths([str(tmp_path)], LintOptions()), changes, FormatOptions(), out=out, err=err)))
    loop.start()
    try:
        deadline = time.monotonic() + 20
        while "watching for changes" not in err.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        edited = CLEAN.replace("containerPort: 8080", "containerPort: 8080\n              hostPort: 8080", 1)
        assert edited != CLEAN
        while "\n+ " not in "\n" + out.getvalue().split("docs.\n", 1)[-1] and time.monotonic() < deadline:
            web.write_text(edited, encoding="utf-8")  # again until the watcher, started by now, sees one
            time.sleep(0.5)
    finally:
        stop.set()
        loop.join(timeout=10)
    assert not loop.is_alive() and codes == [0]
    assert "claims hostPort 8080/TCP" in out.getvalue(), out.getvalue() + err.getvalue()
    assert "web.yaml changed; linting again" in err.getvalue()


def test_the_sample_in_the_usage_docs_is_what_the_tool_prints(tmp_path, monkeypatch, capsys):
    """docs/usage.md, Watching: the examples' file as web.yaml, its hostPort moved to 8080, then the
    Service's nodePort to 30080; standard error in its place among the lines, as a terminal shows it."""
    text = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    block = text.split("```text\n$ kubelint-ports lint --watch web.yaml\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")
    web = tmp_path / "web.yaml"
    web.write_text(EXAMPLE, encoding="utf-8")
    fake_changes(monkeypatch, [
        (lambda: web.write_text(EXAMPLE.replace("hostPort: 31123", "hostPort: 8080")), [web]),
        (lambda: web.write_text(web.read_text().replace("nodePort: 31123", "nodePort: 30080")), [web]),
    ])
    monkeypatch.setattr(sys, "stderr", sys.stdout)  # 2>&1
    code, out, _ = run_cli(monkeypatch, capsys, "--watch", "web.yaml")
    assert code == 0
    assert out == block
