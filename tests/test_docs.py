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


def sections(text: str) -> dict[str, str]:
    """A rule page's `## ` sections, by heading, each with its text stripped."""
    found: dict[str, str] = {}
    heading = None
    for line in text.splitlines():
        if line.startswith("## "):
            heading = line[3:]
            found[heading] = ""
        elif heading is not None:
            found[heading] += line + "\n"
    return {name: body.strip() for name, body in found.items()}


def test_every_page_says_what_its_policy_says_under_the_fixed_sections():
    """The sections hold the policy's own words and its runnable example and fix, in order, none
    empty: a policy with a blank field or a renderer that dropped one fails here."""
    for policy in builtin_policies():
        page = sections(rule_markdown(policy))
        fixed = ["What it does", "Why is this bad?", "Example", "Fix", "References"]
        assert [name for name in page if name in fixed] == fixed, policy.id
        assert page["What it does"] == policy.docs["what"].strip() != "", policy.id
        assert page["Why is this bad?"] == policy.docs["why"].strip() != "", policy.id
        for section, field in (("Example", "example"), ("Fix", "fix")):
            body = page[section]
            assert body.startswith("```") and body.endswith("```"), (policy.id, section)
            assert body.split("\n", 1)[1].rsplit("\n", 1)[0] == policy.docs[field].rstrip() != "", (policy.id, section)
        assert page["References"], policy.id
        parameters = policy.docs.get("parameters") or {}
        assert ("Parameters" in page) == bool(parameters), policy.id
        for name in parameters:
            assert f"- `{name}` (default " in page["Parameters"], (policy.id, name)
