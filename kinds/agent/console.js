// The conversation of an agent run: what each person wrote and what the agent answered, the
// tool calls between, and a box to write the next message (POST /runs/{id}/messages). A run
// waiting at a tool's approval takes its decision in the page's "Waiting for" section; a
// message sent then is refused with the API's reason, shown under the box. The conversation
// follows the run's event stream (the page's own): each new line of the transcript is read
// when its event arrives, not polled for. An answer being written grows in place from its live
// tokens (`message.delta`, issue 43): a line per message id whose text keeps what it has and
// adds what a delta brings (a reset of a retried request empties it), replaced where it stands
// by the durable answer with the same message id. Above it, what a member coming back looks at
// first (seed 003): the summary the agent re-primes from and the entities its tools returned
// (the kind's own fields of `GET /runs/{id}`), read again after each answer.

import { api } from "../api.js";
import { debounce, h, replace, timeTag } from "../dom.js";

const FINAL = new Set(["completed", "failed", "canceled"]);
// The events of the transcript (kinds/agent/contracts.py, TRANSCRIPT_TYPES) and of its end.
const TRANSCRIPT = new Set(["message.received", "tool.called", "tool.returned", "tool.retry",
                            "agent.answered"]);
const ENDED = new Set(["run.completed", "run.failed", "run.canceled"]);

// What an agent run's tools returned that its agent keeps (seed 003): ids by kind.
function relatedEntities(byKind) {
  return h("ul", { class: "related" }, Object.entries(byKind).map(([kind, ids]) =>
    h("li", {}, `${kind}: `, ids.map((id) => h("code", {}, id)).flatMap((c, i) => (i ? [", ", c] : [c])))));
}

function showFacts(facts, run) {
  replace(facts, ...[
    run.context_summary ? ["Summary", run.context_summary] : null,
    run.related_entity_ids ? ["Related", relatedEntities(run.related_entity_ids)] : null,
  ].filter(Boolean).map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v))));
}

export function mount(slot, run, { onChange, onEvents, onDeltas }) {
  const runId = run.run_id;
  const agentName = (run.input && run.input.agent) || "agent";
  let afterSeq = 0;
  let stopped = false;
  let reads = Promise.resolve();
  // Answers being written: message id -> { li, text, attempt }.
  const writing = new Map();
  const answered = new Set();

  const list = h("ol", { class: "conversation", id: "conversation", "aria-live": "polite" });
  const empty = h("p", { class: "muted" }, "No messages yet.");
  const text = h("textarea", { id: "agent-message", rows: 3, maxlength: 20000,
                               placeholder: "Write to the agent" });
  const send = h("button", { type: "submit" }, "Send");
  const status = h("p", { role: "status", id: "agent-message-status" });
  const form = h("form", { class: "message-form", onsubmit: submit },
    h("label", { for: "agent-message" }, "Your message"), text,
    h("div", { class: "actions" }, send), status);
  const facts = h("dl", { class: "facts", id: "agent-facts" });
  showFacts(facts, run);
  replace(slot, h("section", { class: "panel", "aria-labelledby": "conversation-h" },
    h("h2", { id: "conversation-h" }, "Conversation"), facts, empty, list, form));
  setOpen(!FINAL.has(run.status));

  function setOpen(open) {
    if (open === !text.disabled) return;
    text.disabled = send.disabled = !open;
    if (!open) status.textContent = "The run has ended: it takes no more messages.";
  }

  function entry(m) {
    const at = timeTag(m.created_at);
    if (m.role === "user") {
      return h("li", { class: "turn person" }, h("strong", {}, m.sent_by || "someone"), " ", at,
               h("p", {}, m.text || ""));
    }
    if (m.role === "agent") {
      return h("li", { class: "turn agent" }, h("strong", {}, agentName), " ", at,
               h("p", {}, m.text || ""));
    }
    const shown = m.result === null || m.result === undefined
      ? `calls ${m.tool}(${JSON.stringify(m.arguments || {})})`
      : `${m.tool} returned ${typeof m.result === "string" ? m.result : JSON.stringify(m.result)}`;
    return h("li", { class: "turn tool" }, shown);
  }

  // A line read from the transcript goes above the answers still being written: their first
  // tokens can come before the message they answer is read (the page sent it, the stream
  // brought the answer's deltas, then the read), and the conversation reads in its order.
  function placeDone(li) {
    const firstLive = [...writing.values()].find((w) => w.li.isConnected);
    if (firstLive) firstLive.li.before(li);
    else list.append(li);
  }

  // Each read waits for the one before and starts where it ended: no line twice, none missed.
  function read() {
    reads = reads.then(readNew);
  }

  async function readNew() {
    try {
      let page;
      do {
        if (stopped) return;
        page = await api(`/runs/${runId}/messages?after_seq=${afterSeq}&limit=500`);
        for (const m of page.messages) {
          empty.hidden = true;
          const live = m.message_id && writing.get(m.message_id);
          if (live) live.li.replaceWith(entry(m));
          else placeDone(entry(m));
          if (m.message_id) {
            answered.add(m.message_id);
            writing.delete(m.message_id);
          }
        }
        afterSeq = page.next_after_seq;
      } while (page.messages.length === 500);  // a full page: there is more
    } catch (error) {
      status.textContent = error.message;
    }
  }
  const readSoon = debounce(read, 50);

  async function refreshFacts() {
    try {
      if (!stopped) showFacts(facts, await api(`/runs/${runId}`));
    } catch (error) {
      status.textContent = error.message;
    }
  }

  async function submit(event) {
    event.preventDefault();
    const message = text.value.trim();
    if (!message) {
      status.textContent = "Write a message first.";
      return;
    }
    send.disabled = true;
    try {
      const accepted = await api(`/runs/${runId}/messages`, { method: "POST",
                                                              body: { text: message } });
      text.value = "";
      status.textContent = `Message ${accepted.number} sent (turn ${accepted.turn}).`;
      onChange();
    } catch (error) {
      status.textContent = error.message;
    } finally {
      send.disabled = false;
    }
  }

  // A delta adds what the line lacks: a catch-up repeats the text whole from 0, a delta
  // starting past the end waits for that whole, an older attempt's is dropped.
  function grow(deltas) {
    for (const d of deltas) {
      if (d.call_id || answered.has(d.message_id)) continue;
      let live = writing.get(d.message_id);
      if (!live) {
        if (d.reset) continue;
        const p = h("p", {});
        live = { li: h("li", { class: "turn agent writing", "aria-busy": "true" },
                       h("strong", {}, agentName), " writing…", p), p, text: "", attempt: d.attempt };
        writing.set(d.message_id, live);
        empty.hidden = true;
        list.append(live.li);
      }
      if (d.attempt < live.attempt) continue;
      if (d.attempt > live.attempt || d.reset) {
        live.attempt = d.attempt;
        live.text = "";
      }
      if (!d.reset && d.at <= live.text.length && d.at + d.delta.length > live.text.length) {
        live.text = live.text.slice(0, d.at) + d.delta;
      }
      live.p.textContent = live.text;
    }
  }

  const stopDeltas = onDeltas ? onDeltas(grow) : () => {};
  const unsubscribe = onEvents((events) => {
    if (events.some((e) => TRANSCRIPT.has(e.type))) readSoon();
    if (events.some((e) => e.type === "agent.answered")) refreshFacts();
    if (events.some((e) => ENDED.has(e.type))) setOpen(false);
  });
  read();
  return () => {
    stopped = true;
    unsubscribe();
    stopDeltas();
  };
}
