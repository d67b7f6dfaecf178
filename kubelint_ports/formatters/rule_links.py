"""Where a rule's page is: its docs/rules/ page at this release's tag in the project's repository
(SARIF `helpUri`, the GitHub annotations' link). Built-in rules only: a user's policy has no page."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from kubelint_ports import __version__
from kubelint_ports.policies import Policy, builtin_policy_dir


def project_url() -> str:
    """The repository's address, from `[project.urls]` (the installed metadata, else the
    checkout's pyproject.toml); "" when neither says."""
    from importlib import metadata

    try:
        entries = metadata.metadata("kubelint-ports").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        entries = []
    urls = dict(entry.split(", ", 1) for entry in entries if ", " in entry)
    if not urls:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        if pyproject.is_file():
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10
                import tomli as tomllib
            urls = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("urls", {})
    return (urls.get("Repository") or urls.get("Homepage") or "").rstrip("/")


def help_uri(policy: Policy, repository: str) -> str | None:
    """The rule's page under docs/rules/ at this release's tag; none for your own policies."""
    if not repository or not Path(policy.path).resolve().is_relative_to(builtin_policy_dir().resolve()):
        return None
    return f"{repository}/blob/v{__version__}/docs/rules/{quote(policy.slug)}.md"
