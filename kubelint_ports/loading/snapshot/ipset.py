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
            member = line.split()[0]
            if port_set(current) and not (member.isdigit() and 0 < int(member) <= 65535):
                return sets, [Diagnostic(Location(path, number, line.find(member) + 1), (
                    f"{member[:40]!r} in set {current.name} ({current.kind or 'of ports'}) is not a port in 1-65535"))]
            current.members.append((member, number))
        elif current is not None and line.startswith(HEADERS):
            if line.startswith("Type:"):
                current.kind = line[5:].strip()
        else:
            return sets, [Diagnostic(Location(path, number, 1), f"not a line of `ipset list`: {line[:80]!r}")]
    return sets, []


def port_set(named: NamedSet) -> bool:
    """A set of bare ports: `bitmap:port`, as kube-proxy's KUBE-NODE-PORT-TCP/UDP/SCTP are."""
    return named.kind.split()[0] == "bitmap:port" if named.kind else named.name.startswith("KUBE-NODE-PORT-")
