"""A caller's task, read and followed: one JSON-RPC call's connection and refusals, the task
a run is (read through the service layer, never stored), and the status updates that follow
its run events (read from the table; the event hub only wakes the loop)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from uuid import UUID

import asyncpg
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.types.a2a_pb2 import Task, TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent
from a2a.utils.errors import A2AError, UnsupportedOperationError
from starlette.requests import Request
from temporalio.client import Client

from api import live_deltas
from api.auth import User
from api.deps import pooled_connection, still_signed_in
from api.errors import ApiError, as_api_error
from api.event_hub import EventHub, RunSubscription
from api.protocols.a2a import mapping
from api.queries import EventQuery, TranscriptQuery
from api.schemas import MessageDelta, RunView
from api.services import events, messages, runs
from api.services.access import claims_of
from contracts.events import AGENT_ANSWERED
from persistence.models import RunRow
from waystation.registry import Registry
from waystation.settings import Settings

# Where the call context keeps the HTTP request and the caller authenticated for it.
REQUEST, USER = "waystation.request", "waystation.user"
EVENT_PAGE = 500
# An agent's last answer lies within this many events of a pause (only the summary request
# and the pause itself are written after it).
ANSWER_LOOKBACK = 50


class CallerContext(DefaultServerCallContextBuilder):
    """The call context with the request and its caller, authenticated by the route (the
    API's own `get_user`) before the SDK sees the request."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[REQUEST], context.state[USER] = request, request.state.a2a_user
        return context


@dataclass
class Call:
    """One JSON-RPC call's caller and what it reaches, as a route gets them from `api.deps`."""

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


async def task(call: Call, run: RunRow) -> Task:
    """The run as its task, now."""
    view = await runs.run_view(call.conn, run, registry=call.registry)
    waiting = messages.waits_for_message(view, registry=call.registry)
    return mapping.task(view, waiting=waiting,
                        answer=await last_answer(call, run) if waiting else None)


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
    """A status update per run event after `after_seq`, read from the table (the event hub
    only wakes the loop), until the task ends, or with `until_input` needs input too; the
    answer being written, as artifact updates (issue 43)."""
    request: Request = context.state[REQUEST]
    hub: EventHub = request.app.state.event_hub
    heartbeat: float = request.app.state.settings.sse_heartbeat_seconds
    subscription: RunSubscription | None = None
    shown: live_deltas.Shown | None = None
    try:
        while True:
            # As the API's own streams do: after an access notice or a quiet heartbeat the
            # credential is checked again before anything more is sent (whether the caller
            # still reads the run, `visible_run` below checks on every read).
            if subscription is not None and subscription.stale:
                subscription.stale = False  # a notice during the check marks it stale again
                with refusals():
                    if not await still_signed_in(request, context.state[USER]):
                        return
            async with calling(context) as call:
                run = await runs.visible_run(call.conn, call.user, run_id)
                page = await events.list_events(call.conn, run, EventQuery(
                    after_seq=after_seq, limit=EVENT_PAGE))
                # Read after the events: the state sent with them is never older than they.
                run = await runs.visible_run(call.conn, call.user, run_id)
                view = await runs.run_view(call.conn, run, registry=call.registry)
                waiting = messages.waits_for_message(view, registry=call.registry)
                answer = await last_answer(call, run) if waiting else None
            status = mapping.task_status(view, waiting=waiting, answer=answer)
            for event in page.events:
                yield mapping.status_update(run_id, status, event)
            after_seq = page.next_after_seq
            if after_seq >= view.last_seq and _settled(view, waiting, baseline, until_input):
                if not page.events and status.state in mapping.TERMINAL_STATES:
                    # It ended with no event to tell it (a run that never started).
                    yield TaskStatusUpdateEvent(task_id=str(run_id), context_id=str(run_id),
                                                status=status)
                return
            if len(page.events) == EVENT_PAGE:
                continue
            if subscription is None:
                # Subscribed before the next read, so nothing committed from now on is missed.
                subscription = hub.subscribe_run(run_id, from_seq=view.last_seq,
                                                 caller=context.state[USER].name)
                continue
            if subscription.closed:
                return  # the API is shutting down: the client resubscribes with Last-Event-ID
            if not subscription.stale:  # checked after any access notice before the deltas
                claims = claims_of(context.state[USER])
                deltas = await (live_deltas.joined if shown is None else live_deltas.taken)(
                    request.app.state.pool, claims, subscription)
                shown = shown or live_deltas.Shown()
                for update in _artifact_updates(run_id, shown, deltas):
                    yield update
            if subscription.overflowed:
                # A full queue takes no more wake-ups: subscribe afresh (rows come from the
                # table whatever the queue held).
                hub.unsubscribe_run(subscription)
                subscription = None
                continue
            await _woken(subscription, heartbeat)
    finally:
        if subscription is not None:
            hub.unsubscribe_run(subscription)


def _artifact_updates(run_id: UUID, shown: live_deltas.Shown,
                      deltas: list[MessageDelta]) -> Iterator[TaskArtifactUpdateEvent]:
    """The answer's text deltas as artifact updates: appended, but replacing the artifact on
    its first piece and when a retried model request starts over."""
    for delta in deltas:
        again = shown.reset(delta)
        new = None if delta.call_id else shown.new(delta.message_id, delta)
        if new is not None and new[1]:
            yield mapping.message_artifact(run_id, delta, new[1], append=not (new[0] or again))


def _settled(view: RunView, waiting: bool, baseline: int, until_input: bool) -> bool:
    state = mapping.task_state(view, waiting=waiting)
    if state in mapping.TERMINAL_STATES:
        return True
    if not until_input or state != TaskState.TASK_STATE_INPUT_REQUIRED:
        return False
    # A pending request is closed in the same write as its decision, so it is never stale.
    # A run's row still says `paused` for a moment after it took a message (recorded
    # before the turn begins): only a pause written after `baseline` waits for the next one.
    return view.pending_decision is not None or view.last_seq > baseline


async def _woken(subscription: RunSubscription, timeout: float) -> None:  # noqa: ASYNC109
    """Until the hub has news of the run (the rows are read from the table) or `timeout`,
    after which the caller is checked again (a token may expire with no notice)."""
    try:
        await asyncio.wait_for(subscription.queue.get(), timeout=timeout)
    except TimeoutError:
        subscription.stale = True
    while not subscription.queue.empty():
        subscription.queue.get_nowait()
