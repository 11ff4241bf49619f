// The batch kind's Workers page (seed 004's worker monitor; ConsoleHooks.pages, served as
// kinds/batch/workers.js): each worker process polling Waystation's task
// queue, with its status, last poll, the items running on it (those the viewer may read,
// linked to their job), and what it has completed and failed. Polled, as the batch page is:
// a worker's figures change with every item, too often for an event each.

import { api } from "../../api.js";
import { duration, h, number, replace, shortId, statusBadge, timeTag } from "../../dom.js";

const POLL_MS = 2000;

export function mount(main) {
  const body = h("tbody");
  const status = h("p", { class: "count", role: "status" });
  const note = h("p", { class: "muted" });
  replace(main, h("h1", {}, "Workers"), note, status,
    h("div", { class: "table-scroll" }, h("table", { class: "data workers" },
      h("thead", {}, h("tr", {}, ["Worker", "Status", "Last heartbeat", "Running now",
                                  "Completed", "Failed", "Execution time", "Last assigned"]
        .map((c) => h("th", { scope: "col" }, c)))), body)));

  let timer = null;
  let stopped = false;
  async function load() {
    try {
      const view = await api("/workers");
      if (stopped) return;
      note.textContent = `Task queue ${view.task_queue}. A worker not heard from for ` +
        `${duration(view.gone_after_seconds * 1000)} is gone. Items of runs you cannot read ` +
        "are counted, not listed.";
      replace(body, ...view.workers.map(row));
      if (!view.workers.length) body.append(h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No worker is polling.")));
      const active = view.workers.filter((w) => w.status === "active").length;
      status.textContent = `${view.workers.length} worker${view.workers.length === 1 ? "" : "s"}, ${active} active`;
    } catch (error) {
      if (stopped) return;
      status.textContent = `The workers could not be loaded: ${error.message}`;
    }
    timer = setTimeout(load, POLL_MS);
  }
  load();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

function row(worker) {
  return h("tr", { "data-worker-id": worker.worker_id },
    h("th", { scope: "row" }, h("code", {}, worker.worker_id),
      worker.polls.length ? h("span", { class: "summary" }, `polls ${worker.polls.join(" and ")} tasks`) : null),
    h("td", {}, statusBadge(worker.status)),
    h("td", {}, timeTag(worker.last_heartbeat)),
    h("td", { class: "running" }, String(worker.running),
      worker.current_items.length ? h("ul", { class: "plain" }, worker.current_items.map((item) =>
        h("li", {}, h("a", { href: `#/runs/${item.run_id}` }, `job ${shortId(item.job_id)}`),
          ` item ${item.ordinal}`))) : null),
    h("td", { class: "completed" }, number(worker.units_completed)),
    h("td", { class: "failed" }, number(worker.units_failed)),
    h("td", {}, duration(worker.total_execution_seconds * 1000)),
    h("td", {}, timeTag(worker.last_assigned_at)));
}
