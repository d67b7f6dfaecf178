"""A pull request with three findings, as a reviewer meets them: three GitHub annotations, each of
which fits its box without scrolling (issue 36). The annotations are drawn in headless Chromium in
a box shaped like GitHub's (the diff column of a 1280-pixel window: about 760 pixels of text, 14px
system font, the title in bold, the message wrapped as written) and measured there."""

from __future__ import annotations

import html
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.formatters import FormatOptions, get_formatter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
from screenshot import browser_missing, chromium_driver  # noqa: E402

from external_tools import unavailable  # noqa: E402

pytestmark = pytest.mark.browser
BOX_WIDTH = 760  # pixels of text in the annotation box beside a diff
MAX_LINES = 8  # title, effect and fix, the object and page link, one related place: no more to read


def annotations(tmp_path: Path) -> list[tuple[str, str]]:
    """(title, message) of each annotation for a pull request touching one manifest."""
    (tmp_path / ".git").mkdir()
    manifest = tmp_path / "app.yaml"
    manifest.write_text((ROOT / "examples" / "nginx-hostport-nodeport.yaml").read_text(encoding="utf-8"),
                        encoding="utf-8")
    report = lint_paths([str(manifest)], LintOptions())
    import io

    out = io.StringIO()
    get_formatter("github")(report, out, FormatOptions(source_root=str(tmp_path)))
    found = []
    for line in out.getvalue().splitlines():
        if not line.startswith("::") or "title=KP" not in line:
            continue
        properties, message = line[2:].split("::", 1)
        title = next(part[6:] for part in properties.split(" ", 1)[1].split(",") if part.startswith("title="))
        found.append((unquote(title), unquote(message)))
    return found


def page(boxes: list[tuple[str, str]]) -> str:
    items = "".join(
        f'<div class="box"><div class="title">{html.escape(title)}</div><div class="message">{html.escape(message)}'
        f"</div></div>" for title, message in boxes)
    return ("<!doctype html><meta charset=utf-8><style>body{margin:0;font:14px/21px -apple-system,'Segoe UI',"
            f"Helvetica,Arial,sans-serif}}.box{{width:{BOX_WIDTH}px;border:1px solid #d0d7de;margin:8px;padding:8px;"
            "overflow:auto}.title{font-weight:600}.message{white-space:pre-wrap;overflow-wrap:anywhere}</style>"
            + items)


def test_three_findings_make_three_annotations_that_fit_their_boxes(tmp_path: Path):
    boxes = annotations(tmp_path)
    assert len(boxes) == 3, boxes
    missing = browser_missing()
    if missing:
        unavailable(missing)
    target = tmp_path / "annotations.html"
    target.write_text(page(boxes), encoding="utf-8")
    driver = chromium_driver(str(tmp_path / "profile"), 1280, 900)
    try:
        driver.get(target.as_uri())
        measured = driver.execute_script(
            "return [...document.querySelectorAll('.box')].map(b => [b.scrollWidth - b.clientWidth, "
            "b.scrollHeight, Math.round(b.scrollHeight / 21)])")
        driver.save_screenshot(str(tmp_path / "annotations.png"))
    finally:
        driver.quit()
    for (title, message), (overflow, height, lines) in zip(boxes, measured):
        assert overflow <= 0, f"scrolls sideways: {title}"
        assert lines <= MAX_LINES, f"{lines} lines ({height}px): {title} / {message}"
