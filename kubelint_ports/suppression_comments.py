"""Suppression comments, read: where a `# kubelint-ports: ignore ...` comment (or a Helm template's
`{{/* kubelint-ports: ... */}}`) stands, what it names and which lines it silences. `suppressions`
applies them to a run's findings and reports the ones that silence nothing (KP005)."""

from __future__ import annotations

import re

from kubelint_ports.records import record
from kubelint_ports.vocabulary import COMMENT_MARK, Location

# --- suppression comments ------------------------------------------------------------------------
# `# kubelint-ports: ignore KP101 -- reason` (the finding's line, or the line below a comment-only
# line), `# kubelint-ports: ignore-object KP301,KP302 -- reason` (every line of the YAML document it
# stands in), and in a Helm template the same words in a template comment:
# `{{/* kubelint-ports: ignore KP201 -- reason */}}` (`{{- /* ... */ -}}` too).

_VERB = re.compile(r"(?P<verb>ignore-object|ignore)(?=\s|$|,)\s*(?P<rest>.*)$", re.DOTALL)
_DOCUMENT_BREAK = re.compile(r"^(?:---|\.\.\.)(?:\s|$)")
DEFAULT_COMMENT_REASON = "kubelint-ports: ignore comment"


@record(frozen=True, slots=True)
class SuppressionComment:
    """One suppression comment: where it is (its characters on its line), what it names, for which
    lines it counts."""

    path: str
    line: int  # 1-based line of the comment
    column: int  # 1-based column where the comment starts (`#` or `{{`)
    end_column: int  # the column after its last character
    scope: str  # "line" or "object"
    rules: tuple[str, ...]  # as written
    reason: str
    applies_from: int  # first line it silences (a line, or the document's first)
    applies_to: int  # last line it silences
    whole_line: bool = False  # the comment is all its line holds (a removal drops the line)
    problem: str = ""  # a comment that cannot be read ("names no rule ...")

    @property
    def location(self) -> Location:
        return Location(self.path, self.line, self.column, self.line, self.end_column)

    @property
    def kind(self) -> str:
        return "ignore-object" if self.scope == "object" else "ignore"


def comment_in(line: str) -> tuple[int, int, str] | None:
    """(start, end, body) of the suppression comment on a line, offsets 0-based; None when none.
    Found by scanning, not by a regular expression: a line is input, and a pattern with two
    unbounded runs (`.*?\\s*`) took minutes on one long line of spaces."""
    if COMMENT_MARK not in line:
        return None
    return template_comment(line) or yaml_comment(line)


MARKS_PER_LINE = 8  # the marks of one line looked at: a line of thousands of them is no comment


def template_comment(line: str) -> tuple[int, int, str] | None:
    """`{{/* kubelint-ports: BODY */}}` (either side trimmed with `-`), the first on the line."""
    at = line.find(COMMENT_MARK)
    for _ in range(MARKS_PER_LINE):
        if at < 0:
            break
        opening = line.rfind("{{", 0, at)
        inner = line[opening + 2:at].lstrip("-").strip() if opening >= 0 else None
        closing = line.find("*/", at)
        if inner == "/*" and closing >= 0:
            after = line[closing + 2:].lstrip()
            after = after[1:].lstrip() if after.startswith("-") else after
            if after.startswith("}}"):
                end = len(line) - len(after) + 2
                return opening, end, line[at + len(COMMENT_MARK):closing].strip()
        at = line.find(COMMENT_MARK, at + 1)
    return None


def yaml_comment(line: str) -> tuple[int, int, str] | None:
    """`# kubelint-ports: BODY` to the end of the line: a `#` at the line's start or after blank."""
    at = line.find(COMMENT_MARK)
    for _ in range(MARKS_PER_LINE):
        if at < 0:
            break
        hash_at = line.rfind("#", 0, at)
        if hash_at >= 0 and not line[hash_at + 1:at].strip() and (hash_at == 0 or line[hash_at - 1].isspace()):
            return hash_at, len(line.rstrip()), line[at + len(COMMENT_MARK):].strip()
        at = line.find(COMMENT_MARK, at + 1)
    return None


def parse_body(body: str) -> tuple[str, tuple[str, ...], str] | None:
    """`ignore KP101, host-port -- reason` -> ("line", ("KP101", "host-port"), "reason")."""
    match = _VERB.match(body.strip())
    if not match:
        return None
    rest, _, reason = match.group("rest").partition("--")
    rules = tuple(token for token in re.split(r"[,\s]+", rest.strip()) if token)
    return ("object" if match.group("verb") == "ignore-object" else "line"), rules, reason.strip()


def comment_only(line: str) -> bool:
    """A line that holds a comment and nothing else (a YAML `#` comment or a template comment)."""
    stripped = line.strip()
    if stripped.startswith("#"):
        return True
    found = template_comment(stripped) if stripped.startswith("{{") else None
    return found is not None and found[0] == 0 and found[1] == len(stripped)


def scalar_spans(text: str) -> list[tuple[tuple[int, int], tuple[int, int]]] | None:
    """Where the text's scalars are, as ((line, column), (line, column)) from 0, read by PyYAML's
    scanner: a `#` inside one (a quoted string, a block scalar's script) is data, not a comment.
    A block scalar starts on the line after its `|` or `>` (a comment may follow the indicator).
    None when the text does not scan as YAML (a chart's template): then only the line is read."""
    import yaml

    scanner = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    spans = []
    try:
        while scanner.check_token():
            token = scanner.get_token()
            if isinstance(token, yaml.ScalarToken):
                start, end = token.start_mark, token.end_mark
                begin = (start.line + 1, 0) if token.style in ("|", ">") else (start.line, start.column)
                spans.append((begin, (end.line, end.column)))
    except yaml.YAMLError:
        return None
    finally:
        scanner.dispose()
    return spans


def inside_scalar(spans, line: int, column: int) -> bool:
    """Whether (line, column) lies in one of `spans` (in document order, none overlapping): one
    binary search, so a file of many marks costs no more than its length."""
    import bisect

    at = bisect.bisect_right(spans, ((line, column), (line, column))) - 1
    while at >= 0 and spans[at][0] == (line, column) and at + 1 < len(spans) and spans[at + 1][0] == (line, column):
        at += 1
    return at >= 0 and spans[at][0] <= (line, column) < spans[at][1]


def code_lines_after(lines: list[str]) -> list[int | None]:
    """For each line number, the first later line that is not only a comment (None at the end), in
    one pass from the bottom: a run of 20,000 comment lines used to be searched once per comment."""
    after: list[int | None] = [None] * (len(lines) + 1)
    following = None
    for number in range(len(lines), 0, -1):
        after[number] = following
        if not comment_only(lines[number - 1]):
            following = number
    return after


def comments_of_text(path: str, text: str) -> list[SuppressionComment]:
    """The suppression comments of a file's text, each with the lines it silences. A mark inside
    a YAML scalar (`echo # kubelint-ports: ...` in a ConfigMap's script) is no comment: it neither
    silences a finding nor is ever "fixed" away."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    spans: list | None = None
    scanned = False  # the text is scanned once, when a first candidate is found
    after: list[int | None] | None = None  # made when a comment above a key asks
    starts = [1]  # the first line of each YAML document
    starts += [number + 1 for number, line in enumerate(lines, start=1) if _DOCUMENT_BREAK.match(line)]
    found = []
    for number, line in enumerate(lines, start=1):
        where = comment_in(line)
        if where is None:
            continue
        start, end, body = where
        if not line[start:].startswith("{{"):  # a `#` comment: data when it stands in a scalar
            if not scanned:
                spans, scanned = scalar_spans(text), True
            if spans and inside_scalar(spans, number - 1, start):
                continue
        parsed = parse_body(body)
        whole_line = not line[:start].strip() and not line[end:].strip()
        if parsed is None:
            found.append(SuppressionComment(path, number, start + 1, end + 1, "line", (), "", 0, -1, whole_line,
                                            problem="is neither `ignore RULES -- reason` nor "
                                                    "`ignore-object RULES -- reason`"))
            continue
        scope, rules, reason = parsed
        if scope == "object":
            first = max(s for s in starts if s <= number)
            last = next((s - 2 for s in starts if s > number), len(lines))
        elif whole_line:  # above a key: it silences the next line that is not only a comment
            after = code_lines_after(lines) if after is None else after
            first = last = after[number] or number
        else:
            first = last = number
        found.append(SuppressionComment(path, number, start + 1, end + 1, scope, rules, reason, first, last,
                                        whole_line))
    return found


def read_comments(path: str) -> list[SuppressionComment]:
    """The suppression comments of a file, read within the budgets; none when it cannot be read,
    nor when the bytes this run's loading read of it hold no comment's mark (the file caches know
    that: the file is not read twice, nor at all when its entry vouched for it)."""
    from kubelint_ports.loading import file_cache

    cache = file_cache.active()
    if cache is not None and cache.marked(path) is False:
        return []  # asked once per linted file: this answer, the usual one, imports no more
    from kubelint_ports.loading import budgets, files

    try:
        data = files.read_file(path, budgets.current().max_file_bytes)
    except (OSError, ValueError):
        return []
    if COMMENT_MARK.encode() not in data:
        return []
    text = data.decode("utf-8", errors="replace")
    return comments_of_text(path, text.removeprefix("\ufeff"))
