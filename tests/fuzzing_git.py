"""The fuzzer's git generator (issue 31): a tree carrying a random hostile `.git` (a directory or a
`gitdir:` file; HEAD detached, symbolic, looping, escaping, huge or absent; loose refs, packed-refs,
symlinks out; a configuration whose every hook-like setting would write a marker) and random
`.gitignore` files (long, `**/**/**`, `[`, `\\`, negations, Unicode, NUL bytes, CRLF, a BOM), with a
few manifests. The oracle: linting it and reading its commit raise nothing, run nothing (no marker
appears) and give a commit that is "" or an object name."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

MARKER = "MARKER-ran"  # written next to the tree by any command its git configuration names
HEX = "0123456789abcdef"

POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: p{index}}}
spec:
  containers:
    - {{name: c, image: x, ports: [{{containerPort: {port}, hostPort: {port}}}]}}
"""

PATTERN_PARTS = ["*", "**", "?", "[", "]", "[!a]", "[a-z]", "[[:alpha:]]", "\\", "\\*", "\\ ", "!", "#", "/", "//",
                 ".", "..", "a", "b", "build", "x.yaml", "*.yaml", "é", "\u202e", "\x00", "\r", "\t", " ", "~",
                 "{a,b}", "$(touch ../MARKER-ran)", "`id`", "\ufeff"]
NAMES = ["a", "b", "build", "x", "é", "[a]", "*", "deep", "a b", "#c", "!d", ".hidden", "node_modules"]


def random_pattern(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.05:
        return rng.choice(["**/**/**", "/**/", "**/", "!**", "*" * rng.randint(3, 40), "[" * rng.randint(1, 9)])
    if roll < 0.08:
        return rng.choice(["a", "*", "a*", "/"]) * rng.randint(500, 5000)  # very long
    if roll < 0.12:
        return "*a" * rng.randint(2, 9) + "*b"  # backtracking bait
    pattern = "".join(rng.choice(PATTERN_PARTS) for _ in range(rng.randint(1, 6)))
    return ("!" if rng.random() < 0.2 else "") + pattern


def ignore_file_bytes(rng: random.Random) -> bytes:
    lines = [random_pattern(rng) for _ in range(rng.randint(0, 30))]
    newline = rng.choice(["\n", "\n", "\r\n", "\r"])
    data = newline.join(lines).encode("utf-8", "surrogatepass")
    if rng.random() < 0.1:
        data = b"\xef\xbb\xbf" + data
    if rng.random() < 0.1:
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))  # not UTF-8
    return data


def object_name(rng: random.Random) -> str:
    length = rng.choice([40, 40, 64, 39, 41, 0, 8])
    name = "".join(rng.choice(HEX) for _ in range(length))
    roll = rng.random()
    if roll < 0.05:
        return name.upper()
    if roll < 0.1:
        return name + rng.choice(["\0", " <script>", "\x1b[2J", "\n" * 3, "^{}"])
    return name


def ref_name(rng: random.Random) -> str:
    return rng.choice(["refs/heads/main", "refs/heads/feature/x", "refs/heads/../../../outside", "refs/../HEAD",
                       "/etc/hostname", "HEAD", "refs/heads/", "refs/heads/.hidden", "refs/heads/a..b",
                       "refs/heads/x.lock", "refs/bisect/bad", "refs/heads/\0x", "refs/heads/é",
                       "refs/heads/" + "a" * rng.randint(200, 5000), "refs/tags/v1", "refs/heads/loop"])


def head_text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.4:
        return f"ref: {ref_name(rng)}" + rng.choice(["\n", "", "\r\n", "\n\n", "  \n"])
    if roll < 0.7:
        return object_name(rng) + rng.choice(["\n", ""])
    return rng.choice(["", "ref:", "ref: ", "garbage\n", "0" * 2**16, "ref: refs/heads/main\0", "\xff\xfe"])


def hostile_config(marker: str) -> str:
    """Every setting through which git runs a command, each writing `marker`."""
    command = f"touch '{marker}'"
    return (f"[core]\n\trepositoryformatversion = 1\n\tfsmonitor = {command}\n\thooksPath = hooks\n"
            f"\tsshCommand = {command}\n\tpager = {command}\n\teditor = {command}\n\taskPass = {command}\n"
            f"\texcludesFile = /etc/hostname\n\talternateRefsCommand = {command}\n"
            f"[diff]\n\texternal = {command}\n[filter \"x\"]\n\tclean = {command}\n\tsmudge = {command}\n"
            f"[credential]\n\thelper = !{command}\n[include]\n\tpath = ../included.cfg\n"
            f"[extensions]\n\tpartialClone = origin\n[remote \"origin\"]\n\turl = ssh://git@example.invalid/r.git\n"
            f"\tpromisor = true\n[protocol]\n\tallow = always\n")


def write_git_directory(rng: random.Random, git_dir: Path, marker: str) -> None:
    git_dir.mkdir(parents=True, exist_ok=True)
    if rng.random() < 0.9:
        (git_dir / "HEAD").write_bytes(head_text(rng).encode("utf-8", "surrogatepass"))
    (git_dir / "config").write_text(hostile_config(marker))
    (git_dir / "hooks").mkdir(exist_ok=True)
    for hook in ("pre-commit", "post-checkout", "fsmonitor-watchman", "reference-transaction"):
        (git_dir / "hooks" / hook).write_text(f"#!/bin/sh\ntouch '{marker}'\n")
        (git_dir / "hooks" / hook).chmod(0o755)
    for _ in range(rng.randint(0, 4)):
        name = ref_name(rng)
        if "\0" in name or name.startswith("/") or ".." in name or len(name) > 200:
            continue
        path = git_dir / name
        if path.is_dir():
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            content = f"ref: {ref_name(rng)}\n" if rng.random() < 0.3 else object_name(rng) + "\n"
            path.write_bytes(content.encode("utf-8", "surrogatepass"))
        except OSError:  # a name the filesystem refuses (too long, a file where a directory is)
            continue
    if rng.random() < 0.5:
        lines = ["# pack-refs with: peeled fully-peeled sorted "]
        for _ in range(rng.randint(0, 20)):
            lines.append(f"{object_name(rng)} {ref_name(rng)}")
            if rng.random() < 0.3:
                lines.append(f"^{object_name(rng)}")
        (git_dir / "packed-refs").write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    if rng.random() < 0.4:
        (git_dir / "info").mkdir(exist_ok=True)
        (git_dir / "info" / "exclude").write_bytes(ignore_file_bytes(rng))
    if rng.random() < 0.1:
        (git_dir / "commondir").write_text(rng.choice(["..", "../..", "/", "/nonexistent", "\0", "x" * 5000]))


def git_metadata_tree(rng: random.Random, directory: Path) -> None:
    """Write under `directory` a work tree with a random hostile `.git`, random `.gitignore`
    files and a few manifests. Any command its git configuration names writes
    `directory/../MARKER-ran`."""
    marker = str(directory.parent / MARKER)
    directory.mkdir(parents=True, exist_ok=True)
    (directory.parent / "included.cfg").write_text(f"[core]\n\tfsmonitor = touch '{marker}'\n")
    (directory.parent / "outside").write_text("0123456789abcdef0123456789abcdef01234567\n*.yaml\n")
    roll = rng.random()
    if roll < 0.6:
        write_git_directory(rng, directory / ".git", marker)
    elif roll < 0.85:  # a worktree or a submodule: `.git` is a file naming the git directory
        real = directory.parent / "real-git-dir"
        write_git_directory(rng, real, marker)
        target = rng.choice([str(real), "../real-git-dir", "../outside", "/nonexistent", "", "\0"])
        (directory / ".git").write_bytes(rng.choice([b"gitdir: ", b"gitdir:", b"", b"gitdir: \n"])
                                         + target.encode("utf-8", "surrogatepass") + b"\n")
    elif roll < 0.95:
        (directory / ".git").symlink_to(rng.choice([directory.parent / "outside", directory.parent, "/dev/null"]))
    else:
        os.mkfifo(directory / ".git")
    directories = [directory]
    for _ in range(rng.randint(0, 6)):
        child = rng.choice(directories) / rng.choice(NAMES)
        if child.exists():
            continue
        child.mkdir()
        directories.append(child)
    for index in range(rng.randint(1, 6)):
        name = rng.choice(["app.yaml", "x.yaml", "b.yml", "é.yaml", "#c.yaml", "!d.yaml", "a b.yaml", "deep.json"])
        path = rng.choice(directories) / f"{index}-{name}"
        path.write_text(POD.format(index=index, port=8000 + index))
    for place in directories:
        roll = rng.random()
        if roll < 0.5:
            (place / ".gitignore").write_bytes(ignore_file_bytes(rng))
        elif roll < 0.55:
            (place / ".gitignore").symlink_to(directory.parent / "outside")
        elif roll < 0.57:
            os.mkfifo(place / ".gitignore")
        elif roll < 0.6:
            (place / ".gitignore").mkdir()


def check_git_tree(rng: random.Random, scratch: Path) -> None:
    """Build one tree under `scratch`, lint it in-process and read its commit. AssertionError when
    either raises, a marker appears, or the commit is neither "" nor an object name."""
    from kubelint_ports import portmap
    from kubelint_ports.engine import LintOptions, lint_paths
    from kubelint_ports.policies import builtin_policies

    top = scratch / "git-tree"
    shutil.rmtree(top, ignore_errors=True)
    tree = top / "repo"
    git_metadata_tree(rng, tree)
    paths = [str(path) for path in tree.rglob("*.yaml") if path.is_file()] or [str(tree / "absent.yaml")]
    try:
        report = lint_paths([str(tree)], LintOptions(), policies=builtin_policies())
        commit = portmap.repository_commit(paths)
    except Exception as error:  # noqa: BLE001 (that is the finding)
        raise AssertionError(f"raised {type(error).__name__}: {error}") from error
    internal = [d.message for d in report.diagnostics if d.internal]
    assert not internal, f"internal error: {internal[0]}"
    assert not (top / MARKER).exists(), "a command from the tree's git configuration ran"
    assert commit == "" or portmap.COMMIT.fullmatch(commit), f"not an object name: {commit!r}"


if __name__ == "__main__":  # python tests/fuzzing_git.py COUNT [SEED]: a standalone campaign
    import sys
    import tempfile
    import time

    count, first = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        for seed in range(first, first + count):
            try:
                check_git_tree(random.Random(seed), Path(scratch))
            except AssertionError as error:
                print(f"seed {seed}: {error}")
                raise
    print(f"{count} trees, 0 failures, {time.monotonic() - started:.1f} s")
