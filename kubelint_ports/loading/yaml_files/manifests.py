"""The reader of YAML and JSON manifest files (and standard input, and `helm template` output):
bytes -> documents, each handed to the model's reader while its tree is held, then let go. Big
`kind: List` files are composed a run of items at a time.
"""

from __future__ import annotations

import bisect
import re
import zlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import yaml

from kubelint_ports.vocabulary import Diagnostic, Location
from kubelint_ports.loading import budgets, file_cache, files
from kubelint_ports.loading.yaml_files import yamltree
from kubelint_ports.loading.yaml_files.documents import (EMPTY_STDIN, KEPT_ANNOTATION_PREFIXES, STDIN, Document, DocumentReader,
                                              LoadResult, ManifestLoader, SourceText, decoded_text, display_path,
                                              node_location, read_bytes)
from kubelint_ports.loading.yaml_files.yamltree import MappingNode, Node, ScalarNode

if TYPE_CHECKING:
    from kubelint_ports.loading.helm.chart import HelmOptions

_SOURCE_LINE = re.compile(rb"# Source: ([^\r\n]+?)[ \t]*\r?")

SPLIT_MIN_BYTES = 1024 * 1024

SPLIT_CHUNK_CHARS = 256 * 1024

_ITEMS_LINE = re.compile(r"^items:[ \t]*$", re.MULTILINE)

_DOCUMENT_MARKERS = re.compile(r"^(---|\.\.\.|%)", re.MULTILINE)

_CONTENT_LINE = re.compile(r"^( *)([^ \n#])", re.MULTILINE)  # the first line that is neither blank nor a comment


def load_file(path: str, result: LoadResult, *, stdin=None, helm: HelmOptions | None = None,
              reader: DocumentReader | None = None, walked: bool = False) -> None:
    """One manifest file (or standard input); `helm template` output maps to its chart.
    `walked`: a directory walk found it a regular file, no symlink (the walk vetted it)."""
    shown = display_path(path)
    result.files += 1
    escape = files.symlink_escape(path) if path != STDIN and not walked else None
    if escape:
        result.diagnostics.append(Diagnostic(Location(shown, 0, 0), (
            f"not read: a symlink to {escape}, outside the current directory and its own")))
        return
    cache = file_cache.active()  # hook: a file the cache knows unchanged by its status alone (the server's)
    if cache is not None and path != STDIN and cache.unread(path, walked, helm, result, reader):
        return
    try:
        data = read_bytes(path, stdin, no_symlink=walked)
    except OSError as error:
        result.diagnostics.append(Diagnostic(Location(shown, 0, 0), f"cannot read: {error.strerror or error}"))
        return
    limit = budgets.current().max_file_bytes
    if len(data) > limit:
        result.diagnostics.append(Diagnostic(
            Location(shown, 0, 0), f"file is over the {limit // 2**20} MiB limit (limit max-file-mib); not linted"))
        return
    if path == STDIN and not data.strip():
        result.diagnostics.append(Diagnostic(Location(shown, 0, 0), EMPTY_STDIN))
        return
    if data[:2] == b"\x1f\x8b":  # gzip: a packaged chart (`helm package`), not YAML
        result.diagnostics.append(Diagnostic(Location(shown, 0, 0), (
            "gzip data, not YAML: a packaged Helm chart is linted when named directly with its own name "
            "(`kubelint-ports lint mychart-1.2.3.tgz`)")))
        return
    # --- hook: the file cache (loading/file_cache.py): an unchanged file is not read again ---
    if cache is not None and path != STDIN:
        cache.load(path, data, helm, result, reader,
                   lambda into, read_by: _load_data(path, shown, data, into, helm=helm, reader=read_by))
        return
    # --- end of hook ---
    _load_data(path, shown, data, result, helm=helm, reader=reader)


def _load_data(path: str, shown: str, data: bytes, result: LoadResult, *, helm: HelmOptions | None,
               reader: DocumentReader | None) -> None:
    """The bytes of one file (or standard input), read into `result` and `reader`."""
    source = SourceText(file=None if path == STDIN else path, data=data if path == STDIN else None,
                        digest=zlib.crc32(data))
    mapper = None

    def mapped(document: Document) -> Document:
        nonlocal mapper
        if not document.origin:
            return document
        if mapper is None:
            from kubelint_ports.loading.helm.template_output import TemplateOutput

            mapper = TemplateOutput(helm)
        return mapper(document)

    load_bytes(data, shown, result, reader=reader, source=source, wrap=mapped,
               finish=lambda: mapper.finish() if mapper is not None else None)


def load_bytes(data: bytes, path: str, result: LoadResult, *, reader: DocumentReader | None = None,
               source: SourceText | None = None, wrap: Callable[[Document], Document | None] | None = None,
               finish: Callable[[], None] | None = None) -> None:
    """Parse one file's documents into `result`; a YAML error keeps the documents before it.

    Each document goes through `wrap` (None drops it), into `result`, and to `reader` while its
    tree is held; then the tree is let go. A document `wrap` replaced (a rendered Helm object)
    is read after `finish`, once the whole file is known (its template is matched by count).
    """
    if source is None:
        source = SourceText(data=data, digest=zlib.crc32(data))
    origins = source_comments(data)
    has_aliases = budgets.may_have_aliases(data)
    previous_end = -1
    deferred: list[Document] = []
    pieces, stopped = None, False
    if len(data) >= SPLIT_MIN_BYTES and not has_aliases and not origins[0] and b"\nitems:" in data:
        pieces = split_list(data)
    try:
        for ordinal, root, shift in pieces if pieces is not None else (
                (ordinal, root, 0) for ordinal, root in enumerate(
                    budgets.compose_all(data, loader=ManifestLoader, expand_check=False))):
            found: list[Document] = []
            if ordinal < 0:  # a run of items of a split List: each is a document
                if stopped:
                    break
                try:
                    for index, item in enumerate(root.value):
                        add_document(item, path, "", result, found, source=source, items=(-ordinal - 1 + index,),
                                     shift=shift)
                except (budgets.LimitError, yamltree.FieldTypeError) as error:  # as when composed whole: the List stops there
                    result.diagnostics.append(Diagnostic(node_location(path, error.node),
                                                         files.shortened(str(error))))
                    stopped = True
            else:
                start_line = root.start_mark.line
                origin = origin_for(origins, previous_end, start_line)
                previous_end = root.end_mark.line
                try:
                    if has_aliases:
                        budgets.check_expansion(root)
                    add_document(root, path, origin, result, found, source=source, ordinal=ordinal)
                except (budgets.LimitError, yamltree.FieldTypeError) as error:  # a tag is quoted: cut it short
                    result.diagnostics.append(Diagnostic(node_location(path, error.node), files.shortened(str(error))))
            for document in found:
                kept = wrap(document) if wrap is not None else document
                if kept is not None:
                    result.documents.append(kept)
                    if kept is not document and reader is not None:
                        deferred.append(kept)  # keeps its tree until the file is done
                        continue
                    if reader is not None:
                        reader(kept)
                    kept._root = None
                document._root = None
    except budgets.LimitError as error:  # over a budget before composing: the place the scan found
        mark = error.problem_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        result.diagnostics.append(Diagnostic(Location(path, line, column), str(error)))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = files.shortened(" ".join(filter(None, (error.context, error.problem))))
        result.diagnostics.append(Diagnostic(Location(path, line, column), f"invalid YAML: {problem}"))
    except yaml.YAMLError as error:  # reader errors: bad encoding, control characters
        position = getattr(error, "position", 0) or 0
        line = data.count(b"\n", 0, position) + 1
        reason = files.shortened(getattr(error, "reason", "") or str(error))
        result.diagnostics.append(Diagnostic(Location(path, line, 1), f"unreadable YAML: {reason}"))
    if finish is not None:
        finish()
    for document in deferred:
        reader(document)
        document._root = None


def split_list(data: bytes):
    """A big `kind: List` file (`kubectl get nodes -o yaml`: one YAML document) composed a run of
    items at a time, so no tree of the whole inventory is ever built (5,000 nodes: 24 MB of YAML,
    ~700 MB as one tree).

    Returns what the whole-file compose would give, as (ordinal, root, shift): first the List
    without its items (the items block left as blank lines, so every other mark stays the
    file's), then, per run of items, (-1 - index of its first item, the sequence node, index
    shift). A run is composed from the file's own text padded with the line breaks before it, so
    its marks are exact, and `shift` turns its character indexes into the file's. None when the
    file is not one plain List with a block `items:` sequence, or a run does not parse on its own:
    it is then composed whole, as any other file."""
    text = decoded_text(data)
    if text is None or any(c in text for c in "\r\x85\u2028\u2029") or _DOCUMENT_MARKERS.search(text):
        return None
    found = list(_ITEMS_LINE.finditer(text))
    if len(found) != 1:
        return None
    items_line = found[0]
    block_start = items_line.end() + 1
    first_item = _CONTENT_LINE.search(text, block_start)
    if first_item is None or first_item.group(2) != "-":
        return None
    indent = len(first_item.group(1))
    if indent == 0:
        block_end_pattern = re.compile(r"^(?:[^\s#-]|-[^ \n])", re.MULTILINE)
    else:
        block_end_pattern = re.compile(rf"^ {{0,{indent - 1}}}[^ \n#]", re.MULTILINE)
    end_match = block_end_pattern.search(text, block_start)
    block_end = end_match.start() if end_match else len(text)
    if indent and re.compile(rf"^ {{{indent}}}(?:[^ \n#-]|-[^ \n])", re.MULTILINE).search(text, block_start, block_end):
        return None  # something at the items' indentation that is not an item
    starts = [match.start() for match in
              re.compile(rf"^ {{{indent}}}-(?: |$)", re.MULTILINE).finditer(text, block_start, block_end)]
    skeleton = (text[:items_line.start()] + "items: []" + "\n" * text.count("\n", items_line.end(), block_end)
                + text[block_end:])
    bounds: list[int] = []
    for start in starts:
        if not bounds or start - bounds[-1] >= SPLIT_CHUNK_CHARS:
            bounds.append(start)
    chunks = list(zip(bounds, bounds[1:] + [block_end]))
    try:  # the List around the items, and every run, parse alone: else compose the file whole
        for piece in (skeleton, *(text[start:end] for start, end in chunks)):
            budgets.check_text(piece)  # each run is a document's worth: the budgets apply per run
            ManifestLoader(piece).raw_parse()
        outline = next(yaml.compose_all(skeleton, Loader=ManifestLoader))
    except yaml.YAMLError:
        return None
    kind = yamltree.get(outline, "kind")
    if not (isinstance(kind, ScalarNode) and kind.value.endswith("List") and yamltree.get(outline, "apiVersion")):
        return None
    return _split_documents(text, outline, chunks)


def _split_documents(text: str, outline: MappingNode, chunks: list[tuple[int, int]]):
    yield 0, outline, 0
    first, lines, counted = 0, 0, 0
    for start, end in chunks:
        lines += text.count("\n", counted, start)
        counted = start
        padding = "\n" * lines
        run = next(yaml.compose_all(padding + text[start:end], Loader=ManifestLoader))
        yield -1 - first, run, start - len(padding)
        first += len(run.value)


def source_comments(data: bytes) -> tuple[list[int], list[str]]:
    """Line numbers (0-based) and paths of `# Source:` comments written by `helm template`
    (found with `bytes.find`: a multi-line regex over every line of a big file cost 0.1 s here)."""
    lines: list[int] = []
    sources: list[str] = []
    line, position = 0, 0
    start = data.find(b"# Source:")
    while start != -1:
        end = data.find(b"\n", start)
        end = len(data) if end == -1 else end
        if start == 0 or data[start - 1] == 0x0A:  # at a line start
            match = _SOURCE_LINE.fullmatch(data, start, end)
            if match:
                line += data.count(b"\n", position, start)
                position = start
                lines.append(line)
                sources.append(match.group(1).decode("utf-8", "replace"))
        start = data.find(b"# Source:", end)
    return lines, sources


def origin_for(origins: tuple[list[int], list[str]], previous_end: int, start_line: int) -> str:
    lines, sources = origins
    index = bisect.bisect_right(lines, start_line) - 1
    if index >= 0 and lines[index] >= previous_end:
        return sources[index]
    return ""


def add_document(root: Node, path: str, origin: str, result: LoadResult, found: list[Document], *,
                 source: SourceText | None = None, ordinal: int = 0, items: tuple[int, ...] = (),
                 shift: int = 0) -> None:
    """The Kubernetes objects of one composed document (`kind: List` members each) into `found`,
    their trees held."""
    if yamltree.is_null(root):
        return  # an empty document between `---` separators
    if not isinstance(root, MappingNode):
        result.diagnostics.append(Diagnostic(
            node_location(path, root), f"document is {described(root)}, not a Kubernetes object mapping"))
        return
    api_version = yamltree.get(root, "apiVersion")
    kind = yamltree.get(root, "kind")
    if api_version is None or kind is None:
        if yamltree.get(root, "cniVersion") is not None and yamltree.get(root, "plugins") is not None:
            add_found(root, path, origin, found, source, ordinal, items, shift)  # a CNI conflist: the model reads facts
            return
        result.skipped += 1
        return
    kind_text = yamltree.as_str(kind)
    list_items = yamltree.get(root, "items")
    if kind_text.endswith("List") and list_items is not None:
        for index, item in enumerate(yamltree.items(list_items, "items")):
            add_document(item, path, origin, result, found, source=source, ordinal=ordinal, items=(*items, index),
                         shift=shift)
        return
    add_found(root, path, origin, found, source, ordinal, items, shift)


_SCALAR_KINDS = {yamltree.STR: "string", yamltree.INT: "integer", yamltree.BOOL: "boolean", yamltree.NULL: "null",
                 yamltree.FLOAT: "number"}


def described(node: Node) -> str:
    """What a document that is no mapping is, quoting at most a short excerpt: a whole file that
    is one scalar (a key, a password file named by mistake) must not be echoed into a report."""
    if not isinstance(node, ScalarNode):
        return yamltree.describe(node)  # "a mapping", "a list": no content
    return f"the {_SCALAR_KINDS.get(yamltree.scalar_type(node), 'value')} {files.excerpt(node.value)}"


def add_found(root: MappingNode, path: str, origin: str, found: list[Document], source: SourceText | None,
              ordinal: int, items: tuple[int, ...], shift: int) -> None:
    start, end = root.start_mark, root.end_mark
    found.append(Document(path, root, origin, source, (ordinal, start.index + shift, end.index + shift, start.line,
                                                       start.column), items, kept_annotations(root)))


def kept_annotations(root: MappingNode) -> Mapping[str, str] | None:
    """The annotations the pipeline reads later (suppressions, Helm hooks), as plain text."""
    node = yamltree.get(yamltree.get(root, "metadata"), "annotations")
    if not isinstance(node, MappingNode):
        return None
    kept = {key.value: value.value for key, value in yamltree.pairs(node)
            if isinstance(key, ScalarNode) and isinstance(value, ScalarNode)
            and isinstance(key.value, str) and key.value.startswith(KEPT_ANNOTATION_PREFIXES)}
    return kept or None
