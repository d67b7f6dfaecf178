"""What a run does, from the command line over the configuration file over the policy defaults."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import field
from typing import Any

from kubelint_ports.config import Config, apply_rules, load_config
from kubelint_ports.engine import LintOptions, UnitInputs
from kubelint_ports.records import record
from kubelint_ports.loading import budgets
from kubelint_ports.workload_kinds import ONE_PER_NODE
from kubelint_ports.model import ClusterFacts
from kubelint_ports.model.build import custom_workload_kinds
from kubelint_ports.model.objects import DEFAULT_EPHEMERAL_PORT_RANGE
from kubelint_ports.model.objects import PodTemplateKind
from kubelint_ports.policies import Policy, policies_with

DEFAULT_PATHS = (".",)
HELM_FIELDS = ("values", "set", "set_string", "release_name", "namespace", "kube_version", "helm_binary",
               "chart_root")


@record(frozen=True)
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
    cache_dir: str | None = None  # hook: --cache-dir (loading/file_cache.py)
    no_cache: bool = False  # hook: --no-cache


@record(frozen=True)
class Settings:
    paths: tuple[str, ...]
    options: LintOptions
    policies: tuple[Policy, ...]
    fail_on: str
    config: Config
    baseline_file: str | None = None


def parse_range_option(text: str) -> tuple[int, int]:
    """A LOW-HIGH range given as an option or config key (`--node-port-range`,
    `--ephemeral-port-range`); a ValueError says what is wrong. Not kube-apiserver's PortRange
    (`loading.network_settings.parse_port_range`, which a manifest's flag is read with): no
    `LOW+SIZE`, no single port."""
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
    limits = run_limits(config, command_limits)
    with budgets.applied(limits):
        return resolve_within(command, config, limits)


def run_limits(config: Config, command_limits: dict[str, str]) -> budgets.Limits:
    """The budgets of a run: the defaults, lowered by the configuration file (never raised: it may
    be the repository under review; `load_config` refused a raise at its line), then the command
    line's `--limit` over both, the one way to raise a limit."""
    try:
        configured = budgets.repository_limits(config.get("limits") or {})
    except ValueError as error:
        raise config.error(["limits"], str(error)) from None
    return budgets.parse_limits(command_limits, base=configured)


def parse_limit_options(pairs: tuple[str, ...]) -> dict[str, str]:
    """`--limit max-depth=300` options as a mapping, each checked against its range
    (`budgets.limit_value`): a ValueError names the option as typed and the range."""
    given = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals:
            raise ValueError(f"--limit {pair!r} is not NAME=VALUE (names: {', '.join(budgets.limit_names())})")
        try:
            budgets.limit_value(name.strip(), value.strip())
        except budgets.LimitValueError as error:
            raise ValueError(f"--limit {pair}: {error.reason}") from None
        given[name.strip()] = value.strip()
    return given


def resolve_within(command: CommandLine, config: Config, limits: budgets.Limits) -> Settings:

    facts = run_facts(command, config)
    for key, given in (("paths", command.paths), ("nodes", command.nodes), ("cluster", command.cluster)):
        if not given:
            check_config_paths(config, key)
    known = policies_with([*config_paths(config, "policies"), *command.policies])
    configured = apply_rules(known, config)
    policies = selected_policies(known, configured, command, config)
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
        unit_inputs=unit_inputs(command, config),
        node_daemons=node_daemons(known, configured),
        cache_dir=cache_directory(command, config),  # hook: the file cache
        require_reason=bool(config.get("require-reason", False)),
    )
    paths = tuple(command.paths) or tuple(config_paths(config, "paths")) or DEFAULT_PATHS
    return Settings(paths, options, tuple(policies), command.fail_on or config.get("fail-on") or "error", config,
                    baseline_file)


def cache_directory(command: CommandLine, config: Config) -> str | None:
    """Where the file cache lives (docs/cache.md), None for none: --no-cache, else --cache-dir,
    else $KUBELINT_PORTS_CACHE_DIR; none in CI (`CI` set: a fresh checkout has nothing to reuse,
    and the change under review could plant entries); else the configuration's `cache-dir`
    (inside the repository, as every path it names); else none. The cache is asked for, not
    assumed: a cold run costs twice an uncached one (writing the entries), which pays back only
    where the same tree is linted again and again, as the whole-repository pre-commit hooks do
    (they pass `--cache-dir .kubelint-ports_cache`); and a plain `lint` writes nothing."""
    from kubelint_ports.loading.file_cache import CACHE_ENV

    if command.no_cache:
        return None
    if command.cache_dir:
        return command.cache_dir
    if os.environ.get(CACHE_ENV):
        return os.environ[CACHE_ENV]
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        return None
    if config.get("cache-dir"):
        return config.inside(["cache-dir"], config.get("cache-dir"), "pass it with --cache-dir")
    return None


# How to read a file outside the repository anyway: the command line is the user's own choice. A
# `charts:` entry carries its own options: on the command line, they are the run's, for every chart.
OPTIONS = {"paths": "name it on the command line", "nodes": "pass it with --nodes",
           "cluster": "pass it with --cluster", "policies": "pass it with --policies",
           "baseline": "pass it with --baseline",
           "charts": "move the chart into the repository, or name it on the command line with its options as "
                     "--values, --set, --release-name and --namespace (which then apply to every chart of the run)",
           "values": "move the values file into the repository, or pass it with --values (which then replaces "
                     "the `values:` of every chart of the run)"}


# What a unit of `units:` may state of its own cluster besides its paths, as the top level does.
UNIT_FACT_KEYS = ("node-port-range", "ephemeral-port-range", "proxy-mode", "service-cidr", "pod-cidr", "facts")


def unit_sections(config: Config) -> dict[str, dict[str, Any]]:
    """The config's `units:`, each as a mapping: `name: [paths]` is `name: {paths: [paths]}`."""
    return {str(name): ({"paths": entry} if isinstance(entry, list) else dict(entry))
            for name, entry in (config.get("units") or {}).items()}


def unit_rules(config: Config):
    """The config's `units:` (name -> paths relative to the config file), for model.units. A path
    must stay inside the repository and exist (`unit_file`): a typo would move objects to another
    unit."""
    from kubelint_ports.model.units import UnitRules

    configured = []
    for name, section in unit_sections(config).items():
        listed = isinstance(config.get("units")[name], list)  # `name: [paths]`
        paths = []
        for index, path in enumerate(section.get("paths") or ()):
            keys = ["units", name, index] if listed else ["units", name, "paths", index]
            resolved = unit_file(config, keys, str(path), "paths")
            paths.append(os.path.relpath(resolved, config.base_dir).replace(os.sep, "/"))
        configured.append((name, tuple(paths)))
    return UnitRules(tuple(configured), root=str(config.base_dir)) if configured else UnitRules()


def unit_inputs(command: CommandLine, config: Config):
    """What each unit of `units:` states of its own cluster: its node inventory, running objects
    and facts (engine.UnitInputs). The command line wins for every unit, as it does over the top
    level; a key the unit leaves out is the top level's."""
    given = []
    for name, section in unit_sections(config).items():
        files = {}
        for key, option in (("nodes", command.nodes), ("cluster", command.cluster)):
            if key in section and not option:
                files[key] = tuple(unit_file(config, ["units", name, key, index], path, key)
                                   for index, path in enumerate(section[key]))
        stated = any(key in section for key in UNIT_FACT_KEYS)
        if files or stated:
            given.append((name, UnitInputs(files.get("nodes"), files.get("cluster"),
                                           run_facts(command, config, name) if stated else None)))
    return tuple(given)


def unit_file(config: Config, keys: list, path: str, key: str) -> str:
    """A path a unit names (`key`: its paths, inventory, running objects), resolved: inside the
    repository, and existing; else an error at its line."""
    resolved = config.inside(keys, path, OPTIONS[key])
    if not os.path.exists(resolved):
        raise config.error(keys, f"no such file or directory {path!r}")
    return resolved


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


def node_daemons(known: list[Policy], configured: list[Policy]) -> tuple[tuple[int, str], ...]:
    """Every node daemon's port the configuration knows: each node-reserved-port policy with the
    configuration's params, whether or not it is selected, on or off (a daemon still listens)."""
    from kubelint_ports.policies import node_daemon_ports

    by_id = {policy.id: policy for policy in configured}
    return tuple(sorted(node_daemon_ports([by_id.get(policy.id, policy) for policy in known]).items()))


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


def run_facts(command: CommandLine, config: Config, unit: str | None = None) -> ClusterFacts:
    """What the user states about the cluster: of the run, or of one unit of `units:` (its keys
    over the top level's). The command line wins over both; an error names the key's line."""
    section = unit_sections(config)[unit] if unit is not None else {}

    def configured(key: str) -> Any:
        return section[key] if key in section else config.get(key)

    def pick(option: Any, key: str) -> Any:
        return option if option not in (None, (), "") else configured(key)

    def port_range(option: str | None, key: str) -> tuple[int, int] | None:
        if option:
            return parse_range_option(option)
        if configured(key):
            try:
                return parse_range_option(configured(key))
            except ValueError as error:
                raise config.error(["units", unit, key] if key in section else [key], str(error)) from None
        return None

    return ClusterFacts(node_port_range=port_range(command.node_port_range, "node-port-range"),
                        proxy_mode=pick(command.proxy_mode, "proxy-mode"),
                        service_cidr=pick(command.service_cidr, "service-cidr"),
                        pod_cidr=pick(command.pod_cidr, "pod-cidr"), stated=stated_facts(command, config, unit),
                        ephemeral_port_range=port_range(command.ephemeral_port_range, "ephemeral-port-range"),
                        pod_templates=pod_templates(config))


def stated_facts(command: CommandLine, config: Config, unit: str | None = None) -> tuple[tuple[str, Any, str], ...]:
    """Datapath facts the user states, each with where: the command line wins over the config,
    and a unit's own (`units: {NAME: {facts: ...}}`), fact by fact, over the top level's."""
    where = config.path or "the configuration"
    stated: dict[str, tuple[str, Any, str]] = {}
    section = unit_sections(config)[unit] if unit is not None else {}
    for prefix, facts in (("", config.get("facts")), (f"units.{unit}.", section.get("facts"))):
        for name, value in (facts or {}).items():
            stated[name] = (name, value, f"{where} {prefix}facts.{name}")
    for prefix, proxy_mode in (("", config.get("proxy-mode")), (f"units.{unit}.", section.get("proxy-mode"))):
        if proxy_mode:
            stated["proxy-mode"] = ("proxy-mode", proxy_mode, f"{where} {prefix}proxy-mode")
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
    from kubelint_ports.loading.helm.charts import HelmOptions

    if given.get("chart_root") and not os.path.isfile(os.path.join(given["chart_root"], "Chart.yaml")):
        raise ValueError(f"--chart-root {given['chart_root']!r} is not a chart directory (no Chart.yaml)")
    defaults = HelmOptions(**given) if given else None
    per_chart = []
    for index, chart in enumerate(charts):
        path = config.inside(["charts", index, "path"], chart["path"], OPTIONS["charts"])
        packaged = os.path.isfile(path) and path.endswith((".tgz", ".tar.gz"))
        if not (packaged or os.path.isfile(os.path.join(path, "Chart.yaml"))):
            raise config.error(["charts", index, "path"],
                               f"{chart['path']!r} is not a chart directory (no Chart.yaml) nor a packaged chart (.tgz)")
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
        **({"units": effective_units(options)} if options.units.configured else {}),
        "exemptions": [dataclasses.asdict(e) for e in options.exemptions],
        "require-reason": options.require_reason,
        **{key: settings.config.get(key) for key in ("select", "ignore") if settings.config.get(key) is not None},
        "limits": {name.replace("_", "-"): value for name, value in dataclasses.asdict(options.limits).items()},
        "rules": {p.id: {"name": p.name, "severity": str(p.severity),
                         **({"params": params} if (params := shown_params(p)) else {}),
                         **({"source": p.path} if not p.path.startswith(builtin) else {})}
                  for p in settings.policies},
    }


def shown_params(policy) -> dict[str, Any]:
    """A policy's params as `config` shows them: a check's, all; a declarative policy's
    (`check: port-schema`), the parameters it declares, which `rules:` sets; its target, schema
    and message are its policy file's own."""
    if policy.check != "port-schema":
        return policy.params
    declared = policy.params.get("parameters")
    if not isinstance(declared, dict):
        return {}
    return {name: policy.params[name] for name in declared if name in policy.params}


def effective_units(options: LintOptions) -> dict[str, dict[str, Any]]:
    """The units of `units:` as a run uses them: paths, and what each states of its own cluster."""
    own = dict(options.unit_inputs)
    shown = {}
    for name, paths in options.units.configured:
        entry: dict[str, Any] = {"paths": list(paths)}
        inputs = own.get(name)
        if inputs is not None:
            for key, files in (("nodes", inputs.node_files), ("cluster", inputs.cluster_files)):
                if files is not None:
                    entry[key] = list(files)
            if inputs.facts is not None:
                facts = inputs.facts
                entry.update({"node-port-range": "{}-{}".format(*(facts.node_port_range or (30000, 32767))),
                              "proxy-mode": facts.proxy_mode, "service-cidr": facts.service_cidr,
                              "pod-cidr": facts.pod_cidr,
                              "facts": {fact: {"value": value, "source": source}
                                        for fact, value, source in facts.stated}})
        shown[name] = entry
    return shown
