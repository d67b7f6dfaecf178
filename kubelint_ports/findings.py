"""What a run says: its findings (with their fixes) and the report that holds them, the
input problems and the port map. The words they are made of are in `vocabulary`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any

from kubelint_ports.records import record
from kubelint_ports.vocabulary import Diagnostic, Location, Message, ObjectRef, Severity, split_claim

FINGERPRINT_VERSION = 2  # bump when what `Finding.fingerprint` hashes changes


@record(frozen=True, slots=True)
class Edit:
    """One replacement in a file's text: the characters from `start` to `end` (offsets in the
    decoded text, a BOM not counted), which `region` names by line and column, become `text`."""

    region: Location
    start: int
    end: int
    text: str


@record(frozen=True, slots=True)
class Fix:
    """How `lint --fix` would mend a finding (`kubelint_ports.fixes`). "safe": only what the
    finding names changes (the API server read it as an error or ignored it); "unsafe": behaviour
    changes (a port moves), applied with `--unsafe-fixes` only."""

    applicability: str  # "safe" or "unsafe"
    description: str
    edits: tuple[Edit, ...] = ()  # worked out when asked for (--fix, --diff, SARIF); () otherwise
    blocked: str = ""  # why it is not applied (it would touch other lines); "" when it can be

    @property
    def available(self) -> bool:
        return not self.blocked


@record(frozen=True, slots=True, order=True)
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
    # `field_path` with list items named instead of counted (`containers[web].ports[http/TCP]`),
    # and the identities of the other objects the finding is about (the Service whose nodePort a
    # hostPort takes): what the fingerprint hashes, so adding a sidecar or reordering ports keeps it.
    identity_path: str = field(default="", compare=False)
    partners: tuple[str, ...] = field(default=(), compare=False)
    # Who receives the packet, as the datapath model answered it (JSON `traffic`, SARIF
    # `properties.traffic`); data for tools, left out of ordering, equality and the fingerprint.
    traffic: Any = field(default=None, compare=False)
    # Where it happens (the check's Hit.nodes; empty: wherever the subject runs). Not part of a
    # finding's identity: the port map reads it.
    nodes: tuple[str, ...] = field(default=(), compare=False)
    # The deployment units it is found in (model.units), when the inputs hold several; not part of
    # its identity: a base's object built by two overlays is one finding in both.
    units: tuple[str, ...] = field(default=(), compare=False)
    # How `--fix` mends it (a description, safe or unsafe), when a fix exists; set after the run
    # (`kubelint_ports.fixes.describe`), not part of its identity.
    fix: Fix | None = field(default=None, compare=False)
    # The five-second words (headline, effect, fix) beside `message`, the full analysis; set by the
    # engine from the rule's phrases, not part of its identity.
    words: Message | None = field(default=None, compare=False)

    @property
    def fingerprint(self) -> str:
        """Stable across line shifts, reformatting and list reordering: rule, object, the field by
        the names of the items on its way, port, template, partners."""
        subject = self.subject
        return _digest(self.rule_id, subject.kind, subject.namespace, subject.name,
                       self.identity_path or self.field_path, "" if self.port is None else str(self.port),
                       self.template, *self.partners)

    @property
    def legacy_fingerprint(self) -> str:
        """The version 1 fingerprint (list indexes in the field path), to honour old baselines."""
        subject = self.subject
        return _digest(self.rule_id, subject.kind, subject.namespace, subject.name, self.field_path,
                       "" if self.port is None else str(self.port), self.template)

    @property
    def short_words(self) -> Message:
        """Headline, effect and fix: the rule's own, or read from the message told as a story."""
        return self.words if self.words is not None else Message.from_story(self.message)

    @property
    def headline(self) -> str:
        """What is wrong and where, at most `vocabulary.HEADLINE_LIMIT` characters."""
        return self.short_words.headline

    @property
    def explanation(self) -> str:
        """What `-v` prints under the headline: the analysis after its claim when that claim is the
        headline, else the whole analysis; "" when the message is all headline."""
        claim, rest = split_message(self.message)
        return rest if claim == self.headline else self.message


def split_message(message: str) -> tuple[str, str]:
    """'<short claim>: <explanation>' -> (claim, explanation) (`vocabulary.split_claim`)."""
    return split_claim(message)


def _digest(*parts: str) -> str:
    import hashlib

    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


@record(slots=True)
class Report:
    """What a run produced, handed to a formatter."""

    findings: list[Finding]
    diagnostics: list[Diagnostic]
    rules: tuple  # the policies that ran (formatters list them: SARIF rules table, docs)
    files: int = 0
    objects: int = 0
    skipped: int = 0
    # The model the checks read (a model.Cluster): the port map and the HTML page show it.
    cluster: object = field(default=None, repr=False)
    notes: list[str] = field(default_factory=list)  # inputs passed over on purpose (FIFOs, outside links)
    # How the engine makes the run's port map (portmap.PortMap, a view of the model and the
    # findings) from this report: `port_map` makes it when first asked, once. None: no map.
    make_port_map: Callable[[Report], Any] | None = field(default=None, repr=False, compare=False)
    _port_map: Any = field(default=None, init=False, repr=False, compare=False)

    @property
    def port_map(self) -> Any:
        """The run's port map (`ports`, `--format html`), or None when the engine gave no way to make one."""
        if self._port_map is None and self.make_port_map is not None:
            self._port_map = self.make_port_map(self)
        return self._port_map

    @property
    def internal_errors(self) -> bool:
        return any(diagnostic.internal for diagnostic in self.diagnostics)

    def counts(self) -> dict[str, int]:
        counts = {str(severity): 0 for severity in sorted(Severity, reverse=True)}
        for finding in self.findings:
            if not finding.suppressed:
                counts[str(finding.severity)] += 1
        return counts

    def rule_counts(self) -> list[tuple[int, str, str, Severity]]:
        """(count, rule id, rule name, highest severity) of standing findings per rule, most first."""
        rules: dict[str, tuple[int, str, Severity]] = {}
        for finding in self.findings:
            if not finding.suppressed:
                count, _, severity = rules.get(finding.rule_id, (0, finding.rule_name, finding.severity))
                rules[finding.rule_id] = (count + 1, finding.rule_name, max(severity, finding.severity))
        return sorted(((count, rule_id, name, severity) for rule_id, (count, name, severity) in rules.items()),
                      key=lambda row: (-row[0], row[1]))
