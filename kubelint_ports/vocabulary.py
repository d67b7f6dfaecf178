"""The words every stage speaks: where (`Location`), what object (`ObjectRef`), how bad
(`Severity`), and a problem with an input (`Diagnostic`). Findings and the report are in
`findings`."""

from __future__ import annotations

import enum
from dataclasses import field

from kubelint_ports.records import record

STDIN_NAME = "<stdin>"
# What every suppression comment holds (`# kubelint-ports: ignore KP101`): a file without it has
# none, which the file caches note when they read a file (suppression_comments reads it then).
COMMENT_MARK = "kubelint-ports:"
# Where a problem with the command itself is reported (a path given there that does not exist).
COMMAND_LINE = "command line"
NOT_FILES = frozenset((STDIN_NAME, COMMAND_LINE))


class Severity(enum.IntEnum):
    """Ordered so that `severity >= threshold` decides the exit code."""

    NOTE = 1
    WARNING = 2
    ERROR = 3

    @classmethod
    def parse(cls, text: str) -> "Severity":
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (use error, warning or note)") from None

    def __str__(self) -> str:
        return self.name.lower()


@record(frozen=True, slots=True, order=True)
class Location:
    """A 1-based place in a file; `end_column` is the column after the last character."""

    path: str
    line: int
    column: int
    end_line: int = 0
    end_column: int = 0
    message: str = field(default="", compare=False)

    def __str__(self) -> str:
        if self.line < 1:
            return self.path  # the whole file (unreadable, missing) or the command line
        return f"{self.path}:{self.line}:{self.column}"

    @property
    def is_file(self) -> bool:
        """False for standard input and the command line: nothing to open or annotate."""
        return self.path not in NOT_FILES


@record(frozen=True, slots=True, order=True)
class ObjectRef:
    api_version: str
    kind: str
    namespace: str  # "" when the manifest leaves it to the client's current namespace
    name: str

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.namespace}/{self.kind}/{self.name}"
        return f"{self.kind}/{self.name}"


@record(frozen=True, slots=True, order=True)
class Diagnostic:
    """An input problem (unreadable file, wrong field type): not a finding, exit code 2; or, when
    `internal`, a failure of the tool itself on that input (a bug): exit code 3."""

    location: Location
    message: str
    internal: bool = False


# What a reviewer reads in five seconds (issue "messages in five seconds"): a headline of at most
# HEADLINE_LIMIT characters, then one sentence of effect and one of fix, together at most SHORT_LIMIT.
HEADLINE_LIMIT = 120
SHORT_LIMIT = 400


@record(frozen=True, slots=True)
class Message:
    """A finding's words: the headline (what is wrong and where), one sentence on what breaks for
    whom (`effect`), one imperative sentence (`fix`), and the full analysis the rule tells with
    `-v`, in SARIF's markdown and on the HTML page ("" when the three parts are all there is).
    `unknown` names the facts that would settle an effect told as "depends": the run says once
    which options state them, not every finding."""

    headline: str
    effect: str = ""
    fix: str = ""
    analysis: str = ""
    unknown: tuple[str, ...] = ()

    @property
    def short(self) -> str:
        """`headline: effect fix`, what annotations, Markdown and JUnit show."""
        rest = " ".join(part for part in (self.effect, self.fix) if part)
        return f"{self.headline}: {rest}" if rest else self.headline

    @property
    def alert(self) -> str:
        """`headline: effect`, a code-scanning alert's text."""
        return f"{self.headline}: {self.effect}" if self.effect else self.headline

    @property
    def full(self) -> str:
        return self.analysis or self.short

    def __str__(self) -> str:
        return self.full

    @classmethod
    def from_story(cls, text: str) -> "Message":
        """The parts of a message told as one story ("<claim>: <why>. <then>. <remedy>."): the
        claim, the first sentence after it and, when there are more, the last."""
        claim, rest = split_claim(text)
        sentences = sentences_of(rest)
        effect = sentences[0] if sentences else ""
        fix = sentences[-1] if len(sentences) > 1 else ""
        return cls(claim, effect, fix, text)


def split_claim(message: str) -> tuple[str, str]:
    """'<short claim>: <explanation>' -> (claim, explanation); a message without ": " is all claim.
    A ": " inside backticks is part of a quoted field (`externalTrafficPolicy: Local`), not the split."""
    start = 0
    while (at := message.find(": ", start)) >= 0 and message.count("`", 0, at) % 2:
        start = at + 2
    claim, explanation = (message[:at], message[at + 2:]) if at >= 0 else (message, "")
    if not claim.strip() or not explanation.strip():
        return message.strip(), ""
    return claim.strip(), explanation.strip()


def sentences_of(text: str) -> list[str]:
    """The sentences of a message: split after ". " outside backticks and brackets, where the
    next word starts with a capital (so "v0.7.5. The" splits and "e.g. the" does not)."""
    sentences, start, depth, quoted = [], 0, 0, False
    for index, char in enumerate(text):
        if char == "`":
            quoted = not quoted
        elif not quoted and char in "([":
            depth += 1
        elif not quoted and char in ")]":
            depth = max(0, depth - 1)
        elif (char == "." and not quoted and not depth and text[index + 1:index + 2] == " "
              and text[index + 2:index + 3].isupper()):
            sentences.append(text[start:index + 1].strip())
            start = index + 2
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def shorten_middle(name: str, width: int) -> str:
    """`name` in at most `width` characters, its middle replaced by "…" (both ends say the most:
    the namespace and kind in front, the distinguishing suffix behind)."""
    if len(name) <= width:
        return name
    keep = max(width - 1, 2)
    front = (keep + 1) // 2
    return name[:front] + "…" + name[len(name) - (keep - front):]


def fit_headline(headline: str, *names: str, limit: int = HEADLINE_LIMIT) -> str:
    """The headline within `limit` characters, the object names it quotes shortened in the middle,
    longest first; ports and the words around them never change."""
    for name in sorted(set(names), key=len, reverse=True):
        over = len(headline) - limit
        if over <= 0:
            break
        if name and name in headline and len(name) > 12:
            headline = headline.replace(name, shorten_middle(name, max(12, len(name) - over)))
    return headline
