"""Rule documentation rendered from a policy's `docs:` (shared by `explain`, docs/rules and SARIF help)."""

from __future__ import annotations

import json

from kubelint_ports.policies import Policy, write_whole


def rule_markdown(policy: Policy) -> str:
    docs = policy.docs
    fence = "```" + docs.get("language", "yaml")
    lines = [
        f"# {policy.id} {policy.name}",
        "",
        f"{policy.summary}",
        "",
        f"Default severity: **{policy.severity}**"
        + (" (" + ", ".join(f"{case}: {sev}" for case, sev in policy.variants.items()) + ")" if policy.variants else "")
        + ("" if policy.enabled else
           f". Off by default: turn it on with `rules: {{{policy.name}: on}}` in the configuration"),
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
        fence,
        docs["example"].rstrip(),
        "```",
        "",
        "## Fix",
        "",
        fence,
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
    if policy.peers:
        lines += ["## Other tools", "", "The same check elsewhere:", ""]
        lines += [f"- {peer_text(peer)}" for peer in policy.peers]
        lines.append("")
    lines += ["## References", ""]
    lines += [f"- {reference}" for reference in docs["references"]]
    lines.append("")
    return "\n".join(lines)


def setting_text(peer: dict[str, str]) -> str:
    """Parameters as code (`types: [LoadBalancer]`), a part of the rule in words."""
    setting = peer.get("setting", "")
    if not setting:
        return ""
    return f" with `{setting}`" if ":" in setting else f" ({setting})"


def peer_text(peer: dict[str, str]) -> str:
    return f"{peer['tool']} `{peer['check']}`{setting_text(peer)}"


def rule_docs(policies) -> dict[str, str]:
    """File name -> Markdown for docs/rules: one page per rule and an index."""
    pages = {f"{policy.slug}.md": rule_markdown(policy) for policy in policies}
    index = ["# Rules", "", "Generated from `policies/` by `python -m kubelint_ports.docs`; do not edit.", "",
             "Rules marked *off* are organisation policies rather than mistakes: `rules: {NAME: on}` in the",
             "configuration turns one on (a severity or parameters do too).", "",
             "| id | name | severity | default | summary |", "|---|---|---|---|---|"]
    index += [f"| [{p.id}]({p.slug}.md) | {p.name} | {p.severity} | {'on' if p.enabled else '*off*'} | {p.summary} |"
              for p in policies]
    index += ["", "## The port checks of other tools", "",
              "Each port check of kube-linter, kube-score, Polaris, Kyverno's and Gatekeeper's policy libraries",
              "and the Pod Security Standards, and the rule (with the parameters) that covers it here.", "",
              "| tool | check | kubelint-ports |", "|---|---|---|"]
    peers = sorted(((peer, policy) for policy in policies for peer in policy.peers),
                   key=lambda pair: (pair[0]["tool"].lower(), pair[0]["check"].lower(), pair[1].id))
    for peer, policy in peers:
        off = "" if policy.enabled else " turned on"
        index.append(f"| {peer['tool']} | `{peer['check']}` | [{policy.id} {policy.name}]({policy.slug}.md){off}"
                     f"{setting_text(peer)} |")
    pages["README.md"] = "\n".join(index) + "\n"
    return pages


OVERVIEW_START = "<!-- the table: written by `python -m kubelint_ports.docs` from each policy's docs.finds -->"
OVERVIEW_END = "<!-- end of the table -->"


def overview_table(policies) -> str:
    """The rules table of docs/rules-overview.md: a row per built-in rule, what it finds in a few
    words (`docs.finds`) and its severity (`docs.severity-text` when it depends on the case)."""
    rows = ["| id | name | severity | finds |", "|---|---|---|---|"]
    for policy in policies:
        severity = policy.docs.get("severity-text") or f"{policy.severity}{'' if policy.enabled else ', off'}"
        rows.append(f"| {policy.id} | {policy.name} | {severity} | {policy.docs.get('finds') or policy.summary} |")
    return "\n".join(rows) + "\n"


def overview_page(text: str, policies) -> str:
    """docs/rules-overview.md with its table between the markers written again."""
    start, end = text.index(OVERVIEW_START) + len(OVERVIEW_START), text.index(OVERVIEW_END)
    return text[:start] + "\n" + overview_table(policies) + text[end:]


# The package's schemas (what the tool validates with), published at the repository's top as
# schemas/kubelint-ports-*.schema.json for editors (docs/configuration.md, "Your editor"). The
# published file is the package's byte for byte but for `$id`, which names the published file's
# own raw GitHub URL (the `$schema=` users write), so it resolves without a website of ours.
PUBLISHED_SCHEMAS = {"config.schema.json": "kubelint-ports-config.schema.json",
                     "policy.schema.json": "kubelint-ports-policy.schema.json"}
REPOSITORY = "https://github.com/kubelint-ports/kubelint-ports"  # pyproject's [project.urls] Repository
SCHEMA_BASE_URL = "https://raw.githubusercontent.com/kubelint-ports/kubelint-ports/main/schemas/"


def published_schema(text: str, published_name: str) -> str:
    """A package schema's text as published: its one `"$id": "..."` names the published file's URL."""
    import re

    ids = re.findall(r'"\$id":\s*"[^"]*"', text)
    if len(ids) != 1:
        raise ValueError(f"expected one $id in the schema, found {len(ids)}")
    return text.replace(ids[0], f'"$id": "{SCHEMA_BASE_URL}{published_name}"', 1)


def published_schemas() -> dict[str, str]:
    """File name under schemas/ -> its text, from the package's schemas."""
    from pathlib import Path

    package = Path(__file__).resolve().parent / "schemas"
    return {published: published_schema((package / source).read_text(encoding="utf-8"), published)
            for source, published in PUBLISHED_SCHEMAS.items()}


def write_published_schemas(target) -> list:
    """Write schemas/ (the directory given); returns the paths written."""
    from pathlib import Path

    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in published_schemas().items():
        write_whole(target / name, text)
        written.append(target / name)
    return written


def main(argv: list[str] | None = None) -> int:
    """Regenerate docs/rules (or the directory given), the built-in policies' index
    (`policies.INDEX`) and the published schemas (`schemas/` at the top of the repository that holds docs/rules);
    tests fail when the checked-in pages, the index or the schemas are stale."""
    import sys
    from pathlib import Path

    from kubelint_ports.policies import builtin_policies, write_policy_index

    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0] if args else "docs/rules")
    target.mkdir(parents=True, exist_ok=True)
    pages = rule_docs(builtin_policies())
    for stale in target.glob("*.md"):
        if stale.name not in pages:
            stale.unlink()
    for name, text in pages.items():
        write_whole(target / name, text)
    print(f"wrote {len(pages)} pages to {target}")
    overview = target.parent / "rules-overview.md"
    if overview.is_file():
        write_whole(overview, overview_page(overview.read_text(encoding="utf-8"), builtin_policies()))
        print(f"wrote the rules table of {overview}")
    print(f"wrote the policies' index {write_policy_index()}")
    root = target.parent.parent  # docs/rules of a repository: its top, with schemas/ beside docs/
    if (root / "pyproject.toml").is_file():
        for path in write_published_schemas(root / "schemas"):
            print(f"wrote the published schema {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
