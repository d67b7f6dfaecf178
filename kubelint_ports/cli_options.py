"""Options several commands share, declared once; and the command line read without typer.

An option is declared as data (`option(...)`, `argument(...)`: what `typer.Option(...)` and
`typer.Argument(...)` would be given), made typer's own only when the typer app is built
(`typer_command`). A group of options is a record whose fields are options (`group_option(...)`). A
command takes the group as one keyword parameter annotated with it (`*, helm: HelmArgs`);
`with_option_groups` shows typer the group's options in that parameter's place, in the order of
its fields, and hands the command one instance of the group. So `lint`, `ports` and `node` read
the same declaration, and each command's --help lists the options where it puts the group.

`parse_command_line` reads a command's arguments against the same declarations as click reads
them (long and short options, `--name=value`, `-ovalue`, clustered flags, `--`), so that the
command a pre-commit hook runs on every commit starts without importing typer and building its
app (a third of a `lint` of one small file; docs/development.md). What it cannot vouch for it
leaves to typer, which then reads the command line from the start: `--help`, an option or value
typer would refuse (typer says why), shell completion, Windows' wildcard expansion.
tests/test_cli_parse.py checks that it hands the command what typer would.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import os
import re
import sys
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, List, Optional

from kubelint_ports.formatters import FORMATTERS
from kubelint_ports.records import record

OPTION = "kubelint_ports.cli_options.option"  # the field metadata key of a field's declared option


@record(frozen=True, slots=True, eq=False)
class Declared:
    """An option or argument as typer takes it: `typer.Option(default, *names, **settings)`, or
    `typer.Argument(default, **settings)` when `argument`."""

    default: Any
    names: tuple[str, ...] = ()
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    argument: bool = False

    def for_typer(self) -> Any:
        import typer

        if self.argument:
            return typer.Argument(self.default, **self.settings)
        return typer.Option(self.default, *self.names, **self.settings)


def option(default: Any = None, *names: str, **settings: Any) -> Any:
    """A command's option: what `typer.Option(default, *names, **settings)` would say."""
    return Declared(default, names, settings)


def argument(default: Any = None, **settings: Any) -> Any:
    """A command's argument: what `typer.Argument(default, **settings)` would say."""
    return Declared(default, (), settings, argument=True)


def group_option(default: Any = None, *names: str, **settings: Any) -> Any:
    """A field of an option group: an option declared here, or one declared elsewhere (shared with
    a command that takes the option alone)."""
    declared = default if isinstance(default, Declared) else Declared(default, names, settings)
    return dataclasses.field(metadata={OPTION: declared})


class UsageError(ValueError):
    """A value the command refuses: typer reports it as a bad parameter (exit 2)."""

    def __init__(self, message: str, param_hint: str):
        super().__init__(message)
        self.message, self.param_hint = message, param_hint


def is_option_group(annotation: Any) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation) and all(
        OPTION in field.metadata for field in dataclasses.fields(annotation))


@functools.cache
def group_parameters(group: type) -> tuple[inspect.Parameter, ...]:
    """An option group's options as a command's keyword parameters, in the order of its fields."""
    hints = typing.get_type_hints(group)
    return tuple(inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=field.metadata[OPTION],
                                   annotation=hints[field.name]) for field in dataclasses.fields(group))


def with_option_groups(function: Callable[..., Any]) -> Callable[..., Any]:
    """The command with each parameter annotated with an option group replaced by the group's
    options; called with them, it calls `function` with the group built."""
    signature = inspect.signature(function, eval_str=True)
    parameters: list[inspect.Parameter] = []
    groups: dict[str, tuple[type, tuple[str, ...]]] = {}
    for parameter in signature.parameters.values():  # typer passes every one by name
        group = parameter.annotation
        if not is_option_group(group):
            parameters.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        options = group_parameters(group)
        groups[parameter.name] = (group, tuple(option.name for option in options))
        parameters += options
    names = [parameter.name for parameter in parameters]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise TypeError(f"{function.__name__}: options named twice: {', '.join(twice)}")

    @functools.wraps(function)
    def command(**given: Any) -> Any:
        for name, (group, fields) in groups.items():
            given[name] = group(**{field: given.pop(field) for field in fields})
        return function(**given)

    command.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    return command


def typer_command(command: Callable[..., Any]) -> Callable[..., Any]:
    """The command as typer takes it: its option groups spread (`with_option_groups`), its declared
    options made typer's, a UsageError raised as typer's BadParameter."""
    import typer

    command = with_option_groups(command)
    signature = inspect.signature(command, eval_str=True)
    parameters = [parameter.replace(default=parameter.default.for_typer())
                  if isinstance(parameter.default, Declared) else parameter
                  for parameter in signature.parameters.values()]

    @functools.wraps(command)
    def typed(**given: Any) -> Any:
        try:
            return command(**given)
        except UsageError as error:
            raise typer.BadParameter(error.message, param_hint=error.param_hint) from None

    typed.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    typed.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    return typed


def typer_app(commands, *, name: str, release: str, help: str) -> Any:
    """The typer app of `commands` ((name, function), in the order --help lists them), each one's
    declared options made typer's (`typer_command`); with --version and shell completion."""
    import typer

    # Plain help, as ruff and kube-linter print it: typer's rich help imports rich (its markdown and
    # traceback modules too), which doubled `--help`'s start-up (0.15 s -> 0.07 s; issue 26).
    app = typer.Typer(name=name, help=help, no_args_is_help=True, pretty_exceptions_enable=False,
                      rich_markup_mode=None,
                      add_completion=True)  # --install-completion / --show-completion: bash, zsh, fish, PowerShell

    def version_callback(value: bool) -> None:
        if value:
            echo(f"{name} {release}")
            raise typer.Exit()

    @app.callback()
    def main_callback(
        version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True,
                                     help="Print the version and exit."),
    ) -> None:
        """Keeps subcommands subcommands (typer would otherwise treat a lone command's name as a path)."""

    for command_name, command in commands:
        app.command(command_name, short_help=first_sentence(command.__doc__ or ""))(typer_command(command))
    return app


def first_sentence(docstring: str) -> str:
    """A command's line in `--help`: its docstring's first sentence, whole (click would cut it at
    45 characters with "...")."""
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[:end + 1]


def is_a(error: BaseException, name: str) -> bool:
    """Click's exception classes by name: typer 0.2x vendors its own copy of click."""
    return any(klass.__name__ == name for klass in type(error).__mro__)


_ANSI_STYLE = r"\033\[[;?0-9]*[a-zA-Z]"  # compiled by `re` when first used


def echo(message: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print a line as typer's `echo` does: flushed, ANSI styles dropped when not on a terminal."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    text = message + "\n" if nl else message
    if text:
        try:
            terminal = stream.isatty()
        except Exception:  # noqa: BLE001 (a stream without a terminal to ask)
            terminal = False
        stream.write(text if terminal else re.sub(_ANSI_STYLE, "", text))
    stream.flush()


def color_wanted(flag: bool | None, stream) -> bool:
    """--color/--no-color, else NO_COLOR (any non-empty value: no colour), else FORCE_COLOR (any
    non-empty value but 0: colour), else colour only on a terminal (no-color.org, Python 3.13)."""
    if flag is not None:
        return flag
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "0") not in ("", "0"):
        return True
    return stream.isatty()


# --- reading a command line without typer ---------------------------------------------------------

@record(frozen=True, slots=True)
class Accepts:
    """What one option or argument takes, read from its annotation as typer reads it."""

    name: str  # the command's parameter
    kind: type  # bool (a flag), str, int, Path or a str enum
    many: bool  # a list: repeatable (an option) or every remaining argument
    declared: Declared


def accepts(parameter: inspect.Parameter) -> Accepts | None:
    """None for an annotation typer reads some other way (left to typer)."""
    annotation, many = parameter.annotation, False
    if typing.get_origin(annotation) is typing.Union:
        kinds = [kind for kind in typing.get_args(annotation) if kind is not type(None)]
        if len(kinds) != 1:
            return None
        annotation = kinds[0]
    if typing.get_origin(annotation) is list:
        annotation, many = typing.get_args(annotation)[0], True
    if annotation in (bool, str, int, Path) or (isinstance(annotation, type) and issubclass(annotation, enum.Enum)):
        if annotation is bool and many:
            return None
        return Accepts(parameter.name, annotation, many, parameter.default)
    return None


def converted(accepted: Accepts, text: str) -> tuple[bool, Any]:
    """(True, the value typer would pass) or (False, None) when typer would refuse `text`."""
    kind, settings = accepted.kind, accepted.declared.settings
    if kind is str:
        return True, text
    if kind is int:
        try:
            number = int(text)
        except ValueError:
            return False, None
        low, high = settings.get("min"), settings.get("max")
        return (low is None or number >= low) and (high is None or number <= high), number
    if kind is Path:
        try:
            os.stat(text)
        except (OSError, ValueError):
            return True, Path(text)
        return os.access(text, os.R_OK), Path(text)  # typer's Path: an existing one must be readable
    members = {member.value: member for member in kind}
    return text in members, members.get(text)


def parse_command_line(command: Callable[..., Any], args: list[str]) -> dict[str, Any] | None:
    """The values typer would call `command` with for `args` (after the command's name), or None
    when typer must read them."""
    if os.name == "nt" or any(name.startswith("_") and name.endswith("_COMPLETE") for name in os.environ):
        return None  # click expands wildcards on Windows; shell completion is typer's
    long_options: dict[str, tuple[Accepts, bool]] = {}
    short_options: dict[str, tuple[Accepts, bool]] = {}
    values: dict[str, Any] = {}
    positional: Accepts | None = None
    for parameter in inspect.signature(command).parameters.values():
        accepted = accepts(parameter) if isinstance(parameter.default, Declared) else None
        if accepted is None or (accepted.declared.argument and (positional is not None or not accepted.many)):
            return None
        default = accepted.declared.default
        values[accepted.name] = list(default) if accepted.many and default is not None else default
        if accepted.declared.argument:
            positional = accepted
        for names in accepted.declared.names:
            for name, flag in zip(names.split("/"), (True, False)):
                name = name.strip()
                table = short_options if len(name) == 2 and name[0] == "-" and name[1] != "-" else long_options
                table[name] = (accepted, flag)
    arguments: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            arguments += rest
            break
        if arg[:1] != "-" or len(arg) == 1:
            arguments.append(arg)
        elif arg[:2] == "--" or arg.partition("=")[0] in long_options:
            name, equals, value = arg.partition("=")
            if name not in long_options or not take(*long_options[name], value if equals else None, rest, values):
                return None
        else:  # short options, clustered: -vq, -o FILE, -oFILE
            for index in range(1, len(arg)):
                found = short_options.get("-" + arg[index])
                if found is None:
                    return None
                remainder = arg[index + 1:] if found[0].kind is not bool else ""
                if remainder:
                    rest.insert(0, remainder)
                if not take(*found, None, rest, values):
                    return None
                if remainder or found[0].kind is not bool:
                    break
    if arguments:
        if positional is None:
            return None
        values[positional.name] = arguments
    return values


def take(accepted: Accepts, flag: bool, explicit: str | None, rest: list[str], values: dict[str, Any]) -> bool:
    """One option's value into `values` (the explicit `=value`, else the next argument)."""
    if accepted.kind is bool:
        values[accepted.name] = flag
        return explicit is None  # a flag takes no value
    if explicit is None and not rest:
        return False  # "requires an argument"
    ok, value = converted(accepted, explicit if explicit is not None else rest.pop(0))
    if ok and accepted.many:
        values[accepted.name].append(value)
    elif ok:
        values[accepted.name] = value
    return ok


# --- the values options take --------------------------------------------------------------------

def choices(name: str, values: Iterable[str]) -> Any:
    """The type of an option that takes one of `values`: a str enum whose members are named as
    their values (`OutputFormat.sarif == "sarif"`), which --help lists in this order."""
    return enum.Enum(name, [(value, value) for value in values], type=str, module=__name__)


OutputFormat = choices("OutputFormat", FORMATTERS)  # the formatters' registry: its keys, in its order
ProxyMode = choices("ProxyMode", ("ipvs", "iptables", "nftables"))
Scope = choices("Scope", ("all", "object"))
FailOn = choices("FailOn", ("error", "warning", "note", "never"))


def parse_report(text: str) -> tuple[str, str]:
    kind, colon, path = text.partition(":")
    if not colon or not path or kind not in {f.value for f in OutputFormat}:
        raise UsageError(f"{text!r} is not FORMAT:FILE with FORMAT one of "
                         f"{', '.join(f.value for f in OutputFormat)}", param_hint="--report")
    return kind, path


# --- the options ---------------------------------------------------------------------------------

HELM = "Helm charts"
CLUSTER = "Cluster facts"
POLICY = "Configuration and policies"
# Options a command also takes alone.
NODES_OPTION = option([], "--nodes", metavar="FILE", rich_help_panel=CLUSTER,
                      help="Node inventory: the output of `kubectl get nodes -o yaml` (repeatable).")
CLUSTER_OPTION = option([], "--cluster", metavar="FILE", rich_help_panel=CLUSTER,
                        help="Objects already running: `kubectl get pods,svc,ds,deploy -A -o yaml` (repeatable; "
                             "`node` also reads `kubectl get pods -A -o wide` text).")
PROXY_MODE_OPTION = option(None, "--proxy-mode", rich_help_panel=CLUSTER,
                           help="kube-proxy mode, when the inputs do not say.")
SERVICE_CIDR_OPTION = option(None, "--service-cidr", metavar="CIDR[,CIDR]", rich_help_panel=CLUSTER,
                             help="The cluster's Service CIDR, when the inputs do not say.")
POD_CIDR_OPTION = option(None, "--pod-cidr", metavar="CIDR[,CIDR]", rich_help_panel=CLUSTER,
                         help="The cluster's pod CIDR, when the inputs do not say.")
CNI_PLUGINS_VERSION_OPTION = option(
    None, "--cni-plugins-version", metavar="VERSION", rich_help_panel=CLUSTER,
    help="containernetworking/plugins release on the nodes (decides portmap's rule order), e.g. 1.1.1.")
SARIF_CATEGORY_OPTION = option("", "--sarif-category", help="SARIF automationDetails.id (a category).")
SARIF_FULL_RULES_OPTION = option(False, "--sarif-full-rules",
                                 help="SARIF: every rule that ran, with its full docs (default: only the rules "
                                      "with a result, each with its summary and a link to its page).")
OUTPUT_OPTION = option(None, "--output", "-o", help="Write the report to this file.")
COLOR_OPTION = option(None, "--color/--no-color", help="Colour text output (default: on a terminal, unless NO_COLOR "
                                                        "is set; FORCE_COLOR forces it).")
FAIL_ON_OPTION = option(None, "--fail-on", show_default=False,
                        help="Exit 1 when a finding has this severity or higher (default: the config's, else error).")
LINK_BASE_OPTION = option("", "--link-base", metavar="URL",
                          help="Markdown and HTML reports: link locations under this http(s) URL (a blob URL of the "
                               "commit).")
SHOW_SUPPRESSED_OPTION = option(False, "--show-suppressed", help="Show suppressed findings in text output.")
SCOPE_OPTION = option(Scope.all, "--scope", rich_help_panel=POLICY,
                      help="object: only rules that need no other object (the per-file pre-commit hook).")
BASELINE_OPTION = option(None, "--baseline", metavar="FILE", rich_help_panel=POLICY,
                         help="Report only findings not recorded in this baseline.")
WRITE_BASELINE_OPTION = option(None, "--write-baseline", metavar="FILE", rich_help_panel=POLICY,
                               help="Record today's findings as the baseline and exit 0.")


# Option groups (`cli_options`): each declared once, taken whole by the commands that share it.

@record(frozen=True)
class ReportArgs:
    """How `lint` and `node` write their report and when they fail."""

    output_format: OutputFormat = group_option(OutputFormat.text, "--format", "--output-format",
                                               help="Report format (--output-format, as ruff names it, too).")
    output: Optional[Path] = group_option(OUTPUT_OPTION)
    reports: List[str] = group_option([], "--report", metavar="FORMAT:FILE",
                                      help="Also write a report in another format (repeatable), e.g. sarif:out.sarif.")
    fail_on: Optional[FailOn] = group_option(FAIL_ON_OPTION)
    color: Optional[bool] = group_option(COLOR_OPTION)
    explain: bool = group_option(False, "--explain", "--verbose", "-v",
                                 help="Text: each finding's explanation (who receives the packet), object and related "
                                      "places under its headline.")
    quiet: bool = group_option(False, "--quiet", "-q", help="Print findings and errors only: no summary, no hints.")
    statistics: bool = group_option(False, "--statistics",
                                    help="Count findings per rule instead of listing them (text and json).")

    def given(self) -> dict:
        return {"fail_on": self.fail_on.value if self.fail_on else None}

    def extra_reports(self) -> list[tuple[str, str]]:
        """The `--report FORMAT:FILE` files; a bad one or --statistics with another format: a usage error."""
        extra = [parse_report(text) for text in self.reports]
        if self.statistics and self.output_format not in (OutputFormat.text, OutputFormat.concise, OutputFormat.json):
            raise UsageError("works with --format text or json", param_hint="--statistics")
        return extra


FIXING = "Fixes"


@record(frozen=True)
class FixArgs:
    """`lint --fix`, `--unsafe-fixes`, `--diff`, `--show-fixes` (docs/fix.md)."""

    fix: bool = group_option(False, "--fix", rich_help_panel=FIXING,
                             help="Apply safe fixes to the files, then lint again and report what remains.")
    unsafe_fixes: bool = group_option(False, "--unsafe-fixes", rich_help_panel=FIXING,
                                      help="Also apply fixes that change behaviour (a nodePort moved to a free one).")
    diff: bool = group_option(False, "--diff", rich_help_panel=FIXING,
                              help="Print the fixes as a unified diff and write nothing; exit 1 when there is one.")
    show_fixes: bool = group_option(False, "--show-fixes", rich_help_panel=FIXING,
                                    help="With --fix, list what was fixed (file:line rule fix); with --diff, what "
                                         "would be.")

    @property
    def wanted(self) -> bool:
        return self.fix or self.diff


def rule_completions(incomplete: str) -> list[tuple[str, str]]:
    """Shell completion for a rule: the built-in rules' ids (in the case typed) and names that
    start with what is typed, each with its help. After a comma (`--select KP101,host-`), the rule
    being typed is the text after the last comma; the ones before it stay as typed."""
    from kubelint_ports.policies import builtin_policies

    done, _, last = incomplete.rpartition(",")
    prefix = f"{done}," if done else ""
    offered: list[tuple[str, str]] = []
    for policy in builtin_policies():
        if policy.id.startswith(last.upper()):
            offered.append((prefix + last + policy.id[len(last):], f"{policy.name}: {policy.summary}"))
        if policy.name.startswith(last):
            offered.append((prefix + policy.name, f"{policy.id}: {policy.summary}"))
    return offered


@record(frozen=True)
class RuleChoice:
    """Which rules run (`lint`, `ports`, `node`, and the rules `config` shows)."""

    select: List[str] = group_option([], "--select", metavar="RULES", rich_help_panel=POLICY,
                                     autocompletion=rule_completions,
                                     help="Run only these rules: ids, names or id prefixes (KP2), comma-separated, "
                                          "repeatable (default: the config's `select`, else all).")
    ignore: List[str] = group_option([], "--ignore", metavar="RULES", rich_help_panel=POLICY,
                                     autocompletion=rule_completions,
                                     help="Do not run these rules (ids, names or id prefixes; comma-separated, "
                                          "repeatable).")

    def given(self) -> dict:
        return {"select": tuple(self.select), "ignore": tuple(self.ignore)}


@record(frozen=True)
class ConfigArgs:
    """The configuration file and policies of one's own (every command that runs rules, and `config`)."""

    config: Optional[str] = group_option(None, "--config", metavar="FILE", rich_help_panel=POLICY,
                                         help="Configuration file (default: .kubelint-ports.yaml or pyproject.toml "
                                              "found from the current directory upward).")
    policies: List[str] = group_option([], "--policies", metavar="DIR", rich_help_panel=POLICY,
                                       help="A directory of your own policies (repeatable).")

    def given(self) -> dict:
        return {"config": self.config, "policies": tuple(self.policies)}


@record(frozen=True)
class FactArgs:
    """What the cluster is like, when the inputs do not say (`lint`, `ports`, `config`; `node` takes the
    four its rules read, alone)."""

    node_port_range: Optional[str] = group_option(
        None, "--node-port-range", metavar="LOW-HIGH", rich_help_panel=CLUSTER,
        help="The cluster's node-port range (default: 30000-32767).")
    ephemeral_port_range: Optional[str] = group_option(
        None, "--ephemeral-port-range", metavar="LOW-HIGH", rich_help_panel=CLUSTER,
        help="The nodes' net.ipv4.ip_local_port_range (default: 32768-60999, Linux's).")
    nodes: List[str] = group_option(NODES_OPTION)
    cluster: List[str] = group_option(CLUSTER_OPTION)
    proxy_mode: Optional[ProxyMode] = group_option(PROXY_MODE_OPTION)
    service_cidr: Optional[str] = group_option(SERVICE_CIDR_OPTION)
    pod_cidr: Optional[str] = group_option(POD_CIDR_OPTION)
    cni_plugins_version: Optional[str] = group_option(CNI_PLUGINS_VERSION_OPTION)

    def given(self) -> dict:
        return {"node_port_range": self.node_port_range, "ephemeral_port_range": self.ephemeral_port_range,
                "proxy_mode": self.proxy_mode.value if self.proxy_mode else None, "service_cidr": self.service_cidr,
                "pod_cidr": self.pod_cidr, "cni_plugins_version": self.cni_plugins_version,
                "nodes": tuple(self.nodes), "cluster": tuple(self.cluster)}


@record(frozen=True)
class HelmArgs:
    """How charts render (`lint`, `ports`, `node`'s manifests, `config`'s facts)."""

    values: List[str] = group_option([], "--values", "-f", metavar="FILE", rich_help_panel=HELM,
                                     help="Values file for the charts linted (repeatable; later files win).")
    set_values: List[str] = group_option([], "--set", metavar="KEY=VALUE", rich_help_panel=HELM,
                                         help="Set chart values like `helm --set` (repeatable).")
    set_strings: List[str] = group_option([], "--set-string", metavar="KEY=VALUE", rich_help_panel=HELM,
                                          help="Set chart values as strings like `helm --set-string` (repeatable).")
    release_name: Optional[str] = group_option(None, "--release-name", rich_help_panel=HELM,
                                               help="Release name for the charts (default: the chart's name).")
    namespace: Optional[str] = group_option(None, "--namespace", rich_help_panel=HELM,
                                            help="Release namespace for the charts (default: Helm's, `default`).")
    kube_version: Optional[str] = group_option(None, "--kube-version", metavar="VERSION", rich_help_panel=HELM,
                                               help="Kubernetes version the charts see (.Capabilities.KubeVersion).")
    helm_binary: Optional[str] = group_option(None, "--helm-binary", metavar="PATH", rich_help_panel=HELM,
                                              help="Render charts with `PATH template` instead of the embedded engine.")
    chart_root: Optional[str] = group_option(None, "--chart-root", metavar="DIR", rich_help_panel=HELM,
                                             help="The chart that `helm template` output (on stdin or in a file) came "
                                                  "from, to report template lines (default: the current directory or "
                                                  "./CHART_NAME).")

    def given(self) -> dict:
        return {"helm": dict(values=tuple(self.values), set=tuple(self.set_values), set_string=tuple(self.set_strings),
                             release_name=self.release_name, namespace=self.namespace,
                             kube_version=self.kube_version, helm_binary=self.helm_binary,
                             chart_root=self.chart_root)}


@record(frozen=True)
class BudgetArgs:
    """Budgets against hostile input, and the processes that read large inputs (`lint`, `ports`, `node`,
    `config`)."""

    limits: List[str] = group_option(
        [], "--limit", metavar="NAME=VALUE", rich_help_panel=POLICY,
        help="Raise or lower a budget against hostile input (repeatable; the only way to raise one: a configuration "
             "file may only lower it): max-depth, max-aliases, max-nodes, max-file-mib, helm-seconds, helm-output-mib, "
             "helm-memory-mib, kustomize-seconds, kustomize-memory-mib, kustomize-generators, input-seconds "
             "(docs/safety.md, Limits).")
    jobs: int = group_option(0, "--jobs", "-j", min=0, metavar="N", show_default=False,
                             help="Processes that read inputs of 4 MiB or more (default: one per free processor; 1: no "
                                  "extra process).")
    # --- hook: the file cache (loading/file_cache.py, docs/cache.md) ---
    cache_dir: Optional[str] = group_option(
        None, "--cache-dir", metavar="DIR", rich_help_panel=POLICY,
        help="Keep what each input file says here and read again only the files that changed (default: "
             "$KUBELINT_PORTS_CACHE_DIR, the configuration's cache-dir, else .kubelint-ports_cache at the "
             "repository's top; docs/cache.md).")
    no_cache: bool = group_option(False, "--no-cache", rich_help_panel=POLICY,
                                  help="Read every input file; use and write no cache.")

    def given(self) -> dict:
        return {"limits": tuple(self.limits), "cache_dir": self.cache_dir, "no_cache": self.no_cache}


def command_line(*groups, **given):
    """The CommandLine of a command: its groups' options, and its own (`given`)."""
    from kubelint_ports.settings import CommandLine

    for group in groups:
        given.update(group.given())
    return CommandLine(**given)
