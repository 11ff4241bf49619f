// Decision policies (#/policies): the user's own and their groups', a form to create one
// (a 422 shows where the CEL condition is wrong), and a dry run of each over the latest
// requests of its gate (POST /policies/{id}/dry-run).

import { api } from "./api.js";
import { h, number, replace, when } from "./dom.js";

const rate = (shadow) => (shadow.rate === null ? "—"
  : `${Math.round(shadow.rate * 100)}% of ${number(shadow.compared)}`);

function field(label, control, hint) {
  return h("label", { class: "field" }, label, control, hint ? h("span", { class: "hint" }, hint) : null);
}

function dryRunView(result) {
  return h("div", { class: "dry-run", id: `dry-run-${result.policy_id}` },
    h("p", {}, `Version ${result.version} on the last ${number(result.evaluated)} requests: `
      + `holds on ${number(result.matched)}; agrees with ${number(result.agreed)} of `
      + `${number(result.compared)} people's decisions.`),
    h("div", { class: "table-scroll" }, h("table", { class: "data" },
      h("thead", {}, h("tr", {}, ["Request", "Opened", "Decided", "By", "Policy would",
                                 "Agrees"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, result.requests.map((r) => h("tr", {},
        h("td", { class: "mono" }, h("a", { href: `#/runs/${r.run_id}` }, r.checkpoint)),
        h("td", {}, when(r.created_at)), h("td", {}, r.decision || r.status),
        h("td", {}, r.decided_by || "—"),
        h("td", {}, r.would_decide || (r.outcome === "error" ? `error: ${r.error}` : r.outcome)),
        h("td", {}, r.agrees === null ? "—" : r.agrees ? "yes" : "no")))))));
}

function policyRow(policy, onDryRun) {
  return h("tr", { "data-policy": policy.name },
    h("td", {}, h("strong", {}, policy.name), h("span", { class: "summary muted" },
      policy.group_id ? "group" : "yours")),
    h("td", {}, policy.kind, " · ", h("span", { class: "mono" }, policy.checkpoint || "every gate")),
    h("td", { class: "mono" }, policy.condition),
    h("td", {}, policy.decision.decision ? `decide ${policy.decision.decision}`
      : policy.decision.quorum ? `quorum ${policy.decision.quorum}`
      : policy.decision.route_to_roles?.length ? `route to ${policy.decision.route_to_roles.join(", ")}`
      : "leave to people"),
    h("td", {}, policy.mode), h("td", {}, String(policy.version)), h("td", {}, rate(policy.shadow)),
    h("td", {}, h("button", { class: "secondary", type: "button",
                              onclick: () => onDryRun(policy) }, "Dry run")));
}

export function mountPolicies(main) {
  const list = h("div", { id: "policies-list" }, h("p", { class: "muted" }, "Loading…"));
  const results = h("div", { id: "policies-dry-run" });
  const error = h("p", { class: "form-errors", id: "policy-error", role: "alert" });
  const inputs = {
    name: h("input", { id: "policy-name", required: true, pattern: "[a-z0-9][a-z0-9_.\\-]*" }),
    kind: h("input", { id: "policy-kind", required: true }),
    checkpoint: h("input", { id: "policy-checkpoint", placeholder: "every gate" }),
    condition: h("textarea", { id: "policy-condition", required: true,
                               placeholder: 'request.tool.name == "issue_refund" && request.tool.args.amount_eur <= 50.0' }),
    decision: h("input", { id: "policy-decision", placeholder: "approve" }),
    reason: h("input", { id: "policy-reason", placeholder: "why it decides so" }),
    mode: h("select", { id: "policy-mode" }, h("option", { value: "decide" }, "decide"),
            h("option", { value: "shadow" }, "shadow (only watch)")),
  };
  const form = h("form", { class: "panel policy-form", id: "policy-form", onsubmit: create },
    h("h2", {}, "New policy"),
    field("Name", inputs.name), field("Run kind", inputs.kind),
    field("Gate", inputs.checkpoint, "a checkpoint name; empty for every gate of the kind"),
    field("Condition (CEL)", inputs.condition, "sees request (checkpoint, options, recommended_option, context, tool) and run (kind, input, owner, group_id, cost_usd)"),
    field("Decide", inputs.decision, "an option; empty to leave it to people"),
    field("Reason", inputs.reason), field("Mode", inputs.mode), error,
    h("div", { class: "actions" }, h("button", { class: "primary", type: "submit" }, "Create")));
  replace(main, h("h1", {}, "Policies"), list, results, form);

  async function load() {
    const { policies } = await api("/policies");
    if (!policies.length) {
      replace(list, h("p", { class: "empty" }, "No policies yet: every gate waits for people."));
      return;
    }
    replace(list, h("div", { class: "table-scroll" }, h("table", { class: "data policies", id: "policies-table" },
      h("thead", {}, h("tr", {}, ["Policy", "Judges", "Condition", "Does", "Mode", "Version",
                                 "Shadow agreement", ""].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, policies.map((p) => policyRow(p, dryRun))))));
  }

  async function dryRun(policy) {
    replace(results, h("p", { class: "muted" }, `Dry run of ${policy.name}…`));
    try {
      replace(results, h("h2", {}, `Dry run: ${policy.name}`),
              dryRunView(await api(`/policies/${policy.policy_id}/dry-run`,
                                   { method: "POST", body: { last: 20 } })));
    } catch (failure) {
      replace(results, h("p", { class: "form-errors" }, failure.message));
    }
  }

  async function create(event) {
    event.preventDefault();
    error.textContent = "";
    inputs.condition.removeAttribute("aria-invalid");
    const decision = {};
    if (inputs.decision.value.trim()) decision.decision = inputs.decision.value.trim();
    if (inputs.reason.value.trim()) decision.feedback = inputs.reason.value.trim();
    try {
      await api("/policies", { method: "POST", body: {
        name: inputs.name.value.trim(), kind: inputs.kind.value.trim(),
        checkpoint: inputs.checkpoint.value.trim() || null,
        condition: inputs.condition.value, decision, mode: inputs.mode.value } });
    } catch (failure) {
      error.textContent = failure.message;
      if (failure.code === "invalid_condition") inputs.condition.setAttribute("aria-invalid", "true");
      return;
    }
    form.reset();
    await load();
  }

  load().catch((failure) => replace(list, h("p", { class: "form-errors" }, failure.message)));
  return () => {};
}
