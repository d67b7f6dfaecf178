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
    paths: List[str] = typer.Argument(..., help="Manifest files, directories (recursive: *.yaml, *.yml, *.json) "
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
) -> None:
    """Lint Kubernetes manifests for port-allocation mistakes."""
    from kubelint_ports.engine import LintOptions, lint_paths
    from kubelint_ports.findings import Severity
    from kubelint_ports.formatters import FormatOptions, get_formatter
    from kubelint_ports.model import ClusterFacts

    facts = ClusterFacts(node_port_range=parse_port_range(node_port_range) if node_port_range else None,
                         proxy_mode=proxy_mode.value if proxy_mode else None,
                         service_cidr=service_cidr, pod_cidr=pod_cidr)
    options = LintOptions(facts=facts, node_files=tuple(nodes), cluster_files=tuple(cluster))
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
) -> None:
    """Show the host ports each node must give: hostPort, hostNetwork and nodePort claims, conflicts marked."""
    from kubelint_ports.engine import LintOptions, load_cluster
    from kubelint_ports.portmap import build_port_map, write_json, write_text

    model, _, diagnostics = load_cluster(paths, LintOptions(node_files=tuple(nodes), cluster_files=tuple(cluster)))
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
