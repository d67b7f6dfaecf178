"""Where a rendered object's fields were written: its origin (the file kustomize names in the
`config.kubernetes.io/origin` annotation), the patches that touched it, and the lines in them.

An origin is trusted only when it names a file the build read (`trusted`: the files the guard
checked, all inside their kustomizations' directories and the allowed root). The annotation is
the user's to write too (`commonAnnotations`, a resource's own metadata), so any other path, be it
`/etc/passwd` or a FIFO in the repository, is never opened: the object is placed on the
kustomization built, and a note says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

import yaml

from kubelint_ports.loading.yaml_files.documents import Document
from kubelint_ports.loading import budgets
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.kustomize.tree import (
    Kustomization,
    Patch,
    _text,
    compose_all_file,
    node_span,
)
from kubelint_ports.vocabulary import Location

ORIGIN_ANNOTATION = "config.kubernetes.io/origin"
# Strategic merge keys of the lists the rules read (containers, ports, env, volumes, ...): how
# kustomize pairs a patch's item with the resource's, so how `matching_item` finds the one a
# patch wrote (a patch may hold none). Not `yamltree.item_identity`, which names an item for
# fingerprints, nor the Helm template matcher's keys, which a template writes literally.
MERGE_KEYS = ("name", "containerPort", "port", "mountPath", "devicePath", "ip", "key")


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
    return yt.at_segments(root, segments)


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
        found = None
        for patch, docs in self.patches if segments else ():  # the last patch that writes the field
            found = patch_location(patch, docs, self.root, segments)
            if found is not None:
                break
        if found is None:
            found = self.source_location(segments)
        return replace(found, message=message) if message else found

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


@dataclass(frozen=True, slots=True)
class Origin:
    """What an object's origin annotation says: the file it names (absolute, as kustomize wrote it
    relative to the build), the generator kind when a generator made it, and whether the build
    read that file (`trusted`); `named` is the annotation's path as written, for the note."""

    file: str = ""
    generator: str = ""
    trusted: bool = False
    named: str = ""


def take_origin(root: yt.MappingNode, scratch: str, trusted: frozenset[str]) -> Origin:
    """Remove the origin annotation the build added (the object is then as the user's files render
    it) and read it. `trusted` holds the real paths of the files the build read."""
    pair = remove_origin(root)
    if pair is None or not isinstance(pair[1], yt.ScalarNode):
        return Origin()
    try:  # the annotation is input too: composed within the budgets, never constructed
        origin = budgets.compose(pair[1].value)
    except yaml.YAMLError:
        return Origin()
    if not isinstance(origin, yt.MappingNode) or not yt.is_null(yt.get(origin, "repo")):
        return Origin()
    path = _text(yt.get(origin, "path")) or _text(yt.get(origin, "configuredIn"))
    if not path or "\0" in path:
        return Origin()
    generator = ""
    if yt.get(origin, "path") is None:
        generator = _text(yt.get(yt.get(origin, "configuredBy"), "kind"))
    file = os.path.normpath(os.path.join(scratch, path))
    return Origin(file, generator, os.path.realpath(file) in trusted, path)


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

