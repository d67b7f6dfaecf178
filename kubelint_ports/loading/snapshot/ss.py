"""`ss -Htlnup` (or `ss -tlnup`, `ss -ltnp`, with or without -H) -> listening sockets.

Columns (iproute2 `misc/ss.c`): Netid State Recv-Q Send-Q Local:Port Peer:Port [Process], Netid
only with both -t and -u. A local address may carry `%interface` and IPv6 addresses are bracketed:
`0.0.0.0:30584`, `*:22`, `[::]:22`, `127.0.0.53%lo:53`, `[::ffff:10.0.0.1]:80`.
"""

from __future__ import annotations

import re

from kubelint_ports.loading.snapshot.records import Listener
from kubelint_ports.loading.snapshot.text import excerpt, is_address, lines
from kubelint_ports.vocabulary import Diagnostic, Location

STATES = frozenset(("LISTEN", "UNCONN"))
_PROCESS = re.compile(r'\("((?:[^"\\]|\\.)*)",pid=([0-9]+)')
MAX_NAME = 64  # a task's comm is 15 bytes; ss may escape some of them
_HEADER = re.compile(r"(Netid\s+)?State\s+Recv-Q\s+Send-Q\s+Local Address:Port")


def read_ss(text: str, path: str) -> tuple[list[Listener], list[Diagnostic]]:
    listeners: list[Listener] = []
    for number, line in enumerate(lines(text), start=1):
        if not line.strip() or _HEADER.match(line):
            continue
        fields = line.split()
        if fields[0] in ("tcp", "udp", "sctp", "raw", "u_str", "u_dgr", "u_seq", "nl", "p_raw", "p_dgr", "v_str",
                         "v_dgr", "mptcp", "tipc", "xdp"):
            protocol, fields = fields[0], fields[1:]
        else:
            protocol = ""
        if len(fields) < 5 or fields[0] not in STATES or not fields[1].isdigit() or not fields[2].isdigit():
            return listeners, [Diagnostic(Location(path, number, 1), (
                f"not a line of `ss -tlnup`: {excerpt(line)} (expected State Recv-Q Send-Q Local:Port Peer:Port "
                f"[Process])"))]
        if not protocol:
            protocol = "tcp" if fields[0] == "LISTEN" else "udp"
        if protocol not in ("tcp", "udp", "sctp"):
            continue
        address, port = split_host_port(fields[3])
        if port is None or not (address == "*" or is_address(address)):
            return listeners, [Diagnostic(Location(path, number, line.find(fields[3]) + 1),
                                          f"{excerpt(fields[3])} is not ADDRESS:PORT (was ss run with -n?)")]
        if port > 65535:
            return listeners, [Diagnostic(Location(path, number, line.find(fields[3]) + 1),
                                          f"{excerpt(fields[3])}: port {digits(fields[3])} is out of range (1-65535)")]
        processes = _PROCESS.findall(" ".join(fields[5:]))
        odd = next((f"{excerpt(pid)} is not a process ID" if len(pid) > 10 else
                    f"the process name {excerpt(name)} is longer than the kernel keeps one (15 characters)"
                    for name, pid in processes if len(pid) > 10 or len(name) > MAX_NAME), "")
        if odd:
            return listeners, [Diagnostic(Location(path, number, 1), f"{odd}: not `ss -tlnup` output")]
        listeners.append(Listener(number, len(line) + 1, protocol, address, port,
                                  tuple((name, int(pid)) for name, pid in processes)))
    return listeners, []


def split_host_port(text: str) -> tuple[str, int | None]:
    host, _, port = text.rpartition(":")
    if not port.isascii() or not port.isdigit():  # `str.isdigit` also takes `²`, which int() refuses
        return text, None
    host = host.split("%", 1)[0]
    if host.startswith("["):
        host = host[1:].split("]", 1)[0]
        if host.startswith("::ffff:") and "." in host:
            host = host[7:]
    # Past five digits the port is out of range anyway (and int() refuses 4,300 digits)
    return host or "*", int(port) if len(port) <= 6 else 999_999


def digits(text: str) -> str:
    """The port of ADDRESS:PORT for a message (ASCII digits: nothing to escape), cut when long."""
    port = text.rpartition(":")[2]
    return port if len(port) <= 12 else port[:12] + "..."
