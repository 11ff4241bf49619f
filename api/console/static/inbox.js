// The inbox: every pending decision on the user's runs, arriving and leaving live from
// /decisions/stream (which sends all open ones first, then changes).

import { stream } from "./api.js";
import { announce } from "./app_shell.js";
import { frameBatcher, h, replace } from "./dom.js";
import { decisionCard } from "./decision_card.js";

// How long a decided card stays visible, saying who decided what, before it leaves.
const CLOSED_LINGER_MS = 2500;

export function mountInbox(main) {
  const cards = new Map();
  const count = h("p", { class: "count", id: "inbox-count" }, "Loading decisions…");
  const list = h("div", { class: "cards", id: "inbox-list", "aria-describedby": "inbox-count" });
  const empty = h("p", { class: "empty", hidden: true },
    "Nothing waits for you. New decisions appear here as runs reach them.");
  let loaded = false;
  replace(main,
    h("h1", {}, "Inbox"), count, empty, list);

  function updateCount() {
    const open = [...cards.values()].filter((c) => !c.closing).length;
    count.textContent = `${open} decision${open === 1 ? "" : "s"} waiting for you`;
    empty.hidden = !loaded || cards.size > 0;
  }

  // Cards go in once per frame: the first burst (every open request) is one insertion.
  const insert = frameBatcher((decisions) => {
    const fragment = document.createDocumentFragment();
    for (const decision of decisions) {
      if (!decision.request_id || cards.has(decision.request_id)) continue;
      const card = decisionCard(decision, {});
      cards.set(decision.request_id, card);
      fragment.prepend(card.element);
      if (loaded) announce(`New decision: ${decision.title}`);
    }
    list.prepend(fragment);
    updateCount();
  });

  const source = stream("/decisions/stream", {
    "decision.pending": (decision) => insert(decision),
    "decision.snapshot_done": () => {
      insert({ request_id: null });  // flush in the same frame as the snapshot's cards
      requestAnimationFrame(() => {
        loaded = true;
        updateCount();
        window.__console = { ...(window.__console || {}), inboxReady: performance.now() };
        document.body.dataset.inboxReady = "true";
      });
    },
    "decision.closed": (decision) => {
      const card = cards.get(decision.request_id);
      if (!card) return;
      card.closing = true;
      card.showClosed(decision);
      announce(`Decision closed: ${decision.title} (${decision.status}${decision.decided_by ? ` by ${decision.decided_by}` : ""})`);
      updateCount();
      setTimeout(() => {
        card.element.remove();
        cards.delete(decision.request_id);
        updateCount();
      }, CLOSED_LINGER_MS);
    },
  });
  return () => source.close();
}
