// One pending decision, ready to be decided: what is asked, the evidence rendered for a
// person, the options (the recommended one marked), a feedback box, a typed-answer form when
// the request carries an `answer_schema` (sent with the options that take an answer), the
// votes so far when it needs several, and the digest and request id of what was read.

import { api } from "./api.js";
import { append, h, shortId, timeTag } from "./dom.js";
import { rawJson, renderValue } from "./render.js";
import { schemaForm } from "./schema_form.js";

const REFUSALS = {
  403: "You may not decide this request. Nothing was changed.",
  409: "This request is no longer open to you: it was already decided, it expired, a newer " +
       "request replaced it, or you have voted already. Nothing was changed.",
  422: "The answer was refused. Nothing was changed.",
  503: "No worker took the decision in time. Send it again: it will be applied once.",
};

// `lazy`: the evidence and the answer form are drawn only when render() is called (the inbox
// calls it as a card nears the screen), so a thousand cards are interactive at once.
export function decisionCard(decision, { onDecided, lazy = false } = {}) {
  const id = `d-${decision.request_id}`;
  const context = decision.context || {};
  const answerSchema = decision.answer_schema;
  const hasForm = Boolean(answerSchema && typeof answerSchema === "object");
  const takesAnswer = (choice) =>
    (decision.options.find((o) => o.value === choice) || {}).answer || "none";
  let form = null;
  const details = h("div", { class: "card-details" });
  const status = h("p", { class: "card-status", role: "status" });
  const feedback = h("textarea", { id: `${id}-feedback`, rows: 2, maxlength: 10000,
                                   placeholder: "Why? (sent with your decision)" });
  const buttons = decision.options.map((option) => {
    const recommended = option.value === decision.recommended_option;
    const describe = option.description ? `${id}-opt-${option.value}` : null;
    return h("span", { class: "option" },
      h("button", {
        type: "button", class: recommended ? "primary recommended" : "secondary",
        "data-option": option.value, "aria-describedby": describe,
        onclick: () => send(option.value),
      }, option.label || option.value, recommended ? h("span", { class: "tag" }, "recommended") : null,
        option.answer && option.answer !== "none" && hasForm
          ? h("span", { class: "tag" }, option.answer === "required" ? "with the answer" : "edits allowed")
          : null),
      describe ? h("span", { class: "option-desc", id: describe }, option.description) : null);
  });

  function render() {
    if (details.dataset.drawn) return;
    details.dataset.drawn = "true";
    form = hasForm ? schemaForm(answerSchema, decision.answer_initial) : null;
    append(details, [
      Object.keys(context).length ? h("section", { class: "context", "aria-label": "Evidence" },
        renderValue(context), rawJson(decision.context, "Raw context (JSON)")) : null,
      form ? h("section", { class: "answer", "aria-label": "Typed answer" }, form.element) : null]);
  }

  async function send(choice) {
    let answer;
    render();
    if (form && takesAnswer(choice) !== "none") {
      const checked = form.check();
      if (!checked.ok) {
        status.textContent = "Fix the answer first; nothing was sent.";
        element.querySelector("[aria-invalid=true]")?.focus();
        return;
      }
      answer = checked.value;
    }
    setBusy(true);
    status.textContent = `Sending “${choice}”…`;
    try {
      const decided = await api(
        `/runs/${decision.run_id}/decisions/${encodeURIComponent(decision.checkpoint_name)}`,
        { method: "POST", body: { decision: choice, feedback: feedback.value.trim() || undefined,
                                  request_id: decision.request_id, digest: decision.digest,
                                  ...(answer === undefined ? {} : { answer }) } });
      showClosed(decided);
      if (onDecided) onDecided(decided);
    } catch (error) {
      status.textContent = `${REFUSALS[error.status] || "The decision was refused."} (${error.message})`;
      element.classList.add(error.status === 409 ? "stale" : "refused");
      setBusy(error.status === 409);
    }
  }

  function setBusy(busy) {
    element.querySelectorAll("button, textarea, input, select").forEach((el) => { el.disabled = busy; });
  }

  function showClosed(closed) {
    setBusy(true);
    element.classList.add("closed");
    if (closed.status === "pending") {  // a vote towards a quorum
      const approvals = (closed.votes || []).filter((v) => v.option !== "reject").length;
      status.textContent = `Your vote was counted; ${approvals} of ${closed.quorum} approvals so far.`;
      return;
    }
    const who = closed.decided_by ? ` by ${closed.decided_by}` : "";
    const what = closed.decision ? `: ${closed.decision}` : "";
    status.textContent = `${closed.status}${what}${who}.`;
  }

  const element = h("article", { class: "card decision", id, "aria-labelledby": `${id}-title`,
                                 "data-request-id": decision.request_id },
    h("header", {},
      h("h3", { id: `${id}-title` }, decision.title),
      h("p", { class: "meta" },
        h("a", { href: `#/runs/${decision.run_id}` }, `run ${shortId(decision.run_id)}`),
        ` · ${decision.checkpoint_name} · phase ${decision.phase} · opened `,
        timeTag(decision.created_at),
        decision.expires_at ? [" · expires ", timeTag(decision.expires_at)] : null)),
    h("p", { class: "description" }, decision.description),
    decision.quorum > 1
      ? h("p", { class: "quorum" }, `Needs ${decision.quorum} approvals; `,
          (decision.votes || []).length
            ? (decision.votes || []).map((v) => `${v.on_behalf_of}: ${v.option}`).join(", ")
            : "no votes yet", ".")
      : null,
    details,
    h("div", { class: "field" }, h("label", { for: `${id}-feedback` }, "Feedback"), feedback),
    h("div", { class: "options", role: "group", "aria-label": "Decision" }, buttons),
    h("p", { class: "digest" }, "You are deciding request ", h("code", {}, shortId(decision.request_id)),
      " with digest ", h("code", { title: decision.digest }, `${decision.digest.slice(0, 12)}…`)),
    status);
  if (!lazy) render();
  return { element, showClosed, render };
}
