"""Kustomize directories -> rendered documents whose positions are the resource and patch files' lines.

A directory holding a kustomization is built with `kustomize build` or `kubectl kustomize` (whichever
is on PATH), never read file by file: its patches are fragments, not objects. The build runs a
temporary kustomization that lists the directory as its only resource and asks for
`buildMetadata: [originAnnotations]`, so every rendered object names the file it came from; the
user's files are never changed.

A field of a rendered object lands on the last patch that writes it (a strategic-merge patch holding
the field, or a JSON 6902 operation whose path covers it), else on the field in the resource file the
object came from, else on the nearest parent written there. List items are matched by their merge
key (`name`, `containerPort`, `port`, ...), since patches add and reorder items.

The parts: `kustomize_guard` checks, before anything runs, every file the build will read (no
remote reference, nothing outside its kustomization's directory or the allowed root, YAML within
the budgets, at most `kustomize-generators` generator entries); `kustomize_build` runs kustomize
without network, in time and memory budgets; `kustomize_tree` reads the kustomizations and their
patches; `kustomize_positions` maps a rendered field to its line, trusting an origin annotation
only when it names a file the build read. A directory used as a base (or component) by another one
in the same run is built only as part of it, unless named on the command line.

Importing this module imports neither `subprocess` nor `tempfile`: only building pays for them.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable

from kubelint_ports.vocabulary import Diagnostic, Location
from kubelint_ports.loading.yaml_files.documents import Document, DocumentReader, LoadResult, SourceText
from kubelint_ports.loading import budgets, build_cache
from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading.yaml_files.manifests import load_bytes
from kubelint_ports.loading import files as input_files
from kubelint_ports.loading.yaml_files import yamltree as yt
# The pieces of the parts that tests and readers reach through this face are imported here too.
from kubelint_ports.loading.kustomize.build import (  # noqa: F401
    build, kustomize_commands, kustomize_message, network_sandbox, sandbox_note)
from kubelint_ports.loading.kustomize.guard import BuildReads, Guard
from kubelint_ports.loading.kustomize.positions import (  # noqa: F401
    ORIGIN_ANNOTATION,
    KustomizeDocument,
    SourceFiles,
    json_pointer,
    matching_item,
    pointer_covers,
    take_origin,
)
from kubelint_ports.loading.kustomize.tree import (  # noqa: F401
    Kustomization,
    KustomizeError,
    Reader,
    compose_text,
    kustomization_file,
    node_span,
    selects,
)

# Kustomization fields naming other files or directories: a build error naming one is placed on it.
_FILE_LISTS = ("resources", "bases", "components", "crds", "configurations", "generators", "transformers",
               "validators", "patchesStrategicMerge")


def load_kustomizations(directories: list[str], named: Iterable[str], result: LoadResult,
                        document_reader: DocumentReader | None = None) -> dict[str, frozenset[str]]:
    """Build every Kustomize directory that no other one in the run builds on (or that was named on
    the command line), and add its objects, positioned in their files, to `result`. Returns, per
    directory that was read, the real paths of the files its build reads."""
    guard = Guard()
    checked: set[str] = set()  # real paths of the files the guard read: the only ones opened after it
    reader = Reader(checked)
    trees: dict[str, Kustomization | KustomizeError] = {}
    read_by: dict[str, BuildReads] = {}
    for directory in directories:
        try:
            read_by[directory] = guard.build(directory)
            checked |= read_by[directory].files
            trees[directory] = reader.kustomization(directory)
        except KustomizeError as error:
            trees[directory] = error
    used = {id(base) for tree in trees.values() if isinstance(tree, Kustomization)
            for base in tree.walk() if base is not tree}
    explicit = {os.path.abspath(path) for path in named}
    wanted = [directory for directory in directories if not (
        isinstance(trees[directory], Kustomization) and (trees[directory].component or (
            id(trees[directory]) in used and os.path.abspath(directory) not in explicit)))]  # built by their users
    to_build = [directory for directory in wanted if isinstance(trees[directory], Kustomization)]
    if to_build and (note := sandbox_note()):
        result.notes.append(note)
    builds = build_all(to_build, read_by)
    for directory in wanted:
        tree = trees[directory]
        outcome = builds[directory] if isinstance(tree, Kustomization) else tree
        if not isinstance(outcome, KustomizeError):
            try:
                add_built(directory, tree, *outcome, result, document_reader, read_by[directory].files)
                continue
            except KustomizeError as error:
                outcome = error
        result.files += 1
        file = tree.file if isinstance(tree, Kustomization) else kustomization_file(directory) or directory
        where = outcome.location or (entry_location(tree, str(outcome)) if isinstance(tree, Kustomization)
                                     else None) or Location(display_path(file), 0, 0)
        result.diagnostics.append(Diagnostic(where, f"cannot build Kustomize directory "
                                                    f"{display_path(directory)}: {outcome}"))
    return {directory: frozenset(reads.files) for directory, reads in read_by.items()}


def build_all(directories: list[str], read_by: dict[str, BuildReads]) -> dict[str, tuple[str, str] | KustomizeError]:
    """Every build's output or error; several run at once (each is a process that mostly waits)."""
    programs = [command[0] for command in kustomize_commands()]

    def attempt(directory: str) -> tuple[str, str] | KustomizeError:
        try:  # kept with the cache on (`build_cache`): keyed by the programs and every file the build reads
            built = build_cache.kept_output("kustomize", [os.path.abspath(directory)], programs,
                                            read_by[directory].files,
                                            lambda: list(build(directory, read_by[directory])), build_cache.is_build)
            return built[0], built[1]
        except KustomizeError as error:
            return error

    if len(directories) <= 1:
        return {directory: attempt(directory) for directory in directories}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(len(directories), os.cpu_count() or 1, 8)) as pool:
        return dict(zip(directories, pool.map(attempt, directories)))


def entry_location(tree: Kustomization, message: str) -> Location | None:
    """The kustomization line naming a file the error message names (a missing resource ...)."""
    for node in tree.walk():
        if not isinstance(node.root, yt.MappingNode):
            continue
        for key in (*_FILE_LISTS, "patches", "patchesJson6902"):
            listed = yt.get(node.root, key)
            for item in listed.value if isinstance(listed, yt.SequenceNode) else ():
                entry = yt.get(item, "path") if isinstance(item, yt.MappingNode) else item
                if isinstance(entry, yt.ScalarNode) and "\n" not in entry.value and len(entry.value) > 2 and (
                        f"'{entry.value}'" in message or os.path.normpath(os.path.join(node.directory, entry.value)) in message):
                    return node_span(display_path(node.file), None, entry)
    return None


def add_built(directory: str, tree: Kustomization, text: str, scratch: str, result: LoadResult,
              reader: DocumentReader | None = None, trusted: frozenset[str] = frozenset()) -> None:
    """A build's objects, with their origins and the patches that may have written them. An origin
    is followed only to a file of `trusted` (real paths of the files the build read)."""
    data = text.encode("utf-8")
    limit = budgets.current().max_file_bytes
    if len(data) > limit:
        raise KustomizeError(f"renders {len(data) / 2**20:.0f} MiB, over the {limit // 2**20} MiB limit "
                             f"(limit max-file-mib)")
    shown = display_path(directory)
    rendered = LoadResult()
    applied = tree.applied_patches()
    sources = SourceFiles()
    files: set[str] = set()
    untrusted: list[str] = []

    def placed(document: Document) -> KustomizeDocument:
        origin = take_origin(document.root, scratch, trusted)
        source_file, generator = origin.file, origin.generator
        if not origin.trusted:
            if origin.file:
                untrusted.append(origin.named)
            # no origin (kustomize made it without a file: a plugin), or one naming a file the build
            # did not read: the kustomization built stands for it
            source_file, generator = tree.file, ""
        files.add(source_file)
        return KustomizeDocument(display_path(source_file), document.root, shown, document.text_source,
                                 document.span, document.items, document.annotations, source_file=source_file,
                                 sources=sources, applied=applied, generator=generator, unit=shown)

    # The build's output is kept: positions compose its objects again when findings need them.
    load_bytes(data, shown, rendered, reader=reader, source=SourceText(data=data, digest=zlib.crc32(data)),
               wrap=placed)
    for diagnostic in rendered.diagnostics:
        result.diagnostics.append(Diagnostic(
            Location(display_path(tree.file), 0, 0),
            f"{shown} renders to invalid Kubernetes YAML (line {diagnostic.location.line} of its output): "
            f"{diagnostic.message}"))
    if untrusted:
        result.notes.append(
            f"{shown}: {len(untrusted)} object(s) carry a {ORIGIN_ANNOTATION} annotation naming a file the build "
            f"did not read (first: {input_files.excerpt(untrusted[0], 200)}); it is not opened, and their findings "
            f"are placed on {display_path(tree.file)}")
    result.skipped += rendered.skipped
    result.documents += rendered.documents
    result.files += max(1, len(files))


__all__ = ["KustomizeDocument", "KustomizeError", "build", "load_kustomizations"]
