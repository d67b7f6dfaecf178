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


def run(arguments: list[str], seed: str, cwd: Path, out: Path) -> dict[str, bytes]:
    """One lint run writing every format at once (`--report FORMAT:FILE`): format -> its bytes."""
    out.mkdir(parents=True)
    reports = [option for name in FORMATS for option in ("--report", f"{name}:{out / name}")]
    environment = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run([sys.executable, "-m", "kubelint_ports", "lint", *arguments, *reports], cwd=cwd,
                          env=environment, capture_output=True, timeout=300)
    assert done.returncode == 1, done.stderr  # the examples hold errors on purpose
    return {name: (out / name).read_bytes() for name in FORMATS}


def comparable(output: bytes, output_format: str) -> bytes:
    """SARIF records the working directory on purpose (`originalUriBaseIds`: %SRCROOT%); the rest
    must not move."""
    if output_format != "sarif":
        return output
    log = json.loads(output)
    for sarif_run in log["runs"]:
        sarif_run.pop("originalUriBaseIds", None)
    return json.dumps(log, sort_keys=True).encode()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict[str, bytes]]:
    """The same lint under other hash seeds, file orders and working directories: six processes,
    every format from each (one process per format and case cost 40)."""
    top = tmp_path_factory.mktemp("determinism")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    return {
        "reference": run([*OPTIONS, *FILES], "0", ROOT, top / "reference"),
        "seed 1": run([*OPTIONS, *FILES], "1", ROOT, top / "seed-1"),
        "seed 4242": run([*OPTIONS, *FILES], "4242", ROOT, top / "seed-4242"),
        "reversed": run([*OPTIONS, *reversed(FILES)], "7", ROOT, top / "reversed"),
        "subdirectory": run([*OPTIONS, *reversed(FILES)], "5", ROOT / "docs", top / "subdirectory"),
        "elsewhere": run([*OPTIONS, *FILES], "3", elsewhere, top / "elsewhere"),
    }


@pytest.mark.parametrize("output_format", FORMATS)
def test_hash_seeds_argument_orders_and_directories_do_not_change_the_output(output_format, runs):
    reference = runs["reference"][output_format]
    assert reference
    for seed in ("seed 1", "seed 4242"):
        assert runs[seed][output_format] == reference, seed
    assert runs["reversed"][output_format] == reference, "files in another order"
    from_subdirectory = comparable(runs["subdirectory"][output_format], output_format)
    if output_format in REPOSITORY_RELATIVE:
        # Code-scanning formats name files relative to the repository root, from anywhere inside it.
        assert from_subdirectory == comparable(reference, output_format), "run from a subdirectory"
    else:
        # Text and JSON show the paths as given (absolute here, from outside the working directory):
        # the same bytes from two other directories.
        assert from_subdirectory == comparable(runs["elsewhere"][output_format], output_format)
