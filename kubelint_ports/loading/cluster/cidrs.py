"""CIDRs as Kubernetes components parse them: one range, or a dual-stack pair.

Parsed like Go's `net.ParseCIDR` (host bits allowed and masked off; k8s.io/utils/net's
ParseCIDRSloppy reads leading zeros as decimal) and kept per IP family. A value that is not a
CIDR comes back with the reason, in words a finding can quote.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Union

from kubelint_ports.loading.yaml_files import yamltree as yt

IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

_DECIMAL = re.compile(r"[0-9]{1,10}")  # ASCII digits, short enough for int() (ParseCIDR's own limit is lower)


def parse_cidrs(text: str, *, single: bool = False) -> tuple[tuple[IPNetwork, ...], str]:
    """`10.244.0.0/16` or a dual-stack pair `10.244.0.0/16,fd00:10:244::/56` -> (networks, problem).

    Host bits are masked off (`10.196.0.0/12` is 10.192.0.0/12), as Go's ParseCIDR does; the
    problem is "" when the text is valid, else why it is not.
    """
    if ";" in text:
        return (), "ranges are separated by ';', but a dual-stack pair is separated by a comma"
    entries = [text.strip()] if single else [entry.strip() for entry in text.split(",")]
    networks: list[IPNetwork] = []
    for entry in entries:
        network, problem = parse_cidr(entry)
        if problem:
            return (), problem if len(entries) == 1 or not entry else f"{entry!r}: {problem}"
        networks.append(network)
    return tuple(networks), family_problem(networks)


def parse_cidr(entry: str) -> tuple[IPNetwork | None, str]:
    if not entry:
        return None, "an entry is empty (a stray comma?)"
    if "/" not in entry:
        return None, f"{entry} is an address, not a range: the prefix length (/N) is missing"
    address, _, prefix = entry.partition("/")
    if ":" not in address and "." in address:
        # ParseCIDRSloppy (k8s.io/utils/net) reads 010.0.0.0 as decimal, Python refuses it
        parts = address.split(".")
        if all(_DECIMAL.fullmatch(part) for part in parts):
            address = ".".join(str(int(part)) for part in parts)
    if not _DECIMAL.fullmatch(prefix):
        return None, f"the prefix length {yt.quoted(prefix)} is not a number"
    try:
        address_object = ipaddress.ip_address(address)
    except ValueError:
        return None, f"{yt.quoted(address)} is not an IP address"
    if int(prefix) > address_object.max_prefixlen:
        return None, f"/{prefix} is longer than an IPv{address_object.version} address (/{address_object.max_prefixlen})"
    return ipaddress.ip_network(f"{address}/{int(prefix)}", strict=False), ""


def family_problem(networks: list[IPNetwork]) -> str:
    if len(networks) > 2:
        return f"{len(networks)} ranges given; a dual-stack value holds at most one range per IP family"
    if len(networks) == 2 and networks[0].version == networks[1].version:
        return (f"two IPv{networks[0].version} ranges given; a dual-stack value holds one IPv4 and one "
                f"IPv6 range")
    return ""


def family_name(version: int) -> str:
    return f"IPv{version}"


def cidr_text(networks: Iterable[IPNetwork]) -> str:
    return ",".join(str(network) for network in networks)
