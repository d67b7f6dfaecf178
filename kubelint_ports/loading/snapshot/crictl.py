"""`crictl pods -o json` -> pod sandboxes.

crictl prints the CRI `ListPodSandboxResponse` as protobuf JSON (cri-tools `cmd/crictl/sandbox.go`):
`{"items": [{"id", "metadata": {"name", "uid", "namespace", "attempt"}, "state": "SANDBOX_READY",
...}]}`. Each sandbox is placed at the line of its `"id"` value, which the decoder hands over with
the value (`json_text`): however the ID is written (JSON escapes included), no line is searched
for it, so reading stays linear. An item that is not a sandbox is an input error at its line; the
others are still read, so one run lists every bad item (up to MAX_PROBLEMS).
"""

from __future__ import annotations

import json

from kubelint_ports.loading.snapshot import json_text
from kubelint_ports.loading.snapshot.dump_records import Sandbox
from kubelint_ports.loading.snapshot.text import LineTable, excerpt
from kubelint_ports.vocabulary import Diagnostic, Location

STATES = ("SANDBOX_NOTREADY", "SANDBOX_READY")
MAX_PROBLEMS = 20


def read_crictl_pods(text: str, path: str) -> tuple[list[Sandbox], list[Diagnostic]]:
    try:
        data, _ = json_text.document(text, lambda key: json_text.object_item if key == "items" else None)
    except json.JSONDecodeError as error:
        return [], [Diagnostic(Location(path, error.lineno, error.colno),
                               f"invalid JSON from `crictl pods -o json`: {error.msg} (truncated?)")]
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return [], [Diagnostic(Location(path, 1, 1), "`crictl pods -o json` output has no `items` list")]
    lines = LineTable(text)
    sandboxes = []
    problems: list[Diagnostic] = []
    bad = 0
    for position, (item, offset) in enumerate(items):
        line, column = lines.place(offset)
        members, offsets = item if isinstance(item, tuple) else ({}, {})
        problem = sandbox_problem(item, members)
        if problem:
            bad += 1
            if len(problems) < MAX_PROBLEMS:
                problems.append(Diagnostic(Location(path, line, column), f"items[{position}] {problem}"))
            continue
        metadata = members.get("metadata") or {}
        id_line = lines.place(offsets["id"])[0]
        sandboxes.append(Sandbox(id_line, lines.end_column(id_line), members["id"], metadata.get("name", ""),
                                 metadata.get("namespace", ""), members["state"]))
    if bad > len(problems):
        problems.append(Diagnostic(Location(path, 1, 1), f"{bad - len(problems):,} more items that are not pod "
                                                         f"sandboxes (only the first {MAX_PROBLEMS} are listed)"))
    return sandboxes, problems


def sandbox_problem(item: object, members: dict) -> str:
    """Why an item is not a sandbox as crictl prints it; "" when it is one."""
    if not isinstance(item, tuple):
        return "is not a pod sandbox (an object with an `id` and a `state`)"
    if not isinstance(members.get("id"), str) or not members["id"]:
        return "is not a pod sandbox: its `id` is missing or not a string"
    state = members.get("state")
    if not isinstance(state, str) or state not in STATES:
        return (f"is not a pod sandbox: its `state` {excerpt(json.dumps(state))} is not one of "
                f"{', '.join(STATES)}")
    metadata = members.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        return "is not a pod sandbox: its `metadata` is not an object"
    for key in ("name", "namespace"):
        if metadata and not isinstance(metadata.get(key, ""), str):
            return f"is not a pod sandbox: its `metadata.{key}` is not a string"
    return ""
