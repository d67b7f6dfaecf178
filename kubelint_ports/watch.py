"""`lint --watch` (issue 37): lint again on each change to the linted files, and print what changed.

The first run prints its report as `lint` does. Then each batch of changes under the linted paths
(and the `--nodes`, `--cluster` and `-f` values files), as watchfiles reports them, debounced,
makes one more run, which prints only what changed since the run before: the findings and input
errors that appeared (`+`), those that went away (`-`), then the summary line. A finding is the
same one across runs when its fingerprint is (`Finding.fingerprint`: rule, object, field, port,
never its line), so an edit that moves it down a line changes nothing; an input error is the same
one when its place and message are.

Every run reads through the file cache (loading/file_cache.py): the configured one (`--cache-dir`,
`KUBELINT_PORTS_CACHE_DIR`, `cache-dir:`), else a private temporary directory removed when the
watch ends, so a run reads again only the files that changed; `--no-cache` reads every file each
time. What never starts a run: version control directories, the file cache, hidden directories
(the walk skips them too), editors' swap, backup and lock files.

watchfiles is imported here only, and only with --watch. The loop (`watch_loop`) takes any
iterable of change sets, so tests drive it with changes of their own, without waiting on a clock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from io import StringIO
from typing import TextIO

from kubelint_ports.cli_options import FixArgs, OutputFormat, ReportArgs, UsageError, color_wanted
from kubelint_ports.findings import Report
from kubelint_ports.formatters import FormatOptions, get_formatter, printable
from kubelint_ports.loading.file_cache import CACHE_DIRECTORY
from kubelint_ports.vocabulary import Severity

EXIT_CLEAN, EXIT_USAGE = 0, 2  # cli's codes: Ctrl-C ends a watch as a success
INSTALL = "pip install 'watchfiles>=1.0'"
MISSING = f"--watch needs the watchfiles package, which is not installed: {INSTALL}"
TEXT_FORMATS = (OutputFormat.text, OutputFormat.concise)
# Never a reason to lint again: version control, the file cache, caches of other tools.
IGNORED_DIRECTORIES = frozenset({".git", ".hg", ".svn", CACHE_DIRECTORY, "__pycache__", "node_modules"})
# Editors' swap, backup and lock files: vim (.x.swp, .x.swpx, x~, its 4913 probe), emacs (#x#,
# .#x), JetBrains (x___jb_tmp___), macOS's .DS_Store.
EDITOR_FILES = re.compile(r"\.sw[a-p]x?$|~$|^\.#|^#.*#$|^4913$|___jb_(tmp|old)___$|^\.DS_Store$")
GREEN, RED, RESET = "\033[32m", "\033[31m", "\033[0m"


def refuse(report_args: ReportArgs, fix_args: FixArgs, write_baseline: str | None, paths: Iterable[str]) -> None:
    """A usage error naming the first option --watch does not go with: it prints to a terminal,
    what changed as it changes, and writes no file."""
    output_format = report_args.output_format
    clashes = [(output_format not in TEXT_FORMATS, f"--format {output_format.value} (text or concise only)"),
               (fix_args.fix, "--fix"), (fix_args.diff, "--diff"), (report_args.output is not None, "--output"),
               (bool(report_args.reports), "--report"), (bool(write_baseline), "--write-baseline"),
               (report_args.statistics, "--statistics"), ("-" in paths, "standard input (-)")]
    for clashing, what in clashes:
        if clashing:
            raise UsageError(f"prints what changed on the terminal and writes no file: not with {what}",
                             param_hint="--watch")


def require_watchfiles(err: TextIO | None = None) -> None:
    """Exit 2 with one sentence naming the install when watchfiles cannot be imported."""
    try:
        import watchfiles  # noqa: F401 (only whether it is there)
    except ImportError:
        say(f"kubelint-ports: error: {MISSING}", err or sys.stderr)
        raise SystemExit(EXIT_USAGE) from None


def watch_lint(settings, options, format_options: FormatOptions, report_args: ReportArgs, fix_args: FixArgs,
               write_baseline: str | None, *, no_cache: bool, changes: Iterable[Iterable[str]] | None = None,
               stop_event=None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """`lint --watch` with `settings`, the run's `options` and `lint`'s own: its exit code (a usage
    error first when an option writes a file or fixes). `changes`: the change sets to lint again on
    (default: watchfiles' on the linted paths, until `stop_event` is set or Ctrl-C)."""
    refuse(report_args, fix_args, write_baseline, settings.paths)
    output_format = report_args.output_format
    # The colour and details of lint's report on standard output (cli.write_reports).
    format_options = dataclasses.replace(format_options, color=color_wanted(report_args.color, out or sys.stdout),
                                         explain=report_args.explain)
    if changes is None:
        require_watchfiles(err)
    import tempfile

    with ended_by_sigterm(), tempfile.TemporaryDirectory(prefix=".kubelint-ports-watch-") as private:
        if options.cache_dir is None and not no_cache:
            options = dataclasses.replace(options, cache_dir=private)
        if changes is None:
            ignored = [path for path in (options.cache_dir, private) if path]
            changes = file_changes(watched_paths(settings.paths, options), ignored=ignored, stop_event=stop_event)
        return watch_loop(lambda: lint_once(settings, options, output_format), changes, format_options,
                          output_format, out=out, err=err)


@contextlib.contextmanager
def ended_by_sigterm() -> Iterator[None]:
    """SIGTERM (`kill`, `timeout`) ends the watch as Ctrl-C does (watchfiles reads any signal as
    one), removing the private cache directory on its way out; in the main thread only, where
    Python handles signals."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(_number, _frame) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def watched_paths(paths: Iterable[str], options) -> list[str]:
    """What a run reads and a change to which changes its findings: the linted paths, the node
    inventory, the running objects, the values files. (A change to the configuration file needs a
    new `lint --watch`: the options were read once.)"""
    values = options.helm.values if options.helm is not None else ()
    return [*paths, *options.node_files, *options.cluster_files, *values]


def lint_once(settings, options, output_format: OutputFormat) -> Report:
    """One run as `lint` makes it: the report, with each fixable finding's fix described."""
    from kubelint_ports.engine import lint_paths
    from kubelint_ports.fixes import fixable

    report = lint_paths(settings.paths, options, policies=settings.policies)
    if fixable(report, {output_format.value}):
        from kubelint_ports.fixes import describe, reserved_ports_of

        describe(report, edits=False, reserved=reserved_ports_of(report), choices=settings.config.fix_choices)
    return report


def watch_loop(run: Callable[[], Report], changes: Iterable[Iterable[str]], options: FormatOptions,
               output_format: OutputFormat = OutputFormat.text, *, out: TextIO | None = None,
               err: TextIO | None = None) -> int:
    """Lint (`run`) and print the report as `lint` does; then, for each set of changed paths, lint
    again and print what changed. 0 when the changes end or at Ctrl-C."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        report = run()
        said = set(notes(report, set(), err))
        get_formatter(output_format.value)(report, out, options)
        out.flush()
        if not options.quiet:
            say("kubelint-ports: watching for changes (Ctrl-C stops)", err)
        last = shown(report, options)
        for changed in changes:
            changed = sorted(set(changed))
            if not changed:
                continue
            if not options.quiet:
                say(f"kubelint-ports: {changed_text(changed)}; linting again", err)
            report = run()
            said.update(notes(report, said, err))
            now = shown(report, options)
            write_changes(last, now, report, options, out)
            last = now
    except KeyboardInterrupt:
        pass
    return EXIT_CLEAN


def notes(report: Report, said: set[str], err: TextIO) -> list[str]:
    """The run's notes that no run before said, said on `err`."""
    fresh = [note for note in report.notes if note not in said]
    for note in fresh:
        say(printable(f"kubelint-ports: note: {note}"), err)
    return fresh


def changed_text(paths: list[str]) -> str:
    names = [printable(os.path.relpath(path) if os.path.isabs(path) else path) for path in paths]
    return f"{names[0]} changed" if len(names) == 1 else f"{names[0]} and {len(names) - 1} more changed"


def say(text: str, stream: TextIO) -> None:
    stream.write(text + "\n")
    stream.flush()


# --- what a run shows, and what changed ------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Shown:
    """One line of a text report (with `-v`, its details under it), and the line alone."""

    block: str
    line: str


def shown(report: Report, options: FormatOptions) -> dict[tuple, Shown]:
    """What the text report shows, by what identifies each item across runs: an input error by its
    place and message; a finding by its fingerprint and severity (and whether it is suppressed, with
    --show-suppressed; without it a suppressed finding is not shown), counted when several share
    them."""
    from kubelint_ports.formatters import text

    def paint(words: str, code: str) -> str:
        return f"{code}{words}{text.RESET}" if options.color else words

    items: dict[tuple, Shown] = {}
    for diagnostic in report.diagnostics:
        label = "internal-error" if diagnostic.internal else "input-error"
        line = (f"{paint(printable(str(diagnostic.location)), text.BOLD)}: "
                f"{paint(label, text.BOLD + text.COLORS[Severity.ERROR])} {printable(diagnostic.message)}")
        items[(label, str(diagnostic.location), diagnostic.message)] = Shown(line, line)
    seen: Counter = Counter()
    for finding in report.findings:
        if finding.suppressed and not options.show_suppressed:
            continue
        identity = (finding.fingerprint, str(finding.severity), bool(finding.suppressed))
        seen[identity] += 1
        block, line = StringIO(), StringIO()
        text.write_finding(finding, block, options, paint, explain=options.explain)
        text.write_finding(finding, line, options, paint, explain=False)
        items[("finding", *identity, seen[identity])] = Shown(block.getvalue().rstrip("\n"),
                                                              line.getvalue().rstrip("\n"))
    return items


def write_changes(last: dict[tuple, Shown], now: dict[tuple, Shown], report: Report, options: FormatOptions,
                  out: TextIO) -> None:
    """`+` what appeared (with -v its details), `-` what went away, then the summary line (not with -q)."""
    from kubelint_ports.formatters.text import fix_summary, summary_line

    plus, minus = (f"{GREEN}+{RESET}", f"{RED}-{RESET}") if options.color else ("+", "-")
    for key, item in now.items():
        if key not in last:
            out.write(f"{plus} {item.block}\n")
    for key, item in last.items():
        if key not in now:
            out.write(f"{minus} {item.line}\n")
    if not options.quiet:
        fixes = fix_summary(report, options.unsafe_fixes)
        out.write(summary_line(report) + (f"; {fixes}" if fixes else "") + "\n")
    out.flush()


# --- the changes, from watchfiles ----------------------------------------------------------------

def within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


def roots_of(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """(the directories to watch, each path as an absolute path, and as a real one): a directory
    itself; a file's directory (an editor that saves by renaming puts a new file where a watch on the
    file would follow the old one); for a path that does not exist yet, its nearest existing parent."""
    targets: list[str] = []
    for path in paths:
        for form in (os.path.abspath(path), os.path.realpath(path)):
            if form not in targets:
                targets.append(form)
    roots = set()
    for target in targets:
        root = target
        while not os.path.isdir(root) and os.path.dirname(root) != root:
            root = os.path.dirname(root)
        roots.add(root)
    return sorted(root for root in roots if not any(other != root and within(root, other) for other in roots)), targets


def relevant(path: str, targets: Iterable[str], ignored: Iterable[str] = ()) -> bool:
    """Whether a change to `path` may change the findings: it is one of `targets` or under one,
    not in an `ignored` directory, a version control or cache directory, a hidden directory below a
    target, nor an editor's swap, backup or lock file."""
    top = next((target for target in targets if within(path, target)), None)
    if top is None or any(within(path, directory) for directory in ignored):
        return False
    parts = [part for part in path[len(top):].split(os.sep) if part]
    if any(part in IGNORED_DIRECTORIES or part.startswith(".") for part in parts[:-1]):
        return False
    name = os.path.basename(path)
    return name not in IGNORED_DIRECTORIES and not EDITOR_FILES.search(name)


def file_changes(paths: Iterable[str], *, ignored: Iterable[str] = (), stop_event=None, debounce_ms: int = 1600,
                 step_ms: int = 50) -> Iterator[set[str]]:
    """Each batch of relevant changes under `paths` (watchfiles: a batch ends after `step_ms` without
    a change, or after `debounce_ms`), until `stop_event` is set; Ctrl-C raises KeyboardInterrupt."""
    import watchfiles

    roots, targets = roots_of(paths)
    skipped = [form for directory in ignored for form in {os.path.abspath(directory), os.path.realpath(directory)}]

    def wanted(_change, path: str) -> bool:
        return relevant(path, targets, skipped)

    for batch in watchfiles.watch(*roots, watch_filter=wanted, debounce=debounce_ms, step=step_ms,
                                  stop_event=stop_event, raise_interrupt=True):
        yield {path for _, path in batch}
