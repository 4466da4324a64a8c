// The live dashboard: figures from /events (server-sent), drawn with charts.js.
"use strict";

const HISTORY = 600; // pages/s points kept, ten minutes at one a second (dashboard.py too)
const rate = []; // [seconds since the crawl started, pages/s]
let previous = null;

function show(name, text) {
  for (const node of document.querySelectorAll(`[data-figure="${name}"]`)) node.textContent = text;
}

function sorted(counts) {
  return Object.entries(counts).sort((a, b) => b[1] - a[1]);
}

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text === undefined || text === null ? "-" : String(text);
  if (className) td.className = className;
  return td;
}

function fillTable(id, rows, columns) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren();
  for (const item of rows) {
    const row = body.insertRow();
    for (const [key, className] of columns) {
      const td = cell(row, item[key], className);
      if (className === "url" && item.title && item.title.trim()) { // the page's, under it
        const title = document.createElement("div");
        title.className = "title";
        title.textContent = item.title;
        td.append(title);
      }
    }
  }
}

function trackRate(f) {
  if (previous && f.elapsed_s > previous.elapsed_s) {
    const perS = (f.records - previous.records) / (f.elapsed_s - previous.elapsed_s);
    rate.push([f.elapsed_s, Math.max(0, perS)]);
  } else if (!previous) { // before this page was opened: the 10-second samples
    let last = null;
    for (const sample of f.rate_history) {
      if (last && sample.t_s > last.t_s) {
        rate.push([sample.t_s, (sample.records - last.records) / (sample.t_s - last.t_s)]);
      }
      last = sample;
    }
  }
  if (rate.length > HISTORY) rate.splice(0, rate.length - HISTORY);
  previous = f;
}

function update(f) {
  const errors = Object.values(f.errors).reduce((a, b) => a + b, 0);
  const p = f.fetch_ms_percentiles;
  show("records", f.records.toLocaleString("en"));
  show("rate", f.pages_per_s.toLocaleString("en"));
  if (f.max_pages) { // with --redis, every process's pages count, as in progress.py
    const done = f.all_processes ? f.all_processes.records : f.records;
    const perS = f.records ? f.pages_per_s * done / f.records : 0;
    const left = f.max_pages - done;
    show("eta", perS > 0 && left > 0 ? Charts.clock(left / perS) : "-");
    show("eta_label", `ETA to ${f.max_pages.toLocaleString("en")} pages`
      + (f.all_processes ? " (all processes)" : ""));
  } else {
    show("eta", Charts.clock(f.elapsed_s));
    show("eta_label", "elapsed");
  }
  show("queued", f.queued.toLocaleString("en"));
  show("in_flight", f.in_flight.toLocaleString("en"));
  show("held", f.held.toLocaleString("en"));
  show("held_label", f.held ? `held for ${f.held_for.toLocaleString("en")} slow page(s)` : "held");
  show("errors", errors.toLocaleString("en"));
  show("bytes", Charts.size(f.bytes));
  show("hosts", f.host_count.toLocaleString("en"));
  show("visited", f.visited.urls.toLocaleString("en"));
  show("visited_label", `visited URLs (FP ${f.visited.fp_rate.toPrecision(2)})`);
  show("latency", [p.p50, p.p90, p.p99].map((v) => (v === null ? "-" : Math.round(v))).join(" / "));
  const recrawl = f.recrawl; // --since, and --revisit's rounds
  for (const tile of document.querySelectorAll(".tile.recrawl")) tile.hidden = !recrawl;
  if (recrawl) {
    show("changed", recrawl.changed.toLocaleString("en"));
    show("unchanged", recrawl.unchanged.toLocaleString("en"));
    show("unchanged_label", `unchanged (${recrawl.unchanged_304.toLocaleString("en")} answered 304)`);
    show("new", recrawl.new.toLocaleString("en"));
    show("not_due", recrawl.not_due.toLocaleString("en"));
  }

  trackRate(f);
  Charts.line(document.getElementById("chart-rate"), rate, "pages per second", Charts.clock);
  Charts.bars(document.getElementById("chart-statuses"),
    sorted(f.statuses).map(([s, n]) => [s === "none" ? "no response" : s, n]), "records by status");
  Charts.bars(document.getElementById("chart-errors"), sorted(f.errors), "errors by kind");
  Charts.histogram(document.getElementById("chart-depths"), Object.entries(f.depths), "records by depth");
  Charts.histogram(document.getElementById("chart-latency"),
    Object.entries(f.fetch_ms_buckets).map(([le, n]) => [le === "+Inf" ? "more" : `≤${le}`, n]),
    "records by fetch time (ms)");
  Charts.bars(document.getElementById("chart-dropped"), sorted(f.dropped), "dropped URLs");

  fillTable("hosts", f.busiest_hosts, [
    ["shown"], ["records", "n"], ["queued", "n"], ["in_flight", "n"], ["retrying", "n"],
    ["delay_s", "n"], ["backoff_s", "n"], ["wait_s", "n"], ["robots"],
  ]);
  fillTable("errors", [...f.last_errors].reverse(), [["at"], ["error"], ["status", "n"], ["shown", "url"]]);
  const slow = document.getElementById("slow-pages");
  slow.replaceChildren(...f.slow_pages.map((url) => {
    const item = document.createElement("li");
    item.textContent = url;
    return item;
  }));
  document.getElementById("slow-section").hidden = !f.slow_pages.length;
  const everyone = f.all_processes; // --redis, from the first heartbeat on
  const shared = everyone
    ? ` of ${everyone.processes} (${everyone.records.toLocaleString("en")} pages in all)` : "";
  const member = f.member ? `member ${f.member}${shared}, ` : "";
  document.getElementById("note").textContent = `${member}updated ${new Date().toLocaleTimeString()}`;
}

function connect() {
  const state = document.getElementById("state");
  const show = (text, kind) => { state.textContent = text; state.className = `state ${kind}`; };
  let between = false; // --revisit: a round is over, and the next one will be served here
  const events = new EventSource("/events");
  events.onmessage = (message) => {
    const figures = JSON.parse(message.data);
    update(figures);
    if (figures.done) { // at --max-pages, or interrupted, URLs are left queued
      events.close();
      const left = figures.queued + figures.in_flight; // in flight past --drain-timeout
      show(left ? `crawl stopped, ${left.toLocaleString("en")} URL${left === 1 ? "" : "s"} `
        + "not fetched" : "crawl finished", "done");
    } else if (figures.round_over || figures.next_round_at) {
      between = true;
      const at = figures.next_round_at && new Date(figures.next_round_at);
      show(at ? `round over; next round at ${at.toLocaleTimeString()}` : "round over", "done");
    } else {
      between = false;
      show("live", "live");
    }
  };
  events.onerror = () => { // EventSource tries again by itself (rounds of --revisit too)
    if (!between && state.className !== "state done") {
      show("disconnected (the crawl may have ended)", "lost");
    }
  };
}

connect();
