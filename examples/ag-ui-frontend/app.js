// A Waystation agent run driven from the browser by the real @ag-ui/client (bundled into
// ag-ui-client.js by `npm run build`). The thread id is the run id and is kept in the address,
// so a reload reopens the same run: its messages and its open approvals come back.
import { HttpAgent } from "./ag-ui-client.js";

const $ = (selector) => document.querySelector(selector);
const settings = new URLSearchParams(location.hash.slice(1));
let agent = null;
let started = false;

function status(text) {
  $("#status").textContent = text;
}

function connect({ api, token, thread }) {
  started = Boolean(thread);
  const threadId = thread || crypto.randomUUID();
  agent = new HttpAgent({
    url: `${api.replace(/\/$/, "")}/ag-ui/agent`,
    headers: { Authorization: `Bearer ${token}` },
    threadId,
  });
  agent.subscribe({
    onMessagesChanged: ({ messages }) => renderMessages(messages),
    onRunErrorEvent: ({ event }) => status(`Refused: ${event.code} — ${event.message}`),
  });
  $("#thread-id").textContent = threadId;
  $("#connect [name=thread]").value = threadId;
  // The token stays out of the address (and its history); the tab keeps it for a reload.
  sessionStorage.setItem("waystation-token", token);
  settings.delete("token");
  settings.set("api", api);
  settings.set("thread", threadId);
  history.replaceState(null, "", `#${settings}`);
  status(started ? "Reopening the thread…" : "Connected. Send the first message.");
  return started ? run({}) : Promise.resolve();
}

async function run(parameters) {
  $("#approvals").hidden = true;
  status("The agent is working…");
  try {
    await agent.runAgent(parameters);
  } catch (error) {
    status(`Stopped: ${error.message}`);
    return;
  }
  renderInterrupts(agent.pendingInterrupts);
  status(agent.pendingInterrupts.length
    ? `Waiting for your decision (${agent.pendingInterrupts.length}).`
    : "The agent waits for your next message.");
}

function renderMessages(messages) {
  const list = $("#messages");
  list.replaceChildren(...messages.flatMap((message) => {
    const lines = [];
    if (message.content) lines.push(line(message.role, message.name || message.role,
                                         message.content));
    for (const call of message.toolCalls ?? []) {
      lines.push(line("tool", `calls ${call.function.name}`, call.function.arguments));
    }
    return lines;
  }));
}

function line(role, who, text) {
  const item = document.createElement("li");
  item.className = role;
  const label = document.createElement("span");
  label.className = "who";
  label.textContent = who;
  item.append(label, typeof text === "string" ? text : JSON.stringify(text));
  return item;
}

function renderInterrupts(interrupts) {
  $("#approvals").hidden = interrupts.length === 0;
  $("#interrupts").replaceChildren(...interrupts.map(interruptCard));
}

function interruptCard(interrupt) {
  const card = document.createElement("article");
  card.className = "interrupt";
  const [title, ...description] = interrupt.message.split("\n\n");
  const heading = document.createElement("h3");
  heading.textContent = title;
  const text = document.createElement("p");
  text.textContent = description.join("\n\n");
  card.append(heading, text);
  const digest = interrupt.metadata.digest;
  const decide = (payload, status = "resolved") =>
    run({ resume: [{ interruptId: interrupt.id, status, payload: { digest, ...payload } }] });
  const actions = document.createElement("div");
  actions.className = "actions";
  if (interrupt.reason === "tool_call") {
    const editor = document.createElement("textarea");
    editor.setAttribute("aria-label", "The call's arguments");
    editor.value = JSON.stringify(interrupt.metadata.answerInitial, null, 2);
    const feedback = document.createElement("input");
    feedback.placeholder = "Why not (told to the agent)";
    feedback.setAttribute("aria-label", "Feedback");
    card.append(editor);
    actions.append(
      button("Approve", () => decide({ decision: "approve" })),
      button("Approve with these arguments", () => decide({
        decision: "edit", answer: JSON.parse(editor.value) }), "secondary"),
      feedback,
      button("Reject", () => decide({ decision: "reject", feedback: feedback.value || undefined },
                                    "cancelled"), "danger"));
  } else {
    for (const option of interrupt.metadata.options) {
      actions.append(button(option.label, () => decide({ decision: option.value }),
                            option.value === interrupt.metadata.recommendation ? "" : "secondary"));
    }
  }
  card.append(actions);
  return card;
}

function button(label, onClick, kind = "") {
  const element = document.createElement("button");
  element.type = "button";
  element.textContent = label;
  element.className = kind;
  element.addEventListener("click", onClick);
  return element;
}

$("#connect").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  connect({ api: form.get("api"), token: form.get("token"), thread: form.get("thread") });
});

$("#say").addEventListener("submit", (event) => {
  event.preventDefault();
  if (!agent) return status("Connect first.");
  const text = $("#text").value.trim();
  $("#text").value = "";
  if (!started) {
    // A new thread starts a planner run, with its first message in the run's input.
    started = true;
    return run({ forwardedProps: { input: { agent: "planner", message: text } } });
  }
  agent.addMessage({ id: crypto.randomUUID(), role: "user", content: text });
  return run({});
});

// `#api=...&token=...&thread=...` fills the form and connects (a reload: the thread again);
// `&send=1` also sends the message at once.
const token = settings.get("token") || sessionStorage.getItem("waystation-token");
for (const name of ["api", "thread"]) {
  if (settings.get(name)) $(`#connect [name=${name}]`).value = settings.get(name);
}
if (token) {
  $("#connect [name=token]").value = token;
  const send = settings.get("send");
  settings.delete("send");
  await connect({ api: $("#connect [name=api]").value, token,
                  thread: settings.get("thread") || "" });
  if (send && !started) $("#say").requestSubmit();
}
