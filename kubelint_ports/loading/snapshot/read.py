"""Snapshot directories -> their files, each recognised by content and read by its tool's reader.

A file with any problem (truncated, the wrong tool, an unknown chain or match module) is left out
whole, with a diagnostic at its line: a half-read ruleset would make rules look missing. The
other files of the snapshot are still read.

Only regular files directly in the directory are dumps. Subdirectories, FIFOs and devices are
passed over with a note (a snapshot is one node's files; a FIFO would block the read forever),
and so is a symlink whose target leaves the snapshot directory: a committed `ss -> ~/.ssh/id_rsa`
is never read, let alone quoted in a report (`files.entry_problem`, as the lint command walks).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kubelint_ports.loading import budgets
from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading import files as input_files
from kubelint_ports.loading.snapshot.detect import KINDS, detect
from kubelint_ports.loading.snapshot.dump_records import SnapshotFile
from kubelint_ports.loading.snapshot.text import UTF16_BOMS, decode, lines
from kubelint_ports.vocabulary import COMMAND_LINE, Diagnostic, Location


@dataclass(slots=True)
class Snapshot:
    """One node's files as read: the node's name and every file that read cleanly."""

    node: str
    path: str
    files: list[SnapshotFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # entries passed over on purpose (subdirectories, outside links)


def load_snapshot(path: str, node: str | None = None) -> tuple[Snapshot, list[Diagnostic]]:
    """A directory of dumps (or a single dump file); the node is named by `node` or the directory."""
    directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    name = node or os.path.basename(os.path.normpath(os.path.abspath(directory)))
    snapshot = Snapshot(name, display_path(path))
    diagnostics: list[Diagnostic] = []
    if not os.path.exists(path):
        return snapshot, [Diagnostic(Location(COMMAND_LINE, 0, 0), f"no such snapshot {display_path(path)!r}")]
    if os.path.isdir(path):
        try:
            files, subdirectories = snapshot_entries(path, snapshot.notes)
        except OSError as error:
            return snapshot, [Diagnostic(Location(display_path(path), 0, 0),
                                         f"cannot read the snapshot directory: {error.strerror or error}")]
        if not files:
            diagnostics.append(Diagnostic(Location(display_path(path), 0, 0), (
                "the snapshot directory holds no dump files, only directories: give each node's directory as a "
                "snapshot (`snapshots/*`)" if subdirectories else
                "the snapshot directory holds no files (see `kubelint-ports node --help`)")))
    else:
        escape = input_files.symlink_escape(path)
        if escape:  # as for a manifest named directly: a link out of here is not followed
            return snapshot, [Diagnostic(Location(display_path(path), 0, 0),
                                         "not read: a symlink to a file outside the current directory and its own")]
        files = [path]
    for file_path in files:
        read, problems = read_file(file_path)
        diagnostics += problems
        if read is not None and not problems:
            snapshot.files.append(read)
    diagnostics += missing_backend(snapshot)
    return snapshot, diagnostics


def snapshot_entries(directory: str, notes: list[str]) -> tuple[list[str], int]:
    """The dump files of a snapshot directory (sorted, hidden ones skipped) and how many
    subdirectories it holds; what is passed over, and why, goes to `notes`. A symlink is read only
    when its target is inside the directory. OSError when the directory cannot be listed."""
    with os.scandir(directory) as listing:
        entries = sorted((entry for entry in listing if not entry.name.startswith(".")), key=lambda e: e.name)
    found = []
    subdirectories = 0
    for entry in entries:
        problem = input_files.entry_problem(entry, directory)
        if problem is None:
            found.append(entry.path)
        elif problem.startswith("a symlink to "):  # the target's path stays out of the report too
            notes.append(f"{display_path(entry.path)}: skipped, a symlink leaving the snapshot directory "
                         f"{display_path(directory)}: not followed")
        elif problem == "a directory":
            subdirectories += 1
            through = " (a symlink)" if entry.is_symlink() else ""
            notes.append(f"{display_path(entry.path)}: skipped, a directory{through}: a snapshot is one node's dump "
                         "files; give each node's directory as a snapshot of its own")
        else:
            notes.append(f"{display_path(entry.path)}: skipped, {problem}")
    return found, subdirectories


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
        data = input_files.read_file(path, limit)
    except OSError as error:
        return None, [Diagnostic(Location(shown, 0, 0), f"cannot read: {error.strerror or error}")]
    if len(data) > limit:
        return None, [Diagnostic(Location(shown, 0, 0),
                                 f"file is over the {limit // 2**20} MiB limit (limit max-file-mib); not read")]
    if data.startswith(UTF16_BOMS):  # PowerShell 5's `>` writes UTF-16
        return None, [Diagnostic(Location(shown, 1, 1), "UTF-16 text: save the dump as UTF-8 (PowerShell: "
                                                        "`| Out-File -Encoding utf8`, or copy it with scp)")]
    if b"\0" in data[:65536]:
        return None, [Diagnostic(Location(shown, 1, 1), "binary data, not the text output of a tool")]
    text = decode(data)
    del data  # as large again as the text, and not needed once decoded
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
    "nft-json": ("nft_json", "read_nft_json", "ruleset"),
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
    for number, line in enumerate(lines(text), start=1):
        if line.strip():
            return number
    return 1
