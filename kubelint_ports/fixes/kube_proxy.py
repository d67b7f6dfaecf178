"""KP401's fix: kube-proxy's missing or empty clusterCIDR set to the pod CIDR the inputs state.

The value is never guessed: it is the cluster-wide pod range the model ranks first among what the
inputs write (the `--pod-cidr` option, kube-controller-manager's `--cluster-cidr`, kubeadm's
`networking.podSubnet`, a CNI configuration such as flannel's `Network`), both families of a
dual-stack cluster; a documented default or one node's podCIDR does not count. When no input
states it, the finding keeps its fix with the reason, and nothing is written.

Where it goes, as the configuration is written:
- a `KubeProxyConfiguration` document: `clusterCIDR: ""` gets the value at its exact span; an
  absent key is added after `kind:` through ruamel.yaml's checked round trip;
- the `config.conf` of a ConfigMap (kubeadm's `kube-system/kube-proxy`), YAML inside a literal
  block: the value, or a new `clusterCIDR:` line after the embedded `kind:` line, written at the
  block's own indentation;
- kube-proxy's flags: `--cluster-cidr=` completed, or `--cluster-cidr=<value>` added: after the
  binary in a shell string, at the end of a flow list, or as a new item of a block list (round
  trip).
Every text edit is checked by composing the file again: the document must read as before but
for the new value, or the fix is not applied and the finding says why.
"""

from __future__ import annotations

import os
import re

import yaml

from kubelint_ports.findings import Edit, Finding, Fix
from kubelint_ports.fixes.plan import SAFE, UNSAFE, Context
from kubelint_ports.fixes.source import (
    NoFix, SourceFile, line_starts, offset_of, region, scalar_span, scalar_text, target_in)
from kubelint_ports.loading import Document, ManifestLoader, budgets
from kubelint_ports.loading.yaml_files import yamltree as yt

FLAG = "--cluster-cidr"
# The kube-proxy binary inside a shell string: a word of its own, maybe with a directory.
BINARY = re.compile(r"(?:(?<=^)|(?<=[\s;&|(]))(?:[\w./-]*/)?kube-proxy(?=\s|$)")
EMPTY_FLAG = re.compile(r"(?:(?<=^)|(?<=\s))--cluster-cidr=(?=\s|$)")


# The pod ranges the cluster itself allocates from: kube-controller-manager hands nodes their
# podCIDRs out of --cluster-cidr, which kubeadm sets from networking.podSubnet. Labels as the
# loaders write them (`component_pods`, `kubeadm_config`).
CLUSTER_OWN_SOURCES = ("kube-controller-manager --cluster-cidr", "kubeadm networking.podSubnet")


def set_cluster_cidr(finding: Finding, context: Context, edits: bool) -> Fix | None:
    """KP401's fix: the stated pod CIDR written where the finding's configuration is; with
    `edits`, the exact edit too. It changes how kube-proxy treats all traffic (what it masquerades),
    so it is safe only when the range is the one the cluster allocates pods from (the
    controller-manager's, kubeadm's); from a CNI configuration (flannel's `Network` is often the
    manifest's default, left as shipped) or the --pod-cidr option it is unsafe."""
    network = getattr(context.cluster, "network", None)
    proxy = next((proxy for proxy in (network.proxies if network is not None else ())
                  if proxy.owner.ref == finding.subject and proxy.owner.document.path == finding.location.path
                  and (proxy.cluster_cidr_path or proxy.anchor_path) == finding.field_path), None)
    if proxy is None:
        return None
    setting = proxy.cluster_cidr_setting
    stated = stated_pod_cidr(network)
    if stated is None:
        return Fix(SAFE, f"set {setting} to the cluster's pod CIDR",
                   blocked="no input states the pod CIDR (kubeadm networking.podSubnet, flannel's Network, "
                           "kube-controller-manager --cluster-cidr, or --pod-cidr): the fix never guesses it")
    value, sources = stated
    own = all(source.label.startswith(CLUSTER_OWN_SOURCES) for source in sources)
    fix = Fix(SAFE if own else UNSAFE, f"set {setting} to {value}, the pod CIDR from {stated_where(sources)}"
              + ("" if own else "; unsafe: not the range the cluster's controller-manager or kubeadm allocates "
                                "pods from, and kube-proxy tells pod traffic from outside traffic by it for every "
                                "Service"))
    try:
        edit = cluster_cidr_edit(proxy, value, finding, context, edits)
    except NoFix as reason:
        return Fix(fix.applicability, fix.description, blocked=str(reason))
    return Fix(fix.applicability, fix.description, edits=(edit,) if edits and edit is not None else ())


set_cluster_cidr.whole_run = True  # finds its own place: a configuration, an embedded one, flags


def stated_pod_cidr(network) -> tuple[str, list] | None:
    """(value, the sources that state it) of the cluster's pod range: the first cluster-wide
    source of each family that the inputs write (not a documented default); None when none does."""
    chosen = {version: next((source for source in network.pod_ranges if source.cluster_wide
                             and not source.defaulted and source.of_family(version)), None) for version in (4, 6)}
    found = [(version, source) for version, source in chosen.items() if source is not None]
    if not found:
        return None
    sources = list(dict.fromkeys(source for _, source in found))
    if len(sources) == 1:
        value = ",".join(str(network) for network in sources[0].networks)
    else:
        value = ",".join(str(source.of_family(version)[0]) for version, source in found)
    return value, sources


def stated_where(sources: list) -> str:
    """The sources as the description names them: what states the range, and where it is written.
    The file by its name only: a description is text, which the code-scanning formats cannot make
    relative to the repository as they do locations, and it must read the same from any directory."""
    named = []
    for source in sources:
        owner = source.owner
        place = owner.document.location(source.field_path) if owner is not None and source.field_path else None
        named.append(f"{source.label} ({os.path.basename(place.path)}:{place.line})" if place is not None and place.line
                     else source.label)
    return " and ".join(dict.fromkeys(named))


def cluster_cidr_edit(proxy, value: str, finding: Finding, context: Context, edits: bool) -> Edit | None:
    """The edit that writes `value`; None when it is a round trip not asked for yet (`edits`
    False). Raises NoFix."""
    document = proxy.owner.document
    outer = getattr(document, "outer", document)  # an EmbeddedDocument's ConfigMap
    if type(outer) is not Document or outer.text_source is None or outer.text_source.file is None:
        raise NoFix(f"{finding.location.path} is rendered (a chart, a Kustomize build) or standard input: "
                    f"set it where it is written")
    source = context.sources.read(outer.text_source.file, outer.path)
    if source is None:
        raise NoFix(f"{outer.path} cannot be read again")
    ordinal, start, end, _, _ = outer.span
    path = document.prefix if document is not outer else proxy.cluster_cidr_path or proxy.anchor_path
    broken = unreadable_document(source)
    if broken:  # the edit is checked by composing the whole file again, which cannot be done
        raise NoFix(f"{broken}: the fix checks the whole file around its edit, so fix that document first")
    target = target_in(source, ordinal, outer.items, (start, end), path, None)
    if target is None:
        raise NoFix(f"{outer.path} is not what was linted")
    place = Place(source, ordinal, target.prefix + yt.parse_field_path(path))
    if document is not outer:
        return embedded_edit(place, target.value, value)
    if proxy.from_flags:
        return flags_edit(place, target, proxy, value, edits)
    if proxy.cluster_cidr_path:
        if not isinstance(target.value, yaml.ScalarNode):
            raise NoFix("clusterCIDR is not a scalar")
        first, last = scalar_span(target.value)
        return place.checked(first, last, new_scalar(target.value, value), lambda old, new: new == value)
    kind = yt.child(target.obj, "kind")
    if kind is None:
        raise NoFix("the configuration has no `kind:` to add clusterCIDR after")
    if not edits:
        return None
    from kubelint_ports.fixes.structure import Refused, insertion

    try:
        first, last, text = insertion(source.text, target.root, target.prefix, ("clusterCIDR", value, "kind"),
                                      kind[1].end_mark.line)
    except Refused as refused:
        raise NoFix(str(refused)) from None
    place.segments = target.prefix + ["clusterCIDR"]
    return place.checked(first, last, text, lambda old, new: old is None and new == value)


def unreadable_document(source: SourceFile) -> str:
    """"" when every YAML document of the file composes; else which one does not, where and why
    (`m.yaml:27: YAML document 3 of m.yaml is not valid YAML (...)`)."""
    documents = 0
    try:
        for _ in budgets.compose_all(source.text, loader=ManifestLoader):
            documents += 1
    except (yaml.YAMLError, ValueError) as error:
        mark = getattr(error, "problem_mark", None)
        place = f"{source.path}:{mark.line + 1}" if mark is not None else source.path
        problem = getattr(error, "problem", None) or str(error).split("\n")[0] or type(error).__name__
        return f"{place}: YAML document {documents + 1} of {source.path} is not valid YAML ({problem[:200]})"
    return ""


def embedded_edit(place: Place, block, value: str) -> Edit:
    """clusterCIDR written inside the ConfigMap's literal block, at the block's indentation."""
    from kubelint_ports.loading.cluster.embedded_config import block_indent

    shown = yt.format_field_path(place.segments)
    if not isinstance(block, yaml.ScalarNode) or block.style != "|":
        raise NoFix(f"{shown} is not a literal block (|): its lines cannot be edited in place")
    inner = compose_or_none(block.value)
    source = place.source
    first_line = block.start_mark.line + 1  # 0-based file line of the block's first line
    lines = [line[:-1] if line.endswith("\r") else line for line in source.text.split("\n")]
    indent = block_indent(block.value, lines, first_line) \
        if isinstance(inner, yaml.MappingNode) and not inner.flow_style else None
    if indent is None:
        raise NoFix(f"{shown} is not block-style YAML whose lines are the file's")
    starts = line_starts(source.text)
    wanted = {**plain(inner), "clusterCIDR": value}

    def reads(old, new) -> bool:
        return isinstance(new, str) and plain(compose_or_none(new)) == wanted

    present = yt.child(inner, "clusterCIDR")
    if present is not None:
        node = present[1]
        length = node.end_mark.index - node.start_mark.index
        first = offset_of(source.text, starts, first_line + node.start_mark.line + 1, indent + node.start_mark.column + 1)
        if not isinstance(node, yaml.ScalarNode) or first is None or \
                source.text[first:first + length] != block.value[node.start_mark.index:node.end_mark.index]:
            raise NoFix(f"clusterCIDR in {shown} is not written on one line as the file holds it")
        return place.checked(first, first + length, new_scalar(node, value), reads)
    kind = yt.child(inner, "kind")
    if kind is None or kind[1].end_mark.line != kind[0].start_mark.line:
        raise NoFix(f"{shown} has no one-line `kind:` to add clusterCIDR after")
    line = first_line + kind[1].end_mark.line + 1  # the 0-based file line after `kind:`
    if line >= len(starts):
        raise NoFix(f"`kind:` is the last line of {source.path}")
    ending = "\r\n" if source.text[starts[line] - 2:starts[line]] == "\r\n" else "\n"
    text = " " * (indent + kind[0].start_mark.column) + f"clusterCIDR: {value}" + ending
    return place.checked(starts[line], starts[line], text, reads)


def new_scalar(node: yaml.ScalarNode, value: str) -> str:
    """The text that replaces a clusterCIDR scalar: in the quotes it had, unless they were there
    only to write it empty (a dual-stack pair keeps them: its comma ends a flow item)."""
    return scalar_text(value, node.style, node.value == "" and "," not in value)


def plain(node):
    """A configuration as plain data to compare; NoFix when aliases make it too large to read whole
    (`yamltree.to_plain`'s budget)."""
    try:
        return yt.to_plain(node)
    except yt.FieldTypeError:
        raise NoFix("the configuration is too large to compare once its aliases are expanded") from None


def compose_or_none(text: str):
    try:
        return budgets.compose(text, loader=ManifestLoader)
    except (yaml.YAMLError, ValueError):
        return None


def flags_edit(place: Place, target, proxy, value: str, edits: bool) -> Edit | None:
    """`--cluster-cidr=` completed or added to kube-proxy's command line."""
    node = target.value
    shown = yt.format_field_path(place.segments)
    word = f"{FLAG}={value}"
    if proxy.cluster_cidr_path:  # the item holding the empty flag (or its empty value)
        if not isinstance(node, yaml.ScalarNode):
            raise NoFix(f"{shown} is not a string")
        if node.value == "":
            new = value
        elif (found := EMPTY_FLAG.search(node.value)) is not None:
            new = node.value[:found.end()] + value + node.value[found.end():]
        else:
            raise NoFix(f"{shown} does not hold an empty {FLAG}=")
        return item_edit(place, node, new)
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        raise NoFix(f"{shown} is not a list of words")
    shell = next((item for item in node.value if isinstance(item, yaml.ScalarNode) and BINARY.search(item.value)
                  and re.search(r"\s", item.value.strip())), None)
    if shell is not None:  # `sh -c "exec kube-proxy --v=2"`: the flag goes after the binary
        found = BINARY.search(shell.value)
        place.segments = place.segments + [node.value.index(shell)]
        return item_edit(place, shell, shell.value[:found.end()] + f" {word}" + shell.value[found.end():])
    last = node.value[-1]
    grown = lambda old, new: isinstance(old, list) and new == old + [word]  # noqa: E731
    if node.flow_style:
        return place.checked(last.end_mark.index, last.end_mark.index, f", {word}", grown)
    if not edits:
        return None
    from kubelint_ports.fixes.structure import Refused, insertion

    try:
        first, end, text = insertion(place.source.text, target.root, place.segments, word,
                                     last.end_mark.line - (1 if last.end_mark.column == 0 else 0))
    except Refused as refused:
        raise NoFix(str(refused)) from None
    return place.checked(first, end, text, grown)


def item_edit(place: Place, node: yaml.ScalarNode, new: str) -> Edit:
    """A one-line string item rewritten as `new`, in the quotes it had; refused when its text holds
    escapes or breaks (the file's characters are not its value's)."""
    first, last = scalar_span(node)
    written = place.source.text[first:last]
    inner = written[1:-1] if node.style in ("'", '"') else written
    shown = yt.format_field_path(place.segments)
    if node.style not in (None, "", "'", '"') or inner.replace("''", "'") != node.value or "\n" in written \
            or (node.style == '"' and "\\" in written):
        raise NoFix(f"{shown} is not written as one plain or quoted line")
    text = scalar_text(new.replace("'", "''") if node.style == "'" else new, node.style, False)
    return place.checked(first, last, text, lambda old, now: now == new)


class Place:
    """The document of a file a fix edits, and the field in it the edit is about (`segments`
    from the document's root)."""

    def __init__(self, source: SourceFile, ordinal: int, segments: list) -> None:
        self.source, self.ordinal, self.segments = source, ordinal, segments

    def checked(self, start: int, end: int, text: str, reads) -> Edit:
        """The edit, once the file composed again with it reads as before everywhere but at the
        field, and `reads(old value, new value)` (plain data, None when absent) accepts the field."""
        changed = self.source.text[:start] + text + self.source.text[end:]
        try:
            old_roots = list(budgets.compose_all(self.source.text, loader=ManifestLoader))
            new_roots = list(budgets.compose_all(changed, loader=ManifestLoader))
        except (yaml.YAMLError, ValueError):
            raise NoFix("the edited file would not be valid YAML") from None
        if len(old_roots) != len(new_roots) or not all(
                yt.same_tree(old, new) for index, (old, new) in enumerate(zip(old_roots, new_roots))
                if index != self.ordinal):
            raise NoFix("the edit would change another document of the file")
        old, new = plain(old_roots[self.ordinal]), plain(new_roots[self.ordinal])
        if not reads(value_at(old, self.segments), value_at(new, self.segments)):
            raise NoFix("the edited configuration would not read as the fix means")
        if without(old, self.segments) != without(new, self.segments):
            raise NoFix("the edit would change more of the document than the fix")
        return Edit(region(self.source.text, start, end, self.source.path), start, end, text)


def value_at(data, segments: list):
    for segment in segments:
        if isinstance(segment, int):
            data = data[segment] if isinstance(data, list) and segment < len(data) else None
        else:
            data = data.get(segment) if isinstance(data, dict) else None
    return data


def without(data, segments: list):
    """`data` with the value at `segments` taken out (the rest of a document, to compare)."""
    if not segments:
        return None
    head, rest = segments[0], segments[1:]
    if isinstance(data, dict):
        return {key: (without(value, rest) if key == head else value) for key, value in data.items()
                if not (key == head and not rest)}
    if isinstance(data, list) and isinstance(head, int):
        return [without(value, rest) if index == head else value for index, value in enumerate(data)
                if not (index == head and not rest)]
    return data
