"""The built-in policies as data: `policies/*.yaml` (in a wheel, `kubelint_ports/_policies`), read
through their index. No project imports: the registry of checks (`checks`) reads where each check
lives from here, and `policies` makes `Policy` records of the same data, so neither imports the
other.

The built-in policies' data is one JSON document beside them, written by `python -m
kubelint_ports.docs` (`policies.write_policy_index`): every run reads the policies, and parsing
40-odd YAML files was a tenth of a `lint` of one small file. Each entry holds its file's size and
CRC32: a file that is not the one indexed (edited since) is read from its YAML, so the index can
make a run slower when it is stale, never different (tests/test_startup.py keeps it fresh).
"""

from __future__ import annotations

import json
import zlib
from functools import cache
from pathlib import Path
from typing import Any

import yaml

PACKAGE_DIR = Path(__file__).resolve().parent
INDEX = "index.json"
INDEX_VERSION = 1
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def builtin_policy_dir() -> Path:
    """Inside a wheel the policies ship as `kubelint_ports/_policies`; in a checkout they are top-level."""
    shipped = PACKAGE_DIR / "_policies"
    return shipped if shipped.is_dir() else PACKAGE_DIR.parent / "policies"


def read_index(directory: Path) -> dict[str, dict[str, Any]]:
    """The index's entries by file name; none when it is missing or not one this version wrote."""
    try:
        index = json.loads((directory / INDEX).read_text(encoding="utf-8"))
        return {entry["name"]: entry for entry in index["policies"]} if index["version"] == INDEX_VERSION else {}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def shipped_data(path: Path) -> Any:
    """A built-in policy file's data, read as it is (the tests check every one of them)."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)


def indexed_data(path: Path, indexed: dict[str, dict[str, Any]]) -> Any:
    """A built-in policy's data: the index's when the file is the one indexed, else read from it."""
    entry = indexed.get(path.name)
    if entry is not None:
        try:
            raw = path.read_bytes()
        except OSError:
            raw = None
        if raw is not None and entry.get("size") == len(raw) and entry.get("crc32") == zlib.crc32(raw):
            return entry["data"]
    return shipped_data(path)


@cache
def builtin_policy_data() -> tuple[tuple[Path, Any], ...]:
    """(file, data) of every built-in policy, in file-name order."""
    directory = builtin_policy_dir()
    indexed = read_index(directory)
    return tuple((path, indexed_data(path, indexed)) for path in sorted(directory.glob("*.y*ml")))
