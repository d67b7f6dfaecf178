"""`kubectl get pods -A -o wide` (text) -> which pod runs on which node with which IP.

Columns: [NAMESPACE] NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES; the
header names them, so the columns are found by the header's words. RESTARTS may read
`2 (3h ago)`, which shifts the later columns: they are counted from the right.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubelint_ports.loading.snapshot.text import excerpt
from kubelint_ports.vocabulary import Diagnostic, Location


@dataclass(frozen=True, slots=True)
class PodRow:
    line: int
    namespace: str
    name: str
    status: str
    ip: str
    node: str


def is_pods_wide(text: str) -> bool:
    first = text.lstrip().split("\n", 1)[0].split()
    return first[:1] in (["NAME"], ["NAMESPACE"]) and "IP" in first and "NODE" in first


def read_pods_wide(text: str, path: str, default_namespace: str = "default") -> tuple[list[PodRow], list[Diagnostic]]:
    lines = text.splitlines()
    header_index = next(i for i, line in enumerate(lines) if line.strip())
    header = lines[header_index].split()
    has_namespace = header[0] == "NAMESPACE"
    # NOMINATED NODE and READINESS GATES are two-word headers of one-word columns
    from_right = 1 + ("NOMINATED" in header) + ("READINESS" in header)
    rows = []
    for number, line in enumerate(lines[header_index + 1:], start=header_index + 2):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 7:
            return rows, [Diagnostic(Location(path, number, 1),
                                     f"not a row of `kubectl get pods -o wide`: {excerpt(line)}")]
        namespace = fields[0] if has_namespace else default_namespace
        name = fields[1] if has_namespace else fields[0]
        status = fields[3] if has_namespace else fields[2]
        node, ip = fields[-from_right], fields[-from_right - 1]
        rows.append(PodRow(number, namespace, name, status, ip, node))
    return rows, []
