"""Long runs as MCP tasks: the `io.modelcontextprotocol/tasks` extension of the 2026-07-28
revision (`tasks/get`, `tasks/update`, `tasks/cancel`, `resultType: "task"`), and `tasks/result`
of the 2025-11-25 tasks, which clients written for them still call.

The task is the run: its id is the run's id and its state is read from the run on every
`tasks/get`, so a task outlives any API process and needs no store of its own, and whoever may
not see the run gets "task not found" exactly as `get_run` answers `run_not_found`. Its status
follows the run: `working`, `input_required` while a gate or a conversation waits, then
`completed` (the result is `get_run`'s view of the finished run), `failed` or `cancelled`.

While a gate waits the task asks, in URL mode, for the person to decide on the run's page in
the console (the page itself signs them in; the URL carries no token). The decision is made
there, or with the `decide` tool, never by the elicitation's answer: `tasks/update` only
acknowledges it. While a conversation (an agent run) waits for its next message the task asks
for it in form mode, and `tasks/update`'s accepted answer is that message, sent as
`send_message` sends it.

A `tasks/result` with a `progressToken` is answered on an SSE stream (api/protocols/mcp/
server.py): while the run's model writes, `notifications/progress` carry the answer so far.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from uuid import UUID

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    RequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field, ValidationError

from waystation.api.decision_payload import payload_schema
from waystation.api.deps import still_signed_in
from waystation.api.errors import ApiError, invalid_request
from waystation.api.live_deltas import Shown
from waystation.api.protocols.mcp.mapping import Caller, protocol_errors, tool_result
from waystation.api.rate_limits import count_call
from waystation.api.schemas import DecisionView, MessageDelta, MessageRequest, RunView
from waystation.api.services import live, messages, runs
from waystation.contracts.statuses import TERMINAL_RUN_STATUSES

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
DECIDE_META = "waystation/decide"
# What a client should wait between polls: a gate waits minutes to weeks, a phase seconds.
POLL_INTERVAL_MS = 2000
# How long `tasks/result` waits for a run to end: under the 5 s an HTTP client waits by default
# (httpx's, as the SDK's examples create it), so a call that finds the run still going is
# answered, not dropped by the client.
RESULT_WAIT_SECONDS = 4.0
RESULT_METHOD = "tasks/result"
# Set on the scope of a request answered on an SSE stream (server.McpEndpoint): its
# `progressToken` reaches the client, and the stream keeps the connection alive (the
# transport pings), so `tasks/result` waits up to `PROGRESS_WAIT_SECONDS` instead, ending as
# soon as the run needs input.
STREAMED_SCOPE_KEY = "waystation.mcp_streamed"
PROGRESS_WAIT_SECONDS = 60.0
# The keys of a task's input requests: a gate's decision, a conversation's next message.
DECISION_INPUT = "decision-"
MESSAGE_INPUT = "message-"
# The next message's form: `send_message`'s text, with its bounds (a form's schema is flat).
_MESSAGE = MessageRequest.model_json_schema()
MESSAGE_FORM: dict[str, Any] = {"type": "object", "required": _MESSAGE["required"],
                                "properties": _MESSAGE["properties"]}


class TaskParams(RequestParams):
    task_id: str


# A task asks for one message and for its open decisions' visits at a time: more answers in
# one update than that are refused before any is read.
MAX_INPUT_RESPONSES = 50


class TaskUpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(max_length=MAX_INPUT_RESPONSES)


def accepts_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client declared the extension (on the 2026 wire only: a task
    result cannot be delivered on a handshake-era session)."""
    capabilities = ctx.session.client_capabilities
    declared = capabilities.extensions if capabilities else None
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and bool(
        declared and TASKS_EXTENSION in declared)


async def created_task(caller: Caller, run_id: str) -> dict[str, Any]:
    """The `CreateTaskResult` of a run just started: the run is already durable, so a
    `tasks/get` for it resolves from now on."""
    return {"resultType": "task", **await _task(caller, run_id)}


async def get_task(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
    require_client_extension(ctx, TASKS_EXTENSION)
    return await _task(Caller.of(ctx.request), params.task_id)


async def update_task(ctx: ServerRequestContext[Any, Any],
                      params: TaskUpdateParams) -> dict[str, Any]:
    """The answers to the task's input requests. An accepted message form is the run's next
    message, sent as `send_message` sends it (the same answer sent again is applied once); it
    must answer the request open now, or it is refused as `not_waiting_for_message`. A
    decision's visit to the console decides nothing: acknowledged. Other keys are refused."""
    require_client_extension(ctx, TASKS_EXTENSION)
    caller = Caller.of(ctx.request)
    with protocol_errors("MCP tasks/update", taskId=params.task_id):
        answers = {key: _answer(key, response)
                   for key, response in params.input_responses.items()}
        async with caller.conn() as conn:
            run = await runs.visible_run(conn, caller.user, _run_id(params.task_id))
            view = await runs.run_view(conn, run, registry=caller.registry)
            for key, text in answers.items():
                if text is None:
                    continue
                if key != _message_key(view) or not messages.waits_for_message(
                        view, registry=caller.registry):
                    raise ApiError(409, "not_waiting_for_message",
                                   f"input request {key} of run {run.id} is not open: the "
                                   "run is not waiting for that message")
                await messages.send_message(
                    conn, await caller.temporal(), caller.user, run, MessageRequest(text=text),
                    registry=caller.registry, idempotency_key=f"mcp-task {run.id} {key}")
    return {}


def _answer(key: str, response: Any) -> str | None:
    """The message an input response carries: None for a decision's or for a form declined
    or dismissed; a malformed response is refused (422, naming where)."""
    if key.startswith(DECISION_INPUT):
        return None
    if not key.startswith(MESSAGE_INPUT):
        raise ApiError(422, "invalid_request",
                       f"inputResponses.{key}: no such input request (the task's keys start "
                       f"with {DECISION_INPUT!r} or {MESSAGE_INPUT!r})")
    try:
        answer = ElicitResult.model_validate(response)
        if answer.action != "accept":
            return None
        return MessageRequest.model_validate(answer.content or {}).text
    except ValidationError as error:
        raise invalid_request([{**e, "loc": ("inputResponses", key, *e["loc"])}
                               for e in error.errors()]) from error


async def task_result(ctx: ServerRequestContext[Any, Any],
                      params: TaskParams) -> dict[str, Any]:
    """The run's result once it has ended (waiting up to `RESULT_WAIT_SECONDS` for it): a
    completed run's `CallToolResult` (as `tasks/get`'s `result`), a failed run's error (as
    `tasks/get`'s `error`); a canceled run has none. A run still going is refused, naming its
    status: the client polls `tasks/get` and asks again once it has ended."""
    require_client_extension(ctx, TASKS_EXTENSION)
    caller = Caller.of(ctx.request)
    streamed = bool(caller.request.scope.get(STREAMED_SCOPE_KEY))
    if streamed:
        # An open stream of its caller, as every other stream is (api/rate_limits.py), held
        # until the answer is sent; over the limit, refused before anything is read.
        with protocol_errors("MCP tasks/result", taskId=params.task_id):
            await count_call(caller.request.scope, write=False, stream=True)
    task = await _ended_task(caller, params.task_id,
                             progress=_Progress(ctx) if streamed else None)
    related = {"io.modelcontextprotocol/related-task": {"taskId": params.task_id}}
    if task["status"] == "completed":
        return {**task["result"], "_meta": related}
    if task["status"] == "failed":
        raise MCPError(**task["error"])
    data = {"taskId": params.task_id, "status": task["status"]}
    if task["status"] == "cancelled":
        raise MCPError(INVALID_REQUEST, "the run was canceled: it has no result", data=data)
    raise MCPError(INVALID_REQUEST, f"the run has not ended (task {task['status']}: "
                                    f"{task['statusMessage']}); poll tasks/get until it has",
                   data=data)


class _Progress:
    """A request's progress notifications: the text of the answer being written so far
    (each a notification numbered one higher; a retried model request starts over)."""

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self.ctx, self.shown, self.count = ctx, Shown(), 0
        self.written: dict[str, str] = {}  # message id -> its text so far

    async def tell(self, deltas: tuple[MessageDelta, ...]) -> None:
        latest = None
        for delta in deltas:
            if self.shown.reset(delta):
                self.written.clear()
            new = None if delta.call_id else self.shown.new(delta.message_id, delta)
            if new is not None and new[1]:
                self.written[delta.message_id] = self.written.get(delta.message_id, "") + new[1]
                latest = delta.message_id
        if latest is not None:
            self.count += 1
            await self.ctx.session.report_progress(self.count, message=self.written[latest])


async def _ended_task(caller: Caller, task_id: str, *,
                      progress: _Progress | None = None) -> dict[str, Any]:
    """The task once its run has ended, or as it is after `RESULT_WAIT_SECONDS`; the live
    loop (api/services/live.py) says when the run's status changes. With `progress`, the
    answer being written is told as it comes, and the wait (`PROGRESS_WAIT_SECONDS`) ends
    too when the run needs input after the call began."""
    view = await _view(caller, task_id)
    began = view.last_seq

    def settled(now: RunView) -> bool:
        return now.status in TERMINAL_RUN_STATUSES or (
            progress is not None and now.last_seq > began
            and _task_of(caller, now)["status"] == "input_required")

    followed = live.follow(caller.request.app.state.event_hub, caller.request.app.state.pool,
                           caller.user, view.run_id, after_seq=view.last_seq,
                           subscribe_at=view.last_seq,
                           heartbeat=caller.settings.sse_heartbeat_seconds,
                           signed_in=lambda: still_signed_in(caller.request, caller.user))
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(PROGRESS_WAIT_SECONDS if progress else RESULT_WAIT_SECONDS), \
                contextlib.aclosing(followed):
            async for item in followed:
                if settled(view):
                    break
                if isinstance(item, live.CutOff):
                    with protocol_errors("MCP tasks/result", taskId=task_id):
                        raise item.refusal or ApiError(401, "unauthenticated",
                                                       "the credential no longer signs in")
                if isinstance(item, live.Deltas) and progress is not None:
                    await progress.tell(item.deltas)
                if isinstance(item, live.StatusChanged | live.Heartbeat):
                    view = await _view(caller, task_id)  # read again: visible, and ended?
                    if settled(view):
                        break
    return _task_of(caller, view)


async def cancel_task(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
    """Cancels the run (as cancel_run); a run already finished keeps its status, as the
    extension allows."""
    require_client_extension(ctx, TASKS_EXTENSION)
    caller = Caller.of(ctx.request)
    with protocol_errors("MCP tasks/cancel", taskId=params.task_id):
        async with caller.conn() as conn:
            run = await runs.visible_run(conn, caller.user, _run_id(params.task_id))
            try:
                await runs.cancel_run(conn, await caller.temporal(), caller.user, run)
            except ApiError as error:
                if error.code != "run_finished":
                    raise
    return {}


async def _task(caller: Caller, task_id: str) -> dict[str, Any]:
    return _task_of(caller, await _view(caller, task_id))


def _task_of(caller: Caller, view: RunView) -> dict[str, Any]:
    return detailed_task(view, console_base=caller.settings.console_base,
                         waits_for_message=messages.waits_for_message(
                             view, registry=caller.registry))


async def _view(caller: Caller, task_id: str) -> RunView:
    """The run a task id names, if the caller may see it (else -32602, "not found")."""
    with protocol_errors("MCP tasks", taskId=task_id):
        async with caller.conn() as conn:
            run = await runs.visible_run(conn, caller.user, _run_id(task_id))
            return await runs.run_view(conn, run, registry=caller.registry)


def _run_id(task_id: str) -> UUID:
    try:
        return UUID(task_id)
    except ValueError as error:
        raise ApiError(404, "run_not_found", f"run {task_id} not found") from error


def detailed_task(view: RunView, *, console_base: str,
                  waits_for_message: bool) -> dict[str, Any]:
    """The task a run is now (the extension's `DetailedTask`); `waits_for_message`: the run's
    conversation waits for its next message."""
    task: dict[str, Any] = {
        "taskId": str(view.run_id), "createdAt": view.created_at.isoformat(),
        "lastUpdatedAt": view.updated_at.isoformat(), "ttlMs": None,
        "pollIntervalMs": POLL_INTERVAL_MS}
    why = view.stop_reason or view.status
    if view.status == "completed":
        return {**task, "status": "completed", "statusMessage": f"run {why}",
                "result": tool_result(view).model_dump(by_alias=True, mode="json",
                                                       exclude_none=True)}
    if view.status == "failed":
        message = f"run failed: {view.error_message or why}"
        return {**task, "status": "failed", "statusMessage": message,
                "error": {"code": INTERNAL_ERROR, "message": message,
                          "data": {"run_id": str(view.run_id), "stop_reason": why}}}
    if view.status == "canceled":
        return {**task, "status": "cancelled", "statusMessage": "run canceled"}
    gate = view.pending_decision
    if gate is not None:
        return {**task, "status": "input_required",
                "statusMessage": f"waiting for decision {gate.checkpoint_name!r}",
                # One key per request: a gate asked again (reopened) is a new request.
                "inputRequests": {f"decision-{gate.request_id}": _visit_console(
                    view.run_id, gate, console_base)}}
    if waits_for_message:
        return {**task, "status": "input_required",
                "statusMessage": "waiting for the next message",
                # One key per wait: the run's events move on with each message.
                "inputRequests": {_message_key(view): _ask_message(view)}}
    phase = f" · {view.phase_name}" if view.phase_name else ""
    return {**task, "status": "working",
            "statusMessage": f"run {view.status}, phase {view.current_phase}{phase}"}


def _message_key(view: RunView) -> str:
    return f"{MESSAGE_INPUT}{view.last_seq}"


def _ask_message(view: RunView) -> dict[str, Any]:
    """The elicitation (form mode) asking for the conversation's next message."""
    ask = ElicitRequest(params=ElicitRequestFormParams(
        requested_schema=MESSAGE_FORM,
        message=f"Waystation run {view.run_id} ({view.kind}) waits for the next message of its "
                "conversation: answer with it, or send it with the send_message tool."))
    return ask.model_dump(by_alias=True, mode="json", exclude_none=True)


def _visit_console(run_id: UUID, gate: DecisionView, console_base: str) -> dict[str, Any]:
    """The elicitation (URL mode) sending the person to the run's page in the console. Its
    `_meta` says what `decide` would take instead, for a client that answers for them."""
    decide = {"tool": "decide", "run_id": str(run_id), "checkpoint": gate.checkpoint_name,
              "request_id": str(gate.request_id), "schema": payload_schema(gate)}
    ask = ElicitRequest(params=ElicitRequestURLParams(
        url=f"{console_base}/#/runs/{run_id}", meta={DECIDE_META: decide},
        message=f"Waystation run {run_id} waits for your decision: {gate.title} "
                f"({gate.checkpoint_name}). Decide it on its page in the Waystation console, "
                "or with the decide tool."))
    return ask.model_dump(by_alias=True, mode="json", exclude_none=True)
