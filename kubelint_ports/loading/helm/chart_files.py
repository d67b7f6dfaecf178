"""What a chart holds, checked before Helm reads it: Helm follows symlinks, blocks on FIFOs, unpacks
`charts/*.tgz` and fetches the schemas a `values.schema.json` refers to, so each is settled here.

- A symlink is followed by Helm, so it may lead only where the user pointed the tool: inside the
  chart, the input named that holds it, or the repository (the git work tree) holding it; one
  leaving all three, or looping back onto its own parent, is refused. A symlinked directory is
  checked like the chart itself.
- A FIFO or device is refused (Helm would block on it), so is an archived subchart that
  `helm_archive` refuses (links or paths leaving it, more data than the budgets, a gzip bomb).
- A values schema referring outside itself (a `$ref` that is not `#...`, an unknown `$schema`) is
  not refused: Helm validates against a copy with those parts made always-true
  (`worker.local_schema`), and a note at the first such reference says so. Nothing is fetched.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field

from kubelint_ports.sourceroot import git_work_tree
from kubelint_ports.loading import budgets, files
from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading.helm.archive import ArchiveError, ChartArchive, chart_archive
from kubelint_ports.loading.helm.chart import RenderError
from kubelint_ports.loading.helm.worker import SCHEMA_FILE, outside_reference

# `"$ref": "..."` in a schema's text, to point the note at the line of the first outside one
# (json.loads keeps no positions); an escaped quote (inside a string) starts none.
_REFERENCE_TEXT = re.compile(r'(?<!\\)"(\$(?:ref|dynamicRef|recursiveRef|schema))"\s*:\s*"((?:[^"\\]|\\.)*)"')


@dataclass(slots=True)
class ChartFiles:
    """What the checks found that does not stop the render."""

    notes: list[str] = field(default_factory=list)  # for the user, `path:line:column: text`
    local_schemas: bool = False  # a values schema refers outside itself: Helm gets a local-only copy


def repository_root(path: str) -> str | None:
    """The git work tree holding `path` (the nearest directory above with a `.git`), if any."""
    return git_work_tree(path)


def allowed_roots(chart_dir: str, named: Sequence[str] = ()) -> tuple[str, ...]:
    """Where a symlink inside the chart may lead: the chart, the directories named on the command
    line (or in the config) that hold it, and the repository holding it. A chart in a checkout links
    to its siblings (rook's `charts/library -> ../../library`) or to the repository's own files
    (NGINX's `crds -> ../../config/crd/bases`): the user named those by naming the checkout."""
    roots = [chart_dir]
    for path in named:
        if os.path.isdir(path) and files.inside(path, chart_dir) and path not in roots:
            roots.append(path)
    repository = repository_root(chart_dir)
    if repository is not None and repository not in roots:
        roots.append(repository)
    return tuple(roots)


def inside_any(roots: Sequence[str], path: str) -> bool:
    return any(files.inside(root, path) for root in roots)


def check_chart_files(chart_dir: str, roots: Sequence[str] = ()) -> ChartFiles:
    """Refuse a chart Helm would make read something outside `roots` (default: the chart) or block
    on (see the module's docstring); what it may render with, and notes about it, otherwise."""
    roots = tuple(roots) or (chart_dir,)
    found = ChartFiles()
    walked = [os.path.realpath(chart_dir)]  # trees checked (a link into one is not walked again)
    pending = [chart_dir]
    while pending:
        top = pending.pop(0)
        for directory, subdirs, entries, notes in files.walk_tree(top, budgets.current().max_depth):
            if notes:
                raise RenderError(notes[0])
            for name in list(subdirs):
                if os.path.islink(os.path.join(directory, name)):  # walk_tree lists links with files
                    subdirs.remove(name)
            for entry in entries:
                if entry.is_symlink() and check_link(entry.path, directory, roots, walked):
                    pending.append(entry.path)
                check_entry(entry, directory, found)
    return found


def check_link(path: str, directory: str, roots: Sequence[str], walked: list[str]) -> bool:
    """Refuse a link leaving `roots` or to its own parent; True for a directory to walk too."""
    shown = display_path(path)
    target = os.path.realpath(path)
    if not inside_any(roots, path):
        where = " and ".join(["the chart", *(display_path(root) for root in roots[1:])])
        raise RenderError(f"{shown} is a symlink to {target}, outside {where}: "
                          "Helm would read it; kubelint-ports reads nothing outside its inputs")
    if not os.path.isdir(target):
        return False
    if files.inside(target, directory):
        raise RenderError(f"{shown} is a symlink to its own parent directory: Helm would walk it forever")
    if any(files.inside(tree, target) for tree in walked):
        return False
    walked.append(target)
    return True


def check_entry(entry: os.DirEntry, directory: str, found: ChartFiles) -> None:
    shown = display_path(entry.path)
    try:
        mode = os.stat(entry.path).st_mode
    except OSError as error:
        raise RenderError(f"{shown}: {error.strerror or error}") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise RenderError(f"{shown} is {files.kind_of(mode)}: Helm would block reading it")
    if entry.name == SCHEMA_FILE and stat.S_ISREG(mode):
        note = schema_note(read_limited(entry.path), shown)
        if note:
            found.notes.append(note)
            found.local_schemas = True
    elif entry.name.endswith(".tgz") and os.path.basename(directory) == "charts":
        note_schemas(read_chart_archive(entry.path, shown), found)


def read_chart_archive(path: str, prefix: str = "") -> ChartArchive:
    """The archive at `path`, checked (`helm_archive`); RenderError, after `prefix: `, when it must
    not be rendered or cannot be read."""
    lead = f"{prefix}: " if prefix else ""
    try:
        return chart_archive(path)
    except ArchiveError as error:
        raise RenderError(f"{lead}{error}") from None
    except OSError as error:
        raise RenderError(f"{lead}{error.strerror or error}") from None


def note_schemas(archive: ChartArchive, found: ChartFiles) -> ChartFiles:
    """Add to `found` a note for each values schema in `archive` with parts outside it."""
    for place, data in archive.schemas():
        note = schema_note(data, place)
        if note:
            found.notes.append(note)
            found.local_schemas = True
    return found


def read_limited(path: str) -> bytes:
    try:
        return files.read_file(path, budgets.current().max_file_bytes)
    except OSError as error:
        raise RenderError(f"{display_path(path)}: {error.strerror or error}") from None


def outside_parts(schema) -> list[tuple[str, str]]:
    """(keyword, value) of every reference outside the schema and unknown `$schema`, in document
    order; RenderError when it is deeper than the budget. Iterative."""
    max_depth = budgets.current().max_depth
    found: list[tuple[str, str]] = []
    stack = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise RenderError(f"values schema nested deeper than {max_depth} levels (limit max-depth)")
        if isinstance(node, dict):
            for key, value in node.items():
                if outside_reference(key, value) or (
                        key == "$schema" and isinstance(value, str) and value not in files.KNOWN_META_SCHEMAS):
                    found.append((key, value))
            stack.extend((value, depth + 1) for value in reversed(node.values()))
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in reversed(node))
    return found


def schema_note(data: bytes, shown: str) -> str | None:
    """The note for a values schema with parts outside it, at the first one (None when it has
    none, or is no JSON: Helm reports that itself). `shown`: its path (`<archive>:<member>` in an
    archive)."""
    try:
        schema = json.loads(data)
    except RecursionError:
        raise RenderError(f"{shown} is nested too deeply to check (limit max-depth)") from None
    except ValueError:
        return None
    try:
        parts = outside_parts(schema)
    except RenderError as error:
        raise RenderError(f"{shown}: {error}") from None
    if not parts:
        return None
    keyword, value = parts[0]
    text = data.decode("utf-8", "replace")
    line = column = 1
    for match in _REFERENCE_TEXT.finditer(text):
        try:
            decoded = json.loads(f'"{match.group(2)}"')
        except ValueError:
            continue
        if (match.group(1), decoded) == (keyword, value):
            line = text.count("\n", 0, match.start()) + 1
            column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
            break
    what = (f"names the meta-schema {shown_value(value)}" if keyword == "$schema"
            else f"refers to the schema {shown_value(value)}, outside it")
    more = f" (and {len(parts) - 1} more such reference{'s' if len(parts) > 2 else ''})" if len(parts) > 1 else ""
    return (f"{shown}:{line}:{column}: {what}{more}, which kubelint-ports does not fetch: the chart is rendered with its "
            "values validated against the rest of the schema only (Helm's --skip-schema-validation, for "
            "those parts alone)")


def shown_value(text: str, limit: int = 200) -> str:
    """A schema's URL as a message may quote it: cut, control characters escaped."""
    cut = text if len(text) <= limit else text[:limit] + "..."
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in cut)


__all__ = ["ChartFiles", "allowed_roots", "check_chart_files", "inside_any", "note_schemas", "read_chart_archive",
           "repository_root"]
