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

pytestmark = pytest.mark.slow  # runs the Action's shell steps: not in the quick subset

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
        pytest.skip("this test needs `check-jsonschema`, which is not installed: pip install '.[test]'")
    done = subprocess.run([str(checker), "--builtin-schema", "vendor.github-actions", str(ROOT / "action.yml")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_inputs_reach_scripts_only_through_env():
    for action_step in ACTION["runs"]["steps"]:
        if "uses" in action_step:  # another action: pinned to a commit, inputs only through `with:`
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", action_step["uses"]), action_step["uses"]
            continue
        assert action_step.get("shell") == "bash"
        assert "${{" not in action_step["run"], f"expression inside run: of {action_step['name']}"
    declared = set(ACTION["inputs"])
    used = {match for s in ACTION["runs"]["steps"]
            for value in [*(s.get("env") or {}).values(), *(s.get("with") or {}).values()]
            for match in re.findall(r"inputs\.([\w-]+)", str(value))}
    assert used == declared


def test_outputs_come_from_the_lint_step():
    for name, output in ACTION["outputs"].items():
        assert output["value"] == f"${{{{ steps.lint.outputs.{name} }}}}"


@pytest.fixture
def github(tmp_path):
    """A workspace, GitHub's environment files, and a `kubelint-ports` (this interpreter) that the
    install step hands to the lint step (`steps.install.outputs.kubelint-ports`), also on PATH."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / ".git").mkdir()  # actions/checkout leaves a repository: paths are relative to it
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

    def run(step_id: str, *, runner: dict[str, str] | None = None, outputs: dict[str, str] | None = None,
            **inputs: str):
        """Run one `run:` step; `outputs` gives earlier steps' outputs (`plan.helm`), `runner`
        overrides RUNNER_* variables."""
        action_step = step(step_id)
        values = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()}
        values.update({name.replace("_", "-"): value for name, value in inputs.items()})
        earlier = {"python.python-path": sys.executable, "plan.helm": "false", "install.kubelint-ports": str(shim),
                   "plan.pip-cache": str(runner_temp / "kubelint-ports-pip-cache"), **(outputs or {})}
        env = {key: value for key, value in os.environ.items() if not key.startswith(("GITHUB_", "RUNNER_"))}
        env.update({key: str(path) for key, path in files.items()})
        env.update(RUNNER_TEMP=str(runner_temp), GITHUB_ACTION_PATH=str(ROOT), GITHUB_WORKSPACE=str(workspace),
                   GITHUB_REPOSITORY="acme/platform", GITHUB_SHA="0123abc", GITHUB_SERVER_URL="https://github.com",
                   PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
        env.update({"RUNNER_OS": "Linux", "RUNNER_ARCH": "X64", **(runner or {})})

        def expression(match: re.Match) -> str:
            name = match.group(1)
            if name.startswith("inputs."):
                return values[name.removeprefix("inputs.")]
            found = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", name)
            return earlier[f"{found.group(1)}.{found.group(2)}"]

        for key, template in (action_step.get("env") or {}).items():
            env[key] = EXPRESSION.sub(expression, template)
        done = subprocess.run(["bash", "-c", action_step["run"]], cwd=workspace, env=env, capture_output=True,
                              text=True, timeout=300)
        written = dict(line.split("=", 1) for line in files["GITHUB_OUTPUT"].read_text().splitlines() if "=" in line)
        return done, written, files["GITHUB_STEP_SUMMARY"].read_text()

    run.workspace = workspace
    run.bin_dir = bin_dir
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
                                  "x\ntouch {marker}", "$(touch${{IFS}}{marker})", "'$(touch {marker})'"])
def test_inputs_never_execute(github, tmp_path, evil):
    fields = ["paths", "values", "nodes", "cluster", "config", "sarif_file", "fail_on", "args"]
    markers = {field: tmp_path / f"pwned-{field}" for field in [*fields, "helm", "plan_paths"]}
    # fail-on and args are checked by the linter before anything runs, so each gets its own run.
    github("lint", **{field: evil.format(marker=markers[field]) for field in fields if field not in ("fail_on", "args")})
    github("lint", fail_on=evil.format(marker=markers["fail_on"]))
    github("lint", args=evil.format(marker=markers["args"]))
    github("plan", helm=evil.format(marker=markers["helm"]))
    github("plan", paths=evil.format(marker=markers["plan_paths"]))
    assert not [field for field, marker in markers.items() if marker.exists()], "an input ran as code"


def test_version_input_is_checked_before_use(github, tmp_path):
    marker = tmp_path / "pwned-version"
    done, _, _ = github("install", version=f"1.0; touch {marker}")
    assert done.returncode == 2 and "not a version number" in done.stdout
    assert not marker.exists()


@pytest.mark.skipif(os.environ.get("KUBELINT_SKIP_INSTALL_TESTS") == "1", reason="KUBELINT_SKIP_INSTALL_TESTS=1")
def test_install_step_outputs_the_tool_and_leaves_the_jobs_path(github):
    """The real install step: a venv under $RUNNER_TEMP with the action's own checkout (needs PyPI).
    Its `bin` never goes on $GITHUB_PATH (later steps would get its python and pip first): the
    lint step gets the program by its path."""
    done, outputs, _ = github("install")
    assert done.returncode == 0, done.stdout + done.stderr
    assert github.files["GITHUB_PATH"].read_text() == "", "the job's PATH is not the action's to change"
    bin_dir = github.runner_temp / "kubelint-ports-venv" / "bin"
    tool = Path(outputs["kubelint-ports"])
    assert tool == bin_dir / "kubelint-ports"
    assert subprocess.run([str(tool), "--version"], capture_output=True, text=True).returncode == 0
    installed = subprocess.run([str(bin_dir / "python"), "-m", "pip", "list", "--format", "json"],
                               capture_output=True, text=True).stdout
    versions = {entry["name"].lower(): entry["version"] for entry in json.loads(installed)}
    assert versions["typer"] == re.search(r"^typer==(.+)$", (ROOT / "action" / "constraints.txt").read_text(),
                                          re.MULTILINE).group(1), "the pinned version"
    assert "helm-python-sdk" not in versions, "no charts: no Helm extra"


def test_pip_cache_is_where_the_cache_step_looks():
    steps = ACTION["runs"]["steps"]
    cache = next(s for s in steps if s.get("uses", "").startswith("actions/cache@"))
    assert cache["with"] == {"path": "${{ steps.plan.outputs.pip-cache }}", "key": "${{ steps.plan.outputs.cache-key }}"}
    assert step("install")["env"]["PIP_CACHE_DIR"] == "${{ steps.plan.outputs.pip-cache }}"
    order = [s.get("id") or s.get("uses", "").split("@")[0] for s in steps]
    assert order == ["plan", "python", "actions/cache", "install", "lint"]
    python = next(s for s in steps if s.get("id") == "python")
    assert python["with"] == {"python-version": "3.12", "update-environment": False}, "the job's own Python stays"
    assert step("install")["env"]["KP_PYTHON"] == "${{ steps.python.outputs.python-path }}"


# --- args, the plan step (runner, Helm extra, cache key), the install ------------------------------

def test_args_input_is_split_like_a_shell_and_passed_to_lint(github):
    (github.workspace / "app.yaml").write_text(COLLISION)
    done, outputs, _ = github("lint", paths="app.yaml", args="--select 'KP201, KP101' --proxy-mode ipvs")
    assert done.returncode == 1, done.stdout + done.stderr
    rules = {re.search(r"title=(KP\d+)", line).group(1) for line in done.stdout.splitlines() if line.startswith("::")}
    assert rules == {"KP101", "KP201"}
    done, _, _ = github("lint", paths="app.yaml", args="--select 'KP201")
    assert done.returncode == 2 and "::error title=kubelint-ports::args is not a list of arguments" in done.stdout
    done, _, _ = github("lint", paths="app.yaml", args="--select KP999")
    assert done.returncode == 2 and "unknown rule" in done.stdout + done.stderr


@pytest.mark.parametrize("runner_os", ["Windows", "FreeBSD"])
def test_plan_refuses_unsupported_runners(github, runner_os):
    done, outputs, _ = github("plan", runner={"RUNNER_OS": runner_os})
    assert done.returncode == 1
    assert done.stdout.startswith("::error title=kubelint-ports::This action runs on Linux and macOS runners only")
    assert "pip install kubelint-ports" in done.stdout and "helm" not in outputs


def test_plan_installs_the_helm_extra_only_for_charts(github):
    chart = github.workspace / "deploy" / "charts" / "web"
    (github.workspace / "k8s").mkdir()
    (github.workspace / "k8s" / "app.yaml").write_text(COLLISION)

    def plan(**inputs) -> dict:
        github.files["GITHUB_OUTPUT"].write_text("")
        done, outputs, _ = github("plan", **inputs)
        assert done.returncode == 0, done.stdout + done.stderr
        return outputs

    assert plan()["helm"] == "false"
    chart.mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: web\nversion: 1.0.0\n")
    assert plan()["helm"] == "true", "a chart anywhere in the workspace"
    assert plan(paths="k8s")["helm"] == "false", "no chart under the paths"
    assert plan(paths="k8s\ndeploy")["helm"] == "true"
    assert plan(paths="k8s", helm="true")["helm"] == "true"
    assert plan(helm="false")["helm"] == "false"
    (github.workspace / "node_modules" / "x").mkdir(parents=True)
    (github.workspace / "node_modules" / "x" / "Chart.yaml").write_text("name: x\n")
    assert plan(paths="k8s node_modules")["helm"] == "false", "node_modules is never linted"
    done, _, _ = github("plan", helm="maybe")
    assert done.returncode == 2 and "helm must be auto, true or false" in done.stdout


def test_plan_cache_key_follows_constraints_version_extra_and_runner(github):
    def key(**options) -> tuple[str, str]:
        github.files["GITHUB_OUTPUT"].write_text("")
        done, outputs, _ = github("plan", **options)
        assert done.returncode == 0, done.stderr
        return outputs["cache-key"], outputs["pip-cache"]

    first, cache = key(helm="false")
    assert cache == str(github.runner_temp / "kubelint-ports-pip-cache")
    assert re.fullmatch(r"kubelint-ports-pip-Linux-X64-py3\.12-[0-9a-f]{16}", first)
    assert key(helm="false") == (first, cache)
    others = {key(helm="true")[0], key(helm="false", version="0.1.0")[0],
              key(helm="false", runner={"RUNNER_OS": "macOS", "RUNNER_ARCH": "ARM64"})[0]}
    assert first not in others and len(others) == 3


def test_install_step_pins_constraints_and_adds_the_extra_on_request(github, tmp_path):
    """install.sh's commands, seen through a stand-in Python that records them (no network)."""
    log = tmp_path / "pip.log"
    fake = tmp_path / "fake-python"
    fake.write_text(f"""#!/usr/bin/env bash
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin"
  printf '#!/usr/bin/env bash\\necho "$*" >> {log}\\n' > "$3/bin/python"
  printf '#!/bin/sh\\n' > "$3/bin/kubelint-ports"
  chmod +x "$3/bin/python" "$3/bin/kubelint-ports"
fi
""")
    fake.chmod(0o755)
    constraints = str(ROOT / "action" / "constraints.txt")
    for helm, version, package in (("false", "", str(ROOT)), ("true", "", f"{ROOT}[helm]"),
                                   ("true", "0.1.0", "kubelint-ports[helm]==0.1.0"),
                                   ("false", "0.1.0", "kubelint-ports==0.1.0")):
        log.write_text("")
        github.files["GITHUB_OUTPUT"].write_text("")
        done, outputs, _ = github("install", version=version,
                                  outputs={"python.python-path": str(fake), "plan.helm": helm})
        assert done.returncode == 0, done.stdout + done.stderr
        assert log.read_text().split() == ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-c",
                                           constraints, package]
        assert outputs["kubelint-ports"] == str(github.runner_temp / "kubelint-ports-venv" / "bin" / "kubelint-ports")
        assert github.files["GITHUB_PATH"].read_text() == "", "the venv never goes on the job's PATH"


def test_constraints_pin_every_dependency_within_pyproject():
    from importlib import metadata

    from packaging.requirements import Requirement
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    def canonical(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    pins = {}
    for line in (ROOT / "action" / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"not an exact pin: {line}"
            pins[canonical(name)] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    environment = {"python_version": "3.12", "python_full_version": "3.12.0", "sys_platform": "linux",
                   "platform_machine": "x86_64", "platform_release": "6.1", "extra": ""}
    for text in project["dependencies"] + project["optional-dependencies"]["helm"]:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        assert canonical(requirement.name) in pins, f"{requirement.name} is not pinned"
        assert requirement.specifier.contains(pins[canonical(requirement.name)]), (requirement, pins)
    # Everything those need in turn is pinned too, read from the installed metadata where the
    # installed release is the pinned one (a run with constraints/lowest.txt has other releases,
    # whose needs say nothing about the pinned ones).
    seen, todo = set(), [Requirement(text) for text in project["dependencies"] + project["optional-dependencies"]["helm"]]
    while todo:
        requirement = todo.pop()
        name = canonical(requirement.name)
        if name in seen or (requirement.marker is not None and not requirement.marker.evaluate(environment)):
            continue
        seen.add(name)
        assert name in pins, f"{requirement.name} (needed by the install) is not pinned"
        try:
            if canonical(metadata.version(requirement.name)) != canonical(pins[name]):
                continue
            needs = metadata.requires(requirement.name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [Requirement(text) for text in needs]


BASH_4_ONLY = {  # what macOS's bash 3.2 lacks
    r"\bmapfile\b|\breadarray\b": "mapfile/readarray",
    r"\bdeclare\s+-[a-zA-Z]*A": "associative arrays",
    r"\$\{\w+(\[[^]]*\])?(,,|\^\^|,|\^)\}": "case conversion",
    r"\|&|&>>": "|& and &>>",
    r";;&": ";;&",
    r"\bcoproc\b": "coproc",
    r"\[\s*-1\s*\]": "negative array indexes",
}


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "action").glob("*.sh")))
def test_scripts_run_on_the_bash_of_macos_runners(script):
    """macOS runners may run these with bash 3.2: no bash 4 constructs (a static check; the scripts
    are run for real on Linux by the tests above)."""
    text = (ROOT / "action" / script).read_text()
    found = [name for pattern, name in BASH_4_ONLY.items() if re.search(pattern, text)]
    assert not found, f"{script} uses {found}"
    done = subprocess.run(["bash", "-n", str(ROOT / "action" / script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


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


# --- fail-on from the config, the venv's program, SARIF only when written -------------------------

HOST_PORT_WARNING = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
        - name: web
          ports: [{containerPort: 8080, hostPort: 8080}]
"""


def test_fail_on_input_defaults_to_the_config_files_fail_on(github):
    """An input default of `error` was always passed as --fail-on and overrode the config's."""
    assert ACTION["inputs"]["fail-on"]["default"] == ""
    (github.workspace / ".kubelint-ports.yaml").write_text("fail-on: warning\n")
    (github.workspace / "app.yaml").write_text(HOST_PORT_WARNING)  # KP101: a warning, nothing else
    done, outputs, _ = github("lint")
    assert done.returncode == 1, done.stdout + done.stderr
    assert outputs["findings"] == "1" and outputs["errors"] == "0"
    direct = subprocess.run([sys.executable, "-m", "kubelint_ports", "lint"], cwd=github.workspace,
                            capture_output=True, text=True)
    assert direct.returncode == done.returncode, "the action decides as the CLI does"
    done, _, _ = github("lint", fail_on="error")
    assert done.returncode == 0, "an input that is set still wins over the config"
    (github.workspace / ".kubelint-ports.yaml").unlink()
    done, _, _ = github("lint")
    assert done.returncode == 0, "no config, no input: error"


def test_lint_step_runs_the_installed_program_not_the_one_on_path(github, tmp_path):
    """The install step's venv is not on PATH: the lint step gets its program from the install step."""
    assert step("lint")["env"]["KP_BIN"] == "${{ steps.install.outputs.kubelint-ports }}"
    for script in (ROOT / "action").glob("*.sh"):
        assert not re.search(r">>?\s*\"?\$\{?GITHUB_PATH", script.read_text()), f"{script.name} changes the job's PATH"
    (github.bin_dir / "kubelint-ports").write_text("#!/bin/sh\necho 'the PATH one ran' >&2\nexit 97\n")
    installed = tmp_path / "venv-bin" / "kubelint-ports"
    installed.parent.mkdir()
    installed.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kubelint_ports "$@"\n')
    installed.chmod(0o755)
    (github.workspace / "app.yaml").write_text(COLLISION)
    done, outputs, _ = github("lint", paths="app.yaml", outputs={"install.kubelint-ports": str(installed)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the PATH one ran" not in done.stderr and outputs["errors"] == "1"


@pytest.mark.parametrize("sarif_file", ["", "kubelint-ports.sarif"])
def test_no_sarif_output_when_the_linter_stops_before_reporting(github, sarif_file):
    """A usage error (exit 2) writes no report: sarif-file was still set to a missing file, and an
    `if: always()` upload step failed on it. A SARIF file from an earlier run never stands in."""
    (github.workspace / "app.yaml").write_text(COLLISION)
    done, outputs, _ = github("lint", paths="app.yaml", sarif_file=sarif_file)
    assert done.returncode == 1 and Path(github.workspace, outputs["sarif-file"]).is_file()
    github.files["GITHUB_OUTPUT"].write_text("")
    done, outputs, _ = github("lint", paths="app.yaml", sarif_file=sarif_file, args="--select KP999")
    assert done.returncode == 2
    assert "sarif-file" not in outputs, "no SARIF was written by this run"
    assert outputs["findings"] == "" and outputs["errors"] == "", "unknown, never 0"
    [message] = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert message.startswith("::error title=kubelint-ports::kubelint-ports stopped on a usage or input error (exit 2)")
    assert "unknown rule or rule prefix 'KP999'" in message and "No SARIF report was written" in message
    assert "unknown rule" in done.stderr, "the linter's own message still shows in the log"
    stale = github.workspace / (sarif_file or "unused")
    assert not stale.exists()
    assert not (github.runner_temp / "kubelint-ports" / "results.sarif").exists()


def test_an_input_error_in_a_file_still_reports(github):
    """Exit 2 for a file that does not parse: the other files are linted and reported, the step fails."""
    (github.workspace / "app.yaml").write_text(COLLISION)
    (github.workspace / "broken.yaml").write_text("a: [\n")
    done, outputs, _ = github("lint", paths="app.yaml broken.yaml")
    assert done.returncode == 2, done.stdout + done.stderr
    assert Path(outputs["sarif-file"]).is_file() and outputs["errors"] == "1"
