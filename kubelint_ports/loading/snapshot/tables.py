"""The records of large dumps, kept as columns: a record is made when it is asked for.

A node can hold a million IPVS services or 800,000 sockets. As objects (the record, its strings and
ints, then the model's record and its `DumpLine`) they took some 600 bytes apiece: 638 MiB for a
30 MB `ipvsadm -Sn`. As columns (numbers in arrays, the one string a record needs in a list) they
take about 90, and the checks make few records: those on a port that a DNAT or a nodePort takes
too (`on_ports`).

`Table` is what a reader returns: a sequence of its records (`VirtualServer`, `Listener`), each
made from its row. `DumpRecords` is what the model keeps for a node: the records of every dump of a
kind, some made objects, some tables with the function that makes the model's record of a row.
"""

from __future__ import annotations

from abc import abstractmethod
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

from kubelint_ports.loading.snapshot.dump_records import Listener, VirtualServer

PROTOCOLS = ("tcp", "udp", "sctp")
PROTOCOL_CODES = {name: code for code, name in enumerate(PROTOCOLS)}


class Table(Sequence):
    """A dump's records of one kind, as columns: the line, end column and protocol of each, and
    what a subclass adds. `record(index)` makes one; `port_numbers()` is the column of ports."""

    __slots__ = ("lines", "end_columns", "protocols")

    def __init__(self):
        self.lines = array("I")  # 1-based; a dump is under 2**32 lines (max-file-mib)
        self.end_columns = array("I")
        self.protocols = array("B")  # index into PROTOCOLS

    @abstractmethod
    def record(self, index: int) -> Any:
        """The record at `index`, made now."""

    @abstractmethod
    def port_numbers(self) -> array:
        """The port of each record, as one column."""

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self.record(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("record index out of range")
        return self.record(index)

    def __iter__(self) -> Iterator:
        return map(self.record, range(len(self)))

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {len(self):,} records>"

    def on_ports(self, keys: Iterable[tuple[str, int]]) -> Iterator:
        """The records whose (protocol, port) is one of `keys`, in the dump's order: the port
        column is scanned, and only a match is made a record."""
        wanted = {(PROTOCOL_CODES.get(protocol, -1), port) for protocol, port in keys}
        ports = {port for _, port in wanted}
        protocols = self.protocols
        for index, port in enumerate(self.port_numbers()):
            if port in ports and (protocols[index], port) in wanted:
                yield self.record(index)


class VirtualServers(Table):
    """`ipvsadm -Sn`'s services. Each keeps its ADDRESS:PORT as written (what its `-a` lines
    name), the address read from it where that is not the text before the last colon
    (`[fd00::1]:80`), and how many real servers its `-a` lines name. The port is read from the
    text when asked for: few checks ask."""

    __slots__ = ("endpoints", "odd_addresses", "real_servers", "ports")

    def __init__(self):
        super().__init__()
        self.endpoints: list[str] = []
        self.odd_addresses: dict[int, str] = {}
        self.real_servers = array("I")
        self.ports: array | None = None  # made by `port_numbers`

    def append(self, line: int, end_column: int, protocol: int, endpoint: str, address: str) -> None:
        if address != endpoint[:endpoint.rindex(":")]:
            self.odd_addresses[len(self.lines)] = address
        self.lines.append(line)
        self.end_columns.append(end_column)
        self.protocols.append(protocol)
        self.endpoints.append(endpoint)
        self.real_servers.append(0)

    def port_numbers(self) -> array:
        if self.ports is None or len(self.ports) != len(self.endpoints):
            self.ports = array("H", map(int, map(itemgetter(2), map(str.rpartition, self.endpoints, repeat(":")))))
        return self.ports

    def record(self, index: int) -> VirtualServer:
        address, _, port = self.endpoints[index].rpartition(":")
        return VirtualServer(self.lines[index], self.end_columns[index], PROTOCOLS[self.protocols[index]],
                             self.odd_addresses.get(index, address), int(port), self.real_servers[index])


class Listeners(Table):
    """`ss`'s listening sockets: each one's address and processes. Equal addresses and process
    lists are one object (`ss -tlnup` repeats `0.0.0.0` and a server's pid on many lines)."""

    __slots__ = ("addresses", "ports", "processes")

    def __init__(self):
        super().__init__()
        self.addresses: list[str] = []
        self.ports = array("H")  # the reader refuses a port past 65535
        self.processes: list[tuple[tuple[str, int], ...]] = []

    def port_numbers(self) -> array:
        return self.ports

    def append(self, line: int, end_column: int, protocol: int, address: str, port: int,
               processes: tuple[tuple[str, int], ...]) -> None:
        self.lines.append(line)
        self.end_columns.append(end_column)
        self.protocols.append(protocol)
        self.addresses.append(address)
        self.ports.append(port)
        self.processes.append(processes)

    def record(self, index: int) -> Listener:
        return Listener(self.lines[index], self.end_columns[index], PROTOCOLS[self.protocols[index]],
                        self.addresses[index], self.ports[index], self.processes[index])


class DumpRecords(Sequence):
    """One node's records of a kind from all its dumps, in the dumps' order: records the model
    made (`append`), and readers' tables whose rows become the model's records when read
    (`add`)."""

    __slots__ = ("parts",)

    def __init__(self):
        self.parts: list[tuple[Sequence, Callable | None]] = []

    def append(self, made: Any) -> None:
        if not self.parts or not isinstance(self.parts[-1][0], list):
            self.parts.append(([], None))
        self.parts[-1][0].append(made)

    def add(self, table: Table, make: Callable[[Any], Any]) -> None:
        if len(table):
            self.parts.append((table, make))

    def __len__(self) -> int:
        return sum(len(records) for records, _ in self.parts)

    def __iter__(self) -> Iterator:
        return chain.from_iterable(records if make is None else map(make, records) for records, make in self.parts)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += len(self)
        for records, make in self.parts:
            if 0 <= index < len(records):
                return records[index] if make is None else make(records[index])
            index -= len(records)
        raise IndexError("record index out of range")

    def __repr__(self) -> str:
        return f"<DumpRecords: {len(self):,} records>"

    def on_ports(self, keys: Iterable[tuple[str, int]]) -> Iterator:
        """The records whose (protocol, port) is one of `keys`, in order; a table makes only those."""
        keys = set(keys)
        for records, make in self.parts:
            if make is None:
                yield from (made for made in records if (made.protocol, made.port) in keys)
            else:
                yield from map(make, records.on_ports(keys))
