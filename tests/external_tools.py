"""Tools and schemas that tests take from outside the repository: the project's shared/ folder,
the SARIF multitool (npm) and the JUnit XSD (inside pytest's source distribution, PyPI). Each is
fetched once with its registry's own client into a cache directory. Missing, a test is skipped
with the reason; under CI (CI=true) it fails instead, so CI never passes by skipping them."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("KUBELINT_TOOL_CACHE", Path.home() / ".cache" / "kubelint-ports"))
MULTITOOL_VERSION = "5.7.0"
# The Jenkins xunit plugin's JUnit schema (MIT, Gregory Boissinot), as pytest ships it to test its
# own JUnit XML: https://github.com/jenkinsci/xunit-plugin
# (src/main/resources/org/jenkinsci/plugins/xunit/types/model/xsd/junit-10.xsd).
JUNIT_XSD_PACKAGE = "pytest==9.2.0"
JUNIT_XSD_MEMBER = "pytest-9.2.0/testing/example_scripts/junit-10.xsd"
JUNIT_XSD_SHA256 = "a1a816f58d1bf95ebabf371994df0b9246dee66ea9572fbec4f9296f1b2c0ff6"


def unavailable(reason: str):
    """Skip here; fail under CI, where .ci/run provides every tool."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI must provide it: see .ci/run)")
    pytest.skip(reason)


def shared_file(relative: str) -> Path:
    """A file of the project's shared/ folder, which sits beside the checkout (CI, main) or a few
    levels up (a worktree)."""
    for directory in ROOT.parents:
        if (directory / "shared" / relative).is_file():
            return directory / "shared" / relative
    unavailable(f"shared/{relative} not found beside the checkout")


def sarif_multitool() -> tuple[Path, Path]:
    """The SARIF multitool and GitHub's rule configuration for it."""
    rules = shared_file("tools/sarif-multitool-github-rules.xml")
    npm = shutil.which("npm")
    if npm is None:
        unavailable("npm is not installed: the SARIF multitool check needs it")
    cache = CACHE / f"sarif-multitool-{MULTITOOL_VERSION}"
    tool = cache / "node_modules" / ".bin" / "sarif-multitool"
    if not tool.exists():
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund",
                               f"@microsoft/sarif-multitool@{MULTITOOL_VERSION}"],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not tool.exists():
            unavailable(f"could not install @microsoft/sarif-multitool@{MULTITOOL_VERSION}: {done.stderr[-500:]}")
    return tool, rules


def junit_schema() -> Path:
    """junit-10.xsd, checked against its known digest."""
    target = CACHE / "junit-xsd" / "junit-10.xsd"
    if not target.exists():
        download = CACHE / "junit-xsd" / "sdist"
        download.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                               "--dest", str(download), JUNIT_XSD_PACKAGE], capture_output=True, text=True, timeout=600)
        archives = sorted(download.glob("pytest-*.tar.gz"))
        if done.returncode != 0 or not archives:
            unavailable(f"could not download {JUNIT_XSD_PACKAGE} for its JUnit schema: {done.stderr[-500:]}")
        with tarfile.open(archives[0]) as archive:
            member = archive.extractfile(JUNIT_XSD_MEMBER)
            if member is None:
                unavailable(f"{archives[0].name} holds no {JUNIT_XSD_MEMBER}")
            target.write_bytes(member.read())
    if hashlib.sha256(target.read_bytes()).hexdigest() != JUNIT_XSD_SHA256:
        target.unlink()
        unavailable("the downloaded JUnit schema is not the expected file")
    return target
