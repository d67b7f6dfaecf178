"""docs/datapath.md shows what this lab run observed: regenerate it with
`python tests/lab/write_datapath_doc.py` when the lab's results change."""

from __future__ import annotations

import write_datapath_doc


def test_docs_match_the_lab(lab_ready):
    text = write_datapath_doc.DOC.read_text(encoding="utf-8")
    section = text.split(write_datapath_doc.BEGIN, 1)[1].split(write_datapath_doc.END, 1)[0]
    assert section.strip() == write_datapath_doc.results().strip(), \
        "docs/datapath.md is stale: run `python tests/lab/write_datapath_doc.py` (as root)"
