"""`ip -o addr` (one line per address) -> node addresses.

`2: cni0    inet 10.244.1.1/24 brd 10.244.1.255 scope global cni0\\       valid_lft forever ...`
(iproute2 `ip/ipaddress.c`; `-o` replaces line breaks with a backslash).
"""

from __future__ import annotations

import re

from kubelint_ports.loading.snapshot.dump_records import Address
from kubelint_ports.loading.snapshot.text import excerpt, is_address, lines
from kubelint_ports.vocabulary import Diagnostic, Location

_LINE = re.compile(r"\d+:\s+(\S+?)(?:@\S+)?\s+(inet6?)\s+([0-9a-fA-F.:]+)(?:/([0-9]+))?")


def read_ip_addr(text: str, path: str) -> tuple[list[Address], list[Diagnostic]]:
    addresses: list[Address] = []
    for number, line in enumerate(lines(text), start=1):
        if not line.strip():
            continue
        match = _LINE.match(line)
        if match is None:
            if re.match(r"\d+:\s+\S+\s+link/", line):
                continue  # `ip -o link` lines mixed in: no address
            return addresses, [Diagnostic(Location(path, number, 1), (
                f"not a line of `ip -o addr`: {excerpt(line)} (expected `N: IFACE inet ADDRESS/PREFIX ...`)"))]
        family, address, length = match.group(2), match.group(3), match.group(4)
        family_bits = 32 if family == "inet" else 128
        prefix = family_bits if length is None else int(length) if len(length) <= 3 else family_bits + 1
        # iproute2 prints what the kernel holds: `999.0.0.1`, `/33` or an IPv6 address after `inet` are not that
        if prefix > family_bits or not is_address(address) or (":" in address) != (family == "inet6"):
            return addresses, [Diagnostic(Location(path, number, match.start(3) + 1), (
                f"{excerpt(address + ('' if length is None else '/' + length))} is not an {family} address with a "
                f"prefix length of at most {family_bits}"))]
        addresses.append(Address(number, len(line.split("\\", 1)[0].rstrip()) + 1, match.group(1), address, prefix))
    return addresses, []
