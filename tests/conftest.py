"""Test-wide shims, each for a dependency release that pyproject.toml allows (constraints/lowest.txt)."""

from __future__ import annotations

import inspect

import click.testing
import pytest

# click < 8.2 mixes stderr into stdout unless asked not to, and then has no combined `output`;
# click >= 8.2 keeps both apart and `output` holds the two interleaved. The tests read `stderr`
# and `output` as click >= 8.2 gives them: under an older click, capture them apart and give
# `output` both (stdout first: their interleaving is lost, which no test relies on).
if "mix_stderr" in inspect.signature(click.testing.CliRunner.__init__).parameters:
    _init = click.testing.CliRunner.__init__

    def _separate_streams(self, *args, mix_stderr: bool = False, **kwargs):
        _init(self, *args, mix_stderr=mix_stderr, **kwargs)

    click.testing.CliRunner.__init__ = _separate_streams
    click.testing.Result.output = property(lambda result: result.stdout + (result.stderr if result.stderr_bytes else ""))


# The fixtures that drive headless Chromium (tests/test_html_browser.py, tests/test_hostile_reports.py).
BROWSER_FIXTURES = {"browser", "browser_available"}


def pytest_collection_modifyitems(config, items) -> None:
    """Mark `browser` every test that drives a browser, wherever its file is: `pytest -m "not lab
    and not browser"` is the quick first run the README names."""
    for item in items:
        if BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
