"""What a run does, from the command line over the configuration file over the policy defaults."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from kubelint_ports.config import Config, apply_rules, load_config
from kubelint_ports.engine import LintOptions
from kubelint_ports.loading import budgets
from kubelint_ports.model import ClusterFacts
from kubelint_ports.policies import Policy, policies_with

DEFAULT_PATHS = (".",)
HELM_FIELDS = ("values", "set", "set_string", "release_name", "namespace", "kube_version", "helm_binary",
               "chart_root")


@dataclass(frozen=True)
class CommandLine:
    """The options as typed: None or empty when not given, so the config file can fill them."""

    paths: tuple[str, ...] = ()
    config: str | None = None
    fail_on: str | None = None
    node_port_range: str | None = None
    proxy_mode: str | None = None
    service_cidr: str | None = None
    pod_cidr: str | None = None
    nodes: tuple[str, ...] = ()
    cluster: tuple[str, ...] = ()
    policies: tuple[str, ...] = ()
    baseline: str | None = None
    scope: str = "all"
    helm: dict[str, Any] = field(default_factory=dict)  # HelmOptions fields given on the command line
    limits: tuple[str, ...] = ()  # --limit NAME=VALUE


@dataclass(frozen=True)
class Settings:
    paths: tuple[str, ...]
    options: LintOptions
    policies: tuple[Policy, ...]
    fail_on: str
    config: Config


def parse_port_range(text: str) -> tuple[int, int]:
    try:
        low_text, high_text = text.split("-")
        low, high = int(low_text), int(high_text)
    except ValueError:
        raise ValueError(f"{text!r} is not a range like 30000-32767") from None
    if not 1 <= low <= high <= 65535:
        raise ValueError(f"{text!r} is not a range of ports within 1-65535")
    return low, high


def resolve(command: CommandLine) -> Settings:
    """Raises ConfigError, PolicyError, BaselineError or ValueError (a bad option) with a clear text."""
    command_limits = parse_limit_options(command.limits)
    with budgets.applied(budgets.parse_limits(command_limits)):
        config = load_config(command.config)
    try:
        limits = budgets.parse_limits({**(config.get("limits") or {}), **command_limits})
    except ValueError as error:
        raise config.error(["limits"], str(error)) from None
    with budgets.applied(limits):
        return resolve_within(command, config, limits)


def parse_limit_options(pairs: tuple[str, ...]) -> dict[str, str]:
    """`--limit max-depth=300` options as a mapping (checked by `budgets.parse_limits`)."""
    given = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals:
            raise ValueError(f"--limit {pair!r} is not NAME=VALUE (names: {', '.join(budgets.limit_names())})")
        given[name.strip()] = value.strip()
    budgets.parse_limits(given)
    return given


def resolve_within(command: CommandLine, config: Config, limits: budgets.Limits) -> Settings:

    def pick(option: Any, key: str) -> Any:
        return option if option not in (None, (), "") else config.get(key)

    node_port_range = None
    if command.node_port_range:
        node_port_range = parse_port_range(command.node_port_range)
    elif config.get("node-port-range"):
        try:
            node_port_range = parse_port_range(config.get("node-port-range"))
        except ValueError as error:
            raise config.error(["node-port-range"], str(error)) from None
    facts = ClusterFacts(node_port_range=node_port_range, proxy_mode=pick(command.proxy_mode, "proxy-mode"),
                         service_cidr=pick(command.service_cidr, "service-cidr"),
                         pod_cidr=pick(command.pod_cidr, "pod-cidr"))
    policies = policies_with([*config.paths("policies"), *command.policies])
    policies = apply_rules(policies, config)
    if command.scope == "object":
        from kubelint_ports.checks import CHECKS

        policies = [p for p in policies if not CHECKS[p.check].cross_object]
    baseline_file = command.baseline or (config.resolve(config.get("baseline")) if config.get("baseline") else None)
    baseline = frozenset()
    if baseline_file:
        from kubelint_ports.suppressions import read_baseline

        baseline = read_baseline(baseline_file)
    helm, chart_helm = helm_options(command.helm, config)
    options = LintOptions(
        facts=facts,
        node_files=tuple(command.nodes) or tuple(config.paths("nodes")),
        cluster_files=tuple(command.cluster) or tuple(config.paths("cluster")),
        helm=helm,
        chart_helm=chart_helm,
        exclude=config.excluded if config.get("exclude") else None,
        exemptions=config.exemptions,
        baseline=baseline,
        limits=limits,
    )
    paths = tuple(command.paths) or tuple(config.paths("paths")) or DEFAULT_PATHS
    return Settings(paths, options, tuple(policies), command.fail_on or config.get("fail-on") or "error", config)


def helm_options(given: dict[str, Any], config: Config):
    """Global Helm options from the command line, and per-chart ones from the config's `charts:`
    (the command line's fields win there too). Nothing Helm is imported when neither has any."""
    given = {key: value for key, value in given.items() if value not in (None, (), "")}
    charts = config.get("charts") or []
    if not given and not charts:
        return None, ()
    from kubelint_ports.loading.helm import HelmOptions

    if given.get("chart_root") and not os.path.isfile(os.path.join(given["chart_root"], "Chart.yaml")):
        raise ValueError(f"--chart-root {given['chart_root']!r} is not a chart directory (no Chart.yaml)")
    defaults = HelmOptions(**given) if given else None
    per_chart = []
    for index, chart in enumerate(charts):
        path = config.resolve(chart["path"])
        if not os.path.isfile(os.path.join(path, "Chart.yaml")):
            raise config.error(["charts", index, "path"], f"{chart['path']!r} is not a chart directory (no Chart.yaml)")
        from_config = {
            "values": tuple(config.resolve(v) for v in chart.get("values", ())),
            "set": tuple(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in chart.get("set", {}).items()),
            "set_string": tuple(f"{k}={v}" for k, v in chart.get("set-string", {}).items()),
            "release_name": chart.get("release-name"),
            "namespace": chart.get("namespace"),
            "kube_version": chart.get("kube-version"),
        }
        per_chart.append((os.path.abspath(path), HelmOptions(**{**from_config, **given})))
    return defaults, tuple(per_chart)


def effective(settings: Settings) -> dict[str, Any]:
    """The configuration a run uses, for `kubelint-ports config`."""
    from kubelint_ports.policies import builtin_policy_dir

    options = settings.options
    facts = options.facts
    builtin = str(builtin_policy_dir())
    return {
        "config-file": settings.config.path or None,
        "paths": list(settings.paths),
        "exclude": settings.config.get("exclude", []),
        "fail-on": settings.fail_on,
        "node-port-range": "{}-{}".format(*(facts.node_port_range or (30000, 32767))),
        "proxy-mode": facts.proxy_mode,
        "service-cidr": facts.service_cidr,
        "pod-cidr": facts.pod_cidr,
        "nodes": list(options.node_files),
        "cluster": list(options.cluster_files),
        "charts": [{"path": os.path.relpath(path), **{k: v for k, v in dataclasses.asdict(helm).items()
                                                     if v not in (None, (), False)}}
                   for path, helm in options.chart_helm],
        "baseline": len(options.baseline),
        "exemptions": [dataclasses.asdict(e) for e in options.exemptions],
        "limits": {name.replace("_", "-"): value for name, value in dataclasses.asdict(options.limits).items()},
        "rules": {p.id: {"name": p.name, "severity": str(p.severity), **({"params": p.params} if p.params else {}),
                         **({"source": p.path} if not p.path.startswith(builtin) else {})}
                  for p in settings.policies},
    }
