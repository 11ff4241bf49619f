// The difference between two JSON values (two snapshots of a run), path by path.

import { h } from "./dom.js";

export function diffJson(before, after, path = "", out = []) {
  if (JSON.stringify(before) === JSON.stringify(after)) return out;
  const bothObjects = before && after && typeof before === "object" && typeof after === "object"
    && Array.isArray(before) === Array.isArray(after);
  if (!bothObjects) {
    const kind = before === undefined ? "added" : after === undefined ? "removed" : "changed";
    out.push({ path: path || "(whole state)", kind, before, after });
    return out;
  }
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  for (const key of keys) {
    const child = Array.isArray(before) ? `${path}[${key}]` : path ? `${path}.${key}` : key;
    diffJson(before[key], after[key], child, out);
  }
  return out;
}

function brief(value) {
  if (value === undefined) return h("span", { class: "muted" }, "—");
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

export function renderDiff(changes) {
  if (changes.length === 0) return h("p", { class: "muted" }, "The two snapshots are the same.");
  return h("div", { class: "table-scroll" }, h("table", { class: "data diff" },
    h("caption", {}, `${changes.length} difference${changes.length === 1 ? "" : "s"}`),
    h("thead", {}, h("tr", {}, ["Path", "Change", "Before", "After"].map(
      (c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, changes.map((c) => h("tr", { class: `diff-${c.kind}` },
      h("td", {}, h("code", {}, c.path)), h("td", {}, c.kind),
      h("td", {}, brief(c.before)), h("td", {}, brief(c.after)))))));
}
