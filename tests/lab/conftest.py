"""The datapath lab runs where it can (root, network namespaces, iptables with the nf_tables
backend, nftables, the CNI plugins) and is skipped with the reason printed elsewhere. Set
KUBELINT_REQUIRE_LAB=1 (CI does, when it runs as root) to make a missing requirement a failure.
Every test here is marked `lab`: `pytest -m "not lab"` leaves the lab out (README, a first run)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import netlab  # noqa: E402


@pytest.fixture(scope="session")
def lab_ready() -> None:
    reason = netlab.missing_requirements()
    if reason:
        if os.environ.get("KUBELINT_REQUIRE_LAB") == "1":
            pytest.fail(f"KUBELINT_REQUIRE_LAB=1 but {reason}")
        pytest.skip(reason)


LAB = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items) -> None:
    """Mark every test under tests/lab `lab`. A conftest's hook sees the whole session's items,
    so only the ones whose file is under this directory are marked."""
    for item in items:
        if LAB in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.lab)
