"""A caller's task, read and followed: one JSON-RPC call's connection and refusals, the task
a run is (read through the service layer, never stored), and the status updates that follow
its run events (the live loop's, api/services/live.py)."""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.types.a2a_pb2 import (
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.errors import A2AError, UnsupportedOperationError
from a2a.utils.task import HistoryLengthConfig, validate_history_length
from starlette.requests import Request
from temporalio.client import Client

from waystation.api import live_deltas
from waystation.api.auth import User
from waystation.api.deps import pooled_connection, still_signed_in
from waystation.api.errors import ApiError, as_api_error
from waystation.api.protocols.a2a import mapping
from waystation.api.queries import TranscriptQuery
from waystation.api.schemas import MessageDelta, RunView, TranscriptEntry
from waystation.api.services import live, messages, runs
from waystation.api.services.access import claims_of
from waystation.contracts.events import AGENT_ANSWERED
from waystation.persistence.models import RunRow
from waystation.registry import Registry
from waystation.settings import Settings

# Where the call context keeps the HTTP request and the caller authenticated for it.
REQUEST, USER = "waystation.request", "waystation.user"
HISTORY_PAGE = 500
# An agent's last answer lies within this many events of a pause (only the summary request
# and the pause itself are written after it).
ANSWER_LOOKBACK = 50


class CallerContext(DefaultServerCallContextBuilder):
    """The call context with the request and its caller, authenticated by the route (the
    API's own `get_user`) before the SDK sees the request. `A2A-Version` may come as a query
    parameter instead of a header (A2A 1.0, "Service Parameters"): the header wins."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[REQUEST], context.state[USER] = request, request.state.a2a_user
        headers: dict[str, str] = context.state.setdefault("headers", {})
        version = request.query_params.get(VERSION_HEADER)
        if version and VERSION_HEADER.lower() not in {name.lower() for name in headers}:
            headers[VERSION_HEADER.lower()] = version
        return context


def raw_params(context: ServerCallContext) -> dict[str, Any]:
    """The call's `params` as the client sent them (the SDK's parse maps an unknown enum
    value to 0, as if it were not given); the route keeps them."""
    params = context.state[REQUEST].state.a2a_params
    return params if isinstance(params, dict) else {}


def history_wanted(params: HistoryLengthConfig | None, default: int | None) -> int | None:
    """How many messages of history a call asks for (None: all); a negative length is
    refused (-32602), as the spec's semantics allow none."""
    validate_history_length(params)
    if params is None or not params.HasField("history_length"):
        return default
    return params.history_length


@dataclass
class Call:
    """One JSON-RPC call's caller and what it reaches, as a route gets them from
    `waystation.api.deps`."""

    user: User
    conn: asyncpg.Connection
    request: Request

    @property
    def registry(self) -> Registry:
        return self.request.app.state.registry

    @property
    def settings(self) -> Settings:
        return self.request.app.state.settings

    async def temporal(self) -> Client:
        return await self.request.app.state.temporal.client()


@contextlib.asynccontextmanager
async def calling(context: ServerCallContext) -> AsyncIterator[Call]:
    """A connection with the caller's claims for as long as the block runs; refusals come
    out as the protocol's errors."""
    request: Request = context.state[REQUEST]
    user: User = context.state[USER]
    with refusals():
        async with pooled_connection(request, claims_of(user)) as conn:
            yield Call(user=user, conn=conn, request=request)


@contextlib.contextmanager
def refusals(conflict: type[A2AError] = UnsupportedOperationError) -> Iterator[None]:
    """The service layer's refusals, and Temporal or the database being unreachable, as the
    protocol's errors (see `mapping.a2a_error`)."""
    try:
        yield
    except A2AError:
        raise
    except Exception as error:
        refusal = as_api_error(error)
        if refusal is None:
            raise
        raise mapping.a2a_error(refusal, conflict=conflict) from error


async def visible(call: Call, task_id: str) -> RunRow:
    """The run a task id names, if the caller may see it (else: no such task)."""
    try:
        run_id = UUID(task_id)
    except ValueError:
        raise ApiError(404, "run_not_found", f"run {task_id} not found") from None
    return await runs.visible_run(call.conn, call.user, run_id)


async def task(call: Call, run: RunRow, *, history: int | None = 0) -> Task:
    """The run as its task, now, with the last `history` messages of its conversation (None:
    all of them)."""
    view = await runs.run_view(call.conn, run, registry=call.registry)
    waiting = messages.waits_for_message(view, registry=call.registry)
    found = mapping.task(view, waiting=waiting,
                         answer=await last_answer(call, run) if waiting else None)
    if history != 0:
        found.history.extend(await _history(call, run, history))
    return found


async def _history(call: Call, run: RunRow, limit: int | None) -> list[Message]:
    """The run's transcript as the task's history: what was said, by the user and by the
    agent (a run of a kind that takes no messages has none)."""
    kept: deque[TranscriptEntry] = deque(maxlen=limit)
    after = 0
    while True:
        page = await messages.transcript(call.conn, run, TranscriptQuery(
            after_seq=after, limit=HISTORY_PAGE), registry=call.registry)
        kept.extend(m for m in page.messages if m.role != "tool" and m.text)
        if len(page.messages) < HISTORY_PAGE or page.next_after_seq <= after:
            break
        after = page.next_after_seq
    return [mapping.history_message(run.id, entry) for entry in kept]


async def last_answer(call: Call, run: RunRow) -> str | None:
    """The run's last answer, shown while it waits for the next message."""
    page = await messages.transcript(call.conn, run, TranscriptQuery(
        after_seq=max(0, run.last_seq - ANSWER_LOOKBACK), limit=ANSWER_LOOKBACK),
        registry=call.registry)
    said = [m.text for m in page.messages if m.type == AGENT_ANSWERED and m.text]
    return said[-1] if said else None


async def updates(context: ServerCallContext, run_id: UUID, *, after_seq: int, baseline: int,
                  until_input: bool
                  ) -> AsyncIterator[TaskStatusUpdateEvent | TaskArtifactUpdateEvent]:
    """A status update per run event after `after_seq`, as the live loop yields them
    (api/services/live.py), until the task ends, or with `until_input` needs input too; a
    status change of the run's is looked at as it happens; the answer being written, as
    artifact updates (issue 43)."""
    request: Request = context.state[REQUEST]
    user: User = context.state[USER]
    async with calling(context) as call:
        subscribe_at = (await runs.visible_run(call.conn, user, run_id)).last_seq
    followed = live.follow(request.app.state.event_hub, request.app.state.pool, user, run_id,
                           after_seq=after_seq, subscribe_at=subscribe_at,
                           heartbeat=request.app.state.settings.sse_heartbeat_seconds,
                           signed_in=lambda: still_signed_in(request, user))
    told: TaskState | None = None  # the state the last update carried
    shown = live_deltas.Shown()
    async with contextlib.aclosing(followed):
        async for item in followed:
            if isinstance(item, live.CutOff):
                if item.refusal is not None:
                    raise mapping.a2a_error(item.refusal)
                return
            if isinstance(item, live.Deltas):
                for update in _artifact_updates(run_id, shown, item.deltas):
                    yield update
                continue
            if not isinstance(item, live.Events | live.CaughtUp):
                continue
            async with calling(context) as call:
                # Read after the events: the state sent with them is never older than they.
                view, status = await _now(call, run_id)
            if isinstance(item, live.Events):
                for event in item.events:
                    yield mapping.status_update(run_id, status, event.view)
                told = status.state
            elif view.last_seq <= item.last_seq and _settled(view, status.state, baseline,
                                                             until_input):
                if told != status.state:
                    # It ended or paused with no event to tell it (a run that never started,
                    # an agent run waiting for its next message): the stream's last update
                    # says where the task stands.
                    yield TaskStatusUpdateEvent(task_id=str(run_id), context_id=str(run_id),
                                                status=status)
                return


def _artifact_updates(run_id: UUID, shown: live_deltas.Shown,
                      deltas: Iterable[MessageDelta]) -> Iterator[TaskArtifactUpdateEvent]:
    """The answer's text deltas as artifact updates: appended, but replacing the artifact on
    its first piece and when a retried model request starts over."""
    for delta in deltas:
        again = shown.reset(delta)
        new = None if delta.call_id else shown.new(delta.message_id, delta)
        if new is not None and new[1]:
            yield mapping.message_artifact(run_id, delta, new[1], append=not (new[0] or again))


async def _now(call: Call, run_id: UUID) -> tuple[RunView, TaskStatus]:
    run = await runs.visible_run(call.conn, call.user, run_id)
    view = await runs.run_view(call.conn, run, registry=call.registry)
    waiting = messages.waits_for_message(view, registry=call.registry)
    answer = await last_answer(call, run) if waiting else None
    return view, mapping.task_status(view, waiting=waiting, answer=answer)


def _settled(view: RunView, state: TaskState, baseline: int, until_input: bool) -> bool:
    if state in mapping.TERMINAL_STATES:
        return True
    if not until_input or state != TaskState.TASK_STATE_INPUT_REQUIRED:
        return False
    # A pending request is closed in the same write as its decision, so it is never stale.
    # A run's row still says `paused` for a moment after it took a message (recorded
    # before the turn begins): only a pause written after `baseline` waits for the next one.
    return view.pending_decision is not None or view.last_seq > baseline
