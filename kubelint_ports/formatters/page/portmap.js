// kubelint-ports port map: the grid of nodes x host ports, drawn from the data the Python side
// embeds (the lint run's model and findings). Only the cells in view are in the DOM, and nodes
// whose ports look the same collapse into one row, so 500 nodes x 1,000 ports stay usable.
// Beside it: each node's free host ports, and the filters, kept in the address's fragment
// (#namespace=edge&port=443) so a filtered view can be bookmarked or sent.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("portmap-data").textContent);
  const STATES = ["conflict", "capture", "reserved", "runs", "may run"];
  const LETTER = {conflict: "C", capture: "X", reserved: "R", runs: "H", "may run": "?"};
  const CLASS = {conflict: "s-conflict", capture: "s-capture", reserved: "s-reserved", runs: "s-runs",
                 "may run": "s-may"};
  const CELL_W = 46, ROW_H = 24, LABEL_W = 230, HEAD_H = 36, OVERSCAN = 3;

  const nodeSets = data.sets.map((members) => new Set(members));
  const findings = data.findings.map((f, index) => ({
    index, rule: f[0], name: f[1], severity: f[2], location: f[3], suppressed: !!f[4], url: f[5]}));
  const holders = data.holders.map((h, index) => ({
    index, port: h[0], protocol: h[1], hostIP: h[2], kind: h[3], owner: h[4], namespace: h[5], pods: h[6],
    placement: h[7], set: h[8], nodes: data.sets[h[8]], location: h[9], note: h[10], url: h[12],
    marks: h[11].map((m) => ({finding: findings[m[0]], state: m[1], nodes: m[2] < 0 ? null : nodeSets[m[2]]})),
  }));
  // Per node index: {labels: [[key, value]...], taints: ["key=value:Effect"...], cordoned}, or null.
  const nodeInfo = data.nodeInfo.map((i) => i ? {labels: i[0], taints: i[1], cordoned: !!i[2]} : null);
  // Free ports as runs [first, last]: each node's host ports ("" stands for every node when
  // there is no inventory), and the nodePorts.
  const free = data.free;
  const freeByNode = new Map(free ? free.hosts.map(([name, runs, count]) => [name, {runs, count}]) : []);
  const nodeIndex = new Map(data.nodes.map((name, index) => [name, index]));
  // Rows that are no node: the nodePorts' row (every node) and that of pods whose node is unknown
  // (any node), one of each per deployment unit on a page of several, where the Python side lists
  // them (`everyRows`, `anyRows`), gives each row's unit (`unitOf`) and the key of each unit's
  // every-node free host ports (`unitHosts`; "" on a page of one unit).
  const rowOf = (name) => (nodeIndex.has(name) ? [nodeIndex.get(name)] : []);
  const unitOf = (node) => (data.unitOf ? data.unitOf[node] : 0);
  const wholeUnit = (node) => (data.unitHosts ? data.unitHosts[unitOf(node)] : "");
  const wholeUnits = new Set(data.unitHosts || [""]);
  const everyRows = new Set(data.everyRows || rowOf(data.everyNode));
  const PSEUDO = new Set([...everyRows, ...(data.anyRows || rowOf(data.anyNode))]);

  const holdersByPort = new Map();
  // A column's port and protocol, kept apart: a protocol is whatever the manifest wrote, "/" too.
  const columnOf = new Map();
  for (const holder of holders) {
    const key = holder.port + "/" + holder.protocol;
    if (!holdersByPort.has(key)) holdersByPort.set(key, []);
    holdersByPort.get(key).push(holder);
    columnOf.set(key, {port: holder.port, protocol: holder.protocol});
  }

  // The datapath model's answer for everything that holds this port on this node (filters aside).
  function receiverOf(node, key) {
    const here = (holdersByPort.get(key) || []).filter((h) => nodeSets[h.set].has(node));
    const answer = data.receivers[key + ":" + here.map((h) => h.index).sort((a, b) => a - b).join(",")];
    return answer ? {winner: answer[0], certain: !!answer[1], text: answer[2]} : null;
  }

  const $ = (id) => document.getElementById(id);
  const grid = $("grid"), space = $("grid-space"), details = $("details"), statusLine = $("grid-status");
  const filters = {namespace: $("filter-namespace"), node: $("filter-node"), port: $("filter-port"),
                   problems: $("filter-problems"), group: $("group-nodes")};
  const expanded = new Set();
  let view = {rows: [], columns: []};
  let selected = null;

  // Every value in `data` comes from someone's manifests. It reaches the page only through `el`:
  // as a text node or an attribute value, never as markup (no innerHTML anywhere; the page's
  // CSP asks for Trusted Types, so a browser that has them refuses one). What is shown passes
  // `printable`: controls, line separators and bidi overrides written as escapes, as in the other
  // formats (formatters.printable), so a name cannot reorder or break what is read next to it.
  const UNPRINTABLE = /[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
  function printable(text) {
    return String(text).replace(UNPRINTABLE, (c) => c === "\n" ? "\\n" : c === "\r" ? "\\r"
      : c.charCodeAt(0) < 0x100 ? "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0")
      : "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  }

  // el("td", {class: "x", title: ["line", "line"], dataset: {...}, style: {...}}, "text", child...):
  // strings become text nodes; a title is shown text (an array: one line each); data-* values
  // stay as they are (the script compares them with `data`); styles go through the CSSOM, which
  // the CSP allows where a style="" attribute would be refused.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(props || {})) {
      if (value === null || value === undefined) continue;
      if (name === "style") Object.assign(node.style, value);
      else if (name === "dataset") Object.assign(node.dataset, value);
      else if (name === "title") node.title = [].concat(value).map(printable).join("\n");
      else node.setAttribute(name, value);
    }
    for (const child of children) {
      if (child === null || child === undefined || child === "") continue;
      node.append(child instanceof Node ? child : printable(child));
    }
    return node;
  }

  // A location: a link when the page was made with --link-base (the address is built and
  // percent-encoded by the Python side, under an http(s) base only), else code.
  function place(location, url) {
    const code = el("code", null, location || "-");
    return url ? el("a", {href: url, class: "loc", rel: "noreferrer"}, code) : code;
  }

  function badge(state) {
    return el("span", {class: "badge " + CLASS[state]}, LETTER[state]);
  }

  function marksOn(holder, node) {
    return holder.marks.filter((m) => m.nodes === null || m.nodes.has(node));
  }

  function stateOn(holder, node) {
    let best = STATES.indexOf(holder.placement);
    for (const m of marksOn(holder, node)) {
      if (m.state && !m.finding.suppressed) best = Math.min(best, STATES.indexOf(m.state));
    }
    return STATES[best];
  }

  function strongest(entries) {
    return STATES[Math.min(...entries.map((e) => STATES.indexOf(e.state)))];
  }

  // "web-*" globs, otherwise a case-insensitive substring of the name; "key=value" (a value may
  // be a glob) or "key=" matches a node's label instead, "=value" any label's value.
  function nodeMatcher(text) {
    text = text.trim().toLowerCase();
    if (!text) return () => true;
    const equals = text.indexOf("=");
    if (equals < 0) {
      const test = globTest(text);
      return (node) => test(data.nodes[node]);
    }
    const key = text.slice(0, equals), value = text.slice(equals + 1);
    const valueTest = value ? globTest(value) : () => true;
    return (node) => !!nodeInfo[node] && nodeInfo[node].labels.some(([k, v]) =>
      (!key || k.toLowerCase() === key) && valueTest(v));
  }

  // The free host ports of a node of the grid (by index): its own, or every node's without an
  // inventory; null for the nodePorts' row and when the page has no free ports.
  function freeOf(node) {
    if (!free || everyRows.has(node)) return null;
    const entry = freeByNode.get(data.nodes[node]) || freeByNode.get(wholeUnit(node));
    return entry ? free.runs[entry.runs] : null;
  }

  // The free nodePorts of a nodePorts' row (its unit's), or null.
  function nodePortsOf(node) {
    if (!free || !everyRows.has(node)) return null;
    return free.nodePortsByUnit ? free.nodePortsByUnit[unitOf(node)] : free.nodePorts;
  }

  function compute() {
    writeAddress();
    const namespace = filters.namespace.value, nodeTest = nodeMatcher(filters.node.value);
    const portTest = portMatcher(filters.port.value), problemsOnly = filters.problems.checked;
    const cells = new Map();  // node index -> Map(port key -> [{holder, state}])
    for (const holder of holders) {
      // Node daemons have no namespace: they stay beside the pods the filter keeps.
      if (namespace && holder.namespace !== namespace && holder.kind !== "node daemon") continue;
      if (!portTest(holder.port, holder.protocol)) continue;
      const key = holder.port + "/" + holder.protocol;
      for (const node of holder.nodes) {
        if (!nodeTest(node)) continue;
        let row = cells.get(node);
        if (!row) cells.set(node, row = new Map());
        let entries = row.get(key);
        if (!entries) row.set(key, entries = []);
        entries.push({holder, state: stateOn(holder, node)});
      }
    }
    for (const [node, row] of cells) {
      for (const [key, entries] of row) {
        const alone = entries.every((e) => e.holder.kind === "node daemon");
        const quiet = problemsOnly && ["runs", "may run"].includes(strongest(entries));
        if (alone || quiet) row.delete(key);
      }
      if (!row.size) cells.delete(node);
    }
    const narrowed = namespace || filters.port.value.trim() || problemsOnly;
    const shown = data.nodes.map((name, index) => index)
      .filter((node) => nodeTest(node) && (cells.has(node) || (!narrowed && !PSEUDO.has(node))));
    const rows = groupRows(shown, cells);
    const keys = new Set();
    for (const row of rows) {
      for (const key of row.cells.keys()) keys.add(key);
    }
    const columns = [...keys].sort((a, b) => {
      const {port: pa, protocol: qa} = columnOf.get(a), {port: pb, protocol: qb} = columnOf.get(b);
      return (pa - pb) || (qa < qb ? -1 : qa > qb ? 1 : 0);
    });
    view = {rows, columns};
    const nodeCount = rows.reduce((sum, row) => sum + row.nodes.filter((n) => !PSEUDO.has(n)).length, 0);
    statusLine.textContent = rows.length
      ? `${rows.length} rows (${nodeCount} nodes) x ${columns.length} ports`
      : (narrowed || filters.node.value.trim() ? "Nothing matches the filter." : "No host ports are claimed.");
    filterFindings(namespace, portTest);
    renderFree(nodeTest);
    grid.scrollTop = 0;
    grid.scrollLeft = 0;
    render();
  }

  // The free-ports table: one row per set of nodes with the same free host ports (the node
  // filter applies), the ports cut to the port filter. Long lists stop at MAX_RUNS runs.
  const MAX_RUNS = 200;
  function renderFree(nodeTest) {
    const body = document.querySelector("#free-hosts tbody");
    if (!free || !body) return;
    const portText = filters.port.value.trim();
    const groups = new Map();  // runs index -> node names
    for (const [name, runs] of free.hosts) {
      if (!wholeUnits.has(name) && !(nodeIndex.has(name) && nodeTest(nodeIndex.get(name)))) continue;
      if (!groups.has(runs)) groups.set(runs, []);
      groups.get(runs).push(name);
    }
    const rows = [];
    for (const [runsIndex, names] of groups) {
      const runs = clipRuns(free.runs[runsIndex], portText);
      const shown = runs.slice(0, MAX_RUNS).map(runText).join(", ") || "none";
      const more = runs.length <= MAX_RUNS ? ""
        : ` ... and ${runs.length - MAX_RUNS} more runs (narrow them with the port filter)`;
      const label = wholeUnits.has(names[0]) ? `${names[0]}every node (no --nodes inventory)`
        : names.length > 1 ? `${names[0]} +${names.length - 1} alike (${names.length} nodes)` : names[0];
      rows.push(el("tr", {dataset: {nodes: names.join(" ")}, title: names.length > 1 ? names.slice(0, 50) : null},
        el("td", null, label), el("td", null, String(runsCount(runs))), el("td", {class: "runs"}, shown + more)));
    }
    body.replaceChildren(...rows);
    $("free-status").textContent = (portText ? `Free host ports in ${portText}` : "Free host ports") +
      (rows.length ? ":" : ": no node matches the filter.");
  }

  // Nodes whose cells are the same (same holders, same states) share one row unless expanded.
  function groupRows(shown, cells) {
    const empty = new Map();
    const groups = new Map();
    for (const node of shown) {
      const row = cells.get(node) || empty;
      let signature = "#" + node;
      if (filters.group.checked && !PSEUDO.has(node)) {
        signature = [...row.entries()].map(([key, entries]) =>
          key + ":" + entries.map((e) => e.holder.index + e.state).join(",")).join(";");
      }
      if (!groups.has(signature)) groups.set(signature, []);
      groups.get(signature).push(node);
    }
    const rows = [];
    for (const nodes of groups.values()) {
      const cellsOf = cells.get(nodes[0]) || empty;
      const id = data.nodes[nodes[0]];
      if (nodes.length > 1 && !expanded.has(id)) {
        rows.push({nodes, cells: cellsOf, group: id,
                   label: `${data.nodes[nodes[0]]} +${nodes.length - 1} alike (${nodes.length} nodes)`});
      } else {
        nodes.forEach((node, position) => rows.push({
          nodes: [node], cells: cells.get(node) || empty, label: data.nodes[node],
          group: nodes.length > 1 && position === 0 ? id : null}));
      }
    }
    return rows;
  }

  function cellTitle(row, key, entries) {
    const lines = [`${row.label} ${key}: ${strongest(entries)}`];
    for (const e of entries) {
      const rules = [...new Set(marksOn(e.holder, row.nodes[0]).filter((m) => m.state)
        .map((m) => m.finding.rule))].join(", ");
      lines.push(`${e.holder.owner} (${e.holder.kind}, ${e.holder.placement})${rules ? " " + rules : ""}`);
    }
    const receiver = receiverOf(row.nodes[0], key);
    if (receiver) lines.push(`receives the packet: ${receiver.winner}`);
    return lines;  // el() shows each line
  }

  let pending = false;
  function schedule() {
    if (!pending) {
      pending = true;
      requestAnimationFrame(() => { pending = false; render(); });
    }
  }

  function render() {
    const {rows, columns} = view;
    space.style.width = (LABEL_W + columns.length * CELL_W) + "px";
    space.style.height = (HEAD_H + rows.length * ROW_H) + "px";
    grid.style.height = Math.min(window.innerHeight * 0.7, HEAD_H + rows.length * ROW_H + 20) + "px";
    const top = grid.scrollTop, left = grid.scrollLeft;
    const r0 = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
    const r1 = Math.min(rows.length, Math.ceil((top + grid.clientHeight - HEAD_H) / ROW_H) + OVERSCAN);
    const c0 = Math.max(0, Math.floor(left / CELL_W) - OVERSCAN);
    const c1 = Math.min(columns.length, Math.ceil((left + grid.clientWidth - LABEL_W) / CELL_W) + OVERSCAN);
    const drawn = document.createDocumentFragment();
    for (let r = r0; r < r1; r++) {
      const row = rows[r], y = HEAD_H + r * ROW_H;
      for (let c = c0; c < c1; c++) {
        const entries = row.cells.get(columns[c]);
        if (!entries) continue;
        const state = strongest(entries);
        const count = entries.filter((e) => e.holder.kind !== "node daemon").length;
        const isSelected = selected && selected.row === r && selected.column === c;
        drawn.append(el("div", {
          class: `cell ${CLASS[state]}${isSelected ? " selected" : ""}`,
          style: {left: (LABEL_W + c * CELL_W) + "px", top: y + "px"},
          dataset: {row: r, col: c, node: data.nodes[row.nodes[0]], port: columns[c], state},
          title: cellTitle(row, columns[c], entries)}, LETTER[state] + (count > 1 ? count : "")));
      }
      const toggle = row.group ? el("button", {class: "group-toggle", dataset: {group: row.group},
        title: row.nodes.length > 1 ? "show each node" : "collapse the identical nodes"},
      row.nodes.length > 1 ? "+" : "-") : null;
      const about = row.about || (row.about = nodeAbout(row.nodes));  // rows are made again on each filter
      drawn.append(el("div", {class: "rowlabel", style: {left: left + "px", top: y + "px", width: LABEL_W + "px"},
        dataset: {row: r}, title: [row.nodes.map((n) => data.nodes[n]).slice(0, 50).join(", "), ...about.lines]},
      toggle, el("span", {class: "node-name"}, row.label),
      ...about.roles.map((role) => el("span", {class: "tag role"}, role)),
      ...about.taints.map((taint) => el("span", {class: "tag taint"}, taint)),
      about.cordoned ? el("span", {class: "tag cordoned"}, "cordoned") : null));
    }
    for (let c = c0; c < c1; c++) {
      const {port, protocol} = columnOf.get(columns[c]);
      drawn.append(el("div", {class: "colhead", dataset: {port: columns[c]},
        style: {left: (LABEL_W + c * CELL_W) + "px", top: top + "px", width: CELL_W + "px", height: HEAD_H + "px"}},
      String(port), el("br"), protocol));
    }
    drawn.append(el("div", {class: "corner",
      style: {left: left + "px", top: top + "px", width: LABEL_W + "px", height: HEAD_H + "px"}}, "node \\ port"));
    space.replaceChildren(drawn);
  }

  // What the inventory says of a row's nodes (all of them, for a row of alike nodes): roles from
  // node-role.kubernetes.io/ labels and taints, shown on the row, and every label and taint, in
  // its tooltip (`lines`); `known` false for a row the inventory does not describe.
  function nodeAbout(nodes) {
    const infos = nodes.map((n) => nodeInfo[n]);
    if (!infos.length || infos.some((i) => !i)) return {known: false, roles: [], labels: [], taints: [], lines: []};
    const common = (list) => list(infos[0]).filter((item) => infos.every((i) => list(i).includes(item)));
    const labels = common((i) => i.labels.map(([k, v]) => v ? `${k}=${v}` : k));
    const taints = common((i) => i.taints);
    const cordoned = infos.every((i) => i.cordoned);
    const roles = labels.filter((l) => l.startsWith("node-role.kubernetes.io/"))
      .map((l) => l.slice("node-role.kubernetes.io/".length).split("=")[0]).filter(Boolean);
    const all = nodes.length > 1 ? " (all of them)" : "";
    const lines = [`labels${all}: ${labels.join(", ") || "none"}`, `taints${all}: ${taints.join(", ") || "none"}`];
    if (cordoned) lines.push("unschedulable (cordoned)");
    return {known: true, roles, labels, taints, cordoned, lines};
  }

  // A row's label clicked: its nodes' labels, taints and free host ports.
  function showNode(r) {
    const row = view.rows[r];
    selected = null;
    const names = row.nodes.map((n) => data.nodes[n]);
    const about = nodeAbout(row.nodes);
    const parts = [el("h3", null, names.length > 1 ? `${names.length} nodes alike: ${names.slice(0, 20).join(", ")}` +
      (names.length > 20 ? ", ..." : "") : names[0])];
    if (about.known) {
      const all = names.length > 1 ? " (all of them)" : "";
      parts.push(el("h4", null, "Labels" + all), about.labels.length
        ? el("ul", {class: "node-labels"}, ...about.labels.map((label) => el("li", null, el("code", null, label))))
        : el("p", {class: "muted"}, "none"));
      parts.push(el("h4", null, "Taints" + all), about.taints.length
        ? el("ul", {class: "node-taints"}, ...about.taints.map((taint) => el("li", null, el("code", null, taint))))
        : el("p", {class: "muted"}, "none"));
      if (about.cordoned) parts.push(el("p", null, "Unschedulable (cordoned): no new pod is scheduled here."));
    } else if (everyRows.has(row.nodes[0])) {
      parts.push(el("p", null, "nodePorts: kube-proxy opens them on every node."));
    } else {
      parts.push(el("p", {class: "muted"}, "No inventory describes this node (pass one with --nodes)."));
    }
    const runs = freeOf(row.nodes[0]) || nodePortsOf(row.nodes[0]);
    if (runs) {
      const kind = everyRows.has(row.nodes[0]) ? "nodePorts" : "host ports";
      parts.push(el("h4", null, `Free ${kind} (${runsCount(runs)})`),
        el("p", {class: "runs"}, runs.slice(0, MAX_RUNS).map(runText).join(", ") || "none",
          runs.length > MAX_RUNS ? ` ... and ${runs.length - MAX_RUNS} more runs` : null));
    }
    details.replaceChildren(...parts);
    render();
  }

  function findingText(finding) {
    const item = $("f" + finding.index);
    const message = item ? item.querySelector(".msg") : null;
    return message ? message.textContent : "";
  }

  function showDetails(r, c) {
    const row = view.rows[r], key = view.columns[c], entries = row.cells.get(key) || [];
    const node = row.nodes[0];
    selected = {row: r, column: c};
    const state = strongest(entries);
    const where = row.nodes.length > 1
      ? `${row.nodes.length} nodes with the same ports: ` +
        row.nodes.slice(0, 20).map((n) => data.nodes[n]).join(", ") +
        (row.nodes.length > 20 ? ", ..." : "")
      : data.nodes[node];
    const parts = [el("h3", null, `${where} \u00b7 ${key}`), el("p", null, badge(state), " " + state)];
    const receiver = receiverOf(node, key);
    if (receiver) {
      parts.push(el("p", {class: "winner"}, "Receives a packet to this port (from a pod or another machine): ",
        el("b", null, receiver.winner), receiver.certain ? null : " (unknown facts decide)", el("br"),
        el("span", {class: "muted"}, receiver.text)));
    }
    const winners = receiver && receiver.certain ? receiver.winner.split(" or ") : [];
    const table = el("table", null,
      el("tr", null, ...["holder", "kind", "pods", "here", "hostIP", "where"].map((name) => el("th", null, name))));
    for (const e of entries) {
      const h = e.holder;
      table.append(el("tr", {class: CLASS[e.state] + "-row"},
        el("td", null, badge(e.state), " ", h.owner, h.note ? " " : null,
          h.note ? el("span", {class: "muted"}, `(${h.note})`) : null,
          winners.includes(h.owner) ? " " : null,
          winners.includes(h.owner) ? el("b", {class: "wins"}, "\u2190 receives the packet") : null),
        el("td", null, h.kind), el("td", null, h.pods), el("td", null, h.placement), el("td", null, h.hostIP),
        el("td", null, place(h.location, h.url))));
    }
    parts.push(table);
    const marks = [];
    const seen = new Set();
    for (const e of entries) {
      for (const m of marksOn(e.holder, node)) {
        if (!seen.has(m.finding.index)) { seen.add(m.finding.index); marks.push(m); }
      }
    }
    // The findings that make the cell's state first, then the ones only listed (a hostPort warning).
    const rank = (m) => (m.state ? STATES.indexOf(m.state) : STATES.length);
    marks.sort((a, b) => rank(a) - rank(b) || a.finding.index - b.finding.index);
    if (marks.length) {
      parts.push(el("h4", null, "Findings here"), el("ul", {class: "cell-findings"}, ...marks.map(({finding: f}) =>
        el("li", null, el("a", {href: "#f" + f.index}, `${f.rule} ${f.name}`),
          ` ${f.severity}${f.suppressed ? " (suppressed)" : ""} `, place(f.location, f.url), el("br"),
          findingText(f)))));
    }
    if (!everyRows.has(node)) {
      const everywhere = holders.filter((h) => h.nodes.length === 1 && everyRows.has(h.nodes[0]) &&
                                           unitOf(h.nodes[0]) === unitOf(node) && h.port + "/" + h.protocol === key);
      if (everywhere.length) {
        parts.push(el("h4", null, "Also on every node at this port"), el("ul", null, ...everywhere.map((h) =>
          el("li", null, `${h.kind} of ${h.owner} `, place(h.location, h.url)))));
      }
    }
    parts.push(nearestLine(row, columnOf.get(key).port));
    details.replaceChildren(...parts.filter(Boolean));
    render();
  }

  // Where a port could move to: the free ports nearest it on the row's nodes (`ports --free
  // --near PORT` gives the same), nodePorts on the nodePorts' row.
  const NEAREST = 5;
  function nearestLine(row, port) {
    const node = row.nodes[0], everyNode = everyRows.has(node);
    const runs = everyNode ? nodePortsOf(node) : freeOf(node);
    if (!runs) return null;
    const runsOf = (n) => (freeByNode.get(data.nodes[n]) || freeByNode.get(wholeUnit(n)) || {}).runs;
    const here = everyNode ? ""
      : freeByNode.has(wholeUnit(node)) ? " on any node (no --nodes inventory)"
      : row.nodes.every((n) => runsOf(n) === runsOf(node)) && row.nodes.length > 1 ? " on these nodes"
      : ` on ${data.nodes[node]}`;
    return el("p", {class: "nearest"}, `Free ${everyNode ? "nodePorts" : "host ports"} nearest ${port}${here}: `,
      el("b", null, nearestFree(runs, port, NEAREST).join(", ") || "none"));
  }

  function filterFindings(namespace, portTest) {
    for (const item of document.querySelectorAll("#findings li.finding")) {
      const port = item.dataset.port ? +item.dataset.port : null;
      const portOK = !filters.port.value.trim() || (port !== null && portTest(port, item.dataset.protocol || ""));
      item.hidden = !((!namespace || item.dataset.namespace === namespace) && portOK);
    }
  }

  space.addEventListener("click", (event) => {
    const toggle = event.target.closest(".group-toggle");
    if (toggle) {
      const id = toggle.dataset.group;
      if (expanded.has(id)) expanded.delete(id); else expanded.add(id);
      selected = null;
      const top = grid.scrollTop, left = grid.scrollLeft;
      compute();
      grid.scrollTop = top;
      grid.scrollLeft = left;
      render();
      return;
    }
    const cell = event.target.closest(".cell");
    if (cell) showDetails(+cell.dataset.row, +cell.dataset.col);
    const label = event.target.closest(".rowlabel");
    if (label) showNode(+label.dataset.row);
  });
  // A finding named in the details: scrolled to and marked, without touching the address's
  // fragment, which holds the filters.
  details.addEventListener("click", (event) => {
    const link = event.target.closest('a[href^="#f"]');
    if (!link) return;
    event.preventDefault();
    const item = $(link.getAttribute("href").slice(1));
    if (!item) return;
    for (const marked of document.querySelectorAll("#findings li.current")) marked.classList.remove("current");
    item.classList.add("current");
    item.scrollIntoView({block: "nearest"});
  });

  // The filters in the address's fragment (#namespace=edge&port=443&problems=1&group=0): read
  // when the page opens and when the fragment changes (an address pasted), written whenever they
  // change, replacing the history entry (Back leaves the page rather than undoing a keystroke).
  // A fragment without "=" is a finding's anchor (#f3), left alone.
  function readAddress() {
    const fragment = location.hash.slice(1);
    if (!fragment.includes("=")) return false;
    const params = new URLSearchParams(fragment);
    const namespace = params.get("namespace") || "";
    filters.namespace.value = [...filters.namespace.options].some((o) => o.value === namespace) ? namespace : "";
    filters.node.value = params.get("node") || "";
    filters.port.value = params.get("port") || "";
    filters.problems.checked = params.get("problems") === "1";
    filters.group.checked = params.get("group") !== "0";
    return true;
  }

  function writeAddress() {
    const params = new URLSearchParams();
    if (filters.namespace.value) params.set("namespace", filters.namespace.value);
    if (filters.node.value.trim()) params.set("node", filters.node.value);
    if (filters.port.value.trim()) params.set("port", filters.port.value);
    if (filters.problems.checked) params.set("problems", "1");
    if (!filters.group.checked) params.set("group", "0");
    const fragment = params.toString();
    if (fragment === location.hash.slice(1) || (!fragment && !location.hash.includes("="))) return;
    history.replaceState(null, "", location.href.split("#")[0] + (fragment ? "#" + fragment : ""));
  }

  window.addEventListener("hashchange", () => {
    if (!readAddress()) return;
    lastFilters = filterState();
    selected = null;
    compute();
  });

  // The report's JSON, packed by the Python side (gzip, then base64): unpacked here into a Blob
  // that the download link saves. Nothing is fetched.
  async function offerDownload() {
    const link = $("download-json");
    if (!link || !link.dataset.report || typeof DecompressionStream === "undefined") return;
    const packed = Uint8Array.from(atob(link.dataset.report), (c) => c.charCodeAt(0));
    const json = await new Response(new Blob([packed]).stream().pipeThrough(new DecompressionStream("gzip"))).blob();
    link.href = URL.createObjectURL(new Blob([json], {type: "application/json"}));
    link.hidden = false;
  }
  // A text field fires "input" while typing and "change" when it loses focus; recomputing on the
  // second would rebuild the grid under the click that moved the focus (a group toggle's, say).
  let lastFilters = "";
  const filterState = () => Object.values(filters).map((f) => f.type === "checkbox" ? f.checked : f.value).join("\u0000");
  const refilter = () => {
    const state = filterState();
    if (state === lastFilters) return;
    lastFilters = state;
    selected = null;
    compute();
  };
  // The form only groups the filters: submitting it (Enter, where a browser does) would reload
  // the page, and the CSP's form-action 'none' would refuse that with a violation report.
  document.getElementById("filters").addEventListener("submit", (event) => event.preventDefault());
  // A finding's "show on map": the map filtered to its port.
  document.getElementById("findings").addEventListener("click", (event) => {
    const button = event.target.closest(".show-on-map");
    if (!button) return;
    filters.port.value = button.dataset.port;
    lastFilters = filterState();
    selected = null;
    compute();
    document.getElementById("map").scrollIntoView();
  });
  grid.addEventListener("scroll", schedule);
  window.addEventListener("resize", schedule);
  for (const input of Object.values(filters)) {
    input.addEventListener("input", refilter);
    input.addEventListener("change", refilter);
  }
  readAddress();
  lastFilters = filterState();
  compute();
  document.body.dataset.ready = "true";
  offerDownload();
}());
