// The mobile-run sections of a run page: the screen graph picture, the app's coverage, and
// the step timeline with each step's screenshot.

import { api } from "../api.js";
import { h, replace } from "../dom.js";
import { renderReadable } from "../render.js";

const FINAL = new Set(["completed", "failed", "canceled"]);
const POLL_MS = 3000;
const STEPS_SHOWN = 120;

export function mount(slot, run) {
  let timer = null;
  let graphVersion = 0;
  const frame = h("iframe", { title: `Screen graph of ${run.input.app_package}`, class: "graph",
                              sandbox: "", loading: "lazy" });
  const coverage = h("div", { id: "coverage" }, h("p", { class: "muted" }, "Loading coverage…"));
  const steps = h("ol", { class: "steps", id: "steps" });
  const stepsNote = h("p", { class: "muted" });
  replace(slot,
    h("section", { class: "panel", "aria-labelledby": "graph-h" },
      h("h2", { id: "graph-h" }, `Screen graph · ${run.input.app_package}`),
      h("p", {}, h("a", { href: `/runs/${run.run_id}/graph?format=html`, target: "_blank", rel: "noopener" },
        "Open the picture on its own"), " · ",
        h("a", { href: `/runs/${run.run_id}/graph?format=json`, target: "_blank", rel: "noopener" }, "JSON")),
      frame),
    h("section", { class: "panel", "aria-labelledby": "coverage-h" },
      h("h2", { id: "coverage-h" }, "Coverage"), coverage),
    h("section", { class: "panel", "aria-labelledby": "steps-h" },
      h("h2", { id: "steps-h" }, "Steps"), stepsNote, steps));

  async function refresh() {
    let current = run;
    try {
      current = await api(`/runs/${run.run_id}`);
      const [report, artifacts] = await Promise.all([
        api(`/apps/${encodeURIComponent(run.input.app_package)}/coverage`).catch(() => null),
        api(`/runs/${run.run_id}/artifacts`)]);
      if (report) replace(coverage, renderReadable(report));
      showSteps(artifacts.artifacts);
      graphVersion += 1;
      frame.src = `/runs/${run.run_id}/graph?format=html&v=${graphVersion}`;
    } catch (error) {
      stepsNote.textContent = error.message;
    }
    if (!FINAL.has(current.status)) timer = setTimeout(refresh, POLL_MS);
  }

  function showSteps(artifacts) {
    const byStep = new Map();
    for (const a of artifacts) {
      if (!byStep.has(a.step)) byStep.set(a.step, {});
      byStep.get(a.step)[a.kind] = a;
    }
    const numbers = [...byStep.keys()].sort((a, b) => b - a);
    stepsNote.textContent = `${numbers.length} steps recorded` +
      (numbers.length > STEPS_SHOWN ? `; the latest ${STEPS_SHOWN} are shown, newest first` : ", newest first");
    replace(steps, ...numbers.slice(0, STEPS_SHOWN).map((n) => {
      const step = byStep.get(n);
      const shot = Object.values(step).find((a) => a.content_type === "image/png");
      const tree = Object.values(step).find((a) => a.content_type !== "image/png");
      return h("li", { class: "step-card" },
        h("p", {}, h("strong", {}, `Step ${n}`)),
        shot ? h("img", { src: shot.url, alt: `Screenshot at step ${n}`, loading: "lazy",
                          width: 135, height: 240 }) : h("p", { class: "muted" }, "no screenshot"),
        tree ? h("p", {}, h("a", { href: tree.url, target: "_blank", rel: "noopener" }, "hierarchy")) : null);
    }));
  }

  refresh();
  return () => clearTimeout(timer);
}
