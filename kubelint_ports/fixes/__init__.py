"""`lint --fix`, `--unsafe-fixes`, `--diff`: what a finding's fix is, and the files it gives.

Stage 4, beside the engine: it reads a run's Report (findings and the model) and the files the
findings point at, and works out edits; the command line writes them or prints them as a diff.

- `describe(report, edits=False)` sets each fixable finding's `fix` (findings.Fix): safe or
  unsafe, and what it does. With `edits=True` it also works out the exact edits (a structural
  fix runs ruamel.yaml's round trip then, and a fix whose round trip would touch other lines is
  kept with `blocked` saying why).
- `changes(report, unsafe)` applies the available fixes of a described report to the files'
  texts in memory and returns each changed file's old and new bytes.

Everything outside an edit is kept byte for byte: a scalar's fix is a splice at its exact span
(the marks the finding's position came from), a removal or an addition replaces whole lines that
only the fix touches. A plain manifest is edited where the finding points. A rendered object's
fix is worked out on the rendered output, then carried to what the user wrote: a Helm chart's
values key or template literal (`fixes.helm`), a Kustomize patch or resource file
(`fixes.kustomize`); when it cannot be, the finding keeps its fix with `blocked` saying why.
KP401's fix writes the pod CIDR the inputs state into kube-proxy's configuration
(`fixes.kube_proxy`).
"""

from __future__ import annotations

from typing import Any

from kubelint_ports.policy_data import builtin_policy_data

# The rules whose findings `--fix` mends: the built-in policies that name a fix (`fix:`), read
# here from their data so that a run without such a finding never imports the fix machinery
# (ruamel, the free-port search); `FIXES` (fixes.rules) maps each to its fix.
FIXABLE = frozenset(data["id"] for _, data in builtin_policy_data() if "fix" in data)

# What `fixes.run` (one run's fixes) provides, imported from it when first asked for.
_FROM_RUN = frozenset({"Choices", "FileChange", "changes", "describe", "unified_diff"})

__all__ = ["FIXABLE", "FIXES", "SHOWN_IN", "Choices", "FileChange", "changes", "describe", "fixable", "fixable_rules",
           "reserved_ports_of", "unified_diff"]


# The report formats that say whether a finding has a fix (text's `[*]` and summary line, JSON's
# and SARIF's `fix`, the JSON report the HTML page offers for download, "(fixable with --fix)" in
# GitHub annotations, GitLab issues, JUnit failures and Markdown rows);
# tests/test_hostile_fix_describer.py keeps it equal to the formatters whose output a fix changes.
SHOWN_IN = frozenset({"text", "concise", "json", "sarif", "html", "github", "gitlab", "junit", "markdown"})


def fixable(report, formats=SHOWN_IN) -> bool:
    """Whether `describe` has anything to do: a finding of a fixable rule, with the model to fix it
    in, for a report in one of `formats` that shows fixes (every format does today; the test keeps
    a new one honest)."""
    return (not SHOWN_IN.isdisjoint(formats) and report.cluster is not None
            and any(finding.rule_id in FIXABLE for finding in report.findings))


def reserved_ports_of(report) -> frozenset[int]:
    """The node daemons' ports of the run (`Cluster.node_daemons`, from its node-reserved-port
    policies): a moved port avoids them."""
    return frozenset(report.cluster.node_daemons) if report.cluster is not None else frozenset()


def fixable_rules() -> tuple[str, ...]:
    return tuple(sorted(FIXABLE))


def __getattr__(name: str) -> Any:
    if name == "FIXES":
        from kubelint_ports.fixes.rules import FIXES

        return FIXES
    if name in _FROM_RUN:
        from kubelint_ports.fixes import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
