"""One self-contained HTML page: the port map as a grid of nodes x host ports, with filters, and the
lint findings beside it. `ports --format html` puts the map first, `lint --format html` the findings.

Nothing is fetched: the style, the script and the data are inside the file, so it opens from
`file://` on a machine without network. The data is the port map in compact form (node sets
interned, findings by index); finding messages are written once, in the list, and the grid's
details read them from there, which keeps 500 nodes x 1,000 ports well under 5 MB.

Every value here comes from someone's manifests (names, namespaces, file names, protocols,
messages quoting them), and the page is opened by someone else. So values reach the HTML text only
through `text` and `attribute` below, the script builds its nodes with `textContent` (never
`innerHTML`), the embedded data cannot end its <script> element (`script_safe`), and the page's
Content-Security-Policy runs only its own script and style (by hash) and fetches nothing: a value
that slipped through anyway would still not run.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from pathlib import Path
from typing import TextIO

from kubelint_ports import __version__
from kubelint_ports.findings import Finding, Report
from kubelint_ports.formatters import FormatOptions, printable
from kubelint_ports.formatters.port_map import facts_text, summary
from kubelint_ports.formatters.text import summary_line
from kubelint_ports.portmap import ANY_NODE, EVERY_NODE, PortMap, empty_port_map

PAGE_DIR = Path(__file__).resolve().parent / "page"
# The page's own style and script exactly as they stand between their tags: the CSP hashes these
# bytes, so a byte more (a newline added around them) and the browser refuses to run them.
STYLE = "\n" + (PAGE_DIR / "portmap.css").read_text(encoding="utf-8")
SCRIPT = "\n" + (PAGE_DIR / "portmap.js").read_text(encoding="utf-8")
LEGEND = (
    ("s-conflict", "C", "conflict", "pods or Services that cannot all have the port"),
    ("s-capture", "X", "capture", "one holder takes another's traffic"),
    ("s-reserved", "R", "node daemon", "a port a node daemon uses"),
    ("s-runs", "H", "runs", "held here: DaemonSet, running or pinned pod, nodePort"),
    ("s-may", "?", "may run", "a pod the scheduler may put here"),
)


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    """`lint --format html`: the findings first, then the map the engine made of the same run."""
    port_map = report.port_map
    if port_map is None:  # a report of no lint run (the node command's): nothing to map
        port_map = empty_port_map(report.findings)
    write_page(report, port_map, out, findings_first=True)


def write_page(report: Report, port_map: PortMap, out: TextIO, *, findings_first: bool) -> None:
    map_section = f"""<section id="map" aria-label="port map">
<h2>Port map</h2>
<form id="filters">
<label>Namespace <select id="filter-namespace"><option value="">all</option>{namespace_options(port_map)}</select></label>
<label>Node <input type="text" id="filter-node" placeholder="name or glob*"></label>
<label>Port <input type="text" id="filter-port" placeholder="443, 8000-8100"></label>
<label><input type="checkbox" id="filter-problems"> problems only</label>
<label><input type="checkbox" id="group-nodes" checked> group identical nodes</label>
</form>
<ul id="legend">{''.join(f'<li><span class="badge {css}">{letter}</span> {name}: {text}</li>'
                         for css, letter, name, text in LEGEND)}</ul>
<div id="grid-status" aria-live="polite"></div>
<div id="grid"><div id="grid-space"></div></div>
<noscript><p>The grid needs JavaScript; the findings list every problem.</p></noscript>
<aside id="details"><p class="muted">Click a cell for who holds the port there, and what lint found.</p></aside>
</section>"""
    sections = [findings_section(report), map_section]
    if not findings_first:
        sections.reverse()
    title = "kubelint-ports: findings and port map" if findings_first else "kubelint-ports: port map"
    data = json.dumps(page_data(port_map), separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    out.write(f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{content_security_policy()}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="kubelint-ports {__version__}">
<title>{title}</title>
<style>{STYLE}</style>
</head>
<body class="{'findings-first' if findings_first else 'map-first'}">
<header>
<h1>{title}</h1>
<p id="summary">{text(summary(port_map))}. Lint: {text(summary_line(report))}.</p>
{datapath_line(port_map)}
</header>
<div id="layout">
{sections[0]}
{sections[1]}
</div>
<script type="application/json" id="portmap-data">{script_safe(data)}</script>
<script>{SCRIPT}</script>
</body>
</html>
""")


def text(value: object) -> str:
    """A value shown on the page, as HTML text or a shown attribute (a tooltip): markup escaped,
    quotes too, and control characters written as escapes like every other format (a bidi
    override must not reorder what is read)."""
    return html.escape(printable(str(value)), quote=True)


def attribute(value: object) -> str:
    """A value the script reads back and compares with its data (`data-namespace`): escaped, not
    rewritten, or the filter would no longer match it."""
    return html.escape(str(value), quote=True)


def content_security_policy() -> str:
    """Nothing but the page's own style and script runs, found by their hashes (no nonce: the page
    is byte-identical across runs); no inline handler, no plugin, no request of any kind, no
    form submission, no <base>; and, in browsers with Trusted Types, no HTML from a string at all."""
    def digest(content: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(content.encode("utf-8")).digest()).decode("ascii") + "'"

    return (f"default-src 'none'; script-src {digest(SCRIPT)}; style-src {digest(STYLE)}; connect-src 'none'; "
            "img-src 'none'; object-src 'none'; form-action 'none'; base-uri 'none'; "
            "require-trusted-types-for 'script'; trusted-types 'none'")


def datapath_line(port_map: PortMap) -> str:
    facts = facts_text(port_map.datapath_facts) if port_map.datapath_facts else "no known facts (every plausible setup)"
    return f'<p id="datapath">Who receives the packets: decided with {text(facts)}.</p>'


def script_safe(data: str) -> str:
    """JSON inside <script>: `</script>` or `<!--` in a name must not end or bend the element, and
    U+2028/U+2029 are line ends to older JavaScript parsers. Outside strings JSON has none of
    these characters, and inside them the escapes decode to the same text."""
    return (data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def namespace_options(port_map: PortMap) -> str:
    names = sorted({holder.namespace for holder in port_map.holders if holder.namespace})
    return "".join(f'<option value="{attribute(name)}">{text(name)}</option>' for name in names)


def page_data(port_map: PortMap) -> dict:
    """The map in compact form: holders as arrays, node sets interned, findings by index."""
    node_index = {name: index for index, name in enumerate(port_map.nodes)}
    sets: dict[tuple[int, ...], int] = {}

    def node_set(names) -> int:
        key = tuple(sorted(node_index[name] for name in names))
        return sets.setdefault(key, len(sets))

    finding_index = {id(finding): index for index, finding in enumerate(port_map.findings)}
    holders = []
    for h in port_map.holders:
        marks = [[finding_index[id(m.finding)], m.state, -1 if m.nodes is None else node_set(m.nodes)]
                 for m in h.marks]
        holders.append([h.port, h.protocol, h.host_ip, h.kind, h.owner, h.namespace, h.pods, h.placement,
                        node_set(h.nodes), str(h.location) if h.location else "", h.note, marks])
    findings = [[f.rule_id, f.rule_name, str(f.severity), str(f.location), 1 if f.suppressed else 0]
                for f in port_map.findings]
    return {"version": 1, "nodes": port_map.nodes, "anyNode": ANY_NODE, "everyNode": EVERY_NODE,
            "sets": [list(key) for key in sets], "holders": holders, "findings": findings,
            # Who receives a packet on a node's port, by the holders there ("port/protocol:i,j", the
            # holders' indices): [winner, certain, the datapath model's sentence].
            "receivers": {f"{port}/{protocol}:{','.join(map(str, indices))}": [r.winner, 1 if r.certain else 0, r.text]
                          for (protocol, port, indices), r in port_map.receivers.items()}}


def findings_section(report: Report) -> str:
    parts = [f'<section id="findings" aria-label="findings"><h2>Findings ({len(report.findings)})</h2>']
    if report.diagnostics:
        parts.append('<h3>Input errors</h3><ol class="errors">')
        for diagnostic in report.diagnostics:
            parts.append(f'<li class="finding sev-error"><code class="loc">{text(diagnostic.location)}'
                         f'</code><p class="msg">{text(diagnostic.message)}</p></li>')
        parts.append("</ol>")
    if not report.findings:
        parts.append('<p class="muted">No findings.</p>')
    parts.append("<ol>")
    parts.extend(finding_item(index, finding) for index, finding in enumerate(report.findings))
    parts.append("</ol></section>")
    return "".join(parts)


def finding_item(index: int, finding: Finding) -> str:
    suppressed = f' <span class="muted">(suppressed: {text(finding.suppressed)})</span>' if finding.suppressed else ""
    related = "".join(f"<li><code>{text(r)}</code> {text(r.message)}</li>" for r in finding.related)
    port = "" if finding.port is None else f' data-port="{attribute(finding.port)}"'
    origin = f' <span class="muted">(from {text(finding.template)})</span>' if finding.template else ""
    classes = f'finding sev-{attribute(finding.severity)}{" suppressed" if finding.suppressed else ""}'
    return (f'<li id="f{index}" class="{classes}" data-rule="{attribute(finding.rule_id)}" '
            f'data-namespace="{attribute(finding.subject.namespace)}"{port}>'
            f'<span class="sev">{text(finding.severity)}</span> <b>{text(finding.rule_id)}</b> '
            f'{text(finding.rule_name)} '
            f'<code class="loc">{text(finding.location)}</code>{origin} '
            f'<span class="subject">{text(finding.subject)}</span>{suppressed}'
            + (f' <button type="button" class="show-on-map"{port}>show on map</button>' if port else "")
            + f'<p class="msg">{text(finding.message)}</p>'
            + (f'<ul class="related">{related}</ul>' if related else "") + "</li>")
