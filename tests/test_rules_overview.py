"""docs/rules-overview.md's table is generated from the policies (`python -m kubelint_ports.docs`):
a row per built-in rule, in id order, with its name, its default severity (`off` exactly for the
organisation policies that ship turned off) and what it finds (`docs.finds`). A rule added
without regenerating, or renamed, fails here; so does a built-in policy without its `finds`."""

from __future__ import annotations

import re
from pathlib import Path

from kubelint_ports.docs import overview_page
from kubelint_ports.policies import builtin_policies

OVERVIEW = Path(__file__).resolve().parents[1] / "docs" / "rules-overview.md"
ROW = re.compile(r"^\| (KP\d{3}) \| ([^|]+?) \| ([^|]+?) \| [^|]+ \|$", re.M)


def test_the_overview_table_is_generated_from_the_policies():
    text = OVERVIEW.read_text(encoding="utf-8")
    assert overview_page(text, builtin_policies()) == text, "docs/rules-overview.md is stale: run `python -m kubelint_ports.docs`"


def test_every_built_in_policy_says_what_it_finds():
    assert [policy.id for policy in builtin_policies() if len(policy.docs.get("finds", "")) < 10] == []


def test_the_overview_table_lists_every_rule_by_id_and_name():
    rows = ROW.findall(OVERVIEW.read_text(encoding="utf-8"))
    assert [(rule_id, name) for rule_id, name, _ in rows] == [(p.id, p.name) for p in builtin_policies()]


def test_the_overview_table_says_each_rules_severity_and_whether_it_is_off():
    severities = {rule_id: severity for rule_id, _, severity in ROW.findall(OVERVIEW.read_text(encoding="utf-8"))}
    for policy in builtin_policies():
        written = severities[policy.id]
        named = set(re.findall(r"\b(error|warning|note)\b", written))
        assert str(policy.severity) in named, (policy.id, written)
        assert named <= {str(policy.severity), *map(str, policy.variants.values())}, (policy.id, written)
        assert written.endswith(", off") == (not policy.enabled), (policy.id, written)
