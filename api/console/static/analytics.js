// Decisions analytics (#/analytics): how long people take to decide, per gate and per day,
// outcomes, overruled recommendations, policy decisions and shadow agreement, over what the
// signed-in user may read (GET /analytics/decisions). Charts by uPlot, vendored in
// ./vendor/ (MIT): nothing is downloaded at run time.

import { api } from "./api.js";
import { duration, h, number, replace } from "./dom.js";
import uPlot from "./vendor/uPlot.esm.js";

const STYLE_ID = "uplot-style";

function useChartStyle() {
  if (document.getElementById(STYLE_ID)) return;
  document.head.append(h("link", { id: STYLE_ID, rel: "stylesheet",
                                    href: "/console/static/vendor/uPlot.min.css" }));
}

const seconds = (value) => (value === null || value === undefined ? "—" : duration(value * 1000));
const rate = (value) => (value === null || value === undefined ? "—" : `${Math.round(value * 100)}%`);

function tile(label, value, id) {
  return h("div", { class: "tile", id }, h("span", { class: "tile-label" }, label),
           h("strong", { class: "tile-value" }, value));
}

function tiles(figures) {
  const t = figures.totals;
  return h("div", { class: "tiles", id: "analytics-tiles" },
    tile("Decided", number(t.decided), "tile-decided"),
    tile("Time to decide p50", seconds(t.time_to_decide.p50), "tile-p50"),
    tile("p90", seconds(t.time_to_decide.p90)),
    tile("p99", seconds(t.time_to_decide.p99)),
    tile("Approved / rejected", `${number(t.approved)} / ${number(t.rejected)}`),
    tile("Expired / superseded", `${number(t.expired)} / ${number(t.superseded)}`),
    tile("Waiting now (overdue)", `${number(figures.pending_now)} (${number(figures.overdue_now)})`),
    tile("Recommendation overruled", rate(t.overruled_rate)),
    tile("Decided by a policy", number(t.policy_decisions), "tile-policy"),
    tile("Shadow agreement", figures.shadow.compared
      ? `${rate(figures.shadow.rate)} of ${number(figures.shadow.compared)}` : "—", "tile-shadow"),
    tile("Reminders before a decision", number(t.reminders_before_decision)));
}

function chartWidth(holder) {
  return Math.max(280, Math.min(holder.clientWidth || 900, 1100) - 16);
}

// The unit a chart shows times in: what the longest of them reads best in.
function timeUnit(longest) {
  if (longest < 120) return { name: "seconds", div: 1 };
  if (longest < 3 * 3600) return { name: "minutes", div: 60 };
  return longest < 3 * 86400 ? { name: "hours", div: 3600 } : { name: "days", div: 86400 };
}

const fromZero = (u, min, max) => [0, max > 0 ? max * 1.1 : 1];

// Per day: decisions (bars) and the p50 time to decide (line, right axis), over the window.
function perDayChart(holder, days, since) {
  const x = days.map((d) => Date.parse(`${d.day}T00:00:00Z`) / 1000);
  const unit = timeUnit(Math.max(0, ...days.map((d) => d.time_to_decide.p50 || 0)));
  const p50 = days.map((d) => (d.time_to_decide.p50 === null ? null
                                                              : d.time_to_decide.p50 / unit.div));
  const first = Date.parse(since) / 1000;
  const last = Date.now() / 1000 + 86400;
  return new uPlot({
    title: `Per day: decisions, and time to decide (p50, ${unit.name})`,
    width: chartWidth(holder), height: 260,
    scales: { x: { time: true, range: [first, last] }, y: { range: fromZero },
              time: { range: fromZero } },
    series: [
      {},
      { label: "decided", stroke: "#1d4ed8", fill: "rgba(29,78,216,0.35)",
        paths: uPlot.paths.bars({ size: [0.8, 24] }) },
      { label: `p50 ${unit.name}`, stroke: "#b45309", width: 2, scale: "time",
        points: { show: true, size: 6 } },
    ],
    axes: [{}, { label: "decisions" }, { side: 1, scale: "time", label: unit.name,
                                          grid: { show: false } }],
  }, [x, days.map((d) => d.decided), p50], holder);
}

// Per gate: p50, p90 and p99 time to decide, three bars side by side for each gate.
function perGateChart(holder, gates) {
  const unit = timeUnit(Math.max(0, ...gates.map((g) => g.time_to_decide.p99 || 0)));
  const QUANTILES = [["p50", "#15803d"], ["p90", "#b45309"], ["p99", "#b91c1c"]];
  const x = [];
  const columns = QUANTILES.map(() => []);
  gates.forEach((g, i) => {
    QUANTILES.forEach(([key], q) => {
      x.push(i * 4 + q);
      const value = g.time_to_decide[key];
      QUANTILES.forEach((_, other) => columns[other].push(
        other === q && value !== null ? value / unit.div : null));
    });
  });
  return new uPlot({
    title: `Time to decide per gate (${unit.name})`,
    width: chartWidth(holder), height: 260,
    scales: { x: { time: false, range: [-1, gates.length * 4 - 1] }, y: { range: fromZero } },
    series: [
      { label: "gate", value: (_, v) => (v === null ? "--" : label(gates[Math.floor(v / 4)])) },
      ...QUANTILES.map(([key, color]) => ({
        label: key, stroke: color, fill: color, paths: uPlot.paths.bars({ size: [0.9, 60] }),
        points: { show: false } })),
    ],
    axes: [{ splits: () => gates.map((_, i) => i * 4 + 1),
             values: (_, ticks) => ticks.map((t) => label(gates[Math.round((t - 1) / 4)])) },
           { label: unit.name }],
  }, [x, ...columns], holder);
}

const label = (gate) => (gate ? `${gate.kind} · ${gate.gate}` : "");

function gateTable(gates) {
  return h("div", { class: "table-scroll" }, h("table", { class: "data", id: "gate-table" },
    h("caption", {}, "Per gate"),
    h("thead", {}, h("tr", {}, ["Kind", "Gate", "Decided", "p50", "p90", "p99", "Overruled",
                               "By a policy", "Expired"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, gates.map((g) => h("tr", {},
      h("td", {}, g.kind), h("td", { class: "mono" }, g.gate), h("td", {}, number(g.decided)),
      h("td", {}, seconds(g.time_to_decide.p50)), h("td", {}, seconds(g.time_to_decide.p90)),
      h("td", {}, seconds(g.time_to_decide.p99)), h("td", {}, rate(g.overruled_rate)),
      h("td", {}, number(g.policy_decisions)), h("td", {}, number(g.expired)))))));
}

export function mountAnalytics(main) {
  useChartStyle();
  const charts = [];
  const windowField = h("input", { id: "analytics-window", type: "number", min: 1, max: 3660,
                                   value: "30" });
  const kindField = h("input", { id: "analytics-kind", placeholder: "any" });
  const gateField = h("input", { id: "analytics-checkpoint", placeholder: "any" });
  const status = h("p", { class: "count", id: "analytics-status" }, "Loading…");
  const body = h("div", { id: "analytics-body" });
  const form = h("form", { class: "filters", onsubmit: (event) => { event.preventDefault(); load(); } },
    h("label", { class: "field" }, "Days", windowField),
    h("label", { class: "field" }, "Kind", kindField),
    h("label", { class: "field" }, "Gate", gateField),
    h("button", { class: "secondary", type: "submit" }, "Show"));
  replace(main, h("h1", {}, "Decisions"), form, status, body);

  async function load() {
    const params = new URLSearchParams({ window: windowField.value || "30" });
    if (kindField.value) params.set("kind", kindField.value.trim());
    if (gateField.value) params.set("checkpoint", gateField.value.trim());
    status.textContent = "Loading…";
    let figures;
    try {
      figures = await api(`/analytics/decisions?${params}`);
    } catch (error) {
      status.textContent = error.message;
      return;
    }
    while (charts.length) charts.pop().destroy();
    const days = h("div", { class: "panel chart", id: "chart-per-day" });
    const gates = h("div", { class: "panel chart", id: "chart-per-gate" });
    replace(body, tiles(figures), gates, days, gateTable(figures.by_gate));
    status.textContent = `Since ${new Date(figures.since).toLocaleDateString()}: `
      + `${number(figures.totals.decided)} decided`;
    if (figures.by_gate.length) charts.push(perGateChart(gates, figures.by_gate));
    else gates.append(h("p", { class: "muted" }, "No decisions in this window."));
    if (figures.per_day.length) charts.push(perDayChart(days, figures.per_day, figures.since));
  }
  load();
  return () => { while (charts.length) charts.pop().destroy(); };
}
