"""The `kubelint-ports` command line: lint, rules, explain."""

from __future__ import annotations

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


class ProxyMode(str, enum.Enum):
    ipvs = "ipvs"
    iptables = "iptables"
    nftables = "nftables"


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


def helm_options(values: List[str], set_values: List[str], set_strings: List[str], release_name: Optional[str],
                 namespace: Optional[str], kube_version: Optional[str], helm_binary: Optional[str],
                 chart_root: Optional[str]):
    """The Helm options, or None when none is given (the Helm module is then never imported)."""
    if not any((values, set_values, set_strings, release_name, namespace, kube_version, helm_binary, chart_root)):
        return None
    if chart_root is not None and not Path(chart_root, "Chart.yaml").is_file():
        raise typer.BadParameter(f"{chart_root!r} is not a chart directory (no Chart.yaml)", param_hint="--chart-root")
    from kubelint_ports.loading.helm import HelmOptions

    return HelmOptions(values=tuple(values), set=tuple(set_values), set_string=tuple(set_strings),
                       release_name=release_name, namespace=namespace, kube_version=kube_version,
                       helm_binary=helm_binary, chart_root=chart_root)


def parse_port_range(text: str) -> tuple[int, int]:
    try:
        low_text, high_text = text.split("-")
        low, high = int(low_text), int(high_text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a range like 30000-32767") from None
    if not 1 <= low <= high <= 65535:
        raise typer.BadParameter(f"{text!r} is not a range of ports within 1-65535")
    return low, high


@app.command()
def lint(
    paths: List[str] = typer.Argument(..., help="Manifest files, directories (recursive: *.yaml, *.yml, *.json; "
                                                 "a directory with Chart.yaml is rendered as a Helm chart) "
                                                 "or - for standard input."),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--format", help="Report format."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report to this file."),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on",
                                   help="Exit 1 when a finding has this severity or higher."),
    node_port_range: Optional[str] = typer.Option(None, "--node-port-range", metavar="LOW-HIGH",
                                                  help="The cluster's node-port range [default: 30000-32767]."),
    color: Optional[bool] = typer.Option(None, "--color/--no-color",
                                         help="Colour text output [default: when writing to a terminal]."),
    nodes: List[str] = typer.Option([], "--nodes", metavar="FILE",
                                    help="Node inventory: the output of `kubectl get nodes -o yaml` (repeatable)."),
    cluster: List[str] = typer.Option([], "--cluster", metavar="FILE",
                                      help="Objects already running: `kubectl get pods,svc,ds,deploy -A -o yaml` "
                                           "(repeatable)."),
    proxy_mode: Optional[ProxyMode] = typer.Option(None, "--proxy-mode",
                                                   help="kube-proxy mode, when the inputs do not say."),
    service_cidr: Optional[str] = typer.Option(None, "--service-cidr", metavar="CIDR[,CIDR]",
                                               help="The cluster's Service CIDR, when the inputs do not say."),
    pod_cidr: Optional[str] = typer.Option(None, "--pod-cidr", metavar="CIDR[,CIDR]",
                                           help="The cluster's pod CIDR, when the inputs do not say."),
    show_suppressed: bool = typer.Option(False, "--show-suppressed", help="Show suppressed findings in text output."),
    sarif_category: str = typer.Option("", "--sarif-category", help="SARIF automationDetails.id (a category)."),
    values: List[str] = typer.Option([], "--values", "-f", metavar="FILE", rich_help_panel="Helm charts",
                                     help="Values file for the charts linted (repeatable; later files win)."),
    set_values: List[str] = typer.Option([], "--set", metavar="KEY=VALUE", rich_help_panel="Helm charts",
                                         help="Set chart values like `helm --set` (repeatable)."),
    set_strings: List[str] = typer.Option([], "--set-string", metavar="KEY=VALUE", rich_help_panel="Helm charts",
                                          help="Set chart values as strings like `helm --set-string` (repeatable)."),
    release_name: Optional[str] = typer.Option(None, "--release-name", rich_help_panel="Helm charts",
                                               help="Release name for the charts (default: the chart's name)."),
    namespace: Optional[str] = typer.Option(None, "--namespace", rich_help_panel="Helm charts",
                                            help="Release namespace for the charts (default: Helm's, `default`)."),
    kube_version: Optional[str] = typer.Option(None, "--kube-version", metavar="VERSION", rich_help_panel="Helm charts",
                                               help="Kubernetes version the charts see (.Capabilities.KubeVersion)."),
    helm_binary: Optional[str] = typer.Option(None, "--helm-binary", metavar="PATH", rich_help_panel="Helm charts",
                                              help="Render charts with `PATH template` instead of the embedded engine."),
    chart_root: Optional[str] = typer.Option(None, "--chart-root", metavar="DIR", rich_help_panel="Helm charts",
                                             help="The chart that `helm template` output (on stdin or in a file) "
                                                  "came from, to report template lines (default: the current "
                                                  "directory or ./CHART_NAME)."),
) -> None:
    """Lint Kubernetes manifests and Helm charts for port-allocation mistakes."""
    from kubelint_ports.engine import LintOptions, lint_paths
    from kubelint_ports.findings import Severity
    from kubelint_ports.formatters import FormatOptions, get_formatter
    from kubelint_ports.model import ClusterFacts

    facts = ClusterFacts(node_port_range=parse_port_range(node_port_range) if node_port_range else None,
                         proxy_mode=proxy_mode.value if proxy_mode else None,
                         service_cidr=service_cidr, pod_cidr=pod_cidr)
    options = LintOptions(facts=facts, node_files=tuple(nodes), cluster_files=tuple(cluster),
                          helm=helm_options(values, set_values, set_strings, release_name, namespace, kube_version,
                                            helm_binary, chart_root))
    report = lint_paths(paths, options)
    stream = open(output, "w", encoding="utf-8", newline="\n") if output else sys.stdout
    try:
        use_color = color if color is not None else (output is None and sys.stdout.isatty())
        get_formatter(output_format.value)(
            report, stream, FormatOptions(color=use_color and output_format is OutputFormat.text,
                                          show_suppressed=show_suppressed, sarif_category=sarif_category))
    finally:
        if output:
            stream.close()
    if report.diagnostics:
        raise typer.Exit(EXIT_USAGE)
    if fail_on is not FailOn.never:
        threshold = Severity.parse(fail_on.value)
        if any(f.severity >= threshold and not f.suppressed for f in report.findings):
            raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(EXIT_CLEAN)


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
    paths: List[str] = typer.Argument(..., help="Manifest files, directories or - for standard input."),
    nodes: List[str] = typer.Option([], "--nodes", metavar="FILE", help="Node inventory (`kubectl get nodes -o yaml`)."),
    cluster: List[str] = typer.Option([], "--cluster", metavar="FILE", help="Objects already running."),
    output_format: PortsFormat = typer.Option(PortsFormat.text, "--format", help="Table format."),
    color: Optional[bool] = typer.Option(None, "--color/--no-color", help="Colour conflicts [default: on a terminal]."),
    values: List[str] = typer.Option([], "--values", "-f", metavar="FILE", rich_help_panel="Helm charts",
                                     help="Values file for the charts linted (repeatable; later files win)."),
    set_values: List[str] = typer.Option([], "--set", metavar="KEY=VALUE", rich_help_panel="Helm charts",
                                         help="Set chart values like `helm --set` (repeatable)."),
    set_strings: List[str] = typer.Option([], "--set-string", metavar="KEY=VALUE", rich_help_panel="Helm charts",
                                          help="Set chart values as strings like `helm --set-string` (repeatable)."),
    release_name: Optional[str] = typer.Option(None, "--release-name", rich_help_panel="Helm charts",
                                               help="Release name for the charts (default: the chart's name)."),
    namespace: Optional[str] = typer.Option(None, "--namespace", rich_help_panel="Helm charts",
                                            help="Release namespace for the charts (default: Helm's, `default`)."),
    kube_version: Optional[str] = typer.Option(None, "--kube-version", metavar="VERSION", rich_help_panel="Helm charts",
                                               help="Kubernetes version the charts see (.Capabilities.KubeVersion)."),
    helm_binary: Optional[str] = typer.Option(None, "--helm-binary", metavar="PATH", rich_help_panel="Helm charts",
                                              help="Render charts with `PATH template` instead of the embedded engine."),
    chart_root: Optional[str] = typer.Option(None, "--chart-root", metavar="DIR", rich_help_panel="Helm charts",
                                             help="The chart that `helm template` output (on stdin or in a file) "
                                                  "came from, to report template lines (default: the current "
                                                  "directory or ./CHART_NAME)."),
) -> None:
    """Show the host ports each node must give: hostPort, hostNetwork and nodePort claims, conflicts marked."""
    from kubelint_ports.engine import LintOptions, load_cluster
    from kubelint_ports.portmap import build_port_map, write_json, write_text

    options = LintOptions(node_files=tuple(nodes), cluster_files=tuple(cluster),
                          helm=helm_options(values, set_values, set_strings, release_name, namespace, kube_version,
                                            helm_binary, chart_root))
    model, _, diagnostics = load_cluster(paths, options)
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
