"""One `--cluster` file of the node command, read once as bytes (a pipe such as
`<(kubectl get pods -A -o wide)` gives its bytes only once) and told apart by its content:
`kubectl get pods -A -o wide` text, Kubernetes objects in YAML or JSON, `No resources found`, or
a problem that makes the pods running unknown."""

from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass

from kubelint_ports.loading import budgets
from kubelint_ports.loading import files as input_files
from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading.snapshot.pods_wide import is_pods_wide

# kubectl prints its warnings on stderr; `kubectl get ... > f 2>&1` puts them among the output.
KUBECTL_WARNING = re.compile(rb"^Warning: [^\n]*", re.MULTILINE)
NO_RESOURCES = re.compile(r"No resources found\b")

PODS_WIDE, OBJECTS, NOTHING, PROBLEM = "pods-wide", "objects", "nothing", "problem"


@dataclass(frozen=True, slots=True)
class ClusterFile:
    shown: str  # the path as findings show it
    kind: str  # PODS_WIDE, OBJECTS, NOTHING (kubectl found no pods) or PROBLEM
    data: bytes = b""  # kubectl's warning lines blanked: line numbers keep their meaning
    text: str = ""
    problem: str = ""  # PROBLEM: why the file says nothing about the pods running


def read_cluster_file(path: str) -> ClusterFile:
    shown = display_path(path)
    limit = budgets.current().max_file_bytes
    seconds = budgets.current().input_seconds
    try:
        # Pipes named directly are read, never past the input's deadline; a FIFO without a writer
        # reads as empty at once.
        data = input_files.read_file(path, limit, time.monotonic() + seconds if seconds else None, pipes=True)
    except input_files.InputTimeout:
        return ClusterFile(shown, PROBLEM, problem=f"reading it took longer than {seconds:g} s (limit input-seconds)")
    except OSError as error:
        return ClusterFile(shown, PROBLEM, problem=f"cannot read: {error.strerror or error}")
    if len(data) > limit:
        return ClusterFile(shown, PROBLEM, problem=f"file is over the {limit // 2**20} MiB limit (limit max-file-mib); "
                                                   f"not read")
    if b"\0" in data[:65536]:
        return ClusterFile(shown, PROBLEM, problem="binary data, not `kubectl get pods` output")
    data = KUBECTL_WARNING.sub(b"", data)
    text = data.decode("utf-8", "replace").removeprefix("\ufeff")  # a BOM would hide the header's first word
    if not text.strip():
        what = "a pipe that nobody wrote to" if is_pipe(path) else "the file is empty"
        return ClusterFile(shown, PROBLEM, problem=f"nothing to read: {what}; expected `kubectl get pods -A -o wide` "
                                                   f"or `kubectl get pods,svc -A -o yaml` output")
    if NO_RESOURCES.match(text.lstrip()):
        return ClusterFile(shown, NOTHING, data, text)
    return ClusterFile(shown, PODS_WIDE if is_pods_wide(text) else OBJECTS, data, text)


def is_pipe(path: str) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


def first_content_line(text: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            return number
    return 1
