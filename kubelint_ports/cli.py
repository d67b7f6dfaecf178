"""The `kubelint-ports` command line: lint, ports, rules, explain, config."""

from __future__ import annotations

import dataclasses
import enum
import sys
from pathlib import Path
from typing import List, Optional

import typer

from kubelint_ports import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

app = typer.Typer(
    name="kubelint-ports",
    help="Find Kubernetes port-allocation mistakes (hostPort, hostNetwork, NodePort) before they reach a cluster.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


class OutputFormat(str, enum.Enum):
    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"
    markdown = "markdown"


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


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"kubelint-ports {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Keeps subcommands subcommands (typer would otherwise treat a lone command's name as a path)."""


def run_settings(command):
    """Resolve the command line and the config file, or exit 2 with the reason."""
    from kubelint_ports.config import ConfigError
    from kubelint_ports.policies import PolicyError
    from kubelint_ports.settings import resolve
    from kubelint_ports.suppressions import BaselineError

    try:
        return resolve(command)
    except (ConfigError, PolicyError, BaselineError, ValueError) as error:
        typer.echo(f"kubelint-ports: error: {error}", err=True)
        raise typer.Exit(EXIT_USAGE) from None


def parse_report(text: str) -> tuple[str, str]:
    kind, colon, path = text.partition(":")
    if not colon or not path or kind not in {f.value for f in OutputFormat}:
        raise typer.BadParameter(f"{text!r} is not FORMAT:FILE with FORMAT one of "
                                 f"{', '.join(f.value for f in OutputFormat)}", param_hint="--report")
    return kind, path


PATHS_HELP = ("Manifest files, directories (recursive: *.yaml, *.yml, *.json; a directory with Chart.yaml is rendered "
              "as a Helm chart) or - for standard input (default: the config's `paths`, else .).")
HELM = "Helm charts"
CLUSTER = "Cluster facts"
POLICY = "Configuration and policies"
# Options `lint` and `ports` share (an OptionInfo is only read when a command is built).
NODES_OPTION = typer.Option([], "--nodes", metavar="FILE", rich_help_panel=CLUSTER,
                     help="Node inventory: the output of `kubectl get nodes -o yaml` (repeatable).")
CLUSTER_OPTION = typer.Option([], "--cluster", metavar="FILE", rich_help_panel=CLUSTER,
                       help="Objects already running: `kubectl get pods,svc,ds,deploy -A -o yaml` (repeatable).")
VALUES_OPTION = typer.Option([], "--values", "-f", metavar="FILE", rich_help_panel=HELM,
                      help="Values file for the charts linted (repeatable; later files win).")
SET_VALUES_OPTION = typer.Option([], "--set", metavar="KEY=VALUE", rich_help_panel=HELM,
                          help="Set chart values like `helm --set` (repeatable).")
SET_STRINGS_OPTION = typer.Option([], "--set-string", metavar="KEY=VALUE", rich_help_panel=HELM,
                           help="Set chart values as strings like `helm --set-string` (repeatable).")
RELEASE_NAME_OPTION = typer.Option(None, "--release-name", rich_help_panel=HELM,
                            help="Release name for the charts (default: the chart's name).")
NAMESPACE_OPTION = typer.Option(None, "--namespace", rich_help_panel=HELM,
                         help="Release namespace for the charts (default: Helm's, `default`).")
HELM_BINARY_OPTION = typer.Option(None, "--helm-binary", metavar="PATH", rich_help_panel=HELM,
                           help="Render charts with `PATH template` instead of the embedded engine.")
JOBS_OPTION = typer.Option(0, "--jobs", "-j", min=0, metavar="N", show_default=False,
                           help="Processes that read large inputs (default: one per processor; 1: no extra process).")


@app.command()
def lint(
    paths: Optional[List[str]] = typer.Argument(None, help=PATHS_HELP, show_default=False),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--format", help="Report format."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report to this file."),
    reports: List[str] = typer.Option([], "--report", metavar="FORMAT:FILE",
                                      help="Also write a report in another format (repeatable), e.g. sarif:out.sarif."),
    fail_on: Optional[FailOn] = typer.Option(None, "--fail-on", show_default=False,
                                             help="Exit 1 when a finding has this severity or higher (default: the "
                                                  "config's, else error)."),
    color: Optional[bool] = typer.Option(None, "--color/--no-color",
                                         help="Colour text output (default: when writing to a terminal)."),
    show_suppressed: bool = typer.Option(False, "--show-suppressed", help="Show suppressed findings in text output."),
    sarif_category: str = typer.Option("", "--sarif-category", help="SARIF automationDetails.id (a category)."),
    link_base: str = typer.Option("", "--link-base", metavar="URL",
                                  help="Markdown reports: link locations under this URL (a blob URL of the commit)."),
    config: Optional[str] = typer.Option(None, "--config", metavar="FILE", rich_help_panel=POLICY,
                                         help="Configuration file (default: .kubelint-ports.yaml or pyproject.toml "
                                              "found from the current directory upward)."),
    policies: List[str] = typer.Option([], "--policies", metavar="DIR", rich_help_panel=POLICY,
                                       help="A directory of your own policies (repeatable)."),
    scope: Scope = typer.Option(Scope.all, "--scope", rich_help_panel=POLICY,
                                help="object: only rules that need no other object (the per-file pre-commit hook)."),
    baseline: Optional[str] = typer.Option(None, "--baseline", metavar="FILE", rich_help_panel=POLICY,
                                           help="Report only findings not recorded in this baseline."),
    write_baseline: Optional[str] = typer.Option(None, "--write-baseline", metavar="FILE", rich_help_panel=POLICY,
                                                 help="Record today's findings as the baseline and exit 0."),
    node_port_range: Optional[str] = typer.Option(None, "--node-port-range", metavar="LOW-HIGH", rich_help_panel=CLUSTER,
                                                  help="The cluster's node-port range (default: 30000-32767)."),
    nodes: List[str] = NODES_OPTION,
    cluster: List[str] = CLUSTER_OPTION,
    proxy_mode: Optional[ProxyMode] = typer.Option(None, "--proxy-mode", rich_help_panel=CLUSTER,
                                                   help="kube-proxy mode, when the inputs do not say."),
    service_cidr: Optional[str] = typer.Option(None, "--service-cidr", metavar="CIDR[,CIDR]", rich_help_panel=CLUSTER,
                                               help="The cluster's Service CIDR, when the inputs do not say."),
    pod_cidr: Optional[str] = typer.Option(None, "--pod-cidr", metavar="CIDR[,CIDR]", rich_help_panel=CLUSTER,
                                           help="The cluster's pod CIDR, when the inputs do not say."),
    values: List[str] = VALUES_OPTION,
    set_values: List[str] = SET_VALUES_OPTION,
    set_strings: List[str] = SET_STRINGS_OPTION,
    release_name: Optional[str] = RELEASE_NAME_OPTION,
    namespace: Optional[str] = NAMESPACE_OPTION,
    kube_version: Optional[str] = typer.Option(None, "--kube-version", metavar="VERSION", rich_help_panel=HELM,
                                               help="Kubernetes version the charts see (.Capabilities.KubeVersion)."),
    helm_binary: Optional[str] = HELM_BINARY_OPTION,
    chart_root: Optional[str] = typer.Option(None, "--chart-root", metavar="DIR", rich_help_panel=HELM,
                                             help="The chart that `helm template` output (on stdin or in a file) "
                                                  "came from, to report template lines (default: the current "
                                                  "directory or ./CHART_NAME)."),
    jobs: int = JOBS_OPTION,
) -> None:
    """Lint Kubernetes manifests and Helm charts for port-allocation mistakes."""
    from kubelint_ports.engine import lint_paths
    from kubelint_ports.findings import Severity
    from kubelint_ports.formatters import FormatOptions, get_formatter
    from kubelint_ports.settings import CommandLine

    extra_reports = [parse_report(text) for text in reports]
    settings = run_settings(CommandLine(
        paths=tuple(paths or ()), config=config, fail_on=fail_on.value if fail_on else None,
        node_port_range=node_port_range, proxy_mode=proxy_mode.value if proxy_mode else None,
        service_cidr=service_cidr, pod_cidr=pod_cidr, nodes=tuple(nodes), cluster=tuple(cluster),
        policies=tuple(policies), baseline=baseline, scope=scope.value,
        helm=dict(values=tuple(values), set=tuple(set_values), set_string=tuple(set_strings),
                  release_name=release_name, namespace=namespace, kube_version=kube_version,
                  helm_binary=helm_binary, chart_root=chart_root)))
    report = lint_paths(settings.paths, dataclasses.replace(settings.options, jobs=jobs), policies=settings.policies)
    format_options = FormatOptions(show_suppressed=show_suppressed, sarif_category=sarif_category, link_base=link_base)
    for kind, path in extra_reports:
        with open(path, "w", encoding="utf-8", newline="\n") as stream:
            get_formatter(kind)(report, stream, format_options)
    stream = open(output, "w", encoding="utf-8", newline="\n") if output else sys.stdout
    try:
        use_color = color if color is not None else (output is None and sys.stdout.isatty())
        get_formatter(output_format.value)(report, stream, dataclasses.replace(
            format_options, color=use_color and output_format is OutputFormat.text))
    finally:
        if output:
            stream.close()
    if report.diagnostics:
        raise typer.Exit(EXIT_USAGE)
    if write_baseline:
        from kubelint_ports.suppressions import write_baseline as record

        count = record(report.findings, write_baseline)
        typer.echo(f"kubelint-ports: wrote {count} findings to the baseline {write_baseline}", err=True)
        raise typer.Exit(EXIT_CLEAN)
    if settings.fail_on != "never":
        threshold = Severity.parse(settings.fail_on)
        if any(f.severity >= threshold and not f.suppressed for f in report.findings):
            raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(EXIT_CLEAN)


@app.command("config")
def show_config(
    config: Optional[str] = typer.Option(None, "--config", metavar="FILE", help="Configuration file."),
    policies: List[str] = typer.Option([], "--policies", metavar="DIR", help="A directory of your own policies."),
) -> None:
    """Print the effective configuration: the config file over the policy defaults."""
    import yaml

    from kubelint_ports.settings import CommandLine, effective

    settings = run_settings(CommandLine(config=config, policies=tuple(policies)))
    typer.echo(yaml.safe_dump(effective(settings), sort_keys=False, default_flow_style=False), nl=False)


@app.command()
def rules() -> None:
    """List the rules: id, name, default severity, summary."""
    from kubelint_ports.policies import builtin_policies

    policies = builtin_policies()
    width = max(len(policy.name) for policy in policies)
    for policy in policies:
        typer.echo(f"{policy.id}  {policy.name:<{width}}  {str(policy.severity):<7}  {policy.summary}")


@app.command()
def explain(rule: str = typer.Argument(..., help="A rule id (KP101) or name (host-port).")) -> None:
    """Print one rule's documentation."""
    from kubelint_ports.docs import rule_markdown
    from kubelint_ports.policies import find_policy

    policy = find_policy(rule)
    if policy is None:
        typer.echo(f"unknown rule {rule!r}; `kubelint-ports rules` lists them", err=True)
        raise typer.Exit(EXIT_USAGE)
    typer.echo(rule_markdown(policy), nl=False)


class PortsFormat(str, enum.Enum):
    text = "text"
    json = "json"


@app.command()
def ports(
    paths: Optional[List[str]] = typer.Argument(None, help=PATHS_HELP, show_default=False),
    nodes: List[str] = NODES_OPTION,
    cluster: List[str] = CLUSTER_OPTION,
    config: Optional[str] = typer.Option(None, "--config", metavar="FILE", help="Configuration file."),
    output_format: PortsFormat = typer.Option(PortsFormat.text, "--format", help="Table format."),
    color: Optional[bool] = typer.Option(None, "--color/--no-color", help="Colour conflicts (default: on a terminal)."),
    values: List[str] = VALUES_OPTION,
    set_values: List[str] = SET_VALUES_OPTION,
    set_strings: List[str] = SET_STRINGS_OPTION,
    release_name: Optional[str] = RELEASE_NAME_OPTION,
    namespace: Optional[str] = NAMESPACE_OPTION,
    helm_binary: Optional[str] = HELM_BINARY_OPTION,
    jobs: int = JOBS_OPTION,
) -> None:
    """Show the host ports each node must give: hostPort, hostNetwork and nodePort claims, conflicts marked."""
    from kubelint_ports.engine import load_cluster
    from kubelint_ports.portmap import build_port_map, write_json, write_text
    from kubelint_ports.settings import CommandLine

    settings = run_settings(CommandLine(
        paths=tuple(paths or ()), config=config, nodes=tuple(nodes), cluster=tuple(cluster),
        helm=dict(values=tuple(values), set=tuple(set_values), set_string=tuple(set_strings),
                  release_name=release_name, namespace=namespace, helm_binary=helm_binary)))
    model, _, diagnostics = load_cluster(settings.paths, dataclasses.replace(settings.options, jobs=jobs))
    for diagnostic in diagnostics:
        typer.echo(f"{diagnostic.location}: input-error {diagnostic.message}", err=True)
    port_map = build_port_map(model)
    if output_format is PortsFormat.json:
        write_json(port_map, sys.stdout)
    else:
        write_text(port_map, sys.stdout, color if color is not None else sys.stdout.isatty())
    raise typer.Exit(EXIT_USAGE if diagnostics else EXIT_CLEAN)


def main() -> None:
    app()
