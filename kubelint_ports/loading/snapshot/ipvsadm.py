"""`ipvsadm -Sn` (or `ipvsadm-save -n`) -> IPVS virtual services, with how many real servers each has.

`-A -t 10.96.0.1:443 -s rr` declares a service, `-a -t 10.96.0.1:443 -r 10.0.0.1:6443 -m -w 1`
adds a real server (ipvsadm `ipvsadm.c`, `print_service_entry` with FMT_RULE). `-t` is TCP, `-u`
UDP, `--sctp-service` SCTP; `-f` fwmark services have no address.

A node with a million Services prints a million `-A` lines or more. One regular expression reads
what ipvsadm prints for an IPv4 service, its `-A` line and the `-a` lines after it (its address
and port valid as written), a run of lines at a time, and its columns are made without a Python
step per line (`ServicesRead.read_run`). A run with any other line (IPv6, fwmark, odd spacing, a
service declared twice, a mistake) is read a line at a time, and any other line field by field
(`read_line`), which has the last word on what a line means and says what is wrong with it. The
services are kept as columns (`tables.VirtualServers`).
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import add

from kubelint_ports.loading.snapshot.ss import split_host_port
from kubelint_ports.loading.snapshot.tables import PROTOCOL_CODES, VirtualServers
from kubelint_ports.loading.snapshot.text import (
    IPV4_PATTERN,
    PORT_PATTERN,
    DumpProblem,
    excerpt,
    is_address,
    line_runs,
)
from kubelint_ports.vocabulary import Diagnostic, Location

PROTOCOL_FLAGS = {"-t": "tcp", "--tcp-service": "tcp", "-u": "udp", "--udp-service": "udp", "--sctp-service": "sctp"}
FLAG_CODES = {flag: PROTOCOL_CODES[protocol] for flag, protocol in PROTOCOL_FLAGS.items()}
# One match per line, or per service: its `-A` line, the protocol flag, ADDRESS:PORT, then the
# `-a` lines that follow with the same flag and ADDRESS:PORT and a real server. Any other line is
# a match with every group empty.
_SERVICE = re.compile(rf"^(?:(-A (-t|--tcp-service|-u|--udp-service|--sctp-service) ({IPV4_PATTERN}:{PORT_PATTERN})"
                      r"(?: [^\n]*)?)((?:\n-a \2 \3 -r \S[^\n]*)*)|[^\n]*)$", re.MULTILINE)


def read_ipvsadm(text: str, path: str) -> tuple[VirtualServers, list[Diagnostic]]:
    read = ServicesRead()
    try:
        for start, stop in line_runs(text, starting="-A "):
            if not read.read_run(text, start, stop):
                read.read_lines(text, start, stop)
    except DumpProblem as problem:
        return VirtualServers(), [Diagnostic(Location(path, problem.line, problem.column), problem.message)]
    return read.services, []


class ServicesRead:
    """The services declared so far, and the lines read: a service declared again is the same
    service, read anew at its later line (its real servers too), and an `-a` line must name one
    declared before it."""

    def __init__(self):
        self.services = VirtualServers()
        self.declared: tuple[set[str], ...] = tuple(set() for _ in PROTOCOL_CODES)  # ADDRESS:PORT as written
        self.positions: dict[tuple[int, str], int] | None = None  # made when first needed (see `position`)
        self.current = -1  # the service of the latest `-A` line
        self.number = 0  # lines read

    def read_run(self, text: str, start: int, stop: int) -> bool:
        """The lines of text[start:stop] when each is a service's `-A` line or one of its `-a`
        lines and no service is declared twice; False, with nothing read, when not."""
        found = _SERVICE.findall(text, start, stop)
        declarations, flags, endpoints, real_servers = zip(*found)
        if "" in declarations:
            return False
        if flags.count(flags[0]) == len(flags):
            codes = array("B", [FLAG_CODES[flags[0]]]) * len(flags)
            by_protocol = {codes[0]: endpoints}
        else:
            codes = array("B", map(FLAG_CODES.__getitem__, flags))
            by_protocol = {code: [endpoint for endpoint, its in zip(endpoints, codes) if its == code]
                           for code in set(codes)}
        for code, declaring in by_protocol.items():
            declared = self.declared[code]
            size = len(declared)
            declared.update(declaring)
            if len(declared) != size + len(declaring):
                self.forget(by_protocol)  # a service declared twice: read this run line by line
                return False
        services = self.services
        first = len(services)
        if real_servers.count("") == len(real_servers):
            services.lines.extend(range(self.number + 1, self.number + 1 + len(found)))
            services.real_servers.extend(repeat(0, len(found)))
        else:
            counts = array("I", map(str.count, real_servers, repeat("\n")))
            services.lines.extend(accumulate(map(add, counts[:-1], repeat(1)), initial=self.number + 1))
            services.real_servers.extend(counts)
        self.number += 1 + text.count("\n", start, stop)
        services.end_columns.extend(map(add, map(len, declarations), repeat(1)))
        services.protocols.extend(codes)
        services.endpoints.extend(endpoints)
        if self.positions is not None:
            self.positions.update(zip(zip(codes, endpoints), range(first, len(services))))
        self.current = len(services) - 1
        return True

    def forget(self, by_protocol: dict[int, Sequence[str]]) -> None:
        """Undo the declarations of a run that is not read after all."""
        if self.positions is None:
            self.index_services()
        for code, declaring in by_protocol.items():
            for endpoint in declaring:
                if (code, endpoint) not in self.positions:
                    self.declared[code].discard(endpoint)

    def read_lines(self, text: str, start: int, stop: int) -> None:
        """The lines of text[start:stop] one at a time."""
        services = self.services
        for match in _SERVICE.finditer(text, start, stop):
            self.number += 1
            declaration, flag, endpoint, real_servers = match.groups()
            if declaration is None:
                self.read_line(match.group(), self.number)
                continue
            self.declare(FLAG_CODES[flag], endpoint, endpoint[:endpoint.rindex(":")], self.number,
                         len(declaration) + 1)
            if real_servers:
                count = real_servers.count("\n")
                services.real_servers[self.current] += count
                self.number += count

    def read_line(self, line: str, number: int) -> None:
        """One line read field by field; DumpProblem when ipvsadm would not have printed it."""
        fields = line.split()
        if not fields:
            return
        if fields[0] not in ("-A", "-a") or len(fields) < 3:
            raise DumpProblem(number, 1, f"not a line of `ipvsadm -Sn`: {excerpt(line)}")
        if fields[1] == "-f" or fields[1] == "--fwmark-service":
            return
        protocol = PROTOCOL_FLAGS.get(fields[1])
        address, port = split_host_port(fields[2])
        if protocol is None or port is None:
            raise DumpProblem(number, 4, (
                f"{excerpt(' '.join(fields[1:3]))} is not PROTOCOL ADDRESS:PORT (was ipvsadm run with -n?)"))
        if port > 65535 or not is_address(address):
            raise DumpProblem(number, line.find(fields[2]) + 1,
                              f"{excerpt(fields[2])} is not an IP address and a port in 1-65535")
        code, endpoint = PROTOCOL_CODES[protocol], fields[2]
        if fields[0] == "-A":
            self.declare(code, endpoint, address, number, len(line) + 1)
        else:
            if endpoint not in self.declared[code]:
                raise DumpProblem(number, 1, f"real server for {excerpt(endpoint)}, which no `-A` line declares "
                                             f"before it")
            if "-r" in fields:
                if fields.index("-r") + 1 >= len(fields):
                    raise DumpProblem(number, len(line.rstrip()) + 1, "`-r` names no real server (ADDRESS:PORT)")
                self.services.real_servers[self.position(code, endpoint)] += 1

    def declare(self, code: int, endpoint: str, address: str, line: int, end_column: int) -> None:
        services = self.services
        if endpoint in self.declared[code]:
            self.current = self.position(code, endpoint)
            services.lines[self.current] = line
            services.end_columns[self.current] = end_column
            services.real_servers[self.current] = 0
            return
        self.declared[code].add(endpoint)
        self.current = len(services)
        if self.positions is not None:
            self.positions[(code, endpoint)] = self.current
        services.append(line, end_column, code, endpoint, address)

    def position(self, code: int, endpoint: str) -> int:
        """Where a declared service is. Real servers follow their service, so this is asked of a
        service declared twice or an `-a` line away from its service only."""
        if self.current >= 0 and self.services.endpoints[self.current] == endpoint and (
                self.services.protocols[self.current] == code):
            return self.current
        if self.positions is None:
            self.index_services()
        return self.positions[(code, endpoint)]

    def index_services(self) -> None:
        """Where each service is, kept from now on (a file with a service declared twice or an
        `-a` line away from its service may have many: each search is one look-up)."""
        services = self.services
        self.positions = {(services.protocols[index], name): index for index, name in enumerate(services.endpoints)}
