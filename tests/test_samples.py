"""Every sample output in README.md and docs/ is what the tool prints today (tests/samples.py)."""

from __future__ import annotations

import re

import pytest

from samples import MARKER, ROOT, documents, run, samples

CASES = [(path, match["args"], match["output"]) for path in documents()
         for match in samples(path.read_text(encoding="utf-8"))]


def test_the_readme_shows_a_sample_run():
    assert any(path.name == "README.md" for path, _, _ in CASES)


def test_every_marker_opens_a_sample():
    """A marker whose block does not parse (no `$ kubelint-ports` line, another fence) would be
    skipped silently: count markers and parsed blocks."""
    for path in documents():
        text = path.read_text(encoding="utf-8")
        assert text.count(MARKER) == len(samples(text)), path


def test_console_blocks_that_show_our_output_are_samples():
    """A hand-written `$ kubelint-ports` block with output lines would drift unseen."""
    for path in documents():
        text = path.read_text(encoding="utf-8")
        for block in re.finditer(r"(?P<before>[^\n]*)\n```console\n\$ kubelint-ports [^\n]*\n(?P<rest>[^`]+)```", text):
            if block["rest"].strip():
                assert block["before"] == MARKER, (path, block.group(0)[:200])


@pytest.mark.parametrize(("path", "args", "shown"), CASES,
                         ids=[f"{path.relative_to(ROOT)}: {args}" for path, args, _ in CASES])
def test_sample_output_is_what_the_tool_prints(path, args, shown):
    assert shown == run(args), f"{path.relative_to(ROOT)} is stale: run `python tests/samples.py --write`"
