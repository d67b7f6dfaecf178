"""Reading kustomizations: the tree of bases and components a directory builds on, and its patches,
kept to place a rendered object's fields on the patch or resource line that wrote them.

Only files the guard (`kustomize_guard`) checked are opened here: it has already refused remote
references, files outside their kustomization's directory and YAML over the budgets.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import yaml

from kubelint_ports.vocabulary import Location
from kubelint_ports.loading import budgets, files as input_files
from kubelint_ports.loading.kustomize import KUSTOMIZATION_FILES
from kubelint_ports.loading.yaml_files.loader import ManifestLoader
from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading.yaml_files import yamltree as yt

MAX_KUSTOMIZATIONS = 1000  # directories one build may reach (bases of bases ...)


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
    """Reads a kustomization and everything it builds on; opens only `checked` files (real paths),
    those the guard read and bounded first."""

    def __init__(self, checked: set[str]) -> None:
        self.read: dict[str, Kustomization] = {}
        self.checked = checked

    def kustomization(self, directory: str) -> Kustomization:
        directory = os.path.abspath(directory)
        if directory in self.read:
            return self.read[directory]
        if len(self.read) >= MAX_KUSTOMIZATIONS:
            raise KustomizeError(f"builds on more than {MAX_KUSTOMIZATIONS} kustomizations")
        file = kustomization_file(directory)
        if file is None:
            raise KustomizeError(f"{display_path(directory)} holds no kustomization.yaml")
        root = compose_file(file) if os.path.realpath(file) in self.checked else None
        node = Kustomization(directory, file, root)
        self.read[directory] = node
        if not isinstance(root, yt.MappingNode):
            return node  # kustomize reports what is wrong with it
        node.component = _text(yt.get(root, "kind")) == "Component"
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
        return strings(root, key)

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
            docs = compose_all_file(file) if os.path.realpath(file) in self.checked else []
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
        data = input_files.read_file(file, budgets.current().max_file_bytes)
    except OSError:
        return None
    lines = data.decode("utf-8-sig", "replace").splitlines()
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



def strings(root: yt.Node | None, key: str) -> list[yt.ScalarNode]:
    """The scalar items of the list at `key` (anything else there, kustomize reports)."""
    value = yt.get(root, key)
    if not isinstance(value, yt.SequenceNode):
        return []
    return [item for item in value.value if isinstance(item, yt.ScalarNode)]


def items(root: yt.Node | None, key: str) -> list[yt.MappingNode]:
    """The mapping items of the list at `key`."""
    value = yt.get(root, key)
    if not isinstance(value, yt.SequenceNode):
        return []
    return [item for item in value.value if isinstance(item, yt.MappingNode)]
