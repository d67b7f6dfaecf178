"""`sysctl net.ipv4.ip_local_port_range` (or `sysctl -a`) -> settings by name, with their lines.

The port settings are checked as the kernel checks a write to them (`net/ipv4/sysctl_net_ipv4.c`):
a range the kernel would refuse (`60999 32768`, a port past 65535) cannot be what a node runs
with, so it is an input error at its line rather than a range the checks believe.
"""

from __future__ import annotations

from kubelint_ports.loading.snapshot.text import excerpt, lines, port_number, port_range
from kubelint_ports.vocabulary import Diagnostic, Location


def read_sysctl(text: str, path: str) -> tuple[dict[str, tuple[str, int]], list[Diagnostic]]:
    settings: dict[str, tuple[str, int]] = {}
    for number, line in enumerate(lines(text), start=1):
        if not line.strip() or line.lstrip().startswith(("#", ";")):
            continue
        name, equals, value = line.partition("=")
        if not equals or not name.strip():
            return settings, [Diagnostic(Location(path, number, 1),
                                         f"not a `name = value` line of sysctl: {excerpt(line)}")]
        value = " ".join(value.split())
        problem = value_problem(name.strip(), value)
        if problem:
            return settings, [Diagnostic(Location(path, number, len(name) + 2), problem)]
        settings[name.strip()] = (value, number)
    return settings, []


def value_problem(name: str, value: str) -> str:
    """Why the kernel would not hold `value` for the port setting `name`; "" when it could."""
    if name == "net.ipv4.ip_local_port_range":
        ports = value.split()
        low, high = (port_number(ports[0], 1), port_number(ports[1], 1)) if len(ports) == 2 else (None, None)
        if low is None or high is None or high < low:
            return (f"{name} = {excerpt(value)} is not a range the kernel accepts: two ports in 1-65535, "
                    "the lower first")
    elif name == "net.ipv4.ip_local_reserved_ports" and value:
        for part in value.split(","):
            if port_range(part.strip()) is None:
                return f"{name}: {excerpt(part.strip())} is not a port or a range LOW-HIGH in 0-65535"
    elif name == "net.ipv4.ip_unprivileged_port_start" and port_number(value) is None:
        return f"{name} = {excerpt(value)} is not a port in 0-65535"
    return ""
