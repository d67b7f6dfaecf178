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

Nothing here touches the network: remote resources are refused before the build, the build runs with
git and HTTP pointed nowhere, and it is bounded in time. A directory used as a base (or component) by
another one in the same run is built only as part of it, unless named on the command line.

Importing this module imports neither `subprocess` nor `tempfile`: only building pays for them.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import yaml

from kubelint_ports.findings import Diagnostic, Location
from kubelint_ports.loading import budgets, files as input_files
from kubelint_ports.loading import (
    KUSTOMIZATION_FILES,
    Document,
    DocumentReader,
    LoadResult,
    ManifestLoader,
    SourceText,
    display_path,
    load_bytes,
)
from kubelint_ports.loading import yamltree as yt

TIMEOUT_SECONDS = 120
MAX_KUSTOMIZATIONS = 1000  # directories one build may reach (bases of bases ...)
ORIGIN_ANNOTATION = "config.kubernetes.io/origin"
# Origin annotations appeared in kustomize 4.x; kubectl 1.24 bundles kustomize 4.5.4.
NEEDS = "kustomize 4.5 or later, or kubectl 1.24 or later, which bundles it"
# Where kustomize would fetch from: URLs, git specs, and `host.tld/org/repo` paths.
_REMOTE = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|git@|git::|[\w-]+(?:\.[\w-]+)+(?::\d+)?/)")
# How kustomize introduces an error inside the directory the temporary kustomization lists.
_WRAPPER_CONTEXT = re.compile(r"^accumulating resources: accumulation err='accumulating resources from '[^']*': "
                              r"'[^']*' must resolve to a file': recursed accumulation of path '[^']*': ")
# Strategic merge keys of the lists the rules read (containers, ports, env, volumes, ...).
MERGE_KEYS = ("name", "containerPort", "port", "mountPath", "devicePath", "ip", "key")
# Kustomization fields naming other files or directories, checked for remote references.
_FILE_LISTS = ("resources", "bases", "components", "crds", "configurations", "generators", "transformers",
               "validators", "patchesStrategicMerge")
_PATH_ENTRIES = ("patches", "patchesJson6902", "replacements")


class KustomizeError(Exception):
    """A directory that cannot be built: the reason, and where, when a line says it."""

    def __init__(self, message: str, location: Location | None = None):
        super().__init__(message)
        self.location = location


# --- reading kustomizations ------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class Patch:
    """A strategic-merge patch (one or more object mappings) or a JSON 6902 operation list."""

    path: str  # as shown: the patch file, or the kustomization holding an inline patch
    docs: list[yt.Node]
    json6902: bool
    target: dict | None  # the `target:` selector, when the kustomization gives one
    # An inline patch's text position in the kustomization: (first file line, column) of its line 0,
    # or None when its style keeps no positions (then `anchor`, the `patch:` key, stands for it).
    offset: tuple[int, int] | None = (0, 0)
    anchor: yt.Node | None = None

    def docs_for(self, kind: str, names: set[str], namespaces: set[str], labels: dict) -> tuple[yt.Node, ...]:
        """The documents of this patch kustomize applies to an object (none: it is not patched)."""
        if self.target is not None:
            return tuple(self.docs) if selects(self.target, kind, names, namespaces, labels) else ()
        if self.json6902:
            return ()  # kustomize requires a target for these
        return tuple(doc for doc in self.docs if self.names_object(doc, kind, names, namespaces))

    @staticmethod
    def names_object(doc: yt.Node, kind: str, names: set[str], namespaces: set[str]) -> bool:
        if not isinstance(doc, yt.MappingNode) or _text(yt.get(doc, "kind")) != kind:
            return False
        metadata = yt.get(doc, "metadata")
        name = _text(yt.get(metadata, "name"))
        namespace = _text(yt.get(metadata, "namespace"))
        return name_matches(name, names) and (not namespace or namespace in namespaces)

    def location(self, key_node: yt.Node | None, value_node: yt.Node) -> Location:
        if self.offset is None:
            return node_span(self.path, None, self.anchor)
        return node_span(self.path, key_node, value_node, self.offset)


@dataclass(slots=True, eq=False)
class Kustomization:
    directory: str  # absolute
    file: str  # absolute path of its kustomization file
    root: yt.Node | None
    component: bool = False
    resource_files: list[str] = field(default_factory=list)  # absolute
    bases: list[Kustomization] = field(default_factory=list)  # directories among its resources
    components: list[Kustomization] = field(default_factory=list)
    patches: list[Patch] = field(default_factory=list)  # in the order kustomize applies them
    _files: frozenset[str] | None = None

    @property
    def children(self) -> list[Kustomization]:
        return self.bases + self.components

    @property
    def files(self) -> frozenset[str]:
        """Every resource file and kustomization whose objects this one's patches can reach."""
        if self._files is None:
            files = {*self.resource_files, self.file}
            self._files = frozenset()  # a cycle (kustomize refuses it) stops here
            for child in self.children:
                files |= child.files
            self._files = frozenset(files)
        return self._files

    def walk(self) -> Iterator[Kustomization]:
        """This kustomization and all it builds on, each once."""
        seen: set[int] = set()
        stack = [self]
        while stack:
            current = stack.pop()
            if id(current) not in seen:
                seen.add(id(current))
                yield current
                stack.extend(reversed(current.children))

    def applied_patches(self) -> list[tuple[Patch, Kustomization]]:
        """Every patch of the build with the kustomization whose objects it sees, in the order
        kustomize applies them: bases, then components (which patch what their user has gathered),
        then the kustomization's own."""
        ordered: list[tuple[Patch, Kustomization]] = []
        done: set[tuple[int, int]] = set()  # (kustomization, scope): a cycle (kustomize refuses it) stops

        def visit(node: Kustomization, scope: Kustomization) -> None:
            if (id(node), id(scope)) in done:
                return
            done.add((id(node), id(scope)))
            for base in node.bases:
                visit(base, base)
            for component in node.components:
                visit(component, scope)
            ordered.extend((patch, scope) for patch in node.patches)

        visit(self, self)
        return ordered


def kustomization_file(directory: str) -> str | None:
    for name in KUSTOMIZATION_FILES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    return None


class Reader:
    """Reads a kustomization and everything it builds on, refusing remote references."""

    def __init__(self) -> None:
        self.read: dict[str, Kustomization] = {}

    def kustomization(self, directory: str) -> Kustomization:
        directory = os.path.abspath(directory)
        if directory in self.read:
            return self.read[directory]
        if len(self.read) >= MAX_KUSTOMIZATIONS:
            raise KustomizeError(f"builds on more than {MAX_KUSTOMIZATIONS} kustomizations")
        file = kustomization_file(directory)
        if file is None:
            raise KustomizeError(f"{display_path(directory)} holds no kustomization.yaml")
        root = compose_file(file)
        node = Kustomization(directory, file, root)
        self.read[directory] = node
        if not isinstance(root, yt.MappingNode):
            return node  # kustomize reports what is wrong with it
        node.component = _text(yt.get(root, "kind")) == "Component"
        self.check_remote(node)
        for key in ("resources", "bases", "components"):
            for entry in self.strings(root, key):
                path = os.path.join(directory, entry.value)
                if os.path.isdir(path):
                    if kustomization_file(path) is not None:
                        (node.components if key == "components" else node.bases).append(self.kustomization(path))
                elif os.path.isfile(path):
                    node.resource_files.append(os.path.abspath(path))
        node.patches = self.patches(node)
        return node

    @staticmethod
    def strings(root: yt.Node, key: str) -> list[yt.ScalarNode]:
        value = yt.get(root, key)
        if not isinstance(value, yt.SequenceNode):
            return []
        return [item for item in value.value if isinstance(item, yt.ScalarNode)]

    def check_remote(self, node: Kustomization) -> None:
        """kustomize would clone or download these: refuse them, naming the line."""
        entries: list[yt.ScalarNode] = []
        for key in _FILE_LISTS:
            entries += self.strings(node.root, key)
        for key in _PATH_ENTRIES:
            listed = yt.get(node.root, key)
            for item in listed.value if isinstance(listed, yt.SequenceNode) else ():
                path = yt.get(item, "path")
                if isinstance(path, yt.ScalarNode):
                    entries.append(path)
        openapi = yt.get(yt.get(node.root, "openapi"), "path")
        if isinstance(openapi, yt.ScalarNode):
            entries.append(openapi)
        for entry in entries:
            text = entry.value.strip()
            if "\n" in text or os.path.exists(os.path.join(node.directory, text)):
                continue  # an inline patch, or a local path
            if _REMOTE.match(text):
                raise KustomizeError(
                    f"{text!r} is a remote resource, which kustomize would download: kubelint-ports never "
                    "uses the network; vendor it into the repository and refer to it by a local path",
                    node_span(display_path(node.file), None, entry))

    def patches(self, node: Kustomization) -> list[Patch]:
        """The patches of one kustomization, in kustomize's order: strategic merge, then `patches`,
        then JSON 6902 (the built-in transformers run in that order)."""
        root = node.root
        found: list[Patch] = []
        for entry in self.strings(root, "patchesStrategicMerge"):
            found += self.patch(node, entry, None, json6902=None)
        for key, json6902 in (("patches", None), ("patchesJson6902", True)):
            listed = yt.get(root, key)
            for item in listed.value if isinstance(listed, yt.SequenceNode) else ():
                if not isinstance(item, yt.MappingNode):
                    continue
                target = yt.get(item, "target")
                selector = yt.to_plain(target) if isinstance(target, yt.MappingNode) else None
                source = yt.get(item, "path") or yt.get(item, "patch")
                if isinstance(source, yt.ScalarNode):
                    inline = yt.get(item, "path") is None
                    found += self.patch(node, source, selector, json6902=json6902, inline=inline)
        return found

    def patch(self, node: Kustomization, entry: yt.ScalarNode, target: dict | None, *,
              json6902: bool | None, inline: bool | None = None) -> list[Patch]:
        """A patch file, or inline patch text (a `patch:` value; a patchesStrategicMerge string
        that names no file)."""
        file = os.path.join(node.directory, entry.value)
        if inline is None:
            inline = "\n" in entry.value or not os.path.isfile(file)
        if inline:
            docs = compose_text(entry.value)
            shown, offset = display_path(node.file), inline_offset(node.file, entry)
        else:
            docs = compose_all_file(file)
            shown, offset = display_path(file), (0, 0)
        if json6902 is None:  # `patches:` entries hold either kind: an operation list is JSON 6902
            json6902 = bool(docs) and isinstance(docs[0], yt.SequenceNode)
        return [Patch(shown, docs, json6902, target, offset, entry)] if docs else []


def compose_file(path: str) -> yt.Node | None:
    docs = compose_all_file(path)
    return docs[0] if docs else None


def compose_all_file(path: str) -> list[yt.Node]:
    try:
        return compose_text(input_files.read_file(path, budgets.current().max_file_bytes))
    except OSError:
        return []


def compose_text(text: str | bytes) -> list[yt.Node]:
    """Every non-empty document; unreadable YAML is none (kustomize reports it)."""
    try:
        return [doc for doc in budgets.compose_all(text, loader=ManifestLoader) if not yt.is_null(doc)]
    except yaml.YAMLError:
        return []


def inline_offset(file: str, entry: yt.ScalarNode) -> tuple[int, int] | None:
    """Where an inline patch's line 0, column 0 sits in the kustomization: a literal block keeps
    its lines, shifted by its indentation; other styles keep none (None)."""
    if entry.style != "|":
        return None
    try:
        with open(file, encoding="utf-8-sig", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    first = entry.start_mark.line + 1
    for offset, inner in enumerate(entry.value.split("\n")):
        if inner.strip():
            if first + offset >= len(lines) or not lines[first + offset].endswith(inner):
                return None
            return first, len(lines[first + offset]) - len(inner)
    return None


def _text(node: yt.Node | None) -> str:
    return node.value if isinstance(node, yt.ScalarNode) else ""


def name_matches(name: str, names: set[str]) -> bool:
    """A patch names an object by the name in its own layer: the resource file's name, the rendered
    one, or one with only some of the prefixes and suffixes of the layers above."""
    return bool(name) and (name in names or any(name in candidate for candidate in names))


def selects(target: dict, kind: str, names: set[str], namespaces: set[str], labels: dict) -> bool:
    """kustomize's patch target: kind, name and namespace (regular expressions), label selector."""
    def matches(pattern, candidates: set[str]) -> bool:
        try:
            return any(re.fullmatch(str(pattern), candidate) for candidate in candidates)
        except re.error:
            return str(pattern) in candidates

    if target.get("kind") and not matches(target["kind"], {kind}):
        return False
    if target.get("name") and not matches(target["name"], names):
        return False
    if target.get("namespace") and not matches(target["namespace"], namespaces):
        return False
    selector = target.get("labelSelector")
    if isinstance(selector, str):
        for term in filter(None, (part.strip() for part in selector.split(","))):
            key, equals, value = re.split(r"(!=|==|=)", term, maxsplit=1) if "=" in term else (term, "", "")
            key, value = key.strip(), value.strip()
            if (equals in ("=", "==") and labels.get(key) != value) or (equals == "!=" and labels.get(key) == value):
                return False
            if not equals and " " not in key and key not in labels:
                return False  # `key` alone: the label exists (set-based forms are not checked)
    return True


# --- mapping field paths -----------------------------------------------------------------------


def node_span(path: str, key_node: yt.Node | None, value_node: yt.Node,
              offset: tuple[int, int] = (0, 0)) -> Location:
    """As `Document.location`: the key and a scalar value, or only the key of a block. `offset`
    places marks of inline text (line, column of its line 0) in the file."""
    start = (key_node or value_node).start_mark
    end = value_node.end_mark
    if isinstance(value_node, (yt.MappingNode, yt.SequenceNode)) and key_node is not None:
        end = key_node.end_mark

    return Location(path, start.line + offset[0] + 1, start.column + offset[1] + 1,
                    end.line + offset[0] + 1, end.column + offset[1] + 1)


@dataclass(slots=True)
class Walk:
    key_node: yt.Node | None
    value_node: yt.Node
    depth: int  # segments resolved


def walk(tree: yt.Node, rendered: yt.Node | None, segments: list[str | int]) -> Walk:
    """Follow a rendered object's field path through a file's tree (a resource or a patch)."""
    key_node, node, depth = None, tree, 0
    for segment in segments:
        if isinstance(segment, int):
            if not isinstance(node, yt.SequenceNode):
                break
            rendered_items = rendered.value if isinstance(rendered, yt.SequenceNode) else []
            rendered = rendered_items[segment] if segment < len(rendered_items) else None
            index = matching_item(node, rendered, segment, len(rendered_items))
            if index is None:
                break
            key_node, node = None, node.value[index]
        else:
            pair = yt.child(node, segment)
            if pair is None:
                break
            key_node, node = pair
            rendered_pair = yt.child(rendered, segment)
            rendered = rendered_pair[1] if rendered_pair else None
        depth += 1
    return Walk(key_node, node, depth)


def matching_item(items: yt.SequenceNode, rendered: yt.Node | None, index: int, rendered_count: int) -> int | None:
    """The item of `items` that wrote rendered item `index`: the one with its merge key value, or
    the same position when neither side has a merge key and the lists are as long."""
    if isinstance(rendered, yt.MappingNode):
        for key in MERGE_KEYS:
            wanted = yt.get(rendered, key)
            if not isinstance(wanted, yt.ScalarNode):
                continue
            keyed = [i for i, item in enumerate(items.value) if isinstance(yt.get(item, key), yt.ScalarNode)]
            same = [i for i in keyed if yt.get(items.value[i], key).value == wanted.value]
            if len(same) == 1:
                return same[0]
            if keyed and not same:
                return None  # this file's list does not hold the item
    if index < len(items.value) and len(items.value) == rendered_count:
        return index
    return None


def json_pointer(text: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in text.split("/")[1:]] if text else []


def pointer_covers(pointer: list[str], segments: list[str | int], rendered: yt.Node) -> bool:
    """Whether a JSON pointer names `segments` or one of its parents (`-` is the last item)."""
    if len(pointer) > len(segments):
        return False
    node: yt.Node | None = rendered
    for token, segment in zip(pointer, segments):
        if isinstance(segment, int):
            items = node.value if isinstance(node, yt.SequenceNode) else []
            if token != str(segment) and not (token == "-" and segment == len(items) - 1):
                return False
            node = items[segment] if segment < len(items) else None
        else:
            if token != segment:
                return False
            pair = yt.child(node, segment)
            node = pair[1] if pair else None
    return True


def rendered_at(root: yt.Node, segments: list[str | int]) -> yt.Node | None:
    node: yt.Node | None = root
    for segment in segments:
        if isinstance(segment, int):
            node = node.value[segment] if isinstance(node, yt.SequenceNode) and segment < len(node.value) else None
        else:
            pair = yt.child(node, segment)
            node = pair[1] if pair else None
        if node is None:
            return None
    return node


def patch_location(patch: Patch, docs: tuple[yt.Node, ...], rendered: yt.Node,
                   segments: list[str | int]) -> Location | None:
    """Where `patch` (its `docs` that apply to the object) writes the field, or None."""
    if patch.json6902:
        operations = docs[0].value if docs and isinstance(docs[0], yt.SequenceNode) else []
        for operation in reversed(operations):  # the last operation on a field wins
            op = _text(yt.get(operation, "op"))
            path = yt.get(operation, "path")
            if op not in ("add", "replace", "copy", "move") or not isinstance(path, yt.ScalarNode):
                continue
            pointer = json_pointer(path.value)
            if not pointer_covers(pointer, segments, rendered):
                continue
            if op in ("copy", "move"):
                return patch.location(*yt.child(operation, "from") or (None, operation))
            value_pair = yt.child(operation, "value")
            if value_pair is None:
                return patch.location(None, operation)
            rest = segments[len(pointer):]
            found = walk(value_pair[1], rendered_at(rendered, segments[:len(pointer)]), rest)
            return patch.location(*((found.key_node, found.value_node) if found.depth else value_pair))
        return None
    for doc in reversed(docs):
        found = walk(doc, rendered, segments)
        if found.depth == len(segments) and segments:
            return patch.location(found.key_node, found.value_node)
    return None


@dataclass(slots=True, eq=False)
class SourceFiles:
    """The resource files objects came from, composed once, when a position is first asked for."""

    trees: dict[str, list[yt.Node]] = field(default_factory=dict)

    def docs(self, path: str) -> list[yt.Node]:
        if path not in self.trees:
            docs = []
            for doc in compose_all_file(path):
                docs += list_items(doc)
            self.trees[path] = docs
        return self.trees[path]


def list_items(doc: yt.Node) -> list[yt.Node]:
    """A `kind: List` document's items (kustomize reads them as objects), else the document."""
    if isinstance(doc, yt.MappingNode) and _text(yt.get(doc, "kind")).endswith("List"):
        items = yt.get(doc, "items")
        if isinstance(items, yt.SequenceNode):
            return [item for item in items.value if isinstance(item, yt.MappingNode)]
    return [doc]


@dataclass(slots=True, eq=False)
class KustomizeDocument(Document):
    """A rendered object whose positions are its patches' and resource file's lines."""

    source_file: str = ""  # absolute path of the file that wrote the object (origin annotation)
    sources: SourceFiles | None = None
    applied: list[tuple[Patch, Kustomization]] = field(default_factory=list)  # the build's patches
    generator: str = ""  # `configMapGenerator` ...: the object was generated, not read from a file
    _patches: tuple[tuple[Patch, tuple[yt.Node, ...]], ...] | None = None

    @property
    def patches(self) -> tuple[tuple[Patch, tuple[yt.Node, ...]], ...]:
        """The patches that touched this object with their documents that apply, the last applied
        first; found when a position is first asked for (that reads the resource file again)."""
        if self._patches is None:
            self._patches = patches_for(self.root, self.source_file, self.applied, self.sources or SourceFiles())
        return self._patches

    def compose_again(self) -> yt.Node | None:
        """The built object from the kept build output, its origin annotation taken out again."""
        root = Document.compose_again(self)
        if root is not None:
            remove_origin(root)
        return root

    def location(self, field_path: str = "", message: str = "") -> Location:
        segments = yt.parse_field_path(field_path) if field_path else []
        if segments:
            for patch, docs in self.patches:
                found = patch_location(patch, docs, self.root, segments)
                if found is not None:
                    return _with_message(found, message)
        return _with_message(self.source_location(segments), message)

    def source_location(self, segments: list[str | int]) -> Location:
        doc = self.source_doc()
        if doc is None:
            return Location(self.path, 0, 0)  # the file cannot be read again
        if self.generator:  # a generated ConfigMap or Secret: its generator entry
            return node_span(self.path, None, doc)
        found = walk(doc, self.root, segments)
        if found.depth == 0:
            return node_span(self.path, None, doc)
        return node_span(self.path, found.key_node, found.value_node)

    def source_doc(self) -> yt.Node | None:
        """This object's document in its resource file (by kind and name), or its generator entry."""
        docs = self.sources.docs(self.source_file) if self.sources is not None else []
        if self.generator:
            return generator_entry(docs, self.generator, object_name(self.root))
        kind = _text(yt.get(self.root, "kind"))
        name = object_name(self.root)
        same_kind = [doc for doc in docs if isinstance(doc, yt.MappingNode) and _text(yt.get(doc, "kind")) == kind]
        named = [(len(object_name(doc)), doc) for doc in same_kind if object_name(doc) and object_name(doc) in name]
        if named:
            return max(named, key=lambda pair: pair[0])[1]
        if same_kind:
            return same_kind[0]
        return docs[0] if docs and isinstance(docs[0], yt.MappingNode) else None

    def node_location(self, node: yt.Node) -> Location:
        return self.location(yt.field_path_to(self.root, node) or "")


def object_name(root: yt.Node) -> str:
    return _text(yt.get(yt.get(root, "metadata"), "name"))


def generator_entry(docs: list[yt.Node], generator: str, rendered_name: str) -> yt.Node | None:
    """The `configMapGenerator`/`secretGenerator` item that made an object (its name, before the
    hash suffix and prefixes), else the generator key's list."""
    if not docs:
        return None
    key = generator[0].lower() + generator[1:]  # ConfigMapGenerator -> configMapGenerator
    entries = yt.get(docs[0], key)
    if not isinstance(entries, yt.SequenceNode):
        return docs[0]
    named = [(len(_text(yt.get(e, "name"))), e) for e in entries.value
             if _text(yt.get(e, "name")) and _text(yt.get(e, "name")) in rendered_name]
    return max(named, key=lambda pair: pair[0])[1] if named else entries


def _with_message(location: Location, message: str) -> Location:
    if not message:
        return location
    return Location(location.path, location.line, location.column, location.end_line, location.end_column, message)


# --- building ------------------------------------------------------------------------------------


def kustomize_commands() -> list[list[str]]:
    """The builds to try, best first: a standalone kustomize is usually newer than kubectl's."""
    import shutil

    commands = []
    if kustomize := shutil.which("kustomize"):
        commands.append([kustomize, "build"])
    if kubectl := shutil.which("kubectl"):
        commands.append([kubectl, "kustomize"])
    return commands


def offline_environment() -> dict[str, str]:
    """The build's environment: nothing it starts can reach the network even if a remote reference
    slipped past `check_remote` (git only clones local repositories; HTTP goes to a closed port)."""
    environment = dict(os.environ)
    nowhere = "http://127.0.0.1:9"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        environment[name] = nowhere
    environment.pop("NO_PROXY", None)
    environment.pop("no_proxy", None)
    environment.update(GIT_ALLOW_PROTOCOL="file", GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1")
    return environment


def build(directory: str) -> tuple[str, str]:
    """The rendered YAML of a Kustomize directory and the temporary directory its origin paths are
    relative to (gone by then: only the paths are needed)."""
    import tempfile

    commands = kustomize_commands()
    if not commands:
        raise KustomizeError(f"no kustomize to build it: put `kustomize` or `kubectl` on PATH ({NEEDS})")
    try:
        with tempfile.TemporaryDirectory(prefix="kubelint-ports-kustomize-") as scratch:
            scratch = os.path.realpath(scratch)  # `..` in the relative path climbs the real directories
            try:
                relative = os.path.relpath(os.path.abspath(directory), scratch)
            except ValueError:  # another drive (Windows)
                raise KustomizeError("cannot build a directory on another drive than the temporary "
                                     "directory") from None
            with open(os.path.join(scratch, "kustomization.yaml"), "w", encoding="utf-8") as handle:
                handle.write(f"resources:\n- {json.dumps(relative.replace(os.sep, '/'))}\n"
                             "buildMetadata: [originAnnotations]\n")
            return run_build(commands, scratch), scratch
    except OSError as error:
        raise KustomizeError(f"cannot prepare the build in a temporary directory: {error.strerror or error}") from None


def run_build(commands: list[list[str]], scratch: str) -> str:
    """The output of the first command that builds the temporary kustomization in `scratch`."""
    import subprocess

    failures = []
    for command in commands:
        name = " ".join([os.path.basename(command[0]), *command[1:]])
        try:
            completed = subprocess.run([*command, scratch], capture_output=True, timeout=TIMEOUT_SECONDS,
                                       stdin=subprocess.DEVNULL, env=offline_environment(), check=False)
        except OSError as error:
            failures.append(f"cannot run {command[0]}: {error.strerror or error}")
            continue
        except subprocess.TimeoutExpired:
            raise KustomizeError(f"`{name}` took longer than {TIMEOUT_SECONDS} s") from None
        stderr = completed.stderr.decode("utf-8", "replace")
        if completed.returncode == 0:
            return completed.stdout.decode("utf-8", "replace")
        if "buildMetadata" in stderr and "unknown field" in stderr:
            failures.append(f"`{name}` is too old to report where objects come from (origin annotations "
                            f"need {NEEDS})")
            continue
        raise KustomizeError(one_line(stderr) or f"`{name}` exited with {completed.returncode}")
    raise KustomizeError("; ".join(failures))


def one_line(message: str) -> str:
    """kustomize's message on one line, without deprecation warnings and kubectl's log wrapping
    (`E1123 ... "command failed" err=< ... >`)."""
    lines = [line for line in message.splitlines() if not re.match(r"\s*#?\s*Warning:", line)]
    message = "\n".join(lines)
    wrapped = re.search(r'"command failed" err=(?:<(.*)>|"(.*)")\s*$', message, re.DOTALL)
    if wrapped:
        message = wrapped.group(1) if wrapped.group(1) is not None else wrapped.group(2).replace('\\"', '"')
    message = re.sub(r"\s*\n\s*", " ", re.sub(r"^Error: ", "", message.strip()))
    return _WRAPPER_CONTEXT.sub("", message)


# --- loading ---------------------------------------------------------------------------------------


def load_kustomizations(directories: list[str], named: Iterable[str], result: LoadResult,
                        document_reader: DocumentReader | None = None) -> None:
    """Build every Kustomize directory that no other one in the run builds on (or that was named on
    the command line), and add its objects, positioned in their files, to `result`."""
    reader = Reader()
    trees: dict[str, Kustomization | KustomizeError] = {}
    for directory in directories:
        try:
            trees[directory] = reader.kustomization(directory)
        except KustomizeError as error:
            trees[directory] = error
    used = {id(base) for tree in trees.values() if isinstance(tree, Kustomization)
            for base in tree.walk() if base is not tree}
    explicit = {os.path.abspath(path) for path in named}
    wanted = [directory for directory in directories if not (
        isinstance(trees[directory], Kustomization) and (trees[directory].component or (
            id(trees[directory]) in used and os.path.abspath(directory) not in explicit)))]  # built by their users
    builds = build_all([directory for directory in wanted if isinstance(trees[directory], Kustomization)])
    for directory in wanted:
        tree = trees[directory]
        outcome = builds[directory] if isinstance(tree, Kustomization) else tree
        if not isinstance(outcome, KustomizeError):
            try:
                add_built(directory, tree, *outcome, result, document_reader)
                continue
            except KustomizeError as error:
                outcome = error
        result.files += 1
        file = tree.file if isinstance(tree, Kustomization) else kustomization_file(directory) or directory
        where = outcome.location or (entry_location(tree, str(outcome)) if isinstance(tree, Kustomization)
                                     else None) or Location(display_path(file), 0, 0)
        result.diagnostics.append(Diagnostic(where, f"cannot build Kustomize directory "
                                                    f"{display_path(directory)}: {outcome}"))


def build_all(directories: list[str]) -> dict[str, tuple[str, str] | KustomizeError]:
    """Every build's output or error; several run at once (each is a process that mostly waits)."""
    def attempt(directory: str) -> tuple[str, str] | KustomizeError:
        try:
            return build(directory)
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
              reader: DocumentReader | None = None) -> None:
    """A build's objects, with their origins and the patches that may have written them."""
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

    def placed(document: Document) -> KustomizeDocument:
        source_file, generator = take_origin(document.root, scratch)
        if not source_file:
            source_file = tree.file  # no origin: kustomize made it without a file (a plugin)
        files.add(source_file)
        return KustomizeDocument(display_path(source_file), document.root, shown, document.text_source,
                                 document.span, document.items, document.annotations, source_file=source_file,
                                 sources=sources, applied=applied, generator=generator)

    # The build's output is kept: positions compose its objects again when findings need them.
    load_bytes(data, shown, rendered, reader=reader, source=SourceText(data=data, digest=zlib.crc32(data)),
               wrap=placed)
    for diagnostic in rendered.diagnostics:
        result.diagnostics.append(Diagnostic(
            Location(display_path(tree.file), 0, 0),
            f"{shown} renders to invalid Kubernetes YAML (line {diagnostic.location.line} of its output): "
            f"{diagnostic.message}"))
    result.skipped += rendered.skipped
    result.documents += rendered.documents
    result.files += max(1, len(files))


def take_origin(root: yt.MappingNode, scratch: str) -> tuple[str, str]:
    """Remove the origin annotation the build added and return (absolute source file, generator kind
    or ""); the object is then as the user's files render it."""
    pair = remove_origin(root)
    if pair is None:
        return "", ""
    try:
        origin = yaml.safe_load(pair[1].value) if isinstance(pair[1], yt.ScalarNode) else None
    except yaml.YAMLError:
        origin = None
    if not isinstance(origin, dict):
        return "", ""
    path = origin.get("path") or origin.get("configuredIn")
    if not isinstance(path, str) or origin.get("repo"):
        return "", ""
    generator = ""
    if "path" not in origin and isinstance(origin.get("configuredBy"), dict):
        generator = str(origin["configuredBy"].get("kind") or "")
    return os.path.normpath(os.path.join(scratch, path)), generator


def remove_origin(root: yt.Node) -> tuple[yt.Node, yt.Node] | None:
    """Take the build's origin annotation out of an object; the (key, value) removed, if any."""
    metadata = yt.get(root, "metadata")
    annotations = yt.get(metadata, "annotations")
    pair = yt.child(annotations, ORIGIN_ANNOTATION)
    if pair is None:
        return None
    annotations.value = [(k, v) for k, v in annotations.value if k is not pair[0]]
    annotations.__dict__.pop("_index", None)
    if not annotations.value:
        metadata.value = [(k, v) for k, v in metadata.value if v is not annotations]
        metadata.__dict__.pop("_index", None)
    return pair


def patches_for(root: yt.Node, source_file: str, applied: list[tuple[Patch, Kustomization]],
                sources: SourceFiles) -> tuple[tuple[Patch, tuple[yt.Node, ...]], ...]:
    """The patches that touched an object, the last applied first, each with its documents that
    apply: those of the kustomizations that build on its file, naming or selecting it."""
    kind = _text(yt.get(root, "kind"))
    metadata = yt.get(root, "metadata")
    names = {object_name(root)}
    namespaces = {_text(yt.get(metadata, "namespace")) or "default", ""}
    for doc in sources.docs(source_file):
        if isinstance(doc, yt.MappingNode) and _text(yt.get(doc, "kind")) == kind and object_name(doc) \
                and object_name(doc) in object_name(root):
            names.add(object_name(doc))
            namespaces.add(_text(yt.get(yt.get(doc, "metadata"), "namespace")) or "default")
    labels = yt.to_plain(yt.get(metadata, "labels")) if isinstance(yt.get(metadata, "labels"), yt.MappingNode) else {}
    found = []
    for patch, scope in reversed(applied):
        if source_file in scope.files and (docs := patch.docs_for(kind, names, namespaces, labels or {})):
            found.append((patch, docs))
    return tuple(found)


__all__ = ["KustomizeDocument", "KustomizeError", "build", "load_kustomizations"]
