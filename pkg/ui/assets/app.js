// fleetbench live dashboard: reads /ui/events (server-sent events, one
// snapshot a second) and draws SVG charts by hand; no library, nothing
// loaded from elsewhere.
"use strict";

const COLORS = ["#0969da", "#cf222e", "#8250df", "#1a7f37", "#bf8700", "#57606a"];
const SVGNS = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);

let last = null;          // the latest snapshot
let baseline = null;      // {name, version, baseline}
let baselineVersion = -1; // the version drawn
let editing = false;      // the user is moving the slider: do not reset it
let updates = 0;

function fmt(v, digits) {
  if (v === null || v === undefined || Number.isNaN(v)) return "n/a";
  if (digits === undefined) digits = v >= 100 ? 0 : v >= 10 ? 1 : 2;
  return v.toLocaleString(undefined, { minimumFractionDigits: digits, maximumFractionDigits: digits });
}
function pct(v) { return v === null || v === undefined ? "n/a" : fmt(100 * v, 1) + "%"; }
function el(tag, attrs, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function say(id, text, kind) {
  const m = $(id);
  m.textContent = text;
  m.className = "msg " + (kind || "");
}

// ---- baseline ----

// baselineAt returns, per mode, the baseline figures at level: the level's
// own, else interpolated between the levels around it, else the nearest.
function baselineAt(level) {
  if (!baseline || !baseline.baseline || !level) return null;
  const by = baseline.baseline.by_level || {};
  const levels = Object.keys(by).map(Number).sort((a, b) => a - b);
  if (levels.length === 0) return null;
  if (by[String(level)]) return { how: "at " + level, modes: by[String(level)] };
  let lo = null, hi = null;
  for (const l of levels) {
    if (l < level) lo = l;
    if (l > level && hi === null) hi = l;
  }
  if (lo === null) return { how: "nearest level " + hi, modes: by[String(hi)] };
  if (hi === null) return { how: "nearest level " + lo, modes: by[String(lo)] };
  const f = (level - lo) / (hi - lo), a = by[String(lo)], b = by[String(hi)], out = {};
  for (const m of Object.keys(a)) {
    if (!b[m]) continue;
    out[m] = {};
    for (const k of Object.keys(a[m])) {
      if (typeof a[m][k] === "number" && typeof b[m][k] === "number") out[m][k] = a[m][k] + f * (b[m][k] - a[m][k]);
    }
  }
  return { how: "interpolated " + lo + "–" + hi, modes: out };
}

async function fetchBaseline() {
  const r = await fetch("/ui/baseline");
  baseline = await r.json();
  baselineVersion = baseline.version;
  $("baseline-name").textContent = baseline.name ? baseline.name : "none";
}

async function uploadBaseline(file) {
  const text = await file.text();
  const r = await post("/ui/baseline?name=" + encodeURIComponent(file.name), text);
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    say("baseline-msg", "Baseline not loaded: " + (body.error || r.statusText) + " (nothing changed)", "error");
    return;
  }
  baseline = body;
  baselineVersion = body.version;
  $("baseline-name").textContent = body.name;
  say("baseline-msg", "Baseline " + body.name + " loaded.", "ok");
  if (last) render(last);
}

// ---- controls ----

function post(url, body) {
  const headers = { "Content-Type": "application/json" };
  const tok = $("token").value.trim();
  if (tok) headers.Authorization = "Bearer " + tok;
  return fetch(url, { method: "POST", headers, body });
}

async function applyLevel() {
  const v = Number($("level").value);
  editing = false;
  if (!Number.isInteger(v)) {
    say("control-msg", "Concurrency must be a whole number; nothing changed.", "error");
    return;
  }
  const r = await post("/ui/concurrency", JSON.stringify({ level: v }));
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    say("control-msg", "Not changed: " + (body.error || r.statusText), "error");
    return;
  }
  say("control-msg", "Concurrency set to " + body.level + ".", "ok");
}

function setupControls() {
  const slider = $("slider"), box = $("level");
  slider.addEventListener("input", () => { editing = true; box.value = slider.value; });
  slider.addEventListener("change", () => { box.value = slider.value; applyLevel(); });
  box.addEventListener("input", () => { editing = true; });
  box.addEventListener("keydown", (e) => { if (e.key === "Enter") applyLevel(); });
  $("apply").addEventListener("click", applyLevel);
  const tok = $("token");
  tok.value = sessionStorage.getItem("fleetbench-token") || "";
  tok.addEventListener("change", () => sessionStorage.setItem("fleetbench-token", tok.value));
  $("baseline-file").addEventListener("change", (e) => {
    const f = e.target.files[0];
    if (f) uploadBaseline(f);
  });
}

// ---- charts ----

// drawChart draws lines (each {name, color, points: [[t, v]]}) and
// reference lines (each {name, color, value}) over the last 120 s.
function drawChart(svg, lines, refs, now) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const W = 600, H = 220, L = 48, R = 120, T = 8, B = 20;
  const t0 = now - 120, t1 = now;
  let ymax = 0;
  for (const s of lines) for (const p of s.points) ymax = Math.max(ymax, p[1]);
  for (const r of refs) ymax = Math.max(ymax, r.value);
  ymax = ymax > 0 ? niceCeil(ymax * 1.1) : 1;
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / ymax) * (H - T - B);
  for (let i = 0; i <= 4; i++) {
    const v = (ymax * i) / 4;
    svg.appendChild(el("svg:line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    svg.appendChild(el("svg:text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" }, fmt(v)));
  }
  for (const [t, label] of [[t0, "-120s"], [now - 60, "-60s"], [t1, "now"]]) {
    svg.appendChild(el("svg:text", { x: x(t), y: H - 4, "text-anchor": "middle" }, label));
  }
  let ly = T + 10;
  const legend = (name, color, dashed) => {
    svg.appendChild(el("svg:line", { x1: W - R + 6, x2: W - R + 22, y1: ly - 3, y2: ly - 3, stroke: color, "stroke-width": 2, "stroke-dasharray": dashed ? "4 3" : "" }));
    svg.appendChild(el("svg:text", { x: W - R + 26, y: ly }, name));
    ly += 13;
  };
  for (const s of lines) {
    const pts = s.points.filter((p) => p[0] >= t0);
    if (pts.length > 0) {
      const d = pts.map((p, i) => (i ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1)).join(" ");
      svg.appendChild(el("svg:path", { d, stroke: s.color, class: "series", "data-name": s.name, "data-points": pts.length }));
    }
    legend(s.name, s.color, false);
  }
  for (const r of refs) {
    svg.appendChild(el("svg:line", { x1: L, x2: W - R, y1: y(r.value), y2: y(r.value), stroke: r.color, class: "baseline", "data-mode": r.mode, "data-value": r.value }));
    legend(r.name, r.color, true);
  }
}

function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// refLines are the baseline's figure key for each mode, as reference lines.
function refLines(bl, key, label) {
  if (!bl) return [];
  const out = [];
  let i = 3;
  for (const [mode, f] of Object.entries(bl.modes)) {
    if (typeof f[key] === "number") out.push({ mode, name: mode + " " + label, value: f[key], color: COLORS[i++ % COLORS.length] });
  }
  return out;
}

// ---- render ----

function card(k, v, s) {
  const c = el("div", { class: "card" });
  c.appendChild(el("div", { class: "k" }, k));
  c.appendChild(el("div", { class: "v" }, v));
  if (s) c.appendChild(el("div", { class: "s" }, s));
  return c;
}

function render(s) {
  const st = s.stage;
  $("command").textContent = s.command;
  let stage = st.running ? `${st.mode ? st.mode + " · " : ""}level ${st.level} · ${st.phase}` : "idle";
  if (s.process_cpu !== undefined) stage += ` · process CPU ${fmt(s.process_cpu, 2)} cores`;
  $("stage").textContent = stage;
  const sw = $("sweep");
  if (s.sweep) {
    sw.hidden = false;
    const p = s.sweep;
    sw.textContent = `sweep: run ${p.run} ${p.mode} · level ${p.level} · ${p.phase} · ${fmt(p.step_left_s, 0)} s left in step · ${fmt(p.sweep_left_s, 0)} s left in sweep · ${p.done}/${p.total} points`;
  } else {
    sw.hidden = true;
  }

  // Controls.
  const c = s.control, slider = $("slider"), box = $("level");
  slider.disabled = box.disabled = $("apply").disabled = !c.enabled;
  box.max = c.max;
  const cur = st.target || st.level || 1;
  slider.max = Math.min(c.max, Math.max(200, 2 * cur, Number(slider.max)));
  if (!editing) { slider.value = cur; box.value = cur; }
  $("inflight").textContent = `${st.in_flight} in flight, target ${st.target}`;
  if (!c.enabled && c.reason) slider.title = box.title = c.reason;
  if (!c.enabled && c.reason && !$("control-msg").textContent) say("control-msg", c.reason, "");

  if (s.baseline_version !== baselineVersion) fetchBaseline().then(() => render(last));
  const bl = baselineAt(cur);

  // Cards: the rolling minute.
  const r = s.rolling, cards = $("cards");
  cards.replaceChildren(
    card("TTFT p50 / p95 / p99", `${fmt(r.ttft.p50)} / ${fmt(r.ttft.p95)} / ${fmt(r.ttft.p99)} ms`, "last minute"),
    card("TPOT p50 / p95", `${fmt(r.tpot.p50)} / ${fmt(r.tpot.p95)} ms`),
    card("ITL p50 / p95", `${fmt(r.itl.p50)} / ${fmt(r.itl.p95)} ms`),
    card("E2E p50 / p95", `${fmt(r.e2e.p50, 0)} / ${fmt(r.e2e.p95, 0)} ms`),
    card("Throughput", `${fmt(r.output_tps, 0)} tok/s`, `${fmt(r.rps, 2)} req/s`),
    card("Error rate", pct(r.error_rate), `${r.errors} failed of ${r.requests + r.errors}`),
    card("KV hit rate", pct(r.hit_rate), s.server_hit_rate ? `server ${pct(s.server_hit_rate.rate)} (${s.server_hit_rate.label})` : "client side"),
    card("Sessions", `${st.in_flight} / ${st.target}`, "in flight / target"),
  );
  if (bl) {
    for (const [m, f] of Object.entries(bl.modes)) {
      cards.appendChild(card(`baseline ${m} (${bl.how})`, `TTFT p95 ${fmt(f.ttft_p95_ms)} ms`, `p50 ${fmt(f.ttft_p50_ms)} ms · hit ${fmt(f.hit_rate_pct, 1)}%`));
    }
  }

  // Charts.
  const now = Math.floor(s.t / 1000) - 1;
  const ser = s.series || [];
  const line = (name, color, f) => ({ name, color, points: ser.map((p) => [p.t, f(p)]) });
  drawChart($("chart-ttft"), [
    line("p50", COLORS[0], (p) => p.ttft.p50), line("p95", COLORS[1], (p) => p.ttft.p95), line("p99", COLORS[2], (p) => p.ttft.p99),
  ], refLines(bl, "ttft_p95_ms", "p95 (baseline)"), now);
  drawChart($("chart-tpot"), [
    line("TPOT p50", COLORS[0], (p) => p.tpot.p50), line("TPOT p95", COLORS[1], (p) => p.tpot.p95), line("ITL p95", COLORS[2], (p) => p.itl.p95),
  ], refLines(bl, "tpot_p95_ms", "TPOT p95 (baseline)"), now);
  drawChart($("chart-e2e"), [
    line("p50", COLORS[0], (p) => p.e2e.p50), line("p95", COLORS[1], (p) => p.e2e.p95),
  ], refLines(bl, "e2e_p95_ms", "p95 (baseline)"), now);
  drawChart($("chart-tps"), [line("tok/s", COLORS[0], (p) => p.output_tps)], refLines(bl, "output_tps", "(baseline)"), now);
  drawChart($("chart-sessions"), [
    line("in flight", COLORS[0], (p) => p.in_flight), line("target", COLORS[1], (p) => p.target),
  ], [], now);
  drawChart($("chart-errors"), [line("errors", COLORS[1], (p) => 100 * p.error_rate)], [], now);

  renderWindows(s);
  renderErrors(s.errors || []);
  renderAgents(s.agents || []);
  updates++;
  document.body.dataset.updates = String(updates);
}

function renderWindows(s) {
  const cols = [s.rolling].concat((s.windows || []).slice().reverse());
  const rows = [
    ["", (f) => f.label + (f === s.rolling ? "" : f.closed ? " (closed)" : " (open)")],
    ["seconds", (f) => fmt(f.seconds, 0)],
    ["requests", (f) => String(f.requests)],
    ["req/s", (f) => fmt(f.rps, 2)],
    ["output tok/s", (f) => fmt(f.output_tps, 0)],
    ["error rate", (f) => pct(f.error_rate)],
    ["KV hit rate", (f) => pct(f.hit_rate)],
    ["TTFT p50 ms", (f) => fmt(f.ttft.p50)],
    ["TTFT p95 ms", (f) => fmt(f.ttft.p95)],
    ["TTFT p99 ms", (f) => fmt(f.ttft.p99)],
    ["TPOT p50 ms", (f) => fmt(f.tpot.p50)],
    ["ITL p50 ms", (f) => fmt(f.itl.p50)],
    ["E2E p50 ms", (f) => fmt(f.e2e.p50, 0)],
    ["E2E p95 ms", (f) => fmt(f.e2e.p95, 0)],
  ];
  const t = $("windows");
  t.replaceChildren();
  for (const [i, [name, f]] of rows.entries()) {
    const tr = el("tr");
    tr.appendChild(el(i === 0 ? "th" : "td", {}, name));
    for (const c of cols) tr.appendChild(el(i === 0 ? "th" : "td", {}, f(c)));
    t.appendChild(tr);
  }
}

function renderErrors(errs) {
  const ul = $("errors");
  ul.replaceChildren();
  if (errs.length === 0) {
    ul.appendChild(el("li", { class: "muted" }, "none"));
    return;
  }
  for (const e of errs) {
    const li = el("li");
    li.appendChild(el("strong", { class: "bad" }, e.class + " ×" + e.count + " "));
    li.appendChild(el("code", {}, e.message));
    li.appendChild(el("span", { class: "muted" }, " · " + new Date(e.last).toLocaleTimeString()));
    ul.appendChild(li);
  }
}

function renderAgents(agents) {
  $("agents-section").hidden = agents.length === 0;
  const t = $("agents");
  t.replaceChildren();
  const head = el("tr");
  for (const h of ["agent", "last report", "turns/s", "CPU cores", "streams", "sessions", "lag p95 ms", "lag max ms", "coverage", "state"]) {
    head.appendChild(el("th", {}, h));
  }
  t.appendChild(head);
  const count = (v) => (v === null || v === undefined ? "n/a" : String(v));
  for (const a of agents) {
    const tr = el("tr");
    tr.dataset.agent = a.id;
    for (const v of [a.id, fmt(a.last_report_s, 1) + " s ago", fmt(a.rps, 1), fmt(a.cpu_cores, 2), count(a.streams), count(a.sessions),
      fmt(a.lag_p95_ms), fmt(a.lag_max_ms), a.coverage === null ? "n/a" : pct(a.coverage), a.lost ? "lost" : "ok"]) tr.appendChild(el("td", {}, v));
    t.appendChild(tr);
  }
}

// ---- feed ----

function connect() {
  const es = new EventSource("/ui/events");
  es.onopen = () => { $("conn").textContent = "live"; $("conn").className = "conn live"; };
  es.onerror = () => { $("conn").textContent = "reconnecting…"; $("conn").className = "conn"; };
  es.onmessage = (e) => {
    try {
      last = JSON.parse(e.data);
      render(last);
    } catch (err) {
      $("conn").textContent = "bad event: " + err;
    }
  };
}

document.addEventListener("DOMContentLoaded", () => {
  setupControls();
  fetchBaseline().catch(() => {});
  connect();
});
