// kubelint-ports page: what the page does with port numbers and runs of free ports, apart from
// the page (no DOM, no data): the port filter's ranges, free runs cut to them, and the free
// ports nearest a port. The page's script (portmap.js) follows this one in the same element.
"use strict";

// A case-insensitive test of a value: "web-*" is a glob, anything else a substring.
function globTest(text) {
  if (!text.includes("*")) return (value) => value.toLowerCase().includes(text);
  const pattern = new RegExp("^" + text.split("*").map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*") + "$");
  return (value) => pattern.test(value.toLowerCase());
}

// "443", "8000-8100", "9100/TCP", "53/udp", several separated by commas or spaces: [low, high,
// protocol or null] each ([1, 0, null], matching nothing, for a part that is none of these).
function portRanges(text) {
  return text.split(/[\s,]+/).filter(Boolean).map((part) => {
    const m = /^(\d+)(?:-(\d+))?(?:\/(\w+))?$/.exec(part);
    return m ? [+m[1], m[2] ? +m[2] : +m[1], m[3] ? m[3].toUpperCase() : null] : [1, 0, null];
  });
}

function portMatcher(text) {
  const ranges = portRanges(text);
  if (!ranges.length) return () => true;
  return (port, proto) => ranges.some(([low, high, protocol]) =>
    port >= low && port <= high && (!protocol || !proto || protocol === proto));
}

// Free ports as runs, cut to the port filter's ranges (free host ports are TCP and UDP alike).
function clipRuns(runs, text) {
  const ranges = portRanges(text);
  if (!ranges.length) return runs;
  const clipped = [];
  for (const [first, last] of runs) {
    for (const [low, high] of ranges) {
      const a = Math.max(first, low), b = Math.min(last, high);
      if (a <= b) clipped.push([a, b]);
    }
  }
  return clipped.sort((x, y) => x[0] - y[0]);
}

const runText = ([first, last]) => first === last ? String(first) : `${first}-${last}`;
const runsCount = (runs) => runs.reduce((sum, [first, last]) => sum + last - first + 1, 0);

// The `count` free ports nearest `near`, nearest first, the lower one first on a tie: what
// `ports --free --near` suggests, read from the runs the Python side worked out.
function nearestFree(runs, near, count) {
  const below = [], above = [];
  for (const [first, last] of runs) {
    for (let port = Math.max(first, near); port <= last && above.length < count; port++) above.push(port);
    if (above.length >= count) break;
  }
  for (let i = runs.length - 1; i >= 0 && below.length < count; i--) {
    const [first, last] = runs[i];
    for (let port = Math.min(last, near - 1); port >= first && below.length < count; port--) below.push(port);
  }
  return [...below, ...above].sort((a, b) => Math.abs(a - near) - Math.abs(b - near) || a - b).slice(0, count);
}
