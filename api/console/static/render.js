// Renders any JSON value for a person: objects as key/value lists, lists of records as
// tables, lists of words as bullet lists, long text as paragraphs. The raw JSON stays one
// click away, behind a <details>.

import { h, humanize, number } from "./dom.js";

const MAX_DEPTH = 5;
const MAX_ITEMS = 200;

function isScalar(value) {
  return value === null || ["string", "number", "boolean"].includes(typeof value);
}

function scalar(value) {
  if (value === null || value === undefined) return h("span", { class: "muted" }, "—");
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "number") return number(value);
  if (value.length > 120 || value.includes("\n")) return h("p", { class: "text" }, value);
  return value;
}

function isTable(list) {
  if (list.length < 2 || !list.every((row) => row && typeof row === "object" &&
                                      !Array.isArray(row))) return false;
  return list.every((row) => Object.values(row).every(isScalar));
}

function table(list) {
  const columns = [...new Set(list.flatMap((row) => Object.keys(row)))];
  return h("div", { class: "table-scroll" },
    h("table", { class: "data" },
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, humanize(c))))),
      h("tbody", {}, list.slice(0, MAX_ITEMS).map((row) =>
        h("tr", {}, columns.map((c) => h("td", {}, scalar(row[c]))))))));
}

export function renderValue(value, depth = 0) {
  if (isScalar(value) || value === undefined) return scalar(value);
  if (depth >= MAX_DEPTH) return h("code", {}, JSON.stringify(value));
  if (Array.isArray(value)) {
    if (value.length === 0) return h("span", { class: "muted" }, "none");
    if (isTable(value)) return table(value);
    const tag = value.every(isScalar) ? "ul" : "ol";
    const items = value.slice(0, MAX_ITEMS).map((item) => h("li", {}, renderValue(item, depth + 1)));
    if (value.length > MAX_ITEMS) items.push(h("li", { class: "muted" }, `… ${value.length - MAX_ITEMS} more`));
    return h(tag, { class: "value-list" }, items);
  }
  const entries = Object.entries(value);
  if (entries.length === 0) return h("span", { class: "muted" }, "nothing");
  return h("dl", { class: "kv" }, entries.map(([key, item]) => [
    h("dt", {}, humanize(key)), h("dd", {}, renderValue(item, depth + 1))]));
}

export function rawJson(value, label = "Raw JSON") {
  return h("details", { class: "raw" }, h("summary", {}, label),
           h("pre", {}, JSON.stringify(value, null, 2)));
}

// A value rendered for reading, with its JSON behind a disclosure.
export function renderReadable(value) {
  return h("div", { class: "readable" }, renderValue(value), rawJson(value));
}
