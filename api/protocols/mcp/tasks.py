"""Long runs as MCP tasks: the `io.modelcontextprotocol/tasks` extension of the 2026-07-28
revision (`tasks/get`, `tasks/update`, `tasks/cancel`, `resultType: "task"`).

The task is the run: its id is the run's id and its state is read from the run on every
`tasks/get`, so a task outlives any API process and needs no store of its own, and whoever may
not see the run gets "task not found" exactly as `get_run` answers `run_not_found`. Its status
follows the run: `working`, `input_required` while a gate waits, then `completed` (the result
is `get_run`'s view of the finished run), `failed` or `cancelled`.

While a gate waits the task asks, in URL mode, for the person to decide on the run's page in
the console (the page itself signs them in; the URL carries no token). The decision is made
there, or with the `decide` tool, never by the elicitation's answer: `tasks/update` is only
acknowledged.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver.server import require_client_extension
from mcp_types import (
    INTERNAL_ERROR,
    ElicitRequest,
    ElicitRequestURLParams,
    RequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from api.decision_payload import payload_schema
from api.errors import ApiError
from api.protocols.mcp.mapping import Caller, protocol_errors, tool_result
from api.schemas import DecisionView, RunView
from api.services import runs

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
DECIDE_META = "waystation/decide"
# What a client should wait between polls: a gate waits minutes to weeks, a phase seconds.
POLL_INTERVAL_MS = 2000


class TaskParams(RequestParams):
    task_id: str


class TaskUpdateParams(TaskParams):
    input_responses: dict[str, Any]


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
    """Acknowledged: the only input a task asks for is a visit to the console, whose answer
    (accept, decline) decides nothing."""
    require_client_extension(ctx, TASKS_EXTENSION)
    await _task(Caller.of(ctx.request), params.task_id)
    return {}


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
    with protocol_errors("MCP tasks", taskId=task_id):
        async with caller.conn() as conn:
            run = await runs.visible_run(conn, caller.user, _run_id(task_id))
            view = await runs.run_view(conn, run, registry=caller.registry)
    return detailed_task(view, console_base=caller.settings.console_base)


def _run_id(task_id: str) -> UUID:
    try:
        return UUID(task_id)
    except ValueError as error:
        raise ApiError(404, "run_not_found", f"run {task_id} not found") from error


def detailed_task(view: RunView, *, console_base: str) -> dict[str, Any]:
    """The task a run is now (the extension's `DetailedTask`)."""
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
    phase = f" · {view.phase_name}" if view.phase_name else ""
    return {**task, "status": "working",
            "statusMessage": f"run {view.status}, phase {view.current_phase}{phase}"}


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
