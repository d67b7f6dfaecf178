"""The README's picture of the port map: the bundled examples with their node inventory, drawn in
headless Chromium with a conflict cell opened.

    python docs/screenshot.py            # writes docs/portmap.png

Needs Debian's `chromium` and `chromium-driver` and the test extra (selenium). The browser tests
start Chromium through `chromium_driver` below too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PICTURE = REPO / "docs" / "portmap.png"
# This machine's network is closed: without these, Chromium keeps trying to reach Google's hosts.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--hide-scrollbars")


def browser_missing(who: str = "driving headless Chromium") -> str:
    """Why no browser can be driven here ("" when one can), in one sentence naming what to install:
    "driving headless Chromium needs `chromedriver`, which is not installed: apt-get install
    chromium-driver" (tests/external_tools.py's wording, and its lookup: a tool in /usr/sbin off
    PATH is said to be there)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return f"{who} needs `selenium`, which is not installed: pip install '.[test]'"
    tests = str(REPO / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from external_tools import missing_tools_reason

    browser = "chromium" if shutil.which("chromium") or not shutil.which("chromium-browser") else "chromium-browser"
    return missing_tools_reason((browser, "chromium"), ("chromedriver", "chromium-driver"), who=who) or ""


def chromium_driver(profile: str, width: int = 1400, height: int = 900):
    """Headless Chromium under Selenium, with a fresh profile directory; nothing is downloaded
    (both binaries are named, so Selenium Manager never runs)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")), options=options)


def examples_page(path: Path) -> None:
    subprocess.run([sys.executable, "-m", "kubelint_ports", "ports", "examples/", "--nodes",
                    "examples/inventory/nodes.yaml", "--format", "html", "-o", str(path)], cwd=REPO, check=True)


def main() -> int:
    missing = browser_missing(f"drawing {PICTURE.relative_to(REPO)}")
    if missing:
        print(missing, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kp-screenshot-") as scratch:
        page = Path(scratch) / "ports.html"
        examples_page(page)
        driver = chromium_driver(os.path.join(scratch, "profile"), 1400, 1000)
        try:
            driver.get(page.as_uri())
            driver.find_element("css selector", '.cell[data-node="worker-1"][data-port="9100/TCP"]').click()
            driver.save_screenshot(str(PICTURE))
        finally:
            driver.quit()
    print(f"wrote {PICTURE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
