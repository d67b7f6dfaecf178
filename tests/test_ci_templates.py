"""The CI templates under ci-templates/ (docs/integrations.md): GitLab CI, Jenkins, Bitbucket
Pipelines, Azure Pipelines.

Each YAML template is checked against its CI's schema as check-jsonschema vendors it (offline), and
every shell block is run as shell: syntax with bash and dash, then for real in a temporary
directory against a small manifest, with the installed `kubelint-ports` on PATH, under the shell
its CI uses. The generic recipes' blocks are ci-templates/kubelint-ports.sh, verbatim.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import yaml

from kubelint_ports import __version__

pytestmark = pytest.mark.slow  # runs every template's shell blocks: not in the quick subset

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "ci-templates"
SCRIPT = (TEMPLATES / "kubelint-ports.sh").read_text(encoding="utf-8")
COMMIT_PLACEHOLDER = "0123456789abcdef0123456789abcdef01234567"
ARCHIVE = f"https://github.com/kubelint-ports/kubelint-ports/archive/{COMMIT_PLACEHOLDER}.tar.gz"
JUNIT = "test-results/kubelint-ports.xml"

COLLISION = """\
apiVersion: v1
kind: Pod
metadata:
  name: edge
spec:
  containers:
    - name: edge
      image: nginx
      ports:
        - containerPort: 80
          hostPort: 30080
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  type: NodePort
  selector: {app: web}
  ports:
    - port: 80
      nodePort: 30080
"""
CLEAN = """\
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
    - port: 80
"""


def kubelint_ports_bin() -> Path:
    """The installed console script, beside this interpreter (the test's virtualenv)."""
    found = Path(sys.executable).parent / "kubelint-ports"
    assert found.exists(), f"no kubelint-ports beside {sys.executable}: install the project (pip install -e .)"
    return found


def shell_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("KUBELINT_PORTS")}
    env.update({"PATH": f"{kubelint_ports_bin().parent}{os.pathsep}{env.get('PATH', '')}", "NO_COLOR": "1",
                "HOME": str(tmp_path)})
    env.update(extra)
    return env


def load(name: str) -> dict:
    return yaml.safe_load((TEMPLATES / name).read_text(encoding="utf-8"))


def jenkins_block() -> str:
    text = (TEMPLATES / "Jenkinsfile").read_text(encoding="utf-8")
    blocks = re.findall(r"\bsh '''\n(.*?)\n[ ]*'''", text, re.S)
    assert len(blocks) == 1, "the Jenkinsfile has one sh '''...''' block"
    return textwrap.dedent(blocks[0]) + "\n"


def bitbucket_block() -> str:
    steps = load("bitbucket-pipelines.yml")["pipelines"]["default"]
    assert len(steps) == 1
    script = steps[0]["step"]["script"]
    assert len(script) == 1, "one script block"
    return script[0]


def azure_block() -> str:
    steps = [step for step in load("azure-pipelines.yml")["steps"] if "script" in step]
    assert len(steps) == 1
    return steps[0]["script"]


def gitlab_job() -> dict:
    config = load("gitlab-ci.yml")
    assert list(config) == ["kubelint-ports"], "one job, nothing global to clash with the includer's"
    return config["kubelint-ports"]


def gitlab_script() -> str:
    return "".join(line + "\n" for line in gitlab_job()["script"])


# The generic recipes: (template, its block, the shell command its CI runs a block with).
# Jenkins' `sh` step runs `sh -xe` (dash on Debian and Ubuntu agents); Azure's script step runs
# `bash --noprofile --norc` on Linux; Bitbucket runs its commands with bash.
RECIPES = [
    ("Jenkinsfile", jenkins_block, ["sh", "-xe"]),
    ("bitbucket-pipelines.yml", bitbucket_block, ["bash"]),
    ("azure-pipelines.yml", azure_block, ["bash", "--noprofile", "--norc"]),
]
RECIPE_IDS = [name for name, _, _ in RECIPES]


def run_shell(shell: list[str], script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    (cwd / ".ci-block.sh").write_text(script, encoding="utf-8")  # hidden: lint never reads it
    return subprocess.run([*shell, ".ci-block.sh"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def junit_failures(path: Path) -> int:
    return int(ET.parse(path).getroot().get("failures"))


# --- schemas ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "schema"), [("gitlab-ci.yml", "vendor.gitlab-ci"),
                                              ("bitbucket-pipelines.yml", "vendor.bitbucket-pipelines"),
                                              ("azure-pipelines.yml", "vendor.azure-pipelines")])
def test_template_is_valid_against_its_ci_schema(name, schema):
    """check-jsonschema's builtin schemas are vendored in the package: no network is used."""
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema,
                           str(TEMPLATES / name)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_gitlab_schema_check_rejects_a_broken_job(tmp_path):
    """The gate bites: a misspelt artifacts key and a report path that is not a string fail."""
    broken = (TEMPLATES / "gitlab-ci.yml").read_text(encoding="utf-8")
    broken = broken.replace("    when: always\n", "    whenn: always\n")
    broken = broken.replace("codequality: gl-code-quality-report.json", "codequality: 5")
    (tmp_path / ".gitlab-ci.yml").write_text(broken, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.gitlab-ci",
                           str(tmp_path / ".gitlab-ci.yml")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "whenn" in done.stdout and "codequality" in done.stdout


# --- GitLab ----------------------------------------------------------------------------------------


def test_the_gitlab_job_uploads_both_reports_always():
    job = gitlab_job()
    assert job["image"] == "python:3.11-slim"
    artifacts = job["artifacts"]
    assert artifacts["when"] == "always"
    reports = artifacts["reports"]
    assert reports == {"codequality": "gl-code-quality-report.json", "junit": "kubelint-ports-junit.xml"}
    assert sorted(artifacts["paths"]) == sorted(reports.values())
    lint = [line for line in job["script"] if line.startswith("kubelint-ports lint")]
    assert lint == [f"kubelint-ports lint --report gitlab:{reports['codequality']} --report junit:{reports['junit']}"]
    assert not job.get("allow_failure"), "findings fail the job per fail-on"


def test_the_gitlab_job_installs_a_pinned_commit_not_an_unreleased_package():
    """Before the first release nothing sends users to a package index that has no release."""
    job = gitlab_job()
    assert job["variables"]["KUBELINT_PORTS_PACKAGE"] == ARCHIVE
    assert job["before_script"] == ['python -m pip install --quiet "$KUBELINT_PORTS_PACKAGE"']
    text = (TEMPLATES / "gitlab-ci.yml").read_text(encoding="utf-8")
    assert f"kubelint-ports=={__version__}" in text and f"v{__version__}" in text


def test_the_gitlab_install_line_is_shell():
    for shell in ("bash", "dash"):
        done = subprocess.run([shell, "-n"], input="\n".join(gitlab_job()["before_script"]) + "\n",
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (shell, done.stderr)


@pytest.mark.parametrize("shell", ["bash", "dash"])
def test_the_gitlab_script_writes_both_reports_and_fails_on_findings(tmp_path, shell):
    """GitLab runs the script with bash where the image has it (python:3.11-slim does), else sh."""
    script = gitlab_script()
    assert subprocess.run([shell, "-n"], input=script, capture_output=True, text=True).returncode == 0
    (tmp_path / "app.yaml").write_text(COLLISION, encoding="utf-8")
    env = shell_env(tmp_path)
    schema = json.loads((ROOT / "tests" / "schemas" / "gitlab-codequality.schema.json").read_text())
    for attempt in ("first", "again in the same directory"):
        done = run_shell([shell, "-e"], script, tmp_path, env)
        assert done.returncode == 1, (attempt, done.stdout, done.stderr)
        assert "KP201" in done.stdout, "the findings are in the job's log"
        issues = json.loads((tmp_path / "gl-code-quality-report.json").read_text())
        jsonschema.validate(issues, schema)
        assert {issue["check_name"] for issue in issues} >= {"KP201"}
        assert all(issue["location"]["path"] == "app.yaml" for issue in issues), attempt
        assert junit_failures(tmp_path / "kubelint-ports-junit.xml") == len(issues)

    (tmp_path / "app.yaml").write_text(CLEAN, encoding="utf-8")
    done = run_shell([shell, "-e"], script, tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "gl-code-quality-report.json").read_text()) == []
    assert junit_failures(tmp_path / "kubelint-ports-junit.xml") == 0


# --- Jenkins, Bitbucket, Azure ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "block", "shell"), RECIPES, ids=RECIPE_IDS)
def test_each_recipe_block_is_the_shared_script(name, block, shell):
    assert block() == SCRIPT, f"{name}'s block differs from ci-templates/kubelint-ports.sh"


def test_the_shared_script_survives_every_host_language():
    """Groovy's ''' strings still read backslash escapes, Azure expands $(name) macros, and a
    YAML block scalar keeps the text as is: the script uses none of them."""
    assert "\\" not in SCRIPT and "'''" not in SCRIPT
    assert "$(" not in SCRIPT and "${{" not in SCRIPT
    assert ARCHIVE in SCRIPT and f"kubelint-ports=={__version__}" in SCRIPT
    assert not re.search(r"pip install[^\n]*\bkubelint-ports\b(?!/)", SCRIPT), "no unreleased package name"


@pytest.mark.parametrize("shell", ["bash", "dash"])
def test_the_shared_script_is_posix_shell(shell):
    done = subprocess.run([shell, "-n", str(TEMPLATES / "kubelint-ports.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("name", "block", "shell"), RECIPES, ids=RECIPE_IDS)
def test_each_recipe_writes_junit_and_exits_per_fail_on(tmp_path, name, block, shell):
    (tmp_path / "app.yaml").write_text(COLLISION, encoding="utf-8")
    env = shell_env(tmp_path, KUBELINT_PORTS_INSTALL=":")
    for attempt in ("first", "again in the same workspace"):
        done = run_shell(shell, block(), tmp_path, env)
        assert done.returncode == 1, (attempt, done.stdout, done.stderr)
        assert "KP201" in done.stdout
        assert junit_failures(tmp_path / JUNIT) >= 1

    (tmp_path / ".kubelint-ports.yaml").write_text("fail-on: never\n", encoding="utf-8")
    done = run_shell(shell, block(), tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert junit_failures(tmp_path / JUNIT) >= 1, "fail-on never still reports the findings"

    (tmp_path / ".kubelint-ports.yaml").unlink()
    (tmp_path / "app.yaml").write_text(CLEAN, encoding="utf-8")
    done = run_shell(shell, block(), tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert junit_failures(tmp_path / JUNIT) == 0


def test_a_usage_error_leaves_no_stale_report(tmp_path):
    """A report from an earlier run is removed first: when the linter stops before writing one
    (exit 2), the CI finds none rather than the last run's."""
    (tmp_path / "app.yaml").write_text(CLEAN, encoding="utf-8")
    (tmp_path / "test-results").mkdir()
    (tmp_path / JUNIT).write_text("<testsuites/>")
    (tmp_path / ".kubelint-ports.yaml").write_text("select: [NO-SUCH-RULE]\n", encoding="utf-8")
    done = run_shell(["bash"], SCRIPT, tmp_path, shell_env(tmp_path, KUBELINT_PORTS_INSTALL=":"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert not (tmp_path / JUNIT).exists()


FAKE_PYTHON3 = """\
#!/bin/sh
# python3 stand-in: `-m venv DIR` makes DIR/bin/python, whose `-m pip install SPEC` logs SPEC and
# puts the real kubelint-ports into DIR/bin (or fails when FAKE_PIP_FAILS is set).
[ "$1" = "-m" ] && [ "$2" = "venv" ] || exit 97
mkdir -p "$3/bin"
cat > "$3/bin/python" <<EOF
#!/bin/sh
echo "\\$*" >> "$FAKE_LOG"
[ -z "\\$FAKE_PIP_FAILS" ] || exit 1
ln -sf "$REAL_KUBELINT_PORTS" "$(cd "$3" && pwd)/bin/kubelint-ports"
EOF
chmod +x "$3/bin/python"
"""


@pytest.mark.parametrize("pip_fails", [False, True], ids=["installs", "install-fails"])
def test_the_recipe_installs_into_a_hidden_venv_and_stops_when_the_install_fails(tmp_path, pip_fails):
    """Without KUBELINT_PORTS_INSTALL the script makes the virtualenv, pip-installs the pinned
    commit's archive into it and runs that venv's kubelint-ports; a failed install stops it."""
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "python3").write_text(FAKE_PYTHON3)
    (stubs / "python3").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    (work / "app.yaml").write_text(COLLISION, encoding="utf-8")
    log = tmp_path / "pip.log"
    env = shell_env(tmp_path, FAKE_LOG=str(log), REAL_KUBELINT_PORTS=str(kubelint_ports_bin()),
                    PATH=f"{stubs}{os.pathsep}{os.environ['PATH']}")
    env["PATH"] = os.pathsep.join(part for part in env["PATH"].split(os.pathsep)
                                  if not (Path(part) / "kubelint-ports").exists())
    if pip_fails:
        env["FAKE_PIP_FAILS"] = "1"
    done = run_shell(["sh", "-xe"], SCRIPT, work, env)
    assert log.read_text().split() == ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", ARCHIVE]
    if pip_fails:
        assert done.returncode == 1 and not (work / JUNIT).exists(), done.stderr
    else:
        assert done.returncode == 1, done.stdout + done.stderr
        assert "KP201" in done.stdout, "the venv's kubelint-ports ran"
        assert (work / ".kubelint-ports-venv" / "bin" / "kubelint-ports").is_symlink()
        assert junit_failures(work / JUNIT) >= 1
        assert ".kubelint-ports-venv" not in done.stdout, "lint skips the hidden virtualenv"


def test_the_docs_name_every_template():
    docs = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    for heading in ("## GitLab CI", "## Jenkins", "## Bitbucket Pipelines", "## Azure Pipelines"):
        assert f"\n{heading}\n" in docs, heading
    for path in sorted(TEMPLATES.iterdir()):
        assert f"ci-templates/{path.name}" in docs, path.name
    # The copies shown in full are the files, so the docs cannot drift from what is tested.
    assert "```yaml\n" + (TEMPLATES / "gitlab-ci.yml").read_text(encoding="utf-8") + "```\n" in docs
    assert "```sh\n" + SCRIPT + "```\n" in docs
