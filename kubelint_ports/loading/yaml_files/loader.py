"""The loader every reader composes with: libyaml's composer, tagging scalars the way the readers
in `yamltree` expect."""

from __future__ import annotations

import operator

import yaml

from kubelint_ports.loading.yaml_files import yamltree
from kubelint_ports.loading.yaml_files.yamltree import ScalarNode, SequenceNode


class ManifestLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """Composes without implicit typing: the readers in `yamltree` type the few fields they read.

    PyYAML's resolver runs a Python regex per scalar, which costs more than libyaml's parsing.
    The composer also calls two resolver hooks per node that only path resolvers use (none here):
    C builtins that do nothing take their place (10% of compose time measured on the 10k corpus;
    `resolve` itself stays Python: replacing it with a C builtin measured no gain).
    """

    descend_resolver = operator.is_  # called as (parent, index): two arguments, no effect
    ascend_resolver = tuple  # called with none: returns the empty tuple singleton

    def resolve(self, kind, value, implicit):
        if kind is ScalarNode:
            return yamltree.PLAIN if implicit[0] else yamltree.STR
        return yamltree.SEQ if kind is SequenceNode else yamltree.MAP
