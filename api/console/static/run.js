// A run, whatever its kind: its state, the decision it waits for, the live timeline, the
// snapshot history and every decision. A kind with more to show adds its own section: a module
// of its package (ConsoleHooks.module) served as kinds/<kind>.js and loaded here, whose
// `mount(slot, run, { onChange, onEvents, onDeltas })` may return a cleanup (`onEvents(fn)` calls
// `fn` with each batch of the run's live events, `onDeltas(fn)` with each batch of its live model
// tokens, `message.delta`; each returns its unsubscribe); any other kind gets this
// page as it is. Its owner may hide a
// finished run and restore it. A fork links to the run it was forked from.

import { api } from "./api.js";
import { announce } from "./app_shell.js";
import { debounce, frameBatcher, h, money, replace, shortId, statusBadge, timeTag } from "./dom.js";
import { decisionCard } from "./decision_card.js";
import { runSummary } from "./runs.js";
import { followStream } from "./sse_reader.js";
import { createSnapshots } from "./snapshots.js";
import { createTimeline } from "./timeline.js";


// The `mount` of the run's kind's console section, or null when its kind has none.
async function kindSection(session, kind) {
  if (!(session.kind_sections || []).includes(kind)) return null;
  return (await import(`./kinds/${encodeURIComponent(kind)}.js`)).mount;
}
const FINAL = new Set(["completed", "failed", "canceled"]);

// Where a fork (POST /runs/{id}/fork) came from: a link to its source, the snapshot, and the
// decision it applied first, if it amended one.
function forkedFrom(from) {
  const at = from.checkpoint ? ` at gate ${from.checkpoint}` : "";
  const decided = from.decision ? ` · decided ${from.decision.decision} first` : "";
  return h("span", {}, h("a", { href: `#/runs/${from.run_id}` }, `run ${shortId(from.run_id)}`),
    ` · snapshot ${from.snapshot}${at}${decided}`);
}

// What an agent run's tools returned that its agent keeps (seed 003): ids by kind.
function relatedEntities(byKind) {
  return h("ul", { class: "related" }, Object.entries(byKind).map(([kind, ids]) =>
    h("li", {}, `${kind}: `, ids.map((id) => h("code", {}, id)).flatMap((c, i) => (i ? [", ", c] : [c])))));
}

function section(id, title, ...content) {
  return h("section", { class: "panel", "aria-labelledby": `${id}-h` },
    h("h2", { id: `${id}-h` }, title), ...content);
}

export function mountRun(main, session, runId) {
  const cleanups = [];
  let closed = false;  // left before a kind's section module arrived: mount nothing
  const heading = h("h1", {}, `Run ${shortId(runId)}`);
  const facts = h("dl", { class: "facts" });
  const actions = h("div", { class: "actions" });
  const pending = h("div", { class: "pending" });
  const kindSlot = h("div");
  const timeline = createTimeline();
  const snapshots = createSnapshots(runId);
  const decisions = h("div");
  const status = h("p", { role: "status", class: "run-status" });
  let run = null;
  let pendingShown = null;

  replace(main, heading, status, facts, actions,
    section("pending", "Waiting for", pending),
    kindSlot,
    section("timeline", "Timeline", timeline.element),
    section("snapshots", "Snapshots", snapshots.element),
    section("decisions", "Decisions", decisions));

  async function loadRun() {
    try {
      run = await api(`/runs/${runId}`);
    } catch (error) {
      replace(main, h("h1", {}, "Run not found"),
        h("p", {}, error.status === 404 ? "There is no such run, or it is not yours." : error.message));
      return false;
    }
    replace(heading, `Run ${shortId(run.run_id)} `, statusBadge(run.status));
    replace(facts, ...[
      ["About", runSummary(run)], ["Kind", run.kind], ["Owner", run.owner],
      ["Phase", run.phase_name ? `${run.current_phase} · ${run.phase_name}` : run.current_phase],
      ["Created", timeTag(run.created_at)], ["Started", timeTag(run.started_at)],
      ["Finished", timeTag(run.completed_at)],
      run.name ? ["Name", run.name] : null,
      run.error_message ? ["Error", run.error_message] : null,
      run.context_summary ? ["Summary", run.context_summary] : null,
      run.related_entity_ids ? ["Related", relatedEntities(run.related_entity_ids)] : null,
      run.forked_from ? ["Forked from", forkedFrom(run.forked_from)] : null,
    ].filter(Boolean).map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v))));
    showActions();
    showPending(run.pending_decision);
    return true;
  }

  function showActions() {
    const ui = `${session.temporal_ui_url}/namespaces/${encodeURIComponent(session.temporal_namespace)}` +
      `/workflows/${encodeURIComponent(run.workflow_id)}`;
    const owns = session.role === "service" || session.user === run.owner;
    replace(actions,
      h("a", { href: ui, target: "_blank", rel: "noopener", class: "button secondary" },
        "Open in Temporal Web UI"),
      FINAL.has(run.status) ? null : h("button", { type: "button", class: "danger", onclick: cancel }, "Cancel run"),
      // Only the owner hides a run (a soft delete), and only once it has finished.
      owns && FINAL.has(run.status) ? h("button", { type: "button", class: "secondary", onclick: hide }, "Hide run") : null);
  }

  async function hide() {
    if (!window.confirm("Hide this run? Nobody sees it any more; you can restore it until it is deleted.")) return;
    try {
      showHidden(await api(`/runs/${runId}/hide`, { method: "POST" }));
    } catch (error) {
      status.textContent = `Hiding refused: ${error.message}`;
    }
  }

  // What is left of a run its owner hid: when it goes for good, and the way back.
  function showHidden(hidden) {
    closed = true;
    cleanups.forEach((fn) => fn && fn());
    const note = h("p", { role: "status" });
    replace(main, h("h1", {}, `Run ${shortId(runId)} `, statusBadge("hidden")),
      h("p", {}, "This run is hidden from every list, page and stream. It is deleted for good after ",
        timeTag(hidden.restore_until), "; until then you can restore it."),
      h("div", { class: "actions" }, h("button", { type: "button", class: "primary", onclick: restore }, "Restore run")),
      note);
    async function restore() {
      try {
        await api(`/runs/${runId}/restore`, { method: "POST" });
        window.location.reload();
      } catch (error) {
        note.textContent = `Restoring refused: ${error.message}`;
      }
    }
  }

  async function cancel() {
    if (!window.confirm("Cancel this run? It stops and records `canceled`.")) return;
    try {
      await api(`/runs/${runId}/cancel`, { method: "POST" });
      status.textContent = "Cancel requested; the run records it when it has wound down.";
    } catch (error) {
      status.textContent = `Cancel refused: ${error.message}`;
    }
  }

  function showPending(decision) {
    if (decision && pendingShown === decision.request_id) return;
    pendingShown = decision ? decision.request_id : null;
    replace(pending, decision
      ? decisionCard(decision, { onDecided: () => refreshSoon() }).element
      : h("p", { class: "muted" }, FINAL.has(run?.status) ? "Nothing: the run has finished." : "Nothing: the run is not waiting for a human."));
  }

  // Who voted how (for whom, when handed on), and the quorum it needed.
  function voteList(d) {
    const votes = (d.votes || []).map((v) => h("li", {},
      `${v.voter}${v.on_behalf_of !== v.voter ? ` for ${v.on_behalf_of}` : ""}: ${v.option}`,
      v.feedback ? ` (“${v.feedback}”)` : "", " ", timeTag(v.voted_at)));
    const handed = (d.delegations || []).map((x) => h("li", { class: "muted" },
      `${x.from_user} handed their vote to ${x.to_user}`));
    if (!votes.length && !handed.length) return "—";
    return [d.quorum > 1 ? `${d.quorum} approvals needed` : null,
      h("ul", { class: "votes" }, votes, handed)];
  }

  async function loadDecisions() {
    try {
      const list = (await api(`/runs/${runId}/decisions`)).decisions;
      replace(decisions, list.length ? h("div", { class: "table-scroll" }, h("table", { class: "data" },
        h("thead", {}, h("tr", {}, ["Checkpoint", "Asked", "Status", "Decision", "Who", "When", "Why", "Votes"]
          .map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, list.map((d) => h("tr", {},
          h("td", {}, d.checkpoint_name), h("td", {}, timeTag(d.created_at)),
          h("td", {}, statusBadge(d.status)),
          h("td", {}, d.decision || "—", d.answer == null ? null : h("pre", { class: "mono answer" },
            JSON.stringify(d.answer, null, 2))),
          h("td", {}, d.decided_by || "—"), h("td", {}, timeTag(d.decided_at)),
          h("td", {}, d.feedback || "—"),
          h("td", {}, voteList(d)))))))
        : h("p", { class: "muted" }, "No decision was asked yet."));
    } catch (error) {
      replace(decisions, h("p", { class: "notice" }, error.message));
    }
  }

  async function showCost() {
    const latest = await snapshots.latest().catch(() => null);
    const cost = latest?.state?.cost_usd;
    if (typeof cost === "number" && !facts.querySelector(".cost")) {
      facts.append(h("div", { class: "cost" }, h("dt", {}, "Cost"), h("dd", {}, money(cost))));
    }
  }

  // Events that change what the run's row, its decisions or its snapshots show.
  const refreshSoon = debounce(async () => {
    if (await loadRun()) {
      loadDecisions();
      await snapshots.refresh();
      showCost();
    }
  }, 150);

  // The kind's section follows the same stream: one connection a page.
  const kindListeners = new Set();
  const onEvents = (fn) => {
    kindListeners.add(fn);
    return () => kindListeners.delete(fn);
  };
  const deltaListeners = new Set();
  const onDeltas = (fn) => {
    deltaListeners.add(fn);
    return () => deltaListeners.delete(fn);
  };

  const apply = frameBatcher((events) => {
    timeline.add(events);
    kindListeners.forEach((fn) => fn(events));
    if (events.some((e) => !e.type.startsWith("task.") && !e.type.startsWith("agent.node"))) refreshSoon();
    for (const event of events) {
      if (event.type === "phase.started") announce(`Phase ${event.phase} started`);
      if (event.type === "gate.opened") announce("The run waits for a decision");
    }
  });

  loadRun().then((found) => {
    if (!found) return;
    loadDecisions();
    snapshots.refresh().then(showCost);
    kindSection(session, run.kind).then((mount) => {
      if (mount && !closed) cleanups.push(mount(kindSlot, run, { onChange: refreshSoon, onEvents,
                                                                     onDeltas }));
    }, (error) => console.error(`the ${run.kind} section did not load`, error));
    // Every event not seen yet, then live ones, resuming after a drop where it was.
    // Live model tokens (`message.delta`, outside the seq sequence) go to the kind's section.
    cleanups.push(followStream(`/runs/${runId}/events/stream`, (events) => {
      const live = events.filter((e) => e.type === "message.delta");
      if (live.length) deltaListeners.forEach((fn) => fn(live));
      events.filter((e) => e.type !== "message.delta").forEach(apply);
    }, { onEnd: refreshSoon }));
  });

  return () => {
    closed = true;
    cleanups.forEach((fn) => fn && fn());
  };
}
