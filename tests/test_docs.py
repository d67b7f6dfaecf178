"""The checked-in rule docs are generated from the policies and must not go stale."""

from __future__ import annotations

from pathlib import Path

from kubelint_ports.docs import rule_docs, rule_markdown
from kubelint_ports.policies import builtin_policies

DOCS = Path(__file__).resolve().parents[1] / "docs" / "rules"


def test_rule_docs_are_up_to_date():
    expected = rule_docs(builtin_policies())
    present = {path.name: path.read_text(encoding="utf-8") for path in DOCS.glob("*.md")}
    stale = sorted(name for name in expected.keys() | present.keys() if expected.get(name) != present.get(name))
    assert not stale, f"docs/rules is stale ({', '.join(stale)}): run `python -m kubelint_ports.docs`"


def test_every_page_has_the_fixed_sections():
    for policy in builtin_policies():
        text = rule_markdown(policy)
        for heading in ("## What it does", "## Why is this bad?", "## Example", "## Fix", "## References"):
            assert heading in text, (policy.id, heading)
        if policy.docs.get("parameters"):
            assert "## Parameters" in text
