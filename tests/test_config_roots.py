"""Where the paths a configuration file names may lead (issue 34): the git work tree holding the
file; outside one, a file the user named with `--config` may reach what its paths name (the
user's own choice, as a path on the command line is), while a file found by walking up stays in
its own directory. A refusal never advises a step that cannot be taken."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.config import ConfigError
from kubelint_ports.settings import CommandLine, resolve
from kubelint_ports.sourceroot import git_work_tree

SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  ports: [{port: 80, nodePort: {{ .Values.port }}}]
"""

CHART_ENTRY = ("charts:\n  - path: ../charts/web\n    values: [../charts/web/values-prod.yaml]\n"
               "    release-name: web\n    namespace: prod\n")


def chart(directory: Path) -> Path:
    """A chart whose Service's nodePort is its values' `port`: 8080 by default, 9090 in prod."""
    web = directory / "charts" / "web"
    (web / "templates").mkdir(parents=True)
    (web / "Chart.yaml").write_text("apiVersion: v2\nname: web\nversion: 0.1.0\n")
    (web / "values.yaml").write_text("port: 8080\n")
    (web / "values-prod.yaml").write_text("port: 9090\n")
    (web / "templates" / "service.yaml").write_text(SERVICE)
    return web


@pytest.fixture
def project(tmp_path, monkeypatch):
    """No git work tree: `charts/web` beside `cfg/`, the working directory above both."""
    if git_work_tree(str(tmp_path)) is not None:
        pytest.skip(f"the temporary directory {tmp_path} is inside a git work tree")
    chart(tmp_path)
    (tmp_path / "cfg").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def repository(tmp_path, monkeypatch):
    """A git work tree (a `.git` directory is all it takes) with `cfg/` in it, the chart beside it."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "cfg").mkdir()
    (repo / "k8s").mkdir()
    chart(tmp_path)
    monkeypatch.chdir(repo)
    return repo


def lint(*args: str):
    return CliRunner().invoke(app, ["lint", *args])


# --- outside a git work tree: the configuration the user named may reach what it names -------------

def test_a_named_configuration_reaches_a_chart_beside_its_directory(project):
    (project / "cfg" / "kubelint.yaml").write_text(CHART_ENTRY)
    settings = resolve(CommandLine(config="cfg/kubelint.yaml"))
    [(path, helm)] = settings.options.chart_helm
    assert path == str(project / "charts" / "web")
    assert [Path(values).resolve() for values in helm.values] == [project / "charts" / "web" / "values-prod.yaml"]
    assert (helm.release_name, helm.namespace) == ("web", "prod")
    result = lint("--config", "cfg/kubelint.yaml")
    assert result.exit_code == 1, result.output
    assert "nodePort 9090 is outside the node-port range" in result.output  # the entry's values, rendered


def test_a_named_configurations_other_paths_reach_too(project):
    """Every path of the file, not only `charts:`: `paths`, `nodes`, absolute ones included."""
    (project / "cluster").mkdir()
    nodes = project / "cluster" / "nodes.yaml"
    nodes.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    (project / "cfg" / "kubelint.yaml").write_text(f"paths: [../charts]\nnodes: [{nodes}]\n")
    settings = resolve(CommandLine(config=str(project / "cfg" / "kubelint.yaml")))
    assert [Path(path).resolve() for path in settings.paths] == [project / "charts"]
    assert settings.options.node_files == (str(nodes),)


def test_a_configuration_found_by_walking_up_still_stays_in_its_directory(project, monkeypatch):
    (project / "cfg" / ".kubelint-ports.yaml").write_text(CHART_ENTRY)
    monkeypatch.chdir(project / "cfg")
    with pytest.raises(ConfigError) as raised:
        resolve(CommandLine(paths=("..",)))
    assert raised.value.line == 2 and raised.value.path == ".kubelint-ports.yaml"
    message = raised.value.message
    assert message.startswith("charts.0.path: '../charts/web' is outside the repository")
    assert str((project / "cfg").resolve()) in message and "which no git work tree holds" in message
    assert "name this configuration with `--config .kubelint-ports.yaml`" in message
    assert "name the chart on the command line" not in message
    # What the message advises works: named, the same file reaches the chart.
    result = lint("..", "--config", ".kubelint-ports.yaml")
    assert result.exit_code == 1 and "nodePort 9090" in result.output, result.output


@pytest.mark.parametrize("key", ["paths", "nodes", "baseline"])
def test_a_walked_up_configurations_other_paths_stay_in_its_directory(project, monkeypatch, key):
    (project / "secret.yaml").write_text("s3cr3t: true\n")
    value = '"../secret.yaml"' if key == "baseline" else "[../secret.yaml]"
    (project / "cfg" / ".kubelint-ports.yaml").write_text(f"{key}: {value}\n")
    monkeypatch.chdir(project / "cfg")
    with pytest.raises(ConfigError) as raised:
        resolve(CommandLine(paths=() if key == "paths" else (".",)))
    assert raised.value.line == 1 and "`--config .kubelint-ports.yaml`" in raised.value.message
    assert raised.value.message.startswith(f"{key}{'' if key == 'baseline' else '.0'}: '../secret.yaml' is outside")


# --- inside a git work tree: the repository is the root, named or not ------------------------------

@pytest.mark.parametrize("named", [True, False])
def test_in_a_repository_a_chart_outside_it_is_refused(repository, monkeypatch, named):
    config = repository / "cfg" / ("kubelint.yaml" if named else ".kubelint-ports.yaml")
    config.write_text(CHART_ENTRY.replace("../charts", "../../charts"))  # from cfg/, out of the repository
    if not named:
        monkeypatch.chdir(repository / "cfg")
    with pytest.raises(ConfigError) as raised:
        resolve(CommandLine(config="cfg/kubelint.yaml" if named else None, paths=("k8s",) if named else (".",)))
    assert raised.value.line == 2
    assert raised.value.message.startswith(
        f"charts.0.path: '../../charts/web' is outside the repository ({repository.resolve()})")


def test_in_a_repository_a_named_configuration_reaches_within_it(repository):
    """`../` that stays in the work tree is fine: the root is the repository, not the file's directory."""
    web = chart(repository)
    (repository / "cfg" / "kubelint.yaml").write_text(CHART_ENTRY)
    [(path, _)] = resolve(CommandLine(config="cfg/kubelint.yaml", paths=("k8s",))).options.chart_helm
    assert path == str(web)


def test_a_refused_chart_entry_advises_what_can_be_done(repository):
    """A `charts:` entry carries values, release and namespace: the message says how to give them
    on the command line, and that is a run that works."""
    (repository / "cfg" / "kubelint.yaml").write_text(CHART_ENTRY.replace("../charts", "../../charts"))
    result = lint("--config", "cfg/kubelint.yaml")
    assert result.exit_code == 2
    assert ("cfg/kubelint.yaml:2: charts.0.path: '../../charts/web' is outside the repository "
            f"({repository.resolve()}): paths a configuration file names stay inside its git work tree; to read it "
            "anyway, move the chart into the repository, or name it on the command line with its options as "
            "--values, --set, --release-name and --namespace (which then apply to every chart of the run)"
            ) in result.output
    advised = lint("../charts/web", "--values", "../charts/web/values-prod.yaml", "--release-name", "web",
                   "--namespace", "prod")
    assert advised.exit_code == 1 and "nodePort 9090" in advised.output, advised.output


def test_a_refused_values_file_of_a_chart_entry_says_what_passing_it_does(repository):
    chart(repository)
    (repository / "cfg" / "kubelint.yaml").write_text(
        "charts:\n  - path: ../charts/web\n    values: [../../charts/web/values-prod.yaml]\n")
    with pytest.raises(ConfigError) as raised:
        resolve(CommandLine(config="cfg/kubelint.yaml", paths=("k8s",)))
    assert raised.value.line == 3
    assert raised.value.message.endswith(
        "to read it anyway, move the values file into the repository, or pass it with --values (which then "
        "replaces the `values:` of every chart of the run)")
