"""Snapshot directories -> their files, each recognised by content and read by its tool's reader.

A file with any problem (truncated, the wrong tool, an unknown chain or match module) is left out
whole, with a diagnostic at its line: a half-read ruleset would make rules look missing. The
other files of the snapshot are still read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kubelint_ports.findings import COMMAND_LINE, Diagnostic, Location
from kubelint_ports.loading import budgets, display_path, files
from kubelint_ports.loading.snapshot.detect import KINDS, detect
from kubelint_ports.loading.snapshot.records import SnapshotFile


@dataclass(slots=True)
class Snapshot:
    """One node's files as read: the node's name and every file that read cleanly."""

    node: str
    path: str
    files: list[SnapshotFile] = field(default_factory=list)


def load_snapshot(path: str, node: str | None = None) -> tuple[Snapshot, list[Diagnostic]]:
    """A directory of dumps (or a single dump file); the node is named by `node` or the directory."""
    directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    name = node or os.path.basename(os.path.normpath(os.path.abspath(directory)))
    snapshot = Snapshot(name, display_path(path))
    diagnostics: list[Diagnostic] = []
    if not os.path.exists(path):
        return snapshot, [Diagnostic(Location(COMMAND_LINE, 0, 0), f"no such snapshot {display_path(path)!r}")]
    if os.path.isdir(path):
        names = sorted(entry for entry in os.listdir(path)
                       if not entry.startswith(".") and os.path.isfile(os.path.join(path, entry)))
        files = [os.path.join(path, entry) for entry in names]
        if not files:
            diagnostics.append(Diagnostic(Location(display_path(path), 0, 0),
                                          "the snapshot directory holds no files (see `kubelint-ports node --help`)"))
    else:
        files = [path]
    for file_path in files:
        read, problems = read_file(file_path)
        diagnostics += problems
        if read is not None and not problems:
            snapshot.files.append(read)
    diagnostics += missing_backend(snapshot)
    return snapshot, diagnostics


def missing_backend(snapshot: Snapshot) -> list[Diagnostic]:
    """iptables-nft-save warns when iptables-legacy tables exist too: kube-proxy or portmap may have
    written there (mixed legacy/nft nodes), so without that dump the rule order is unknown."""
    rulesets = [read.ruleset for read in snapshot.files if read.kind == "iptables-save" and read.ruleset]
    if any(ruleset.backend == "legacy" for ruleset in rulesets):
        return []
    return [Diagnostic(Location(ruleset.path, ruleset.other_backend_line, 1), (
        "iptables-legacy tables are present on this node as well, and the snapshot lacks them: add the "
        "output of `iptables-legacy-save` (rules in both backends both run, so the order cannot be told "
        "from one)")) for ruleset in rulesets if ruleset.other_backend_line]


def read_file(path: str) -> tuple[SnapshotFile | None, list[Diagnostic]]:
    shown = display_path(path)
    limit = budgets.current().max_file_bytes
    try:
        data = files.read_file(path, limit)
    except OSError as error:
        return None, [Diagnostic(Location(shown, 0, 0), f"cannot read: {error.strerror or error}")]
    if len(data) > limit:
        return None, [Diagnostic(Location(shown, 0, 0),
                                 f"file is over the {limit // 2**20} MiB limit (limit max-file-mib); not read")]
    if b"\0" in data[:65536]:
        return None, [Diagnostic(Location(shown, 1, 1), "binary data, not the text output of a tool")]
    # A dump copied through Windows has CRLF line ends; no tool prints a carriage return of its
    # own at a line's end, so dropping them keeps every line (and its number) as printed.
    text = data.decode("utf-8", "replace").replace("\r\n", "\n")
    kind, why = detect(text)
    if kind is None:
        if why == "the file is empty":
            return None, []  # a tool that found nothing prints nothing
        return None, [Diagnostic(Location(shown, first_line(text), 1), f"not a snapshot dump: {why}")]
    return parse(kind, text, shown)


# kind -> (reader module, reader function, the SnapshotFile field it fills); modules load on demand.
READERS = {
    "iptables-save": ("iptables_save", "read_iptables_save", "ruleset"),
    "nft": ("nft", "read_nft", "ruleset"),
    "nft-json": ("nft", "read_nft_json", "ruleset"),
    "ipvsadm": ("ipvsadm", "read_ipvsadm", "virtual_servers"),
    "ipset": ("ipset", "read_ipset", "sets"),
    "ss": ("ss", "read_ss", "listeners"),
    "ip-addr": ("ip_addr", "read_ip_addr", "addresses"),
    "ipam": ("ipam", "read_ipam", "leases"),
    "crictl-pods": ("crictl", "read_crictl_pods", "sandboxes"),
    "sysctl": ("sysctl", "read_sysctl", "sysctls"),
}
assert READERS.keys() == KINDS.keys()


def parse(kind: str, text: str, shown: str) -> tuple[SnapshotFile, list[Diagnostic]]:
    """Run the reader of `kind`: each format has a module of its own."""
    import importlib

    module, function, field_name = READERS[kind]
    records, problems = getattr(importlib.import_module(f"kubelint_ports.loading.snapshot.{module}"), function)(text, shown)
    read = SnapshotFile(shown, kind)
    setattr(read, field_name, records)
    return read, problems


def first_line(text: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            return number
    return 1
