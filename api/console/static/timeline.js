// A run's live timeline, built from its events alone (any run kind): overall progress,
// phases with their durations, tasks with progress bars, costs reported in event outputs,
// and the most recent events. Events are applied in batches, one layout per frame.

import { clear, duration, h, money, progressBar, replace, setProgress, statusBadge, when } from "./dom.js";

const RECENT_ROWS = 300;

function where(event) {
  return [event.crew, event.task, event.agent && event.agent !== event.crew ? event.agent : null]
    .filter(Boolean).join(" · ");
}

function note(event) {
  const out = event.output;
  if (event.error_message) return event.error_message;
  if (out && typeof out === "object" && !Array.isArray(out)) {
    if (typeof out.note === "string") return out.note;
    if (typeof out.checkpoint_name === "string") {
      const by = out.decided_by ? ` by ${out.decided_by}` : "";
      return `${out.checkpoint_name}${out.decision ? `: ${out.decision}` : ""}${by}`;
    }
    if (typeof out.step === "number") return `step ${out.step}`;
  }
  return "";
}

export function createTimeline() {
  const state = { count: 0, lastSeq: 0, cost: 0, first: null, last: null, pct: 0 };
  const phases = new Map();
  const tasks = new Map();
  const overall = progressBar(0, "Run progress");
  const facts = h("p", { class: "timeline-facts", "aria-live": "off" });
  const phaseList = h("ol", { class: "phases" });
  const taskBody = h("tbody");
  const taskTable = h("div", { class: "table-scroll", hidden: true }, h("table", { class: "data tasks" },
    h("caption", {}, "Tasks"),
    h("thead", {}, h("tr", {}, ["Phase", "Task", "Status", "Progress", "Duration"]
      .map((c) => h("th", { scope: "col" }, c)))), taskBody));
  const recent = h("tbody");
  const element = h("div", { class: "timeline" },
    h("div", { class: "overall" }, overall, facts), phaseList, taskTable,
    h("div", { class: "table-scroll" }, h("table", { class: "data events" },
      h("caption", {}, "Latest events (newest first)"),
      h("thead", {}, h("tr", {}, ["#", "Time", "Event", "Where", "Status", "%", "Duration", "Note"]
        .map((c) => h("th", { scope: "col" }, c)))), recent)));

  function phaseRow(number) {
    let phase = phases.get(number);
    if (!phase) {
      phase = { number, status: "running", started: null, ended: null,
                label: h("span", { class: "phase-status" }) };
      phase.element = h("li", { class: "phase" }, h("strong", {}, `Phase ${number}`), " ", phase.label);
      phases.set(number, phase);
      phaseList.append(phase.element);
    }
    return phase;
  }

  function applyPhase(event) {
    if (event.phase === null || event.phase === undefined) return;
    const phase = phaseRow(event.phase);
    phase.started = phase.started || event.created_at;
    if (event.type === "phase.started") {
      phase.status = "running";
      phase.started = event.created_at;
      phase.ended = null;
    } else if (event.type === "phase.completed") {
      phase.status = "completed";
      phase.ended = event.created_at;
    } else if (event.type === "gate.opened") {
      phase.status = "waiting for a decision";
    } else if (event.type === "gate.decided" || event.type === "gate.expired") {
      phase.status = `${event.status}: ${event.output?.decision || "no decision"}`;
    }
    const took = phase.ended ? ` · took ${duration(new Date(phase.ended) - new Date(phase.started))}` : "";
    phase.label.textContent = `${phase.status}${took}`;
    phase.element.className = `phase phase-${phase.status.split(":")[0].replace(/\s+/g, "-")}`;
  }

  function applyTask(event) {
    if (!event.type.startsWith("task.") || !event.task) return;
    const key = `${event.phase}|${event.crew}|${event.task}`;
    let task = tasks.get(key);
    if (!task) {
      task = { status: h("td"), bar: progressBar(0, `${event.task} progress`), took: h("td") };
      task.row = h("tr", {}, h("td", {}, event.phase ?? "—"), h("td", {}, where(event)),
                   task.status, h("td", {}, task.bar), task.took);
      tasks.set(key, task);
      taskBody.append(task.row);
      taskTable.hidden = false;
    }
    const status = event.status || event.type.slice(5);
    replace(task.status, statusBadge(status));
    const pct = status === "completed" ? 100 : event.output?.task_pct ?? (status === "started" ? 0 : null);
    if (pct !== null && pct !== undefined) setProgress(task.bar, pct);
    if (event.duration_ms !== null && event.duration_ms !== undefined) {
      task.took.textContent = duration(event.duration_ms);
    }
  }

  function eventRow(event) {
    return h("tr", { class: `ev ev-${event.type.replace(/\./g, "-")}` },
      h("td", {}, event.seq), h("td", {}, h("time", { datetime: event.created_at },
        new Date(event.created_at).toLocaleTimeString())),
      h("td", {}, event.type), h("td", {}, where(event)), h("td", {}, event.status || ""),
      h("td", {}, event.progress_pct ?? ""), h("td", {}, event.duration_ms != null ? duration(event.duration_ms) : ""),
      h("td", {}, note(event)));
  }

  function add(events) {
    const fragment = document.createDocumentFragment();
    // A long catch-up only draws the rows that would stay on screen.
    const drawFrom = events.length - RECENT_ROWS;
    for (const [index, event] of events.entries()) {
      if (event.seq <= state.lastSeq) continue;
      state.lastSeq = event.seq;
      state.count += 1;
      state.first = state.first || event.created_at;
      state.last = event.created_at;
      if (typeof event.progress_pct === "number") state.pct = event.progress_pct;
      const cost = event.output && typeof event.output === "object" ? event.output.cost_usd : null;
      if (typeof cost === "number") state.cost += cost;
      applyPhase(event);
      applyTask(event);
      if (index >= drawFrom) fragment.prepend(eventRow(event));
    }
    recent.prepend(fragment);
    while (recent.children.length > RECENT_ROWS) recent.lastChild.remove();
    setProgress(overall, state.pct);
    const span = state.first ? duration(new Date(state.last) - new Date(state.first)) : "—";
    facts.textContent = `${state.count} events · ${state.pct}% · ${span} from first to last event` +
      (state.cost ? ` · ${money(state.cost)} reported` : "") +
      (state.last ? ` · last at ${when(state.last)}` : "");
    document.body.dataset.lastSeq = String(state.lastSeq);
  }

  function reset() {
    Object.assign(state, { count: 0, lastSeq: 0, cost: 0, first: null, last: null, pct: 0 });
    phases.clear();
    tasks.clear();
    clear(phaseList);
    clear(taskBody);
    clear(recent);
  }

  return { element, add, reset, get lastSeq() { return state.lastSeq; } };
}
