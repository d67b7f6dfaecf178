"""`sysctl net.ipv4.ip_local_port_range` (or `sysctl -a`) -> settings by name, with their lines."""

from __future__ import annotations

from kubelint_ports.findings import Diagnostic, Location


def read_sysctl(text: str, path: str) -> tuple[dict[str, tuple[str, int]], list[Diagnostic]]:
    settings: dict[str, tuple[str, int]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith(("#", ";")):
            continue
        name, equals, value = line.partition("=")
        if not equals or not name.strip():
            return settings, [Diagnostic(Location(path, number, 1), f"not a `name = value` line of sysctl: {line[:80]!r}")]
        settings[name.strip()] = (" ".join(value.split()), number)
    return settings, []
