"""Declarative policies: a JSON Schema that every container port, Service port or Service, seen
in its context, must satisfy, and the message a finding says when it does not. Users write these
in YAML without any Python, as Polaris writes checks; so are the organisation policies KP552-KP555.

The contexts (`TARGETS`), one per target:
- container-port: every `ports` entry of every container, sidecars and plain init containers
  included (as admission sees a Pod): kind, namespace, name, labels (the pod's), hostNetwork,
  container, role (container, sidecar or init), portName, containerPort, hostPort (the port on
  the node, also for hostNetwork pods; null when none), protocol, hostIP. A number that is no
  port (0, quoted, out of range) is null here: invalid-port reports it.
- service-port: every Service port: kind ("Service"), namespace, name, labels, type, portName,
  port, targetPort, nodePort, protocol.
- service: every Service once: kind, namespace, name, labels, type, ports (each port's portName,
  port, targetPort, nodePort, protocol).

A policy may declare parameters of its own (`parameters`: name -> the JSON Schema of its value),
whose values sit beside them in `params`, where the configuration's `rules:` sets them as it sets
a built-in check's (`rules: {privileged-port: {below: 1000}}`). The schema takes them as
`{$param: NAME}`, or one subschema per item of a list as `{$param: NAME, each: TEMPLATE}` with
`{$item: KEY}` (and `default:`) inside (spliced into the list it stands in); the message names
context values and parameters as `{key}`, a list parameter as `{NAME:{min}-{max}}` (each item so,
"none" when empty), and the item whose subschema failed as `{NAME.KEY}` (`filled`, `rendered`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import cache, lru_cache
from typing import Any, NamedTuple

from kubelint_ports.checks import Hit, register
from kubelint_ports.checks.manifest.network_phrases import policy_words
from kubelint_ports import policy_schemas as user_schemas
from kubelint_ports.policy_schemas import (PatternBudget, PatternBudgetSpent, PatternLimit, charged_to, matcher,
                                                 pattern_keys, patterns_problem, references_problem)
from kubelint_ports.model import Cluster
from kubelint_ports.policies import RuleRun, rule_run

TARGETS = {
    "container-port": ("kind", "namespace", "name", "labels", "hostNetwork", "container", "role", "portName",
                       "containerPort", "hostPort", "protocol", "hostIP"),
    "service-port": ("kind", "namespace", "name", "labels", "type", "portName", "port", "targetPort", "nodePort",
                     "protocol"),
    "service": ("kind", "namespace", "name", "labels", "type", "ports"),
}
OWN_KEYS = ("target", "schema", "message", "parameters")  # the rest of `params` are the declared parameters
NAME = "[A-Za-z][A-Za-z0-9_-]*"  # a parameter's, or a context key's as a message names it

PARAMS_SCHEMA = {
    "type": "object",
    "required": ["target", "schema", "message"],
    "properties": {
        "target": {"enum": list(TARGETS)},
        "schema": {"type": "object", "description": "JSON Schema (draft 2020-12) the context must satisfy; "
                                                    "`{$param: NAME}` takes a parameter's value."},
        "message": {"type": "string", "minLength": 3, "description": "What is wrong and what to do; `{key}` "
                                                                      "names a context value or a parameter."},
        "parameters": {"type": "object", "description": "The policy's own parameters: name -> the JSON Schema "
                                                        "its value (beside it in params) must satisfy.",
                       "propertyNames": {"pattern": f"^{NAME}$", "not": {"enum": list(OWN_KEYS)}},
                       "additionalProperties": {"type": ["object", "boolean"]}},
    },
}


def schema_problem_at(schema: Any) -> tuple[list, str] | None:
    """(the keys down to the offending part of `schema`, why) or None. A schema may refer only
    to itself (a validator would fetch any other reference), with no reference loop (`$ref: "#"`,
    a `$defs` cycle, `$dynamicRef`: the validator would recurse until Python's stack gives out)
    and no `pattern` Python's `re` could backtrack on for ever (see `patterns_problem`)."""
    from kubelint_ports.loading import budgets, files

    problem = files.schema_reference_problem(schema, budgets.current().max_depth)
    if problem:
        return [], problem
    if not isinstance(schema, dict):
        return None
    return references_problem(schema) or patterns_problem(schema)


# --- jsonschema with every pattern through `matcher` --------------------------------------------

@cache
def bounded_validator_class():
    """Draft 2020-12 whose `pattern`, `patternProperties` and `additionalProperties` match with
    `matcher` (jsonschema's own call `re.search`, unbounded). A pattern that gives up fails: the
    port is reported, never let through unchecked."""
    import jsonschema
    from jsonschema import ValidationError

    from kubelint_ports.loading.files import excerpt

    def search(pattern: str, text: str) -> bool:
        return matcher(pattern).search(text)

    def pattern(validator, patrn, instance, schema):
        if validator.is_type(instance, "string"):
            try:
                if not search(patrn, instance):
                    yield ValidationError(f"{excerpt(instance)} does not match {patrn!r}")
            except PatternLimit as error:
                yield ValidationError(str(error))

    def pattern_properties(validator, patterns, instance, schema):
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for key, value in instance.items():
                try:
                    matched = search(patrn, key)
                except PatternLimit as error:
                    yield ValidationError(str(error), path=[key])
                    continue
                if matched:
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    def additional_properties(validator, additional, instance, schema):
        if not validator.is_type(instance, "object"):
            return
        properties = schema.get("properties", {})
        patterns = list(schema.get("patternProperties", {}))
        extras = []
        for key in instance:
            if key in properties:
                continue
            try:
                if any(search(patrn, key) for patrn in patterns):
                    continue
            except PatternLimit as error:
                yield ValidationError(str(error), path=[key])
                continue
            extras.append(key)
        if validator.is_type(additional, "object"):
            for key in extras:
                yield from validator.descend(instance[key], additional, path=key)
        elif not additional and extras:  # jsonschema's words, each key cut short
            shown = ", ".join(excerpt(key) for key in sorted(extras, key=str))
            if patterns:
                yield ValidationError(f"{shown} {'does' if len(extras) == 1 else 'do'} not match any of the regexes: "
                                      f"{', '.join(repr(each) for each in sorted(patterns))}")
            else:
                yield ValidationError(f"Additional properties are not allowed ({shown} "
                                      f"{'was' if len(extras) == 1 else 'were'} unexpected)")

    return jsonschema.validators.extend(jsonschema.Draft202012Validator, {
        "pattern": pattern, "patternProperties": pattern_properties, "additionalProperties": additional_properties})


@lru_cache(maxsize=64)
def validator_for(schema_json: str):
    """The bounded validator of a schema (JSON text: hashable for the cache); ValueError when the
    schema is refused, jsonschema.SchemaError when it is no schema."""
    import json

    import referencing

    schema = json.loads(schema_json)
    found = schema_problem_at(schema)
    if found:  # policies are checked when loaded; this keeps the network and loops out even when not
        raise ValueError(f"params.schema{dotted(found[0])} {found[1]}")
    validator_class = bounded_validator_class()
    validator_class.check_schema(schema)
    # A registry without `retrieve`: an unknown reference is an error, never a download.
    return validator_class(schema, registry=referencing.Registry())


def dotted(keys) -> str:
    return "".join(f".{key}" for key in keys)


# --- the policy's own parameters: checked, then filled into the schema and the message -------------

PARAM, EACH, ITEM = "$param", "each", "$item"
# `{name}`, `{name.key}` (the failing item's key) or `{name:TEMPLATE}` (each item through TEMPLATE)
PLACEHOLDER = re.compile(rf"\{{({NAME})(?:\.({NAME})|:((?:[^{{}}]|\{{{NAME}\}})*))?\}}")
ITEM_KEY = re.compile(rf"\{{({NAME})\}}")


class TemplateError(ValueError):
    def __init__(self, keys: list, why: str):
        super().__init__(why)
        self.keys, self.why = keys, why


class Filled(NamedTuple):
    schema: Any
    items: dict[tuple, tuple[str, Any]]  # the filled schema's path of each `each` subschema -> (name, item)


class Each(list):
    """An `each` node filled: a subschema per item of a list parameter, `origins` the (name, item)
    behind each."""

    origins: list


def filled(schema: Any, params: Mapping[str, Any]) -> Filled:
    """The schema with the parameters in place of its `$param` nodes; TemplateError (the keys of
    the node in the template, why) when one names no parameter or is malformed."""
    items: dict[tuple, tuple[str, Any]] = {}

    def note(value: Any, first: tuple, spliced: bool) -> None:
        """Where the subschemas of an `each` land in the filled schema."""
        for offset, origin in enumerate(getattr(value, "origins", ())):
            items[(*first[:-1], first[-1] + offset) if spliced else (*first, offset)] = origin

    def fill(node: Any, where: list, at: tuple, item: Any) -> Any:
        if isinstance(node, list):
            out: list = []
            for index, child in enumerate(node):
                value = fill(child, [*where, index], (*at, len(out)), item)
                spliced = isinstance(child, dict) and PARAM in child and isinstance(value, list)
                note(value, (*at, len(out)), spliced)
                if spliced:  # `anyOf: [{type: "null"}, {$param: allowed, each: ...}]`: one branch per item
                    out.extend(value)
                else:
                    out.append(value)
            return out
        if not isinstance(node, dict):
            return node
        if PARAM in node:
            return parameter(node, where, item)
        if ITEM in node:
            return item_value(node, where, item)
        result = {}
        for key, child in node.items():
            result[key] = fill(child, [*where, key], (*at, key), item)
            note(result[key], (*at, key), False)
        return result

    def parameter(node: dict, where: list, item: Any) -> Any:
        name = node[PARAM]
        extra = sorted(set(node) - {PARAM, EACH}, key=str)
        if extra:
            raise TemplateError([*where, extra[0]], f"is not a key of a {PARAM} node (only {PARAM} and {EACH})")
        if not isinstance(name, str) or name in OWN_KEYS or name not in params:
            raise TemplateError([*where, PARAM], f"names {name!r}, which is no parameter of this policy "
                                                 f"(declared: {', '.join(declared(params)) or 'none'})")
        if EACH not in node:
            return params[name]
        if item is not None:
            raise TemplateError([*where, EACH], f"stands inside another `{EACH}`: one level only")
        if not isinstance(params[name], list):
            raise TemplateError([*where, EACH], f"needs a list, but parameter {name} is {type(params[name]).__name__}")
        values = Each(fill(node[EACH], [*where, EACH], (), each) for each in params[name])
        values.origins = [(name, each) for each in params[name]]
        return values

    def item_value(node: dict, where: list, item: Any) -> Any:
        if item is None:
            raise TemplateError([*where, ITEM], f"stands outside the `{EACH}` of a {PARAM} node")
        if set(node) - {ITEM, "default"}:
            raise TemplateError([*where, ITEM], f"takes only `{ITEM}: KEY` and `default: VALUE`")
        if not isinstance(item, dict):
            raise TemplateError([*where, ITEM], f"names a key, but the parameter's items are {type(item).__name__}, "
                                                "not mappings")
        if node[ITEM] not in item and "default" not in node:
            raise TemplateError([*where, ITEM], f"names {node[ITEM]!r}, which an item lacks: give a `default`")
        return item.get(node[ITEM], node.get("default"))

    return Filled(fill(schema, [], (), None), items)


def declared(params: Mapping[str, Any]) -> list[str]:
    parameters = params.get("parameters")
    return list(parameters) if isinstance(parameters, dict) else []


def params_problem(params: Mapping[str, Any]) -> tuple[list, str] | None:
    """What PARAMS_SCHEMA cannot say (the `check_params` of the check): (the keys below `params`
    of the offending part, why), or None. Every key is the check's or a declared parameter, each
    parameter's value satisfies its schema, the filled schema is a safe JSON Schema, and every
    placeholder of the message names something."""
    import json

    import jsonschema

    from kubelint_ports.loading.files import excerpt

    names = declared(params)
    for key in params:
        if key not in OWN_KEYS and key not in names:
            return [key], (f"params.{key} is not a parameter of this policy (declared: {', '.join(names) or 'none'}); "
                           f"declare it in params.parameters with the JSON Schema of its value")
    for name in names:
        if name not in params:
            return ["parameters", name], f"params.parameters.{name} has no value: set params.{name} (its default)"
        found = schema_problem_at(params["parameters"][name])
        if found:
            return ["parameters", name, *found[0]], f"params.parameters.{name}{dotted(found[0])} {found[1]}"
        try:
            validator = validator_for(json.dumps(params["parameters"][name], sort_keys=True))
        except jsonschema.SchemaError as error:
            return (["parameters", name, *error.absolute_path],
                    f"params.parameters.{name} is not a valid JSON Schema: {error.message}")
        most = user_schemas.POLICY_PATTERN_SECONDS
        try:
            with charged_to(PatternBudget(most)):  # a list of 20,000 names, each matched: as a run's ports are
                wrong = first_error(validator, params[name])
        except PatternBudgetSpent as spent:
            return [name], (f"params.{name}: matching its items took over {most:g} s, the most a policy's patterns "
                            f"may; rewrite the pattern {excerpt(spent.pattern)} so it cannot backtrack, or install "
                            "the re2 extra (`pip install 'kubelint-ports[re2]'`)")
        if wrong is not None:
            return [name, *wrong.absolute_path], wrong.message
    try:
        schema = filled(params["schema"], params).schema
    except TemplateError as error:
        return ["schema", *error.keys], f"params.schema{dotted(error.keys)} {error.why}"
    found = schema_problem_at(schema)
    if found:
        return ["schema", *found[0]], f"params.schema{dotted(found[0])} {found[1]}"
    try:
        validator_for(json.dumps(schema, sort_keys=True))
    except jsonschema.SchemaError as error:
        return ["schema", *error.absolute_path], f"params.schema is not a valid JSON Schema: {error.message}"
    known = TARGETS[params["target"]]
    for match in PLACEHOLDER.finditer(params["message"]):
        name, key, template = match.groups()
        if name not in names and (key is not None or template is not None or name not in known):
            return ["message"], (f"params.message names {match[0]}, which is neither a value of the "
                                 f"{params['target']} context ({', '.join(known)}) nor a parameter "
                                 f"(declared: {', '.join(names) or 'none'})")
    return None


def first_error(validator, instance: Any):
    """The error a finding reports: the first by the path of the value it is about. Every error's
    sub-errors are let go at once: `context` (and `args`, which holds it too) and `parent` tie them
    in cycles, which the engine's paused collector kept for the whole run (an `anyOf` of 20,000
    branches: 8 GB after 134 ports)."""
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.path)))
    stack = list(errors)
    while stack:
        error = stack.pop()
        stack.extend(error.context)
        error.context, error.args = [], ()
    return errors[0] if errors else None


MESSAGE_CHARS = 2048  # a finding's message: a few sentences, never the list a template iterates
MORE, CUT = "…", f" … (cut at {MESSAGE_CHARS:,} characters)"  # where a list, or a message, is cut


def shown(value: Any, room: int = MESSAGE_CHARS) -> str:
    """A value as a message says it (YAML's words for null and booleans; lists and maps flat), in
    `room` characters: a list that does not fit ends "… and N more"; other text one character
    over, so that the message is cut and says so."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return listed((lambda left, each=each: shown(each, left) for each in value), len(value), room)
    if isinstance(value, dict):
        return listed((lambda left, key=key, each=each: f"{key}={shown(each, left)}" for key, each in value.items()),
                      len(value), room)
    if isinstance(value, int) and value.bit_length() > 4 * room:  # str() refuses past 4,300 digits
        return f"a number of {value.bit_length():,} bits"
    return str(value)[:room + 1]


def listed(parts, count: int, room: int) -> str:
    """The parts (each a function of the room it has) joined by commas while they fit in `room`
    characters, then how many did not: 20,000 items cost as much as the few shown."""
    out: list[str] = []
    length = 0
    for index, part in enumerate(parts):
        more = f" {MORE} and {count - index:,} more"
        text = part(max(room - length - len(more), 0))
        if length + len(text) + len(more) > room:
            return ", ".join(out) + more if out else more.lstrip()
        out.append(text)
        length += len(text) + 2
    return ", ".join(out) or "none"


def substituted(template: str, pattern: re.Pattern, value_of, room: int) -> str:
    """`template` with each match of `pattern` replaced by `value_of(match, room left)`, stopping
    once past `room` characters (a message of 100,000 placeholders is never built whole)."""
    pieces: list[str] = []
    length = at = 0
    for match in pattern.finditer(template):
        length += match.start() - at
        if length > room:
            break
        value = value_of(match, room - length)
        pieces += [template[at:match.start()], value]
        length += len(value)
        at = match.end()
    pieces.append(template[at:at + room + 1])  # the text after the last placeholder, or before the cut
    return "".join(pieces)


def capped(message: str) -> str:
    """At most MESSAGE_CHARS characters, the last of them saying it was cut."""
    return message if len(message) <= MESSAGE_CHARS else message[:MESSAGE_CHARS - len(CUT)] + CUT


def rendered(message: str, context: Mapping[str, Any], params: Mapping[str, Any], failed: Mapping[str, Any],
             cache: dict | None = None) -> str:
    """The message with its placeholders filled: context values first, then parameters; `failed`
    maps a list parameter to the item whose subschema the port failed. At most MESSAGE_CHARS
    characters: `{ranges:{min}-{max}}` over 20,000 items wrote 240 KB per finding. `cache` keeps
    what a parameter's placeholder said, the same for every port of the run."""
    def one(match: re.Match, room: int) -> str:
        name, key, template = match.groups()
        if key is not None:
            item = failed.get(name)
            return shown(item.get(key), room) if isinstance(item, dict) else ""
        if name in context or cache is None:
            return said(match, context[name] if name in context else params.get(name), room)
        if (match[0], room) not in cache:  # a parameter's: the same for every port
            cache[(match[0], room)] = said(match, params.get(name), room)
        return cache[(match[0], room)]

    def said(match: re.Match, value: Any, room: int) -> str:
        template = match[3]
        if template is None:
            return shown(value, room)
        items = value if isinstance(value, list) else [] if value is None else [value]

        def item_text(each: Any, left: int) -> str:
            return substituted(template, ITEM_KEY, lambda inner, within: shown(
                each.get(inner[1]) if isinstance(each, dict) else each, within), left)

        return listed((lambda left, each=each: item_text(each, left) for each in items), len(items), room)

    return capped(substituted(message.strip(), PLACEHOLDER, one, MESSAGE_CHARS))


# --- contexts: what the schema validates, and where each of its keys is written ---------------------

class Context(NamedTuple):
    subject: Any
    values: dict[str, Any]
    fields: dict[tuple, str]  # a key path of `values` -> the field path where it is written
    field: str  # where a finding points when the failing key has no field of its own
    port: int | None  # the port a finding is about when the failing key is no port


PORT_KEYS = ("containerPort", "hostPort", "port", "targetPort", "nodePort")


def port_number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535 else None


def container_port_contexts(cluster: Cluster) -> Iterator[Context]:
    """Every container's port entries as written, init containers included; a hostNetwork pod's
    ports are host ports (the API defaults hostPort = containerPort there)."""
    for workload in cluster.workloads:
        for port in workload.declared_ports:
            container_port, written_host_port = port_number(port.container_port), port_number(port.host_port)
            host_port = written_host_port or (container_port if workload.host_network else None)
            entry = port.field_path
            on_node = f"{entry}.hostPort" if written_host_port else f"{entry}.containerPort"
            yield Context(workload, {
                "kind": workload.ref.kind, "namespace": workload.ref.namespace, "name": workload.ref.name,
                "labels": workload.pod_labels, "hostNetwork": workload.host_network, "container": port.container,
                "role": port.role, "portName": port.name, "containerPort": container_port, "hostPort": host_port,
                "protocol": port.protocol, "hostIP": port.host_ip or "0.0.0.0",
            }, {("containerPort",): f"{entry}.containerPort", ("hostPort",): on_node, ("portName",): f"{entry}.name",
                ("protocol",): f"{entry}.protocol", ("hostIP",): f"{entry}.hostIP"},
                on_node if written_host_port and not workload.host_network else f"{entry}.containerPort",
                host_port or container_port)


def service_port_values(port) -> dict[str, Any]:
    return {"portName": port.name, "port": port.port, "targetPort": port.target_port, "nodePort": port.node_port,
            "protocol": port.protocol}


def service_port_fields(port, *prefix) -> dict[tuple, str]:
    return {(*prefix, key): f"{port.field_path}.{written}" for key, written in (
        ("portName", "name"), ("port", "port"), ("targetPort", "targetPort"), ("nodePort", "nodePort"),
        ("protocol", "protocol"))}


def service_values(service) -> dict[str, Any]:
    labels = service.labels
    return {"kind": "Service", "namespace": service.ref.namespace, "name": service.ref.name,
            "labels": labels if isinstance(labels, dict) else {}, "type": service.type}


def service_port_contexts(cluster: Cluster) -> Iterator[Context]:
    for service in cluster.services:
        for port in service.ports:
            yield Context(service, service_values(service) | service_port_values(port),
                          {("type",): "spec.type", **service_port_fields(port)},
                          f"{port.field_path}.nodePort" if port.node_port else f"{port.field_path}.port",
                          port.node_port or port.port)


def service_contexts(cluster: Cluster) -> Iterator[Context]:
    for service in cluster.services:
        fields = {("type",): "spec.type", ("ports",): "spec.ports"}
        for index, port in enumerate(service.ports):
            fields |= {("ports", index): port.field_path, **service_port_fields(port, "ports", index)}
        yield Context(service, service_values(service) | {"ports": [service_port_values(p) for p in service.ports]},
                      fields, "metadata.name", None)


CONTEXTS = {"container-port": container_port_contexts, "service-port": service_port_contexts,
            "service": service_contexts}


# What one policy may write in one run: its findings beyond this many are counted, not shown. A
# finding is a message of at most MESSAGE_CHARS and about a kilobyte of place and subject around
# it, so a policy writes at most some 30 MB of JSON; a sane one is far below, and one that flags
# more than 10,000 ports says nothing the first 10,000 did not.
MAX_FINDINGS = 10_000
# What checking ports against one policy's schema may take in one run, patterns included, and all
# the run's policies together. A schema of 20,000 `each` branches took 0.2 s per port (half an hour
# per 10,000 ports); a sane policy with four patterns took 2 s over 20,000 ports.
POLICY_SECONDS, RUN_POLICY_SECONDS = 30.0, 120.0
TARGET_WORDS = {"container-port": "container ports", "service-port": "Service ports", "service": "Services"}


@register("port-schema", params_schema=PARAMS_SCHEMA, check_params=params_problem)
def port_schema(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    """Each context against the filled schema: a finding at the field of the first failing key.
    A message without placeholders gets the validator's words, which name the value. Within the
    run's budgets (`rule_run`): once its patterns or its checking have spent theirs, the policy
    checks no more ports; past MAX_FINDINGS it only counts (`RuleRun.admitted`); either is said once,
    when the run ends."""
    import json
    import time

    from kubelint_ports.loading.files import shortened, time_limits

    schema, items = filled(params["schema"], params)
    validator = validator_for(json.dumps(schema, sort_keys=True))
    plain = PLACEHOLDER.search(params["message"]) is None
    run = rule_run(params)
    shared = run.shared.setdefault("patterns", PatternBudget(user_schemas.RUN_PATTERN_SECONDS))
    budget = run.spent.setdefault("patterns", PatternBudget(user_schemas.POLICY_PATTERN_SECONDS, parent=shared))
    counts = run.spent.setdefault("counts", {"unchecked": 0, "seconds": 0.0})
    run.shared.setdefault("seconds", 0.0)
    cache: dict = {}
    for context in CONTEXTS[params["target"]](cluster):
        if counts["seconds"] >= POLICY_SECONDS or run.shared["seconds"] >= RUN_POLICY_SECONDS:
            run.spent.setdefault("stopped by", "time")
        if "stopped by" in run.spent:
            counts["unchecked"] += 1
            continue
        started = time.perf_counter()
        try:
            with charged_to(budget), time_limits():  # the timer's handler set once per port, not per match
                error = first_error(validator, context.values)
        except PatternBudgetSpent as spent:
            counts["unchecked"] += 1
            run.spent["stopped by"], run.spent["stopped at"] = "patterns", spent.pattern
            continue
        finally:
            took = time.perf_counter() - started
            counts["seconds"] += took
            run.shared["seconds"] += took
        if error is None or not run.admitted(MAX_FINDINGS):
            continue
        path = tuple(error.absolute_path)
        key = next((path[:length] for length in range(len(path), 0, -1) if path[:length] in context.fields), ())
        if plain:
            where = ".".join(map(str, path)) or "port"
            # jsonschema quotes the value whole: a manifest's megabyte name must not fill the report
            message = capped(f"{params['message'].strip()} ({where}: {shortened(error.message)})")
        else:
            schema_path = tuple(error.absolute_schema_path)  # the innermost `each` item it failed in wins
            failed = dict(items[schema_path[:n]] for n in range(len(schema_path) + 1) if schema_path[:n] in items)
            message = rendered(params["message"], context.values, params, failed, cache)
        number = port_number(error.instance) if path and path[-1] in PORT_KEYS else None
        yield Hit(context.subject, context.fields.get(key, context.field),
                  policy_words(message, str(context.subject.ref)), port=number or context.port)
    say_what_was_spent(run, params, budget, counts)


def say_what_was_spent(run: RuleRun, params: Mapping[str, Any], budget: PatternBudget, counts: dict) -> None:
    """The policy's remarks on the run so far (each replaces the last: the run says the final one)."""
    from kubelint_ports.loading.files import excerpt

    left = f"{counts['unchecked']:,} {TARGET_WORDS[params['target']]} unchecked"
    if run.spent.get("stopped by") == "patterns":
        pattern = run.spent["stopped at"]
        whose = "its patterns" if budget.spent_by is budget else "the run's policies' patterns, together,"
        run.remark("stopped", (
            f"{whose} spent {budget.spent_by.seconds:g} s matching in this run, the most they may; the rule "
            f"stopped before the pattern {excerpt(pattern)} and left {left}. Rewrite the pattern so it cannot "
            "backtrack, or install the re2 extra (`pip install 'kubelint-ports[re2]'`), which matches in linear "
            "time"), ["params", "schema", *pattern_keys(params.get("schema"), pattern)])
    elif run.spent.get("stopped by") == "time":
        whose, most = ("checking its schema", POLICY_SECONDS) if counts["seconds"] >= POLICY_SECONDS \
            else ("checking the run's policies, together,", RUN_POLICY_SECONDS)
        run.remark("stopped", (
            f"{whose} took {most:g} s in this run, the most it may; the rule stopped and left {left}. Make its "
            "schema smaller: an `each` over a list makes one subschema per item, for every port"), ["params", "schema"])
