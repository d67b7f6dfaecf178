"""`ipvsadm -Sn` (or `ipvsadm-save -n`) -> IPVS virtual services with their real servers.

`-A -t 10.96.0.1:443 -s rr` declares a service, `-a -t 10.96.0.1:443 -r 10.0.0.1:6443 -m -w 1`
adds a real server (ipvsadm `ipvsadm.c`, `print_service_entry` with FMT_RULE). `-t` is TCP, `-u`
UDP, `--sctp-service` SCTP; `-f` fwmark services have no address.
"""

from __future__ import annotations

import ipaddress

from kubelint_ports.loading.snapshot.records import VirtualServer
from kubelint_ports.loading.snapshot.ss import split_host_port
from kubelint_ports.loading.snapshot.text import excerpt, lines
from kubelint_ports.vocabulary import Diagnostic, Location

PROTOCOL_FLAGS = {"-t": "tcp", "--tcp-service": "tcp", "-u": "udp", "--udp-service": "udp", "--sctp-service": "sctp"}


def read_ipvsadm(text: str, path: str) -> tuple[list[VirtualServer], list[Diagnostic]]:
    services: dict[tuple[str, str], VirtualServer] = {}
    real: dict[tuple[str, str], list[str]] = {}
    for number, line in enumerate(lines(text), start=1):
        fields = line.split()
        if not fields:
            continue
        if fields[0] not in ("-A", "-a") or len(fields) < 3:
            return [], [Diagnostic(Location(path, number, 1), f"not a line of `ipvsadm -Sn`: {excerpt(line)}")]
        if fields[1] == "-f" or fields[1] == "--fwmark-service":
            continue
        protocol = PROTOCOL_FLAGS.get(fields[1])
        address, port = split_host_port(fields[2])
        if protocol is None or port is None:
            return [], [Diagnostic(Location(path, number, 4), (
                f"{excerpt(' '.join(fields[1:3]))} is not PROTOCOL ADDRESS:PORT (was ipvsadm run with -n?)"))]
        if port > 65535 or not valid_address(address):
            return [], [Diagnostic(Location(path, number, line.find(fields[2]) + 1), (
                f"{excerpt(fields[2])} is not an IP address and a port in 1-65535"))]
        key = (protocol, fields[2])
        if fields[0] == "-A":
            services[key] = VirtualServer(number, len(line) + 1, protocol, address, port)
            real[key] = []
        else:
            if key not in services:
                return [], [Diagnostic(Location(path, number, 1), f"real server for {excerpt(fields[2])}, which no "
                                                                  f"`-A` line "
                                                                  f"declares before it")]
            if "-r" in fields:
                where = fields.index("-r") + 1
                if where >= len(fields):
                    return [], [Diagnostic(Location(path, number, len(line.rstrip()) + 1),
                                           "`-r` names no real server (ADDRESS:PORT)")]
                real[key].append(fields[where])
    return [VirtualServer(s.line, s.end_column, s.protocol, s.address, s.port, tuple(real[key]))
            for key, s in services.items()], []


def valid_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
