// Small DOM and formatting helpers shared by every page. Text always goes in as text nodes
// (never innerHTML), so nothing a run or an agent wrote can run as script. Styles are set
// through the CSSOM (el.style), which the page's Content-Security-Policy allows; a `style`
// attribute would be refused.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      el.className = value;
    } else if (name in el && typeof value !== "string") {
      el[name] = value;
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

// Like el.replaceChildren, but nested lists are flattened and null / false are left out.
export function replace(el, ...children) {
  return append(clear(el), children);
}

// Made once: toLocaleString with options builds a new formatter on every call, which costs
// more than the rest of a card when a thousand cards are drawn.
const DATE_TIME = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
const NUMBER = new Intl.NumberFormat();

export function when(iso) {
  return iso ? DATE_TIME.format(new Date(iso)) : "—";
}

export function number(value) {
  return NUMBER.format(value);
}

export function timeTag(iso) {
  return iso ? h("time", { datetime: iso }, when(iso)) : "—";
}

export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function money(usd) {
  return `$${Number(usd || 0).toFixed(usd && usd < 0.01 ? 4 : 2)}`;
}

export function shortId(id) {
  return String(id).slice(0, 8);
}

export function humanize(key) {
  const text = String(key).replace(/[_-]+/g, " ").trim();
  return text.charAt(0).toUpperCase() + text.slice(1);
}

export function statusBadge(status) {
  return h("span", { class: `badge status-${status}` }, status);
}

// A progress bar people and screen readers can read; `pct` from 0 to 100.
export function progressBar(pct, label) {
  const bar = h("div", { class: "progress", role: "progressbar", "aria-valuemin": "0",
                         "aria-valuemax": "100", "aria-label": label },
                h("div", { class: "progress-fill" }));
  setProgress(bar, pct);
  return bar;
}

export function setProgress(bar, pct) {
  const value = Math.max(0, Math.min(100, Math.round(pct || 0)));
  bar.setAttribute("aria-valuenow", String(value));
  bar.firstChild.style.width = `${value}%`;
}

// Runs `fn` at most once per animation frame with everything queued since the last frame:
// a busy stream costs one layout per frame, not one per event.
export function frameBatcher(fn) {
  let queue = [];
  let scheduled = false;
  return (item) => {
    queue.push(item);
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => {
      const batch = queue;
      queue = [];
      scheduled = false;
      fn(batch);
    });
  };
}

// Calls `fn` once, `ms` after the last of a burst of calls.
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
