"""Server-Sent Events: a run's events live, and the caller's decision inbox.

    curl -N -H "Authorization: Bearer $TOKEN" localhost:8000/runs/$RUN/events/stream

A stream checks its caller again (its credential, and for a run stream `GET /runs/{id}`'s
rule) before it sends anything after an access notice (see api/event_hub.py) or a heartbeat's
quiet (a token or session may have expired with no notice), and ends, sending nothing more,
when the caller may no longer read.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any
from uuid import UUID

import asyncpg
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from api import live_deltas
from api.auth import User
from api.deps import CurrentUser, VisibleRun, claims_of, still_reads_run, still_signed_in
from api.errors import ApiError
from api.event_hub import EventHub, InboxSubscription, RunSubscription
from api.schemas import EventView
from api.services.decisions import decision_views
from api.sse import STREAM_HEADERS, LiveEvent, sse
from contracts.events import TERMINAL_EVENT_TYPES
from persistence import events as events_repo
from persistence import gates as gates_repo
from persistence import groups as groups_repo
from persistence import runs as runs_repo
from persistence.claims import Claims, claimed_connection
from persistence.models import TERMINAL_RUN_STATUSES, EventRow

router = APIRouter(tags=["streams"])

CATCH_UP_PAGE = 500
# Every open request goes out when an inbox stream starts: a console shows them all at once
# (1,000 render in well under a second; see bench/bench_console.py).
INBOX_SNAPSHOT_LIMIT = 10_000
SSE_RESPONSES: dict[int | str, dict[str, Any]] = {200: {"content": {"text/event-stream": {}},
                       "description": "An event stream; each event's `id` is its seq (a "
                                      "`message.delta` has none: it is outside the sequence)."}}


def _resume_point(last_event_id: str | None, after_seq: int | None) -> int:
    if last_event_id is None:
        return after_seq or 0
    if not last_event_id.strip().isdigit():
        raise ApiError(422, "invalid_request", "Last-Event-ID must be a non-negative integer seq")
    return int(last_event_id)


@router.get("/runs/{run_id}/events/stream", response_class=StreamingResponse,
            responses=SSE_RESPONSES)
async def stream_run_events(
    request: Request, run: VisibleRun, user: CurrentUser,
    after_seq: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=20)] = None,
) -> StreamingResponse:
    """The run's events after `Last-Event-ID` (or `after_seq`) in seq order, then live ones;
    ends with an `end` event once the run has finished."""
    start = _resume_point(last_event_id, after_seq)
    hub: EventHub = request.app.state.event_hub
    subscription = hub.subscribe_run(run.id, from_seq=run.last_seq, caller=user.name)
    heartbeat = request.app.state.settings.sse_heartbeat_seconds
    return StreamingResponse(
        _run_stream(request.app.state.pool, claims_of(user), hub, subscription, start,
                    heartbeat, lambda: still_reads_run(request, user, run.id)),
        media_type="text/event-stream", headers=STREAM_HEADERS)


async def _run_stream(pool: asyncpg.Pool, claims: Claims, hub: EventHub, sub: RunSubscription,
                      last_sent: int, heartbeat: float,
                      may_still_read: Callable[[], Awaitable[bool]]) -> AsyncIterator[bytes]:
    async def allowed() -> bool:
        if not sub.stale:
            return True
        sub.stale = False  # a notice during the check marks it stale again
        return await may_still_read()

    try:
        yield b"retry: 1000\n\n"
        while True:
            # Catch up from the table: the only way events are read in order, without gaps.
            while True:
                async with claimed_connection(pool, claims) as conn:
                    rows = await events_repo.list_events(conn, sub.run_id, after_seq=last_sent,
                                                         limit=CATCH_UP_PAGE)
                frames = []
                if rows and not await allowed():
                    return
                for row in rows:
                    frames.append(_event_frame(row))
                    last_sent = row.seq
                    if row.type in TERMINAL_EVENT_TYPES:
                        frames.append(sse("end", {"run_id": str(sub.run_id),
                                                  "last_seq": last_sent}))
                        yield b"".join(frames)
                        return
                if frames:
                    yield b"".join(frames)
                if len(rows) < CATCH_UP_PAGE:
                    break
            if await _finished_without_end_event(pool, claims, sub, last_sent):
                if await allowed():
                    yield sse("end", {"run_id": str(sub.run_id), "last_seq": last_sent})
                return
            # The messages being written, whole so far, then their live deltas (issue 43).
            if (partials := await live_deltas.joined(pool, claims, sub)) and await allowed():
                yield live_deltas.sse_frames(partials)
            # Live: take what the hub hands over; a gap means "catch up from the table".
            while True:
                try:
                    first = await asyncio.wait_for(sub.queue.get(), timeout=heartbeat)
                except TimeoutError:
                    sub.stale = True
                    if not await allowed():
                        return
                    yield b": heartbeat\n\n"
                    break  # and look at the table, in case a notification was missed
                if sub.closed:
                    return  # shutting down: the client resumes with Last-Event-ID
                if not await allowed():
                    return
                if sub.overflowed:
                    yield sse("overflow", {"reason": "client too slow; reconnect with "
                                                     "Last-Event-ID", "last_seq": last_sent})
                    return
                # Whatever else is queued goes out in the same write: a busy run costs one
                # send per wake-up, not one per event.
                batch, ended, gap = [], False, False
                for event in _drain(sub.queue, first):
                    if event.seq <= last_sent:
                        continue
                    if event.seq > last_sent + 1:
                        gap = True
                        break
                    batch.append(event.frame)
                    last_sent = event.seq
                    if event.type in TERMINAL_EVENT_TYPES:
                        batch.append(sse("end", {"run_id": str(sub.run_id),
                                                 "last_seq": last_sent}))
                        ended = True
                        break
                # Checked after the batch is taken: any notice that came before one of its
                # events has marked the subscription stale by now.
                if not await allowed():
                    return
                if deltas := await live_deltas.taken(pool, claims, sub):
                    batch.append(live_deltas.sse_frames(deltas))
                if batch:
                    yield b"".join(batch)
                if ended:
                    return
                if gap:
                    break
    finally:
        hub.unsubscribe_run(sub)


def _drain(queue: asyncio.Queue[LiveEvent], first: LiveEvent) -> list[LiveEvent]:
    events = [first]
    while len(events) < CATCH_UP_PAGE and not queue.empty():
        events.append(queue.get_nowait())
    return events


def _event_frame(row: EventRow) -> bytes:
    return LiveEvent.of(EventView.of(row)).frame


async def _finished_without_end_event(pool: asyncpg.Pool, claims: Claims, sub: RunSubscription,
                                      last_sent: int) -> bool:
    """A run that ended with no terminal event (it never started) must still end streams."""
    async with claimed_connection(pool, claims) as conn:
        run = await runs_repo.get_run(conn, sub.run_id)
    return run is not None and run.status in TERMINAL_RUN_STATUSES and run.last_seq <= last_sent


@router.get("/decisions/stream", response_class=StreamingResponse, responses=SSE_RESPONSES)
async def stream_decisions(request: Request, user: CurrentUser) -> StreamingResponse:
    """The caller's inbox, live: `decision.pending` for each open request (all of them first),
    then `decision.pending` / `decision.closed` as requests open and close."""
    hub: EventHub = request.app.state.event_hub
    pool: asyncpg.Pool = request.app.state.pool
    # Memberships are read when the stream opens and again after each access notice about the
    # caller (a member added sees the group's requests from then on).
    subscription = hub.subscribe_inbox(user.owner_filter, await _group_roles(pool, user),
                                       caller=user.name)

    async def may_still_read() -> bool:
        if not await still_signed_in(request, user):
            return False
        subscription.group_roles = await _group_roles(pool, user)
        return True

    heartbeat = request.app.state.settings.sse_heartbeat_seconds
    return StreamingResponse(
        _inbox_stream(pool, claims_of(user), hub, subscription, heartbeat, may_still_read),
        media_type="text/event-stream", headers=STREAM_HEADERS)


async def _group_roles(pool: asyncpg.Pool, user: User) -> dict[str, str]:
    if user.is_service:
        return {}
    async with claimed_connection(pool, claims_of(user)) as conn:
        roles = await groups_repo.member_roles(conn, user.name)
    return {str(group): role for group, role in roles.items()}


async def _inbox_stream(pool: asyncpg.Pool, claims: Claims, hub: EventHub,
                        sub: InboxSubscription, heartbeat: float,
                        may_still_read: Callable[[], Awaitable[bool]]) -> AsyncIterator[bytes]:
    # What the inbox sends is read with the caller's claims (row-level security hides the
    # requests of runs it no longer reads); the check ends it when its credential has ended.
    async def allowed() -> bool:
        if not sub.stale:
            return True
        sub.stale = False
        return await may_still_read()

    try:
        yield b"retry: 1000\n\n"
        if not await allowed():
            return
        yield await _inbox_snapshot(pool, claims, sub)
        while True:
            try:
                change = await asyncio.wait_for(sub.queue.get(), timeout=heartbeat)
            except TimeoutError:
                sub.stale = True
                if not await allowed():
                    return
                yield b": heartbeat\n\n"
                continue
            if sub.closed:
                return  # shutting down: the client reconnects and gets the snapshot again
            if not await allowed():
                return
            if not change:
                continue  # only a wake-up
            if change.get("resync"):
                yield await _inbox_snapshot(pool, claims, sub)
                continue
            async with claimed_connection(pool, claims) as conn:
                gate = await gates_repo.get_gate(conn, UUID(change["request_id"]))
                view = (await decision_views(conn, [gate]))[0] if gate else None
            if not await allowed():
                return
            if gate is None or view is None:
                continue
            # A request the subscriber has voted on has left its inbox, decided or not.
            voted = sub.owner is not None and sub.owner in (change.get("voters") or ())
            kind = "decision.pending" if gate.status == "pending" and not voted \
                else "decision.closed"
            yield sse(kind, view.model_dump(mode="json"))
    finally:
        hub.unsubscribe_inbox(sub)


async def _inbox_snapshot(pool: asyncpg.Pool, claims: Claims, sub: InboxSubscription) -> bytes:
    async with claimed_connection(pool, claims) as conn:
        pending = await gates_repo.list_inbox(conn, owner=sub.owner, status="pending",
                                              limit=INBOX_SNAPSHOT_LIMIT)
        views = await decision_views(conn, pending)
    frames = [sse("decision.pending", v.model_dump(mode="json")) for v in reversed(views)]
    frames.append(sse("decision.snapshot_done", {"pending": len(pending)}))
    return b"".join(frames)
