"""The words every stage speaks: where (`Location`), what object (`ObjectRef`), how bad
(`Severity`), and a problem with an input (`Diagnostic`). Findings and the report are in
`findings`."""

from __future__ import annotations

import enum
from dataclasses import field

from kubelint_ports.records import record

STDIN_NAME = "<stdin>"
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
