"""What a run does, from the command line over the configuration file over the policy defaults."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from kubelint_ports.config import Config, apply_rules, load_config
from kubelint_ports.engine import LintOptions
from kubelint_ports.loading import budgets
from kubelint_ports.loading.workload_kinds import ONE_PER_NODE
from kubelint_ports.model import ClusterFacts
from kubelint_ports.model.build import custom_workload_kinds
from kubelint_ports.model.objects import DEFAULT_EPHEMERAL_PORT_RANGE
from kubelint_ports.model.objects import PodTemplateKind
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
    ephemeral_port_range: str | None = None
    proxy_mode: str | None = None
    service_cidr: str | None = None
    pod_cidr: str | None = None
    cni_plugins_version: str | None = None
    nodes: tuple[str, ...] = ()
    cluster: tuple[str, ...] = ()
    policies: tuple[str, ...] = ()
    baseline: str | None = None
    writing_baseline: bool = False  # --write-baseline: record every finding, whatever baseline is configured
    scope: str = "all"
    helm: dict[str, Any] = field(default_factory=dict)  # HelmOptions fields given on the command line
    select: tuple[str, ...] = ()  # --select: rule ids, names or id prefixes (comma-separated allowed)
    ignore: tuple[str, ...] = ()  # --ignore: likewise
    limits: tuple[str, ...] = ()  # --limit NAME=VALUE


@dataclass(frozen=True)
class Settings:
    paths: tuple[str, ...]
    options: LintOptions
    policies: tuple[Policy, ...]
    fail_on: str
    config: Config
    baseline_file: str | None = None


def parse_port_range(text: str) -> tuple[int, int]:
    try:
        low_text, high_text = text.split("-")
        low, high = int(low_text), int(high_text)
    except ValueError:
        raise ValueError(f"{text!r} is not a range like 30000-32767") from None
    if not 1 <= low <= high <= 65535:
        raise ValueError(f"{text!r} is not a range of ports within 1-65535")
    return low, high


def port_range_fact(option: str | None, config: Config, key: str) -> tuple[int, int] | None:
    """A LOW-HIGH fact from its option, else from the config file (an error there names the line)."""
    if option:
        return parse_port_range(option)
    if config.get(key):
        try:
            return parse_port_range(config.get(key))
        except ValueError as error:
            raise config.error([key], str(error)) from None
    return None


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

    facts = ClusterFacts(node_port_range=port_range_fact(command.node_port_range, config, "node-port-range"),
                         proxy_mode=pick(command.proxy_mode, "proxy-mode"),
                         service_cidr=pick(command.service_cidr, "service-cidr"),
                         pod_cidr=pick(command.pod_cidr, "pod-cidr"), stated=stated_facts(command, config),
                         ephemeral_port_range=port_range_fact(command.ephemeral_port_range, config,
                                                              "ephemeral-port-range"),
                         pod_templates=pod_templates(config))
    for key, given in (("paths", command.paths), ("nodes", command.nodes), ("cluster", command.cluster)):
        if not given:
            check_config_paths(config, key)
    known = policies_with([*config_paths(config, "policies"), *command.policies])
    policies = selected_policies(known, apply_rules(known, config), command, config)
    if command.scope == "object":
        from kubelint_ports.checks import cross_object_of  # knows without importing every check

        policies = [p for p in policies if not cross_object_of(p.check)]
    baseline_file = command.baseline or (config.inside(["baseline"], config.get("baseline"), OPTIONS["baseline"])
                                         if config.get("baseline") else None)
    baseline = frozenset()
    if baseline_file and not command.writing_baseline:
        from kubelint_ports.suppressions import read_baseline

        baseline = read_baseline(baseline_file)
    helm, chart_helm = helm_options(command.helm, config)
    options = LintOptions(
        facts=facts,
        node_files=tuple(command.nodes) or tuple(config_paths(config, "nodes")),
        cluster_files=tuple(command.cluster) or tuple(config_paths(config, "cluster")),
        helm=helm,
        chart_helm=chart_helm,
        exclude=config.excluded if config.get("exclude") else None,
        exemptions=config.exemptions,
        baseline=baseline,
        limits=limits,
        units=unit_rules(config),
    )
    paths = tuple(command.paths) or tuple(config_paths(config, "paths")) or DEFAULT_PATHS
    return Settings(paths, options, tuple(policies), command.fail_on or config.get("fail-on") or "error", config,
                    baseline_file)


# How to read a file outside the repository anyway: the command line is the user's own choice.
OPTIONS = {"paths": "name it on the command line", "nodes": "pass it with --nodes",
           "cluster": "pass it with --cluster", "policies": "pass it with --policies",
           "baseline": "pass it with --baseline", "charts": "name the chart on the command line",
           "values": "pass it with --values"}


def unit_rules(config: Config):
    """The config's `units:` (name -> paths relative to the config file), for model.units."""
    from kubelint_ports.model.units import UnitRules

    configured = tuple((str(name), tuple(str(path) for path in paths or ()))
                       for name, paths in (config.get("units") or {}).items())
    return UnitRules(configured, root=str(config.base_dir)) if configured else UnitRules()


def config_paths(config: Config, key: str) -> list[str]:
    """The config's list of paths under `key`, resolved, each inside the repository."""
    return [config.inside([key, index], path, OPTIONS[key]) for index, path in enumerate(config.get(key) or [])]


def check_config_paths(config: Config, key: str) -> None:
    """A path the config file names must stay inside the repository and exist: the error points
    at its line."""
    for index, path in enumerate(config.get(key) or []):
        if not os.path.exists(config.inside([key, index], path, OPTIONS[key])):
            raise config.error([key, index], f"no such file or directory {path!r}")


def split_references(values) -> list[str]:
    return [token.strip() for value in values for token in str(value).split(",") if token.strip()]


def selected_policies(known: list[Policy], active: list[Policy], command: CommandLine,
                      config: Config) -> list[Policy]:
    """ruff's `select`/`ignore`: the command line's `--select` replaces the config's `select:`
    (default: every rule that is on), then every `ignore` of both is removed. References are
    checked against every known rule, off ones included: ignoring a rule that is off does nothing,
    and selecting one by its id or name turns it on. A prefix (`KP5`, `all`) takes only the rules
    that are on. An unknown rule is an error."""
    from kubelint_ports.policies import find_policy, matching_policies, rule_suggestion

    on = {policy.id: policy for policy in active}

    def chosen(references, where, turn_on: bool = False) -> set[str]:
        ids = set()
        for index, reference in enumerate(references):
            matched = matching_policies(reference, known)
            if not matched:
                message = (f"unknown rule or rule prefix {reference!r}{rule_suggestion(reference, known)} "
                           f"(see `kubelint-ports rules`)")
                if where is None:
                    raise ValueError(message)
                raise config.error([where, index], message)
            named = turn_on and find_policy(reference.strip(), known) is not None
            ids.update(policy.id for policy in matched if policy.id in on or named)
        return ids

    if command.select:
        selected = chosen(split_references(command.select), None, turn_on=True)
    elif config.get("select") is not None:
        selected = chosen(config.get("select"), "select", turn_on=True)
    else:
        selected = set(on)
    selected -= chosen(config.get("ignore") or [], "ignore")
    selected -= chosen(split_references(command.ignore), None)
    return [on.get(policy.id) or dataclasses.replace(policy, enabled=True)
            for policy in known if policy.id in selected]


def stated_facts(command: CommandLine, config: Config) -> tuple[tuple[str, Any, str], ...]:
    """Datapath facts the user states, each with where: the command line wins over the config."""
    where = config.path or "the configuration"
    stated: dict[str, tuple[str, Any, str]] = {}
    for name, value in (config.get("facts") or {}).items():
        stated[name] = (name, value, f"{where} facts.{name}")
    if config.get("proxy-mode"):
        stated["proxy-mode"] = ("proxy-mode", config.get("proxy-mode"), f"{where} proxy-mode")
    for name, value in (("proxy-mode", command.proxy_mode), ("cni-plugins-version", command.cni_plugins_version)):
        if value:
            stated[name] = (name, value, f"--{name}")
    if "cni-plugins-version" in stated:
        from kubelint_ports.model.datapath import parse_version

        if parse_version(stated["cni-plugins-version"][1]) is None:
            raise ValueError(f"{stated['cni-plugins-version'][2]}: {stated['cni-plugins-version'][1]!r} is not a "
                             f"version like 1.1.1")
    return tuple(stated[name] for name in sorted(stated))


def pod_templates(config: Config) -> tuple[PodTemplateKind, ...]:
    """The config's `pod-templates`: `group/Kind: path` or `{template, replicas}` (schema-checked)."""
    kinds = []
    for key, value in sorted((config.get("pod-templates") or {}).items()):
        group, _, kind = key.rpartition("/")
        if isinstance(value, str):
            kinds.append(PodTemplateKind(group, kind, value))
            continue
        replicas = value.get("replicas", "spec.replicas")
        kinds.append(PodTemplateKind(group, kind, value["template"], None if replicas == "per-node" else replicas))
    return tuple(kinds)


def effective_pod_templates(configured: tuple[PodTemplateKind, ...]) -> dict[str, dict[str, Any]]:
    """Every custom kind read as a workload, the known ones and the config's, as the config writes them."""
    shown = {}
    for (group, kind), (pod_spec_path, replicas) in sorted(custom_workload_kinds(configured).items()):
        shown[f"{group}/{kind}"] = {"template": pod_spec_path.removesuffix(".spec"),
                                    "replicas": "per-node" if replicas == ONE_PER_NODE else replicas}
    return shown


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
        path = config.inside(["charts", index, "path"], chart["path"], OPTIONS["charts"])
        if not os.path.isfile(os.path.join(path, "Chart.yaml")):
            raise config.error(["charts", index, "path"], f"{chart['path']!r} is not a chart directory (no Chart.yaml)")
        from_config = {
            "values": tuple(config.inside(["charts", index, "values", number], v, OPTIONS["values"])
                            for number, v in enumerate(chart.get("values", ()))),
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
        "ephemeral-port-range": "{}-{}".format(*(facts.ephemeral_port_range or DEFAULT_EPHEMERAL_PORT_RANGE)),
        "proxy-mode": facts.proxy_mode,
        "service-cidr": facts.service_cidr,
        "pod-cidr": facts.pod_cidr,
        "facts": {name: {"value": value, "source": source} for name, value, source in facts.stated},
        "nodes": list(options.node_files),
        "cluster": list(options.cluster_files),
        "pod-templates": effective_pod_templates(facts.pod_templates),
        "charts": [{"path": os.path.relpath(path), **{k.replace("_", "-"): v for k, v in dataclasses.asdict(helm).items()
                                                     if v not in (None, (), False)}}
                   for path, helm in options.chart_helm],
        "baseline": {"file": settings.baseline_file, "findings": len(options.baseline)} if settings.baseline_file
        else None,
        "exemptions": [dataclasses.asdict(e) for e in options.exemptions],
        **{key: settings.config.get(key) for key in ("select", "ignore") if settings.config.get(key) is not None},
        "limits": {name.replace("_", "-"): value for name, value in dataclasses.asdict(options.limits).items()},
        "rules": {p.id: {"name": p.name, "severity": str(p.severity), **({"params": p.params} if p.params else {}),
                         **({"source": p.path} if not p.path.startswith(builtin) else {})}
                  for p in settings.policies},
    }
