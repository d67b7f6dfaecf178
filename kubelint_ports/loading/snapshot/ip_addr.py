"""`ip -o addr` (one line per address) -> node addresses.

`2: cni0    inet 10.244.1.1/24 brd 10.244.1.255 scope global cni0\\       valid_lft forever ...`
(iproute2 `ip/ipaddress.c`; `-o` replaces line breaks with a backslash).
"""

from __future__ import annotations

import re

from kubelint_ports.findings import Diagnostic, Location
from kubelint_ports.loading.snapshot.records import Address

_LINE = re.compile(r"\d+:\s+(\S+?)(?:@\S+)?\s+(inet6?)\s+([0-9a-fA-F.:]+)(?:/(\d+))?")


def read_ip_addr(text: str, path: str) -> tuple[list[Address], list[Diagnostic]]:
    addresses: list[Address] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        match = _LINE.match(line)
        if match is None:
            if re.match(r"\d+:\s+\S+\s+link/", line):
                continue  # `ip -o link` lines mixed in: no address
            return addresses, [Diagnostic(Location(path, number, 1), (
                f"not a line of `ip -o addr`: {line[:80]!r} (expected `N: IFACE inet ADDRESS/PREFIX ...`)"))]
        family_bits = 32 if match.group(2) == "inet" else 128
        addresses.append(Address(number, len(line.split("\\", 1)[0].rstrip()) + 1, match.group(1), match.group(3),
                                 int(match.group(4)) if match.group(4) else family_bits))
    return addresses, []
