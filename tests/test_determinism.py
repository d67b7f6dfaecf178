"""Byte-identical output across hash seeds, argument orders and working directories, in every
format, on the bundled examples (every rule fires there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
FORMATS = ("text", "json", "sarif", "github", "markdown", "junit", "gitlab", "html")
REPOSITORY_RELATIVE = frozenset(("sarif", "github", "markdown", "junit", "gitlab"))
OPTIONS = ["--nodes", str(EXAMPLES / "inventory" / "nodes.yaml"), "--policies", str(EXAMPLES / "policies"),
           "--no-color"]
FILES = sorted(str(path) for path in EXAMPLES.rglob("*.yaml")
               if "inventory" not in path.parts and "policies" not in path.parts)


def run(arguments: list[str], seed: str, cwd: Path) -> bytes:
    environment = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run([sys.executable, "-m", "kubelint_ports", "lint", *arguments], cwd=cwd, env=environment,
                          capture_output=True, timeout=300)
    assert done.returncode == 1, done.stderr  # the examples hold errors on purpose
    return done.stdout


def comparable(output: bytes, output_format: str) -> bytes:
    """SARIF records the working directory on purpose (`originalUriBaseIds`: %SRCROOT%); the rest
    must not move."""
    if output_format != "sarif":
        return output
    log = json.loads(output)
    for sarif_run in log["runs"]:
        sarif_run.pop("originalUriBaseIds", None)
    return json.dumps(log, sort_keys=True).encode()


@pytest.mark.parametrize("output_format", FORMATS)
def test_hash_seeds_argument_orders_and_directories_do_not_change_the_output(output_format, tmp_path):
    given = [*OPTIONS, "--format", output_format]
    reference = run([*given, *FILES], "0", ROOT)
    assert reference
    for seed in ("1", "4242"):
        assert run([*given, *FILES], seed, ROOT) == reference, f"PYTHONHASHSEED={seed}"
    assert run([*given, *reversed(FILES)], "7", ROOT) == reference, "files in another order"
    from_subdirectory = comparable(run([*given, *reversed(FILES)], "5", ROOT / "docs"), output_format)
    if output_format in REPOSITORY_RELATIVE:
        # Code-scanning formats name files relative to the repository root, from anywhere inside it.
        assert from_subdirectory == comparable(reference, output_format), "run from a subdirectory"
    else:
        # Text and JSON show the paths as given (absolute here, from outside the working directory):
        # the same bytes from two other directories.
        assert from_subdirectory == comparable(run([*given, *FILES], "3", tmp_path), output_format)
