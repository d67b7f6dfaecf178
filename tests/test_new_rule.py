"""The way to add a rule cannot rot: `tools/new_rule.py` scaffolds a rule into a copy of the
repository, writes what is generated from it, and the copy's tests pass; a rule is three
hand-written files (docs/architecture.md, "How to add a rule"), and nothing else changes by hand."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # copies the repository and runs its tests: not in the quick subset

ROOT = Path(__file__).resolve().parents[1]
IGNORED = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache", "*.egg-info", "build", "dist",
                                 ".kubelint-ports_cache")


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(path.relative_to(directory)): path.read_bytes() for path in directory.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and ".pytest_cache" not in path.parts}


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory) -> tuple[Path, dict[str, bytes], dict[str, bytes], str]:
    copy = tmp_path_factory.mktemp("repository") / "kubelint-ports"
    shutil.copytree(ROOT, copy, ignore=IGNORED, symlinks=True)
    (copy / ".git").mkdir()  # a repository's top, as a checkout is: SARIF paths are relative to it
    before = snapshot(copy)
    environment = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "tools/new_rule.py", "host-ip-without-host-port", "--id", "KP107",
                           "--summary", "A container port sets hostIP without hostPort, which maps nothing",
                           "--generate"], cwd=copy, env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return copy, before, snapshot(copy), done.stdout


def test_the_scaffold_writes_three_hand_written_files_and_the_rest_is_generated(scaffolded):
    copy, before, after, _ = scaffolded
    added = sorted(set(after) - set(before))
    changed = sorted(name for name in set(after) & set(before) if after[name] != before[name])
    hand_written = ["kubelint_ports/checks/manifest/host_ip_without_host_port.py",
                    "policies/KP107-host-ip-without-host-port.yaml",
                    "tests/policies/KP107/fail-host-ip-without-host-port.yaml",
                    "tests/policies/KP107/pass-host-ip-without-host-port.yaml"]
    generated = ["docs/rules/KP107-host-ip-without-host-port.md", "tests/policies/KP107/expected.txt",
                 "tests/policies/KP107/messages.snap"]
    assert added == sorted([*hand_written, "examples/host-ip-without-host-port.yaml", *generated])
    # regenerated: the indexes, the overview table and the samples whose counts the example changes
    assert set(changed) <= {"docs/rules/README.md", "docs/rules-overview.md", "policies/index.json", "README.md",
                            *(name for name in before if name.startswith("docs/") and name.endswith(".md"))}, changed
    assert {"docs/rules/README.md", "docs/rules-overview.md", "policies/index.json"} <= set(changed)
    assert b"KP107" in after["tests/policies/KP107/expected.txt"]


def test_the_scaffolded_rule_passes_the_copys_tests(scaffolded):
    copy = scaffolded[0]
    environment = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    environment.pop("KUBELINT_UPDATE_GOLDEN", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/test_policies.py",
         "tests/test_docs.py", "tests/test_rules_overview.py", "tests/test_samples.py", "tests/test_architecture.py",
         "tests/test_startup.py::test_the_check_registry_names_every_check_in_its_module", "tests/test_rule_rooms.py",
         "tests/test_cli.py::test_examples_show_every_rule_firing"],
        cwd=copy, env=environment, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "KP107" in (copy / "docs" / "rules-overview.md").read_text()


def test_the_scaffold_refuses_a_taken_id_or_name(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "new_rule.py"), "host-port", "--id", "KP101"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "the id or the name is taken: KP101-host-port.yaml" in done.stderr
