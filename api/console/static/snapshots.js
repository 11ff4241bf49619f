// A run's snapshot history: pick any snapshot to read its full state, and compare two.

import { api } from "./api.js";
import { h, replace, when } from "./dom.js";
import { diffJson, renderDiff } from "./diff.js";
import { renderReadable } from "./render.js";

export function createSnapshots(runId) {
  const cache = new Map();
  const pickA = h("select", { id: "snap-a" });
  const pickB = h("select", { id: "snap-b" });
  const output = h("div", { class: "snapshot-view", "aria-live": "polite" });
  const status = h("p", { class: "muted" }, "Loading snapshots…");
  const form = h("form", { class: "filters", "aria-label": "Pick snapshots" },
    h("div", { class: "field" }, h("label", { for: "snap-b" }, "Snapshot"), pickB),
    h("div", { class: "field" }, h("label", { for: "snap-a" }, "Compare with"), pickA),
    h("button", { type: "submit", class: "secondary" }, "Show"));
  const element = h("div", { class: "snapshots" }, status, form, output);
  form.hidden = true;

  async function state(ordinal) {
    if (!cache.has(ordinal)) cache.set(ordinal, api(`/runs/${runId}/snapshots/${ordinal}`));
    return cache.get(ordinal);
  }

  async function show() {
    const b = Number(pickB.value);
    const a = pickA.value ? Number(pickA.value) : null;
    replace(output, h("p", { class: "muted" }, "Loading…"));
    try {
      const after = await state(b);
      const parts = [h("h3", {}, `#${after.step_ordinal} ${after.label}`),
                     h("p", { class: "meta" }, `taken ${when(after.created_at)}`)];
      if (a !== null && a !== b) {
        const before = await state(a);
        parts.push(h("h4", {}, `What changed from #${before.step_ordinal} ${before.label}`),
                   renderDiff(diffJson(before.state, after.state)));
      }
      parts.push(h("h4", {}, "State"), renderReadable(after.state));
      replace(output, ...parts);
    } catch (error) {
      replace(output, h("p", { class: "notice" }, `The snapshot could not be read: ${error.message}`));
    }
  }

  async function refresh() {
    let list;
    try {
      list = (await api(`/runs/${runId}/snapshots`)).snapshots;
    } catch (error) {
      status.textContent = `Snapshots could not be loaded: ${error.message}`;
      return;
    }
    const known = pickB.options.length;
    if (list.length === known) return;
    const label = (s) => `#${s.step_ordinal} · ${s.label} · ${new Date(s.created_at).toLocaleString()}`;
    const [keepA, keepB] = [pickA.value, pickB.value];
    replace(pickB, ...list.map((s) => h("option", { value: s.step_ordinal }, label(s))));
    replace(pickA, h("option", { value: "" }, "(nothing)"),
      ...list.map((s) => h("option", { value: s.step_ordinal }, label(s))));
    status.textContent = list.length ? `${list.length} snapshot${list.length === 1 ? "" : "s"}`
      : "No snapshot yet.";
    form.hidden = list.length === 0;
    if (known > 0 && picked) {
      // Newer snapshots joined the list; what the person picked stays picked.
      [pickA.value, pickB.value] = [keepA, keepB];
    } else if (list.length) {
      pickB.value = String(list[list.length - 1].step_ordinal);
      if (list.length > 1) pickA.value = String(list[list.length - 2].step_ordinal);
      show();
    }
  }

  // Until the person picks, the view follows the newest snapshot and the one before it.
  let picked = false;
  form.addEventListener("change", () => { picked = true; });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    show();
  });
  return { element, refresh, latest: async () => {
    const last = pickB.options[pickB.options.length - 1];
    return last ? state(Number(last.value)) : null;
  } };
}
