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

// Signs the browser out here, then at the identity provider too when it offers that (it
// sends the browser back to the console's sign-in page).
async function signOut() {
  let providerLogout = null;
  try {
    await api("/console/logout", { method: "POST" });
    providerLogout = (await api("/console/config").catch(() => ({}))).oidc_logout_url;
  } finally {
    window.location.hash = "";
    if (providerLogout) window.location.assign(providerLogout);
    else window.location.reload();
  }
}

export async function showSignIn(main, message) {
  clear(document.getElementById("user"));
  // The sign-in page still works when the configuration cannot be read: links always do.
  const config = await api("/console/config").catch(() => ({ oidc_provider: null }));
  const provider = config.oidc_provider;
  replace(main,
    h("h1", {}, "Sign in"),
    message ? h("p", { class: "notice" }, message) : null,
    provider
      ? h("p", {}, h("a", { class: "button primary", href: "/console/oidc/login" },
          `Sign in with ${provider}`))
      : null,
    h("p", {}, provider ? "Or ask for a sign-in link on the machine that runs Waystation:"
                        : "Ask for a sign-in link on the machine that runs Waystation:"),
    h("pre", {}, "waystation console-link --user YOUR_NAME"),
    h("p", {}, "Open the printed link in this browser. It works once, for ten minutes."));
}
