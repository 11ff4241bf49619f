// The inbox: every pending decision on the user's runs, arriving and leaving live from
// /decisions/stream (which sends all open ones first, then changes).

import { stream } from "./api.js";
import { announce } from "./app_shell.js";
import { frameBatcher, h, replace } from "./dom.js";
import { decisionCard } from "./decision_card.js";

// How long a decided card stays visible, saying who decided what, before it leaves.
const CLOSED_LINGER_MS = 2500;
// The open requests sent first are drawn newest first, this many per task: the first screen
// is usable at once and input is never held up for long while the rest is drawn.
const CARDS_PER_SLICE = 40;

export function mountInbox(main) {
  const open = new Map();  // request id -> decision, drawn or not yet
  const cards = new Map();  // request id -> drawn card
  const initial = [];
  const count = h("p", { class: "count", id: "inbox-count" }, "Loading decisions…");
  const list = h("div", { class: "cards", id: "inbox-list", "aria-describedby": "inbox-count" });
  const empty = h("p", { class: "empty", hidden: true },
    "Nothing waits for you. New decisions appear here as runs reach them.");
  let loaded = false;
  let stopped = false;
  replace(main, h("h1", {}, "Inbox"), count, empty, list);

  // Evidence is drawn for cards within a screen or two of the viewport, as they come near.
  const nearScreen = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      nearScreen.unobserve(entry.target);
      cards.get(entry.target.dataset.requestId)?.render();
    }
  }, { rootMargin: "1500px 0px" });

  function updateCount() {
    const waiting = [...open.keys()].filter((id) => !cards.get(id)?.closing).length;
    count.textContent = `${waiting} decision${waiting === 1 ? "" : "s"} waiting for you`;
    empty.hidden = !loaded || open.size > 0;
  }

  function draw(decision) {
    const card = decisionCard(decision, { lazy: true });
    cards.set(decision.request_id, card);
    nearScreen.observe(card.element);
    return card.element;
  }

  function drawInitial(queue) {
    if (stopped) return;
    const fragment = document.createDocumentFragment();
    for (const decision of queue.splice(0, CARDS_PER_SLICE)) {
      if (open.has(decision.request_id) && !cards.has(decision.request_id)) {
        fragment.append(draw(decision));
      }
    }
    list.append(fragment);
    if (queue.length) {
      setTimeout(() => drawInitial(queue));
    } else {
      window.__console = { ...(window.__console || {}), inboxComplete: performance.now() };
    }
  }

  // Requests opened later go on top, once per frame.
  const arrive = frameBatcher((decisions) => {
    const fragment = document.createDocumentFragment();
    for (const decision of decisions) {
      if (!open.has(decision.request_id) || cards.has(decision.request_id)) continue;
      fragment.prepend(draw(decision));
      announce(`New decision: ${decision.title}`);
    }
    list.prepend(fragment);
    updateCount();
  });

  // After a reconnect the stream sends every open request again: any we still show that is
  // not among them closed while we were away.
  let resent = new Set();
  function dropUnsent() {
    for (const id of [...open.keys()]) {
      if (resent.has(id) || cards.get(id)?.closing) continue;
      open.delete(id);
      const card = cards.get(id);
      if (card) {
        nearScreen.unobserve(card.element);
        card.element.remove();
        cards.delete(id);
      }
    }
    updateCount();
  }

  const source = stream("/decisions/stream", {
    "decision.pending": (decision) => {
      resent.add(decision.request_id);
      const known = open.has(decision.request_id);
      open.set(decision.request_id, decision);
      if (!loaded) initial.push(decision);
      else if (!known) arrive(decision);
    },
    "decision.snapshot_done": () => {
      if (loaded) {
        dropUnsent();
        return;
      }
      loaded = true;
      updateCount();
      drawInitial(initial.reverse());
      requestAnimationFrame(() => {
        window.__console = { ...(window.__console || {}), inboxReady: performance.now() };
        document.body.dataset.inboxReady = "true";
      });
    },
    "decision.closed": (decision) => {
      const card = cards.get(decision.request_id);
      if (!card) {  // not drawn yet: it simply never will be
        open.delete(decision.request_id);
        updateCount();
        return;
      }
      card.closing = true;
      card.showClosed(decision);
      const by = decision.decided_by ? ` by ${decision.decided_by}` : "";
      announce(`Decision closed: ${decision.title} (${decision.status}${by})`);
      updateCount();
      setTimeout(() => {
        nearScreen.unobserve(card.element);
        card.element.remove();
        cards.delete(decision.request_id);
        open.delete(decision.request_id);
        updateCount();
      }, CLOSED_LINGER_MS);
    },
  }, { onOpen: () => { resent = new Set(); } });
  return () => {
    stopped = true;
    source.close();
    nearScreen.disconnect();
  };
}
