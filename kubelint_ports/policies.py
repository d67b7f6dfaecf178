"""Policies are data: `policies/KPnnn-name.yaml` files naming a check, its severity and its docs."""

from __future__ import annotations

import dataclasses
import json
import re
import zlib
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import field
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from kubelint_ports.records import record
from kubelint_ports.vocabulary import Diagnostic, Location, Severity

from kubelint_ports.policy_data import (  # noqa: F401 (the policies' names for them)
    INDEX,
    INDEX_VERSION,
    PACKAGE_DIR,
    builtin_policy_data,
    builtin_policy_dir,
    indexed_data,
    read_index,
)

SCHEMA_PATH = PACKAGE_DIR / "schemas" / "policy.schema.json"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@record(frozen=True, slots=True)
class Policy:
    id: str
    name: str
    severity: Severity
    summary: str
    check: str
    params: dict[str, Any]
    docs: dict[str, Any]
    variants: dict[str, Severity] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    path: str = ""
    enabled: bool = True  # False: an organisation policy, off until the configuration turns it on
    peers: tuple[dict[str, str], ...] = ()  # the checks of other tools it covers (tool, check, setting)
    # What its findings make of the port they land on in the port map: conflict, capture or
    # reserved (its params list the node daemons); "": listed on the port, its state left alone.
    port_map: str = ""
    # The rule flags a field for being set, whatever its value: a fix making that field valid
    # reveals its finding there, it does not bring it (`fixes.apply.made_worse`).
    presence: bool = False

    def severity_for(self, variant: str) -> Severity:
        return self.variants.get(variant, self.severity) if variant else self.severity

    @property
    def slug(self) -> str:
        return f"{self.id}-{self.name}"


class PolicyError(ValueError):
    def __init__(self, path: str, line: int, message: str):
        from kubelint_ports.loading.files import shortened

        message = shortened(message)  # PyYAML and jsonschema quote values whole: the file's, here
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = path, line, message


def policy_from_data(data: dict[str, Any], path: str) -> Policy:
    return Policy(
        id=data["id"],
        name=data["name"],
        severity=Severity.parse(data["severity"]),
        summary=data["summary"].strip(),
        check=data["check"],
        params=dict(data.get("params") or {}),
        docs=data["docs"],
        variants={key: Severity.parse(value) for key, value in (data.get("variants") or {}).items()},
        tags=tuple(data.get("tags") or ()),
        path=path,
        enabled=data.get("enabled", True),
        peers=tuple(data.get("peers") or ()),
        port_map=data.get("port-map", ""),
        presence=data.get("presence", False),
    )


def read_policy_file(path: Path, *, shipped: bool = False) -> dict[str, Any]:
    """A policy file's data. A user's file is read under the budgets against hostile input; the
    package's own (`shipped`, checked by the tests) are read as they are, on every run."""
    from kubelint_ports.loading import budgets, files

    try:
        if shipped:
            text = path.read_text(encoding="utf-8")
        else:
            text = files.read_file(str(path), budgets.current().max_file_bytes)
            if budgets.may_have_aliases(text):
                budgets.compose(text)  # refuses alias bombs before they are built as shared objects
            else:
                budgets.check_text(text)
        data = yaml.load(text, Loader=_Loader)
    except OSError as error:
        raise PolicyError(str(path), 0, f"cannot read: {error.strerror or error}") from None
    except budgets.LimitError as error:
        mark = error.problem_mark
        raise PolicyError(str(path), mark.line + 1 if mark else 1, str(error)) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        raise PolicyError(str(path), mark.line + 1 if mark else 1, f"invalid YAML: {error.problem}") from None
    except yaml.YAMLError as error:
        raise PolicyError(str(path), 1, f"unreadable YAML: {getattr(error, 'reason', '') or error}") from None
    if not isinstance(data, dict):
        raise PolicyError(str(path), 1, "a policy file must be a mapping")
    return data


@cache
def policy_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def validate_policy(data: dict[str, Any], path: Path) -> None:
    """Schema and registry checks for a policy file (run for user policies and by the tests)."""
    import jsonschema  # heavy: only paid when a policy needs validating

    errors = sorted(jsonschema.Draft202012Validator(policy_schema()).iter_errors(data), key=lambda e: e.path)
    if errors:
        keys = error_keys(errors[0])
        where = ".".join(str(part) for part in keys) or "(top level)"
        raise PolicyError(str(path), line_of_key(path, keys), f"{where}: {errors[0].message}")
    from kubelint_ports.checks import CHECKS

    check = CHECKS.get(data["check"])
    if check is None:
        raise PolicyError(str(path), line_of_key(path, ["check"]), f"unknown check {data['check']!r} "
                                                                    f"(known: {', '.join(sorted(CHECKS))})")
    refused = refused_params(check, data.get("params") or {})
    if refused is not None:
        line = 1 if refused.keys is None else line_of_key(path, ["params", *refused.keys])
        raise PolicyError(str(path), line, f"params: {refused.message}" if refused.by_schema else refused.message)


def error_keys(error) -> list:
    """The path of a schema error, down to the offending key for an unknown one (policy files and
    the configuration file both point at it)."""
    keys = list(error.absolute_path)
    if "propertyNames" in list(error.absolute_schema_path)[-2:-1]:
        keys.append(error.instance)  # the key itself is wrong: point at it
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = set(error.schema.get("properties", {}))
        unknown = sorted(key for key in error.instance if key not in known)
        if unknown:
            keys.append(unknown[0])
    return keys


TOO_DEEP = "nested too deeply to validate (limit max-depth)"


class Refusal(NamedTuple):
    """Why a check refuses params: where (the keys below `params`; None: no one place) and why."""

    keys: list | None
    message: str
    by_schema: bool = False  # the check's params schema said so (a policy file prefixes "params: ")


def refused_params(check, params: dict[str, Any]) -> Refusal | None:
    """The one validator of a rule's params: a policy file's, and the configuration's `rules:`
    params merged over its policy's. The check's params schema, then what that schema cannot say
    (`params_problem`); a schema too deeply nested for the validators' recursion is refused too."""
    import jsonschema  # heavy: only paid when params need validating

    try:
        errors = list(jsonschema.Draft202012Validator(check.params_schema).iter_errors(params))
        if errors:
            return Refusal(list(errors[0].absolute_path), errors[0].message, by_schema=True)
        found = params_problem(check, params)
    except RecursionError:  # jsonschema recurses per level of a schema the params hold
        return Refusal(None, TOO_DEEP)
    return Refusal(*found) if found else None


def params_problem(check, params: dict[str, Any]) -> tuple[list, str] | None:
    """What a check's params schema cannot say about `params` (the check's `check_params`): (the
    keys below `params` of the offending part, why), or None. A policy file's params and the
    config's `rules:` params both pass here, so neither can hand a rule a schema that loops,
    fetches or backtracks for ever (port-schema's check_params refuses those)."""
    return check.check_params(params) if check.check_params else None


def line_of_key(path: Path, keys) -> int:
    """The line of the deepest existing key on `keys` in a YAML file, for error messages."""
    from kubelint_ports.loading import budgets, files
    from kubelint_ports.loading.yaml_files import yamltree

    try:
        root = budgets.compose(files.read_file(str(path), budgets.current().max_file_bytes), loader=_Loader)
    except (OSError, yaml.YAMLError):
        return 1
    if root is None:
        return 1
    # Every key quoted: a schema's keys (`$defs`, a patternProperties regex) hold dots and brackets.
    dotted = "".join(f"[{k}]" if isinstance(k, int) else f'."{k}"' for k in keys).lstrip(".")
    key_node, value_node = yamltree.resolve(root, dotted)
    return (key_node or value_node).start_mark.line + 1


# Where a built-in check lives and what it is: declared by the built-in policies that name it
# (`checks.placements`), never by a policy of one's own.
PLACEMENT_KEYS = frozenset({"module", "reads", "cross-object", "fix"})


def moved_placement(data: dict[str, Any]) -> str:
    """The first placement key (`PLACEMENT_KEYS`) a policy of one's own gives otherwise than the
    built-in policies naming its check: "" when it gives none or repeats theirs (a copy of a
    built-in policy, made one's own, loads as it is)."""
    theirs = [builtin for _, builtin in builtin_policy_data()
              if isinstance(builtin, dict) and builtin.get("check") == data.get("check")]
    for key in sorted(PLACEMENT_KEYS.intersection(data)):
        if not any(builtin.get(key, DEFAULT_PLACEMENT.get(key)) == data[key] for builtin in theirs):
            return key
    return ""


DEFAULT_PLACEMENT = {"reads": "cluster", "cross-object": False}


def load_policies(directory: Path | None = None, *, validate: bool = False) -> list[Policy]:
    """The policies of a directory of one's own, or (None) the built-in ones (through the index)."""
    shipped = directory is None
    own = not shipped and directory.resolve() != builtin_policy_dir().resolve()
    files = builtin_policy_data() if shipped else [(path, None) for path in sorted(directory.glob("*.y*ml"))]
    policies = []
    for path, data in files:
        if not shipped:
            data = read_policy_file(path)
            if own and (moved := moved_placement(data)):
                raise PolicyError(str(path), line_of_key(path, [moved]),
                                  f"{moved}: only the built-in policies say where a check lives, what it reads and "
                                  "how it is fixed; a policy of your own names a built-in check (or port-schema) with "
                                  "`check:` and may repeat what the built-in policies say of it, nothing else")
        elif not isinstance(data, dict):
            raise PolicyError(str(path), 1, "a policy file must be a mapping")
        if validate:
            try:
                validate_policy(data, path)
            except RecursionError:  # jsonschema recurses per level of the policy
                raise PolicyError(str(path), 1, TOO_DEEP) from None
        try:
            policies.append(policy_from_data(data, str(path)))
        except (KeyError, TypeError, ValueError) as error:
            raise PolicyError(str(path), 1, f"malformed policy: {error}") from None
    return policies


@cache
def builtin_policies() -> tuple[Policy, ...]:
    return tuple(load_policies())


def policy_index(directory: Path | None = None) -> dict[str, Any]:
    """The index of a directory of policies (the built-in ones by default), from their YAML."""
    directory = directory or builtin_policy_dir()
    entries = []
    for path in sorted(directory.glob("*.y*ml")):
        raw = path.read_bytes()
        data = read_policy_file(path, shipped=True)
        if json.loads(json.dumps(data)) != data:
            raise PolicyError(str(path), 1, "holds a value JSON cannot carry (a key that is not a string, a date)")
        entries.append({"name": path.name, "size": len(raw), "crc32": zlib.crc32(raw), "data": data})
    return {"version": INDEX_VERSION, "policies": entries}


def write_whole(path, text: str) -> None:
    """`text` into `path` whole or not at all: a temporary file beside it, then a rename (a full disk
    or an interrupted run leaves the old page, never half of a new one)."""
    import os
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".kubelint-ports-", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def write_policy_index(directory: Path | None = None) -> Path:
    directory = directory or builtin_policy_dir()
    target = directory / INDEX
    write_whole(target, json.dumps(policy_index(directory), indent=1, ensure_ascii=False) + "\n")
    return target


def enabled_by_default(policies) -> list[Policy]:
    """What a run uses when the configuration names no rule: organisation policies stay off."""
    return [policy for policy in policies if policy.enabled]


def find_policy(reference: str, policies=None) -> Policy | None:
    """A policy by id (`KP101`, any case) or name (`host-port`)."""
    wanted = reference.strip()
    for policy in policies if policies is not None else builtin_policies():
        if wanted.upper() == policy.id or wanted == policy.name:
            return policy
    return None


def did_you_mean(word: str, choices) -> str:
    """` (did you mean 'x'?)` for the closest of `choices`, or "" when none is close."""
    import difflib

    close = difflib.get_close_matches(word.strip(), sorted(set(choices)), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def rule_suggestion(reference: str, policies=None) -> str:
    """`did_you_mean` over the rules' names and ids (`host-prot` -> 'host-port')."""
    known = list(policies if policies is not None else builtin_policies())
    return did_you_mean(reference, [p.name for p in known] + [p.id for p in known])


_ID_PREFIX = re.compile(r"[A-Z]+[0-9]*")


def matching_policies(reference: str, policies) -> list[Policy]:
    """The policies `--select`/`--ignore` mean by `reference`: an id or name, `all`, or an id
    prefix as ruff takes them (`KP2` is every KP2xx rule). Empty when it means none."""
    wanted = reference.strip()
    if wanted.lower() == "all":
        return list(policies)
    exact = find_policy(wanted, policies)
    if exact is not None:
        return [exact]
    prefix = wanted.upper()
    if not _ID_PREFIX.fullmatch(prefix):
        return []
    return [policy for policy in policies if policy.id.startswith(prefix)]


def policies_with(extra_directories) -> list[Policy]:
    """Built-in policies plus the user's own (validated); an id or name used twice is an error."""
    policies = list(builtin_policies())
    seen = {p.id: p for p in policies} | {p.name: p for p in policies}
    port_map_of_check = {p.check: p.port_map for p in policies if p.port_map}
    for directory in extra_directories:
        path = Path(directory)
        if not path.is_dir():
            raise PolicyError(str(path), 0, "policy directory not found")
        for policy in load_policies(path, validate=True):
            for key in (policy.id, policy.name):
                if key in seen:
                    raise PolicyError(policy.path, line_of_key(Path(policy.path), ["id" if key == policy.id else "name"]),
                                      f"{key} is already used by {seen[key].path or 'a built-in policy'}")
                seen[key] = policy
            if not policy.port_map and policy.check in port_map_of_check:
                # A policy of its own over a built-in check marks the map as the built-in rule does.
                policy = dataclasses.replace(policy, port_map=port_map_of_check[policy.check])
            policies.append(policy)
    return policies


# --- one run: what each policy may spend, and what it says when it runs out ----------------------

class RuleRun:
    """One policy's share of a run, reached by its check with `rule_run(params)`: the check's own
    counters (`spent`, by the check's names), the run's counters every policy shares (`shared`),
    and what the policy has to say about them (`remarks`: topic -> the message and the keys in its
    file where), said once when the run ends, as an input problem at the policy."""

    __slots__ = ("spent", "shared", "remarks")

    def __init__(self, shared: dict[str, Any] | None = None):
        self.spent: dict[str, Any] = {}
        self.shared = {} if shared is None else shared
        self.remarks: dict[str, tuple[str, list]] = {}

    def remark(self, topic: str, message: str, keys: list | None = None) -> None:
        """What the policy says on `topic` when the run ends (the last word on it wins)."""
        self.remarks[topic] = (message, list(keys or []))

    def admitted(self, most: int) -> bool:
        """Whether one more finding may be shown, `most` in the run; past that it is counted, and
        the count said when the run ends."""
        counts = self.spent.setdefault("findings", {"shown": 0, "hidden": 0, "most": most})
        if counts["shown"] < most:
            counts["shown"] += 1
            return True
        counts["hidden"] += 1
        return False

    def words(self) -> list[tuple[str, list]]:
        """The remarks, and the count of findings not shown, now final: (message, keys) each."""
        said = list(self.remarks.values())
        counts = self.spent.get("findings", {})
        if counts.get("hidden"):
            said.append((f"{counts['shown']:,} findings shown and {counts['hidden']:,} more not: at most "
                         f"{counts['most']:,} per policy and run", []))
        return said


_runs: list[dict[int, tuple[dict, RuleRun]]] = []  # the runs open, innermost last: id(params) -> share


@contextmanager
def rules_run(policies: Iterable[Policy], diagnostics: list | None):
    """One run of `policies` (over every deployment unit): each policy's check finds its share of
    the run's budgets with `rule_run`; when the run ends, each remark becomes a diagnostic in
    `diagnostics` at the policy's file. Inside another run (the units' runs inside the whole
    run's), the outer run's shares are used, and the outer run speaks."""
    policies = list(policies)
    if _runs and all(_runs[-1].get(id(policy.params), (None,))[0] is policy.params for policy in policies):
        yield
        return
    shared: dict[str, Any] = {}
    shares: dict[int, tuple[dict, RuleRun]] = {}
    for policy in policies:
        shares.setdefault(id(policy.params), (policy.params, RuleRun(shared)))
    _runs.append(shares)
    try:
        yield
    finally:
        _runs.pop()
    said: set[int] = set()
    for policy in policies:
        share = shares[id(policy.params)][1]
        if diagnostics is None or id(share) in said:
            continue
        said.add(id(share))
        for message, keys in share.words():
            line = line_of_key(Path(policy.path), keys) if keys and policy.path else 0
            diagnostics.append(Diagnostic(Location(policy.path or f"rule {policy.id}", line, 1 if line else 0),
                                          f"rule {policy.id} ({policy.name}): {message}"))


def rule_run(params: Any) -> RuleRun:
    """The share of the run open now of the policy whose params `params` are (the very object the
    engine hands its check); outside a run, a share of its own that no one hears."""
    for shares in reversed(_runs):
        found = shares.get(id(params))
        if found is not None and found[0] is params:
            return found[1]
    return RuleRun()


def node_daemon_ports(policies: Iterable) -> dict[int, str]:
    """port -> node daemon, from the node-reserved-port policies of the run: what a suggested or
    moved port must not land on (`ports --free`, the page, the fixes), whatever the protocol."""
    from kubelint_ports.model.port_holders import reserved_ports

    reserved: dict[int, str] = {}
    for policy in policies:
        if policy.check == "node-reserved-port":
            for (_, port), daemon in sorted(reserved_ports(policy.params).items()):
                reserved.setdefault(port, daemon)
    return reserved
