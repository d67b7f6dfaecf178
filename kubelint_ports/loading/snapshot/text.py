"""What every dump reader shares: the text as the tool printed it, its lines, places in it, values
checked the way the kernel would, and short quotes of it for messages.

A snapshot directory may sit next to secrets (a collector's home directory, a CI checkout with a
token file), and its messages end up in CI logs and GitHub annotations. So no message quotes more
of a file than `excerpt` of the one token at fault.
"""

from __future__ import annotations

import ipaddress
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import TypeVar

from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.vocabulary import Diagnostic, Location

Records = TypeVar("Records")

EXCERPT = 40  # characters of a file a message may quote
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def decode(data: bytes) -> str:
    """The dump as text with `\\n` line ends. A UTF-8 byte-order mark (Windows editors and
    PowerShell's `Out-File -Encoding utf8` add one) is dropped; CRLF (a dump copied through
    Windows) and a lone CR (old Mac line ends, some clipboard tools) both end a line. No tool of a
    snapshot prints a carriage return of its own, so every line keeps the number an editor shows."""
    text = data.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


class DumpProblem(ValueError):
    """The first thing in a dump that its tool would not have printed. It ends the reading of the
    file (a half-read ruleset would make rules look missing) and becomes a diagnostic at its line."""

    def __init__(self, line: int, column: int, message: str):
        super().__init__(message)
        self.line, self.column, self.message = line, column, message


def read_whole(read: Callable[[str, Records], None], text: str, records: Records,
               path: str) -> tuple[Records, list[Diagnostic]]:
    """`read(text, records)` for a reader that stops at the first DumpProblem: the records, and
    that problem as the file's one diagnostic (the caller must then draw no conclusion from them)."""
    try:
        read(text, records)
    except DumpProblem as problem:
        return records, [Diagnostic(Location(path, problem.line, problem.column), problem.message)]
    return records, []


def lines(text: str) -> list[str]:
    """The lines of a decoded dump. Only `\\n` ends a line: `str.splitlines` would also break at
    form feeds, NEL and U+2028 inside a comment or a process name, and shift every line after it."""
    found = text.split("\n")
    if found and found[-1] == "":
        found.pop()
    return found


def line_runs(text: str, size: int = 1 << 17, starting: str = "") -> Iterator[tuple[int, int]]:
    """(start, stop) of runs of whole lines, about `size` characters each, for a reader that reads
    many lines with one regular expression (`Pattern.findall(text, start, stop)`): the run's text
    holds the lines `lines(text)` holds there, so a reader numbers them by counting. A run begins
    at a line that begins with `starting` when one comes soon (a record and its lines stay in one
    run)."""
    last = len(text) - 1 if text.endswith("\n") else len(text)  # the newline that ends the last line
    start = 0
    while text and start <= last:
        stop = text.find("\n" + starting, start + size, start + 4 * size) if starting else -1
        if stop < 0:
            stop = text.find("\n", start + size, last)
        if stop < 0:
            stop = last
        yield start, stop
        start = stop + 1


class LineTable:
    """(line, column) of any offset of a text, by bisecting its line starts: one pass over the text,
    then O(log lines) per place, however many places a reader asks for."""

    def __init__(self, text: str):
        self.length = len(text)
        self.starts = [0]
        self.starts += (match.end() for match in re.finditer("\n", text))

    def place(self, offset: int) -> tuple[int, int]:
        index = bisect_right(self.starts, offset) - 1
        return index + 1, offset - self.starts[index] + 1

    def end_column(self, line: int) -> int:
        """One past the last character of 1-based `line`."""
        end = self.starts[line] - 1 if line < len(self.starts) else self.length
        return end - self.starts[line - 1] + 1


def excerpt(token: object) -> str:
    """A message's quote of the token at fault: at most EXCERPT characters, escaped (`repr`, as
    `yamltree.quoted` writes values), marked with its length when cut."""
    text = token if isinstance(token, str) else str(token)
    if len(text) <= EXCERPT:
        return yt.quoted(text)
    return f"{yt.quoted(text[:EXCERPT])}... ({len(text):,} characters)"


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.:/@+-]+(?: [A-Za-z0-9_.:/@+-]+)?")  # `KUBE-SERVICES`, `ip kube-proxy`


def quoted_name(text: str) -> str:
    """A chain, table or set name for a message: as is when it is a plain short name (as the tools
    allow: iptables chains up to 28 characters, ipset names 31), else an `excerpt`."""
    return text if len(text) <= EXCERPT and _PLAIN_NAME.fullmatch(text) else excerpt(text)


def port_number(text: str, lowest: int = 0) -> int | None:
    """A port written in decimal, `lowest`-65535; None for anything else (a 14-digit "port" too)."""
    if not text.isascii() or not text.isdigit() or len(text) > 5:
        return None
    value = int(text)
    return value if lowest <= value <= 65535 else None


def port_range(text: str, separator: str = "-") -> tuple[int, int] | None:
    """`80` or `30000-32767` (low first, as every tool prints a range); None when it is not one."""
    low, found, high = text.partition(separator)
    first = port_number(low.strip())
    last = port_number(high.strip()) if found else first
    if first is None or last is None or last < first:
        return None
    return first, last


# For the readers that read the usual lines a run at a time with one regular expression (`ss`,
# `ipvsadm`): an IPv4 address as `ipaddress` takes it (no leading zeros), a port in 0-65535
# written without them. ASCII digits only: `\d` would take `²` too.
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
IPV4_PATTERN = rf"(?:{_OCTET}\.){{3}}{_OCTET}"
PORT_PATTERN = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}|0)"


def is_address(text: str, prefix: bool = False) -> bool:
    """An IPv4 or IPv6 address (`999.0.0.1` is not), with `prefix` also `ADDRESS/LENGTH`."""
    try:
        if prefix and "/" in text:
            ipaddress.ip_network(text, strict=False)
        else:
            ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def destination_problem(text: str) -> str:
    """Why a DNAT destination as iptables and nft print it (`10.0.0.1:80`, `[fd00::1]:80`,
    `10.0.0.1-10.0.0.3:80-90`) is not one; "" when it is, or when it is no address at all (an nft
    map lookup). The model reads its port with int(): `10.0.0.1:²` must not get that far."""
    if text.startswith("["):
        address, _, port = text[1:].partition("]")
        port = port.removeprefix(":")
    else:
        address, colon, port = text.rpartition(":")
        if not colon or ":" in address:
            address, port = text, ""
    if port and port_range(port) is None:
        return f"the DNAT destination {excerpt(text)} has no port in 0-65535"
    if (address[:1].isdigit() or text.startswith("[")) and not all(is_address(part) for part in address.split("-")):
        return f"the DNAT destination {excerpt(text)} is not an IP address"
    return ""
