"""The host-local IPAM directory, as `grep -r . /var/lib/cni/networks/` prints it -> leases.

host-local (containernetworking/plugins `plugins/ipam/host-local/backend/disk`) keeps one file
per reserved address, named by the address, holding the container ID, then (since v0.8) a
`\\r\\n` and the interface name; plus `last_reserved_ip.N` and an empty `lock`. grep prints each
line of each file as `PATH:LINE`, so a lease spans two lines: the ID, then the interface.
"""

from __future__ import annotations

import ipaddress
import re

from kubelint_ports.loading.snapshot.dump_records import Lease
from kubelint_ports.loading.snapshot.text import excerpt
from kubelint_ports.vocabulary import Diagnostic, Location

_CONTAINER_ID = re.compile(r"[0-9a-zA-Z_.-]+")


def read_ipam(text: str, path: str) -> tuple[list[Lease], list[Diagnostic]]:
    leases: list[Lease] = []
    seen: set[tuple[str, str]] = set()
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        parsed = split_line(line)
        if parsed is None:
            return leases, [Diagnostic(Location(path, number, 1), (
                f"not a line of `grep -r . /var/lib/cni/networks/`: {excerpt(line)} (expected "
                f"/var/lib/cni/networks/NETWORK/ADDRESS:CONTAINER-ID)"))]
        network, name, content = parsed
        if name.startswith("last_reserved_ip") or name == "lock":
            continue
        try:
            address = str(ipaddress.ip_address(name))
        except ValueError:  # host-local keeps nothing else there: a renamed or foreign file
            return leases, [Diagnostic(Location(path, number, len(directory_of(line)) + 1), (
                f"{excerpt(name)} is not an IP address: host-local names each lease file after its address "
                f"(besides last_reserved_ip.N and lock)"))]
        if (network, address) in seen:
            continue  # the lease file's second line: the interface name
        seen.add((network, address))
        if not _CONTAINER_ID.fullmatch(content):
            return leases, [Diagnostic(Location(path, number, len(line) - len(content) + 1),
                                       f"{excerpt(content)} is not a container ID")]
        leases.append(Lease(number, len(line) + 1, network, address, content))
    return leases, []


def split_line(line: str) -> tuple[str, str, str] | None:
    """(network, file name, content) of `DIR/NETWORK/FILE:CONTENT`. Container IDs and interface
    names hold neither `/` nor `:`, IPv6 file names hold colons: so split at the last slash, then
    at the last colon."""
    directory, slash, rest = line.rpartition("/")
    name, colon, content = rest.rpartition(":")
    if not slash or not colon or not name or "/" not in directory:
        return None
    return directory.rsplit("/", 1)[-1], name, content


def directory_of(line: str) -> str:
    """The `DIR/NETWORK/` prefix of a line, up to the file name."""
    return line[:line.rpartition(":")[0].rfind("/") + 1]
