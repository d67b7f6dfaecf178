"""Tools and data that tests need from outside Python.

Data (the SARIF 2.1.0 schema, the multitool's GitHub rules, the JUnit XSD) is vendored under
tests/vendor/ (SOURCES.md says where each file comes from) and checked by digest: a clone needs
nothing beside it. System tools (iptables, chromium, npm, ...) come from the machine: missing, a test
is skipped with the reason and the Debian package that provides it; under CI (CI=true) it fails
instead, so CI never passes by skipping them. The SARIF multitool is installed once with npm into
a cache directory."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENDOR = Path(__file__).resolve().parent / "vendor"
CACHE = Path(os.environ.get("KUBELINT_TOOL_CACHE", Path.home() / ".cache" / "kubelint-ports"))
MULTITOOL_VERSION = "5.7.0"
VENDORED_SHA256 = {
    "sarif-schema-2.1.0.json": "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e",
    "sarif-multitool-github-rules.xml": "b600ba9cfd974711b7683eb0f1a9f9de08e2311beb14e4604d1c76a3e58fd5d5",
    "junit-10.xsd": "a1a816f58d1bf95ebabf371994df0b9246dee66ea9572fbec4f9296f1b2c0ff6",
}
# Where Debian installs administrator tools: on root's PATH, often not on a user's or a CI job's.
SYSTEM_BIN_DIRECTORIES = ("/usr/sbin", "/sbin", "/usr/local/sbin")


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def unavailable(reason: str):
    """Skip here; fail under CI, where .ci/run provides every tool."""
    if in_ci():
        pytest.fail(f"{reason} (CI must provide it: see .ci/run)")
    pytest.skip(reason)


def install_command(package: str) -> str:
    """How to install `package`: a Debian package's name ("conntrack") is an apt-get command; a tool
    Debian does not ship is given as its own instruction ("pip install '.[helm]'", "see <URL>")."""
    return package if " " in package else f"apt-get install {package}"


def not_installed(tool: str, package: str) -> str:
    return f"`{tool}` is not installed: {install_command(package)}"


def missing_tool_reason(tool: str, package: str) -> str | None:
    """Why `tool` cannot be run, naming the package to install, or None when it is on PATH.

    "not on PATH" is said only when that is the cause: the tool is installed in a system
    directory that this PATH lacks."""
    if shutil.which(tool):
        return None
    for directory in SYSTEM_BIN_DIRECTORIES:
        candidate = Path(directory) / tool
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return f"`{tool}` is installed in {directory} but {directory} is not on PATH (PATH={os.environ.get('PATH', '')})"
    return not_installed(tool, package)


def needs(who: str, missing: list[tuple[str, str, str]]) -> str:
    """One sentence for the missing tools ((tool, Debian package, missing_tool_reason) each):
    "the datapath lab needs `conntrack`, which is not installed: apt-get install conntrack". The
    Debian tools that are not installed share one apt-get command; another says its own install
    instruction; a tool off PATH says where it is."""
    absent = [(tool, package) for tool, package, reason in missing
              if reason == not_installed(tool, package) and " " not in package]  # Debian's: one apt-get
    parts = []
    if absent:
        names = [f"`{tool}`" for tool, _ in absent]
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        packages = " ".join(dict.fromkeys(package for _, package in absent))
        parts.append(f"{listed}, which {'is' if len(absent) == 1 else 'are'} not installed: apt-get install {packages}")
    for tool, package, reason in missing:
        if (tool, package) not in absent:
            lead = f"`{tool}` "
            parts.append(f"`{tool}`, which {reason[len(lead):]}" if reason.startswith(lead) else f"`{tool}` ({reason})")
    return f"{who} needs {'; and '.join(parts)}"


def missing_tools_reason(*tools: tuple[str, str], who: str = "this test") -> str | None:
    """Why `who` cannot run for want of some of `tools` ((tool, Debian package) each), or None."""
    missing = [(tool, package, reason) for tool, package in tools if (reason := missing_tool_reason(tool, package))]
    return needs(who, missing) if missing else None


def require_tools(*tools: tuple[str, str], who: str = "this test") -> None:
    """Skip (or fail under CI) unless every (tool, Debian package) is on PATH."""
    reason = missing_tools_reason(*tools, who=who)
    if reason:
        unavailable(reason)


def vendored(name: str) -> Path:
    """A file of tests/vendor/, checked against its recorded digest."""
    path = VENDOR / name
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == VENDORED_SHA256[name], f"tests/vendor/{name} changed: see tests/vendor/SOURCES.md"
    return path


def sarif_multitool() -> tuple[Path, Path]:
    """The SARIF multitool and GitHub's rule configuration for it."""
    rules = vendored("sarif-multitool-github-rules.xml")
    require_tools(("npm", "npm"), who="installing the SARIF multitool")
    npm = shutil.which("npm")
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
    """junit-10.xsd, vendored."""
    return vendored("junit-10.xsd")
