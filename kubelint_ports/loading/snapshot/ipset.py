"""`ipset list` (or `ipset save`) -> sets and their members, each member at its line.

kube-proxy in IPVS mode keeps `KUBE-CLUSTER-IP` (`ip,port` of every ClusterIP), `KUBE-NODE-PORT-TCP`
/ `-UDP` (nodePorts), `KUBE-LOOP-BACK` and more (pkg/proxy/ipvs/ipset.go).
"""

from __future__ import annotations

from kubelint_ports.findings import Diagnostic, Location
from kubelint_ports.loading.snapshot.records import NamedSet

HEADERS = ("Type:", "Revision:", "Header:", "Size in memory:", "References:", "Number of entries:")


def read_ipset(text: str, path: str) -> tuple[dict[str, NamedSet], list[Diagnostic]]:
    sets: dict[str, NamedSet] = {}
    current: NamedSet | None = None
    in_members = False
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            in_members = False
            continue
        if line.startswith("Name: "):
            current = sets[line[6:].strip()] = NamedSet(line[6:].strip(), number)
            in_members = False
        elif line.startswith("create "):  # `ipset save`
            fields = line.split()
            if len(fields) < 3:
                return sets, [Diagnostic(Location(path, number, 1), f"not an `ipset save` line: {line[:80]!r}")]
            current = sets[fields[1]] = NamedSet(fields[1], number, fields[2])
        elif line.startswith("add "):
            fields = line.split()
            if len(fields) < 3 or fields[1] not in sets:
                return sets, [Diagnostic(Location(path, number, 1), f"member of an undeclared set: {line[:80]!r}")]
            sets[fields[1]].members.append((fields[2], number))
        elif current is not None and line.startswith("Members:"):
            in_members = True
        elif current is not None and in_members:
            current.members.append((line.split()[0], number))
        elif current is not None and line.startswith(HEADERS):
            if line.startswith("Type:"):
                current.kind = line[5:].strip()
        else:
            return sets, [Diagnostic(Location(path, number, 1), f"not a line of `ipset list`: {line[:80]!r}")]
    return sets, []
