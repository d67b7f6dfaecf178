"""The node command's inputs, read: which paths are snapshots (dumps) and which are manifests, each
snapshot in turn, and the `--cluster` files that say which pods run. Reading only: what the
documents and rows mean (running pods, Services) is the model's (`model.node_context`), handed in
as readers, as `Loading` takes a model reader."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubelint_ports.loading.yaml_files.documents import LoadResult, read_guarded
from kubelint_ports.loading.yaml_files.manifests import load_bytes
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.snapshot import cluster_file
from kubelint_ports.loading.snapshot.detect import detect
from kubelint_ports.loading.snapshot.pods_wide import PodRow, read_pods_wide
from kubelint_ports.loading.snapshot.read import Snapshot, load_snapshot
from kubelint_ports.vocabulary import Diagnostic, Location


def split_snapshot_paths(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """Snapshots (directories or files holding a tool's dump) and manifests (everything else)."""

    def dump(path: str) -> bool:
        try:
            with open(path, "rb") as handle:
                head = handle.read(65536).decode("utf-8", "replace")
        except OSError:
            return False
        return detect(head)[0] is not None

    snapshots: list[str] = []
    manifests: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            entries = [os.path.join(path, e) for e in sorted(os.listdir(path)) if not e.startswith(".")]
            files = [e for e in entries if os.path.isfile(e)]
            is_snapshot = any(dump(e) for e in files) or (files and not any(
                e.endswith((".yaml", ".yml", ".json")) for e in files))
        else:
            is_snapshot = os.path.isfile(path) and dump(path)
        (snapshots if is_snapshot or not os.path.exists(path) and not manifests else manifests).append(path)
    return snapshots, manifests


@dataclass(slots=True)
class SnapshotsRead:
    """What reading the snapshots gave besides the snapshots: files read, and their problems."""

    files: int = 0
    diagnostics: list[Diagnostic] = field(default_factory=list)


def read_snapshots(paths: Sequence[str], node: str | None, read: SnapshotsRead) -> Iterator[Snapshot]:
    """Each snapshot in turn (one node's dumps), its file count and problems added to `read`."""
    for path in paths:
        snapshot, problems = load_snapshot(path, node)
        read.diagnostics += problems
        read.files += len(snapshot.files) + len({d.location.path for d in problems})
        yield snapshot


def read_running(paths: Sequence[str], live: Callable[[Any], None] | None,
                 from_rows: Callable[[list[PodRow]], list], from_document: Callable[[Any], list]
                 ) -> tuple[list | None, list[Diagnostic]]:
    """What the `--cluster` files say runs (None: unknown), and their problems. Each file is read
    once (`cluster_file`): `kubectl get pods -o wide` rows go to `from_rows`, Kubernetes objects
    to `live` (the model reader of running objects: Services too) and to `from_document` (a field
    of the wrong type there is an error of the file). A file that cannot be read, is empty or has
    an error makes the pods unknown: a pod missing from a half-read list would look gone, and
    KP801 would tell the user to delete a live pod's rules."""
    if not paths:
        return None, []  # no --cluster: which pods run is unknown
    pods: list = []
    diagnostics: list[Diagnostic] = []
    known = True
    for path in paths:
        read = cluster_file.read_cluster_file(path)
        if read.kind == cluster_file.PROBLEM:
            diagnostics.append(Diagnostic(Location(read.shown, 0, 0), f"{read.problem}; the pods running are unknown"))
            known = False
            continue
        if read.kind == cluster_file.NOTHING:
            continue  # kubectl found no pods: the file lists none (`unmatched_nodes` says what that means)
        if read.kind == cluster_file.PODS_WIDE:
            rows, problems = read_pods_wide(read.text, read.shown)
            found = from_rows(rows)
        else:
            result = LoadResult()
            found = []

            def take(document, found=found, result=result):
                live(document)
                try:
                    found.extend(from_document(document))
                except yt.FieldTypeError as error:  # a pod's field of the wrong type: this file has an error
                    result.diagnostics.append(Diagnostic(document.node_location(error.node), str(error)))

            read_guarded(path, result, lambda: load_bytes(read.data, read.shown, result, reader=take))
            problems = result.diagnostics
            if not problems and not result.documents and result.skipped:
                problems = [Diagnostic(Location(read.shown, cluster_file.first_content_line(read.text), 1), (
                    "neither `kubectl get pods -A -o wide` text nor Kubernetes objects in YAML or JSON"))]
        if problems:
            diagnostics += [Diagnostic(d.location, f"{d.message} (--cluster: the pods running are unknown)", d.internal)
                            for d in problems]
            known = False
        pods += found
    return (pods if known else None), diagnostics
