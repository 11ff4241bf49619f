// The runs list: filters (kind, status, group, waiting for a human, running but quiet, the
// kinds' own, hidden by me), search, and paging.

import { api } from "./api.js";
import { clear, h, replace, shortId, statusBadge, timeTag } from "./dom.js";

const STATUSES = ["pending", "running", "paused", "completed", "failed", "canceled"];
// Running runs not updated for this long (`stale_after`, seconds): stuck, not waiting.
const STALE = [["900", "15 minutes"], ["3600", "an hour"], ["21600", "6 hours"], ["86400", "a day"]];

// A line that says what a run is about, whatever its kind: the longest text in its input
// (an idea, a job's name, an app's package), not a short setting such as a policy.
export function runSummary(run) {
  const texts = Object.values(run.input || {}).filter((v) => typeof v === "string" && v.trim());
  const text = texts.sort((a, b) => b.length - a.length)[0];
  if (!text) return run.kind;
  return text.length > 90 ? `${text.slice(0, 90)}…` : text;
}

// `values` are strings, or [value, label] pairs.
function select(id, label, values, allLabel) {
  const option = (v) => Array.isArray(v) ? h("option", { value: v[0] }, v[1])
                                         : h("option", { value: v }, v);
  return [h("label", { for: id }, label),
          h("select", { id, name: id }, h("option", { value: "" }, allLabel),
            values.map(option))];
}

export function mountRuns(main, session) {
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter runs" },
    h("div", { class: "field" }, select("kind", "Kind", session.kinds, "all kinds")),
    h("div", { class: "field" }, select("status", "Status", STATUSES, "any status")),
    h("div", { class: "field" }, select("group_id", "Group", [], "any group")),
    h("div", { class: "field field-check" },
      h("input", { type: "checkbox", id: "awaiting", name: "awaiting" }),
      h("label", { for: "awaiting" }, "Waiting for a human")),
    h("div", { class: "field" }, select("stale_after", "Running, quiet for", STALE, "any time")),
    // The kinds' own filters (`RunKind.run_filters`): `GET /runs?<name>=`.
    (session.run_filters || []).map((f) => h("div", { class: "field" },
      h("label", { for: f.name }, f.label),
      h("input", { type: "text", id: f.name, name: f.name, placeholder: f.placeholder,
                   pattern: f.pattern || undefined }))),
    h("div", { class: "field field-check" },
      h("input", { type: "checkbox", id: "hidden", name: "hidden" }),
      h("label", { for: "hidden" }, "Hidden by me")),
    h("div", { class: "field grow" }, h("label", { for: "q" }, "Search"),
      h("input", { type: "search", id: "q", name: "q", placeholder: "id, idea, job name, app…" })),
    h("button", { type: "submit", class: "primary" }, "Apply"));
  const body = h("tbody");
  const status = h("p", { class: "count", role: "status" });
  const more = h("button", { type: "button", class: "secondary", hidden: true,
                             onclick: () => load(false) }, "Show more");
  let cursor = null;

  replace(main, h("h1", {}, "Runs"), form, status,
    h("div", { class: "table-scroll" }, h("table", { class: "data runs" },
      h("thead", {}, h("tr", {}, ["Run", "Kind", "Status", "Phase", "Waiting for", "Created"]
        .map((c) => h("th", { scope: "col" }, c)))), body)), more);

  function params() {
    const p = new URLSearchParams({ limit: "50" });
    const kindFilters = (session.run_filters || []).map((f) => f.name);
    for (const name of ["kind", "status", "group_id", "q", "stale_after", ...kindFilters]) {
      const value = form.elements[name].value.trim();
      if (value) p.set(name, value);
    }
    if (form.elements.awaiting.checked) p.set("awaiting_human", "true");
    if (form.elements.hidden.checked) p.set("hidden", "true");
    if (cursor) p.set("cursor", cursor);
    return p;
  }

  // Each fresh load starts a generation; a page that arrives after the filters changed again
  // belongs to an older one and is dropped, not appended to the new list.
  let generation = 0;
  async function load(fresh) {
    if (fresh) {
      cursor = null;
      clear(body);
      generation += 1;
    }
    const mine = generation;
    status.textContent = "Loading…";
    try {
      const page = await api(`/runs?${params()}`);
      if (mine !== generation) return;
      for (const run of page.runs) body.append(row(run, form.elements.hidden.checked));
      cursor = page.next_cursor;
      more.hidden = !cursor;
      const shown = body.children.length;
      status.textContent = `${shown} run${shown === 1 ? "" : "s"}${cursor ? " (more below)" : ""}`;
    } catch (error) {
      status.textContent = `The runs could not be loaded: ${error.message}`;
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    load(true);
  });
  form.addEventListener("change", () => load(true));
  load(true);
  // The caller's groups, for the group filter (none: the filter offers only "any group").
  api("/groups").then((list) => {
    for (const group of list.groups) {
      form.elements.group_id.append(h("option", { value: group.group_id }, group.name));
    }
  }).catch(() => {});
  return null;
}

// A hidden run has no page: its row offers the way back instead.
function row(run, hidden) {
  return h("tr", { "data-run-id": run.run_id },
    h("td", {}, hidden ? shortId(run.run_id) : h("a", { href: `#/runs/${run.run_id}` }, shortId(run.run_id)),
      h("span", { class: "summary" }, runSummary(run)),
      hidden ? h("button", { type: "button", class: "link", onclick: (e) => restore(run, e.target) }, "Restore") : null),
    h("td", {}, run.kind),
    h("td", {}, statusBadge(run.status)),
    h("td", {}, run.phase_name ? `${run.current_phase} · ${run.phase_name}` : String(run.current_phase)),
    h("td", {}, run.pending_checkpoint || "—"),
    h("td", {}, timeTag(run.created_at)));
}

async function restore(run, button) {
  try {
    await api(`/runs/${run.run_id}/restore`, { method: "POST" });
    window.location.hash = `#/runs/${run.run_id}`;
  } catch (error) {
    button.replaceWith(`restore refused: ${error.message}`);
  }
}
