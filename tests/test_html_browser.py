"""The HTML port map in a real browser: headless Chromium, driven with Selenium, loading the page
from disk (file://, no server, no network).

Skipped, with the reason, where Chromium, chromedriver or selenium is missing (`.ci/run` installs
Debian's `chromium` and `chromium-driver` when it runs as root).
"""

from __future__ import annotations

import io
import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubelint_ports.cli import app

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
from screenshot import browser_missing, chromium_driver  # noqa: E402

from external_tools import unavailable  # noqa: E402

MISSING = browser_missing()


@pytest.fixture(autouse=True)
def _browser():
    """No browser: skip with the package to install; under CI=true, fail."""
    if MISSING:
        unavailable(f"no browser to drive: {MISSING}")

INVENTORY = "examples/inventory/nodes.yaml"
LETTER = {"conflict": "C", "capture": "X", "reserved": "R", "runs": "H", "may run": "?"}
STRENGTH = ["conflict", "capture", "reserved", "runs", "may run"]
runner = CliRunner()


def ports(*args: str) -> str:
    result = runner.invoke(app, ["ports", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium_driver(str(tmp_path_factory.mktemp("chromium-profile")), 1400, 900)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def examples_page(tmp_path_factory):
    """The bundled examples' map, and the same map as JSON (what the grid must show)."""
    folder = tmp_path_factory.mktemp("page")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        page = folder / "ports.html"
        page.write_text(ports("examples/", "--nodes", INVENTORY, "--format", "html"), encoding="utf-8")
        data = json.loads(ports("examples/", "--nodes", INVENTORY, "--format", "json"))
    return page, data


def load(browser, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(page.as_uri())
    WebDriverWait(browser, 20).until(lambda d: d.execute_script("return document.body.dataset.ready === 'true'"))


def cells(browser) -> dict[tuple[str, str], tuple[str, str]]:
    found = browser.execute_script(
        "return [...document.querySelectorAll('#grid .cell')].map(c => [c.dataset.node, c.dataset.port, "
        "c.textContent, c.dataset.state]);")
    return {(node, port): (text, state) for node, port, text, state in found}


def type_into(browser, element_id: str, text: str) -> None:
    field = browser.find_element("id", element_id)
    field.clear()
    field.send_keys(text)


def test_grid_holds_one_cell_per_node_and_port_as_the_json_map(browser, examples_page):
    page, data = examples_page
    load(browser, page)
    expected = {}
    for node in data["nodes"]:
        by_port: dict[str, list[dict]] = {}
        for claim in node["claims"]:
            by_port.setdefault(f"{claim['port']}/{claim['protocol']}", []).append(claim)
        for port, claims in by_port.items():
            state = min((c["state"] for c in claims), key=STRENGTH.index)
            count = sum(1 for c in claims if c["kind"] != "node daemon")
            expected[(node["name"], port)] = (LETTER[state] + (str(count) if count > 1 else ""), state)
    assert cells(browser) == expected
    assert cells(browser)[("edge-1", "443/TCP")] == ("C", "conflict")
    assert cells(browser)[("worker-1", "9100/TCP")][1] == "conflict"  # KP301, KP302 and KP303 meet there


def test_a_conflict_cell_shows_its_owners_and_findings(browser, examples_page):
    page, _ = examples_page
    load(browser, page)
    cell = browser.find_element("css selector", '.cell[data-node="worker-1"][data-port="9100/TCP"]')
    assert "monitoring/Deployment/metrics-proxy" in cell.get_attribute("title")  # on hover
    cell.click()
    details = browser.find_element("id", "details").text
    for text in ("worker-1 · 9100/TCP", "monitoring/Deployment/metrics-proxy", "monitoring/DaemonSet/node-exporter",
                 "undeclared: --web.listen-address", "KP301 host-port-conflict", "KP302 host-port-host-network-capture",
                 "examples/node-agents.yaml:51:15", "2 pods",
                 "Receives a packet to this port (from a pod or another machine): monitoring/Deployment/metrics-proxy",
                 "monitoring/Deployment/metrics-proxy ← receives the packet"):
        assert text in details, text
    browser.find_element("css selector", '.cell[data-node="edge-1"][data-port="443/TCP"]').click()
    details = browser.find_element("id", "details").text
    assert "edge/Deployment/edge-ingress" in details and "1 pod stays Pending" in details


def test_filters_by_port_namespace_node_and_problems(browser, examples_page):
    page, data = examples_page
    load(browser, page)
    type_into(browser, "filter-port", "9100")
    assert {port for _, port in cells(browser)} == {"9100/TCP"}
    visible = browser.execute_script(
        "return [...document.querySelectorAll('#findings li.finding')].filter(li => !li.hidden)"
        ".map(li => li.dataset.port);")
    assert visible and set(visible) == {"9100"}
    type_into(browser, "filter-port", "30000-32767")
    assert {int(port.split("/")[0]) for _, port in cells(browser)} == {30053, 30080, 30584, 31123, 31493}
    type_into(browser, "filter-port", "")

    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "filter-namespace")).select_by_value("edge")
    assert set(cells(browser)) == {("edge-1", "443/TCP"), ("worker-1", "8443/TCP"), ("worker-1", "30584/TCP"),
                                   ("worker-2", "30584/TCP")}
    type_into(browser, "filter-port", "30000-32767")
    # Within the node-port range worker-1 and worker-2 now look the same: one row for both.
    assert set(cells(browser)) == {("worker-1", "30584/TCP")}
    assert "worker-1 +1 alike (2 nodes)" in browser.find_element("id", "grid").text
    browser.find_element("css selector", ".group-toggle").click()
    assert set(cells(browser)) == {("worker-1", "30584/TCP"), ("worker-2", "30584/TCP")}
    type_into(browser, "filter-port", "")
    Select(browser.find_element("id", "filter-namespace")).select_by_value("")

    type_into(browser, "filter-node", "worker-2")
    assert {node for node, _ in cells(browser)} == {"worker-2"}
    type_into(browser, "filter-node", "")

    browser.find_element("id", "filter-problems").click()
    shown = cells(browser)
    assert shown and {state for _, state in shown.values()} <= {"conflict", "capture", "reserved"}
    assert ("worker-1", "6060/TCP") not in shown  # a pod that may run there, nothing found
    browser.find_element("id", "filter-problems").click()
    assert ("worker-1", "6060/TCP") in cells(browser)

    browser.find_element("css selector", '#findings li[data-port="443"] .show-on-map').click()
    assert browser.find_element("id", "filter-port").get_attribute("value") == "443"
    assert set(cells(browser)) == {("edge-1", "443/TCP")}


def test_screenshot_shows_the_grid_in_colour(browser, examples_page, tmp_path):
    from PIL import Image

    page, _ = examples_page
    load(browser, page)
    browser.find_element("css selector", '.cell[data-node="edge-1"][data-port="443/TCP"]').click()
    shot = tmp_path / "ports.png"
    assert browser.save_screenshot(str(shot))
    image = Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")
    assert image.size[0] >= 1000 and image.size[1] >= 600
    assert shot.stat().st_size > 30_000
    colours = Counter({rgb: count for count, rgb in image.getcolors(maxcolors=1 << 24)})
    assert len(colours) > 50, "a blank or single-colour page"
    # The state colours fill whole cells: conflict red, capture orange, runs blue, may-run pale blue.
    for state, rgb in {"conflict": (0xB3, 0x26, 0x1E), "capture": (0xD9, 0x68, 0x0B), "runs": (0x1F, 0x5F, 0xA8),
                       "may run": (0xA9, 0xC8, 0xEC)}.items():
        assert colours[rgb] > 200, f"no {state} cells on the screenshot"


def test_500_nodes_by_1000_ports_stay_usable(browser, tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    from portmap_corpus import NODES, write

    manifest, nodes = write(tmp_path)
    page = tmp_path / "ports.html"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        ports(manifest.name, "--nodes", nodes.name, "--format", "html", "-o", str(page))
    load(browser, page)
    status = browser.find_element("id", "grid-status").text
    assert status.endswith(f"({NODES} nodes) x 1050 ports"), status
    rows = int(status.split()[0])
    assert rows < 60, "identical nodes are grouped"
    in_dom = browser.execute_script("return document.querySelectorAll('#grid .cell').length")
    assert 0 < in_dom < 3000, "only the cells in view are in the page"
    # Scrolled to the far corner, the last port is drawn there.
    browser.execute_script("const g = document.getElementById('grid'); g.scrollLeft = g.scrollWidth; "
                           "g.scrollTop = g.scrollHeight; g.dispatchEvent(new Event('scroll'));")
    browser.execute_script("return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));")
    assert "30049/TCP" in {port for _, port in cells(browser)}
    browser.find_element("id", "group-nodes").click()  # every node on its own row
    status = browser.find_element("id", "grid-status").text
    assert status.startswith(f"{NODES + 1} rows"), status
    assert browser.execute_script("return document.querySelectorAll('#grid .cell').length") < 3000
    type_into(browser, "filter-node", "node-013")
    assert {node for node, _ in cells(browser)} == {"node-013"}
    assert cells(browser)[("node-013", "10001/TCP")][1] == "conflict"  # a DaemonSet and a pod pinned there


def test_the_page_works_under_its_content_security_policy(browser, examples_page):
    """Nothing the page does itself is refused by its CSP (its style and script hashes are right,
    it sets no inline handler or style attribute), and the filters' form submits nothing."""
    page, _ = examples_page
    watch = browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": (
        "window.__violations = []; document.addEventListener('securitypolicyviolation', "
        "(e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));")})
    try:
        load(browser, page)
        policy = browser.execute_script(
            "const m = document.querySelector('meta[http-equiv=\"Content-Security-Policy\"]'); return m && m.content")
        assert policy and policy.startswith("default-src 'none'; script-src 'sha256-")
        colour = browser.execute_script(
            "return getComputedStyle(document.querySelector('.s-conflict')).backgroundColor")
        assert colour == "rgb(179, 38, 30)", "the page's style applies"
        browser.find_element("css selector", '.cell[data-node="worker-1"][data-port="9100/TCP"]').click()
        assert "KP301 host-port-conflict" in browser.find_element("id", "details").text
        type_into(browser, "filter-port", "443")
        browser.execute_script("document.getElementById('filters').requestSubmit()")  # as Enter would
        assert browser.current_url == page.as_uri() and set(cells(browser)) == {("edge-1", "443/TCP")}
        browser.execute_script("return new Promise(r => setTimeout(r, 100));")  # violations are reported async
        assert browser.execute_script("return window.__violations") == []
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": watch["identifier"]})
