"""Options several commands share, declared once.

A group of options is a dataclass whose fields are typer options (`option(...)`). A command takes
the group as one keyword parameter annotated with it (`*, helm: HelmArgs`); `with_option_groups` shows typer
the group's options in that parameter's place, in the order of its fields, and hands the command
one instance of the group. So `lint`, `ports` and `node` read the same declaration, and each
command's --help lists the options where it puts the group.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, List, Optional

import typer

OPTION = "kubelint_ports.cli_options.option"  # the field metadata key of a field's typer option


def option(default: Any = None, *param_decls: str, **settings: Any) -> Any:
    """A field of an option group: `typer.Option(default, *param_decls, **settings)`, or an
    OptionInfo declared elsewhere (shared with a command that takes the option alone)."""
    info = default if isinstance(default, typer.models.OptionInfo) else typer.Option(default, *param_decls, **settings)
    return dataclasses.field(metadata={OPTION: info})


def is_option_group(annotation: Any) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation) and all(
        OPTION in field.metadata for field in dataclasses.fields(annotation))


def with_option_groups(function: Callable[..., Any]) -> Callable[..., Any]:
    """The command as typer should see it: each parameter annotated with an option group replaced
    by the group's options; called with them, it calls `function` with the group built."""
    signature = inspect.signature(function, eval_str=True)
    parameters: list[inspect.Parameter] = []
    groups: dict[str, tuple[type, tuple[str, ...]]] = {}
    for parameter in signature.parameters.values():  # typer passes every one by name
        group = parameter.annotation
        if not is_option_group(group):
            parameters.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        hints = typing.get_type_hints(group)
        fields = dataclasses.fields(group)
        groups[parameter.name] = (group, tuple(field.name for field in fields))
        parameters += [inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY,
                                         default=field.metadata[OPTION], annotation=hints[field.name])
                       for field in fields]
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


# --- the values options take --------------------------------------------------------------------

class OutputFormat(str, enum.Enum):
    text = "text"
    concise = "concise"
    json = "json"
    sarif = "sarif"
    github = "github"
    markdown = "markdown"
    junit = "junit"
    gitlab = "gitlab"
    html = "html"


class ProxyMode(str, enum.Enum):
    ipvs = "ipvs"
    iptables = "iptables"
    nftables = "nftables"


class Scope(str, enum.Enum):
    all = "all"
    object = "object"


class FailOn(str, enum.Enum):
    error = "error"
    warning = "warning"
    note = "note"
    never = "never"


def parse_report(text: str) -> tuple[str, str]:
    kind, colon, path = text.partition(":")
    if not colon or not path or kind not in {f.value for f in OutputFormat}:
        raise typer.BadParameter(f"{text!r} is not FORMAT:FILE with FORMAT one of "
                                 f"{', '.join(f.value for f in OutputFormat)}", param_hint="--report")
    return kind, path


# --- the options ---------------------------------------------------------------------------------

HELM = "Helm charts"
CLUSTER = "Cluster facts"
POLICY = "Configuration and policies"
# Options a command also takes alone (an OptionInfo is only read when a command is built).
NODES_OPTION = typer.Option([], "--nodes", metavar="FILE", rich_help_panel=CLUSTER,
                     help="Node inventory: the output of `kubectl get nodes -o yaml` (repeatable).")
CLUSTER_OPTION = typer.Option([], "--cluster", metavar="FILE", rich_help_panel=CLUSTER,
                       help="Objects already running: `kubectl get pods,svc,ds,deploy -A -o yaml` (repeatable).")
PROXY_MODE_OPTION = typer.Option(None, "--proxy-mode", rich_help_panel=CLUSTER,
                                 help="kube-proxy mode, when the inputs do not say.")
SERVICE_CIDR_OPTION = typer.Option(None, "--service-cidr", metavar="CIDR[,CIDR]", rich_help_panel=CLUSTER,
                                   help="The cluster's Service CIDR, when the inputs do not say.")
POD_CIDR_OPTION = typer.Option(None, "--pod-cidr", metavar="CIDR[,CIDR]", rich_help_panel=CLUSTER,
                               help="The cluster's pod CIDR, when the inputs do not say.")
CNI_PLUGINS_VERSION_OPTION = typer.Option(
    None, "--cni-plugins-version", metavar="VERSION", rich_help_panel=CLUSTER,
    help="containernetworking/plugins release on the nodes (decides portmap's rule order), e.g. 1.1.1.")
SARIF_CATEGORY_OPTION = typer.Option("", "--sarif-category", help="SARIF automationDetails.id (a category).")


# Option groups (`cli_options`): each declared once, taken whole by the commands that share it.

@dataclasses.dataclass(frozen=True)
class ReportArgs:
    """How `lint` and `node` write their report and when they fail."""

    output_format: OutputFormat = option(OutputFormat.text, "--format", "--output-format",
                                         help="Report format (--output-format, as ruff names it, too).")
    output: Optional[Path] = option(None, "--output", "-o", help="Write the report to this file.")
    reports: List[str] = option([], "--report", metavar="FORMAT:FILE",
                                help="Also write a report in another format (repeatable), e.g. sarif:out.sarif.")
    fail_on: Optional[FailOn] = option(None, "--fail-on", show_default=False,
                                       help="Exit 1 when a finding has this severity or higher (default: the "
                                            "config's, else error).")
    color: Optional[bool] = option(None, "--color/--no-color",
                                   help="Colour text output (default: on a terminal, unless NO_COLOR is set; "
                                        "FORCE_COLOR forces it).")
    explain: bool = option(False, "--explain", "--verbose", "-v",
                           help="Text: each finding's explanation (who receives the packet), object and related "
                                "places under its headline.")
    quiet: bool = option(False, "--quiet", "-q", help="Print findings and errors only: no summary, no hints.")
    statistics: bool = option(False, "--statistics",
                              help="Count findings per rule instead of listing them (text and json).")

    def given(self) -> dict:
        return {"fail_on": self.fail_on.value if self.fail_on else None}

    def extra_reports(self) -> list[tuple[str, str]]:
        """The `--report FORMAT:FILE` files; a bad one or --statistics with another format: a usage error."""
        extra = [parse_report(text) for text in self.reports]
        if self.statistics and self.output_format not in (OutputFormat.text, OutputFormat.concise, OutputFormat.json):
            raise typer.BadParameter("works with --format text or json", param_hint="--statistics")
        return extra


FIXING = "Fixes"


@dataclasses.dataclass(frozen=True)
class FixArgs:
    """`lint --fix`, `--unsafe-fixes`, `--diff` (docs/fix.md)."""

    fix: bool = option(False, "--fix", rich_help_panel=FIXING,
                       help="Apply safe fixes to the files, then lint again and report what remains.")
    unsafe_fixes: bool = option(False, "--unsafe-fixes", rich_help_panel=FIXING,
                                help="Also apply fixes that change behaviour (a nodePort moved to a free one).")
    diff: bool = option(False, "--diff", rich_help_panel=FIXING,
                        help="Print the fixes as a unified diff and write nothing; exit 1 when there is one.")

    @property
    def wanted(self) -> bool:
        return self.fix or self.diff


@dataclasses.dataclass(frozen=True)
class RuleChoice:
    """Which rules run (`lint`, `ports`, `node`)."""

    select: List[str] = option([], "--select", metavar="RULES", rich_help_panel=POLICY,
                               help="Run only these rules: ids, names or id prefixes (KP2), comma-separated, "
                                    "repeatable (default: the config's `select`, else all).")
    ignore: List[str] = option([], "--ignore", metavar="RULES", rich_help_panel=POLICY,
                               help="Do not run these rules (ids, names or id prefixes; comma-separated, "
                                    "repeatable).")

    def given(self) -> dict:
        return {"select": tuple(self.select), "ignore": tuple(self.ignore)}


@dataclasses.dataclass(frozen=True)
class ConfigArgs:
    """The configuration file and policies of one's own (`lint`, `ports`)."""

    config: Optional[str] = option(None, "--config", metavar="FILE", rich_help_panel=POLICY,
                                   help="Configuration file (default: .kubelint-ports.yaml or pyproject.toml "
                                        "found from the current directory upward).")
    policies: List[str] = option([], "--policies", metavar="DIR", rich_help_panel=POLICY,
                                 help="A directory of your own policies (repeatable).")

    def given(self) -> dict:
        return {"config": self.config, "policies": tuple(self.policies)}


@dataclasses.dataclass(frozen=True)
class FactArgs:
    """What the cluster is like, when the inputs do not say (`lint`, `ports`)."""

    node_port_range: Optional[str] = option(None, "--node-port-range", metavar="LOW-HIGH", rich_help_panel=CLUSTER,
                                            help="The cluster's node-port range (default: 30000-32767).")
    ephemeral_port_range: Optional[str] = option(
        None, "--ephemeral-port-range", metavar="LOW-HIGH", rich_help_panel=CLUSTER,
        help="The nodes' net.ipv4.ip_local_port_range (default: 32768-60999, Linux's).")
    nodes: List[str] = option(NODES_OPTION)
    cluster: List[str] = option(CLUSTER_OPTION)
    proxy_mode: Optional[ProxyMode] = option(PROXY_MODE_OPTION)
    service_cidr: Optional[str] = option(SERVICE_CIDR_OPTION)
    pod_cidr: Optional[str] = option(POD_CIDR_OPTION)
    cni_plugins_version: Optional[str] = option(CNI_PLUGINS_VERSION_OPTION)

    def given(self) -> dict:
        return {"node_port_range": self.node_port_range, "ephemeral_port_range": self.ephemeral_port_range,
                "proxy_mode": self.proxy_mode.value if self.proxy_mode else None, "service_cidr": self.service_cidr,
                "pod_cidr": self.pod_cidr, "cni_plugins_version": self.cni_plugins_version,
                "nodes": tuple(self.nodes), "cluster": tuple(self.cluster)}


@dataclasses.dataclass(frozen=True)
class HelmArgs:
    """How charts render (`lint`, `ports`)."""

    values: List[str] = option([], "--values", "-f", metavar="FILE", rich_help_panel=HELM,
                               help="Values file for the charts linted (repeatable; later files win).")
    set_values: List[str] = option([], "--set", metavar="KEY=VALUE", rich_help_panel=HELM,
                                   help="Set chart values like `helm --set` (repeatable).")
    set_strings: List[str] = option([], "--set-string", metavar="KEY=VALUE", rich_help_panel=HELM,
                                    help="Set chart values as strings like `helm --set-string` (repeatable).")
    release_name: Optional[str] = option(None, "--release-name", rich_help_panel=HELM,
                                         help="Release name for the charts (default: the chart's name).")
    namespace: Optional[str] = option(None, "--namespace", rich_help_panel=HELM,
                                      help="Release namespace for the charts (default: Helm's, `default`).")
    kube_version: Optional[str] = option(None, "--kube-version", metavar="VERSION", rich_help_panel=HELM,
                                         help="Kubernetes version the charts see (.Capabilities.KubeVersion).")
    helm_binary: Optional[str] = option(None, "--helm-binary", metavar="PATH", rich_help_panel=HELM,
                                        help="Render charts with `PATH template` instead of the embedded engine.")
    chart_root: Optional[str] = option(None, "--chart-root", metavar="DIR", rich_help_panel=HELM,
                                       help="The chart that `helm template` output (on stdin or in a file) came "
                                            "from, to report template lines (default: the current directory or "
                                            "./CHART_NAME).")

    def given(self) -> dict:
        return {"helm": dict(values=tuple(self.values), set=tuple(self.set_values), set_string=tuple(self.set_strings),
                             release_name=self.release_name, namespace=self.namespace,
                             kube_version=self.kube_version, helm_binary=self.helm_binary,
                             chart_root=self.chart_root)}


@dataclasses.dataclass(frozen=True)
class BudgetArgs:
    """Budgets against hostile input, and the processes that read large inputs (`lint`, `ports`)."""

    limits: List[str] = option([], "--limit", metavar="NAME=VALUE", rich_help_panel=POLICY,
                               help="Raise or lower a budget against hostile input (repeatable): max-depth, "
                                    "max-aliases, max-nodes, max-file-mib, helm-seconds, helm-output-mib, "
                                    "helm-memory-mib, kustomize-seconds, kustomize-memory-mib, kustomize-generators, "
                                    "input-seconds (docs/safety.md, Limits).")
    jobs: int = option(0, "--jobs", "-j", min=0, metavar="N", show_default=False,
                       help="Processes that read inputs of 4 MiB or more (default: one per free processor; 1: no "
                            "extra process).")

    def given(self) -> dict:
        return {"limits": tuple(self.limits)}


def command_line(*groups, **given):
    """The CommandLine of a command: its groups' options, and its own (`given`)."""
    from kubelint_ports.settings import CommandLine

    for group in groups:
        given.update(group.given())
    return CommandLine(**given)
