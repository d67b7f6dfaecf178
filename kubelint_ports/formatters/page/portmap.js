// kubelint-ports port map: the grid of nodes x host ports, drawn from the data the Python side
// embeds (the lint run's model and findings). Only the cells in view are in the DOM, and nodes
// whose ports look the same collapse into one row, so 500 nodes x 1,000 ports stay usable.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("portmap-data").textContent);
  const STATES = ["conflict", "capture", "reserved", "runs", "may run"];
  const LETTER = {conflict: "C", capture: "X", reserved: "R", runs: "H", "may run": "?"};
  const CLASS = {conflict: "s-conflict", capture: "s-capture", reserved: "s-reserved", runs: "s-runs",
                 "may run": "s-may"};
  const CELL_W = 46, ROW_H = 24, LABEL_W = 230, HEAD_H = 36, OVERSCAN = 3;
  const PSEUDO = new Set([data.anyNode, data.everyNode]);

  const nodeSets = data.sets.map((members) => new Set(members));
  const findings = data.findings.map((f, index) => ({
    index, rule: f[0], name: f[1], severity: f[2], location: f[3], suppressed: !!f[4]}));
  const holders = data.holders.map((h, index) => ({
    index, port: h[0], protocol: h[1], hostIP: h[2], kind: h[3], owner: h[4], namespace: h[5], pods: h[6],
    placement: h[7], set: h[8], nodes: data.sets[h[8]], location: h[9], note: h[10],
    marks: h[11].map((m) => ({finding: findings[m[0]], state: m[1], nodes: m[2] < 0 ? null : nodeSets[m[2]]})),
  }));

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

  // "web-*" globs, otherwise a case-insensitive substring.
  function nodeMatcher(text) {
    text = text.trim().toLowerCase();
    if (!text) return () => true;
    if (text.includes("*")) {
      const pattern = new RegExp("^" + text.split("*").map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
        .join(".*") + "$");
      return (name) => pattern.test(name.toLowerCase());
    }
    return (name) => name.toLowerCase().includes(text);
  }

  // "443", "8000-8100", "9100/TCP", "53/udp", several separated by commas or spaces.
  function portMatcher(text) {
    const parts = text.split(/[\s,]+/).filter(Boolean);
    if (!parts.length) return () => true;
    const tests = parts.map((part) => {
      const m = /^(\d+)(?:-(\d+))?(?:\/(\w+))?$/.exec(part);
      if (!m) return () => false;
      const low = +m[1], high = m[2] ? +m[2] : low, protocol = m[3] ? m[3].toUpperCase() : null;
      return (port, proto) => port >= low && port <= high && (!protocol || !proto || protocol === proto);
    });
    return (port, proto) => tests.some((test) => test(port, proto));
  }

  function compute() {
    const namespace = filters.namespace.value, nodeTest = nodeMatcher(filters.node.value);
    const portTest = portMatcher(filters.port.value), problemsOnly = filters.problems.checked;
    const cells = new Map();  // node index -> Map(port key -> [{holder, state}])
    for (const holder of holders) {
      // Node daemons have no namespace: they stay beside the pods the filter keeps.
      if (namespace && holder.namespace !== namespace && holder.kind !== "node daemon") continue;
      if (!portTest(holder.port, holder.protocol)) continue;
      const key = holder.port + "/" + holder.protocol;
      for (const node of holder.nodes) {
        if (!nodeTest(data.nodes[node])) continue;
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
      .filter((node) => nodeTest(data.nodes[node]) && (cells.has(node) || (!narrowed && !PSEUDO.has(data.nodes[node]))));
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
    const nodeCount = rows.reduce((sum, row) => sum + row.nodes.filter((n) => !PSEUDO.has(data.nodes[n])).length, 0);
    statusLine.textContent = rows.length
      ? `${rows.length} rows (${nodeCount} nodes) x ${columns.length} ports`
      : (narrowed || filters.node.value.trim() ? "Nothing matches the filter." : "No host ports are claimed.");
    filterFindings(namespace, portTest);
    grid.scrollTop = 0;
    grid.scrollLeft = 0;
    render();
  }

  // Nodes whose cells are the same (same holders, same states) share one row unless expanded.
  function groupRows(shown, cells) {
    const empty = new Map();
    const groups = new Map();
    for (const node of shown) {
      const row = cells.get(node) || empty;
      let signature = "#" + node;
      if (filters.group.checked && !PSEUDO.has(data.nodes[node])) {
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
      drawn.append(el("div", {class: "rowlabel", style: {left: left + "px", top: y + "px", width: LABEL_W + "px"},
        title: row.nodes.map((n) => data.nodes[n]).slice(0, 50).join(", ")}, toggle, row.label));
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
        el("td", null, el("code", null, h.location || "-"))));
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
          ` ${f.severity}${f.suppressed ? " (suppressed)" : ""} `, el("code", null, f.location), el("br"),
          findingText(f)))));
    }
    if (data.nodes[node] !== data.everyNode) {
      const everywhere = holders.filter((h) => h.nodes.length === 1 && data.nodes[h.nodes[0]] === data.everyNode &&
                                           h.port + "/" + h.protocol === key);
      if (everywhere.length) {
        parts.push(el("h4", null, "Also on every node at this port"), el("ul", null, ...everywhere.map((h) =>
          el("li", null, `${h.kind} of ${h.owner} `, el("code", null, h.location || "-")))));
      }
    }
    details.replaceChildren(...parts);
    render();
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
  });
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
  lastFilters = filterState();
  compute();
  document.body.dataset.ready = "true";
}());
