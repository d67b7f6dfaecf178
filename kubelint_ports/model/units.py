"""Deployment units: the objects that land in one cluster.

A repository often holds several environments (Kustomize overlays, one chart with a values file
per environment, Argo CD Applications and Flux Kustomizations pointing at paths for different
clusters). Objects of two environments never meet, so the rules that compare objects run within
a unit only; rules about one object run once, wherever it is.

Which unit an object is in, strongest first:
1. the configuration's `units:` (name -> paths; a path matches the object's file, or the
   Kustomize overlay or chart it was rendered from, and everything below it);
2. GitOps objects among the inputs: an Argo CD `Application` (and an `ApplicationSet`'s list
   generator) names its source path and destination cluster; a Flux `Kustomization` names its
   path, and the cluster is the one whose directory holds the Flux object (`clusters/prod/`);
3. the input: each Kustomize overlay that no other kustomization builds on is its own unit, and
   so is each values set of a chart given several (`chart[values-prod]`);
4. otherwise the run's one unnamed unit ("").

A values set of a chart is named in `units:` by its values file (exactly); the chart's directory
names every set, as it names every file below it.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping, Sequence

from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.records import record

ARGO_GROUP = "argoproj.io"
FLUX_KUSTOMIZE_GROUP = "kustomize.toolkit.fluxcd.io"
FLUX_HELM_GROUP = "helm.toolkit.fluxcd.io"


@record(frozen=True, slots=True)
class Target:
    """A path (relative to the repository) that a GitOps object deploys to a named unit."""

    path: str
    unit: str


def gitops_targets(root: yt.Node, group: str, kind: str, document_path: str) -> list[Target]:
    """What a GitOps object deploys where, from its document (empty for any other object)."""
    if group == ARGO_GROUP and kind == "Application":
        return _argo_targets(yt.get(root, "spec"), {})
    if group == ARGO_GROUP and kind == "ApplicationSet":
        spec = yt.get(root, "spec")
        template = yt.get(spec, "template")
        targets = []
        for generator in _list(yt.get(spec, "generators")):
            for element in _list(yt.at(generator, "list.elements")):
                values = {key.value: value.value for key, value in _pairs(element)
                          if isinstance(key, ScalarNode) and isinstance(value, ScalarNode)}
                targets += _argo_targets(yt.get(template, "spec"), values)
        return targets
    if group == FLUX_KUSTOMIZE_GROUP and kind == "Kustomization":
        path = yt.as_str(yt.at(root, "spec.path"))
        return [Target(_clean(path), "flux:" + _flux_cluster(root, document_path))] if path else []
    if group == FLUX_HELM_GROUP and kind == "HelmRelease":
        chart = yt.as_str(yt.at(root, "spec.chart.spec.chart"))
        if chart.startswith(("./", "../")) or "/" in chart:  # a chart in the repository, not a repository's
            return [Target(_clean(chart), "flux:" + _flux_cluster(root, document_path))]
    return []


def gitops_targets_of(root: yt.Node, group: str, kind: str, document_path: str) -> list[Target]:
    """`gitops_targets`, with a field of an unexpected type meaning no target: these objects are
    read for where they deploy, never judged."""
    try:
        return gitops_targets(root, group, kind, document_path)
    except yt.FieldTypeError:
        return []


def _argo_targets(spec: yt.Node | None, values: Mapping[str, str]) -> list[Target]:
    destination = yt.get(spec, "destination")
    cluster = (_expand(yt.as_str(yt.get(destination, "name")), values)
               or _expand(yt.as_str(yt.get(destination, "server")), values))
    if not cluster:
        return []
    sources = [yt.get(spec, "source"), *_list(yt.get(spec, "sources"))]
    paths = [_expand(yt.as_str(yt.get(source, "path")), values) for source in sources if source is not None]
    return [Target(_clean(path), "argocd:" + cluster) for path in paths if path]


def _list(node) -> list:
    """A sequence's items; anything else (a GitOps object we only read, never judge) none."""
    return node.value if isinstance(node, SequenceNode) else []


def _pairs(node) -> list:
    return list(yt.pairs(node)) if isinstance(node, MappingNode) else []


def _expand(text: str, values: Mapping[str, str]) -> str:
    """An ApplicationSet template's `{{key}}` / `{{.key}}` from a list element; unknown: left."""
    return re.sub(r"\{\{\s*\.?([\w.-]+)\s*\}\}", lambda m: values.get(m[1], m[0]), text)


def _flux_cluster(root: yt.Node, document_path: str) -> str:
    """The cluster a Flux object applies to: a remote one named by its kubeConfig secret, else the
    one whose Flux reads the directory that holds the object."""
    secret = yt.as_str(yt.at(root, "spec.kubeConfig.secretRef.name"))
    return secret or (os.path.dirname(document_path).replace(os.sep, "/") or ".")


def _clean(path: str) -> str:
    return os.path.normpath(path.strip().lstrip("/")).replace(os.sep, "/")


@record(frozen=True, slots=True)
class UnitRules:
    """How objects are put in units: the configuration's `units:` and the GitOps targets found."""

    configured: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (unit name, paths relative to the repository)
    targets: tuple[Target, ...] = ()
    root: str = ""  # the repository's directory, which relative paths are read from
    # The values sets of charts given several, each rendered as its own unit (`Document.unit`):
    # (that unit, its values files), so that `units:` may place a set by its values file.
    value_sets: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def units_of(self, document) -> tuple[str, ...]:
        """The units an object lands in (one, or several when GitOps objects deploy its path to
        several clusters); ("",) for the run's unnamed unit."""
        unit = getattr(document, "unit", "")
        if not self.configured and not self.targets:  # nothing places objects by their path
            return (unit,)
        places = [p for p in (unit, getattr(document, "path", "")) if p]
        relative = [self._relative(place) for place in places]
        values = {self._relative(path) for name, files in self.value_sets if unit and name == unit for path in files}
        if values:  # a values file names its set, before a directory that holds every set
            for name, paths in self.configured:
                if any(path.rstrip("/") in values for path in paths):
                    return (name,)
        for name, paths in self.configured:
            if any(_under(place, path) for place in relative for path in paths):
                return (name,)
        targeted = sorted({target.unit for target in self.targets
                           if any(_under(place, target.path) for place in relative)})
        if targeted:
            return tuple(targeted)
        return (getattr(document, "unit", ""),)

    def _relative(self, path: str) -> str:
        return _relative_to(path, self.root or os.curdir, os.getcwd())


@functools.lru_cache(maxsize=4096)
def _relative_to(path: str, root: str, working_directory: str) -> str:
    """`path` relative to `root` (both as given, relative ones to the working directory); asked
    once per object and unit, for a few hundred distinct files."""
    absolute = os.path.join(working_directory, path)
    base = os.path.join(working_directory, root)
    return os.path.relpath(os.path.normpath(absolute), os.path.normpath(base)).replace(os.sep, "/")


def _under(place: str, path: str) -> bool:
    path = path.rstrip("/")
    # `x.tgz:chart/templates/...`: the members of a packaged chart are under the archive
    return path in ("", ".") or place == path or place.startswith((path + "/", path + ":"))


def partition(objects: Iterable, rules: UnitRules, document_of=lambda thing: thing.document
              ) -> dict[str, list]:
    """Objects by unit, in input order; an object in several units is in each."""
    units: dict[str, list] = {}
    for thing in objects:
        for unit in rules.units_of(document_of(thing)):
            units.setdefault(unit, []).append(thing)
    return units


def unit_names(rules: UnitRules, documents: Sequence) -> list[str]:
    """Every unit the documents fall in, sorted ("" first)."""
    return sorted({unit for document in documents for unit in rules.units_of(document)})
