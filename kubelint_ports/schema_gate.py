"""A quick yes for JSON Schemas we wrote ourselves: is this instance certainly valid?

jsonschema costs a pre-commit run more than the rest of `lint` on one small file (its import
alone is some 60 ms of a 75 ms run), and a repository's configuration file is valid on almost
every run. `certainly_valid` walks the subset of JSON Schema 2020-12 our own schemas use and
answers True only when every keyword it met holds; anything it does not know (a keyword, a
remote `$ref`) makes it unsure, and the caller asks jsonschema, which also words the error.
`tests/test_schema_gate.py` holds it to jsonschema: never True where jsonschema finds an error.
"""

from __future__ import annotations

import re
from typing import Any

VALID, INVALID, UNSURE = "valid", "invalid", "unsure"

# Keywords that never change whether an instance is valid.
ANNOTATIONS = frozenset(("$schema", "$id", "$comment", "$defs", "definitions", "title", "description",
                         "default", "examples", "deprecated", "readOnly", "writeOnly"))
TYPES = {
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "integer": lambda value: (isinstance(value, int) and not isinstance(value, bool))
    or (isinstance(value, float) and value.is_integer()),
    "number": lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
}


def certainly_valid(schema: dict, instance: Any) -> bool:
    """True only when `instance` is valid under `schema` by every keyword checked here."""
    return Gate(schema).check(schema, instance, 0) == VALID


def json_equal(left: Any, right: Any) -> bool:
    """Equality as JSON Schema has it: `true` is not `1`, `1.0` is `1`."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(json_equal, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(value, right[key]) for key, value in left.items())
    return type(left) is type(right) and left == right or (
        isinstance(left, (int, float)) and isinstance(right, (int, float)) and left == right)


class Gate:
    MAX_DEPTH = 64  # our schemas nest a dozen deep; a `$ref` loop makes it unsure, not hang

    def __init__(self, root: dict):
        self.root = root

    def check(self, schema: Any, instance: Any, depth: int) -> str:
        if schema is True or schema == {}:
            return VALID
        if schema is False:
            return INVALID
        if not isinstance(schema, dict) or depth > self.MAX_DEPTH:
            return UNSURE
        verdict = VALID
        for keyword, value in schema.items():
            if keyword in ANNOTATIONS:
                continue
            method = getattr(self, "k_" + keyword.replace("$", "dollar_"), None)
            found = method(value, instance, schema, depth + 1) if method else UNSURE
            if found == INVALID:
                return INVALID
            if found == UNSURE:
                verdict = UNSURE
        return verdict

    def all_of(self, results) -> str:
        verdict = VALID
        for result in results:
            if result == INVALID:
                return INVALID
            if result == UNSURE:
                verdict = UNSURE
        return verdict

    # --- keywords: each returns VALID, INVALID or UNSURE ----------------------------------------

    def k_type(self, value, instance, schema, depth):
        names = value if isinstance(value, list) else [value]
        if not all(name in TYPES for name in names):
            return UNSURE
        return VALID if any(TYPES[name](instance) for name in names) else INVALID

    def k_enum(self, value, instance, schema, depth):
        return VALID if any(json_equal(instance, each) for each in value) else INVALID

    def k_const(self, value, instance, schema, depth):
        return VALID if json_equal(instance, value) else INVALID

    def k_properties(self, value, instance, schema, depth):
        if not isinstance(instance, dict):
            return VALID
        return self.all_of(self.check(value[key], instance[key], depth) for key in value if key in instance)

    def k_additionalProperties(self, value, instance, schema, depth):
        if not isinstance(instance, dict):
            return VALID
        if "patternProperties" in schema:
            return UNSURE
        known = schema.get("properties", {})
        return self.all_of(self.check(value, item, depth) for key, item in instance.items() if key not in known)

    def k_required(self, value, instance, schema, depth):
        return VALID if not isinstance(instance, dict) or all(key in instance for key in value) else INVALID

    def k_propertyNames(self, value, instance, schema, depth):
        if not isinstance(instance, dict):
            return VALID
        return self.all_of(self.check(value, key, depth) for key in instance)

    def k_items(self, value, instance, schema, depth):
        if not isinstance(instance, list):
            return VALID
        if "prefixItems" in schema:
            return UNSURE
        return self.all_of(self.check(value, item, depth) for item in instance)

    def _bound(self, instance, holds) -> str:
        if not TYPES["number"](instance):
            return VALID
        return VALID if holds(instance) else INVALID

    def k_minimum(self, value, instance, schema, depth):
        return self._bound(instance, lambda number: number >= value)

    def k_maximum(self, value, instance, schema, depth):
        return self._bound(instance, lambda number: number <= value)

    def k_exclusiveMinimum(self, value, instance, schema, depth):
        return self._bound(instance, lambda number: number > value)

    def k_exclusiveMaximum(self, value, instance, schema, depth):
        return self._bound(instance, lambda number: number < value)

    def k_minLength(self, value, instance, schema, depth):
        # JSON Schema counts code points, as Python's len does
        return VALID if not isinstance(instance, str) or len(instance) >= value else INVALID

    def k_maxLength(self, value, instance, schema, depth):
        return VALID if not isinstance(instance, str) or len(instance) <= value else INVALID

    def k_pattern(self, value, instance, schema, depth):
        if not isinstance(instance, str):
            return VALID
        try:  # Python's re.search, as jsonschema runs `pattern`
            return VALID if re.search(value, instance) else INVALID
        except re.error:
            return UNSURE

    def k_anyOf(self, value, instance, schema, depth):
        results = [self.check(branch, instance, depth) for branch in value]
        if VALID in results:
            return VALID
        return UNSURE if UNSURE in results else INVALID

    def k_oneOf(self, value, instance, schema, depth):
        results = [self.check(branch, instance, depth) for branch in value]
        if UNSURE in results:
            return UNSURE
        return VALID if results.count(VALID) == 1 else INVALID

    def k_allOf(self, value, instance, schema, depth):
        return self.all_of(self.check(branch, instance, depth) for branch in value)

    def k_not(self, value, instance, schema, depth):
        found = self.check(value, instance, depth)
        return UNSURE if found == UNSURE else (INVALID if found == VALID else VALID)

    def k_if(self, value, instance, schema, depth):
        condition = self.check(value, instance, depth)
        if condition == UNSURE:
            return UNSURE
        branch = schema.get("then" if condition == VALID else "else", True)
        return self.check(branch, instance, depth)

    def k_then(self, value, instance, schema, depth):
        return VALID  # decided with `if`

    k_else = k_then

    def k_dollar_ref(self, value, instance, schema, depth):
        if not isinstance(value, str) or not value.startswith("#/"):
            return UNSURE
        target: Any = self.root
        for part in value[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                return UNSURE
            target = target[part]
        return self.check(target, instance, depth)
