// The page frame every view shares: the live region that reads news out to screen readers,
// and the signed-in header.

import { api } from "./api.js";
import { clear, h, replace } from "./dom.js";

export function announce(text) {
  const region = document.getElementById("announcer");
  if (!region) return;
  // A fresh text node each time, so the same sentence twice is read twice.
  region.textContent = "";
  region.append(document.createTextNode(text));
}

export function showUser(session) {
  const slot = document.getElementById("user");
  replace(slot,
    h("span", { class: "who" }, `Signed in as ${session.user}`,
      session.role === "service" ? " (service)" : ""),
    h("button", { type: "button", class: "link", onclick: signOut }, "Sign out"));
}

async function signOut() {
  try {
    await api("/console/logout", { method: "POST" });
  } finally {
    window.location.hash = "";
    window.location.reload();
  }
}

export function showSignIn(main, message) {
  clear(document.getElementById("user"));
  replace(main,
    h("h1", {}, "Sign in"),
    message ? h("p", { class: "notice" }, message) : null,
    h("p", {}, "Ask for a sign-in link on the machine that runs Waystation:"),
    h("pre", {}, "waystation console-link --user YOUR_NAME"),
    h("p", {}, "Open the printed link in this browser. It works once, for ten minutes."));
}
