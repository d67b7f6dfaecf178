"""The `kubelint-ports` command line: lint, ports, rules, explain, config."""

from __future__ import annotations

import dataclasses
import enum
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from kubelint_ports import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

app = typer.Typer(
    name="kubelint-ports",
    help="Find Kubernetes port-allocation mistakes (hostPort, hostNetwork, NodePort) before they reach a cluster.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


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
        typer.echo(printable(f"kubelint-ports: error: {error}"), err=True)
        raise typer.Exit(EXIT_USAGE) from None


def open_output(path):
    """A report file opened for writing, or exit 2 naming it: a bad -o is a usage error, not a crash."""
    try:
        return open(path, "w", encoding="utf-8", newline="\n")
    except OSError as error:
        typer.echo(printable(f"kubelint-ports: error: cannot write {path}: {error.strerror or error}"), err=True)
        raise typer.Exit(EXIT_USAGE) from None


def check_writable(*paths) -> None:
    """Fail before linting when a report could not be written (a missing directory, a directory)."""
    for path in paths:
        if not path:
            continue
        target = Path(path)
        reason = ("is a directory" if target.is_dir() else
                  "its directory does not exist" if not target.parent.is_dir() else "")
        if reason:
            typer.echo(printable(f"kubelint-ports: error: cannot write {path}: {reason}"), err=True)
            raise typer.Exit(EXIT_USAGE)


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
NODE_PORT_RANGE_OPTION = typer.Option(None, "--node-port-range", metavar="LOW-HIGH", rich_help_panel=CLUSTER,
                                      help="The cluster's node-port range (default: 30000-32767).")
EPHEMERAL_PORT_RANGE_OPTION = typer.Option(None, "--ephemeral-port-range", metavar="LOW-HIGH", rich_help_panel=CLUSTER,
                                           help="The nodes' net.ipv4.ip_local_port_range (default: 32768-60999, "
                                                "Linux's).")
PROXY_MODE_OPTION = typer.Option(None, "--proxy-mode", rich_help_panel=CLUSTER,
                                 help="kube-proxy mode, when the inputs do not say.")
SERVICE_CIDR_OPTION = typer.Option(None, "--service-cidr", metavar="CIDR[,CIDR]", rich_help_panel=CLUSTER,
                                   help="The cluster's Service CIDR, when the inputs do not say.")
POD_CIDR_OPTION = typer.Option(None, "--pod-cidr", metavar="CIDR[,CIDR]", rich_help_panel=CLUSTER,
                               help="The cluster's pod CIDR, when the inputs do not say.")
CONFIG_OPTION = typer.Option(None, "--config", metavar="FILE", rich_help_panel=POLICY,
                             help="Configuration file (default: .kubelint-ports.yaml or pyproject.toml "
                                  "found from the current directory upward).")
POLICIES_OPTION = typer.Option([], "--policies", metavar="DIR", rich_help_panel=POLICY,
                               help="A directory of your own policies (repeatable).")
CNI_PLUGINS_VERSION_OPTION = typer.Option(
    None, "--cni-plugins-version", metavar="VERSION", rich_help_panel=CLUSTER,
    help="containernetworking/plugins release on the nodes (decides portmap's rule order), e.g. 1.1.1.")
KUBE_VERSION_OPTION = typer.Option(None, "--kube-version", metavar="VERSION", rich_help_panel=HELM,
                                   help="Kubernetes version the charts see (.Capabilities.KubeVersion).")
CHART_ROOT_OPTION = typer.Option(None, "--chart-root", metavar="DIR", rich_help_panel=HELM,
                                 help="The chart that `helm template` output (on stdin or in a file) came from, to "
                                      "report template lines (default: the current directory or ./CHART_NAME).")
HELM_BINARY_OPTION = typer.Option(None, "--helm-binary", metavar="PATH", rich_help_panel=HELM,
                           help="Render charts with `PATH template` instead of the embedded engine.")
LIMIT_OPTION = typer.Option([], "--limit", metavar="NAME=VALUE", rich_help_panel=POLICY,
                            help="Raise or lower a budget against hostile input (repeatable): max-depth, max-aliases, "
                                 "max-nodes, max-file-mib, helm-seconds, helm-output-mib, helm-memory-mib, "
                                 "kustomize-seconds, kustomize-memory-mib, kustomize-generators, input-seconds "
                                 "(docs/safety.md, Limits).")
JOBS_OPTION = typer.Option(0, "--jobs", "-j", min=0, metavar="N", show_default=False,
                           help="Processes that read large inputs (default: one per processor; 1: no extra process).")
# Output options `lint` and `node` share.
OUTPUT_OPTION = typer.Option(None, "--output", "-o", help="Write the report to this file.")
REPORTS_OPTION = typer.Option([], "--report", metavar="FORMAT:FILE",
                              help="Also write a report in another format (repeatable), e.g. sarif:out.sarif.")
FAIL_ON_OPTION = typer.Option(None, "--fail-on", show_default=False,
                              help="Exit 1 when a finding has this severity or higher (default: the config's, else "
                                   "error).")
COLOR_OPTION = typer.Option(None, "--color/--no-color",
                            help="Colour text output (default: on a terminal, unless NO_COLOR is set; FORCE_COLOR "
                                 "forces it).")
EXPLAIN_OPTION = typer.Option(False, "--explain", "--verbose", "-v",
                              help="Text: each finding's explanation (who receives the packet), object and related "
                                   "places under its headline.")
QUIET_OPTION = typer.Option(False, "--quiet", "-q", help="Print findings and errors only: no summary, no hints.")
STATISTICS_OPTION = typer.Option(False, "--statistics",
                                 help="Count findings per rule instead of listing them (text and json).")
SELECT_OPTION = typer.Option([], "--select", metavar="RULES", rich_help_panel=POLICY,
                             help="Run only these rules: ids, names or id prefixes (KP2), comma-separated, repeatable "
                                  "(default: the config's `select`, else all).")
IGNORE_OPTION = typer.Option([], "--ignore", metavar="RULES", rich_help_panel=POLICY,
                             help="Do not run these rules (ids, names or id prefixes; comma-separated, repeatable).")
SARIF_CATEGORY_OPTION = typer.Option("", "--sarif-category", help="SARIF automationDetails.id (a category).")


@app.command()
def lint(
    paths: Optional[List[str]] = typer.Argument(None, help=PATHS_HELP, show_default=False),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--format", "--output-format",
                                               help="Report format (--output-format, as ruff names it, too)."),
    output: Optional[Path] = OUTPUT_OPTION,
    reports: List[str] = REPORTS_OPTION,
    fail_on: Optional[FailOn] = FAIL_ON_OPTION,
    color: Optional[bool] = COLOR_OPTION,
    explain_findings: bool = EXPLAIN_OPTION,
    quiet: bool = QUIET_OPTION,
    statistics: bool = STATISTICS_OPTION,
    select: List[str] = SELECT_OPTION,
    ignore: List[str] = IGNORE_OPTION,
    show_suppressed: bool = typer.Option(False, "--show-suppressed", help="Show suppressed findings in text output."),
    sarif_category: str = SARIF_CATEGORY_OPTION,
    link_base: str = typer.Option("", "--link-base", metavar="URL",
                                  help="Markdown reports: link locations under this URL (a blob URL of the commit)."),
    config: Optional[str] = CONFIG_OPTION,
    policies: List[str] = POLICIES_OPTION,
    scope: Scope = typer.Option(Scope.all, "--scope", rich_help_panel=POLICY,
                                help="object: only rules that need no other object (the per-file pre-commit hook)."),
    baseline: Optional[str] = typer.Option(None, "--baseline", metavar="FILE", rich_help_panel=POLICY,
                                           help="Report only findings not recorded in this baseline."),
    write_baseline: Optional[str] = typer.Option(None, "--write-baseline", metavar="FILE", rich_help_panel=POLICY,
                                                 help="Record today's findings as the baseline and exit 0."),
    node_port_range: Optional[str] = NODE_PORT_RANGE_OPTION,
    ephemeral_port_range: Optional[str] = EPHEMERAL_PORT_RANGE_OPTION,
    nodes: List[str] = NODES_OPTION,
    cluster: List[str] = CLUSTER_OPTION,
    proxy_mode: Optional[ProxyMode] = PROXY_MODE_OPTION,
    service_cidr: Optional[str] = SERVICE_CIDR_OPTION,
    pod_cidr: Optional[str] = POD_CIDR_OPTION,
    cni_plugins_version: Optional[str] = CNI_PLUGINS_VERSION_OPTION,
    values: List[str] = VALUES_OPTION,
    set_values: List[str] = SET_VALUES_OPTION,
    set_strings: List[str] = SET_STRINGS_OPTION,
    release_name: Optional[str] = RELEASE_NAME_OPTION,
    namespace: Optional[str] = NAMESPACE_OPTION,
    kube_version: Optional[str] = KUBE_VERSION_OPTION,
    helm_binary: Optional[str] = HELM_BINARY_OPTION,
    chart_root: Optional[str] = CHART_ROOT_OPTION,
    limits: List[str] = LIMIT_OPTION,
    jobs: int = JOBS_OPTION,
) -> None:
    """Lint Kubernetes manifests and Helm charts for port-allocation mistakes."""
    from kubelint_ports.engine import lint_paths
    from kubelint_ports.formatters import FormatOptions
    from kubelint_ports.settings import CommandLine

    extra_reports = [parse_report(text) for text in reports]
    if statistics and output_format not in (OutputFormat.text, OutputFormat.concise, OutputFormat.json):
        raise typer.BadParameter("works with --format text or json", param_hint="--statistics")
    check_writable(output, write_baseline, *(path for _, path in extra_reports))
    settings = run_settings(CommandLine(
        paths=tuple(paths or ()), config=config, fail_on=fail_on.value if fail_on else None,
        node_port_range=node_port_range, proxy_mode=proxy_mode.value if proxy_mode else None,
        service_cidr=service_cidr, pod_cidr=pod_cidr, cni_plugins_version=cni_plugins_version,
        nodes=tuple(nodes), cluster=tuple(cluster), policies=tuple(policies), baseline=baseline, scope=scope.value,
        writing_baseline=bool(write_baseline),
        ephemeral_port_range=ephemeral_port_range,
        helm=dict(values=tuple(values), set=tuple(set_values), set_string=tuple(set_strings),
                  release_name=release_name, namespace=namespace, kube_version=kube_version,
                  helm_binary=helm_binary, chart_root=chart_root),
        select=tuple(select), ignore=tuple(ignore), limits=tuple(limits)))
    if getattr(settings.options.baseline, "version", None) == 1 and not quiet:
        typer.echo(f"kubelint-ports: note: {baseline or settings.config.get('baseline')} is a version 1 baseline "
                   "(its keys count list items, so a new sidecar breaks them); rewrite it with --write-baseline",
                   err=True)
    report = lint_paths(settings.paths, dataclasses.replace(settings.options, jobs=jobs), policies=settings.policies)
    echo_notes(report.notes)
    from kubelint_ports.loading import EMPTY_STDIN

    # Said once where the user looks: the text report on the terminal says it already; a report
    # written to a file or read by a machine (SARIF, JSON) gets the warning on stderr too.
    terminal_text = output is None and output_format in (OutputFormat.text, OutputFormat.concise)
    if any(d.message == EMPTY_STDIN for d in report.diagnostics) and not terminal_text:
        typer.echo(f"kubelint-ports: warning: {EMPTY_STDIN}", err=True)
    from kubelint_ports.sourceroot import find_source_root

    format_options = FormatOptions(show_suppressed=show_suppressed, sarif_category=sarif_category, link_base=link_base,
                                   source_root=find_source_root(settings.config.path), quiet=quiet)
    write_reports(report, output_format, output, extra_reports, format_options, color=color,
                  explain=explain_findings, statistics=statistics)
    if write_baseline and not report.diagnostics:
        from kubelint_ports.suppressions import write_baseline as record

        try:
            count = record(report.findings, write_baseline)
        except OSError as error:
            typer.echo(printable(f"kubelint-ports: error: cannot write {write_baseline}: {error.strerror or error}"),
                       err=True)
            raise typer.Exit(EXIT_USAGE) from None
        if not quiet:
            typer.echo(f"kubelint-ports: wrote {count} findings to the baseline {write_baseline}", err=True)
        raise typer.Exit(EXIT_CLEAN)
    raise typer.Exit(exit_code(report, settings.fail_on))


@app.command("config")
def show_config(
    paths: Optional[List[str]] = typer.Argument(None, show_default=False,
                                                help="Also read these inputs and show the datapath facts they "
                                                     "state, with their sources."),
    config: Optional[str] = typer.Option(None, "--config", metavar="FILE", help="Configuration file."),
    policies: List[str] = typer.Option([], "--policies", metavar="DIR", help="A directory of your own policies."),
    nodes: List[str] = NODES_OPTION,
    cluster: List[str] = CLUSTER_OPTION,
    proxy_mode: Optional[ProxyMode] = typer.Option(None, "--proxy-mode", rich_help_panel=CLUSTER,
                                                   help="kube-proxy mode, when the inputs do not say."),
    cni_plugins_version: Optional[str] = CNI_PLUGINS_VERSION_OPTION,
) -> None:
    """Print the effective configuration: the config file over the policy defaults."""
    import yaml

    from kubelint_ports.settings import CommandLine, effective

    settings = run_settings(CommandLine(paths=tuple(paths or ()), config=config, policies=tuple(policies),
                                        nodes=tuple(nodes), cluster=tuple(cluster),
                                        proxy_mode=proxy_mode.value if proxy_mode else None,
                                        cni_plugins_version=cni_plugins_version))
    data = effective(settings)
    if paths or nodes or cluster:
        from kubelint_ports.engine import load_cluster
        from kubelint_ports.model.datapath import facts_table

        model, _, diagnostics = load_cluster(settings.paths, settings.options)
        for diagnostic in diagnostics:
            typer.echo(f"{diagnostic.location}: input-error {diagnostic.message}", err=True)
        data["facts"] = facts_table(model.datapath.facts)
    typer.echo(yaml.safe_dump(data, sort_keys=False, default_flow_style=False), nl=False)


@app.command()
def rules() -> None:
    """List the rules: id, name, default severity, summary."""
    from kubelint_ports.policies import builtin_policies

    policies = builtin_policies()
    width = max(len(policy.name) for policy in policies)
    for policy in policies:
        off = "" if policy.enabled else " (off by default)"
        typer.echo(f"{policy.id}  {policy.name:<{width}}  {str(policy.severity):<7}  {policy.summary}{off}")


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
    html = "html"


@app.command()
def ports(
    paths: Optional[List[str]] = typer.Argument(None, help=PATHS_HELP, show_default=False),
    output_format: PortsFormat = typer.Option(PortsFormat.text, "--format",
                                              help="text, json, or html: one self-contained page (grid, filters, "
                                                   "the findings beside it)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the map to this file."),
    color: Optional[bool] = typer.Option(None, "--color/--no-color",
                                         help="Colour conflicts (default: on a terminal, unless NO_COLOR is set; "
                                              "FORCE_COLOR forces it)."),
    config: Optional[str] = CONFIG_OPTION,
    policies: List[str] = POLICIES_OPTION,
    node_port_range: Optional[str] = NODE_PORT_RANGE_OPTION,
    ephemeral_port_range: Optional[str] = EPHEMERAL_PORT_RANGE_OPTION,
    nodes: List[str] = NODES_OPTION,
    cluster: List[str] = CLUSTER_OPTION,
    proxy_mode: Optional[ProxyMode] = PROXY_MODE_OPTION,
    service_cidr: Optional[str] = SERVICE_CIDR_OPTION,
    pod_cidr: Optional[str] = POD_CIDR_OPTION,
    cni_plugins_version: Optional[str] = CNI_PLUGINS_VERSION_OPTION,
    values: List[str] = VALUES_OPTION,
    set_values: List[str] = SET_VALUES_OPTION,
    set_strings: List[str] = SET_STRINGS_OPTION,
    release_name: Optional[str] = RELEASE_NAME_OPTION,
    namespace: Optional[str] = NAMESPACE_OPTION,
    kube_version: Optional[str] = KUBE_VERSION_OPTION,
    helm_binary: Optional[str] = HELM_BINARY_OPTION,
    chart_root: Optional[str] = CHART_ROOT_OPTION,
    select: List[str] = SELECT_OPTION,
    ignore: List[str] = IGNORE_OPTION,
    limits: List[str] = LIMIT_OPTION,
    jobs: int = JOBS_OPTION,
) -> None:
    """Show each node's host ports: who holds them (hostPort, hostNetwork, nodePort, node daemon) and
    what `lint` finds there; conflicts and captures are marked with their rule."""
    from kubelint_ports.engine import lint_paths
    from kubelint_ports.portmap import port_map_of, write_json, write_text
    from kubelint_ports.settings import CommandLine

    check_writable(output)
    settings = run_settings(CommandLine(
        paths=tuple(paths or ()), config=config, node_port_range=node_port_range,
        proxy_mode=proxy_mode.value if proxy_mode else None, service_cidr=service_cidr, pod_cidr=pod_cidr,
        cni_plugins_version=cni_plugins_version, ephemeral_port_range=ephemeral_port_range, nodes=tuple(nodes),
        cluster=tuple(cluster), policies=tuple(policies),
        helm=dict(values=tuple(values), set=tuple(set_values), set_string=tuple(set_strings),
                  release_name=release_name, namespace=namespace, kube_version=kube_version,
                  helm_binary=helm_binary, chart_root=chart_root),
        select=tuple(select), ignore=tuple(ignore), limits=tuple(limits)))
    # The whole lint run: the map shows its model and its findings, so the two cannot disagree.
    report = lint_paths(settings.paths, dataclasses.replace(settings.options, jobs=jobs), policies=settings.policies)
    echo_notes(report.notes)
    for diagnostic in report.diagnostics:
        label = "internal-error" if diagnostic.internal else "input-error"
        typer.echo(printable(f"{diagnostic.location}: {label} {diagnostic.message}"), err=True)
    port_map = port_map_of(report)
    stream = open_output(output) if output else sys.stdout
    try:
        if output_format is PortsFormat.json:
            write_json(port_map, stream)
        elif output_format is PortsFormat.html:
            from kubelint_ports.formatters.html import write_page

            write_page(report, port_map, stream, findings_first=False)
        else:
            write_text(port_map, stream, color_wanted(color, stream) if output is None or color else False)
    finally:
        if output:
            stream.close()
    if report.internal_errors:
        raise typer.Exit(EXIT_INTERNAL)
    raise typer.Exit(EXIT_USAGE if report.diagnostics else EXIT_CLEAN)


SNAPSHOT_HELP = ("Snapshot directories, one per node (named after the node), holding any of: iptables-save, "
                 "nft list ruleset [-j], ipvsadm -Sn, ipset list, ss -Htlnup, ip -o addr, grep -r . "
                 "/var/lib/cni/networks/, crictl pods -o json; each file is recognised by its content. Manifest "
                 "files or directories may follow: their Services and pods are compared with the nodes.")


def split_snapshot_paths(paths: List[str]) -> tuple[list[str], list[str]]:
    """Snapshots (directories or files holding a tool's dump) and manifests (everything else)."""
    from kubelint_ports.loading.snapshot import detect

    def dump(path: str) -> bool:
        try:
            with open(path, "rb") as handle:
                head = handle.read(65536).decode("utf-8", "replace")
        except OSError:
            return False
        return detect(head)[0] is not None

    snapshots, manifests = [], []
    for path in paths:
        if os.path.isdir(path):
            entries = [os.path.join(path, e) for e in sorted(os.listdir(path)) if not e.startswith(".")]
            files = [e for e in entries if os.path.isfile(e)]
            is_snapshot = any(dump(e) for e in files) or (files and not any(
                e.endswith((".yaml", ".yml", ".json")) for e in files))
        else:
            is_snapshot = os.path.isfile(path) and dump(path)
        (snapshots if is_snapshot or not os.path.exists(path) and not manifests else manifests).append(path)
    return snapshots, manifests


@app.command("node")
def node_command(
    paths: List[str] = typer.Argument(..., help=SNAPSHOT_HELP, metavar="SNAPSHOT... [MANIFEST...]"),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--format", "--output-format",
                                               help="Report format (--output-format, as ruff names it, too)."),
    output: Optional[Path] = OUTPUT_OPTION,
    reports: List[str] = REPORTS_OPTION,
    fail_on: Optional[FailOn] = FAIL_ON_OPTION,
    color: Optional[bool] = COLOR_OPTION,
    explain_findings: bool = EXPLAIN_OPTION,
    quiet: bool = QUIET_OPTION,
    statistics: bool = STATISTICS_OPTION,
    select: List[str] = SELECT_OPTION,
    ignore: List[str] = IGNORE_OPTION,
    sarif_category: str = SARIF_CATEGORY_OPTION,
    node_name: Optional[str] = typer.Option(None, "--node", metavar="NAME",
                                            help="The node's name when one snapshot is given (default: its directory's name)."),
    config: Optional[str] = typer.Option(None, "--config", metavar="FILE", rich_help_panel=POLICY,
                                         help="Configuration file (rules, severities, exemptions)."),
    nodes: List[str] = NODES_OPTION,
    cluster: List[str] = typer.Option([], "--cluster", metavar="FILE", rich_help_panel=CLUSTER,
                                      help="Pods and Services running: `kubectl get pods,svc -A -o yaml`, or "
                                           "`kubectl get pods -A -o wide` text (repeatable)."),
    service_cidr: Optional[str] = typer.Option(None, "--service-cidr", metavar="CIDR[,CIDR]", rich_help_panel=CLUSTER,
                                               help="The cluster's Service CIDR, when the inputs do not say."),
    pod_cidr: Optional[str] = typer.Option(None, "--pod-cidr", metavar="CIDR[,CIDR]", rich_help_panel=CLUSTER,
                                           help="The cluster's pod CIDR, when the inputs do not say."),
) -> None:
    """Diagnose live nodes from their own dumps: stale or shadowed hostPort DNATs, hostPorts ahead of
    kube-proxy, a missing or wrong masquerade rule, host processes that lose their port, drift."""
    from kubelint_ports.engine import lint_snapshots
    from kubelint_ports.formatters import FormatOptions
    from kubelint_ports.settings import CommandLine

    extra_reports = [parse_report(text) for text in reports]
    if statistics and output_format not in (OutputFormat.text, OutputFormat.concise, OutputFormat.json):
        raise typer.BadParameter("works with --format text or json", param_hint="--statistics")
    check_writable(output, *(path for _, path in extra_reports))
    snapshots, manifests = split_snapshot_paths(paths)
    if not snapshots:
        raise typer.BadParameter("no snapshot among the paths (a directory of dumps from a node)", param_hint="SNAPSHOT")
    if node_name and len(snapshots) > 1:
        raise typer.BadParameter("--node names one snapshot; several were given", param_hint="--node")
    settings = run_settings(CommandLine(
        config=config, fail_on=fail_on.value if fail_on else None, service_cidr=service_cidr, pod_cidr=pod_cidr,
        nodes=tuple(nodes), cluster=tuple(cluster), select=tuple(select), ignore=tuple(ignore)))
    report = lint_snapshots(snapshots, manifests, settings.options, node=node_name, policies=settings.policies)
    format_options = FormatOptions(sarif_category=sarif_category, quiet=quiet)
    write_reports(report, output_format, output, extra_reports, format_options, color=color,
                  explain=explain_findings, statistics=statistics)
    raise typer.Exit(exit_code(report, settings.fail_on))


def write_reports(report, output_format: "OutputFormat", output: Optional[Path], extra_reports, format_options, *,
                  color: Optional[bool], explain: bool, statistics: bool) -> None:
    """The `--report FORMAT:FILE` files, then the main report to `--output` or standard output."""
    from kubelint_ports.formatters import get_formatter

    for kind, path in extra_reports:
        with open_output(path) as stream:
            get_formatter(kind)(report, stream, format_options)
    stream = open_output(output) if output else sys.stdout
    try:
        use_color = color if color is not None else (output is None and color_wanted(None, stream))
        get_formatter(output_format.value)(report, stream, dataclasses.replace(
            format_options, color=use_color and output_format in (OutputFormat.text, OutputFormat.concise),
            explain=explain,
            statistics=statistics))
    finally:
        if output:
            stream.close()


def exit_code(report, fail_on: str) -> int:
    """3 for an internal error, 2 for input errors, 1 for a standing finding at or above
    `fail_on`, else 0: a crash never reads as findings, nor bad input as a clean run."""
    from kubelint_ports.findings import Severity

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
        typer.echo(printable(f"kubelint-ports: note: {note}"), err=True)


def printable(text: str) -> str:
    from kubelint_ports.formatters import printable as escape

    return escape(text)


def main() -> None:
    """Run the app and exit with its code.

    Exit codes: 0 clean, 1 findings (per --fail-on), 2 input or usage errors, 3 an internal
    error (a bug): an unexpected exception is never mistaken for findings."""
    try:
        # Not click's standalone mode: it exits 1 (the findings code) for an EOFError from anywhere,
        # for Ctrl-C and for a closed pipe.
        result = app(standalone_mode=False)
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


def is_a(error: BaseException, name: str) -> bool:
    """Click's exception classes by name: typer 0.2x vendors its own copy of click."""
    return any(klass.__name__ == name for klass in type(error).__mro__)


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
