"""What `--fix` promises (docs/fix.md, "What --fix promises"), as properties over every fixable
fixture and as reproducers of the cases that broke them: `--diff` is what `--fix` writes and
applies with `git apply` and `patch -p1`; a second `--fix` writes nothing; a run writes every
file or none; no written text is corrupt; nothing outside the run's root is written."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubelint_ports.cli import app
from kubelint_ports.fixes import FIXES
from kubelint_ports.loading.helm.charts import in_process_engine

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def fixable_fixtures() -> list[Path]:
    """Every fail fixture of a rule with a fix, the one-file fix fixtures, the examples."""
    found = [path for rule in sorted(FIXES) for path in sorted((ROOT / "tests" / "policies" / rule).glob("fail-*.yaml"))]
    examples = [path for path in sorted((ROOT / "examples").glob("*.yaml")) if not path.name.startswith(".")]
    return found + sorted((ROOT / "tests" / "fix").glob("*/*.yaml")) + examples


# Trees whose fixes edit several files: (what to copy, what to lint in the copy).
TREES = {"chart": ("tests/fix/charts/shop", "shop"), "kustomize": ("tests/fix/kustomize", "kustomize/overlays")}
needs_engine = pytest.mark.skipif(in_process_engine() is None and shutil.which("helm") is None,
                                  reason="no Helm engine (helm-python-sdk) nor `helm` binary here")
# The trees as parameters: a chart needs a Helm engine; without one its lint is an input error,
# nothing is fixed, and every check of its fixes would pass on nothing.
TREE_CASES = [pytest.param(tree, marks=needs_engine if (ROOT / source / "Chart.yaml").is_file() else ())
              for tree, (source, _) in sorted(TREES.items())]


def lint(*args: str):
    return runner.invoke(app, ["lint", *args])


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(path.relative_to(directory)): path.read_bytes()
            for path in sorted(directory.rglob("*")) if path.is_file() and ".git" not in path.parts}


def count_of(output: str, verb: str) -> int:
    line = next(line for line in output.splitlines() if line.startswith(f"kubelint-ports: {verb} "))
    return int(line.split()[2 + (verb == "would fix")])


def copies(tmp_path: Path, place) -> tuple[Path, Path, Path]:
    """Three copies of the case (each a git repository, the run's root): for `git apply`,
    `patch -p1` and `--fix`."""
    made = []
    for name in ("git-apply", "patch", "fix"):
        directory = tmp_path / name
        directory.mkdir()
        (directory / ".git").mkdir()
        place(directory)
        made.append(directory)
    return tuple(made)


def assert_diff_is_what_fix_writes_and_fix_converges(tmp_path, monkeypatch, place, target: str, *options: str):
    by_git, by_patch, by_fix = copies(tmp_path, place)
    monkeypatch.chdir(by_git)
    shown = lint("--diff", *options, target)
    before = snapshot(by_git)
    patch = shown.stdout_bytes  # `stdout` would turn a CRLF file's line ends into LF
    if patch:
        assert "apply with `git apply` (or `patch -p1`) in ." in shown.stderr
        subprocess.run(["git", "apply", "--unsafe-paths", "-"], input=patch, cwd=by_git, check=True)
        subprocess.run(["patch", "-p1", "-s", "--no-backup-if-mismatch"], input=patch, cwd=by_patch,
                       check=True)
    monkeypatch.chdir(by_fix)
    fixed = lint("--fix", *options, target)
    assert "error: cannot" not in fixed.stderr and fixed.exit_code != 3, fixed.output
    assert snapshot(by_fix) == snapshot(by_git) == snapshot(by_patch), f"--diff is not what --fix wrote: {fixed.output}"
    assert count_of(shown.stderr, "would fix") == count_of(fixed.stderr, "fixed")
    assert (snapshot(by_fix) != before) == bool(patch)
    again = lint("--fix", *options, target)
    assert snapshot(by_fix) == snapshot(by_git), f"a second --fix changed the files: {again.output}"
    assert "fixed 0 findings in 0 files" in again.stderr


@pytest.mark.slow
@pytest.mark.parametrize("options", [(), ("--unsafe-fixes",)], ids=["safe", "unsafe"])
@pytest.mark.parametrize("source", fixable_fixtures(), ids=lambda path: f"{path.parent.name}/{path.name}")
def test_diff_is_what_fix_writes_and_a_second_fix_writes_nothing(source, options, tmp_path, monkeypatch):
    def place(directory: Path) -> None:
        shutil.copyfile(source, directory / source.name)

    assert_diff_is_what_fix_writes_and_fix_converges(tmp_path, monkeypatch, place, source.name, *options)


@pytest.mark.slow
@pytest.mark.parametrize("options", [(), ("--unsafe-fixes",)], ids=["safe", "unsafe"])
@pytest.mark.parametrize("tree", TREE_CASES)
def test_diff_is_what_fix_writes_for_charts_and_kustomizations(tree, options, tmp_path, monkeypatch):
    source, target = TREES[tree]

    def place(directory: Path) -> None:
        shutil.copytree(ROOT / source, directory / Path(target).parts[0])

    assert_diff_is_what_fix_writes_and_fix_converges(tmp_path, monkeypatch, place, target, *options)


# A fuzz input (tests/fuzzing_fix.py) whose fixes did not settle in the four passes `--fix` made.
FUZZ_UNSETTLED = Path("/tmp/hf/fail-strict-11-18976.yaml")


def test_fixes_that_do_not_settle_are_withdrawn_and_a_second_fix_writes_nothing(tmp_path, monkeypatch):
    text = FUZZ_UNSETTLED.read_bytes() if FUZZ_UNSETTLED.exists() else DUPLICATES.encode()
    (tmp_path / "m.yaml").write_bytes(text)
    monkeypatch.chdir(tmp_path)
    first = lint("--fix", "--unsafe-fixes", "m.yaml")
    written = (tmp_path / "m.yaml").read_bytes()
    second = lint("--fix", "--unsafe-fixes", "m.yaml")
    assert (tmp_path / "m.yaml").read_bytes() == written, second.output
    assert "fixed 0 findings in 0 files" in second.stderr, first.output


# Six identical Service ports: each pass removes one repeat (the round trip of the others would
# also change the last one's line), so four passes are not enough.
DUPLICATES = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports:\n" + "  - port: 80\n" * 6


def test_a_fix_whose_finding_stays_is_withdrawn(tmp_path, monkeypatch):
    """The lint after a fix still reports its finding (here: the next lint reads the file as it
    was, as when a fix moves a self-colliding port to another that collides again): the fix is
    withdrawn with the reason, and nothing is written."""
    from kubelint_ports.engine import lint_paths
    from kubelint_ports.fixes.apply import Planner
    from kubelint_ports.loading import files

    (tmp_path / "m.yaml").write_text(QUOTED)
    monkeypatch.chdir(tmp_path)

    def stale_relint():
        planned = dict(files.PLANNED)
        files.PLANNED.clear()
        try:
            return lint_paths(["m.yaml"])
        finally:
            files.PLANNED.update(planned)

    plan = Planner(stale_relint, unsafe=False, roots=(str(tmp_path.resolve()),)).plan(lint_paths(["m.yaml"]))
    assert plan.changes == []
    reasons = {finding.fix.blocked for finding in plan.report.findings if finding.fix is not None}
    assert reasons == {"the finding is still there once its fix is made: a further --fix would change the file again"}


QUOTED = """\
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports:
    - port: 80
      targetPort: "8080"
"""

# --- all or nothing, on disk ---------------------------------------------------------------------


def big_quoted_file(size: int = 15_724) -> str:
    """A Service with a quoted port (KP001's safe fix) after enough comment lines to make `size` bytes."""
    padding = "# " + "x" * 76 + "\n"
    return padding * ((size - len(QUOTED)) // len(padding)) + QUOTED


def test_a_write_cut_short_leaves_the_original_whole(tmp_path):
    original = big_quoted_file()
    (tmp_path / "m.yaml").write_text(original)

    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (8 * 1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    done = subprocess.run([sys.executable, "-m", "kubelint_ports", "lint", "--fix", "m.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, preexec_fn=limit_file_size)
    assert done.returncode == 2, done.stderr
    assert "m.yaml" in done.stderr and "nothing was written" in done.stderr
    assert (tmp_path / "m.yaml").read_text() == original
    assert sorted(path.name for path in tmp_path.iterdir()) == ["m.yaml"]  # no temporary file left


def test_one_file_that_cannot_be_written_leaves_every_file_as_it_was(tmp_path, monkeypatch):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "m.yaml").write_text(QUOTED)
    monkeypatch.chdir(tmp_path)
    from kubelint_ports.fixes import write

    real_open = os.open

    def refuse_in_b(path, flags, *args):
        if flags & os.O_CREAT and os.path.basename(os.path.dirname(path)) == "b":
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(write.os, "open", refuse_in_b)
    result = lint("--fix", "a", "b")
    assert result.exit_code == 2
    assert "cannot write b/m.yaml" in result.stderr and "nothing was written" in result.stderr
    assert (tmp_path / "a" / "m.yaml").read_text() == (tmp_path / "b" / "m.yaml").read_text() == QUOTED
    assert sorted(path.name for path in (tmp_path / "a").iterdir()) == ["m.yaml"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_directory_leaves_every_file_as_it_was(tmp_path, monkeypatch):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "m.yaml").write_text(QUOTED)
    (tmp_path / "b").chmod(0o555)
    monkeypatch.chdir(tmp_path)
    try:
        result = lint("--fix", "a", "b")
    finally:
        (tmp_path / "b").chmod(0o755)
    assert result.exit_code == 2
    assert (tmp_path / "a" / "m.yaml").read_text() == (tmp_path / "b" / "m.yaml").read_text() == QUOTED


def test_fix_keeps_the_files_mode_and_writes_through_a_symlink_inside_the_root(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "real.yaml").write_text(QUOTED)
    (tmp_path / "real.yaml").chmod(0o640)
    (tmp_path / "link.yaml").symlink_to("real.yaml")
    monkeypatch.chdir(tmp_path)
    result = lint("--fix", "link.yaml")
    assert "fixed 1 finding in 1 file" in result.stderr
    assert (tmp_path / "link.yaml").is_symlink()
    assert (tmp_path / "real.yaml").read_text() == QUOTED.replace('"8080"', "8080")
    assert (tmp_path / "real.yaml").stat().st_mode & 0o777 == 0o640


def test_a_symlink_to_a_file_outside_the_root_is_not_written_through(tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "real.yaml").write_text(QUOTED)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "link.yaml").symlink_to("../elsewhere/real.yaml")
    monkeypatch.chdir(tmp_path)
    result = lint("--fix", "project/link.yaml")
    assert (tmp_path / "elsewhere" / "real.yaml").read_text() == QUOTED
    assert "fix not applied" in result.stderr and "outside" in result.stderr


# --- never corrupts -----------------------------------------------------------------------------

FLOW = "{apiVersion: v1, kind: Service, metadata: {name: a}, spec: {ports: [{port: 80, protocol: TCP}, {port: 80, protocol: TCP}]}}"
FLOW_VARIANTS = {
    "after-marker": f"--- {FLOW}\n",
    "after-marker-no-newline": f"--- {FLOW}",
    "after-tagged-marker": f"--- !!map {FLOW}\n",
    "after-marker-commented": f"# head\n--- {FLOW}   # trailing\n",
    "after-marker-crlf": f"--- {FLOW}\r\n",
    "after-marker-bom": f"\ufeff--- {FLOW}\n",
    "second-document": f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\n--- {FLOW}\n",
    "before-another-document": f"--- {FLOW}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\n",
    "with-directive": f"%YAML 1.1\n--- {FLOW}\n",
    "nested-flow-sequences": "--- {apiVersion: v1, kind: Service, metadata: {name: a}, spec: {ports: "
                             "[{port: 80, name: [a]}, {port: 80, name: [a]}]}}\n",
    "multi-line": "--- {apiVersion: v1, kind: Service, metadata: {name: a},\n"
                  "  spec: {ports: [{port: 80}, {port: 80}]}}\n",
    "document-end": f"--- {FLOW}\n...\n",
    "one-key-entries": "--- {apiVersion: v1, kind: Service, metadata: {name: a}, spec: {ports: [{port: 80}, {port: 80}]}}\n",
}


@pytest.mark.parametrize("name", sorted(FLOW_VARIANTS))
def test_a_flow_mapping_after_the_document_marker_stays_a_document(name, tmp_path, monkeypatch):
    text = FLOW_VARIANTS[name].encode("utf-8")

    def place(directory: Path) -> None:
        (directory / "m.yaml").write_bytes(text)

    assert_diff_is_what_fix_writes_and_fix_converges(tmp_path, monkeypatch, place, "m.yaml")
    written = (tmp_path / "fix" / "m.yaml").read_bytes()
    documents = list(yaml.compose_all(written.decode("utf-8-sig")))
    assert len(documents) == len(list(yaml.compose_all(text.decode("utf-8-sig"))))
    assert written.startswith(text[:text.index(b"{")]), "the text before the flow mapping changed"


def test_a_text_that_would_not_compose_is_withdrawn():
    from kubelint_ports.fixes.apply import corruption

    old = f"--- {FLOW}\n"
    assert corruption(old, old.replace("--- ", "", 1), ()) is None  # one document still: PyYAML reads it
    assert "would not read as YAML" in corruption(old, old.replace("]}}", "]}"), ())
    assert "2 YAML documents instead of 1" in corruption(old, old + "---\na: 1\n", ())
    assert "outside the fix" in corruption("a: 1\nb: 2\n", "a: 3\nb: 4\n", ((3, 4, "3"),))
    assert "document 2, which no fix edits" in corruption("a: 1\n---\nb: 2\n", "a: 1\n---\nb: 3\n", ())


# --- the root, and where the diff applies ---------------------------------------------------------


def test_nothing_outside_the_named_directories_is_written_without_a_repository(tmp_path, monkeypatch):
    if not (shutil.which("kustomize") or shutil.which("kubectl")):
        pytest.skip("no kustomize")
    (tmp_path / "victim" / "base").mkdir(parents=True)
    (tmp_path / "victim" / "base" / "kustomization.yaml").write_text("resources: [service.yaml]\n")
    service = ("apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  type: NodePort\n"
               "  ports:\n    - port: 80\n      nodePort: 9999\n")
    (tmp_path / "victim" / "base" / "service.yaml").write_text(service)
    (tmp_path / "untrusted" / "overlay").mkdir(parents=True)
    (tmp_path / "untrusted" / "overlay" / "kustomization.yaml").write_text("resources: [../../victim/base]\n")
    monkeypatch.chdir(tmp_path)
    shown = lint("--diff", "--unsafe-fixes", "untrusted/overlay")
    result = lint("--fix", "--unsafe-fixes", "untrusted/overlay")
    assert (tmp_path / "victim" / "base" / "service.yaml").read_text() == service
    assert shown.stdout == ""
    assert "victim/base/service.yaml is outside" in result.stderr and "fix not applied" in result.stderr


def test_the_diff_applies_at_the_repository_top_for_inputs_named_with_dots_or_absolute(tmp_path, monkeypatch):
    repository = tmp_path / "repo"
    (repository / ".git").mkdir(parents=True)
    (repository / "deploy").mkdir()
    (repository / "tools").mkdir()
    (repository / "deploy" / "m.yaml").write_text(QUOTED)
    monkeypatch.chdir(repository / "tools")
    for named in ("../deploy/m.yaml", str(repository / "deploy" / "m.yaml")):
        shown = lint("--diff", named)
        assert shown.stdout.startswith("--- a/deploy/m.yaml\n+++ b/deploy/m.yaml\n"), shown.stdout
        assert f"apply with `git apply` (or `patch -p1`) in {repository}" in shown.stderr \
            or "apply with `git apply` (or `patch -p1`) in .." in shown.stderr
        check = subprocess.run(["git", "apply", "--check", "-"], input=shown.stdout.encode(), cwd=repository,
                               capture_output=True)
        assert check.returncode == 0, check.stderr


def test_a_hunk_at_line_one_of_a_bom_file_keeps_the_bom(tmp_path, monkeypatch):
    text = b"\xef\xbb\xbf" + QUOTED.replace("    - port: 80\n", "").replace(
        "apiVersion: v1\n", "apiVersion: v1\n", 1).encode()
    short = b"\xef\xbb\xbfapiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: \"80\"}]}\n"

    for content in (text, short):
        def place(directory: Path, content=content) -> None:
            (directory / "m.yaml").write_bytes(content)

        case = tmp_path / str(len(content))
        case.mkdir()
        assert_diff_is_what_fix_writes_and_fix_converges(case, monkeypatch, place, "m.yaml")
        assert (case / "fix" / "m.yaml").read_bytes().startswith(b"\xef\xbb\xbf")
