"""`ss -Htlnup` (or `ss -tlnup`, `ss -ltnp`, with or without -H) -> listening sockets.

Columns (iproute2 `misc/ss.c`): Netid State Recv-Q Send-Q Local:Port Peer:Port [Process], Netid
only with both -t and -u. A local address may carry `%interface` and IPv6 addresses are bracketed:
`0.0.0.0:30584`, `*:22`, `[::]:22`, `127.0.0.53%lo:53`, `[::ffff:10.0.0.1]:80`.

A node may list 800,000 sockets. One regular expression reads the lines of TCP, UDP and SCTP
sockets on an IPv4 address, `*` or `[::]` (the address and port valid as written) with one
process or none, a run of lines at a time, and its columns are made without a Python step per
line (`SocketsRead.read_run`). A run with any other line (a header, IPv6, several processes, a
mistake) is read a line at a time, and any other line field by field (`read_line`), which has the
last word on what a line means and says what is wrong with it. The sockets are kept as columns
(`tables.Listeners`).
"""

from __future__ import annotations

import re
from itertools import repeat
from operator import add

from kubelint_ports.loading.snapshot.tables import PROTOCOL_CODES, Listeners
from kubelint_ports.loading.snapshot.text import (
    IPV4_PATTERN,
    PORT_PATTERN,
    DumpProblem,
    excerpt,
    is_address,
    line_runs,
)
from kubelint_ports.vocabulary import Diagnostic, Location

STATES = frozenset(("LISTEN", "UNCONN"))
NETIDS = frozenset(("tcp", "udp", "sctp", "raw", "u_str", "u_dgr", "u_seq", "nl", "p_raw", "p_dgr", "v_str", "v_dgr",
                    "mptcp", "tipc", "xdp"))
_PROCESS = re.compile(r'\("((?:[^"\\]|\\.)*)",pid=([0-9]+)')
MAX_NAME = 64  # a task's comm is 15 bytes; ss may escape some of them
_HEADER = re.compile(r"(Netid\s+)?State\s+Recv-Q\s+Send-Q\s+Local Address:Port")
# One match per line: the line, Netid (when printed), State, the local address and port, then the
# name and pid of the one process as written (`"sshd",pid=1021`: what `_PROCESS` finds in the
# field; the file descriptor differs on each line), or the processes field of several. Any other
# line is a match with every group empty.
_LINE = re.compile(rf"^(?:((?:(tcp|udp|sctp)[ \t]+)?(LISTEN|UNCONN)[ \t]+[0-9]+[ \t]+[0-9]+[ \t]+"
                   rf"({IPV4_PATTERN}|\*|\[::\]):({PORT_PATTERN})[ \t]+\S+(?:[ \t]+(?:users:\(\("
                   r'("[^"\\\s]*(?:\\\S[^"\\\s]*)*",pid=[0-9]{1,10}),fd=[0-9]+\)\)|(\S+)))?[ \t]*)|[^\n]*)$',
                   re.MULTILINE)
PROTOCOL_OF_STATE = {"LISTEN": PROTOCOL_CODES["tcp"], "UNCONN": PROTOCOL_CODES["udp"]}
_UNBRACKETED = {"[::]": "::"}
SHARED = 65536  # distinct addresses and processes kept to share with the sockets that repeat them


def read_ss(text: str, path: str) -> tuple[Listeners, list[Diagnostic]]:
    read = SocketsRead()
    try:
        for start, stop in line_runs(text):
            if not read.read_run(text, start, stop):
                read.read_lines(text, start, stop)
    except DumpProblem as problem:
        return read.listeners, [Diagnostic(Location(path, problem.line, problem.column), problem.message)]
    return read.listeners, []


class SocketsRead:
    """The sockets read so far, with the addresses and processes they share."""

    def __init__(self):
        self.listeners = Listeners()
        self.number = 0  # lines read
        self.addresses: dict[str, str] = {}  # as written -> as kept
        self.processes: dict[str, tuple[tuple[str, int], ...]] = {"": ()}  # `"NAME",pid=PID` -> the processes

    def read_run(self, text: str, start: int, stop: int) -> bool:
        """The lines of text[start:stop] when each is a socket the regular expression reads whole;
        False, with nothing read, when not."""
        found = _LINE.findall(text, start, stop)
        lines, netids, states, addresses, ports, written, fields = zip(*found)
        if "" in lines or fields.count("") != len(fields):
            return False
        try:
            processes = list(map(self.processes.__getitem__, written))
        except KeyError:
            if not self.learn(set(written)):
                return False
            processes = list(map(self.processes.__getitem__, written))
        listeners = self.listeners
        listeners.lines.extend(range(self.number + 1, self.number + 1 + len(found)))
        self.number += len(found)
        listeners.end_columns.extend(map(add, map(len, lines), repeat(1)))
        if "" not in netids:
            listeners.protocols.extend(map(PROTOCOL_CODES.__getitem__, netids))
        else:
            listeners.protocols.extend(map(PROTOCOL_OF_STATE.__getitem__, states) if netids.count("") == len(netids)
                                       else (PROTOCOL_CODES[netid] if netid else PROTOCOL_OF_STATE[state]
                                             for netid, state in zip(netids, states)))
        distinct = set(addresses)
        if len(distinct) * 4 > len(addresses):  # sockets on as many addresses: nothing to share
            listeners.addresses.extend(map(_UNBRACKETED.get, addresses, addresses))
        else:
            if len(self.addresses) > SHARED:
                self.addresses.clear()
            kept = {address: self.addresses.setdefault(address, _UNBRACKETED.get(address, address))
                    for address in distinct}
            listeners.addresses.extend(map(kept.__getitem__, addresses))
        listeners.ports.extend(map(int, ports))
        listeners.processes.extend(processes)
        return True

    def learn(self, written: set[str]) -> bool:
        """Each `"NAME",pid=PID` of `written` as processes (one tuple for each); False when a name
        is longer than ss prints one (that line is for `read_line` to tell)."""
        known = self.processes
        if len(known) + len(written) > SHARED:
            known.clear()
            known[""] = ()
        for process in written.difference(known):
            name, pid = process_of(process)
            if len(name) > MAX_NAME:
                return False
            known[process] = ((name, int(pid)),)
        return True

    def read_lines(self, text: str, start: int, stop: int) -> None:
        """The lines of text[start:stop] one at a time."""
        for match in _LINE.finditer(text, start, stop):
            self.number += 1
            line, netid, state, address, port, process, field = match.groups()
            name, pid = process_of(process) if process else ("", "")
            if line is None or field is not None or len(name) > MAX_NAME:
                read_line(match.group(), self.number, self.listeners)  # any other line, or several processes
                continue
            self.listeners.append(self.number, len(line) + 1,
                                  PROTOCOL_CODES[netid] if netid else PROTOCOL_OF_STATE[state],
                                  _UNBRACKETED.get(address, address), int(port), ((name, int(pid)),) if pid else ())


def process_of(written: str) -> tuple[str, str]:
    """(name, pid) of `"NAME",pid=PID`."""
    name, _, pid = written.rpartition('",pid=')
    return name[1:], pid


def read_line(line: str, number: int, listeners: Listeners) -> None:
    """One line read field by field; DumpProblem when ss would not have printed it."""
    if not line.strip() or _HEADER.match(line):
        return
    fields = line.split()
    if fields[0] in NETIDS:
        protocol, fields = fields[0], fields[1:]
    else:
        protocol = ""
    if len(fields) < 5 or fields[0] not in STATES or not fields[1].isdigit() or not fields[2].isdigit():
        raise DumpProblem(number, 1, (
            f"not a line of `ss -tlnup`: {excerpt(line)} (expected State Recv-Q Send-Q Local:Port Peer:Port "
            f"[Process])"))
    if not protocol:
        protocol = "tcp" if fields[0] == "LISTEN" else "udp"
    if protocol not in ("tcp", "udp", "sctp"):
        return
    address, port = split_host_port(fields[3])
    if port is None or not (address == "*" or is_address(address)):
        raise DumpProblem(number, line.find(fields[3]) + 1,
                          f"{excerpt(fields[3])} is not ADDRESS:PORT (was ss run with -n?)")
    if port > 65535:
        raise DumpProblem(number, line.find(fields[3]) + 1,
                          f"{excerpt(fields[3])}: port {digits(fields[3])} is out of range (1-65535)")
    processes = _PROCESS.findall(" ".join(fields[5:]))
    odd = next((f"{excerpt(pid)} is not a process ID" if len(pid) > 10 else
                f"the process name {excerpt(name)} is longer than the kernel keeps one (15 characters)"
                for name, pid in processes if len(pid) > 10 or len(name) > MAX_NAME), "")
    if odd:
        raise DumpProblem(number, 1, f"{odd}: not `ss -tlnup` output")
    listeners.append(number, len(line) + 1, PROTOCOL_CODES[protocol], address, port,
                     tuple((name, int(pid)) for name, pid in processes))


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
