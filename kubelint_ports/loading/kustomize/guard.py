"""Before a Kustomize build: every file kustomize will read, found and bounded, and every remote
reference refused with a clear message naming its line.

kustomize hands what it reads to go-yaml, which expands aliases without limit (a 375-byte resource
took 138 s and 7.8 GB in kubectl), and takes minutes over thousands of generator entries. So
before it runs, every file it will read passes this tool's YAML budgets (`max-file-mib`,
`max-depth`, `max-nodes`, `max-aliases`): kustomization files, resources, patch files and inline
patches, generator and transformer configurations (inline, files, directories), components,
recursively; generator data files (`files:`, `envs:`) pass `max-file-mib`. One build holds at most
`kustomize-generators` generator entries.

What kustomize reads from outside, the guard refuses (this is the clear error; the sandbox of
`kustomize_build` is what actually keeps the build offline):
- anything it fetches over HTTP: an `http(s)://` value in any field naming a file (resources,
  patches, generator `files:`/`envs:`, crds, configurations, replacements, openapi, and the `path`,
  `paths`, `files`, `envs` of transformer and generator configurations), whatever local file or
  directory has a similar name (kustomize tries the URL first);
- anything it clones, in the fields it clones for (resources, bases, components, generators,
  transformers, validators): a scheme (`ssh://`, `file://` ...), `git::`, `gh:`, `user@host:`, or
  `github.com/` without one, unless a local regular file has that name (kustomize reads such a
  file first); and `host.tld/org/repo` when no local path has that name (older kustomize
  versions clone it);
- Helm charts from a repository (`helmCharts`, `repo:`).

Files are opened only inside the directory of the kustomization naming them, symlinks resolved:
kustomize's default load restrictor (`LoadRestrictionsRootOnly`) refuses any other, and so do we,
before opening it. Directories it builds on (bases, components) may be anywhere for kustomize;
here they must be inside the allowed root: the repository holding the directory built (the
nearest `.git` above it), else the current directory when it holds it, else the directory itself.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field

import yaml

from kubelint_ports.sourceroot import git_work_tree
from kubelint_ports.vocabulary import Location
from kubelint_ports.loading.yaml_files.loader import ManifestLoader
from kubelint_ports.loading import budgets, files as input_files
from kubelint_ports.loading.paths import display_path
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.kustomize.tree import (
    MAX_KUSTOMIZATIONS,
    KustomizeError,
    _text,
    inline_offset,
    items,
    kustomization_file,
    node_span,
    strings,
)

# kustomize's loader fetches a file when its URL parses with one of these schemes (Go lowercases it).
_FETCHED = re.compile(r"^https?://", re.IGNORECASE)
# Repository specifications kustomize 4 and 5 clone rather than read as a local directory.
_CLONED = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|git::|gh:|[^\s/@:]+@[^\s/:]+:|github\.com[:/])", re.IGNORECASE)
# `host.tld/org/repo` without a scheme: cloned by older kustomize, a local path for newer ones.
_HOSTLIKE = re.compile(r"^[\w-]+(?:\.[\w-]+)+(?::\d+)?/")
# Keys of generator and transformer configurations (and `helmCharts` items) whose values kustomize
# or Helm fetch when they are URLs; `repo` of any scheme (`oci://`) is a download too.
_PLUGIN_FETCHED_KEYS = frozenset(("path", "paths", "files", "envs", "env", "valuesFile", "additionalValuesFiles",
                                  "chartHome", "repo", "chartRepoUrl"))
_PLUGIN_REPOSITORY_KEYS = frozenset(("repo", "chartRepoUrl"))
_GENERATOR_KINDS = frozenset(("ConfigMapGenerator", "SecretGenerator"))


def is_remote(text: str, local: str) -> bool:
    """Whether kustomize would go to the network (or to another repository) for `text`, a value
    naming a file or directory; `local` is the path it names in the kustomization's directory.
    A repository specification in a field that only reads files is refused too: kustomize would
    fail on it, and this says why."""
    text = text.strip()
    if _FETCHED.match(text):
        return True  # fetched first, whatever local file or directory has a similar name
    if os.path.isfile(local):
        return False  # kustomize reads a local file before trying a repository
    if _CLONED.match(text):
        return True  # cloned, even when a local directory has that name
    return bool(_HOSTLIKE.match(text)) and not os.path.exists(local)


def allowed_root(directory: str) -> str:
    """The real directory a build may read below: its repository, else the current directory when
    it holds the directory, else the directory."""
    real = os.path.realpath(directory)
    top = git_work_tree(real)
    if top is not None:
        return top
    working = os.path.realpath(os.curdir)
    return working if input_files.inside(working, real) else real


@dataclass(slots=True)
class TextLocator:
    """Where the nodes of a text a kustomization names sit (`at`): a file (its shown path), or
    inline text held by `entry`, a scalar of `file` (shown as `shown`), or always `fixed` (text
    inside inline text)."""

    shown: str
    entry: yt.Node | None = None
    file: str = ""
    fixed: Location | None = None

    def at(self, node: yt.Node | None = None, mark=None) -> Location:
        """Computed only for a message: the inline text's offset reads its file again."""
        if self.fixed is not None:
            return self.fixed
        offset = inline_offset(self.file, self.entry) if self.entry is not None else (0, 0)
        if offset is None or (node is None and mark is None):  # no lines kept: the scalar holding the text
            return node_span(self.shown, None, self.entry) if self.entry is not None else Location(self.shown, 0, 0)
        if node is not None:
            return node_span(self.shown, None, node, offset)
        return Location(self.shown, mark.line + offset[0] + 1, mark.column + offset[1] + 1)


@dataclass(slots=True, eq=False)
class Checked:
    """One kustomization, checked: the real paths of the files kustomize reads for it, the
    kustomizations it builds on (path, where named, as plugin configurations?) and where its
    generator entries are."""

    files: set[str] = field(default_factory=set)
    named: dict[str, str] = field(default_factory=dict)  # each file by the path kustomize opens -> its real path
    children: list[tuple[str, Location, bool]] = field(default_factory=list)
    generators: list[tuple[TextLocator, yt.Node]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BuildReads:
    """What one build reads: the real paths (an origin is followed only to one of them), and each
    file by the path kustomize opens it by (`..` resolved, symlinks not) with its real path: the
    layout a private copy of the tree needs (`kustomize_build.planned_tree`)."""

    files: frozenset[str] = frozenset()
    named: tuple[tuple[str, str], ...] = ()


class Guard:
    """Checks builds; what one kustomization holds is checked once for all the builds of a run."""

    def __init__(self) -> None:
        self.checked: dict[tuple[str, bool], Checked | KustomizeError] = {}

    def build(self, directory: str) -> BuildReads:
        """Every file the build of `directory` reads; KustomizeError for the first reason not to
        run it."""
        root = allowed_root(directory)
        limit = budgets.current().kustomize_generators
        read: set[str] = set()
        named: dict[str, str] = {}
        seen: set[tuple[str, bool]] = set()
        generators = 0
        stack: list[tuple[str, Location | None, bool]] = [(os.path.abspath(directory), None, False)]
        while stack:
            path, named_at, plugin = stack.pop()
            real = os.path.realpath(path)
            if (real, plugin) in seen:
                continue  # shared (kustomize builds it again) or a cycle (kustomize refuses it)
            if not input_files.inside(root, real):
                raise KustomizeError(
                    f"builds on {display_path(os.path.normpath(path))}, outside {display_path(root)}: kubelint-ports "
                    "reads nothing outside the repository of the directory built (without one, the current "
                    "directory holding it, else the directory); not built", named_at)
            seen.add((real, plugin))
            if len(seen) > MAX_KUSTOMIZATIONS:
                raise KustomizeError(f"builds on more than {MAX_KUSTOMIZATIONS} kustomizations", named_at)
            checked = self.check(path, plugin)
            read |= checked.files
            named.update(checked.named)
            for place, node in checked.generators:
                generators += 1
                if generators > limit:
                    raise KustomizeError(
                        f"one build holds more than {limit:,} configMapGenerator/secretGenerator entries (limit "
                        "kustomize-generators): kustomize takes minutes over thousands; not built", place.at(node))
            stack.extend(reversed(checked.children))
        return BuildReads(frozenset(read), tuple(sorted(named.items())))

    def check(self, directory: str, plugin: bool) -> Checked:
        key = (os.path.realpath(directory), plugin)
        known = self.checked.get(key)
        if known is None:
            try:
                known = KustomizationCheck(directory, plugin).run()
            except KustomizeError as error:
                known = error
            self.checked[key] = known
        if isinstance(known, KustomizeError):
            raise known
        return known


class KustomizationCheck:
    """The files of one kustomization (`plugin`: one listed under `generators`/`transformers`/
    `validators`, whose resources are configurations)."""

    def __init__(self, directory: str, plugin: bool) -> None:
        self.directory = os.path.abspath(directory)
        self.real = os.path.realpath(directory)
        self.plugin = plugin
        self.result = Checked()
        self.file = ""
        self.place = TextLocator("")

    def run(self) -> Checked:
        file = kustomization_file(self.directory)
        if file is None:
            raise KustomizeError(f"{display_path(self.directory)} holds no kustomization.yaml")
        self.file, self.place = file, TextLocator(display_path(file))
        docs = self.read(file, self.place.at(), tree=True, text=True)
        root = docs[0] if docs else None
        if isinstance(root, yt.MappingNode):
            self.fields(root)
        return self.result

    def fields(self, root: yt.MappingNode) -> None:
        for key in ("resources", "bases", "components"):
            for entry in strings(root, key):
                self.resource(entry, self.plugin)
        for key in ("generators", "transformers", "validators"):
            for entry in strings(root, key):
                if "\n" in entry.value:
                    self.configuration_text(entry)
                else:
                    self.resource(entry, True)
        for key in ("crds", "configurations"):
            for entry in strings(root, key):
                self.file_entry(entry, self.place, yaml_text=True)
        for entry in strings(root, "patchesStrategicMerge"):
            self.inline(entry)  # kustomize parses every entry as YAML before trying it as a file
            if "\n" not in entry.value:
                self.file_entry(entry, self.place, yaml_text=True)
        for key in ("patches", "patchesJson6902", "replacements"):
            for item in items(root, key):
                if isinstance(path := yt.get(item, "path"), yt.ScalarNode):
                    self.file_entry(path, self.place, yaml_text=True)
                if isinstance(patch := yt.get(item, "patch"), yt.ScalarNode):
                    self.inline(patch)
        if isinstance(openapi := yt.get(yt.get(root, "openapi"), "path"), yt.ScalarNode):
            self.file_entry(openapi, self.place, yaml_text=True)
        for key in ("configMapGenerator", "secretGenerator"):
            for item in items(root, key):
                self.result.generators.append((self.place, item))
                self.generator_files(item, self.place)
        for key in ("helmCharts", "helmChartInflationGenerator"):
            for item in items(root, key):
                self.fetched_values(item, self.place)

    # --- entries ---------------------------------------------------------------------------------

    def refuse_remote(self, entry: yt.ScalarNode, text: str, place: TextLocator) -> None:
        if is_remote(text, os.path.join(self.directory, text.strip())):
            raise KustomizeError(
                f"{input_files.excerpt(text.strip(), 120)} is a remote resource, which kustomize would download or "
                "clone: kubelint-ports never uses the network; vendor it into the repository and refer to it by a "
                "local path", place.at(entry))

    def resource(self, entry: yt.ScalarNode, plugin: bool) -> None:
        """A file or a kustomization directory (resources, bases, components, and the non-inline
        entries of generators/transformers/validators)."""
        self.refuse_remote(entry, entry.value, self.place)
        path = os.path.join(self.directory, entry.value.strip())
        if os.path.isdir(path):
            if kustomization_file(path) is not None:  # else kustomize reports it
                self.result.children.append((path, self.place.at(entry), plugin))
            return
        docs = self.file_entry(entry, self.place, yaml_text=True, tree=plugin)
        for doc in docs if plugin else ():
            self.configuration(doc, TextLocator(display_path(path)))

    def configuration_text(self, entry: yt.ScalarNode) -> None:
        """An inline generator/transformer/validator configuration."""
        place = TextLocator(self.place.shown, entry, self.file)
        for doc in self.text(entry.value, place, tree=True):
            self.configuration(doc, place)

    def inline(self, entry: yt.ScalarNode) -> None:
        """Inline patch text, bounded as kustomize will parse it."""
        self.text(entry.value, TextLocator(self.place.shown, entry, self.file), tree=False)

    def file_entry(self, entry: yt.ScalarNode, place: TextLocator, *, yaml_text: bool,
                   tree: bool = False) -> list[yt.Node]:
        """A file a field names: not remote, inside this kustomization's directory, within budgets."""
        text = entry.value
        self.refuse_remote(entry, text, place)
        if "\n" in text or not text.strip():
            return []
        path = os.path.join(self.directory, text.strip())
        if not os.path.lexists(path):
            return []  # kustomize reports the missing file, and the line is found in its message
        return self.read(path, place.at(entry), tree=tree, text=yaml_text)

    def generator_files(self, item: yt.MappingNode, place: TextLocator) -> None:
        """`files:` (`[key=]path`), `envs:` and `env:` of a generator: data, bounded in size."""
        for entry in [*strings(item, "files"), *strings(item, "envs"),
                      *([env] if isinstance(env := yt.get(item, "env"), yt.ScalarNode) else [])]:
            _, equals, path = entry.value.partition("=")
            self.refuse_remote(entry, entry.value, place)
            if equals:
                entry = yt.ScalarNode(entry.tag, path, entry.start_mark, entry.end_mark)
            self.file_entry(entry, place, yaml_text=False)

    def configuration(self, doc: yt.Node, place: TextLocator) -> None:
        """A generator/transformer/validator configuration: no URL in the fields kustomize loads
        files from; its patch and generator files bounded as those of a kustomization."""
        if not isinstance(doc, yt.MappingNode):
            return
        if _text(yt.get(doc, "kind")) in _GENERATOR_KINDS:
            self.result.generators.append((place, doc))
        self.fetched_values(doc, place)
        for entry in [*([path] if isinstance(path := yt.get(doc, "path"), yt.ScalarNode) else []),
                      *strings(doc, "paths"), *(yt.get(item, "path") for item in items(doc, "replacements")
                                                if isinstance(yt.get(item, "path"), yt.ScalarNode))]:
            self.file_entry(entry, place, yaml_text=True)
        for key in ("patch", "patches"):
            if isinstance(patch := yt.get(doc, key), yt.ScalarNode):
                self.text(patch.value, TextLocator(place.shown, fixed=place.at(patch)), tree=False)
        self.generator_files(doc, place)

    def fetched_values(self, node: yt.Node, place: TextLocator) -> None:
        """Refuse a URL under any key kustomize or Helm fetch from, at any depth of a configuration."""
        for key, value in key_values(node):
            for scalar in [value] if isinstance(value, yt.ScalarNode) else (
                    [item for item in value.value if isinstance(item, yt.ScalarNode)]
                    if isinstance(value, yt.SequenceNode) else []):
                text = scalar.value.strip()
                _, _, after = text.partition("=")
                if _FETCHED.match(text) or _FETCHED.match(after.strip()) or (
                        key in _PLUGIN_REPOSITORY_KEYS and _CLONED.match(text)):
                    raise KustomizeError(
                        f"{input_files.excerpt(text, 120)} is a remote resource, which kustomize would download: "
                        "kubelint-ports never uses the network; vendor it into the repository and refer to it by "
                        "a local path", place.at(scalar))

    # --- reading -----------------------------------------------------------------------------------

    def read(self, path: str, named_at: Location, *, tree: bool, text: bool) -> list[yt.Node]:
        """A file kustomize reads: inside this kustomization's directory (symlinks resolved) and a
        regular file, checked before it is opened; within `max-file-mib`; YAML within the budgets."""
        shown = display_path(path)
        real = os.path.realpath(path)
        if not input_files.inside(self.real, real):
            raise KustomizeError(
                f"{shown} is outside {display_path(self.directory)} once symlinks are resolved: kustomize refuses "
                "it (its load restrictor) and kubelint-ports does not read it", named_at)
        try:
            mode = os.stat(path).st_mode
            if stat.S_ISDIR(mode):
                return []  # kustomize reports it
            if not stat.S_ISREG(mode):
                raise KustomizeError(f"{shown} is {input_files.kind_of(mode)}, not a file kustomize can read; "
                                     "not built", named_at)
            limit = budgets.current().max_file_bytes
            data = input_files.read_file(path, limit)
        except OSError as error:
            raise KustomizeError(f"cannot read {shown}: {error.strerror or error}", named_at) from None
        if len(data) > limit:
            raise KustomizeError(f"{shown} is over {budgets.current().max_file_mib} MiB (limit max-file-mib); "
                                 "not built", named_at)
        self.result.files.add(real)
        self.result.named[os.path.abspath(path)] = real
        return self.text(data, TextLocator(shown), tree=tree) if text else []

    def text(self, data: str | bytes, place: TextLocator, *, tree: bool) -> list[yt.Node]:
        """YAML kustomize will parse, within the budgets; its documents when `tree` (else only when
        counting its aliases needed them)."""
        try:
            budgets.check_text(data)
            if not tree and not budgets.may_have_aliases(data):
                return []
            return [doc for doc in budgets.compose_all(data, loader=ManifestLoader) if not yt.is_null(doc)]
        except budgets.LimitError as error:
            raise KustomizeError(f"{place.shown}, which kustomize would read: {error.problem}",
                                 place.at(mark=error.problem_mark)) from None
        except yaml.YAMLError as error:
            if budgets.may_have_aliases(data):  # what cannot be composed cannot have its aliases counted
                mark = getattr(error, "problem_mark", None)
                raise KustomizeError(f"{place.shown}, which kustomize would read, holds YAML aliases in YAML this "
                                     f"tool cannot read ({getattr(error, 'problem', None) or 'invalid'}): their "
                                     "expansion cannot be bounded; not built", place.at(mark=mark)) from None
            return []  # kustomize reports it


def key_values(node: yt.Node) -> Iterator[tuple[str, yt.Node]]:
    """(key, value) of every mapping pair below `node`, each node once (aliases share nodes)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, yt.MappingNode):
            for key, value in current.value:
                if isinstance(key, yt.ScalarNode) and key.value in _PLUGIN_FETCHED_KEYS:
                    yield key.value, value
                stack.append(value)
        elif isinstance(current, yt.SequenceNode):
            stack.extend(current.value)
