"""Messages a reviewer reads in five seconds: every finding has a headline of at most 120
characters, one sentence of effect and one imperative sentence of fix (together at most 400
characters, median at most 250); the full analysis stays one step away (`-v`, SARIF markdown,
JSON `message`, the HTML page). Checked on every rule's snapshot and on the examples' output."""

from __future__ import annotations

import io
import json
import re
import statistics
from pathlib import Path

import pytest

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.formatters import FormatOptions, get_formatter
from kubelint_ports.vocabulary import (HEADLINE_LIMIT, SHORT_LIMIT, Message, fit_headline, sentences_of,
                                       shorten_middle)

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = sorted((ROOT / "tests" / "policies").glob("*/messages.snap"))
PART = re.compile(r"^  (headline|effect|fix): (.*)$")


def snapshot_words(path: Path) -> list[dict[str, str]]:
    """The three parts of every finding in a message snapshot."""
    entries: list[dict[str, str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        match = PART.match(line)
        if match is None:
            continue
        if match[1] == "headline":
            entries.append({})
        entries[-1][match[1]] = match[2]
    return entries


def check_words(headline: str, effect: str, fix: str, where: str) -> int:
    assert headline and len(headline) <= HEADLINE_LIMIT, f"{where}: headline of {len(headline)}: {headline}"
    assert len(sentences_of(effect)) <= 1, f"{where}: the effect is more than one sentence: {effect}"
    assert len(sentences_of(fix)) <= 1, f"{where}: the fix is more than one sentence: {fix}"
    short = Message(headline, effect, fix).short
    assert len(short) <= SHORT_LIMIT, f"{where}: {len(short)} characters: {short}"
    return len(short)


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.parent.name)
def test_every_snapshot_finding_reads_in_five_seconds(path: Path):
    entries = snapshot_words(path)
    assert entries, f"{path} holds no headline: rewrite it (KUBELINT_UPDATE_GOLDEN=1)"
    for entry in entries:
        check_words(entry.get("headline", ""), entry.get("effect", ""), entry.get("fix", ""), path.parent.name)


def test_snapshot_messages_are_short_on_the_median():
    lengths = [len(Message(e["headline"], e.get("effect", ""), e.get("fix", "")).short)
               for path in SNAPSHOTS for e in snapshot_words(path)]
    assert statistics.median(lengths) <= 250, statistics.median(lengths)


@pytest.fixture(scope="module")
def examples_report():
    return lint_paths([str(ROOT / "examples")], LintOptions())


def test_the_examples_read_in_five_seconds(examples_report):
    findings = examples_report.findings
    assert len(findings) > 20
    lengths = [check_words(f.headline, f.short_words.effect, f.short_words.fix, f"{f.rule_id} {f.location}")
               for f in findings]
    assert statistics.median(lengths) <= 250, statistics.median(lengths)
    # the analysis is kept whole, one step away
    assert max(len(f.message) for f in findings) > max(lengths)


def formatted(report, name: str, **options) -> str:
    out = io.StringIO()
    get_formatter(name)(report, out, FormatOptions(source_root=str(ROOT), **options))
    return out.getvalue()


def test_github_annotations_fit_the_box(examples_report):
    lines = [line for line in formatted(examples_report, "github").splitlines() if line.startswith("::")]
    annotations = [line for line in lines if "title=KP" in line]
    assert annotations
    for line in annotations:
        title = re.search(r"title=([^:]*)::", line)[1]
        message = line.split("::", 2)[2]
        first = message.split("%0A", 1)[0]
        assert len(first) <= 300 + 10, first  # effect and fix; escapes (%25, %2C) add a few characters
        assert re.match(r"KP\d{3} ", title)
        assert "docs/rules/KP" in message  # the rule's page, one click away


def test_sarif_text_is_headline_and_effect_and_markdown_the_analysis(examples_report):
    log = json.loads(formatted(examples_report, "sarif"))
    results = log["runs"][0]["results"]
    by_message = {f.message: f for f in examples_report.findings}
    for result in results:
        text, markdown = result["message"]["text"], result["message"]["markdown"]
        assert len(text) <= HEADLINE_LIMIT + SHORT_LIMIT
        assert len(markdown) >= len(text) - 5
    longest = max(examples_report.findings, key=lambda f: len(f.message))
    assert longest.message in by_message


def test_json_carries_the_three_parts_and_the_analysis(examples_report):
    data = json.loads(formatted(examples_report, "json"))
    for finding in data["findings"]:
        assert set(finding["short"]) == {"headline", "effect", "fix"}
        assert finding["short"]["headline"]
        assert len(finding["message"]) >= len(finding["short"]["headline"])


def test_markdown_and_junit_follow_the_text_form(examples_report):
    markdown = formatted(examples_report, "markdown")
    junit = formatted(examples_report, "junit")
    longest = max(examples_report.findings, key=lambda f: len(f.message))
    from kubelint_ports.formatters.markdown import text

    assert longest.message[-60:] not in markdown and longest.message[-60:] not in junit
    assert text(longest.headline)[:40] in markdown


def test_unknown_facts_are_named_once_at_the_end(tmp_path: Path):
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: a}\nspec:\n  containers:\n  - name: c\n"
        "    image: x\n    ports:\n    - {containerPort: 80, hostPort: 31123}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: b}\nspec:\n  type: NodePort\n"
        "  selector: {app: s}\n  ports:\n  - {port: 80, nodePort: 31123}\n", encoding="utf-8")
    report = lint_paths([str(manifest)], LintOptions())
    text = formatted(report, "text")
    depends = [f for f in report.findings if f.short_words.unknown]
    assert depends, [f.short_words for f in report.findings]
    assert text.count("Some findings depend on facts the inputs do not state") == 1
    assert "--proxy-mode" in text.split("Some findings depend on", 1)[1]
    for finding in depends:
        assert "--proxy-mode" not in finding.short_words.short


def test_names_are_shortened_in_the_middle_never_the_ports():
    name = "ingress-nginx-system-long/Service/ingress-nginx-controller-admission-webhook-extra"
    headline = fit_headline(f"hostPort 9100/TCP collides with nodePort 31999 of {name}", name)
    assert len(headline) <= HEADLINE_LIMIT
    assert "9100/TCP" in headline and "31999" in headline and "…" in headline
    assert headline.endswith("webhook-extra")
    assert shorten_middle("short", 10) == "short"


def test_sentences_split_outside_code_and_versions():
    assert sentences_of("portmap v0.7.5. Then `a. B` stays. e.g. this") == ["portmap v0.7.5.", "Then `a. B` stays. e.g. this"]


def test_the_analysis_as_markdown_is_escaped_whole():
    """SARIF's message.markdown carries inputs' words (a container's argument, a label value): no
    markup of theirs survives, a backtick of theirs included (it would end a code span early)."""
    from kubelint_ports.formatters.sarif import markdown_text

    hostile = "flag `--x=1` <img src=x onerror=alert(1)> [a](javascript:alert(1)) **b** & c"
    escaped = markdown_text(hostile)
    assert "<" not in escaped.replace("\\<", "") and "`" not in escaped.replace("\\`", "")
    assert "](" not in escaped and "**" not in escaped and "&amp;" in escaped
