"""Rule documentation rendered from a policy's `docs:` (shared by `explain`, docs/rules and SARIF help)."""

from __future__ import annotations

import json

from kubelint_ports.policies import Policy


def rule_markdown(policy: Policy) -> str:
    docs = policy.docs
    lines = [
        f"# {policy.id} {policy.name}",
        "",
        f"{policy.summary}",
        "",
        f"Default severity: **{policy.severity}**"
        + (" (" + ", ".join(f"{case}: {sev}" for case, sev in policy.variants.items()) + ")" if policy.variants else ""),
        "",
        "## What it does",
        "",
        docs["what"].strip(),
        "",
        "## Why is this bad?",
        "",
        docs["why"].strip(),
        "",
        "## Example",
        "",
        "```yaml",
        docs["example"].rstrip(),
        "```",
        "",
        "## Fix",
        "",
        "```yaml",
        docs["fix"].rstrip(),
        "```",
        "",
    ]
    parameters = docs.get("parameters") or {}
    if parameters:
        lines += ["## Parameters", ""]
        for name, text in parameters.items():
            default = policy.params.get(name)
            lines.append(f"- `{name}` (default `{json.dumps(default)}`): {text.strip()}")
        lines.append("")
    lines += ["## References", ""]
    lines += [f"- {reference}" for reference in docs["references"]]
    lines.append("")
    return "\n".join(lines)
