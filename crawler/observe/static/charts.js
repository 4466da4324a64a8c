// Charts as inline SVG, for the dashboard and the report: horizontal bars, a
// histogram and a line. No library: the three shapes we draw take less code than
// any charting library weighs, need nothing from elsewhere, and print and scale
// like text. Each function replaces the contents of `box` with one <svg>.
"use strict";

const Charts = (() => {
  const SVG = "http://www.w3.org/2000/svg";
  let WIDTH = 600; // of the chart being drawn: its box's, so that text keeps its size

  function el(name, attrs, parent, text) {
    const node = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  function number(n) {
    if (n === null || n === undefined) return "-";
    if (Math.abs(n) >= 1e6) return (n / 1e6).toPrecision(3) + "M";
    if (Math.abs(n) >= 1e4) return (n / 1e3).toPrecision(3) + "k";
    return Number.isInteger(n) ? n.toLocaleString("en") : n.toPrecision(3);
  }

  function size(bytes) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let n = bytes, i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return i ? `${n.toFixed(1)} ${units[i]}` : `${n} B`;
  }

  function clock(seconds) {
    const s = Math.floor(seconds), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    const pad = (v) => String(v).padStart(2, "0");
    return h ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
  }

  function svg(box, height, label) {
    WIDTH = Math.max(300, box.clientWidth || 600);
    const root = el("svg", {
      viewBox: `0 0 ${WIDTH} ${height}`,
      class: "chart",
      role: "img",
      "aria-label": label || "",
    });
    box.replaceChildren(root);
    return root;
  }

  function empty(box, label) {
    const note = document.createElement("p");
    note.className = "muted none";
    note.textContent = `${label}: none`;  // the report's too, which no more will come to
    box.replaceChildren(note);
  }

  // rows: [[label, value], ...], drawn largest first as given.
  function bars(box, rows, label) {
    if (!rows.length) return empty(box, label);
    const row = 22, labelWidth = 190, valueWidth = 70;
    const root = svg(box, rows.length * row + 4, label);
    const max = Math.max(...rows.map((r) => r[1]), 1);
    const room = WIDTH - labelWidth - valueWidth;
    rows.forEach(([name, value], i) => {
      const y = i * row + 2;
      const shown = String(name).length > 28 ? String(name).slice(0, 27) + "…" : String(name);
      el("text", { x: labelWidth - 6, y: y + 15, "text-anchor": "end" }, root, shown);
      const bar = el("rect", {
        x: labelWidth, y: y + 3, height: row - 6, rx: 2,
        width: Math.max(1, (room * value) / max), class: "bar",
      }, root);
      el("title", {}, bar, `${name}: ${value.toLocaleString("en")}`);
      el("text", { x: labelWidth + (room * value) / max + 5, y: y + 15 }, root, number(value));
    });
  }

  // rows: [[bucket label, count], ...] in order along the x axis.
  function histogram(box, rows, label) {
    if (!rows.length || !rows.some((r) => r[1])) return empty(box, label);
    const height = 180, bottom = 36, top = 16;
    const root = svg(box, height, label);
    const max = Math.max(...rows.map((r) => r[1]), 1);
    const step = (WIDTH - 20) / rows.length;
    el("line", { x1: 10, x2: WIDTH - 10, y1: height - bottom, y2: height - bottom, class: "axis" }, root);
    rows.forEach(([name, value], i) => {
      const h = ((height - bottom - top) * value) / max;
      const x = 10 + i * step;
      const bar = el("rect", {
        x: x + 2, y: height - bottom - h, width: Math.max(1, step - 4), height: h, class: "bar",
      }, root);
      el("title", {}, bar, `${name}: ${value.toLocaleString("en")}`);
      if (value) {
        el("text", { x: x + step / 2, y: height - bottom - h - 3, "text-anchor": "middle", class: "small" },
          root, number(value));
      }
      el("text", { x: x + step / 2, y: height - bottom + 14, "text-anchor": "middle", class: "small" },
        root, String(name));
    });
  }

  // points: [[x, y], ...] with x increasing; xFormat turns an x into an axis label.
  function line(box, points, label, xFormat) {
    if (points.length < 2) return empty(box, label);
    const height = 180, left = 50, bottom = 24, top = 10, right = 10;
    const root = svg(box, height, label);
    const x0 = points[0][0], x1 = points[points.length - 1][0];
    // All zero (a crawl waiting on a page that never answers): an axis of 0 to 1, not of
    // 0 to 1.10e-9.
    const highest = Math.max(...points.map((p) => p[1]));
    const yMax = (highest > 0 ? highest : 1) * 1.1;
    const sx = (x) => left + ((WIDTH - left - right) * (x - x0)) / (x1 - x0 || 1);
    const sy = (y) => height - bottom - ((height - bottom - top) * y) / yMax;
    for (const f of [0, 0.5, 1]) {
      const y = sy(yMax * f);
      el("line", { x1: left, x2: WIDTH - right, y1: y, y2: y, class: f ? "grid" : "axis" }, root);
      el("text", { x: left - 4, y: y + 4, "text-anchor": "end", class: "small" }, root, number(yMax * f));
    }
    for (const [x, anchor] of [[x0, "start"], [x1, "end"]]) {
      el("text", { x: sx(x), y: height - 6, "text-anchor": anchor, class: "small" }, root, xFormat(x));
    }
    const path = points.map((p, i) => `${i ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`);
    el("path", {
      d: `${path.join("")}L${sx(x1)},${sy(0)}L${sx(x0)},${sy(0)}Z`, class: "area",
    }, root);
    el("path", { d: path.join(""), class: "line" }, root);
  }

  return { bars, histogram, line, number, size, clock };
})();
