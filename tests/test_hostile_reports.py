"""Reports are opened by someone other than the manifests' author. Every value that comes from the
inputs (file names, namespaces, object and node names, protocols, hostIPs, rule fields, messages,
suppression reasons, facts' sources) must reach the reader as the characters it is: never as
markup that runs (the HTML page, in headless Chromium) or renders (the Markdown job summary,
rendered as CommonMark with GFM tables by markdown-it-py, the parser rich already brings).

The browser tests skip, saying why, where Chromium, chromedriver or selenium is missing.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest

from kubelint_ports.engine import LintOptions, lint_paths
from kubelint_ports.findings import Finding, Report
from kubelint_ports.vocabulary import Diagnostic, Location, ObjectRef, Severity
from kubelint_ports.formatters import FormatOptions, get_formatter, printable
from kubelint_ports.formatters.html import write_page
from kubelint_ports.portmap import port_map_of
from kubelint_ports.sourceroot import relative_to_root

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
from screenshot import browser_missing, chromium_driver  # noqa: E402

from external_tools import unavailable  # noqa: E402

MISSING = browser_missing()


@pytest.fixture
def browser_available():
    """No browser: skip with the package to install; under CI=true, fail."""
    if MISSING:
        unavailable(MISSING)


needs_browser = pytest.mark.usefixtures("browser_available")


def hostile(field: str) -> str:
    """What a manifest's author could put in `field`: it closes a quoted attribute or the tag it
    is in, then opens an image whose error handler and a script that set `window.__pwned`, ends
    the <script> it may sit in and opens a comment, then a javascript: URL. `field` names it, so
    a failure says which field let it through."""
    return (f"{field}\"'><img src=x onerror=window.__pwned='{field}'><script>window.__pwned='{field}'</script>"
            f"</script><!--javascript:alert('{field}')")


LINK_BASE = "https://git.example/o/r/blob/0123abc"  # locations link under it, their paths percent-encoded
# A file name cannot hold `/`: this one closes the attribute it may land in and opens a tag.
HOSTILE_FILE = "manifest\"'><img src=x onerror=window.__pwned='file'>.yaml"
# Controls and a bidi override: shown as escapes, as every format writes them (`printable`).
CONTROLS = "node\u202e-evil\x1b[31m"
HOSTILE_NODES = [hostile("node-a"), hostile("node-b"), "plain-node", CONTROLS]


# --- the HTML page --------------------------------------------------------------------------------

def hostile_workspace(folder: Path) -> tuple[Path, Path]:
    """A DaemonSet (hostNetwork, a hostPort on a hostile protocol and hostIP), a Deployment and a
    NodePort Service on the same hostile protocol, each named and namespaced with a payload, on
    nodes named with payloads. Written as JSON, which YAML reads, so no payload needs quoting."""
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": {"name": hostile("daemonset-name"), "namespace": hostile("daemonset-namespace")},
                 "spec": {"template": {"spec": {"hostNetwork": True, "containers": [{
                     "name": hostile("container"), "args": ["--web.listen-address=:9100"],
                     "ports": [{"containerPort": 31123, "hostPort": 31123, "protocol": hostile("protocol"),
                                "hostIP": hostile("host-ip")}]}]}}}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": hostile("deployment-name"), "namespace": "javascript:alert('namespace')"},
                  "spec": {"replicas": 2, "template": {"spec": {"containers": [{
                      "name": "web",
                      "ports": [{"containerPort": 80, "hostPort": 8080, "name": hostile("port-name")}]}]}}}}
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": hostile("service-name"), "namespace": hostile("service-namespace")},
               "spec": {"type": "NodePort", "selector": {"app": hostile("selector")},
                        "ports": [{"port": 80, "nodePort": 31123, "protocol": hostile("protocol"),
                                   "name": hostile("service-port-name")}]}}
    manifest = folder / HOSTILE_FILE
    manifest.write_text("\n---\n".join(json.dumps(document) for document in (daemonset, deployment, service)),
                        encoding="utf-8")
    nodes = folder / "nodes.yaml"
    nodes.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": name, "labels": {"role": hostile("label"), hostile("label-key"): hostile("label-value"),
                                               f"node-role.kubernetes.io/{hostile('role')}": ""}},
         "spec": {"taints": [{"key": hostile("taint-key"), "value": hostile("taint-value"),
                              "effect": hostile("taint-effect")}]}}
        for name in HOSTILE_NODES]}), encoding="utf-8")
    return manifest, nodes


def hostile_page(folder: Path, monkeypatch) -> tuple[Path, dict[str, str]]:
    """The page of a real lint run over the hostile workspace, plus what only policies, Helm,
    suppressions, failed inputs and --cluster facts put on it: a finding with payloads in every
    rule field, an input error, a fact's source. Returns the page and field -> the value it shows."""
    manifest, nodes = hostile_workspace(folder)
    monkeypatch.chdir(folder)
    report = lint_paths([manifest.name], LintOptions(node_files=(nodes.name,)))
    [base] = [f for f in report.findings if f.rule_id == "KP101"]  # the Deployment's hostPort: on the map
    report.findings.append(dataclasses.replace(
        base, rule_id=hostile("rule-id"), rule_name=hostile("rule-name"), message=hostile("message"),
        suppressed=hostile("suppressed"), template=hostile("template"),
        related=(Location(hostile("related-file"), 4, 2, message=hostile("related-message")),)))
    report.diagnostics.append(Diagnostic(Location(hostile("error-file"), 2, 1), hostile("error-message")))
    port_map = port_map_of(report)
    port_map.datapath_facts = {"proxy-mode": {"value": "ipvs", "source": hostile("fact-source")}}
    port_map.commit = hostile("commit")  # what a repository could hold, were it not checked
    page = folder / "report.html"
    with page.open("w", encoding="utf-8") as out:
        write_page(report, port_map, out, findings_first=True,
                   options=FormatOptions(link_base=LINK_BASE, source_root=str(folder)))
    shown = {field: hostile(field) for field in (
        "node-a", "node-b", "daemonset-name", "daemonset-namespace", "deployment-name", "service-name",
        "service-namespace", "protocol", "host-ip", "rule-id", "rule-name", "message", "suppressed", "template",
        "related-file", "related-message", "error-file", "error-message", "fact-source", "label", "label-key",
        "label-value", "role", "taint-key", "taint-value", "taint-effect", "commit",
        "container")}  # the container's name: quoted in a finding's message
    shown["file"] = HOSTILE_FILE
    shown["namespace"] = "javascript:alert('namespace')"
    shown["controls"] = printable(CONTROLS)
    return page, shown


# Before the page's own script runs: record what a payload would do (set a flag, alert), and every
# request the CSP refuses. Page.addScriptToEvaluateOnNewDocument runs outside the page's CSP.
WATCH = """
window.__alerts = [];
window.__violations = [];
for (const name of ["alert", "confirm", "prompt"]) window[name] = (text) => { window.__alerts.push(String(text)); };
document.addEventListener("securitypolicyviolation",
  (event) => window.__violations.push(event.violatedDirective + " " + event.blockedURI + " " + event.sample));
"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if MISSING:
        unavailable(MISSING)
    driver = chromium_driver(str(tmp_path_factory.mktemp("chromium-profile")), 1400, 900)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
    yield driver
    driver.quit()


def load(browser, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(page.as_uri())
    WebDriverWait(browser, 20).until(lambda d: d.execute_script("return document.body.dataset.ready === 'true'"))


def everything_shown(browser) -> str:
    """The page's text with every group expanded and every cell opened in turn, and every tooltip."""
    for _ in range(10):  # each click redraws the grid: look the toggles up again
        collapsed = [t for t in browser.find_elements("css selector", ".group-toggle") if t.text == "+"]
        if not collapsed:
            break
        collapsed[0].click()
    texts = [browser.execute_script("return document.body.innerText")]
    count = browser.execute_script("return document.querySelectorAll('#grid .cell').length")
    for index in range(count):
        browser.execute_script("document.querySelectorAll('#grid .cell')[arguments[0]].click()", index)
        texts.append(browser.find_element("id", "details").text)
    rows = browser.execute_script("return document.querySelectorAll('#grid .rowlabel').length")
    for index in range(rows):  # a node's labels, taints and free ports
        browser.execute_script("document.querySelectorAll('#grid .rowlabel .node-name')[arguments[0]].click()", index)
        texts.append(browser.find_element("id", "details").text)
    texts += browser.execute_script("return [...document.querySelectorAll('[title]')].map(e => e.title)")
    return "\n".join(texts)


@needs_browser
def test_hostile_values_in_every_field_are_shown_as_text_and_never_run(browser, tmp_path, monkeypatch):
    page, shown = hostile_page(tmp_path, monkeypatch)
    load(browser, page)
    text = everything_shown(browser)
    # Nothing ran: no payload's flag, no alert, nothing refused by the CSP (nothing even tried).
    assert browser.execute_script("return window.__pwned === undefined ? null : String(window.__pwned)") is None
    assert browser.execute_script("return window.__alerts") == []
    assert browser.execute_script("return window.__violations") == []
    # No element came from a value: only the page's own two scripts, no image, frame, SVG or
    # other tag a payload names, no inline handler, no link but the page's own: to its findings,
    # to the report's JSON it made (a blob:), and to the files under the link base.
    assert browser.execute_script("return document.scripts.length") == 2
    assert browser.execute_script(
        "return document.querySelectorAll('img, svg, iframe, frame, object, embed, video, audio, math, base, link, "
        "details, form:not(#filters), meta:not([charset]):not([name]):not([http-equiv])').length") == 0
    assert browser.execute_script(
        "return [...document.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name))"
        ".filter(name => name.startsWith('on'))") == []
    links = browser.execute_script("return [...document.querySelectorAll('[href], [src], [action]')]"
                                   ".map(e => e.getAttribute('href') || e.getAttribute('src') || "
                                   "e.getAttribute('action'))")
    assert links and all(re.fullmatch(r"#f\d+|blob:null/[0-9a-f-]+", link) or (
        link.startswith(LINK_BASE + "/") and re.fullmatch(r"[A-Za-z0-9_.~/%-]+(#L\d+)?", link[len(LINK_BASE) + 1:]))
        for link in links), links
    linked = [link for link in links if link.startswith(LINK_BASE)]
    assert LINK_BASE + "/" + quote(HOSTILE_FILE) in linked, "the input file's name, percent-encoded"
    assert any(link.startswith(LINK_BASE + "/" + quote(HOSTILE_FILE) + "#L") for link in linked)
    # The page works: every node and port drawn (4 nodes x 3 ports, and the nodePort's row).
    assert browser.execute_script("return document.querySelectorAll('#grid .cell').length") == 13
    assert CONTROLS not in text and "\u202e" not in text and "\x1b" not in text
    # Every value is on the page as the characters it is.
    missing = [field for field, value in shown.items() if value not in text]
    assert missing == [], f"not shown as text: {missing}"
    headers = browser.execute_script("return [...document.querySelectorAll('.colhead')].map(c => c.innerText)")
    assert f"31123\n{hostile('protocol')}" in headers  # the grid's column header: where it ran before
    options = browser.execute_script(
        "return [...document.querySelectorAll('#filter-namespace option')].map(o => o.value)")
    assert hostile("daemonset-namespace") in options and hostile("service-namespace") in options


@needs_browser
def test_the_page_carries_a_csp_that_runs_only_its_own_script_and_style(browser, tmp_path, monkeypatch):
    page, _ = hostile_page(tmp_path, monkeypatch)
    html = page.read_text(encoding="utf-8")
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', html)
    assert policy and html.index(policy.group(0)) < html.index("<style>"), "the policy comes before what it governs"
    directives = {d.split()[0]: d.split()[1:] for d in policy.group(1).split(";") if d.strip()}

    def digest(tag: str) -> str:
        [content] = re.findall(rf"<{tag}>(.*?)</{tag}>", html, re.S)  # the one inline <script> / <style>
        return f"'sha256-{base64.b64encode(hashlib.sha256(content.encode('utf-8')).digest()).decode()}'"

    assert directives["default-src"] == ["'none'"]
    assert directives["script-src"] == [digest("script")] and directives["style-src"] == [digest("style")]
    for name in ("connect-src", "img-src", "object-src", "form-action", "base-uri"):
        assert directives[name] == ["'none'"], name
    assert directives["require-trusted-types-for"] == ["'script'"] and directives["trusted-types"] == ["'none'"]
    assert "unsafe" not in policy.group(1) and "data:" not in policy.group(1) and "*" not in policy.group(1)
    assert not [name for name in Tags(html).attributes if name.startswith("on")], "no inline event handler"

    load(browser, page)  # the page works under it: the grid is drawn, the style applies
    assert browser.execute_script("return document.querySelectorAll('#grid .cell').length") > 0
    assert browser.execute_script(
        "return getComputedStyle(document.querySelector('#grid .cell')).position") == "absolute"
    assert browser.execute_script("return window.__violations") == []
    # ... and enforced. Markup from a string is refused (Trusted Types), event handlers included:
    assert browser.execute_script("""
        const probe = document.createElement("div");
        const refused = [];
        try { probe.innerHTML = "<b>x</b>"; } catch (error) { refused.push(error.name); }
        try { probe.setAttribute("onclick", "window.__pwned = 1"); } catch (error) { refused.push(error.name); }
        return refused;""") == ["TypeError", "TypeError"]
    # and markup that slipped into the page's HTML would not run either, while the page still does.
    slipped = tmp_path / "slipped.html"
    slipped.write_text(html.replace("<header>", "<header><img src=x onerror=\"window.__pwned='img'\">"
                                    "<script>window.__pwned='script'</script><a id=probe href=\"javascript:window."
                                    "__pwned='href'\" onclick=\"window.__pwned='onclick'\">probe</a>", 1),
                       encoding="utf-8")
    load(browser, slipped)
    browser.find_element("id", "probe").click()
    browser.execute_script("return new Promise(r => setTimeout(r, 200));")  # violations are reported async
    assert browser.execute_script("return window.__pwned === undefined ? null : String(window.__pwned)") is None
    refused = " ".join(browser.execute_script("return window.__violations"))
    for directive in ("img-src", "script-src-elem", "script-src-attr"):
        assert directive in refused, (directive, refused)


class Tags(HTMLParser):
    """The tags and attribute names of an HTML text, as a browser's tokenizer reads them."""

    def __init__(self, html: str):
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)


# --- the Markdown summary --------------------------------------------------------------------------

def markdown_hostile(field: str) -> str:
    """What would render as markup on GitHub if it reached the summary raw: HTML, an image, links
    (javascript:, autolinks, bare URLs), a code span, emphasis, a table cell break, a line break."""
    return (f"{field} <details open><summary>s</summary> ![x](https://evil.example/{field}.png) "
            f"[c](javascript:alert(1)) <img src=x onerror=alert(1)> a|b \\| `t` ``u`` *e* _u_ ~~s~~ "
            f"&amp; <https://evil.example> www.evil.example :smile:\nnext line")


def markdown_report() -> tuple[Report, list[list[str]]]:
    """A report with a payload in every field the summary shows, and the rows it must show."""
    path = "k8s/" + markdown_hostile("file")  # first segment `k8s`: a link when there is a link base
    finding = Finding(Location(path, 3, 5), markdown_hostile("rule-id"), markdown_hostile("rule-name"),
                      Severity.ERROR, markdown_hostile("message"),
                      ObjectRef("v1", markdown_hostile("kind"), markdown_hostile("namespace"),
                                markdown_hostile("name")),
                      suppressed=markdown_hostile("suppressed"))
    plain = Finding(Location("app.yaml", 7, 9), "KP101", "host-port", Severity.WARNING, "claims hostPort 80/TCP",
                    ObjectRef("v1", "Pod", "shop", "web"))
    error = Diagnostic(Location(markdown_hostile("error-file"), 2, 1), markdown_hostile("error-message"))

    def shown(location: Location) -> str:  # as the summary gives it: relative to the top level
        return str(dataclasses.replace(location, path=relative_to_root(location.path, str(Path.cwd()))))

    rows = [["input error", "", shown(error.location), "", error.message],
            [f"error (suppressed: {finding.suppressed})", f"{finding.rule_id} {finding.rule_name}",
             shown(finding.location), str(finding.subject), finding.message],
            ["warning", "KP101 host-port", "app.yaml:7:9", "shop/Pod/web", "claims hostPort 80/TCP"]]
    return Report([plain, finding], [error], ()), rows


class Rendered(HTMLParser):
    """The tags, link targets and table cells (their text, `<br>` as a line break) of rendered HTML."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.links: list[str] = []
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag == "a":
            self.links.append(dict(attrs).get("href", ""))
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []
        elif tag == "br" and self.cell is not None:
            self.cell.append("\n")

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.rows[-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


@pytest.mark.parametrize("link_base", ["", "https://github.example/o/r/blob/0123abc"])
def test_markdown_summary_shows_hostile_values_as_text(link_base):
    markdown_it = pytest.importorskip("markdown_it")
    report, rows = markdown_report()
    out = io.StringIO()
    get_formatter("markdown")(report, out, FormatOptions(link_base=link_base, show_suppressed=True,
                                                         source_root=str(Path.cwd())))
    summary = out.getvalue()
    rendered = Rendered(markdown_it.MarkdownIt("commonmark").enable("table").enable("strikethrough").render(summary))
    # Nothing but the report's own markup: no HTML, image, emphasis or code span from a value.
    assert rendered.tags <= {"h2", "p", "table", "thead", "tbody", "tr", "th", "td", "code", "a", "br"}, rendered.tags
    # Links only to the repository's files, never to what a value names.
    assert all(link.startswith(link_base + "/") for link in rendered.links), rendered.links
    assert len(rendered.links) == (3 if link_base else 0), "one per file: the input error and both findings"
    # Every row keeps its five cells, each showing the value exactly as it is.
    assert rendered.rows[0] == ["severity", "rule", "location", "object", "message"]
    assert rendered.rows[1:] == rows
    # What GitHub links beyond CommonMark (bare URLs, www., :emoji:) stays broken up by escapes.
    outside_links = re.sub(r"\]\(https://github\.example/[^)\s]*\)", "]()", summary)
    assert "://" not in outside_links and "www." not in outside_links and ":smile:" not in outside_links


def test_the_pages_data_written_in_parts_is_the_data_made_script_safe():
    """`write_data` writes the page's data a part at a time; the text is what escaping the whole
    JSON gives, and a value cannot end the <script> element in any part."""
    from kubelint_ports.formatters.html import script_safe, write_data

    data = {"holders": [[1, "</script><script>alert(1)</script>", {"b": "\u2028", "a": "&amp;"}], [], None],
            "receivers": {"80/TCP:0": ["ns/Pod/ü", 1, "<!--"], "443/TCP:1,2": []}, "nodes": [],
            "empty": {}, "version": 2, "anyNode": "(any node)", "free": None, "nested": [[["<"]]]}
    written = io.StringIO()
    write_data(data, written)
    whole = script_safe(json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False))
    assert written.getvalue() == whole
    assert "<" not in written.getvalue() and json.loads(written.getvalue()) == data


@needs_browser
def test_a_page_of_units_with_hostile_names_shows_them_as_text_and_runs_nothing(browser, tmp_path, monkeypatch):
    """Deployment units are named by the configuration (or an overlay's path): on a page of
    several, the names head each unit's free ports and name its nodes' rows, as text only."""
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
               "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}}
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "s.yaml").write_text(json.dumps(service), encoding="utf-8")
    (tmp_path / ".kubelint-ports.yaml").write_text(json.dumps(
        {"units": {hostile("unit-a"): ["a"], hostile("unit-b"): ["b"]}}), encoding="utf-8")
    from typer.testing import CliRunner

    from kubelint_ports.cli import app

    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(app, ["ports", "--format", "html", "-o", "page.html"])
    assert done.exit_code == 0, done.output
    load(browser, tmp_path / "page.html")
    text = everything_shown(browser)
    assert browser.execute_script("return window.__pwned === undefined ? null : String(window.__pwned)") is None
    assert browser.execute_script("return window.__alerts") == []
    assert browser.execute_script("return window.__violations") == []
    assert browser.execute_script("return document.scripts.length") == 2  # the page's own two
    assert browser.execute_script("return document.querySelectorAll('img, svg, iframe, object, embed').length") == 0
    headings = [h.text for h in browser.find_elements("css selector", "#free h4.unit")]
    assert headings == [f"unit {hostile('unit-a')}", f"unit {hostile('unit-b')}"]
    assert f"[{hostile('unit-a')}] (every node)" in text
    assert "Free nodePorts" in text  # a unit's nodePorts row found its unit's free ports


@pytest.mark.parametrize("link_base", ["http://[::1", "https://[", "javascript:alert(1)", "//host/o/r"])
@pytest.mark.parametrize("command", ["lint", "ports"])
def test_a_link_base_that_does_not_parse_makes_no_links_and_no_crash(tmp_path, link_base, command):
    """`--link-base` is typed by a person, or set in a workflow from a repository's values: one that
    urllib cannot split (an unclosed IPv6 bracket) is a base that makes no links, like a
    non-http(s) one, in the page of `lint` and of `ports`; never an internal error."""
    import subprocess

    page = tmp_path / "page.html"
    done = subprocess.run([sys.executable, "-m", "kubelint_ports", command,
                           str(ROOT / "examples" / "nginx-hostport-nodeport.yaml"), "--format", "html",
                           "--link-base", link_base, "-o", str(page)], capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    assert "internal error" not in done.stderr
    assert 'class="loc" href=' not in page.read_text(encoding="utf-8")
