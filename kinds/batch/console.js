// The batch-job sections of a run page (seed 004's dashboard): items counted by status with
// a progress bar, throughput, cost, pause / resume / cancel, and the items themselves (by
// status, by the step they stand at, flagged answers) with each one's prompts, conversation,
// outputs per step with their flags, path, worker and files; a finished job's item re-runs
// from a step. The job's description, metadata and test-item verdict head its panel.

import { api } from "../api.js";
import { duration, h, money, progressBar, replace, setProgress, statusBadge, when } from "../dom.js";
import { renderReadable, renderValue } from "../render.js";

const UNIT_STATUSES = ["pending", "running", "retrying", "completed", "failed"];
const FINAL = new Set(["completed", "failed", "canceled"]);
const POLL_MS = 1000;
const PAGE = 25;

export function mount(slot, run, { onChange }) {
  const jobId = run.run_id;
  let job = null;
  let timer = null;
  let previous = null;  // { done, at } of the last poll, for throughput
  let rate = null;

  const title = h("h2", { id: "job-h" }, "Job");
  const about = h("div", { id: "job-about" });
  const bar = progressBar(0, "Items done");
  const stacked = h("div", { class: "stacked", "aria-hidden": "true" },
    UNIT_STATUSES.map((s) => h("span", { class: `seg seg-${s}`, "data-status": s })));
  const counts = h("dl", { class: "counts", id: "job-counts" });
  const figures = h("p", { class: "figures", id: "job-figures" });
  const controls = h("div", { class: "actions" });
  const message = h("p", { role: "status" });
  const jobPanel = h("section", { class: "panel", "aria-labelledby": "job-h" },
    title, about, bar, stacked, counts, figures, controls, message);

  const filter = h("select", { id: "item-status" }, h("option", { value: "" }, "all"),
    UNIT_STATUSES.map((s) => h("option", { value: s }, s)));
  // The step an item stands at now (filled in once the job's steps are known).
  const stepFilter = h("select", { id: "item-step" }, h("option", { value: "" }, "any step"));
  const flaggedOnly = h("input", { type: "checkbox", id: "item-flagged" });
  const itemsBody = h("tbody");
  const pager = h("div", { class: "pager" });
  const detail = h("div", { class: "item-detail", "aria-live": "polite" });
  const itemsPanel = h("section", { class: "panel", "aria-labelledby": "items-h" },
    h("h2", { id: "items-h" }, "Items"),
    h("div", { class: "filters" }, h("div", { class: "field" },
      h("label", { for: "item-status" }, "Status"), filter),
      h("div", { class: "field" }, h("label", { for: "item-step" }, "At step"), stepFilter),
      h("div", { class: "field field-check" }, flaggedOnly,
        h("label", { for: "item-flagged" }, "Flagged answers only")),
      h("button", { type: "button", class: "secondary", onclick: () => loadItems() }, "Refresh")),
    h("div", { class: "table-scroll" }, h("table", { class: "data items" },
      h("thead", {}, h("tr", {}, ["#", "Status", "At step", "Retries", "Path", "Cost", "Time", "Error", ""]
        .map((c) => h("th", { scope: "col" }, c)))), itemsBody)),
    pager, detail);
  replace(slot, jobPanel, itemsPanel);

  async function poll() {
    try {
      job = await api(`/jobs/${jobId}`);
    } catch (error) {
      message.textContent = error.status === 404 ? "The job is being prepared…" : error.message;
      schedule();
      return;
    }
    showJob();
    if (!FINAL.has(job.status)) schedule();
    else loadItems();
  }

  function schedule() {
    timer = setTimeout(poll, POLL_MS);
  }

  function showJob() {
    const total = job.total_units || 0;
    const c = job.counts;
    const done = (c.completed || 0) + (c.failed || 0);
    title.textContent = `Job: ${job.name}`;
    showAbout();
    if (stepFilter.options.length === 1) {
      stepFilter.append(...job.steps.map((step) => h("option", { value: step }, step)));
    }
    setProgress(bar, total ? (100 * done) / total : 0);
    for (const seg of stacked.children) {
      seg.style.flexGrow = String(c[seg.dataset.status] || 0);
    }
    replace(counts, ...UNIT_STATUSES.flatMap((s) => [
      h("dt", {}, s), h("dd", { "data-status": s }, String(c[s] || 0))]),
      h("dt", {}, "total"), h("dd", {}, String(total)));
    const now = performance.now();
    if (previous && now > previous.at && done >= previous.done) {
      const instant = (1000 * (done - previous.done)) / (now - previous.at);
      rate = rate === null ? instant : 0.7 * rate + 0.3 * instant;
    }
    previous = { done, at: now };
    const elapsed = job.started_at ? ((job.completed_at ? new Date(job.completed_at) : new Date()) - new Date(job.started_at)) : 0;
    const average = elapsed > 0 ? (1000 * done) / elapsed : 0;
    figures.textContent = `${job.status} · ${done} of ${total} done · ` +
      `${FINAL.has(job.status) ? "" : `${(rate ?? 0).toFixed(1)} items/s now, `}${average.toFixed(1)} items/s overall · ` +
      `${duration(elapsed)} · ${money(job.cost_usd)} · ${job.input_tokens + job.output_tokens} tokens · ` +
      `steps: ${job.steps.join(" → ")} · up to ${job.max_workers} at once`;
    replace(controls,
      job.status === "running" ? h("button", { type: "button", class: "secondary", onclick: () => control("pause") }, "Pause") : null,
      job.status === "paused" ? h("button", { type: "button", class: "primary", onclick: () => control("resume") }, "Resume") : null,
      FINAL.has(job.status) ? null : h("button", { type: "button", class: "danger", onclick: cancel }, "Cancel job"),
      FINAL.has(job.status) && c.failed ? h("button", { type: "button", class: "primary", onclick: retryFailed },
        `Retry ${c.failed} failed item${c.failed === 1 ? "" : "s"}`) : null);
  }

  // What the job is for, its metadata, and whether its test item passed (once it finished).
  function showAbout() {
    const test = job.test_passed === null ? null : job.test_passed ? "passed" : "failed";
    const rows = [
      job.description ? [h("dt", {}, "Description"), h("dd", {}, job.description)] : null,
      job.test_unit_id ? [h("dt", {}, "Test item"), h("dd", { id: "job-test" },
        test ? statusBadge(test) : "not finished yet")] : null,
      Object.keys(job.metadata).length ? [h("dt", {}, "Metadata"), h("dd", {}, renderReadable(job.metadata))] : null,
    ].filter(Boolean);
    replace(about, rows.length ? h("dl", { class: "kv" }, rows) : null);
  }

  // A new job over the failed items (same pipeline); this one keeps its final status.
  async function retryFailed() {
    try {
      const retry = await api(`/jobs/${jobId}/retry-failed`, { method: "POST" });
      window.location.hash = `#/runs/${retry.run_id}`;
    } catch (error) {
      message.textContent = `Retry refused: ${error.message}`;
    }
  }

  // Run this item again from a step, as a new job keeping its outputs of the steps before.
  function rerunForm(item) {
    const id = `rerun-step-${item.ordinal}`;
    const step = h("select", { id }, job.steps.map((name) =>
      h("option", { value: name, selected: name === item.at_step }, name)));
    const note = h("span", { role: "status" });
    async function rerun() {
      try {
        const created = await api(`/jobs/${jobId}/rerun`, {
          method: "POST", body: { item_ids: [item.item_id], from_step: step.value } });
        window.location.hash = `#/runs/${created.run_id}`;
      } catch (error) {
        note.textContent = `Re-run refused: ${error.message}`;
      }
    }
    return h("div", { class: "filters rerun" }, h("div", { class: "field" },
      h("label", { for: id }, "Re-run from step"), step),
      h("button", { type: "button", class: "secondary", onclick: rerun }, "Re-run as a new job"), note);
  }

  async function control(what) {
    try {
      await api(`/jobs/${jobId}/${what}`, { method: "POST" });
      message.textContent = what === "pause" ? "Paused: no new item starts; those in flight finish." : "Resumed.";
      onChange();
    } catch (error) {
      message.textContent = `${what} refused: ${error.message}`;
    }
    clearTimeout(timer);
    poll();
  }

  async function cancel() {
    if (!window.confirm("Cancel this job? Items in flight finish; no new item starts.")) return;
    try {
      await api(`/runs/${jobId}/cancel`, { method: "POST" });
      message.textContent = "Cancel requested.";
    } catch (error) {
      message.textContent = `Cancel refused: ${error.message}`;
    }
  }

  // Paging by cursor: the cursors of the pages before this one, to go back.
  const cursors = [null];
  async function loadItems(page = cursors.length - 1) {
    const params = new URLSearchParams({ limit: String(PAGE) });
    if (filter.value) params.set("status", filter.value);
    if (stepFilter.value) params.set("at_step", stepFilter.value);
    if (flaggedOnly.checked) params.set("flagged", "true");
    if (cursors[page]) params.set("cursor", cursors[page]);
    let result;
    try {
      result = await api(`/jobs/${jobId}/items?${params}`);
    } catch (error) {
      replace(itemsBody, h("tr", {}, h("td", { colspan: 9 }, error.status === 404 ? "No items yet." : error.message)));
      return;
    }
    cursors.length = page + 1;
    replace(itemsBody, ...result.items.map(itemRow));
    if (!result.items.length) itemsBody.append(h("tr", {}, h("td", { colspan: 9, class: "muted" }, "No item matches.")));
    replace(pager,
      h("button", { type: "button", class: "secondary", disabled: page === 0,
                    onclick: () => loadItems(page - 1) }, "Previous"),
      h("span", {}, ` page ${page + 1} `),
      h("button", { type: "button", class: "secondary", disabled: !result.next_cursor,
                    onclick: () => { cursors.push(result.next_cursor); loadItems(page + 1); } }, "Next"));
  }

  function itemRow(item) {
    return h("tr", {},
      h("td", {}, item.ordinal),
      h("td", {}, statusBadge(item.status), item.flags.length ? [" ", statusBadge("flagged")] : null),
      h("td", {}, item.at_step || "—"), h("td", {}, item.retry_count),
      h("td", {}, item.path.join(" → ") || "—"), h("td", {}, money(item.cost_usd)),
      h("td", {}, duration(item.execution_ms)), h("td", { class: "error-cell" }, item.error || ""),
      h("td", {}, h("button", { type: "button", class: "link", onclick: () => showItem(item),
                                "aria-label": `Open item ${item.ordinal}` }, "Open")));
  }

  async function showItem(item) {
    replace(detail, h("p", { class: "muted" }, "Loading item…"));
    let outputs = [];
    try {
      outputs = (await api(`/items/${item.item_id}/outputs`)).outputs;
    } catch (error) {
      outputs = [];
    }
    replace(detail,
      h("h3", { tabindex: "-1", id: "item-h" }, `Item ${item.ordinal} `, statusBadge(item.status)),
      h("p", { class: "meta" }, `path: ${item.path.join(" → ") || "—"} · ${item.retry_count} retries · ${money(item.cost_usd)}`),
      h("dl", { class: "kv item-worker" },
        h("dt", {}, "Worker"), h("dd", {}, item.worker_id ? h("code", {}, item.worker_id) : "—"),
        h("dt", {}, "Assigned"), h("dd", {}, when(item.assigned_at)),
        h("dt", {}, "Session"), h("dd", {}, item.session_id ? h("code", {}, item.session_id) : "—"),
        item.output_files.length ? [h("dt", {}, "Files"), h("dd", {}, h("ul", { class: "plain" },
          item.output_files.map((f) => h("li", {}, h("code", {}, f)))))] : null),
      h("h4", {}, "Input"), renderReadable(item.payload),
      item.error ? [h("h4", {}, "Error"), h("pre", { class: "error" }, item.error)] : null,
      item.flags.length ? [h("h4", {}, "Flagged"), h("ul", { class: "flags" },
        item.flags.map((f) => h("li", {}, statusBadge("flagged"), ` ${f.reason}`)))] : null,
      FINAL.has(job?.status) ? rerunForm(item) : null,
      h("h4", {}, "Outputs per step"),
      outputs.length ? outputs.map((o) => h("details", { class: "step", open: true },
        h("summary", {}, `${o.step_index + 1}. ${o.step}${o.next_step ? ` → ${o.next_step}` : ""} · ${duration(o.duration_ms)} · ${money(o.cost_usd)}`),
        h("h5", {}, "Prompt"), h("pre", {}, o.rendered_prompt),
        h("h5", {}, "Output"), renderValue(o.output),
        o.flags.map((f) => h("p", { class: "flag" }, statusBadge("flagged"), ` ${f.reason}`))))
        : h("p", { class: "muted" }, "No step has finished yet."),
      h("h4", {}, "Last rendered prompt"), h("pre", {}, item.rendered_prompt || "—"),
      h("h4", {}, "Conversation"),
      item.conversation.length ? h("ol", { class: "conversation" }, item.conversation.map((m) =>
        h("li", {}, m && typeof m === "object" && m.role
          ? [h("strong", {}, `${m.role}: `), renderValue(m.content ?? m)] : renderValue(m))))
        : h("p", { class: "muted" }, "None recorded."));
    detail.querySelector("#item-h").focus();
  }

  for (const control of [filter, stepFilter, flaggedOnly]) {
    control.addEventListener("change", () => {
      cursors.length = 1;
      loadItems(0);
    });
  }
  poll();
  loadItems(0);
  return () => clearTimeout(timer);
}
