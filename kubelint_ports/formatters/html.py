"""One self-contained HTML page: the port map as a grid of nodes x host ports, with filters, the
free ports, and the lint findings beside it. `ports --format html` puts the map first, `lint
--format html` the findings.

Nothing is fetched: the style, the script and the data are inside the file, so it opens from
`file://` on a machine without network. The data is the port map in compact form (node sets and
free-port runs interned, findings by index); finding messages are written once, in the list, and
the grid's details read them from there, which keeps 500 nodes x 1,000 ports well under 5 MB. The
report's JSON (what `--format json` writes) rides along gzipped, for the page's download link.
The page is byte-identical across runs: no clock, no random nonce; the commit it names is the
inputs' (`PortMap.source_commit`).

Every value here comes from someone's manifests (names, namespaces, labels, taints, file names,
protocols, messages quoting them) or from their repository (the commit), and the page is opened by
someone else. So values reach the HTML text only through `text` and `attribute` below, the script
builds its nodes with `textContent` (never `innerHTML`), the embedded data cannot end its <script>
element (`script_safe`), a link leads only under an http(s) `--link-base` to a percent-encoded
path, and the page's Content-Security-Policy runs only its own script and style (by hash) and
fetches nothing: a value that slipped through anyway would still not run.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import html
import io
import json
from pathlib import Path
from typing import TextIO
from urllib.parse import quote, urlsplit

from kubelint_ports import __version__
from kubelint_ports.findings import Finding, Report
from kubelint_ports.formatters import FormatOptions, printable
from kubelint_ports.formatters.port_map_writer import facts_text, summary, units_title
from kubelint_ports.formatters.text import summary_line
from kubelint_ports.portmap import (ANY_NODE, EVERY_NODE, FreeView, PortMap, empty_port_map, inputs_of,
                                    unit_node_name)
from kubelint_ports.sourceroot import find_source_root, relative_to_root
from kubelint_ports.vocabulary import Location

PAGE_DIR = Path(__file__).resolve().parent / "page"
# The page's own style and script exactly as they stand between their tags: the CSP hashes these
# bytes, so a byte more (a newline added around them) and the browser refuses to run them.
STYLE = "\n" + (PAGE_DIR / "portmap.css").read_text(encoding="utf-8")
# The script: port arithmetic (ports.js), then the page (portmap.js), in one element.
SCRIPT = "\n" + "\n".join((PAGE_DIR / name).read_text(encoding="utf-8") for name in ("ports.js", "portmap.js"))
LEGEND = (
    ("s-conflict", "C", "conflict", "pods or Services that cannot all have the port"),
    ("s-capture", "X", "capture", "one holder takes another's traffic"),
    ("s-reserved", "R", "node daemon", "a port a node daemon uses"),
    ("s-runs", "H", "runs", "held here: DaemonSet, running or pinned pod, nodePort"),
    ("s-may", "?", "may run", "a pod the scheduler may put here"),
)
JSON_FILE_NAME = "kubelint-ports.json"  # what the download link saves
OCCUPANCY_CELLS = 100  # the node-port range's bar: at most this many cells, each a slice of the range


def format_report(report: Report, out: TextIO, options: FormatOptions) -> None:
    """`lint --format html`: the findings first, then the map the engine made of the same run."""
    port_map = report.port_map
    if port_map is None:  # a report of no lint run (the node command's): nothing to map
        port_map = empty_port_map(report.findings)
        port_map.inputs = inputs_of(report)
    write_page(report, port_map, out, findings_first=True, options=options)


def write_page(report: Report, port_map: PortMap, out: TextIO, *, findings_first: bool,
               options: FormatOptions = FormatOptions()) -> None:
    """The page, written part by part as each is made: no part waits in memory for the others
    (the findings, the provenance and the data are each megabytes for 10,000 workloads)."""
    links = Links(options.link_base, options.source_root)
    title = "kubelint-ports: findings and port map" if findings_first else "kubelint-ports: port map"
    covered = units_title(port_map)
    if covered:  # unit names come from the inputs (config keys, Argo CD destinations): escaped
        title += f" ({html.escape(covered)})"
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
""")
    out.write(made_from(report, port_map, links, options))
    out.write("\n</header>\n<div id=\"layout\">\n")
    sections = [lambda: findings_section(report, links), lambda: map_section(port_map)]
    for make in sections if findings_first else reversed(sections):
        out.write(make())
        out.write("\n")
    out.write('</div>\n<script type="application/json" id="portmap-data">')
    write_data(page_data(port_map, links), out)
    out.write(f"""</script>
<script>{SCRIPT}</script>
</body>
</html>
""")


def write_data(data: dict, out: TextIO) -> None:
    """`script_safe(json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False))`,
    written a list item or mapping entry of each top-level value at a time: the whole text, and
    the encoder's pieces of it, were the page's peak of memory (7 MiB for 10,000 workloads)."""
    def dumps(value) -> str:
        return script_safe(json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False))

    out.write("{")
    for position, key in enumerate(sorted(data)):
        out.write(("," if position else "") + dumps(key) + ":")
        value = data[key]
        if isinstance(value, list):
            out.write("[")
            for index, item in enumerate(value):
                out.write(("," if index else "") + dumps(item))
            out.write("]")
        elif isinstance(value, dict):
            out.write("{")
            for index, name in enumerate(sorted(value)):
                out.write(("," if index else "") + dumps(name) + ":" + dumps(value[name]))
            out.write("}")
        else:
            out.write(dumps(value))
    out.write("}")


def map_section(port_map: PortMap) -> str:
    """The grid's frame and filters (the script draws the grid from the data), and the free ports."""
    return f"""<section id="map" aria-label="port map">
<h2>Port map</h2>
<form id="filters">
<label>Namespace <select id="filter-namespace"><option value="">all</option>{namespace_options(port_map)}</select></label>
<label>Node <input type="text" id="filter-node" placeholder="name, glob* or label=value"></label>
<label>Port <input type="text" id="filter-port" placeholder="443, 8000-8100"></label>
<label><input type="checkbox" id="filter-problems"> problems only</label>
<label><input type="checkbox" id="group-nodes" checked> group identical nodes</label>
</form>
<ul id="legend">{''.join(f'<li><span class="badge {css}">{letter}</span> {name}: {text}</li>'
                         for css, letter, name, text in LEGEND)}</ul>
<div id="grid-status" aria-live="polite"></div>
<div id="grid"><div id="grid-space"></div></div>
<noscript><p>The grid needs JavaScript; the findings list every problem.</p></noscript>
<aside id="details"><p class="muted">Click a cell for who holds the port there, and what lint found; click a node
for its labels, taints and free ports.</p></aside>
{free_section(port_map)}
</section>"""


def text(value: object) -> str:
    """A value shown on the page, as HTML text or a shown attribute (a tooltip): markup escaped,
    quotes too, and control characters written as escapes like every other format (a bidi
    override must not reorder what is read)."""
    return html.escape(printable(str(value)), quote=True)


def attribute(value: object) -> str:
    """A value the script reads back and compares with its data (`data-namespace`): escaped, not
    rewritten, or the filter would no longer match it."""
    return html.escape(str(value), quote=True)


class Links:
    """Locations as links to the repository's files under `--link-base` (a blob URL of the
    commit, as the Markdown summary takes it): only an http(s) base with a host makes links, so
    `javascript:` or `data:` never becomes one; the path, relative to the repository's top level,
    is percent-encoded, so nothing in a file name can end the URL or add to it."""

    def __init__(self, link_base: str, source_root: str):
        try:
            parts = urlsplit(link_base)
        except ValueError:  # `http://[::1`: a base that does not parse makes no links, as a non-http(s) one
            parts = urlsplit("")
        self.base = link_base.rstrip("/") if parts.scheme.lower() in ("http", "https") and parts.netloc else ""
        self.root = (source_root or find_source_root()) if self.base else ""

    def url(self, location: Location | None) -> str:
        """The location's address under the base ("" for none: no base, not a file, or a file
        outside the repository, which no relative address reaches)."""
        if not self.base or location is None or not location.is_file:
            return ""
        path = relative_to_root(location.path, self.root)
        if path.startswith("/") or ":" in path.split("/")[0]:
            return ""
        return f"{self.base}/{quote(path)}" + (f"#L{location.line}" if location.line else "")

    def html(self, location: Location, label: object = None) -> str:
        """`path:line:column` (or `label`) as a link when there is an address, else as code."""
        shown = text(location if label is None else label)
        url = self.url(location)
        if url:
            return f'<a class="loc" href="{attribute(url)}" rel="noreferrer"><code>{shown}</code></a>'
        return f'<code class="loc">{shown}</code>'


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


def made_from(report: Report, port_map: PortMap, links: Links, options: FormatOptions) -> str:
    """Which files the page shows (by role: linted, running, inventory), the commit they are at,
    and the report's JSON to download."""
    commit = port_map.source_commit()
    at = (f' at commit <code id="commit">{text(commit)}</code>' if commit
          else " (no commit: the inputs are not all in one git checkout)")
    count = len(port_map.inputs)
    items = "".join(f'<li><span class="role">{text(role)}</span> {links.html(Location(path, 0, 0), path)}</li>'
                    for role, path in port_map.inputs)
    files = (f"; what it shows comes from {count} file{'' if count == 1 else 's'}" if count
             else "; what it shows comes from no file")
    return (f'<p id="provenance">Made by kubelint-ports {text(__version__)}{at}{files}. '
            f'<a id="download-json" download="{JSON_FILE_NAME}" data-report="{packed_json(report, options)}" '
            f'hidden>Download the report (JSON)</a></p><ul id="inputs">{items}</ul>')


def packed_json(report: Report, options: FormatOptions) -> str:
    """The report as `--format json` writes it, gzipped (no timestamp in the header, so the page
    stays byte-identical) and in base64: 2.7 MB of findings for 500 nodes take 60 kB."""
    from kubelint_ports.formatters.json_format import format_report as write_json

    buffer = io.BytesIO()  # encoded as written: no copy of the text, none of its bytes
    stream = io.TextIOWrapper(buffer, encoding="utf-8", newline="")
    write_json(report, stream, dataclasses.replace(options, statistics=False))
    stream.flush()
    with buffer.getbuffer() as data:
        packed = gzip.compress(data, compresslevel=9, mtime=0)
    stream.detach()
    return base64.b64encode(packed).decode("ascii")


def script_safe(data: str) -> str:
    """JSON inside <script>: `</script>` or `<!--` in a name must not end or bend the element, and
    U+2028/U+2029 are line ends to older JavaScript parsers. Outside strings JSON has none of
    these characters, and inside them the escapes decode to the same text."""
    return (data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def namespace_options(port_map: PortMap) -> str:
    names = sorted({holder.namespace for holder in port_map.holders if holder.namespace})
    return "".join(f'<option value="{attribute(name)}">{text(name)}</option>' for name in names)


def free_views(port_map: PortMap) -> list[tuple[str, FreeView]]:
    """(unit, free ports) of each unit a page of several shows, else ("", the map's); [] when the
    map has no model (the node command's page)."""
    views = [(section.unit, section.free_view()) for section in port_map.units] if port_map.units else [
        ("", port_map.free_view())]
    return [] if any(view is None for _, view in views) else views


def free_section(port_map: PortMap) -> str:
    """The node-port range's occupancy as a bar and a table of who holds each taken nodePort
    (plain HTML), one of each per unit on a page of several, and a table the script fills with
    each node's free host ports."""
    views = free_views(port_map)
    if not views:
        return ""
    if len(views) == 1:
        free = views[0][1]
        low, high = free.node_port_range
        eph_low, eph_high = free.ephemeral_port_range
        ranges = (f"outside the node-port range {low}-{high} and the ephemeral range {eph_low}-{eph_high} (as\n"
                  "<code>ports --free</code> counts them; objects not in the inputs are not seen)")
    else:
        ranges = ("outside the unit's node-port and ephemeral ranges (as <code>ports --free</code>\n"
                  "counts them; objects not in the inputs are not seen)")
    occupancy = "".join(node_port_occupancy(free, unit) for unit, free in views)
    return f"""<div id="free">
<h3>Free ports</h3>
{occupancy}<p class="muted">Host ports a pod may take: from 1024 up, not held by a pod that may run on the node, a nodePort or a
node daemon, {ranges}.</p>
<div id="free-status" aria-live="polite"></div>
<table id="free-hosts"><thead><tr><th>node</th><th>free</th><th>free host ports</th></tr></thead><tbody></tbody></table>
</div>"""


def node_port_occupancy(free: FreeView, unit: str) -> str:
    """One unit's nodePorts: taken of total, the bar, who holds each taken one. The page of one
    unit keeps the elements' ids; a page of several heads each unit's with its name."""
    low, high = free.node_port_range
    total = high - low + 1
    taken = total - free.node_ports_free_count
    lowest = f"; lowest free {free.node_ports_free[0][0]}" if free.node_ports_free else ""
    rows = "".join(f'<tr><td>{port}</td><td>{text(", ".join(holders))}</td></tr>'
                   for port, holders in free.node_ports_taken)

    def named(name: str) -> str:
        return f'class="{name}"' if unit else f'id="{name}"'
    heading = f'<h4 class="unit">{text(f"unit {unit}")}</h4>\n' if unit else ""
    eph_low, eph_high = free.ephemeral_port_range
    ephemeral = f" Ephemeral range {eph_low}-{eph_high}." if unit else ""
    return f"""{heading}<p {named("nodeport-occupancy")}>nodePorts {low}-{high}: {taken} of {total} taken ({percent(taken, total)}),
{free.node_ports_free_count} free{lowest}.{ephemeral}</p>
<div {named("nodeport-bar")}>{occupancy_cells(free)}</div>
{f'<table {named("nodeports-taken")}><tr><th>nodePort</th><th>held by</th></tr>{rows}</table>' if rows else ''}
"""


def percent(part: int, whole: int) -> str:
    share = 100 * part / whole if whole else 0
    return f"{share:.1f}%" if share < 10 else f"{share:.0f}%"


def occupancy_cells(free: FreeView) -> str:
    """The range in equal slices, each shaded by how much of it is taken (0 none, 4 all), with the
    numbers in its tooltip."""
    low, high = free.node_port_range
    width = -(-(high - low + 1) // OCCUPANCY_CELLS)
    cells = []
    for start in range(low, high + 1, width):
        end = min(start + width - 1, high)
        free_here = sum(max(0, min(end, last) - max(start, first) + 1) for first, last in free.node_ports_free)
        taken = end - start + 1 - free_here
        level = 0 if not taken else 4 if not free_here else 1 + min(2, 3 * taken // (end - start + 1))
        cells.append(f'<span class="occ occ-{level}" title="{start}-{end}: {taken} taken"></span>')
    return "".join(cells)


def page_data(port_map: PortMap, links: Links | None = None) -> dict:
    """The map in compact form: holders as arrays, node sets and free-port runs interned, findings
    by index; links only when there is a link base."""
    links = links or Links("", "")
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
                        node_set(h.nodes), str(h.location) if h.location else "", h.note, marks,
                        links.url(h.location)])
    findings = [[f.rule_id, f.rule_name, str(f.severity), str(f.location), 1 if f.suppressed else 0,
                 links.url(f.location)] for f in port_map.findings]
    info = [port_map.node_info.get(name) for name in port_map.nodes]
    several = {}
    if port_map.units:  # rows named with their unit: which unit each is, and its pseudo rows
        unit_of = [0] * len(port_map.nodes)
        for number, section in enumerate(port_map.units):
            for node in section.nodes:
                unit_of[node_index[unit_node_name(section.unit, node)]] = number
        several = {"unitOf": unit_of,
                   # the free host ports of every node of a unit without an inventory ("" on one unit's page)
                   "unitHosts": [unit_node_name(section.unit, "") for section in port_map.units],
                   "everyRows": pseudo_rows(port_map, EVERY_NODE, node_index),
                   "anyRows": pseudo_rows(port_map, ANY_NODE, node_index)}
    return {"version": 2, "nodes": port_map.nodes, "anyNode": ANY_NODE, "everyNode": EVERY_NODE, **several,
            "sets": [list(key) for key in sets], "holders": holders, "findings": findings,
            # Per node: [[label, value]...], [taint...], cordoned; 0 for a node the inventory does not describe.
            "nodeInfo": [[[list(label) for label in i.labels], list(i.taints), 1 if i.unschedulable else 0] if i else 0
                         for i in info],
            "free": free_data(free_views(port_map)),
            # Who receives a packet on a node's port, by the holders there ("port/protocol:i,j", the
            # holders' indices): [winner, certain, the datapath model's sentence].
            "receivers": {f"{port}/{protocol}:{','.join(map(str, indices))}": [r.winner, 1 if r.certain else 0, r.text]
                          for (protocol, port, indices), r in port_map.receivers.items()}}


def pseudo_rows(port_map: PortMap, name: str, node_index: dict[str, int]) -> list[int]:
    """The rows of a page of several units that stand for no node: each unit's `name` row."""
    return [node_index[row] for section in port_map.units
            if (row := unit_node_name(section.unit, name)) in node_index]


def free_data(views: list[tuple[str, FreeView]]) -> dict | None:
    """Free ports as runs [first, last]: the nodePorts', and per node ("": every node, without an
    inventory) [name, index of its runs in `runs`, count]; nodes alike share their runs. On a page
    of several units, nodes are named with their unit (`[prod] a`, `[prod] ` for every node of a
    unit without an inventory) and the nodePorts are per unit (`nodePortsByUnit`)."""
    if not views:
        return None
    runs: dict[tuple[tuple[int, int], ...], int] = {}
    several = len(views) > 1
    hosts = [[unit_node_name(unit, scope.node) if several else scope.node, runs.setdefault(scope.free, len(runs)),
              scope.count] for unit, free in views for scope in free.host_ports]
    as_list: dict[tuple[int, int], list[int]] = {}  # one list per run, however many nodes have it
    shared = {"hosts": hosts,
              "runs": [[as_list.get(run) or as_list.setdefault(run, list(run)) for run in key] for key in runs]}
    if several:
        return {"nodePortsByUnit": [[list(run) for run in free.node_ports_free] for _, free in views], **shared}
    free = views[0][1]
    return {"nodePortRange": list(free.node_port_range), "nodePorts": [list(run) for run in free.node_ports_free],
            "nodePortCount": free.node_ports_free_count, **shared}


SEVERITY_TITLES = {"error": "Errors", "warning": "Warnings", "note": "Notes"}


def findings_section(report: Report, links: Links) -> str:
    """Input errors, then the findings: errors, warnings, notes, each in the report's order, and
    the suppressed ones last. Each keeps its index in the report as its id (`f3`): the grid's
    details link to it."""
    parts = [f'<section id="findings" aria-label="findings"><h2>Findings ({len(report.findings)})</h2>']
    if report.diagnostics:
        parts.append('<h3>Input errors</h3><ol class="errors">')
        for diagnostic in report.diagnostics:
            parts.append(f'<li class="finding sev-error">{links.html(diagnostic.location)}'
                         f'<p class="msg">{text(diagnostic.message)}</p></li>')
        parts.append("</ol>")
    if not report.findings:
        parts.append('<p class="muted">No findings.</p>')
    groups: dict[str, list[int]] = {}
    for index in sorted(range(len(report.findings)), key=lambda i: (bool(report.findings[i].suppressed),
                                                                    -report.findings[i].severity, i)):
        finding = report.findings[index]
        groups.setdefault("suppressed" if finding.suppressed else str(finding.severity), []).append(index)
    for group, indices in groups.items():
        parts.append(f'<h3 class="group-{group}">{SEVERITY_TITLES.get(group, "Suppressed")} ({len(indices)})</h3>'
                     f'<ol class="group-{group}">')
        parts.extend(finding_item(index, report.findings[index], links) for index in indices)
        parts.append("</ol>")
    parts.append("</section>")
    return "".join(parts)


def finding_item(index: int, finding: Finding, links: Links) -> str:
    suppressed = f' <span class="muted">(suppressed: {text(finding.suppressed)})</span>' if finding.suppressed else ""
    related = "".join(f"<li>{links.html(r)} {text(r.message)}</li>" for r in finding.related)
    port = "" if finding.port is None else f' data-port="{attribute(finding.port)}"'
    origin = f' <span class="muted">(from {text(finding.template)})</span>' if finding.template else ""
    classes = f'finding sev-{attribute(finding.severity)}{" suppressed" if finding.suppressed else ""}'
    return (f'<li id="f{index}" class="{classes}" data-rule="{attribute(finding.rule_id)}" '
            f'data-severity="{attribute(finding.severity)}" data-namespace="{attribute(finding.subject.namespace)}"'
            f'{port}><span class="sev">{text(finding.severity)}</span> <b>{text(finding.rule_id)}</b> '
            f'{text(finding.rule_name)} {links.html(finding.location)}{origin} '
            f'<span class="subject">{text(finding.subject)}</span>{suppressed}'
            + (f' <button type="button" class="show-on-map"{port}>show on map</button>' if port else "")
            + f'<p class="headline">{text(finding.short_words.short)}</p>'
            + f'<p class="msg">{text(finding.message)}</p>'
            + (f'<ul class="related">{related}</ul>' if related else "") + "</li>")
