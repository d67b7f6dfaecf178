"""The pre-commit hooks, exercised with pre-commit itself from a temporary repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BAD = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      containers:
        - name: web
          ports: [{containerPort: 80, hostPort: 31123}]
"""
OTHER_FILE = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  type: NodePort
  ports: [{port: 80, nodePort: 31123}]
"""
CLEAN = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  ports: [{port: 80}]
"""


def pre_commit() -> str:
    found = shutil.which("pre-commit") or str(Path(sys.executable).parent / "pre-commit")
    if not Path(found).exists():
        pytest.skip("pre-commit is not installed (pip install '.[test]')")
    return found


def test_manifest_is_valid():
    done = subprocess.run([pre_commit(), "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def hook_home(tmp_path_factory):
    """One pre-commit cache for the module: the hook's environment is built once."""
    return tmp_path_factory.mktemp("pre-commit-home")


def try_repo(tmp_path: Path, home: Path, hook: str, files: dict[str, str]) -> subprocess.CompletedProcess:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    env = {**__import__("os").environ, "PRE_COMMIT_HOME": str(home)}
    return subprocess.run([pre_commit(), "try-repo", str(ROOT), hook, "--all-files", "--verbose"], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.skipif(__import__("os").environ.get("KUBELINT_SKIP_INSTALL_TESTS") == "1",
                    reason="KUBELINT_SKIP_INSTALL_TESTS=1")
def test_whole_repository_hook_fails_on_a_cross_file_collision(tmp_path, hook_home):
    done = try_repo(tmp_path, hook_home, "kubelint-ports", {"k8s/deploy.yaml": BAD, "k8s/service.yaml": OTHER_FILE})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "k8s/deploy.yaml:9:" in done.stdout and "KP201" in done.stdout


@pytest.mark.skipif(__import__("os").environ.get("KUBELINT_SKIP_INSTALL_TESTS") == "1",
                    reason="KUBELINT_SKIP_INSTALL_TESTS=1")
def test_whole_repository_hook_passes_a_clean_repository(tmp_path, hook_home):
    done = try_repo(tmp_path, hook_home, "kubelint-ports",
                    {"k8s/service.yaml": CLEAN, "README.md": "# not yaml\n", "ci.yml": "on: [push]\njobs: {}\n"})
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(__import__("os").environ.get("KUBELINT_SKIP_INSTALL_TESTS") == "1",
                    reason="KUBELINT_SKIP_INSTALL_TESTS=1")
def test_per_file_hook_runs_single_object_rules_only(tmp_path, hook_home):
    done = try_repo(tmp_path, hook_home, "kubelint-ports-files", {"deploy.yaml": BAD, "service.yaml": OTHER_FILE})
    assert "KP201" not in done.stdout, "cross-file rules are wrong on a subset of files"
    assert "deploy.yaml:9:" in done.stdout and "KP102" in done.stdout
    assert done.returncode == 0, "warnings only: the default fail-on is error"
