"""Text for people: input errors, then one line per finding that starts with its place
(`path:line:column:`, which terminals and editors open), its severity, rule id and the claim,
never cut; then a summary. `concise` is the same lines and the summary, nothing else.

A finding's message reads "<short claim>: <explanation>" (findings.split_message); `--explain`
(`-v`) prints the explanation, the rule's name, the object and the related places under each
headline, wrapped, and `kubelint-ports explain ID` the rule's full docs.
"""

from __future__ import annotations

import itertools
from typing import TextIO

from kubelint_ports.findings import Finding, Report
from kubelint_ports.formatters import FormatOptions, printable
from kubelint_ports.vocabulary import Severity

COLORS = {Severity.ERROR: "\033[31m", Severity.WARNING: "\033[33m", Severity.NOTE: "\033[36m"}
BOLD, DIM, RESET = "\033[1m", "\033[2m", "\033[0m"
WIDTH = 120  # details (-v) wrap at it: fixed, so output is the same on every terminal
SEVERITY_WIDTH = max(len(str(severity)) for severity in Severity)
DETAIL_INDENT = " " * 6
HINT = "Run with -v for why and how to fix each finding; `kubelint-ports explain ID` prints a rule's docs."


def format_report(report: Report, out: TextIO, options: FormatOptions, concise: bool = False) -> None:
    """Every text that comes from the inputs (paths, names, messages) is written through
    `printable`: a manifest cannot put a control character or a new line on the terminal."""
    def paint(text: str, code: str) -> str:
        return f"{code}{text}{RESET}" if options.color else text

    for diagnostic in report.diagnostics:
        label = "internal-error" if diagnostic.internal else "input-error"
        out.write(f"{paint(printable(str(diagnostic.location)), BOLD)}: {paint(label, BOLD + COLORS[Severity.ERROR])} "
                  f"{printable(diagnostic.message)}\n")
    shown = [finding for finding in report.findings if not finding.suppressed or options.show_suppressed]
    if options.statistics:
        write_statistics(report, out, paint)
    else:
        for index, (_, group) in enumerate(itertools.groupby(shown, key=lambda f: f.location.path)):
            if (index or report.diagnostics) and not concise:
                out.write("\n")  # files apart, for the eye; every line still names its file
            for finding in group:
                write_finding(finding, out, options, paint, explain=options.explain and not concise)
    if options.quiet:
        return
    if (shown or report.diagnostics) and not concise:
        out.write("\n")
    fixes = fix_summary(report, options.unsafe_fixes)
    out.write(summary_line(report) + (f"; {fixes}" if fixes else "") + "\n")
    note = unknown_facts_note(shown)
    if note and not concise:
        import textwrap  # only when a finding depends on an unknown fact

        out.write(textwrap.fill(note, WIDTH, break_long_words=False, break_on_hyphens=False) + "\n")
    if shown and not options.explain and not options.statistics and not concise:
        out.write(HINT + "\n")


def write_finding(finding: Finding, out: TextIO, options: FormatOptions, paint, explain: bool) -> None:
    units = f" [{unit_label(finding.units)}]" if any(finding.units) else ""
    suppressed = " (suppressed)" if finding.suppressed else ""
    severity = paint(f"{str(finding.severity):<{SEVERITY_WIDTH}}", COLORS[finding.severity])
    marker = " [*]" if applied_by_fix(finding, options.unsafe_fixes) else ""
    out.write(f"{paint(printable(place(finding)), BOLD)}: {severity} {paint(finding.rule_id, BOLD)}{marker} "
              f"{printable(finding.headline)}{units}{suppressed}\n")
    if explain:
        write_details(finding, finding.explanation, out, paint)


def unknown_facts_note(findings: list[Finding]) -> str:
    """Once per run, the facts that would settle the findings told as "depends" (the datapath
    model's words); "" when every finding's facts are known."""
    unknown = {name for finding in findings for name in finding.short_words.unknown}
    if not unknown:
        return ""
    from kubelint_ports.model.datapath.effects import unknown_facts_note as note

    return note(unknown)


def fixable(finding: Finding, applicability: str) -> bool:
    """A standing finding with a fix of this applicability that can be applied (`lint --fix`)."""
    fix = finding.fix
    return fix is not None and fix.available and fix.applicability == applicability and not finding.suppressed


def applied_by_fix(finding: Finding, unsafe_fixes: bool) -> bool:
    """Whether `--fix`, with this run's `--unsafe-fixes` or not, applies the finding's fix."""
    return fixable(finding, "safe") or (unsafe_fixes and fixable(finding, "unsafe"))


def fix_summary(report: Report, unsafe_fixes: bool = False) -> str:
    """"2 fixable with --fix (1 more with --unsafe-fixes)", as ruff says it, after the summary;
    with `--unsafe-fixes` given, every fix `--fix` would then apply counts ("3 fixable with
    --fix"); "" when none is."""
    safe = sum(1 for finding in report.findings if fixable(finding, "safe"))
    unsafe = sum(1 for finding in report.findings if fixable(finding, "unsafe"))
    if unsafe_fixes:
        safe, unsafe = safe + unsafe, 0
    if not safe and not unsafe:
        return ""
    more = f" ({unsafe} more with --unsafe-fixes)" if unsafe else ""
    return f"{safe} fixable with --fix{more}"


def fix_hint(finding: Finding, unsafe_fixes: bool = False) -> str:
    """What a finding's line says of its fix in the formats read on a CI page (GitHub, GitLab,
    JUnit, Markdown): "fixable with --fix", "fixable with --fix --unsafe-fixes", or "" when it
    has none that can be applied."""
    if applied_by_fix(finding, unsafe_fixes):
        return "fixable with --fix"
    if fixable(finding, "unsafe"):
        return "fixable with --fix --unsafe-fixes"
    return ""


def unit_label(units: tuple[str, ...]) -> str:
    """The deployment units a finding is in, short: an overlay's directory by its last name (the
    full path is in the details, `-v`)."""
    return ", ".join(printable(unit.rstrip("/").rsplit("/", 1)[-1] or unit) for unit in units if unit)


def place(finding: Finding) -> str:
    """`path:line:column`, as compilers and ruff print it; the path alone when no line is known."""
    location = finding.location
    return f"{location.path}:{location.line}:{location.column}" if location.line >= 1 else location.path


def write_details(finding: Finding, explanation: str, out: TextIO, paint) -> None:
    import textwrap  # -v only: its patterns are compiled on import

    def wrapped(text: str) -> str:
        return textwrap.fill(text, WIDTH, initial_indent=DETAIL_INDENT, subsequent_indent=DETAIL_INDENT,
                             break_long_words=False, break_on_hyphens=False)

    if explanation:
        out.write(wrapped(printable(explanation)) + "\n")
    origin = f" (from {finding.template})" if finding.template else ""
    units = f" in unit {', '.join(finding.units)}" if finding.units else ""
    out.write(paint(wrapped(printable(f"{finding.rule_id} {finding.rule_name} on {finding.subject}{origin}{units}")),
                    DIM) + "\n")
    for related in finding.related:
        out.write(f"{DETAIL_INDENT}{paint(printable(str(related)), DIM)}: {printable(related.message)}\n")
    if finding.suppressed:
        out.write(wrapped(printable(f"suppressed: {finding.suppressed}")) + "\n")
    if finding.fix is not None:
        fix = finding.fix
        what = f"fix not applied ({fix.blocked})" if fix.blocked else f"{fix.applicability} fix"
        out.write(wrapped(printable(f"{what}: {fix.description}")) + "\n")


def write_statistics(report: Report, out: TextIO, paint) -> None:
    """`--statistics`: one line per rule that found something, most findings first."""
    for count, rule_id, rule_name, severity in report.rule_counts():
        out.write(f"{count:>6}  {paint(rule_id, BOLD)}  "
                  f"{paint(f'{str(severity):<{SEVERITY_WIDTH}}', COLORS[severity])}  {rule_name}\n")


def summary_line(report: Report) -> str:
    counts = report.counts()
    parts = [f"{counts[name]} {name}{'s' if counts[name] != 1 else ''}" for name in counts]
    text = (f"{', '.join(parts)} in {report.objects} object{'s' if report.objects != 1 else ''} "
            f"from {report.files} file{'s' if report.files != 1 else ''}")
    extras = []
    if report.skipped:
        extras.append(f"{report.skipped} non-Kubernetes documents skipped")
    suppressed = sum(1 for f in report.findings if f.suppressed)
    if suppressed:
        extras.append(f"{suppressed} suppressed")
    if report.diagnostics:
        extras.append(f"{len(report.diagnostics)} input error{'s' if len(report.diagnostics) != 1 else ''}")
    return text + (f" ({'; '.join(extras)})" if extras else "")
