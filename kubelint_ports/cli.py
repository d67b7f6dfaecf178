"""The `kubelint-ports` command line: lint, ports, rules, explain, config.

The commands are plain functions whose options are declared as data (`cli_options`). `lint` is
read without typer when `cli_options.parse_command_line` vouches for its command line; the rest
goes to the typer app, built when first needed (`make_app`; `cli.app` for tests)."""

from __future__ import annotations

import dataclasses
import enum
import errno
import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import List, Optional

from kubelint_ports import __version__, run_memo
from kubelint_ports.cli_options import (
    BASELINE_OPTION,
    CLUSTER_OPTION,
    COLOR_OPTION,
    FAIL_ON_OPTION,
    LINK_BASE_OPTION,
    NODES_OPTION,
    OUTPUT_OPTION,
    POD_CIDR_OPTION,
    SARIF_CATEGORY_OPTION,
    SARIF_FULL_RULES_OPTION,
    SCOPE_OPTION,
    SERVICE_CIDR_OPTION,
    SHOW_SUPPRESSED_OPTION,
    WRITE_BASELINE_OPTION,
    BudgetArgs,
    ConfigArgs,
    FactArgs,
    FailOn,
    FixArgs,
    HelmArgs,
    OutputFormat,
    ReportArgs,
    RuleChoice,
    Scope,
    UsageError,
    argument,
    color_wanted,
    command_line,
    echo,
    is_a,
    option,
    parse_command_line,
    rule_completions,
    typer_app,
    with_option_groups,
)
from kubelint_ports.formatters import printable
from kubelint_ports.server.command import server

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

def run_settings(command):
    """Resolve the command line and the config file, or exit 2 with the reason."""
    from kubelint_ports.config import ConfigError
    from kubelint_ports.policies import PolicyError
    from kubelint_ports.settings import resolve
    from kubelint_ports.suppressions import BaselineError

    try:
        return resolve(command)
    except (ConfigError, PolicyError, BaselineError, ValueError) as error:
        echo(printable(f"kubelint-ports: error: {error}"), err=True)
        raise SystemExit(EXIT_USAGE) from None


def open_output(path):
    """A report file opened for writing, whole or not at all (`report_files`), or exit 2 naming it:
    a bad -o is a usage error, not a crash."""
    from kubelint_ports.report_files import ReportFile

    try:
        return ReportFile(path)
    except OSError as error:
        echo(printable(f"kubelint-ports: error: cannot write {path}: {error.strerror or error}"), err=True)
        raise SystemExit(EXIT_USAGE) from None


def check_writable(*paths) -> None:
    """Fail before linting when a report could not be written (a missing directory, a directory)."""
    for path in paths:
        if not path:
            continue
        target = Path(path)
        reason = ("is a directory" if target.is_dir() else
                  "its directory does not exist" if not target.parent.is_dir() else "")
        if reason:
            echo(printable(f"kubelint-ports: error: cannot write {path}: {reason}"), err=True)
            raise SystemExit(EXIT_USAGE)


PATHS_HELP = ("Manifest files, directories (recursive: *.yaml, *.yml, *.json; a directory with Chart.yaml is rendered "
              "as a Helm chart) or - for standard input (default: the config's `paths`, else .).")


@with_option_groups
def lint(
    paths: Optional[List[str]] = argument(None, help=PATHS_HELP, show_default=False),
    *,
    report_args: ReportArgs,
    fix_args: FixArgs,
    rule_choice: RuleChoice,
    show_suppressed: bool = SHOW_SUPPRESSED_OPTION,
    sarif_category: str = SARIF_CATEGORY_OPTION,
    sarif_full_rules: bool = SARIF_FULL_RULES_OPTION,
    link_base: str = LINK_BASE_OPTION,
    config_args: ConfigArgs,
    scope: Scope = SCOPE_OPTION,
    baseline: Optional[str] = BASELINE_OPTION,
    write_baseline: Optional[str] = WRITE_BASELINE_OPTION,
    fact_args: FactArgs,
    helm_args: HelmArgs,
    budget_args: BudgetArgs,
    watch: bool = option(False, "--watch", help="Lint again on each change to the paths and print what changed: "
                                                "findings that appeared (+), that went away (-). Ctrl-C stops."),
) -> None:
    """Lint Kubernetes manifests and Helm charts for port-allocation mistakes."""
    from kubelint_ports.engine import lint_paths
    from kubelint_ports.formatters import FormatOptions
    from kubelint_ports.sourceroot import find_source_root

    extra_reports = report_args.extra_reports()
    check_writable(report_args.output, write_baseline, *(path for _, path in extra_reports))
    settings = run_settings(command_line(
        report_args, config_args, fact_args, helm_args, rule_choice, budget_args, paths=tuple(paths or ()),
        baseline=baseline, scope=scope.value, writing_baseline=bool(write_baseline)))
    quiet = report_args.quiet
    note_old_baseline(settings, baseline, quiet)
    options = dataclasses.replace(settings.options, jobs=budget_args.jobs,
                                  say_workers=report_args.explain or report_args.statistics)
    format_options = FormatOptions(show_suppressed=show_suppressed, sarif_category=sarif_category, link_base=link_base,
                                   source_root=find_source_root(settings.config.path), quiet=quiet,
                                   unsafe_fixes=fix_args.unsafe_fixes, sarif_full_rules=sarif_full_rules)
    run_memo.decide(options.cache_dir, settings.paths, writes=bool(watch or fix_args.wanted or write_baseline))
    if watch:  # `lint --watch` (watch.py): this run, then again on each change, printing what changed
        from kubelint_ports.watch import watch_lint

        raise SystemExit(watch_lint(settings, options, format_options, report_args, fix_args, write_baseline,
                                    no_cache=budget_args.no_cache))
    report = lint_paths(settings.paths, options, policies=settings.policies)
    # SARIF carries each fix's edits; other formats only say a fix exists (no ruamel.yaml import).
    sarif = report_args.output_format is OutputFormat.sarif or any(kind == "sarif" for kind, _ in extra_reports)
    if fix_args.wanted:
        report = run_fixes(report, fix_args, settings, options, quiet)  # described, with the edits
    else:
        from kubelint_ports.fixes import fixable

        if fixable(report, {report_args.output_format.value, *(kind for kind, _ in extra_reports)}):
            from kubelint_ports.fixes import describe, reserved_ports_of

            describe(report, edits=sarif, reserved=reserved_ports_of(report),
                     choices=settings.config.fix_choices)
    echo_notes(report.notes)
    from kubelint_ports.loading import EMPTY_STDIN

    # Said once where the user looks: the text report on the terminal says it already; a report
    # written to a file or read by a machine (SARIF, JSON) gets the warning on stderr too.
    terminal_text = report_args.output is None and report_args.output_format in (OutputFormat.text,
                                                                                 OutputFormat.concise)
    if any(d.message == EMPTY_STDIN for d in report.diagnostics) and not terminal_text:
        echo(f"kubelint-ports: warning: {EMPTY_STDIN}", err=True)
    write_reports(report, report_args, extra_reports, format_options)
    exit_recording(report, settings.fail_on, write_baseline, quiet)


def note_old_baseline(settings, baseline: Optional[str], quiet: bool) -> None:
    if getattr(settings.options.baseline, "version", None) == 1 and not quiet:
        echo(f"kubelint-ports: note: {baseline or settings.config.get('baseline')} is a version 1 baseline "
             "(its keys count list items, so a new sidecar breaks them); rewrite it with --write-baseline",
             err=True)


def exit_recording(report, fail_on: str, write_baseline: Optional[str], quiet: bool) -> None:
    """Exit with the run's code; with --write-baseline (and no input error), record its findings
    first and exit 0."""
    if write_baseline and not report.diagnostics:
        from kubelint_ports.suppressions import write_baseline as record

        try:
            count = record(report.findings, write_baseline)
        except OSError as error:
            echo(printable(f"kubelint-ports: error: cannot write {write_baseline}: {error.strerror or error}"),
                 err=True)
            raise SystemExit(EXIT_USAGE) from None
        if not quiet:
            echo(f"kubelint-ports: wrote {count} findings to the baseline {write_baseline}", err=True)
        raise SystemExit(EXIT_CLEAN)
    raise SystemExit(exit_code(report, fail_on))


def run_fixes(report, args: FixArgs, settings, options, quiet: bool):
    """`--diff` and `--fix` (`fixes.loop`): `--diff` prints the plan and exits (1 when there is a
    change); `--fix` writes it, every file or none, and returns the report of the fixed files."""
    from kubelint_ports.fixes.loop import run_fixes as fix

    done = fix(report, settings.paths, options, settings.policies, args, choices=settings.config.fix_choices,
               quiet=quiet)
    if done.failure:
        echo(printable(f"kubelint-ports: error: {done.failure}"), err=True)
        raise SystemExit(EXIT_USAGE)
    echo_lines(done.before)
    sys.stdout.write(done.patch)
    echo_lines(done.after)
    if args.diff:
        raise SystemExit(EXIT_FINDINGS if done.changed else EXIT_CLEAN)
    return done.report


def echo_lines(lines) -> None:
    for line in lines:
        echo(printable(line), err=True)


@with_option_groups
def show_config(
    paths: Optional[List[str]] = argument(None, show_default=False,
                                          help="Also read these inputs and show the datapath facts they "
                                               "state, with their sources."),
    *,
    fail_on: Optional[FailOn] = FAIL_ON_OPTION,
    rule_choice: RuleChoice,
    config_args: ConfigArgs,
    scope: Scope = SCOPE_OPTION,
    baseline: Optional[str] = BASELINE_OPTION,
    fact_args: FactArgs,
    helm_args: HelmArgs,
    budget_args: BudgetArgs,
) -> None:
    """Print the effective configuration: the config file over the policy defaults."""
    import yaml

    from kubelint_ports.settings import effective

    settings = run_settings(command_line(
        config_args, fact_args, helm_args, rule_choice, budget_args, paths=tuple(paths or ()),
        fail_on=fail_on.value if fail_on else None, baseline=baseline, scope=scope.value))
    data = effective(settings)
    if paths or fact_args.nodes or fact_args.cluster:
        from kubelint_ports.engine import load_cluster
        from kubelint_ports.model.datapath import facts_table

        model, _, diagnostics = load_cluster(settings.paths, dataclasses.replace(settings.options,
                                                                                   jobs=budget_args.jobs))
        for diagnostic in diagnostics:
            echo(f"{diagnostic.location}: input-error {diagnostic.message}", err=True)
        data["facts"] = facts_table(model.datapath.facts)
    echo(yaml.safe_dump(data, sort_keys=False, default_flow_style=False), nl=False)


class RulesFormat(str, enum.Enum):
    text = "text"
    json = "json"


def rules(output_format: RulesFormat = option(RulesFormat.text, "--format", "--output-format",
                                              help="text: a table that fits 100 columns; json: data.")) -> None:
    """List the rules: id, name, default severity, summary."""
    import textwrap

    from kubelint_ports.policies import builtin_policies

    policies = builtin_policies()
    if output_format is RulesFormat.json:
        import json

        echo(json.dumps([{
            "id": policy.id, "name": policy.name, "severity": str(policy.severity), "enabled": policy.enabled,
            "summary": policy.summary, "variants": {case: str(sev) for case, sev in policy.variants.items()},
            "tags": list(policy.tags), "docs": f"docs/rules/{policy.slug}.md"} for policy in policies], indent=2))
        return
    width = max(len(policy.name) for policy in policies)
    head = len(policies[0].id) + 2 + width + 2 + 7 + 2
    for policy in policies:
        off = "" if policy.enabled else " (off by default)"
        lines = textwrap.wrap(policy.summary + off, max(30, 100 - head)) or [""]
        echo(f"{policy.id}  {policy.name:<{width}}  {str(policy.severity):<7}  {lines[0]}")
        for line in lines[1:]:
            echo(" " * head + line)


def version() -> None:
    """Print the version, and the Helm engine this install renders charts with."""
    import importlib.util
    import shutil

    engine = ("in-process (helm-python-sdk)" if importlib.util.find_spec("helm_python") is not None
              else f"the helm binary ({shutil.which('helm')})" if shutil.which("helm") else "none")
    echo(f"kubelint-ports {__version__}\nHelm charts: {engine}")


def explain(rule: str = argument(..., help="A rule id (KP101) or name (host-port).",
                                autocompletion=rule_completions)) -> None:
    """Print one rule's documentation."""
    from kubelint_ports.docs import rule_markdown
    from kubelint_ports.policies import find_policy

    policy = find_policy(rule)
    if policy is None:
        from kubelint_ports.policies import rule_suggestion

        echo(f"unknown rule {rule!r}{rule_suggestion(rule)}; `kubelint-ports rules` lists them", err=True)
        raise SystemExit(EXIT_USAGE)
    echo(rule_markdown(policy), nl=False)


class PortsFormat(str, enum.Enum):
    text = "text"
    json = "json"
    html = "html"


@with_option_groups
def ports(
    paths: Optional[List[str]] = argument(None, help=PATHS_HELP, show_default=False),
    *,
    output_format: PortsFormat = option(PortsFormat.text, "--format",
                                        help="text, json, or html: one self-contained page (grid, filters, "
                                             "the findings beside it)."),
    output: Optional[Path] = OUTPUT_OPTION,
    color: Optional[bool] = COLOR_OPTION,
    config_args: ConfigArgs,
    fact_args: FactArgs,
    helm_args: HelmArgs,
    rule_choice: RuleChoice,
    budget_args: BudgetArgs,
    free: bool = option(False, "--free", help="Show the free nodePorts and each node's free host ports "
                                              "(text or json)."),
    near: Optional[int] = option(None, "--near", metavar="PORT", min=1, max=65535,
                                 help="With --free: the free ports nearest to PORT."),
    count: int = option(5, "--count", min=1, metavar="N", help="With --free --near: how many (default 5)."),
    link_base: str = LINK_BASE_OPTION,
) -> None:
    """Show each node's host ports: who holds them (hostPort, hostNetwork, nodePort, node daemon) and
    what `lint` finds there; conflicts and captures are marked with their rule."""
    from kubelint_ports.engine import lint_paths
    from kubelint_ports.formatters.port_map_writer import write_json, write_text

    if free and output_format is PortsFormat.html:  # said before the run, not after it
        raise UsageError("--free writes text or json", param_hint="--format")
    check_writable(output)
    settings = run_settings(command_line(config_args, fact_args, helm_args, rule_choice, budget_args,
                                         paths=tuple(paths or ())))
    # The whole lint run: the map shows its model and its findings, so the two cannot disagree.
    report = lint_paths(settings.paths, dataclasses.replace(settings.options, jobs=budget_args.jobs),
                        policies=settings.policies)
    echo_notes(report.notes)
    for diagnostic in report.diagnostics:
        label = "internal-error" if diagnostic.internal else "input-error"
        echo(printable(f"{diagnostic.location}: {label} {diagnostic.message}"), err=True)
    if free:
        write_free(report, settings, output_format, output, near, count)
    port_map = report.port_map  # made by the engine from the run's model and findings

    def write(stream) -> None:
        if output_format is PortsFormat.json:
            write_json(port_map, stream)
        elif output_format is PortsFormat.html:
            from kubelint_ports.formatters import FormatOptions
            from kubelint_ports.formatters.html import write_page
            from kubelint_ports.sourceroot import find_source_root

            write_page(report, port_map, stream, findings_first=False, options=FormatOptions(
                link_base=link_base, source_root=find_source_root(settings.config.path)))
        else:
            write_text(port_map, stream, color_wanted(color, stream) if output is None or color else False)

    write_and_exit(report, output, write)


def write_and_exit(report, output: Optional[Path], write) -> None:
    """`write(stream)` to the output file or stdout, then exit as `ports` does: 3 for an internal
    error, 2 for input errors, else 0 (a map is not a verdict)."""
    with open_output(output) if output else nullcontext(sys.stdout) as stream:
        write(stream)
    if report.internal_errors:
        raise SystemExit(EXIT_INTERNAL)
    raise SystemExit(EXIT_USAGE if report.diagnostics else EXIT_CLEAN)


def write_free(report, settings, output_format, output, near, count) -> None:
    """`ports --free`: each unit's free nodePorts and host ports, from the port map's view (the runs the page
    shows, `portmap.free_ports_of`), then exit as `ports` does."""
    from kubelint_ports.formatters.port_map_writer import write_free_json, write_free_text
    from kubelint_ports.portmap import free_ports_of

    found = free_ports_of(report, near, count)  # the port map's view: the runs the page shows
    write_and_exit(report, output, lambda stream: (
        write_free_json if output_format is PortsFormat.json else write_free_text)(found, stream))


SNAPSHOT_HELP = ("Snapshot directories, one per node (named after the node), holding any of: iptables-save, "
                 "nft list ruleset [-j], ipvsadm -Sn, ipset list, ss -Htlnup, ip -o addr, grep -r . "
                 "/var/lib/cni/networks/, crictl pods -o json; each file is recognised by its content. Manifest "
                 "files or directories may follow: their Services and pods are compared with the nodes.")


@with_option_groups
def node_command(
    paths: List[str] = argument(..., help=SNAPSHOT_HELP, metavar="SNAPSHOT... [MANIFEST...]"),
    *,
    report_args: ReportArgs,
    rule_choice: RuleChoice,
    show_suppressed: bool = SHOW_SUPPRESSED_OPTION,
    sarif_category: str = SARIF_CATEGORY_OPTION,
    sarif_full_rules: bool = SARIF_FULL_RULES_OPTION,
    link_base: str = LINK_BASE_OPTION,
    node_name: Optional[str] = option(None, "--node", metavar="NAME",
                                      help="The node's name when one snapshot is given (default: its directory's name)."),
    config_args: ConfigArgs,
    baseline: Optional[str] = BASELINE_OPTION,
    write_baseline: Optional[str] = WRITE_BASELINE_OPTION,
    nodes: List[str] = NODES_OPTION,
    cluster: List[str] = CLUSTER_OPTION,
    service_cidr: Optional[str] = SERVICE_CIDR_OPTION,
    pod_cidr: Optional[str] = POD_CIDR_OPTION,
    helm_args: HelmArgs,
    budget_args: BudgetArgs,
) -> None:
    """Diagnose live nodes from their own dumps: stale or shadowed hostPort DNATs, hostPorts ahead of
    kube-proxy, a missing or wrong masquerade rule, host processes that lose their port, drift."""
    from kubelint_ports.engine import lint_snapshots
    from kubelint_ports.formatters import FormatOptions
    from kubelint_ports.loading.snapshot.node_inputs import split_snapshot_paths

    extra_reports = report_args.extra_reports()
    check_writable(report_args.output, write_baseline, *(path for _, path in extra_reports))
    snapshots, manifests = split_snapshot_paths(paths)
    if not snapshots:
        raise UsageError("no snapshot among the paths (a directory of dumps from a node)", param_hint="SNAPSHOT")
    if node_name and len(snapshots) > 1:
        raise UsageError("--node names one snapshot; several were given", param_hint="--node")
    settings = run_settings(command_line(
        report_args, rule_choice, config_args, helm_args, budget_args, service_cidr=service_cidr, pod_cidr=pod_cidr,
        nodes=tuple(nodes), cluster=tuple(cluster), baseline=baseline, writing_baseline=bool(write_baseline)))
    if baseline:  # a configured one is noted by `lint`
        note_old_baseline(settings, baseline, report_args.quiet)
    report = lint_snapshots(snapshots, manifests, dataclasses.replace(settings.options, jobs=budget_args.jobs),
                            node=node_name, policies=settings.policies)
    format_options = FormatOptions(show_suppressed=show_suppressed, sarif_category=sarif_category,
                                   link_base=link_base, quiet=report_args.quiet, sarif_full_rules=sarif_full_rules)
    write_reports(report, report_args, extra_reports, format_options)
    exit_recording(report, settings.fail_on, write_baseline, report_args.quiet)


def write_reports(report, args: ReportArgs, extra_reports, format_options) -> None:
    """The `--report FORMAT:FILE` files, then the main report to `--output` or standard output."""
    from kubelint_ports.formatters import get_formatter

    for kind, path in extra_reports:
        with open_output(path) as stream:
            get_formatter(kind)(report, stream, format_options)
    output, output_format = args.output, args.output_format
    with open_output(output) if output else nullcontext(sys.stdout) as stream:
        use_color = args.color if args.color is not None else (output is None and color_wanted(None, stream))
        get_formatter(output_format.value)(report, stream, dataclasses.replace(
            format_options, color=use_color and output_format in (OutputFormat.text, OutputFormat.concise),
            explain=args.explain,
            statistics=args.statistics))


def exit_code(report, fail_on: str) -> int:
    """3 for an internal error, 2 for input errors, 1 for a standing finding at or above
    `fail_on`, else 0: a crash never reads as findings, nor bad input as a clean run."""
    from kubelint_ports.vocabulary import Severity

    if report.internal_errors:
        return EXIT_INTERNAL
    if report.diagnostics:
        return EXIT_USAGE
    if fail_on != "never":
        threshold = Severity.parse(fail_on)
        if any(f.severity >= threshold and not f.suppressed for f in report.findings):
            return EXIT_FINDINGS
    return EXIT_CLEAN


def echo_notes(notes) -> None:
    for note in notes:
        echo(printable(f"kubelint-ports: note: {note}"), err=True)


# Read without typer when their command line allows (cli_options.parse_command_line): `lint`, what
# every pre-commit run starts, and `ports` (typer and click: 2.5 MiB of a 10k page's peak). Then
# the typer app's commands, in the order --help lists them.
WITHOUT_TYPER = {"lint": lint, "ports": ports}
COMMANDS = (("lint", lint), ("config", show_config), ("rules", rules), ("version", version),
             ("explain", explain), ("ports", ports), ("node", node_command), ("server", server))
_app = None


def make_app():
    """The typer app (built once): every command, for the command lines `run_without_typer` leaves."""
    global _app
    if _app is None:
        _app = typer_app(COMMANDS, name="kubelint-ports", release=__version__, help=(
            "Find Kubernetes port-allocation mistakes (hostPort, hostNetwork, NodePort) before they reach a cluster."))
    return _app


def __getattr__(name: str):
    if name == "app":  # `from kubelint_ports.cli import app`: the typer app (tests run it with CliRunner)
        return make_app()
    if name == "MAX_FIX_PASSES":  # now fixes.loop's (tests/fuzzing_fix.py still asks here)
        from kubelint_ports.fixes.loop import MAX_FIX_PASSES

        return MAX_FIX_PASSES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_without_typer(args: list[str]) -> int | None:
    """The exit code of a command read without typer, or None when typer must read the command line.
    Failures end as they would under typer's own main."""
    command = WITHOUT_TYPER.get(args[0]) if args else None
    given = parse_command_line(command, args[1:]) if command is not None else None
    if given is None:
        return None
    try:
        with run_memo.recording(args, given, wanted=command is lint):  # nothing changed: replayed (docs/cache.md)
            command(**given)
    except UsageError:
        return None  # raised before the command did anything: typer reads the line again and says why
    except EOFError as error:
        echo(err=True)
        return internal_failure(error)
    except KeyboardInterrupt:
        return 130
    except OSError as error:
        if error.errno != errno.EPIPE:
            raise
        return EXIT_FINDINGS  # typer's code for a reader that left (`| head`)
    return EXIT_CLEAN


def main() -> None:
    """Run the command and exit with its code.

    Exit codes: 0 clean, 1 findings (per --fail-on), 2 input or usage errors, 3 an internal
    error (a bug): an unexpected exception is never mistaken for findings."""
    try:
        code = run_without_typer(sys.argv[1:])
        if code is None:
            # Not click's standalone mode: it exits 1 (the findings code) for an EOFError and Ctrl-C.
            result = make_app()(standalone_mode=False)
            code = result if isinstance(result, int) else EXIT_CLEAN
    except Exception as error:  # noqa: BLE001 (sorted below)
        if is_a(error, "ClickException"):  # a usage error: click's message, exit 2
            error.show()
            code = EXIT_USAGE
        elif is_a(error, "Abort") and isinstance(error.__cause__, KeyboardInterrupt):
            code = 130
        elif isinstance(error, BrokenPipeError):  # the reader left (`| head`): nothing more to say
            code = 141
        else:  # anything else is a bug: say so, exit 3
            code = internal_failure(error.__cause__ if is_a(error, "Abort") and error.__cause__ else error)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else EXIT_USAGE)
        if isinstance(exit_.code, str):
            print(exit_.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    except BaseException as error:  # noqa: BLE001 (a bug: say so, exit 3)
        code = internal_failure(error)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`): the reader cut the report short
            try:  # so that the interpreter's own flush at exit has nowhere to fail
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
            except (OSError, ValueError):
                pass
    sys.exit(code)


def internal_failure(error: BaseException) -> int:
    import traceback

    try:
        print(printable(f"kubelint-ports: internal error (a bug; please report it with the lines below): "
                        f"{type(error).__name__}: {str(error)[:500]}"), file=sys.stderr)
        lines = "".join(traceback.format_exception(type(error), error, error.__traceback__)).splitlines()
        for line in lines[-12:]:
            print(printable(line), file=sys.stderr)
    except BaseException:  # noqa: BLE001 (even printing failed: the exit code still says it)
        pass
    return EXIT_INTERNAL
