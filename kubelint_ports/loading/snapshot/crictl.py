"""`crictl pods -o json` -> pod sandboxes.

crictl prints the CRI `ListPodSandboxResponse` as protobuf JSON (cri-tools `cmd/crictl/sandbox.go`):
`{"items": [{"id", "metadata": {"name", "uid", "namespace", "attempt"}, "state": "SANDBOX_READY",
...}]}`. Each sandbox is placed at its `"id"` line, found by scanning the text for the ID.
"""

from __future__ import annotations

import json

from kubelint_ports.findings import Diagnostic, Location
from kubelint_ports.loading.snapshot.records import Sandbox

STATES = frozenset(("SANDBOX_READY", "SANDBOX_NOTREADY"))


def read_crictl_pods(text: str, path: str) -> tuple[list[Sandbox], list[Diagnostic]]:
    try:
        data = json.loads(text)
    except ValueError as error:
        line = getattr(error, "lineno", 1)
        return [], [Diagnostic(Location(path, line, getattr(error, "colno", 1)),
                               f"invalid JSON from `crictl pods -o json`: {getattr(error, 'msg', error)} (truncated?)")]
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return [], [Diagnostic(Location(path, 1, 1), "`crictl pods -o json` output has no `items` list")]
    sandboxes = []
    lines = text.splitlines()
    cursor = 0
    for position, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or item.get("state") not in STATES:
            return sandboxes, [Diagnostic(Location(path, 1, 1), (
                f"items[{position}] is not a pod sandbox (an `id` and a `state` of {', '.join(sorted(STATES))})"))]
        metadata = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
        cursor, line = find_line(lines, f'"{item["id"]}"', cursor)
        sandboxes.append(Sandbox(line, len(lines[line - 1]) + 1 if lines else 1, item["id"],
                                 str(metadata.get("name", "")), str(metadata.get("namespace", "")), item["state"]))
    return sandboxes, []


def find_line(lines: list[str], needle: str, start: int) -> tuple[int, int]:
    """(next index to search from, 1-based line) of the first line from `start` holding `needle`."""
    for index in range(start, len(lines)):
        if needle in lines[index]:
            return index + 1, index + 1
    return start, max(start, 1)
