"""`ipset list` (or `ipset save`) -> sets and their members, each member at its line.

kube-proxy in IPVS mode keeps `KUBE-CLUSTER-IP` (`ip,port` of every ClusterIP), `KUBE-NODE-PORT-TCP`
/ `-UDP` (nodePorts), `KUBE-LOOP-BACK` and more (pkg/proxy/ipvs/ipset.go).
"""

from __future__ import annotations

from kubelint_ports.loading.snapshot.dump_records import NamedSet
from kubelint_ports.loading.snapshot.text import excerpt, is_address, lines, port_number, quoted_name
from kubelint_ports.vocabulary import Diagnostic, Location

HEADERS = ("Type:", "Revision:", "Header:", "Size in memory:", "References:", "Number of entries:")
PORT_PROTOCOLS = ("tcp", "udp", "sctp", "udplite")  # the protocols whose members carry a port number


def read_ipset(text: str, path: str) -> tuple[dict[str, NamedSet], list[Diagnostic]]:
    sets: dict[str, NamedSet] = {}
    current: NamedSet | None = None
    in_members = False
    for number, line in enumerate(lines(text), start=1):
        if not line.strip():
            in_members = False
            continue
        if line.startswith("Name: "):
            current = sets[line[6:].strip()] = NamedSet(line[6:].strip(), number)
            in_members = False
        elif line.startswith("create "):  # `ipset save`
            fields = line.split()
            if len(fields) < 3:
                return sets, [Diagnostic(Location(path, number, 1), f"not an `ipset save` line: {excerpt(line)}")]
            current = sets[fields[1]] = NamedSet(fields[1], number, fields[2])
        elif line.startswith("add "):
            fields = line.split()
            if len(fields) < 3 or fields[1] not in sets:
                return sets, [Diagnostic(Location(path, number, 1), f"member of an undeclared set: {excerpt(line)}")]
            problem = member_problem(sets[fields[1]], fields[2])
            if problem:
                return sets, [Diagnostic(Location(path, number, line.find(fields[2], 4) + 1), problem)]
            sets[fields[1]].members.append((fields[2], number))
        elif current is not None and line.startswith("Members:"):
            in_members = True
        elif current is not None and in_members:
            member = line.split()[0]
            problem = member_problem(current, member)
            if problem:
                return sets, [Diagnostic(Location(path, number, line.find(member) + 1), problem)]
            current.members.append((member, number))
        elif current is not None and line.startswith(HEADERS):
            if line.startswith("Type:"):
                current.kind = line[5:].strip()
        else:
            return sets, [Diagnostic(Location(path, number, 1), f"not a line of `ipset list`: {excerpt(line)}")]
    return sets, []


def port_set(named: NamedSet) -> bool:
    """A set of bare ports: `bitmap:port`, as kube-proxy's KUBE-NODE-PORT-TCP/UDP/SCTP are."""
    return named.kind.split()[0] == "bitmap:port" if named.kind else named.name.startswith("KUBE-NODE-PORT-")


def member_problem(named: NamedSet, member: str) -> str:
    """Why `member` cannot be a member of the set as ipset prints it ("" when it can): each part
    checked against the set type's (`hash:ip,port`: `10.96.0.1,tcp:443`). A port past 65535 or an
    address such as 999.0.0.1 would otherwise reach the checks as if the kernel held it."""
    where = f"in set {quoted_name(named.name)} ({named.kind or 'of ports'})"
    if port_set(named):
        if port_number(member, lowest=1) is None:
            return f"{excerpt(member)} {where} is not a port in 1-65535"
        return ""
    _, colon, parts = (named.kind.split() or [""])[0].partition(":")
    components = parts.split(",") if colon else []
    if not components:
        return ""  # a type this reader does not know: its members are kept as written
    values = member.split(",")
    if len(values) != len(components):
        return f"{excerpt(member)} {where} is not {','.join(c.upper() for c in components)}"
    for component, value in zip(components, values):
        if component in ("ip", "net") and not is_address(value, prefix=True):
            return f"{excerpt(value)} {where} is not an IP address"
        if component == "port":
            protocol, colon, port = value.rpartition(":")
            if (not colon or protocol in PORT_PROTOCOLS) and port_number(port) is None:
                return f"{excerpt(value)} {where} is not a port in 0-65535 (PROTOCOL:PORT)"
    return ""
