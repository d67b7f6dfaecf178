"""The one vocabulary every stage after the checks speaks: where, what, how bad."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


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


@dataclass(frozen=True, slots=True, order=True)
class Location:
    """A 1-based place in a file; `end_column` is the column after the last character."""

    path: str
    line: int
    column: int
    end_line: int = 0
    end_column: int = 0
    message: str = field(default="", compare=False)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


@dataclass(frozen=True, slots=True, order=True)
class ObjectRef:
    api_version: str
    kind: str
    namespace: str  # "" when the manifest leaves it to the client's current namespace
    name: str

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.namespace}/{self.kind}/{self.name}"
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True, slots=True, order=True)
class Finding:
    location: Location
    rule_id: str
    rule_name: str
    severity: Severity
    message: str
    subject: ObjectRef
    field_path: str = ""
    related: tuple[Location, ...] = ()
    suppressed: str = ""  # the reason; empty when the finding stands
    template: str = ""  # the Helm template the object came from (`# Source:`), if any
    port: int | None = None  # the port the finding is about, when there is one
    suppressed_by: str = ""  # "inSource" (an annotation) or "external" (config, baseline)

    @property
    def fingerprint(self) -> str:
        """Stable across line shifts and reformatting: rule, object, field, port, template."""
        import hashlib

        subject = self.subject
        parts = (self.rule_id, subject.kind, subject.namespace, subject.name, self.field_path,
                 "" if self.port is None else str(self.port), self.template)
        return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True, order=True)
class Diagnostic:
    """An input problem (unreadable file, wrong field type): not a finding, exit code 2; or, when
    `internal`, a failure of the tool itself on that input (a bug): exit code 3."""

    location: Location
    message: str
    internal: bool = False


@dataclass(slots=True)
class Report:
    """What a run produced, handed to a formatter."""

    findings: list[Finding]
    diagnostics: list[Diagnostic]
    rules: tuple  # the policies that ran (formatters list them: SARIF rules table, docs)
    files: int = 0
    objects: int = 0
    skipped: int = 0
    notes: list[str] = field(default_factory=list)  # inputs passed over on purpose (FIFOs, outside links)

    @property
    def internal_errors(self) -> bool:
        return any(diagnostic.internal for diagnostic in self.diagnostics)

    def counts(self) -> dict[str, int]:
        counts = {str(severity): 0 for severity in sorted(Severity, reverse=True)}
        for finding in self.findings:
            if not finding.suppressed:
                counts[str(finding.severity)] += 1
        return counts
