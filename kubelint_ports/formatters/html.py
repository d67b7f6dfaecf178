"""One self-contained HTML page: the port map as a grid of nodes x host ports, with filters, and the
lint findings beside it. `ports --format html` puts the map first, `lint --format html` the findings.

Nothing is fetched: the style, the script and the data are inside the file, so it opens from
`file://` on a machine without network. The data is the port map in compact form (node sets
interned, findings by index); finding messages are written once, in the list, and the grid's
details read them from there, which keeps 500 nodes x 1,000 ports well under 5 MB.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import TextIO

from kubelint_ports import __version__
from kubelint_ports.findings import Finding, Report
from kubelint_ports.formatters import FormatOptions
from kubelint_ports.formatters.text import summary_line
from kubelint_ports.portmap import ANY_NODE, EVERY_NODE, PortMap, build_port_map, facts_text, port_map_of, summary

PAGE_DIR = Path(__file__).resolve().parent / "page"
LEGEND = (
    ("s-conflict", "C", "conflict", "pods or Services that cannot all have the port"),
    ("s-capture", "X", "capture", "one holder takes another's traffic"),
    ("s-reserved", "R", "node daemon", "a port a node daemon uses"),
    ("s-runs", "H", "runs", "held here: DaemonSet, running or pinned pod, nodePort"),
    ("s-may", "?", "may run", "a pod the scheduler may put here"),
)


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    """`lint --format html`: the findings first, then the map of the same run."""
    if report.cluster is None:  # a report not made by `lint_paths`: nothing to map
        from kubelint_ports.model import Cluster

        port_map = build_port_map(Cluster(), report.findings, report.rules)
    else:
        port_map = port_map_of(report)
    write_page(report, port_map, out, findings_first=True)


def write_page(report: Report, port_map: PortMap, out: TextIO, *, findings_first: bool) -> None:
    map_section = f"""<section id="map" aria-label="port map">
<h2>Port map</h2>
<form id="filters" onsubmit="return false">
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
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="kubelint-ports {__version__}">
<title>{title}</title>
<style>
{(PAGE_DIR / "portmap.css").read_text(encoding="utf-8")}</style>
</head>
<body class="{'findings-first' if findings_first else 'map-first'}">
<header>
<h1>{title}</h1>
<p id="summary">{html.escape(summary(port_map))}. Lint: {html.escape(summary_line(report))}.</p>
{datapath_line(port_map)}
</header>
<div id="layout">
{sections[0]}
{sections[1]}
</div>
<script type="application/json" id="portmap-data">{script_safe(data)}</script>
<script>
{(PAGE_DIR / "portmap.js").read_text(encoding="utf-8")}</script>
</body>
</html>
""")


def datapath_line(port_map: PortMap) -> str:
    facts = facts_text(port_map.datapath_facts) if port_map.datapath_facts else "no known facts (every plausible setup)"
    return f'<p id="datapath">Who receives the packets: decided with {html.escape(facts)}.</p>'


def script_safe(text: str) -> str:
    """JSON inside <script>: `</script>` or `<!--` in a name must not end or bend the element."""
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def namespace_options(port_map: PortMap) -> str:
    names = sorted({holder.namespace for holder in port_map.holders if holder.namespace})
    return "".join(f'<option value="{html.escape(name)}">{html.escape(name)}</option>' for name in names)


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
            parts.append(f'<li class="finding sev-error"><code class="loc">{html.escape(str(diagnostic.location))}'
                         f'</code><p class="msg">{html.escape(diagnostic.message)}</p></li>')
        parts.append("</ol>")
    if not report.findings:
        parts.append('<p class="muted">No findings.</p>')
    parts.append("<ol>")
    parts.extend(finding_item(index, finding) for index, finding in enumerate(report.findings))
    parts.append("</ol></section>")
    return "".join(parts)


def finding_item(index: int, finding: Finding) -> str:
    escape = html.escape
    suppressed = f' <span class="muted">(suppressed: {escape(finding.suppressed)})</span>' if finding.suppressed else ""
    related = "".join(f"<li><code>{escape(str(r))}</code> {escape(r.message)}</li>" for r in finding.related)
    port = "" if finding.port is None else f' data-port="{finding.port}"'
    origin = f' <span class="muted">(from {escape(finding.template)})</span>' if finding.template else ""
    return (f'<li id="f{index}" class="finding sev-{finding.severity}{" suppressed" if finding.suppressed else ""}" '
            f'data-rule="{escape(finding.rule_id)}" data-namespace="{escape(finding.subject.namespace)}"{port}>'
            f'<span class="sev">{finding.severity}</span> <b>{escape(finding.rule_id)}</b> {escape(finding.rule_name)} '
            f'<code class="loc">{escape(str(finding.location))}</code>{origin} '
            f'<span class="subject">{escape(str(finding.subject))}</span>{suppressed}'
            + (f' <button type="button" class="show-on-map" data-port="{finding.port}">show on map</button>'
               if finding.port is not None else "")
            +             f'<p class="msg">{escape(finding.message)}</p>'
            + (f'<ul class="related">{related}</ul>' if related else "") + "</li>")
