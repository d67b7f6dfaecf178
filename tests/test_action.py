"""The GitHub Action, run here without GitHub: each `run:` step executed with bash, with the
environment files GitHub provides, checking outputs, annotations, summary, exit codes and that an
input can never run as code."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")

COLLISION = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      containers:
        - name: web
          ports: [{containerPort: 80, hostPort: 31123}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  type: NodePort
  ports: [{port: 80, nodePort: 31123}]
"""


def step(step_id: str) -> dict:
    return next(s for s in ACTION["runs"]["steps"] if s.get("id") == step_id)


def test_action_is_valid_against_the_github_actions_schema():
    checker = shutil.which("check-jsonschema") or (Path(sys.executable).parent / "check-jsonschema")
    if not Path(checker).exists():
        pytest.skip("check-jsonschema is not installed (pip install '.[test]')")
    done = subprocess.run([str(checker), "--builtin-schema", "vendor.github-actions", str(ROOT / "action.yml")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_inputs_reach_scripts_only_through_env():
    for action_step in ACTION["runs"]["steps"]:
        assert action_step.get("shell") == "bash"
        assert "${{" not in action_step["run"], f"expression inside run: of {action_step['name']}"
    declared = set(ACTION["inputs"])
    used = {match for s in ACTION["runs"]["steps"] for value in (s.get("env") or {}).values()
            for match in re.findall(r"inputs\.([\w-]+)", value)}
    assert used == declared


def test_outputs_come_from_the_lint_step():
    for name, output in ACTION["outputs"].items():
        assert output["value"] == f"${{{{ steps.lint.outputs.{name} }}}}"


@pytest.fixture
def github(tmp_path):
    """A workspace, GitHub's environment files, and `kubelint-ports` on PATH (this interpreter)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    files = {name: tmp_path / name.lower() for name in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_PATH",
                                                       "GITHUB_ENV")}
    for path in files.values():
        path.write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "kubelint-ports"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kubelint_ports "$@"\n')
    shim.chmod(0o755)
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()

    def run(step_id: str, **inputs: str):
        action_step = step(step_id)
        values = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()}
        values.update({name.replace("_", "-"): value for name, value in inputs.items()})
        env = {key: value for key, value in os.environ.items() if not key.startswith("GITHUB_")}
        env.update({key: str(path) for key, path in files.items()})
        env.update(RUNNER_TEMP=str(runner_temp), GITHUB_ACTION_PATH=str(ROOT), GITHUB_WORKSPACE=str(workspace),
                   GITHUB_REPOSITORY="acme/platform", GITHUB_SHA="0123abc", GITHUB_SERVER_URL="https://github.com",
                   PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
        for key, template in (action_step.get("env") or {}).items():
            env[key] = EXPRESSION.sub(lambda m: values[m.group(1).removeprefix("inputs.")], template)
        done = subprocess.run(["bash", "-c", action_step["run"]], cwd=workspace, env=env, capture_output=True,
                              text=True, timeout=300)
        outputs = dict(line.split("=", 1) for line in files["GITHUB_OUTPUT"].read_text().splitlines() if "=" in line)
        return done, outputs, files["GITHUB_STEP_SUMMARY"].read_text()

    run.workspace = workspace
    run.runner_temp = runner_temp
    run.files = files
    return run


def test_lint_step_annotations_outputs_summary_and_exit_code(github):
    (github.workspace / "k8s").mkdir()
    (github.workspace / "k8s" / "app.yaml").write_text(COLLISION)
    done, outputs, summary = github("lint", paths="k8s", sarif_file="results.sarif")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    annotations = [line for line in lines if line.startswith("::")]
    assert annotations[0].startswith("::error file=k8s/app.yaml,line=9,col=")
    assert any(line.startswith("::warning") for line in annotations)
    levels = [line.split(" ", 1)[0] for line in annotations]
    assert levels == sorted(levels, key=lambda level: ["::error", "::warning", "::notice"].index(level))
    assert outputs["sarif-file"] == "results.sarif"
    assert int(outputs["errors"]) == 1 and int(outputs["findings"]) == 3
    sarif = json.loads((github.workspace / "results.sarif").read_text())
    assert sarif["runs"][0]["results"]
    assert "| severity | rule | location |" in summary
    assert "(https://github.com/acme/platform/blob/0123abc/k8s/app.yaml#L9)" in summary


def test_fail_on_never_passes_and_annotations_can_be_off(github):
    (github.workspace / "app.yaml").write_text(COLLISION)
    done, outputs, summary = github("lint", paths="app.yaml", fail_on="never", annotations="false", summary="false")
    assert done.returncode == 0, done.stderr
    assert "::error" not in done.stdout and "KP201" in done.stdout
    assert summary == ""
    assert int(outputs["errors"]) == 1
    assert Path(outputs["sarif-file"]).is_file()


def test_clean_workspace_passes(github):
    (github.workspace / "ok.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
                                              "spec: {ports: [{port: 80}]}\n")
    done, outputs, _ = github("lint", paths="ok.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert outputs["findings"] == "0" and outputs["errors"] == "0"


@pytest.mark.parametrize("evil", ["$(touch {marker})", "`touch {marker}`", "a; touch {marker}",
                                  "x\ntouch {marker}", "$(touch${{IFS}}{marker})"])
def test_inputs_never_execute(github, tmp_path, evil):
    fields = ["paths", "values", "nodes", "cluster", "config", "sarif_file", "fail_on"]
    markers = {field: tmp_path / f"pwned-{field}" for field in fields}
    # fail-on is checked by the linter before anything runs, so give it its own run.
    github("lint", **{field: evil.format(marker=markers[field]) for field in fields if field != "fail_on"})
    github("lint", fail_on=evil.format(marker=markers["fail_on"]))
    assert not [field for field, marker in markers.items() if marker.exists()], "an input ran as code"


def test_version_input_is_checked_before_use(github, tmp_path):
    marker = tmp_path / "pwned-version"
    done, _, _ = github("install", version=f"1.0; touch {marker}")
    assert done.returncode == 2 and "not a version number" in done.stdout
    assert not marker.exists()


@pytest.mark.skipif(os.environ.get("KUBELINT_SKIP_INSTALL_TESTS") == "1", reason="KUBELINT_SKIP_INSTALL_TESTS=1")
def test_install_step_puts_the_tool_on_github_path(github):
    """The real install step: a venv under $RUNNER_TEMP with the action's own checkout (needs PyPI)."""
    done, _, _ = github("install")
    assert done.returncode == 0, done.stdout + done.stderr
    [path_line] = github.files["GITHUB_PATH"].read_text().splitlines()
    assert path_line == str(github.runner_temp / "kubelint-ports-venv" / "bin")
    tool = Path(path_line) / "kubelint-ports"
    assert subprocess.run([str(tool), "--version"], capture_output=True, text=True).returncode == 0


def test_paths_are_never_options(github, tmp_path):
    """`--helm-binary=./evil.sh` ran a program and `--output=F` overwrote a file: paths go after --."""
    evil = github.workspace / "evil.sh"
    marker = tmp_path / "pwned-helm-binary"
    evil.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    evil.chmod(0o755)
    (github.workspace / "chart").mkdir()
    (github.workspace / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: chart\nversion: 0.1.0\n")
    (github.workspace / "victim.txt").write_text("precious\n")
    done, outputs, _ = github("lint", paths="--helm-binary=./evil.sh chart --output=victim.txt")
    assert not marker.exists(), "a path became --helm-binary"
    assert (github.workspace / "victim.txt").read_text() == "precious\n", "a path became --output"
    assert done.returncode == 2  # the two option-like names are files that do not exist


def test_a_line_break_in_sarif_file_cannot_inject_outputs(github):
    (github.workspace / "ok.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
                                              "spec: {ports: [{port: 80}]}\n")
    done, outputs, _ = github("lint", paths="ok.yaml", sarif_file="x.sarif\nfindings=0")
    assert done.returncode == 2 and "line break" in done.stdout
    assert github.files["GITHUB_OUTPUT"].read_text() == ""


@pytest.mark.parametrize("crash", ["exit 3", "kill -SEGV $$"])
def test_a_crash_is_a_failure_never_zero_findings(github, crash):
    bin_dir = github.runner_temp.parent / "bin"
    (bin_dir / "kubelint-ports").write_text(f"#!/bin/sh\necho 'Traceback: a bug' >&2\n{crash}\n")
    (github.workspace / "ok.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    done, outputs, _ = github("lint", paths="ok.yaml")
    assert done.returncode != 0
    assert outputs["findings"] == "" and outputs["errors"] == ""
    assert "::error title=kubelint-ports::kubelint-ports failed" in done.stdout


def test_install_error_escapes_the_version(github):
    done, _, _ = github("install", version="1.0\n::add-mask::secret")
    assert done.returncode == 2
    assert [line for line in done.stdout.splitlines() if line.startswith("::")] == [
        "::error title=kubelint-ports::version '1.0%0A::add-mask::secret' is not a version number"]
