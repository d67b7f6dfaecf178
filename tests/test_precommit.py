"""The pre-commit hooks, exercised with pre-commit itself from a temporary repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs pre-commit and its hook environments: not in the quick subset

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
        pytest.skip("the pre-commit tests need `pre-commit`, which is not installed: pip install '.[test]'")
    return found


def test_manifest_is_valid():
    done = subprocess.run([pre_commit(), "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="session")
def hook_source(tmp_path_factory) -> tuple[str, str]:
    """This checkout as one commit that every test's `try-repo` names: (repository, ref).

    pre-commit keys a hook's environment by repository and revision. Pointed at a work tree with
    uncommitted changes, `try-repo` commits them into a new shadow repository on every call, so
    each test paid for a new environment (pip installing the project and, for the charts hook,
    the Helm engine). One snapshot, one revision: each hook's environment is built once."""
    source = tmp_path_factory.mktemp("hook-source")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        origin = ROOT / name
        if origin.is_file() and not origin.is_symlink():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, source / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=source, check=True)
    subprocess.run([*git, "add", "-A"], cwd=source, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "snapshot"], cwd=source, check=True)
    ref = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True, check=True)
    return str(source), ref.stdout.strip()


@pytest.fixture(scope="session")
def hook_home(tmp_path_factory, hook_source) -> tuple[Path, str, str]:
    """One pre-commit cache for the session and the snapshot it installs hooks from: each hook's
    environment is built once."""
    return (tmp_path_factory.mktemp("pre-commit-home"), *hook_source)


def try_repo(tmp_path: Path, cache: tuple[Path, str, str], hook: str, files: dict[str, str], *,
             changed: list[str] | None = None, verbose: bool = True) -> subprocess.CompletedProcess:
    """`pre-commit run HOOK` in a new repository holding `files`: on every file, or on `changed`.

    The hook comes from the snapshot of this checkout, as a user's .pre-commit-config.yaml names
    it (repository and rev). The configuration lies outside the repository (`--config`), so the
    hooks never see it among the files. Unlike `pre-commit try-repo`, which installs into a new
    temporary store on every call, `run` keeps environments in PRE_COMMIT_HOME: built once."""
    repo = tmp_path / "repo"
    home, repository, ref = cache
    if not repo.exists():
        repo.mkdir()
        for name, text in files.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text)
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
        subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
        subprocess.run([*git, "add", "."], cwd=repo, check=True)
    config = tmp_path / "pre-commit-config.yaml"
    config.write_text(f"repos:\n  - repo: {json.dumps(repository)}\n    rev: {ref}\n    hooks: [{{id: {hook}}}]\n")
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    which = ["--files", *changed] if changed is not None else ["--all-files"]
    return subprocess.run([pre_commit(), "run", "--config", str(config), hook, *which,
                           *(["--verbose"] if verbose else [])], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.skipif(os.environ.get("KUBELINT_SKIP_INSTALL_TESTS") == "1",
                    reason="KUBELINT_SKIP_INSTALL_TESTS=1")
def test_whole_repository_hook_fails_on_a_cross_file_collision(tmp_path, hook_home):
    done = try_repo(tmp_path, hook_home, "kubelint-ports", {"k8s/deploy.yaml": BAD, "k8s/service.yaml": OTHER_FILE})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "k8s/deploy.yaml:9:" in done.stdout and "KP201" in done.stdout


@pytest.mark.skipif(os.environ.get("KUBELINT_SKIP_INSTALL_TESTS") == "1",
                    reason="KUBELINT_SKIP_INSTALL_TESTS=1")
def test_whole_repository_hook_passes_a_clean_repository(tmp_path, hook_home):
    done = try_repo(tmp_path, hook_home, "kubelint-ports",
                    {"k8s/service.yaml": CLEAN, "README.md": "# not yaml\n", "ci.yml": "on: [push]\njobs: {}\n"})
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(os.environ.get("KUBELINT_SKIP_INSTALL_TESTS") == "1",
                    reason="KUBELINT_SKIP_INSTALL_TESTS=1")
def test_a_passing_hook_still_shows_its_warnings(tmp_path, hook_home):
    """pre-commit hides a passing hook's output unless the hook is verbose: a hostPort warning
    (below fail-on) would never be seen (issue 25)."""
    warning_only = BAD.replace("hostPort: 31123", "hostPort: 8080")
    done = try_repo(tmp_path, hook_home, "kubelint-ports", {"k8s/deploy.yaml": warning_only}, verbose=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "KP101" in done.stdout and "claims hostPort 8080/TCP" in done.stdout


@pytest.mark.skipif(os.environ.get("KUBELINT_SKIP_INSTALL_TESTS") == "1",
                    reason="KUBELINT_SKIP_INSTALL_TESTS=1")
def test_per_file_hook_runs_single_object_rules_only(tmp_path, hook_home):
    done = try_repo(tmp_path, hook_home, "kubelint-ports-files", {"deploy.yaml": BAD, "service.yaml": OTHER_FILE})
    assert "KP201" not in done.stdout, "cross-file rules are wrong on a subset of files"
    assert "deploy.yaml:9:" in done.stdout and "KP102" in done.stdout
    assert done.returncode == 0, "warnings only: the default fail-on is error"


def chart_repository() -> dict[str, str]:
    """A repository with one chart (tests/charts/web) and a config that lints it with its
    production values: a hostPort that takes a nodePort (KP201)."""
    chart = ROOT / "tests" / "charts" / "web"
    files = {f"charts/web/{path.relative_to(chart).as_posix()}": path.read_text()
             for path in sorted(chart.rglob("*")) if path.is_file()}
    files[".kubelint-ports.yaml"] = ("paths: [charts]\n"
                                     "charts:\n  - path: charts/web\n    values: [charts/web/values-hostports.yaml]\n")
    return files


def test_chart_hook_declares_the_helm_extra():
    import re

    import yaml
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    hooks = {hook["id"]: hook for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["helm"]
    assert hooks["kubelint-ports-charts"]["additional_dependencies"] == extra
    assert "additional_dependencies" not in hooks["kubelint-ports"], "the default hook stays slim"
    pattern = re.compile(hooks["kubelint-ports-charts"]["files"])
    for path in ("charts/web/templates/_helpers.tpl", "charts/web/values.yaml", "charts/web/values-prod.yml",
                 "charts/web/Chart.yaml", "charts/web/Chart.lock", "charts/web/charts/db-1.2.0.tgz",
                 "charts/web/values.schema.json", "k8s/app.yaml", "charts/web/.helmignore"):
        assert pattern.search(path), path
    for path in ("README.md", "charts/web/templates/NOTES.txt", "main.py"):
        assert not pattern.search(path), path


@pytest.mark.skipif(os.environ.get("KUBELINT_SKIP_INSTALL_TESTS") == "1",
                    reason="KUBELINT_SKIP_INSTALL_TESTS=1")
def test_a_helpers_only_change_runs_the_chart_hook_which_renders_in_process(tmp_path, hook_home):
    files = chart_repository()
    done = try_repo(tmp_path, hook_home, "kubelint-ports-charts", files,
                    changed=["charts/web/templates/_helpers.tpl"])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "charts/web/templates/deployment.yaml" in done.stdout and "KP201" in done.stdout
    assert "no Helm engine" not in done.stdout
    slim = try_repo(tmp_path, hook_home, "kubelint-ports", files, changed=["charts/web/templates/_helpers.tpl"])
    assert slim.returncode == 0 and "no files to check" in slim.stdout, "a .tpl is not YAML to the slim hook"


@pytest.mark.skipif(os.environ.get("KUBELINT_SKIP_INSTALL_TESTS") == "1",
                    reason="KUBELINT_SKIP_INSTALL_TESTS=1")
def test_slim_hook_has_no_helm_engine(tmp_path, hook_home):
    import shutil

    done = try_repo(tmp_path, hook_home, "kubelint-ports", chart_repository())
    if shutil.which("helm"):
        assert "KP201" in done.stdout, done.stdout + done.stderr  # a helm binary renders it
    else:
        assert done.returncode == 1 and "- exit code: 2" in done.stdout, done.stdout + done.stderr
        assert "no Helm engine" in done.stdout and "use the `kubelint-ports-charts` hook" in done.stdout


def test_per_file_hook_leaves_chart_files_to_the_chart_hook():
    """A changed template is linted as its whole chart, which needs Helm's engine: the slim per-file
    hook failed on every chart change ("no Helm engine", exit 2), once per batch of files."""
    import re

    import yaml

    hooks = {hook["id"]: hook for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    files_hook = hooks["kubelint-ports-files"]
    assert "additional_dependencies" not in files_hook, "the per-file hook stays slim"
    assert files_hook["require_serial"] is True, "one run: one summary, a directory linted once"
    exclude = re.compile(files_hook["exclude"])
    charts_files = re.compile(hooks["kubelint-ports-charts"]["files"])
    for path in ("charts/web/templates/deployment.yaml", "charts/web/templates/tests/test.yaml",
                 "charts/web/charts/db/templates/svc.yml", "web/Chart.yaml", "Chart.yaml"):
        assert exclude.search(path), path
        assert charts_files.search(path), f"{path}: the chart hook takes it"
    for path in ("k8s/app.yaml", "deploy/my-templates/app.yaml", "templates.yaml", "k8s/Chart.yaml.bak.yaml",
                 "charts/web/crds/crd.yaml"):
        assert not exclude.search(path), path


@pytest.mark.skipif(os.environ.get("KUBELINT_SKIP_INSTALL_TESTS") == "1",
                    reason="KUBELINT_SKIP_INSTALL_TESTS=1")
def test_per_file_hook_in_a_repository_with_a_chart(tmp_path, hook_home):
    files = {**chart_repository(), "k8s/deploy.yaml": BAD, "k8s/service.yaml": CLEAN}
    done = try_repo(tmp_path, hook_home, "kubelint-ports-files", files)
    assert "no Helm engine" not in done.stdout, done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    assert "k8s/deploy.yaml:9:" in done.stdout and "KP102" in done.stdout
    assert "charts/web/templates" not in done.stdout
    assert done.stdout.count(" notes in ") == 1, "one run, one summary"
    changed = try_repo(tmp_path, hook_home, "kubelint-ports-files", files,
                       changed=["charts/web/templates/deployment.yaml", "charts/web/Chart.yaml"])
    assert changed.returncode == 0 and "no files to check" in changed.stdout, changed.stdout
