"""Issue 31: a linted tree that carries its own `.git` runs nothing and reaches no network.

kubelint-ports runs no git at all. Which files git ignores is read from the ignore files
(`loading/gitignore.py`), compared here with git itself on trees these tests make; the HTML page's
commit is read from `HEAD` and the refs (`sourceroot.checked_out_object`). The hostile tree plants
every setting through which git runs a command (and the environment variables that do the same),
each writing a marker file: a control shows git itself running them, then `lint` and `ports` leave
no marker, open no socket and start no process."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from external_tools import require_tools
from kubelint_ports import portmap, sourceroot
from kubelint_ports.loading import files, gitignore
from kubelint_ports.vocabulary import STDIN_NAME

ROOT = Path(__file__).resolve().parents[1]
COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER = "89abcdef0123456789abcdef0123456789abcdef"
SHA256 = "a" * 64
HANG_GUARD = 120  # seconds: a guard against a hang, never a measurement

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  containers:
    - {name: c, image: x, ports: [{containerPort: PORT, hostPort: PORT}]}
"""


def pod(name: str, port: int) -> str:
    return POD.replace("NAME", name).replace("PORT", str(port))


def git_environment(home: Path) -> dict[str, str]:
    """What the tests run git with: no GIT_* of the caller, no system or global configuration."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    environment.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), GIT_CONFIG_NOSYSTEM="1",
                       GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return environment


def git(tree: Path, home: Path, *arguments: str, check: bool = True) -> subprocess.CompletedProcess:
    """git run by the test on a tree the test made."""
    return subprocess.run(["git", "-C", str(tree), "-c", "init.defaultBranch=main", "-c", "user.name=t",
                           "-c", "user.email=t@example.invalid", *arguments], env=git_environment(home),
                          capture_output=True, text=True, check=check, timeout=HANG_GUARD, stdin=subprocess.DEVNULL)


@pytest.fixture
def need_git():
    """git, to make the trees and to compare with: skipped without it (failed under CI=true)."""
    require_tools(("git", "git"))


# --- (a) a hostile tree: nothing runs ------------------------------------------------------------


def marker_script(markers: Path, name: str) -> str:
    """An executable that records that it ran, as `markers/NAME`."""
    script = markers.parent / "planted" / f"{name}.sh"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!/bin/sh\necho \"$0 $*\" >> '{markers / name}'\nexit 1\n")
    script.chmod(0o755)
    return str(script)


HOOKS = ("pre-commit", "post-checkout", "post-merge", "pre-push", "fsmonitor-watchman", "post-index-change",
         "reference-transaction", "pre-auto-gc", "post-rewrite", "push-to-checkout")


@pytest.fixture
def hostile(tmp_path, need_git):
    """A work tree whose `.git/config` runs a marker through every door git has, a partial clone
    whose HEAD commit is absent (git would fetch it through `core.sshCommand`), and manifests
    ignored by `.gitignore` and `info/exclude`; `core.excludesFile` names a file outside."""
    home, markers, repo = tmp_path / "home", tmp_path / "markers", tmp_path / "repo"
    home.mkdir()
    markers.mkdir()
    repo.mkdir()
    manifests = {"app.yaml": 8001, "keep.yaml": 8002, "build/out.yaml": 8003, "x.generated.yaml": 8004,
                 "local/l.yaml": 8005, "sub/y.generated.yaml": 8006}
    for name, port in manifests.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(pod(Path(name).stem.replace(".", "-"), port))
    (repo / ".gitignore").write_text("build/\n*.generated.yaml\n")
    (repo / "sub" / ".gitignore").write_text("!*.generated.yaml\n")
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    git(repo, home, "init", "-q")
    git(repo, home, "add", "app.yaml")
    git(repo, home, "commit", "-q", "-m", "first")
    head = git(repo, home, "rev-parse", "HEAD").stdout.strip()
    (repo / ".git" / "info" / "exclude").write_text("local/\n")
    outside = tmp_path / "planted" / "excludes"
    outside.parent.mkdir(exist_ok=True)
    outside.write_text("keep.yaml\napp.yaml\n")
    hooks = repo / "hooks"
    hooks.mkdir()
    for name in HOOKS:
        shutil.copy(marker_script(markers, f"hook-{name}"), hooks / name)
        shutil.copy(marker_script(markers, f"default-hook-{name}"), repo / ".git" / "hooks" / name)
    included = tmp_path / "planted" / "included.cfg"
    included.write_text(f"[core]\n\tfsmonitor = {marker_script(markers, 'include-fsmonitor')}\n")
    planted = textwrap.dedent(f"""\
        [core]
        \trepositoryformatversion = 1
        \tfsmonitor = {marker_script(markers, "fsmonitor")}
        \thooksPath = {hooks}
        \tsshCommand = {marker_script(markers, "ssh-command")}
        \tpager = {marker_script(markers, "pager")}
        \teditor = {marker_script(markers, "editor")}
        \taskPass = {marker_script(markers, "askpass")}
        \texcludesFile = {outside}
        \talternateRefsCommand = {marker_script(markers, "alternate-refs")}
        [diff]
        \texternal = {marker_script(markers, "diff-external")}
        [diff "evil"]
        \ttextconv = {marker_script(markers, "textconv")}
        [filter "evil"]
        \tclean = {marker_script(markers, "filter-clean")}
        \tsmudge = {marker_script(markers, "filter-smudge")}
        \tprocess = {marker_script(markers, "filter-process")}
        [credential]
        \thelper = !{marker_script(markers, "credential")}
        [gpg]
        \tprogram = {marker_script(markers, "gpg")}
        [include]
        \tpath = {included}
        [extensions]
        \tpartialClone = origin
        [remote "origin"]
        \turl = ssh://git@example.invalid/repository.git
        \tpromisor = true
        \tpartialclonefilter = blob:none
        [protocol]
        \tallow = always
        """)
    with open(repo / ".git" / "config", "a") as config:
        config.write(planted)
    return {"home": home, "markers": markers, "repo": repo, "head": head, "outside": outside}


def hostile_environment(hostile: dict, fake_bin: Path) -> dict[str, str]:
    """The lint run's environment: a fake `git` first on PATH, and every GIT_* variable through
    which git would run a command or read another repository's configuration."""
    markers = hostile["markers"]
    fake_bin.mkdir(exist_ok=True)
    shutil.copy(marker_script(markers, "git-on-path"), fake_bin / "git")
    environment_config = fake_bin.parent / "planted" / "environment.cfg"
    environment_config.write_text(f"[core]\n\tfsmonitor = {marker_script(markers, 'environment-fsmonitor')}\n")
    environment = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    environment.update({
        "PATH": f"{fake_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
        "GIT_DIR": str(hostile["repo"] / ".git"), "GIT_WORK_TREE": str(hostile["repo"]),
        "GIT_CONFIG_PARAMETERS": f"'core.fsmonitor'='{marker_script(markers, 'config-parameters')}'",
        "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": marker_script(markers, "config-count"),
        "GIT_CONFIG_GLOBAL": str(environment_config), "GIT_CONFIG_SYSTEM": str(environment_config),
        "GIT_EXTERNAL_DIFF": marker_script(markers, "external-diff"),
        "GIT_SSH_COMMAND": marker_script(markers, "ssh-command-variable"), "GIT_SSH": marker_script(markers, "ssh"),
        "GIT_PAGER": marker_script(markers, "pager-variable"), "GIT_ASKPASS": marker_script(markers, "askpass-var"),
        "GIT_EDITOR": marker_script(markers, "editor-variable"), "GIT_EXEC_PATH": str(fake_bin),
        "GIT_PROXY_COMMAND": marker_script(markers, "proxy"),
        "XDG_CONFIG_HOME": str(hostile["home"] / ".config"), "HOME": str(hostile["home"]),
    })
    return environment


def run_cli(arguments: list[str], environment: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kubelint_ports", *arguments], env=environment, cwd=cwd,
                          capture_output=True, text=True, timeout=HANG_GUARD, stdin=subprocess.DEVNULL)


def linted_files(output: str) -> set[str]:
    return {finding["file"] for finding in json.loads(output)["findings"]}


def test_the_planted_settings_run_under_git_itself(hostile):
    """The control: the planted configuration is live. `git ls-files` (what ignored files were
    asked of) runs core.fsmonitor, and `git rev-parse` in the partial clone whose HEAD commit is
    absent fetches it through core.sshCommand."""
    repo, markers = hostile["repo"], hostile["markers"]
    git(repo, hostile["home"], "ls-files", "--others", "--ignored", "--exclude-standard", "--directory")
    assert (markers / "fsmonitor").exists() or (markers / "include-fsmonitor").exists()
    (repo / ".git" / "refs" / "heads" / "main").write_text(COMMIT + "\n")
    git(repo, hostile["home"], "-c", "core.fsmonitor=false", "rev-parse", "--verify", "--quiet", "HEAD^{commit}",
        check=False)
    assert (markers / "ssh-command").exists()


def test_lint_and_the_page_run_nothing_from_the_tree(hostile, tmp_path):
    repo, markers = hostile["repo"], hostile["markers"]
    (repo / ".git" / "refs" / "heads" / "main").write_text(COMMIT + "\n")  # absent: git would fetch it
    environment = hostile_environment(hostile, tmp_path / "bin")

    done = run_cli(["lint", str(repo), "--format", "json"], environment, tmp_path)
    assert done.returncode in (0, 1), done.stderr
    # keep.yaml: named only by the core.excludesFile of the tree's own configuration, never read.
    assert linted_files(done.stdout) == {"repo/app.yaml", "repo/keep.yaml", "repo/sub/y.generated.yaml"}

    page = run_cli(["ports", str(repo), "--format", "html"], environment, tmp_path)
    assert page.returncode in (0, 1), page.stderr
    assert f'<code id="commit">{COMMIT}</code>' in page.stdout  # the partial clone's HEAD, read, not fetched

    assert sorted(path.name for path in markers.iterdir()) == []


AUDITED = textwrap.dedent("""\
    import os, sys
    outside = os.path.realpath(sys.argv[1])
    WATCHED = {"socket.connect", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo", "socket.gethostbyname",
               "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
               "pty.spawn"}
    def hook(event, args):
        if event in WATCHED:
            os.write(2, f"AUDIT {event} {args!r}\\n".encode())
        elif event == "open" and args and isinstance(args[0], (str, bytes)):
            if os.path.realpath(os.fsdecode(args[0])).startswith(outside):
                os.write(2, f"AUDIT outside {args[0]!r}\\n".encode())
    sys.addaudithook(hook)
    sys.argv = ["kubelint-ports", *sys.argv[2:]]
    from kubelint_ports.cli import main
    main()
    """)


@pytest.mark.parametrize("arguments", [["lint", "repo"], ["ports", "repo", "--format", "html"]])
def test_no_socket_no_process_and_nothing_read_outside(hostile, tmp_path, arguments):
    """The same runs in-process under an audit hook: no connection, no name lookup, no child
    process, and no file opened below `planted/` (the excludes file, the included configuration
    and the scripts the tree's configuration names)."""
    (hostile["repo"] / ".git" / "refs" / "heads" / "main").write_text(COMMIT + "\n")
    environment = hostile_environment(hostile, tmp_path / "bin")
    done = subprocess.run([sys.executable, "-c", AUDITED, str(tmp_path / "planted"), *arguments], env=environment,
                          cwd=tmp_path, capture_output=True, text=True, timeout=HANG_GUARD, stdin=subprocess.DEVNULL)
    assert done.returncode in (0, 1), done.stderr
    assert "AUDIT" not in done.stderr, done.stderr[:3000]
    assert sorted(path.name for path in hostile["markers"].iterdir()) == []


# --- (b) what git ignores, as git decides it -----------------------------------------------------

IGNORE_FILES = {
    ".gitignore": (
        "# a comment\n"
        "\\#hash.yaml\n"
        "trailing.yaml   \n"  # trailing spaces dropped
        "space\\ .yaml\n"  # an escaped one kept: `space .yaml`
        "*.generated.yaml\n"
        "!keep.generated.yaml\n"
        "build/\n"
        "/anchored.yaml\n"
        "logs/**/debug.yaml\n"
        "**/cache\n"
        "vendor/\n"
        "!vendor/kept.yaml\n"  # a directory ignored: no pattern brings a file back
        "out/*\n"
        "!out/kept.yaml\n"  # its contents ignored, the directory not: this one comes back
        "deep/**/\n"  # the directories below deep/, not deep/ itself
        "doc/*.yaml\n"
        "*.Tmp.yaml\n"
        "[ab]ny.yaml\n"
        "?x.yaml\n"
        "**\\*star.yaml\n"
        "tab.yaml\t\n"  # a tab is no space: it stays, as git keeps it
    ),
    "sub/.gitignore": "!*.generated.yaml\n/local.yaml\nnested/\n",
    "crlf/.gitignore": "a.yaml\r\nb.yaml  \r\n",
    "bom/.gitignore": "\ufeffc.yaml\n",
    "other/ignore-everything": "*.yaml\n",
}
EXPECTED_IGNORED = {
    "#hash.yaml", "trailing.yaml", "space .yaml", "x.generated.yaml", "build/b.yaml", "anchored.yaml",
    "logs/debug.yaml", "logs/a/b/debug.yaml", "x/cache/c.yaml", "cache/c.yaml", "vendor/v.yaml", "vendor/kept.yaml",
    "out/o.yaml", "deep/inner/d.yaml", "doc/d.yaml", "sub/local.yaml", "sub/nested/n.yaml", "crlf/a.yaml",
    "crlf/b.yaml", "bom/c.yaml", "excluded.yaml", "sub/excluded.yaml", "global.yaml", "a.Tmp.yaml", "any.yaml",
    "xx.yaml", "*star.yaml", "tab.yaml\t",
}
EXPECTED_KEPT = {
    "app.yaml", "keep.generated.yaml", "sub/anchored.yaml", "out/kept.yaml", "deep/d.yaml", "doc/sub/d.yaml",
    "sub/y.generated.yaml", "sub/deeper/local.yaml", "link/l.yaml", "a.tmp.yaml", "cny.yaml", "x.yaml",
    "xstar.yaml", "tab.yaml",
}


@pytest.fixture
def ignore_tree(tmp_path, need_git, monkeypatch):
    home, repo = tmp_path / "home", tmp_path / "repo"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("global.yaml\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    repo.mkdir()
    git(repo, home, "init", "-q")
    for name, text in IGNORE_FILES.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(text.encode())
    (repo / ".git" / "info" / "exclude").write_text("excluded.yaml\n")
    (repo / "link").mkdir()
    (repo / "link" / ".gitignore").symlink_to(repo / "other" / "ignore-everything")  # git 2.32+ reads none
    for name in EXPECTED_IGNORED | EXPECTED_KEPT:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("")
    return home, repo


def git_ignored_files(repo: Path, home: Path) -> set[str]:
    listed = git(repo, home, "ls-files", "-z", "--others", "--ignored", "--exclude-standard").stdout
    return {name for name in listed.split("\0") if name}


def git_version(home: Path) -> tuple[int, ...]:
    text = subprocess.run(["git", "--version"], capture_output=True, text=True, env=git_environment(home)).stdout
    return tuple(int(part) for part in text.split()[2].split(".")[:2])


def test_ignored_as_git_decides(ignore_tree):
    home, repo = ignore_tree
    ignored = files.git_ignored(str(repo))
    ours = {name for name in EXPECTED_IGNORED | EXPECTED_KEPT if ignored(str(repo / name), False)}
    assert ours == EXPECTED_IGNORED
    theirs = git_ignored_files(repo, home)
    if git_version(home) < (2, 32):  # before 2.32 git followed a symlinked .gitignore
        theirs.discard("link/l.yaml")
    assert theirs == EXPECTED_IGNORED
    assert any("link/.gitignore: a symlink, not read" in note for note in ignored.notes)


@pytest.mark.parametrize("directory, expected", [
    ("build", True), ("vendor", True), ("out", False), ("deep", False), ("deep/inner", True), ("x/cache", True),
    ("sub/nested", True), ("sub", False), ("logs/a", False),
])
def test_directories_as_git_decides(ignore_tree, directory, expected):
    """What the walk asks of each directory it would enter; git lists an ignored directory whole
    (`--directory`) when it holds nothing kept."""
    home, repo = ignore_tree
    assert files.git_ignored(str(repo))(str(repo / directory), True) is expected
    listed = git(repo, home, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory").stdout
    if expected:
        assert any(directory == name.rstrip("/") or directory.startswith(name) for name in listed.split("\0") if name)


def test_a_nested_repository_has_its_own_rules(ignore_tree):
    """Inside a nested repository (a directory holding `.git`), its own rules apply, not the
    outer tree's, as `git -C inner` decides."""
    home, repo = ignore_tree
    inner = repo / "inner"
    inner.mkdir()
    git(inner, home, "init", "-q")
    (inner / ".gitignore").write_text("inner-only.yaml\n")
    for name in ("inner-only.yaml", "x.generated.yaml", "app.yaml"):
        (inner / name).write_text("")
    ignored = files.git_ignored(str(repo))
    ours = {name for name in ("inner-only.yaml", "x.generated.yaml", "app.yaml") if ignored(str(inner / name), False)}
    assert ours == {"inner-only.yaml"} == git_ignored_files(inner, home)


def test_a_named_directory_is_walked_even_when_ignored(ignore_tree):
    """`lint build` lints build/ (the walk's top is never ignored), with the rules still applied below."""
    _, repo = ignore_tree
    (repo / "build" / "x.generated.yaml").write_text("")
    ignored = files.git_ignored(str(repo / "build"))
    assert not ignored(str(repo / "build" / "b.yaml"), False)
    assert ignored(str(repo / "build" / "x.generated.yaml"), False)


def test_core_excludes_file_of_the_tree_is_never_read(tmp_path, monkeypatch):
    """The repository's own `core.excludesFile` could name any file: no configuration is read."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    repo = tmp_path / "repo"
    (repo / ".git" / "info").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "excludes").write_text("*.yaml\n")
    (repo / ".git" / "config").write_text(f"[core]\n\texcludesFile = {tmp_path / 'excludes'}\n")
    (repo / "app.yaml").write_text("")
    assert not files.git_ignored(str(repo))(str(repo / "app.yaml"), False)


def test_outside_a_work_tree_nothing_is_ignored(tmp_path):
    if sourceroot.git_work_tree(str(tmp_path)) is not None:
        pytest.skip(f"the temporary directory {tmp_path} is inside a git work tree")
    (tmp_path / ".gitignore").write_text("*.yaml\n")
    (tmp_path / "app.yaml").write_text("")
    assert not files.git_ignored(str(tmp_path))(str(tmp_path / "app.yaml"), False)


# --- bounds on what an ignore file costs ---------------------------------------------------------


@pytest.fixture
def work_tree(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    (tmp_path / ".git").mkdir()
    return tmp_path


def test_an_oversized_ignore_file_is_not_read(work_tree, monkeypatch):
    monkeypatch.setattr(gitignore, "MAX_IGNORE_FILE_BYTES", 1000)
    (work_tree / ".gitignore").write_text("*.yaml\n" + "#" * 1000 + "\n")
    ignored = files.git_ignored(str(work_tree))
    assert not ignored(str(work_tree / "app.yaml"), False)
    assert any(".gitignore: over" in note and "not read" in note for note in ignored.notes)


def test_patterns_past_the_limit_are_not_used(work_tree, monkeypatch):
    monkeypatch.setattr(gitignore, "MAX_PATTERNS_PER_FILE", 3)
    (work_tree / ".gitignore").write_text("a.yaml\nb.yaml\nc.yaml\nd.yaml\n")
    ignored = files.git_ignored(str(work_tree))
    assert [ignored(str(work_tree / f"{name}.yaml"), False) for name in "abcd"] == [True, True, True, False]
    assert any("only the first 3 patterns are used" in note for note in ignored.notes)


def test_a_walk_spends_its_patterns_once(work_tree, monkeypatch):
    monkeypatch.setattr(gitignore, "MAX_PATTERNS", 2)
    (work_tree / ".gitignore").write_text("a.yaml\n")
    (work_tree / "sub").mkdir()
    (work_tree / "sub" / ".gitignore").write_text("b.yaml\nc.yaml\n")
    ignored = files.git_ignored(str(work_tree))
    assert ignored(str(work_tree / "sub" / "a.yaml"), False) and ignored(str(work_tree / "sub" / "b.yaml"), False)
    assert not ignored(str(work_tree / "sub" / "c.yaml"), False)


@pytest.mark.parametrize("pattern", ["*a*a*a*b", "a/*a*a*/b", "**/a/**/b/**/c/**/d", "[[:alpha:]]*.yaml",
                                     "x" * 5000, "a*b\t"])
def test_costly_patterns_are_passed_over_with_a_note(work_tree, pattern):
    """Patterns whose matching backtracks on long hostile names (Python's regular expressions),
    that pathspec reads otherwise than git, or longer than any path: not tried, and said."""
    (work_tree / ".gitignore").write_text(f"{pattern}\nplain.yaml\n")
    ignored = files.git_ignored(str(work_tree))
    name = "a" * 250
    assert not ignored(str(work_tree / name / name / f"{name}.yaml"), False)
    assert ignored(str(work_tree / "plain.yaml"), False)
    assert any("patterns passed over" in note and "line 1" in note for note in ignored.notes)


def test_many_suffixes_and_prefixes_are_looked_up_by_length(work_tree, monkeypatch):
    """Past a few dozen, `*.ext` and `name*` patterns are found by one lookup per length (a hostile
    file of 100,000 suffixes costs each path a few lookups, not 100,000 comparisons)."""
    monkeypatch.setattr(gitignore, "FEW_AFFIXES", 1)
    (work_tree / ".gitignore").write_text("*.log\n*.tar.gz\n!keep.tar.gz\nnpm-debug*\ntmp-*\n*.d/\n")
    ignored = files.git_ignored(str(work_tree))
    verdicts = {name: ignored(str(work_tree / name), False)
                for name in ("x.log", "a.tar.gz", "keep.tar.gz", "npm-debug.log.1", "tmp-", "tm", "x.d")}
    assert verdicts == {"x.log": True, "a.tar.gz": True, "keep.tar.gz": False, "npm-debug.log.1": True,
                        "tmp-": True, "tm": False, "x.d": False}
    assert ignored(str(work_tree / "x.d"), True)


def test_wildcard_matching_has_a_time_budget(work_tree, monkeypatch):
    """Past the walk's budget for wildcard patterns, only plain names, paths, suffixes and
    prefixes still apply (what the others ignore is linted), and a note says so."""
    monkeypatch.setattr(gitignore, "MATCH_SECONDS", 0.0)
    (work_tree / ".gitignore").write_text("[ab].yaml\n*.log\nbuild/\n")
    ignored = files.git_ignored(str(work_tree))
    assert not ignored(str(work_tree / "a.yaml"), False)
    assert ignored(str(work_tree / "x.log"), False) and ignored(str(work_tree / "build"), True)
    assert any("wildcard patterns took over" in note for note in ignored.notes)


def test_each_ignore_file_is_read_once(work_tree, monkeypatch):
    from kubelint_ports.loading.inputs import discover

    read = []
    original = gitignore.read_bounded
    monkeypatch.setattr(gitignore, "read_bounded", lambda path, *a, **k: read.append(path) or original(path, *a, **k))
    for directory in ("a", "a/b", "c"):
        (work_tree / directory).mkdir()
        (work_tree / directory / "m.yaml").write_text("")
        (work_tree / directory / ".gitignore").write_text("x.yaml\n")
    assert len(list(discover([str(work_tree)]))) == 3
    assert len(read) == len(set(read))
    assert {Path(path).relative_to(work_tree).as_posix() for path in read} >= {
        ".gitignore", "a/.gitignore", "a/b/.gitignore", "c/.gitignore"}


def test_odd_bytes_in_an_ignore_file(work_tree):
    """NUL ends a line (as git reads it), invalid UTF-8 and lone escapes are no error."""
    (work_tree / ".gitignore").write_bytes(b"a.yaml\0b.yaml\n\xff\xfe.yaml\n\\\n!\n[\n" + "é.yaml\n".encode())
    ignored = files.git_ignored(str(work_tree))
    assert ignored(str(work_tree / "a.yaml"), False) and not ignored(str(work_tree / "b.yaml"), False)
    assert ignored(str(work_tree / "é.yaml"), False)
    assert ignored(os.fsdecode(os.path.join(os.fsencode(work_tree), b"\xff\xfe.yaml")), False)


def test_an_ignore_file_that_is_no_file(work_tree):
    """A FIFO named .gitignore is not waited on."""
    os.mkfifo(work_tree / ".gitignore")
    ignored = files.git_ignored(str(work_tree))
    assert not ignored(str(work_tree / "app.yaml"), False)
    assert any("not a regular file" in note for note in ignored.notes)


# --- (c) the page's commit, read from files ------------------------------------------------------


def git_directory(top: Path, head: str, refs: dict[str, str] | None = None, packed: str | None = None) -> Path:
    """A git directory of files only: HEAD, loose refs, packed-refs."""
    directory = top / ".git"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "HEAD").write_text(head)
    for name, content in (refs or {}).items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(content)
    if packed is not None:
        (directory / "packed-refs").write_text(packed)
    (top / "m.yaml").write_text("")
    return directory


def commit_of(top: Path) -> str:
    return portmap.repository_commit([str(top / "m.yaml")])


@pytest.mark.parametrize("head, refs, packed, expected", [
    ("ref: refs/heads/main\n", {"refs/heads/main": COMMIT + "\n"}, None, COMMIT),
    ("ref: refs/heads/main\n", None,
     f"# pack-refs with: peeled fully-peeled sorted \n{OTHER} refs/heads/feature\n{COMMIT} refs/heads/main\n"
     f"^{OTHER}\n", COMMIT),
    ("ref: refs/heads/main\n", {"refs/heads/main": COMMIT + "\n"}, f"{OTHER} refs/heads/main\n", COMMIT),
    ("ref: refs/heads/main\n", {"refs/heads/main": "x" * 5000}, f"{COMMIT} refs/heads/main\n", ""),  # broken
    ("ref: refs/heads/main\r\n", None, f"{OTHER} refs/tags/main\n^{COMMIT} refs/heads/main\n", ""),
    (COMMIT + "\n", None, None, COMMIT),  # detached (CI's pull request checkout)
    (SHA256 + "\n", None, None, SHA256),
    ("ref: refs/heads/a\n", {"refs/heads/a": "ref: refs/heads/b\n", "refs/heads/b": COMMIT}, None, COMMIT),
    ("ref: refs/heads/a\n", {"refs/heads/a": "ref: refs/heads/b\n", "refs/heads/b": "ref: refs/heads/a\n"}, None, ""),
    ("ref: refs/heads/main\n", None, None, ""),  # unborn: no commit yet
    ("ref: refs/heads/main\n", {"refs/heads/main": COMMIT.upper()}, None, ""),
    ("ref: refs/heads/main\n", {"refs/heads/main": COMMIT[:-1]}, None, ""),
    ("ref: refs/heads/main\n", {"refs/heads/main": COMMIT + " <script>"}, None, ""),
    ("garbage\n", None, None, ""),
    ("ref:\n", None, None, ""),
    ("", None, None, ""),
    ("ref: refs/heads/../../../outside\n", None, None, ""),
    ("ref: refs/../../outside\n", None, None, ""),
    ("ref: /etc/hostname\n", None, None, ""),
    ("ref: HEAD\n", None, None, ""),
    ("ref: refs/heads/.hidden\n", {"refs/heads/.hidden": COMMIT}, None, ""),
    ("ref: refs/heads/main\n", {"refs/heads/main/child": COMMIT}, None, ""),  # a directory, not a ref
    ("0" * 2**20, None, None, ""),  # a huge HEAD
])
def test_the_commit_of_head(tmp_path, head, refs, packed, expected):
    top = tmp_path / "repo"
    git_directory(top, head, refs, packed)
    (tmp_path / "outside").write_text(COMMIT + "\n")
    assert commit_of(top) == expected


def test_a_ref_symlinked_out_of_the_git_directory_is_not_followed(tmp_path):
    top = tmp_path / "repo"
    directory = git_directory(top, "ref: refs/heads/main\n")
    (tmp_path / "outside").write_text(COMMIT + "\n")
    (directory / "refs" / "heads").mkdir(parents=True)
    (directory / "refs" / "heads" / "main").symlink_to(tmp_path / "outside")
    assert commit_of(top) == ""


def test_a_fifo_head_is_not_waited_on(tmp_path):
    top = tmp_path / "repo"
    directory = git_directory(top, "")
    (directory / "HEAD").unlink()
    os.mkfifo(directory / "HEAD")
    assert commit_of(top) == ""


def test_oversized_packed_refs_give_no_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(sourceroot, "PACKED_REFS_BYTES", 100)
    top = tmp_path / "repo"
    git_directory(top, "ref: refs/heads/main\n", packed=f"{COMMIT} refs/heads/main\n" * 10)
    assert commit_of(top) == ""


def test_a_linked_worktree_and_a_submodule(tmp_path):
    """`.git` as a file: `gitdir:` names the git directory; a worktree's `commondir` holds the
    branches, its own directory HEAD and the per-worktree refs."""
    main = tmp_path / "main"
    git_directory(main, "ref: refs/heads/main\n", {"refs/heads/main": OTHER, "refs/heads/feature": COMMIT})
    worktree_directory = main / ".git" / "worktrees" / "feature"
    worktree_directory.mkdir(parents=True)
    (worktree_directory / "HEAD").write_text("ref: refs/heads/feature\n")
    (worktree_directory / "commondir").write_text("../..\n")
    worktree = tmp_path / "feature"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {worktree_directory}\n")
    (worktree / "m.yaml").write_text("")
    assert commit_of(worktree) == COMMIT
    (worktree_directory / "HEAD").write_text("ref: refs/bisect/bad\n")
    (worktree_directory / "refs" / "bisect").mkdir(parents=True)
    (worktree_directory / "refs" / "bisect" / "bad").write_text(SHA256)
    assert commit_of(worktree) == SHA256

    modules = main / ".git" / "modules" / "library"
    modules.mkdir(parents=True)
    (modules / "HEAD").write_text(COMMIT + "\n")
    submodule = main / "library"
    submodule.mkdir()
    (submodule / ".git").write_text("gitdir: ../.git/modules/library\n")
    (submodule / "m.yaml").write_text("")
    assert commit_of(submodule) == COMMIT
    for broken in ("gitdir: ../nowhere\n", "gitdir:\n", "not a gitdir line\n", "gitdir: \0\n"):
        (submodule / ".git").write_text(broken)
        assert commit_of(submodule) == ""


def test_the_commit_is_read_without_git(tmp_path, monkeypatch):
    """No git process, whatever the environment says: a `git` on PATH that would answer is never
    asked, GIT_DIR naming another repository plays no part, and the standard input has no commit."""
    top = tmp_path / "repo"
    git_directory(top, COMMIT + "\n")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text(f"#!/bin/sh\ntouch '{tmp_path / 'git-ran'}'\necho {OTHER}\n")
    (fake / "git").chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GIT_DIR", str(ROOT / ".git"))
    assert commit_of(top) == COMMIT
    assert portmap.repository_commit([STDIN_NAME]) == portmap.repository_commit([]) == ""
    assert not (tmp_path / "git-ran").exists()


def test_a_partial_clone_whose_head_is_absent(hostile):
    """The HEAD commit is not in the object store of a partial clone: git would fetch it through
    the promisor remote (core.sshCommand runs); reading the ref gives its id and runs nothing."""
    repo = hostile["repo"]
    (repo / ".git" / "refs" / "heads" / "main").write_text(COMMIT + "\n")
    (repo / "m.yaml").write_text("")
    assert commit_of(repo) == COMMIT
    (repo / ".git" / "refs" / "heads" / "main").unlink()
    (repo / ".git" / "packed-refs").write_text(f"# pack-refs with: peeled fully-peeled sorted \n{COMMIT} refs/heads/main\n")
    assert commit_of(repo) == COMMIT  # from packed-refs
    assert sorted(path.name for path in hostile["markers"].iterdir()) == []
