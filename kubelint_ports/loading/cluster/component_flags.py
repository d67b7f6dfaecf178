"""A container's command line read as a Kubernetes component's flags.

Which binary a container runs (kube-proxy, kube-apiserver, kube-controller-manager, directly, under
`hyperkube`, in a shell string or as the image's entrypoint), and its flags in pflag's forms.
"""

from __future__ import annotations

import re
import shlex

from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.loading.cluster.network_settings import Flag

COMPONENTS = ("kube-proxy", "kube-apiserver", "kube-controller-manager")
SHELLS = frozenset(("sh", "bash", "ash", "dash"))
HYPERKUBE_ALIASES = {"proxy": "kube-proxy", "apiserver": "kube-apiserver",
                     "controller-manager": "kube-controller-manager"}
BOOLEAN_FLAGS = frozenset(("masquerade-all", "allocate-node-cidrs", "iptables-localhost-nodeports"))
_TRUE_WORDS = frozenset(("1", "t", "T", "TRUE", "true", "True"))  # pflag's strconv.ParseBool
_IMAGE_NAME = re.compile(r"(?:.*/)?([^/:@]+)(?::[^/@]*)?(?:@.*)?")

Tokens = list[tuple[str, str, str]]  # (word, field path of the list item, field path of the list)


def command_tokens(container: yt.Node, container_path: str) -> Tokens:
    """(token, field path of the list item, field path of the list) for command then args.

    A shell string (`sh -c "kube-proxy --config=..."`) is split into words that share its item.
    """
    tokens: Tokens = []
    for key in ("command", "args"):
        list_path = f"{container_path}.{key}"
        for index, item in enumerate(yt.items(yt.get(container, key), list_path)):
            if not isinstance(item, yt.ScalarNode):
                continue
            text = yt.as_str(item)
            item_path = f"{list_path}[{index}]"
            words = [text]
            if any(space in text for space in " \t\n") and any(name in text for name in (*COMPONENTS, "hyperkube")):
                try:
                    words = shlex.split(text)
                except ValueError:
                    words = text.split()
            tokens.extend((word, item_path, list_path) for word in words)
    return tokens


def find_component(tokens: Tokens, image: str) -> tuple[str | None, int, str]:
    """Which control-plane binary a container runs, where its flags start, and the list holding it."""
    for index, (word, _, list_path) in enumerate(tokens):
        if word.startswith("-"):
            continue  # `--log-file=/var/log/kube-proxy` is a flag of a launcher, not the binary
        base = word.rsplit("/", 1)[-1]
        if base in COMPONENTS:
            return base, index + 1, list_path
        if base == "hyperkube" and index + 1 < len(tokens):
            alias = tokens[index + 1][0]
            component = HYPERKUBE_ALIASES.get(alias, alias if alias in COMPONENTS else None)
            if component:
                return component, index + 2, list_path
    match = _IMAGE_NAME.fullmatch(image.strip()) if image else None
    # Only with words to read: a container that merely uses the image says nothing of its settings.
    if match and tokens and tokens[0][0].rsplit("/", 1)[-1] not in SHELLS:
        name = match.group(1)
        for component in COMPONENTS:
            if re.fullmatch(rf"{component}(-(amd64|arm64|arm|ppc64le|s390x))?", name):
                # The image's entrypoint is the binary: the container's words are all its flags.
                return component, 0, tokens[0][2] if tokens else ""
    return None, 0, ""


def parse_flags(tokens: Tokens) -> dict[str, Flag]:
    """pflag's forms: `--name=value`, `--name value` (not for booleans), bare boolean `--name`."""
    flags: dict[str, Flag] = {}
    index = 0
    while index < len(tokens):
        word, item_path, _ = tokens[index]
        index += 1
        if not word.startswith("--") or word == "--":
            continue
        name, equals, value = word[2:].partition("=")
        if equals:
            flags[name] = Flag(name, value, item_path)
        elif name in BOOLEAN_FLAGS:
            flags[name] = Flag(name, None, item_path)
        elif index < len(tokens) and not tokens[index][0].startswith("-"):
            flags[name] = Flag(name, tokens[index][0], tokens[index][1])
            index += 1
        else:
            flags[name] = Flag(name, "", item_path)
    return flags


def flag_bool(flag: Flag) -> bool:
    if flag.value is None:
        return True
    return flag.value in _TRUE_WORDS
