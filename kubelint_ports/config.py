"""`.kubelint-ports.yaml` (or `[tool.kubelint-ports]` in pyproject.toml): the repository's own
settings, validated with a JSON Schema shipped in the package. Precedence: command line > this
file > policy defaults."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
from dataclasses import field
from pathlib import Path
from typing import Any

from kubelint_ports.policies import error_keys, find_policy, refused_params, rule_suggestion
from kubelint_ports.records import record
from kubelint_ports.vocabulary import ObjectRef, Severity

CONFIG_NAME = ".kubelint-ports.yaml"
PYPROJECT = "pyproject.toml"
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "config.schema.json"


class ConfigError(ValueError):
    def __init__(self, path: str, line: int, message: str):
        from kubelint_ports.loading.files import shortened

        message = shortened(message)  # PyYAML and jsonschema quote values whole: the file's, here
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")  # no line: the file itself
        self.path, self.line, self.message = path, line, message


@record(frozen=True, slots=True)
class Exemption:
    rule: str
    reason: str
    namespace: str = "*"
    kind: str = "*"
    name: str = "*"

    def matches(self, rule_id: str, rule_name: str, subject: ObjectRef) -> bool:
        return (self.rule in ("*", rule_id, rule_name) and fnmatch.fnmatchcase(subject.namespace, self.namespace)
                and fnmatch.fnmatchcase(subject.kind, self.kind) and fnmatch.fnmatchcase(subject.name, self.name))


@record(frozen=True)
class Config:
    path: str = ""  # the file it came from; "" when there is none
    data: dict[str, Any] = field(default_factory=dict)
    locate: Any = field(default=lambda keys: 0, compare=False, repr=False)  # keys -> line, for errors
    explicit: bool = False  # named with --config (the user's choice), not found by walking up

    def error(self, keys: list, message: str) -> ConfigError:
        return ConfigError(self.path, self.locate(keys), f"{'.'.join(map(str, keys))}: {message}")

    @property
    def base_dir(self) -> Path:
        return Path(self.path).parent if self.path else Path(".")

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def paths(self, key: str) -> list[str]:
        """A list of paths from the file, relative to the file's own directory."""
        return [self.resolve(p) for p in self.data.get(key, [])]

    def resolve(self, path: str) -> str:
        if not self.path or os.path.isabs(path):
            return path
        return os.path.normpath(os.path.join(self.base_dir, path))

    @property
    def repository(self) -> str:
        """Where the paths this file names must stay: the git work tree holding it (the nearest
        directory above it with a `.git`), else the file's own directory. Resolved."""
        return self.git_work_tree or os.path.realpath(self.base_dir)

    @property
    def git_work_tree(self) -> str | None:
        """The git work tree holding the file (resolved), None outside one."""
        from kubelint_ports.sourceroot import git_work_tree

        return git_work_tree(os.path.realpath(self.base_dir))

    def inside(self, keys: list, path: str, option: str) -> str:
        """`path` from the file, resolved; a ConfigError at `keys` when it leads out of the
        repository (`..`, an absolute path, a symlink): a cloned repository's config must not make
        the tool read, and quote, the files of whoever runs it. The root is the git work tree
        holding the file. Outside one, a file the user named with --config is the user's own
        choice, as a path on the command line is: its paths may reach whatever they name; a file
        found by walking up stays in its own directory. `option` names the command-line way to
        read a file outside the git work tree anyway."""
        resolved = self.resolve(path)
        if not self.path:
            return resolved
        top = self.git_work_tree
        if top is None and self.explicit:
            return resolved
        root = top or os.path.realpath(self.base_dir)
        target = os.path.realpath(resolved)
        if target != root and not target.startswith(root.rstrip(os.sep) + os.sep):
            raise self.error(keys, self.outside(path, root, top is not None, option))
        return resolved

    def outside(self, path: str, root: str, in_git: bool, option: str) -> str:
        """Why `path` is refused, and what the user can do instead (never an impossible step)."""
        if in_git:
            return (f"{path!r} is outside the repository ({root}): paths a configuration file names stay "
                    f"inside its git work tree; to read it anyway, {option}")
        return (f"{path!r} is outside the repository ({root}: the directory of {self.path}, which no git work "
                f"tree holds): a configuration found by walking up names paths inside it; to read it anyway, name "
                f"this configuration with `--config {self.path}` (your choice: its paths may then reach what they "
                f"name)")

    @property
    def fix_choices(self):
        """The `fix:` section as `fixes.Choices`, what `lint --fix` hands `fixes.describe`."""
        from kubelint_ports.fixes.plan import Choices

        section = self.data.get("fix") or {}
        return Choices(**({"node_port": section["node-port"]} if "node-port" in section else {}))

    @property
    def exemptions(self) -> tuple[Exemption, ...]:
        return tuple(Exemption(**{k: v for k, v in e.items()}) for e in self.data.get("exemptions", []))

    def excluded(self, path: str) -> bool:
        """Exclude globs match the path relative to the config's directory, or any of its parts."""
        patterns = self.data.get("exclude", [])
        if not patterns:
            return False
        relative = os.path.relpath(path, self.base_dir).replace(os.sep, "/")
        parts = relative.split("/")
        return any(fnmatch.fnmatchcase(relative, pattern) or fnmatch.fnmatchcase(relative, pattern.rstrip("/") + "/*")
                   or any(fnmatch.fnmatchcase(part, pattern.strip("/")) for part in parts)
                   for pattern in patterns)


def find_config(start: Path) -> Path | None:
    """The nearest `.kubelint-ports.yaml`, or pyproject.toml with a [tool.kubelint-ports] table."""
    for directory in (start.resolve(), *start.resolve().parents):
        candidate = directory / CONFIG_NAME
        if candidate.is_file():
            return candidate
        pyproject = directory / PYPROJECT
        if pyproject.is_file() and "[tool.kubelint-ports]" in pyproject.read_text(encoding="utf-8", errors="replace"):
            return pyproject
    return None


def load_config(explicit: str | None = None, start: Path | None = None) -> Config:
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(explicit, 0, "configuration file not found")
    else:
        path = find_config(start or Path.cwd())
        if path is None:
            return Config()
    shown = display(path)
    if path.name == PYPROJECT or path.suffix == ".toml":
        data, locate = read_toml(path, shown)
    else:
        data, locate = read_yaml(path, shown)
    check_limits(data, shown, locate)
    validate(data, shown, locate)
    return Config(shown, data, locate, explicit=bool(explicit))


def display(path: Path) -> str:
    relative = os.path.relpath(path)
    return (str(path) if relative.startswith("..") else relative).replace(os.sep, "/")


def read_yaml(path: Path, shown: str):
    import yaml

    from kubelint_ports.loading import budgets, files
    from kubelint_ports.loading.yaml_files import yamltree as yt

    try:
        root = budgets.compose(files.read_file(str(path), budgets.current().max_file_bytes))
    except OSError as error:
        raise ConfigError(shown, 0, f"cannot read: {error.strerror or error}") from None
    except budgets.LimitError as error:
        mark = error.problem_mark
        raise ConfigError(shown, mark.line + 1 if mark else 1, str(error)) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        raise ConfigError(shown, mark.line + 1 if mark else 1, f"invalid YAML: {error.problem}") from None
    except yaml.YAMLError as error:  # not UTF-8, control characters
        raise ConfigError(shown, 1, f"unreadable YAML: {getattr(error, 'reason', '') or error}") from None
    if root is None or yt.is_null(root):
        return {}, lambda keys: 1
    if not isinstance(root, yt.MappingNode):
        raise ConfigError(shown, root.start_mark.line + 1, "the configuration must be a mapping")

    def locate(keys) -> int:
        dotted = "".join(f"[{k}]" if isinstance(k, int) else f'."{k}"' for k in keys).lstrip(".")
        key_node, value_node = yt.resolve(root, dotted)
        return (key_node or value_node).start_mark.line + 1

    try:
        return typed(root), locate
    except yt.FieldTypeError as error:
        raise ConfigError(shown, error.node.start_mark.line + 1, str(error)) from None


def typed(node):
    """Composed YAML as Python data, typed with YAML 1.1 rules (what a config author expects)."""
    from kubelint_ports.loading.yaml_files import yamltree as yt

    if isinstance(node, yt.MappingNode):
        return {str(typed(key)): typed(value) for key, value in yt.pairs(node)}
    if isinstance(node, yt.SequenceNode):
        return [typed(item) for item in node.value]
    yt.check_tag(node)
    kind = yt.scalar_type(node)
    if kind == yt.NULL:
        return None
    if kind == yt.BOOL:
        return yt.as_bool(node)
    if kind == yt.INT:
        return yt.as_int(node)
    if kind == yt.FLOAT and node.tag == yt.PLAIN:
        try:
            return float(node.value)
        except ValueError:
            return node.value
    return node.value


def read_toml(path: Path, shown: str):
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    from kubelint_ports.loading import budgets, files

    try:
        text = files.read_file(str(path), budgets.current().max_file_bytes).decode("utf-8")
        document = tomllib.loads(text)
    except OSError as error:
        raise ConfigError(shown, 0, f"cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(shown, 1, f"not UTF-8 text: {error.reason}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(shown, getattr(error, "lineno", 1) or 1, f"invalid TOML: {error}") from None
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise ConfigError(shown, 1, "invalid TOML: nested too deeply") from None
    data = document.get("tool", {}).get("kubelint-ports", {})
    lines = text.splitlines()
    header = next((i + 1 for i, line in enumerate(lines) if line.strip().startswith("[tool.kubelint-ports")), 1)

    def locate(keys) -> int:
        # TOML parsers keep no positions: find the first key's line below the table header.
        for key in (k for k in keys if isinstance(k, str)):
            for number in range(header, len(lines) + 1):
                stripped = lines[number - 1].strip().strip("[]")
                if stripped.startswith((f"{key} ", f"{key}=", f'"{key}"', f"tool.kubelint-ports.{key}")):
                    return number
        return header

    return data, locate


def check_limits(data: dict[str, Any], shown: str, locate) -> None:
    """The file's `limits:` may lower a budget, never raise it past the default: the file may be
    the repository under review, and only whoever runs the tool raises one (`--limit`). Checked
    before the schema so the error says so, and the limit's range, at the limit's line; an unknown
    name or a `limits:` that is no mapping is the schema's to word."""
    limits = data.get("limits")
    if not isinstance(limits, dict):
        return
    from kubelint_ports.loading import budgets

    known = set(budgets.limit_names())
    try:
        budgets.repository_limits({key: value for key, value in limits.items() if key in known})
    except budgets.LimitValueError as error:
        raise ConfigError(shown, locate(["limits", error.key]), f"limits.{error.key}: {error.reason}") from None


def validate(data: dict[str, Any], shown: str, locate) -> None:
    from kubelint_ports.schema_gate import certainly_valid

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    if certainly_valid(schema, data):  # the usual case, without jsonschema's import (start-up)
        return
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(map(str, e.path)))
    if errors:
        error = errors[0]
        keys = error_keys(error)
        where = ".".join(str(part) for part in keys) or "(top level)"
        message = error.message
        if error.validator == "type" and len(keys) == 2 and keys[0] == "units":
            message = f"{error.instance!r} is neither a list of paths nor a mapping with `paths:`"
        if error.validator == "additionalProperties":
            message = message.replace("Additional properties are not allowed", "unknown key")
            allowed = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
            unknown = [key for key in error.instance if key not in allowed] if isinstance(error.instance, dict) else []
            if unknown:
                from kubelint_ports.policies import did_you_mean

                message += did_you_mean(str(unknown[0]), allowed)
        raise ConfigError(shown, locate(keys), f"{where}: {message}")


def apply_rules(policies, config: Config) -> list:
    """Policies with the config's per-rule settings: off or on, severity, params (validated). Policies
    that are off by default run only when the config names them."""
    from kubelint_ports.checks import CHECKS

    settings = config.get("rules") or {}
    changed = {policy.id: policy for policy in policies}
    for reference, setting in settings.items():
        policy = find_policy(reference, policies)
        if policy is None:
            raise config.error(["rules", reference], f"unknown rule{rule_suggestion(str(reference), policies)} "
                                                     f"(see `kubelint-ports rules`)")
        if setting in ("off", False):
            changed.pop(policy.id, None)
            continue
        # Naming a rule with anything but off turns on a policy that is off by default.
        changed[policy.id] = dataclasses.replace(changed[policy.id], enabled=True)
        if setting in ("on", True):
            continue
        if isinstance(setting, str):
            changed[policy.id] = dataclasses.replace(changed[policy.id], severity=Severity.parse(setting),
                                                     variants={})
            continue
        params = {k: v for k, v in setting.items() if k != "severity"}
        severity = setting.get("severity")
        if severity in ("off", False):  # YAML 1.1 reads a bare `off` as false
            changed.pop(policy.id, None)
            continue
        updated = changed[policy.id]
        if params:
            merged = {**updated.params, **params}
            refused = refused_params(CHECKS[updated.check], merged)  # as a policy file's params are
            if refused is not None:
                raise config.error(["rules", reference, *(refused.keys or ())], refused.message)
            updated = dataclasses.replace(updated, params=merged)
        if severity:
            updated = dataclasses.replace(updated, severity=Severity.parse(severity), variants={})
        changed[policy.id] = updated
    return [changed[p.id] for p in policies if p.id in changed and changed[p.id].enabled]
