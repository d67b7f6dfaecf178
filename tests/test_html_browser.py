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
pytestmark = pytest.mark.browser

INVENTORY = "examples/inventory/nodes.yaml"
LETTER = {"conflict": "C", "capture": "X", "reserved": "R", "runs": "H", "may run": "?"}
STRENGTH = ["conflict", "capture", "reserved", "runs", "may run"]
runner = CliRunner()


def ports(*args: str) -> str:
    result = runner.invoke(app, ["ports", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def lint(*args: str) -> str:
    result = runner.invoke(app, ["lint", *args])
    assert result.exit_code == 1, result.output  # the examples hold errors on purpose
    return result.stdout


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless Chromium for the module. No browser: skip with the package to install; under
    CI=true, fail (external_tools.unavailable). The check is here, not in a function-scoped
    autouse fixture: pytest sets module-scoped fixtures up first, so such a check came too late
    and every test errored on starting a driver that is not there."""
    if MISSING:
        unavailable(MISSING)
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
        assert browser.current_url == page.as_uri() + "#port=443" and set(cells(browser)) == {("edge-1", "443/TCP")}
        browser.execute_script("return new Promise(r => setTimeout(r, 100));")  # violations are reported async
        assert browser.execute_script("return window.__violations") == []
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": watch["identifier"]})


# --- free ports, nodes, the address, the JSON, links ------------------------------------------------

LINK_BASE = "https://github.example/o/r/blob/0123abc"


@pytest.fixture(scope="module")
def lint_page(tmp_path_factory):
    """`lint --format html` of the examples with a link base, and `lint --format json` of the same run."""
    folder = tmp_path_factory.mktemp("lint-page")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        args = ("examples/", "--nodes", INVENTORY)
        page = folder / "lint.html"
        page.write_text(lint(*args, "--format", "html", "--link-base", LINK_BASE), encoding="utf-8")
        report = lint(*args, "--format", "json")
    return page, report


def test_filters_are_kept_in_the_address(browser, examples_page):
    page, _ = examples_page
    load(browser, page)
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "filter-namespace")).select_by_value("edge")
    type_into(browser, "filter-port", "30000-32767")
    browser.find_element("id", "group-nodes").click()  # one row per node
    browser.find_element("id", "filter-problems").click()
    address = browser.current_url
    assert address == page.as_uri() + "#namespace=edge&port=30000-32767&problems=1&group=0"
    shown = cells(browser)
    assert shown == {("worker-1", "30584/TCP"): ("X", "capture"), ("worker-2", "30584/TCP"): ("X", "capture")}
    # The address reopens the same view: fields, boxes and grid.
    browser.get("about:blank")
    browser.get(address)
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 20).until(lambda d: d.execute_script("return document.body.dataset.ready === 'true'"))
    assert browser.find_element("id", "filter-namespace").get_attribute("value") == "edge"
    assert browser.find_element("id", "filter-port").get_attribute("value") == "30000-32767"
    assert browser.find_element("id", "filter-problems").is_selected()
    assert not browser.find_element("id", "group-nodes").is_selected()
    assert cells(browser) == shown
    # An address pasted over it (a fragment changed) filters again; clearing the filters clears it.
    browser.execute_script("location.hash = 'port=443&node=edge-*'")
    WebDriverWait(browser, 5).until(lambda d: set(cells(d)) == {("edge-1", "443/TCP")})
    assert browser.find_element("id", "filter-node").get_attribute("value") == "edge-*"
    assert not browser.find_element("id", "filter-problems").is_selected()
    type_into(browser, "filter-port", "")
    type_into(browser, "filter-node", "")
    assert browser.current_url == page.as_uri()
    # A finding named in a cell's details is scrolled to without losing the filters.
    type_into(browser, "filter-port", "9100")
    browser.find_element("css selector", '.cell[data-node="worker-1"][data-port="9100/TCP"]').click()
    link = browser.find_element("css selector", "#details .cell-findings a")
    target = link.get_attribute("href").split("#")[1]
    link.click()
    assert browser.current_url == page.as_uri() + "#port=9100"
    assert "current" in browser.find_element("id", target).get_attribute("class")


def test_errors_are_listed_before_warnings_and_notes(browser, lint_page):
    page, report = lint_page
    load(browser, page)
    shown = browser.execute_script(
        "return [...document.querySelectorAll('#findings li.finding[id]')].map(li => "
        "[li.dataset.severity, li.classList.contains('suppressed')]);")
    findings = json.loads(report)["findings"]
    assert len(shown) == len(findings)
    rank = {"error": 0, "warning": 1, "note": 2}
    order = [(suppressed, rank[severity]) for severity, suppressed in shown]
    assert order == sorted(order) and order[0] == (False, 0)
    headings = browser.execute_script("return [...document.querySelectorAll('#findings h3')].map(h => h.textContent)")
    counts = json.loads(report)["summary"]
    assert [h for h in headings if not h.startswith("Input")] == [
        f"Errors ({counts['error']})", f"Warnings ({counts['warning']})", f"Notes ({counts['note']})"]
    # On screen too: the first error is above the first warning.
    first = {severity: browser.execute_script(
        f"return document.querySelector('#findings li.sev-{severity}[id]').getBoundingClientRect().top")
        for severity in ("error", "warning", "note")}
    assert first["error"] < first["warning"] < first["note"]


def test_the_download_link_saves_the_reports_json(browser, lint_page, tmp_path):
    page, report = lint_page
    load(browser, page)
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10).until(lambda d: d.execute_script(
        "return document.getElementById('download-json').href.startsWith('blob:')"))
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    browser.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    link = browser.find_element("id", "download-json")
    assert link.is_displayed() and link.text == "Download the report (JSON)"
    link.click()
    saved = downloads / "kubelint-ports.json"
    WebDriverWait(browser, 10).until(lambda _: saved.exists() and saved.read_text(encoding="utf-8") == report)
    assert json.loads(saved.read_text(encoding="utf-8"))["findings"]


def test_free_ports_and_the_node_port_ranges_occupancy_show(browser, examples_page):
    page, _ = examples_page
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        free = json.loads(ports("examples/", "--nodes", INVENTORY, "--free", "--format", "json"))
        near = json.loads(ports("examples/", "--nodes", INVENTORY, "--free", "--near", "9100", "--format", "json"))
    load(browser, page)
    [node_ports] = [scope for scope in free["scopes"] if scope["kind"] == "nodePort"]
    taken = 32767 - 30000 + 1 - node_ports["freeCount"]
    occupancy = browser.find_element("id", "nodeport-occupancy").text
    assert occupancy.startswith(f"nodePorts 30000-32767: {taken} of 2768 taken"), occupancy
    rows = browser.execute_script("return [...document.querySelectorAll('#nodeports-taken tr')].slice(1)"
                                  ".map(tr => [...tr.cells].map(td => td.textContent))")
    assert [int(port) for port, _ in rows] == sorted(int(port) for port in node_ports["taken"])
    assert ["30584", "edge/DaemonSet/web-server (hostNetwork), shop/Service/api"] in rows
    bar = browser.execute_script("return [...document.querySelectorAll('#nodeport-bar .occ')].map(c => c.title)")
    assert 50 < len(bar) <= 100 and bar[0].startswith("30000-") and bar[-1].split(":")[0].endswith("-32767")
    assert sum(int(title.split(": ")[1].split()[0]) for title in bar) == taken

    def free_rows():
        return browser.execute_script("return [...document.querySelectorAll('#free-hosts tbody tr')]"
                                      ".map(tr => [...tr.cells].map(td => td.textContent))")

    def runs(scope, low=0, high=65535):
        kept = [(max(a, low), min(b, high)) for a, b in scope["free"] if a <= high and b >= low]
        return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in kept)

    hosts = {scope["node"]: scope for scope in free["scopes"] if scope["kind"] == "hostPort"}
    assert {row[0]: row[1:] for row in free_rows()} == {
        name: [str(scope["freeCount"]), runs(scope)] for name, scope in hosts.items()}
    # The port filter cuts the lists; the node filter (a label here) picks the rows.
    type_into(browser, "filter-port", "9090-9110")
    type_into(browser, "filter-node", "node-role.kubernetes.io/worker=")
    assert {row[0]: row[2] for row in free_rows()} == {
        name: runs(hosts[name], 9090, 9110) for name in ("worker-1", "worker-2")}
    assert "9100" not in free_rows()[0][2]  # node-exporter's
    # A cell's details suggest the free ports nearest its port, as `ports --free --near` does.
    type_into(browser, "filter-node", "worker-1")
    browser.find_element("css selector", '.cell[data-node="worker-1"][data-port="9100/TCP"]').click()
    [suggested] = [scope["suggested"] for scope in near["scopes"] if scope["node"] == "worker-1"]
    assert (f"Free host ports nearest 9100 on worker-1: {', '.join(map(str, suggested))}"
            in browser.find_element("id", "details").text)
    # Anywhere in the range and beyond it, the page's pick is the model's.
    from kubelint_ports.model.free_ports import nearest

    every_free = [port for first, last in hosts["worker-1"]["free"] for port in range(first, last + 1)]
    for port in (1, 1024, 6060, 9100, 29999, 30000, 45000, 61000, 65535):
        picked = browser.execute_script("return nearestFree(arguments[0], arguments[1], 7)", hosts["worker-1"]["free"], port)
        assert picked == nearest(every_free, port, 7), port


def test_node_rows_show_labels_and_taints(browser, examples_page):
    page, _ = examples_page
    load(browser, page)
    browser.find_element("id", "group-nodes").click()  # every node on its own row
    labels = {row.find_element("css selector", ".node-name").text: row
              for row in browser.find_elements("css selector", ".rowlabel")}
    edge = labels["edge-1"]
    assert [tag.text for tag in edge.find_elements("css selector", ".tag")] == ["edge", "dedicated=edge:NoSchedule"]
    assert "labels: kubernetes.io/hostname=edge-1, node-role.kubernetes.io/edge" in edge.get_attribute("title")
    assert "taints: dedicated=edge:NoSchedule" in edge.get_attribute("title")
    assert [tag.text for tag in labels["worker-2"].find_elements("css selector", ".tag")] == ["worker", "cordoned"]
    edge.find_element("css selector", ".node-name").click()
    details = browser.find_element("id", "details").text
    for text in ("edge-1", "Labels", "node-role.kubernetes.io/edge", "Taints", "dedicated=edge:NoSchedule",
                 "Free host ports ("):
        assert text in details, text
    type_into(browser, "filter-node", "node-role.kubernetes.io/edge=")
    assert {node for node, _ in cells(browser)} == {"edge-1"}


def test_locations_link_under_the_link_base(browser, lint_page):
    page, _ = lint_page
    load(browser, page)
    links = browser.execute_script("return [...document.querySelectorAll('a.loc')].map(a => a.getAttribute('href'))")
    assert links and all(link.startswith(LINK_BASE + "/examples/") for link in links), links
    assert LINK_BASE + "/examples/node-agents.yaml#L51" in links
    assert LINK_BASE + "/examples/inventory/nodes.yaml" in links  # the inputs' list
    browser.find_element("css selector", '.cell[data-node="worker-1"][data-port="9100/TCP"]').click()
    where = browser.execute_script(
        "return [...document.querySelectorAll('#details table a.loc')].map(a => a.getAttribute('href'))")
    assert LINK_BASE + "/examples/node-agents.yaml#L51" in where


def test_no_link_without_an_http_link_base(browser, tmp_path):
    page = tmp_path / "lint.html"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        page.write_text(lint("examples/", "--nodes", INVENTORY, "--format", "html",
                             "--link-base", "javascript:alert(document.domain)//"), encoding="utf-8")
    load(browser, page)
    assert browser.execute_script("return document.querySelectorAll('a.loc').length") == 0
    browser.find_element("css selector", '.cell[data-node="worker-1"][data-port="9100/TCP"]').click()
    assert browser.execute_script("return document.querySelectorAll('#details a.loc').length") == 0


def units_page(browser, folder: Path) -> dict:
    """`ports --format html` of the units in `folder`, loaded; returns `ports --free --near 9400
    --count 1 --format json` of the same, to hold the page to."""
    page = folder / "ports.html"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        page.write_text(ports("--format", "html"), encoding="utf-8")
        free = json.loads(ports("--free", "--near", "9400", "--count", "1", "--format", "json"))
    load(browser, page)
    return free


def test_a_page_of_several_units_shows_each_units_free_ports_and_nodeport_rows(browser, tmp_path):
    """Two units on nodes of the same names: each unit's nodePort row is the nodePorts' row (not a
    node: not counted, not grouped), its nodePorts are its own, and so are its nodes' free host
    ports, as `ports --free` answers per unit."""
    from test_units import SERVICE, host_port_pods, inventory, write

    write(tmp_path, {"prod/app.yaml": host_port_pods("DaemonSet", "agent", "ops", 9400) + "\n---\n"
                     + SERVICE.format(name="web"),
                     "staging/app.yaml": SERVICE.format(name="other").replace("30080", "30081"),
                     "inventory/nodes.json": inventory(("node-1", {}), ("node-2", {})),
                     ".kubelint-ports.yaml": "nodes: [inventory/nodes.json]\nunits:\n  prod: [prod]\n"
                                             "  staging: [staging]\n"})
    free = units_page(browser, tmp_path)
    status = browser.find_element("id", "grid-status").text
    assert status.endswith("(4 nodes) x 3 ports"), status  # two rows of nodePorts are no nodes
    occupancy = browser.execute_script("return [...document.querySelectorAll('#free .nodeport-occupancy')]"
                                       ".map(p => p.textContent)")
    assert [text.split(":")[0] for text in occupancy] == ["nodePorts 30000-32767"] * 2
    assert [h.text for h in browser.find_elements("css selector", "#free h4.unit")] == ["unit prod", "unit staging"]
    rows = browser.execute_script("return [...document.querySelectorAll('#free-hosts tbody tr')]"
                                  ".map(tr => [...tr.cells].map(td => td.textContent))")
    counts = {unit["name"]: {scope["node"]: scope["freeCount"] for scope in unit["scopes"] if scope["node"]}
              for unit in free["units"]}
    assert {row[0]: int(row[1]) for row in rows} == {
        "[prod] node-1 +1 alike (2 nodes)": counts["prod"]["node-1"],
        "[staging] node-1 +1 alike (2 nodes)": counts["staging"]["node-1"]}
    assert counts["staging"]["node-1"] == counts["prod"]["node-1"] + 1  # 9400 is free in staging
    # A nodePort cell: its unit's nodePorts nearest it; a node's cell: its unit's host ports.
    browser.find_element("css selector", '.cell[data-node="[staging] (every node)"][data-port="30081/TCP"]').click()
    details = browser.find_element("id", "details").text
    assert "Free nodePorts nearest 30081: 30080, 30082" in details, details
    browser.find_element("id", "group-nodes").click()  # every node on its own row
    browser.find_element("css selector", '.cell[data-node="[prod] node-1"][data-port="9400/TCP"]').click()
    details = browser.find_element("id", "details").text
    [suggested] = [scope["suggested"] for scope in free["units"][0]["scopes"] if scope["node"] == "node-1"]
    assert f"Free host ports nearest 9400 on [prod] node-1: {suggested[0]}" in details, details
    assert "Also on every node at this port" not in details


def test_several_units_without_an_inventory_list_each_units_free_host_ports(browser, tmp_path):
    from test_units import SERVICE, host_port_pods, write

    write(tmp_path, {"prod/app.yaml": host_port_pods("DaemonSet", "agent", "ops", 9400),
                     "staging/app.yaml": SERVICE.format(name="other"),
                     ".kubelint-ports.yaml": "units:\n  prod: [prod]\n  staging: [staging]\n"})
    free = units_page(browser, tmp_path)
    rows = browser.execute_script("return [...document.querySelectorAll('#free-hosts tbody tr')]"
                                  ".map(tr => [...tr.cells].map(td => td.textContent))")
    assert [row[0] for row in rows] == ["[prod] every node (no --nodes inventory)",
                                       "[staging] every node (no --nodes inventory)"]
    browser.find_element("css selector", '.cell[data-port="9400/TCP"]').click()
    [suggested] = [scope["suggested"] for scope in free["units"][0]["scopes"] if scope["kind"] == "hostPort"]
    details = browser.find_element("id", "details").text
    assert f"Free host ports nearest 9400 on any node (no --nodes inventory): {suggested[0]}" in details, details
