// The console's entry point: who is signed in, then one view per URL fragment:
//   #/                 the inbox            #/runs             the runs list
//   #/runs/<id>        a run (any kind; batch jobs and mobile runs add their own sections)
//   #/analytics        decisions analytics  #/policies         decision policies
//   #/<page>           a kind's own page (ConsoleHooks.pages; the batch kind's #/workers:
//                      the worker processes and the items they run), linked in the nav

import { api, ApiError, setCsrfToken } from "./api.js";
import { showSignIn, showUser } from "./app_shell.js";
import { replace } from "./dom.js";
import { mountAnalytics } from "./analytics.js";
import { mountInbox } from "./inbox.js";
import { mountPolicies } from "./policies.js";
import { mountRun } from "./run.js";
import { mountRuns } from "./runs.js";

const main = document.getElementById("main");
let session = null;
let unmount = null;

const ROUTES = [
  [/^#?\/?$/, () => mountInbox(main, session)],
  [/^#\/runs\/?(\?.*)?$/, () => mountRuns(main, session)],
  [/^#\/runs\/([0-9a-f-]{36})$/, (id) => mountRun(main, session, id)],
  [/^#\/analytics\/?$/, () => mountAnalytics(main, session)],
  [/^#\/policies\/?$/, () => mountPolicies(main, session)],
];

// A kind's own page: its module, served from the kind's package, mounted once it arrives.
function kindPage(kind, name) {
  return () => {
    let cleanup = null;
    let closed = false;
    import(`./kinds/${encodeURIComponent(kind)}/${encodeURIComponent(name)}.js`).then(
      (page) => { if (!closed) cleanup = page.mount(main, session); },
      (error) => { main.textContent = `The ${name} page did not load: ${error.message}`; });
    return () => {
      closed = true;
      if (cleanup) cleanup();
    };
  };
}

function addKindPages() {
  const nav = document.querySelector("nav");
  for (const { kind, name, title } of session.kind_pages || []) {
    ROUTES.push([new RegExp(`^#\\/${name}\\/?$`), kindPage(kind, name)]);
    const link = document.createElement("a");
    link.href = `#/${name}`;
    link.textContent = title;
    nav.append(link);
  }
}

function route() {
  if (unmount) unmount();
  unmount = null;
  const hash = window.location.hash || "#/";
  for (const [pattern, mount] of ROUTES) {
    const match = hash.match(pattern);
    if (match) {
      unmount = mount(match[1]);
      markCurrent(hash);
      main.focus({ preventScroll: true });
      return;
    }
  }
  replace(main, Object.assign(document.createElement("h1"), { textContent: "Not found" }));
}

function markCurrent(hash) {
  for (const link of document.querySelectorAll("nav a")) {
    const target = link.getAttribute("href");
    const current = target === "#/" ? hash === "#/" || hash === "" : hash.startsWith(target);
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

async function boot() {
  try {
    session = await api("/console/session");
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      showSignIn(main, error.code === "session_expired" ? "Your session has ended." : null);
      return;
    }
    main.textContent = `The console cannot start: ${error.message}`;
    return;
  }
  setCsrfToken(session.csrf_token);
  showUser(session);
  addKindPages();
  window.addEventListener("hashchange", route);
  route();
}

boot();
