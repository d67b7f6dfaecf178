"""KP005's fix: a suppression comment's rules that silenced nothing taken out, or the whole comment.

The finding names each such rule as a related place (its columns in the comment); the fix reads
the comment's line again and edits only the comment: the rules go from its list (the others and
the reason stay), or, when none would be left, the comment goes: a comment-only line (a `#` line,
a Helm `{{/* ... */}}` line) with its line end, a comment at the end of a line with the blanks
before it (the YAML line's content stays as it was), a template comment ahead of content with the
blanks after it. It is safe: the comment silenced nothing in this run, so no finding changes.
A comment that is no longer where the finding says (the file changed) gets no edit."""

from __future__ import annotations

import os

from kubelint_ports.findings import Edit, Finding, Fix
from kubelint_ports.fixes.plan import SAFE, Context
from kubelint_ports.fixes.source import line_starts
from kubelint_ports.suppressions import comment_in, rule_spans
from kubelint_ports.vocabulary import Location


def remove_unused_suppression(finding: Finding, context: Context, edits: bool) -> Fix | None:
    """The comment's idle rules out, or the comment; None for a finding that names none (a comment
    without the reason the configuration requires, one that cannot be read: a person writes those)."""
    location = finding.location
    idle = {(where.column - 1, where.end_column - 1) for where in finding.related
            if where.path == location.path and where.line == location.line}
    if not idle or not location.is_file:
        return None
    source = context.sources.read(os.path.abspath(location.path), location.path)
    if source is None:
        return Fix(SAFE, "remove the suppression comment's rules that silence nothing",
                   blocked=f"{location.path} cannot be read")
    text = source.text
    starts = line_starts(text)
    if location.line > len(starts):
        return Fix(SAFE, "remove the suppression comment", blocked="the file changed since it was linted")
    first = starts[location.line - 1]
    following = starts[location.line] if location.line < len(starts) else len(text)  # the next line's start
    line = text[first:following].rstrip("\n").rstrip("\r")
    found = comment_in(line)
    spans = rule_spans(line, found[0], found[1]) if found is not None else []
    gone = [span for span in spans if (span[1], span[2]) in idle]
    if found is None or found[0] + 1 != location.column or not gone:
        return Fix(SAFE, "remove the suppression comment", blocked="the comment is no longer where the finding "
                                                                    "says: the file changed since it was linted")
    kept = [span for span in spans if span not in gone]
    names = ", ".join(token for token, _, _ in gone)
    if kept:
        start, end = spans[0][1], spans[-1][2]
        separator = ", " if "," in line[start:end] else " "
        fix = Fix(SAFE, f"remove {names} from the suppression comment, which silenced nothing for "
                        f"{'it' if len(gone) == 1 else 'them'}")
        start, end, new = first + start, first + end, separator.join(token for token, _, _ in kept)
    else:
        start, end, new, what = whole_comment(text, starts, location.line, line, found[0], found[1])
        fix = Fix(SAFE, f"remove the suppression comment{what}: it silenced nothing ({names})")
    if not edits:
        return fix
    return Fix(fix.applicability, fix.description, edits=(Edit(source.region(start, end), start, end, new),))


remove_unused_suppression.whole_run = True  # finds its own place: the comment, in any file the run read


def whole_comment(text: str, starts: list[int], number: int, line: str, start: int, end: int
                  ) -> tuple[int, int, str, str]:
    """(start, end, new text, what goes) of the removal of the comment at `start`..`end` of line
    `number`, offsets in `text`."""
    first = starts[number - 1]
    before, after = line[:start], line[end:]
    if not before.strip() and not after.strip():  # a comment-only line: the line goes, its end too
        if number < len(starts):
            return first, starts[number], "", " and its line"
        return (max(first - 1, 0) if number > 1 else 0), len(text), "", " and its line"
    if not after.strip():  # at the end of a line: the blanks before it go too
        blanks = len(before) - len(before.rstrip())
        return first + start - blanks, first + len(line), "", ""
    if not before.strip():  # ahead of the line's content (a template comment): the blanks after it go
        blanks = len(after) - len(after.lstrip())
        return first + start, first + end + blanks, "", ""
    blanks = len(before) - len(before.rstrip())  # between contents: one side's blanks go with it
    return first + start - blanks, first + end, "", ""
