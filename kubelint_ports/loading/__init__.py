"""Files, directories, standard input and Helm charts -> Kubernetes object documents with positions.

libyaml's C composer (PyYAML `CSafeLoader`) builds the node tree: it keeps line/column marks,
constructs no Python objects (so no tag can run code) and is the fastest marked path measured
here (see README, design notes). Aliases are shared nodes, never copied, and a document whose
aliases would expand past a budget is rejected before anything walks it.

A directory holding `Chart.yaml` is a Helm chart: it is rendered (`loading.helm`, imported only
then) and its raw `templates/` are never read as YAML. A directory holding a kustomization is
rendered the same way (`loading.kustomize`): its patches are fragments, not objects.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import yaml

from kubelint_ports.findings import COMMAND_LINE, STDIN_NAME, Diagnostic, Location
from kubelint_ports.loading import budgets, files, yamltree
from kubelint_ports.loading.yamltree import MappingNode, Node, ScalarNode, SequenceNode

if TYPE_CHECKING:
    from kubelint_ports.loading.helm import HelmOptions

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json", ".conflist")  # .conflist: a CNI network configuration list
SKIPPED_DIRECTORIES = frozenset(("node_modules", "__pycache__"))  # never manifests, often huge
STDIN = "-"
# Empty standard input is an input error: `helm template ... | kubelint-ports lint -` whose first
# command failed must not pass as "nothing found".
EMPTY_STDIN = "standard input is empty: nothing was linted (did the command before the pipe fail?)"
CHART_FILE = "Chart.yaml"  # a directory holding it is a Helm chart
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")  # a Kustomize directory
KUSTOMIZATION_FILES_SET = frozenset(KUSTOMIZATION_FILES)

_SOURCE_COMMENT = re.compile(rb"^# Source: ([^\r\n]+?)[ \t]*\r?$", re.MULTILINE)


class ManifestLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """Composes without implicit typing: the readers in `yamltree` type the few fields they read.

    PyYAML's resolver runs a Python regex per scalar, which costs more than libyaml's parsing.
    """

    def resolve(self, kind, value, implicit):
        if kind is ScalarNode:
            return yamltree.PLAIN if implicit[0] else yamltree.STR
        return yamltree.SEQ if kind is SequenceNode else yamltree.MAP


@dataclass(slots=True)
class Document:
    """One Kubernetes object: a mapping node with its file and, for Helm output, its template."""

    path: str
    root: MappingNode
    origin: str = ""  # `# Source:` template path of `helm template` output

    def location(self, field_path: str = "", message: str = "") -> Location:
        key_node, value_node = yamltree.resolve(self.root, field_path) if field_path else (None, self.root)
        start = (key_node or value_node).start_mark
        end = value_node.end_mark
        if isinstance(value_node, (MappingNode, SequenceNode)) and key_node is not None:
            end = key_node.end_mark  # a whole block would span many lines; the key is the place
        return Location(self.path, start.line + 1, start.column + 1, end.line + 1, end.column + 1, message)

    def identity_path(self, field_path: str) -> str:
        """`field_path` with list items named instead of counted (what fingerprints hash)."""
        return yamltree.identity_path(self.root, field_path)

    def node_location(self, node: Node) -> Location:
        """Where a node of this document is (a rendered Helm object maps it to its template)."""
        return node_location(self.path, node)

    def value_locations(self, field_path: str) -> tuple[Location, ...]:
        """Where the value at `field_path` is set when not in this file: the values-file lines of a
        rendered Helm object. Plain manifests hold their values themselves."""
        return ()


@dataclass(slots=True)
class LoadResult:
    documents: list[Document] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: int = 0
    skipped: int = 0  # YAML documents that are not Kubernetes objects
    notes: list[str] = field(default_factory=list)  # what was passed over and why (not errors)


def display_path(path: str) -> str:
    """Paths as the user will click them: relative to the working directory when inside it."""
    if path == STDIN:
        return STDIN_NAME
    if not path:
        return "''"  # an empty argument: reported as unreadable, never read as the current directory
    relative = os.path.relpath(path)
    shown = path if relative.startswith("..") else relative
    return shown.replace(os.sep, "/")


def discover(paths: Iterable[str], notes: list[str] | None = None) -> Iterator[str]:
    """Files named directly, and manifest files below directories (sorted, hidden ones skipped).

    A Helm chart (a directory with `Chart.yaml`) is yielded as its directory, once, and not
    walked; a raw template file given directly yields its chart instead. So is a Kustomize
    directory, and a file given directly inside one (a patch, a base's resource) yields it. Below a
    directory only regular files are yielded, and symlinks only to targets inside it; what is passed
    over for that is said in `notes`.
    """
    charts: set[str] = set()
    kustomizations: dict[str, str | None] = {}  # directory -> its Kustomize directory, for files given
    notes = notes if notes is not None else []
    max_depth = budgets.current().max_depth

    def chart_once(directory: str) -> Iterator[str]:
        key = os.path.abspath(directory)
        if key not in charts:
            charts.add(key)
            yield directory

    for path in paths:
        if path == STDIN:
            yield path
            continue
        if not os.path.isdir(path):
            unit = _chart_of_template(path) or _kustomization_of(path, kustomizations)
            yield from chart_once(unit) if unit else (path,)
            continue
        for directory, subdirs, entries, walk_notes in files.walk_tree(path, max_depth):
            notes.extend(walk_notes)
            names = {entry.name for entry in entries}
            if CHART_FILE in names or not KUSTOMIZATION_FILES_SET.isdisjoint(names):
                subdirs[:] = []
                yield from chart_once(directory)
                continue
            subdirs[:] = [d for d in subdirs if not d.startswith(".") and d not in SKIPPED_DIRECTORIES]
            for entry in entries:
                if entry.name.endswith(MANIFEST_SUFFIXES) and not entry.name.startswith("."):
                    problem = files.entry_problem(entry, path)
                    if problem is None:
                        yield entry.path
                    else:
                        notes.append(f"{display_path(entry.path)}: skipped, {problem}")


def _chart_of_template(path: str) -> str | None:
    """The chart of a raw template file (`chart/templates/...`): cheap unless inside `templates/`."""
    directory = os.path.dirname(os.path.abspath(path))
    while os.path.dirname(directory) != directory:
        if os.path.basename(directory) == "templates" and os.path.isfile(
                os.path.join(os.path.dirname(directory), CHART_FILE)):
            from kubelint_ports.loading.helm import chart_of_template

            return chart_of_template(path)
        directory = os.path.dirname(directory)
    return None


def is_kustomization(directory: str) -> bool:
    return any(os.path.isfile(os.path.join(directory, name)) for name in KUSTOMIZATION_FILES)


def _kustomization_of(path: str, known: dict[str, str | None]) -> str | None:
    """The Kustomize directory a file belongs to: the nearest one above it, within its repository."""
    directory = os.path.dirname(os.path.abspath(path))
    climbed: list[str] = []
    found = None
    while directory not in known:
        climbed.append(directory)
        if is_kustomization(directory):
            found = directory
            break
        parent = os.path.dirname(directory)
        if parent == directory or os.path.exists(os.path.join(directory, ".git")):
            break  # a kustomization above the repository is not this project's
        directory = parent
    else:
        found = known[directory]
    for seen in climbed:
        known[seen] = found
    if found is None:
        return None
    return found if os.path.isabs(path) else os.path.relpath(found)


def load(paths: Iterable[str], stdin=None, helm: HelmOptions | None = None, *,
         chart_helm: Mapping[str, HelmOptions] | None = None, exclude: Callable[[str], bool] | None = None
         ) -> LoadResult:
    """Read every input; `helm` renders charts (`chart_helm`: per chart directory, by absolute
    path) and maps `helm template` output to its templates; `exclude` skips paths.

    Each input is read within the `input-seconds` budget, and an unexpected failure on one input
    is an internal error naming it: the other inputs are still read."""
    result = LoadResult()
    paths = tuple(paths)
    given = []
    for path in paths:
        if path == STDIN or os.path.exists(path):
            given.append(path)
        else:  # a path the user typed: point at the command line, not at a line of no file
            result.diagnostics.append(Diagnostic(Location(COMMAND_LINE, 0, 0),
                                                 f"no such file or directory {display_path(path)!r}"))
    kustomizations: list[str] = []  # rendered after the files: which of them are bases needs them all
    seconds = budgets.current().input_seconds
    for path in discover(given, result.notes):
        if exclude is not None and path != STDIN and exclude(path):
            continue
        if path != STDIN and os.path.isdir(path) and not os.path.isfile(os.path.join(path, CHART_FILE)):
            kustomizations.append(path)
            continue
        before = (len(result.documents), len(result.diagnostics), result.files, result.skipped)
        try:
            with files.time_limit(seconds):
                load_input(path, stdin, helm, chart_helm, result)
        except files.InputTimeout:
            forget_input(result, before)
            result.diagnostics.append(Diagnostic(Location(display_path(path), 0, 0), (
                f"reading it took longer than {seconds:g} s (limit input-seconds); not linted")))
        except Exception as error:  # a bug: name the input, keep the others
            forget_input(result, before)
            result.diagnostics.append(internal_error(display_path(path), error))
    if kustomizations:
        from kubelint_ports.loading.kustomize import load_kustomizations

        try:
            load_kustomizations(kustomizations, paths, result)
        except Exception as error:  # a bug: name the builds, keep what the other inputs gave
            result.diagnostics.append(internal_error(", ".join(map(display_path, kustomizations)), error))
    return result


def forget_input(result: LoadResult, before: tuple[int, int, int, int]) -> None:
    """Drop what a failed input added, but count it as read."""
    documents, diagnostics, files_read, skipped = before
    del result.documents[documents:], result.diagnostics[diagnostics:]
    result.files, result.skipped = files_read + 1, skipped


def internal_error(where: str, error: BaseException) -> Diagnostic:
    """An unexpected exception, reported against the input that caused it (exit code 3)."""
    return Diagnostic(Location(where, 0, 0), f"internal error (a bug in kubelint-ports; please report it): {type(error).__name__}: "
                                             f"{str(error)[:500]}", internal=True)


def load_input(path: str, stdin, helm: HelmOptions | None, chart_helm: Mapping[str, HelmOptions] | None,
               result: LoadResult) -> None:
    if path != STDIN and os.path.isdir(path):
        from kubelint_ports.loading.helm import load_chart

        load_chart(path, (chart_helm or {}).get(os.path.abspath(path), helm), result)
        return
    shown = display_path(path)
    result.files += 1
    limit = budgets.current().max_file_bytes
    escape = files.symlink_escape(path) if path != STDIN else None
    if escape:
        result.diagnostics.append(Diagnostic(Location(shown, 0, 0), (
            f"not read: a symlink to {escape}, outside the current directory and its own")))
        return
    try:
        data = read_bytes(path, stdin)
    except OSError as error:
        result.diagnostics.append(Diagnostic(Location(shown, 0, 0), f"cannot read: {error.strerror or error}"))
        return
    if len(data) > limit:
        result.diagnostics.append(Diagnostic(
            Location(shown, 0, 0), f"file is over the {limit // 2**20} MiB limit (limit max-file-mib); not linted"))
        return
    if path == STDIN and not data.strip():
        result.diagnostics.append(Diagnostic(Location(shown, 0, 0), EMPTY_STDIN))
        return
    first = len(result.documents)
    load_bytes(data, shown, result)
    if any(document.origin for document in result.documents[first:]):
        from kubelint_ports.loading.helm import map_template_output

        result.documents[first:] = map_template_output(result.documents[first:], helm)


def read_bytes(path: str, stdin) -> bytes:
    limit = budgets.current().max_file_bytes
    if path == STDIN:
        import sys

        stream = stdin if stdin is not None else sys.stdin.buffer
        return stream.read(limit + 1)
    return files.read_file(path, limit, pipes=True)


def load_bytes(data: bytes, path: str, result: LoadResult) -> None:
    """Parse one file's documents into `result`; a YAML error keeps the documents before it."""
    origins = source_comments(data)
    has_aliases = budgets.may_have_aliases(data)
    previous_end = -1
    try:
        for root in budgets.compose_all(data, loader=ManifestLoader, expand_check=False):
            start_line = root.start_mark.line
            origin = origin_for(origins, previous_end, start_line)
            previous_end = root.end_mark.line
            try:
                if has_aliases:
                    budgets.check_expansion(root)
                add_document(root, path, origin, result)
            except (budgets.LimitError, yamltree.FieldTypeError) as error:
                result.diagnostics.append(Diagnostic(node_location(path, error.node), str(error)))
    except budgets.LimitError as error:  # over a budget before composing: the place the scan found
        mark = error.problem_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        result.diagnostics.append(Diagnostic(Location(path, line, column), str(error)))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = " ".join(filter(None, (error.context, error.problem)))
        result.diagnostics.append(Diagnostic(Location(path, line, column), f"invalid YAML: {problem}"))
    except yaml.YAMLError as error:  # reader errors: bad encoding, control characters
        position = getattr(error, "position", 0) or 0
        line = data.count(b"\n", 0, position) + 1
        reason = getattr(error, "reason", "") or str(error)
        result.diagnostics.append(Diagnostic(Location(path, line, 1), f"unreadable YAML: {reason}"))


def node_location(path: str, node: Node) -> Location:
    mark = node.start_mark
    return Location(path, mark.line + 1, mark.column + 1)


def source_comments(data: bytes) -> tuple[list[int], list[str]]:
    """Line numbers (0-based) and paths of `# Source:` comments written by `helm template`."""
    lines: list[int] = []
    sources: list[str] = []
    if b"# Source:" not in data:
        return lines, sources
    line, position = 0, 0
    for match in _SOURCE_COMMENT.finditer(data):
        line += data.count(b"\n", position, match.start())
        position = match.start()
        lines.append(line)
        sources.append(match.group(1).decode("utf-8", "replace"))
    return lines, sources


def origin_for(origins: tuple[list[int], list[str]], previous_end: int, start_line: int) -> str:
    lines, sources = origins
    index = bisect.bisect_right(lines, start_line) - 1
    if index >= 0 and lines[index] >= previous_end:
        return sources[index]
    return ""


def add_document(root: Node, path: str, origin: str, result: LoadResult) -> None:
    if yamltree.is_null(root):
        return  # an empty document between `---` separators
    if not isinstance(root, MappingNode):
        result.diagnostics.append(Diagnostic(
            node_location(path, root), f"document is {yamltree.describe(root)}, not a Kubernetes object mapping"))
        return
    api_version = yamltree.get(root, "apiVersion")
    kind = yamltree.get(root, "kind")
    if api_version is None or kind is None:
        if yamltree.get(root, "cniVersion") is not None and yamltree.get(root, "plugins") is not None:
            result.documents.append(Document(path, root, origin))  # a CNI conflist: the model reads facts
            return
        result.skipped += 1
        return
    kind_text = yamltree.as_str(kind)
    list_items = yamltree.get(root, "items")
    if kind_text.endswith("List") and list_items is not None:
        for item in yamltree.items(list_items, "items"):
            add_document(item, path, origin, result)
        return
    result.documents.append(Document(path, root, origin))
