// The real @ag-ui/client HttpAgent against a live Waystation API (tests/integration/test_ag_ui_node.py starts
// the API and runs this with WAYSTATION_URL and WAYSTATION_TOKEN). Exits non-zero on the first
// failed check; prints one line per scenario passed.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";

const BASE = process.env.WAYSTATION_URL;
const TOKEN = process.env.WAYSTATION_TOKEN;
const IDEA = "An app that helps small clinics schedule patients and cut no-shows.";
const BOOK = "Book Rosewood Estate on 2027-02-14 for 200 guests";
const headers = { Authorization: `Bearer ${TOKEN}` };

// A fetch that notes each response's SSE ids (HttpAgent reads only `data:`), so a test can
// reconnect with Last-Event-ID as a browser's EventSource would; with `dropAfter`, the
// connection closes after that many events.
function idSpy(dropAfter = Infinity) {
  const ids = [];
  const spy = async (url, init) => {
    const response = await fetch(url, init);
    if (!response.body) return response;
    let buffer = "";
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    const noting = new TransformStream({
      transform(chunk, controller) {
        buffer += decoder.decode(chunk, { stream: true });
        const blocks = buffer.split("\n\n");
        buffer = blocks.pop();
        for (const block of blocks) {
          const id = block.split("\n").find((line) => line.startsWith("id: "));
          if (id && block.includes("\ndata: ")) {
            if (ids.length === dropAfter) {
              controller.terminate();
              return;
            }
            ids.push(id.slice(4));
          }
          controller.enqueue(encoder.encode(`${block}\n\n`));
        }
      },
    });
    return new Response(response.body.pipeThrough(noting), response);
  };
  return { ids, fetch: spy };
}

function agent(kind, threadId, extra = {}) {
  return new HttpAgent({ url: `${BASE}/ag-ui/${kind}`, headers, threadId, ...extra });
}

async function rest(path) {
  const response = await fetch(`${BASE}${path}`, { headers });
  assert.equal(response.status, 200, `${path}: ${response.status}`);
  return response.json();
}

async function collect(runner, parameters) {
  const events = [];
  const result = await runner.runAgent(parameters, { onEvent: ({ event }) => { events.push(event); } });
  return { events, result };
}

async function validationToTheNextInterrupt() {
  const thread = randomUUID();
  const client = agent("validation", thread);
  await collect(client, { forwardedProps: { input: { entrepreneur_input: IDEA } } });
  assert.equal(client.pendingInterrupts.length, 1);
  const [first] = client.pendingInterrupts;
  assert.equal(first.reason, "confirmation");
  assert.equal(first.metadata.checkpoint, "approve_founders_brief");
  assert.deepEqual(first.responseSchema.required, ["decision"]);
  const latest = await rest(`/runs/${thread}/snapshots/latest`);
  assert.deepEqual(client.state, latest.state, "STATE_SNAPSHOT and deltas give the run's state");

  const { events } = await collect(client, { resume: [{
    interruptId: first.id, status: "resolved",
    payload: { decision: "approve", digest: first.metadata.digest } }] });
  assert.equal(client.pendingInterrupts.length, 1);
  const [next] = client.pendingInterrupts;
  assert.notEqual(next.id, first.id);
  assert.equal(next.metadata.checkpoint, "approve_vpc_completion");
  assert.ok(events.some((e) => e.type === "STATE_DELTA"));
  const state = await rest(`/runs/${thread}/snapshots/latest`);
  assert.deepEqual(client.state, state.state, "the deltas applied by the client");
  const decided = (await rest(`/runs/${thread}/decisions`)).decisions[0];
  assert.equal(decided.decision, "approve");
  console.log("validation: first interrupt, resumed, next interrupt");
  return thread;
}

async function plannerApprovalWithAnEdit() {
  const thread = randomUUID();
  const client = agent("agent", thread);
  await collect(client, { forwardedProps: { input: { agent: "planner", message: BOOK } } });
  assert.equal(client.pendingInterrupts.length, 1);
  const [approval] = client.pendingInterrupts;
  assert.equal(approval.reason, "tool_call");
  const call = client.messages.flatMap((m) => m.toolCalls ?? [])
    .find((c) => c.id === approval.toolCallId);
  assert.equal(call.function.name, "book_vendor");
  const edited = { ...JSON.parse(call.function.arguments), guests: 150 };

  await collect(client, { resume: [{
    interruptId: approval.id, status: "resolved",
    payload: { decision: "edit", answer: edited, digest: approval.metadata.digest } }] });
  assert.deepEqual(client.pendingInterrupts, []);
  const result = client.messages.find((m) => m.role === "tool" && m.toolCallId === approval.toolCallId);
  assert.ok(result, "the approved call's result");
  const answers = client.messages.filter((m) => m.role === "assistant" && m.content);
  assert.ok(answers.length > 0, "the agent's answer");
  const decided = (await rest(`/runs/${thread}/decisions`)).decisions[0];
  assert.equal(decided.decision, "edit");
  assert.equal(decided.answer.guests, 150);

  client.addMessage({ id: randomUUID(), role: "user", content: "Thanks, that is all" });
  await collect(client, {});
  const said = client.messages.filter((m) => m.role === "user").map((m) => m.content);
  assert.deepEqual(said, [BOOK, "Thanks, that is all"], "each message once, the server's ids");
  console.log("planner: tool approval with an edit, then the next message");
}

async function plannerAnswerStreams() {
  // Issue 43: the answer arrives as several TEXT_MESSAGE_CONTENT deltas whose concatenation is
  // the durable answer, and the tool call's arguments as TOOL_CALL_ARGS deltas; one message each.
  const thread = randomUUID();
  const client = agent("agent", thread);
  const { events } = await collect(client, { forwardedProps: { input: {
    agent: "planner", message: "I need a wedding venue in Bangalore for 200 guests, rustic style" } } });
  const answered = (await rest(`/runs/${thread}/messages`)).messages
    .filter((m) => m.type === "agent.answered").at(-1);
  const answers = client.messages.filter((m) => m.role === "assistant" && m.content);
  assert.equal(answers.length, 1, "the answer once");
  assert.equal(answers[0].content, answered.text);
  const contents = events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT" && e.messageId === answers[0].id);
  assert.ok(contents.length > 3, `several deltas, not one: ${contents.length}`);
  assert.equal(contents.map((e) => e.delta).join(""), answered.text);
  const [call] = client.messages.flatMap((m) => m.toolCalls ?? []);
  const args = events.filter((e) => e.type === "TOOL_CALL_ARGS" && e.toolCallId === call.id);
  assert.ok(args.length > 1, "the arguments in pieces");
  assert.deepEqual(JSON.parse(call.function.arguments), JSON.parse(args.map((e) => e.delta).join("")));
  console.log(`planner: the answer in ${contents.length} deltas, the arguments in ${args.length}`);
}

// What a response sent for run events, as (id, type): not the framing that keeps one AG-UI run
// well-formed (RUN_STARTED, a step begun again, RUN_FINISHED), which repeats the id before it.
// A resumed stream's first state is whole, where the uninterrupted one sent a delta.
function runEvents(ids, events, start) {
  return events.map((event, i) => [ids[i], event.type.startsWith("STATE_") ? "STATE" : event.type])
    .filter(([id], i) => id !== (i ? ids[i - 1] : start));
}

async function reconnectMidStream(thread) {
  // The whole thread from its start (Last-Event-ID 0), to know what a reconnection must give.
  const whole = idSpy();
  const full = await collect(agent("validation", thread, {
    headers: { ...headers, "Last-Event-ID": "0" }, fetch: whole.fetch }), {});
  const cut = Math.floor(whole.ids.length / 2);

  const dropped = idSpy(cut);
  const first = agent("validation", thread, {
    headers: { ...headers, "Last-Event-ID": "0" }, fetch: dropped.fetch });
  // The stream ends before its RUN_FINISHED: the client may or may not call that an error.
  await first.runAgent({}).catch(() => {});
  assert.equal(dropped.ids.length, cut);
  const lastId = dropped.ids[cut - 1];

  const resumed = idSpy();
  const second = agent("validation", thread, {
    headers: { ...headers, "Last-Event-ID": lastId }, fetch: resumed.fetch });
  const after = await collect(second, {});
  const whole_ = runEvents(whole.ids, full.events, "0");
  const runIds = (ids, start) => runEvents(ids, ids.map(() => ({ type: "" })), start)
    .map(([id]) => id);
  assert.deepEqual([...runIds(dropped.ids, "0"), ...runIds(resumed.ids, lastId)],
    whole_.map(([id]) => id), "nothing missing or repeated");
  const at = whole_.findIndex(([id]) => id === lastId);
  assert.deepEqual(runEvents(resumed.ids, after.events, lastId), whole_.slice(at + 1));
  assert.equal(second.pendingInterrupts.length, 1, "the open interrupt again");
  console.log(`reconnect: dropped after ${cut} events at ${lastId}, resumed exactly`);
}

const thread = await validationToTheNextInterrupt();
await plannerApprovalWithAnEdit();
await plannerAnswerStreams();
await reconnectMidStream(thread);
