"""Server-Sent Events: a run's events live, and the caller's decision inbox.

    curl -N -H "Authorization: Bearer $TOKEN" localhost:8000/runs/$RUN/events/stream

Both follow the one live loop (api/services/live.py), which checks the caller again (its
credential, and for a run stream `GET /runs/{id}`'s rule) before anything is sent after an
access notice (see api/event_hub.py) or a heartbeat's quiet (a token or session may have
expired with no notice), and ends, sending nothing more, when the caller may no longer read;
here its items become SSE frames.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from functools import partial
from typing import Annotated, Any
from uuid import UUID

import asyncpg
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from waystation.api import live_deltas
from waystation.api.auth import User
from waystation.api.deps import CurrentUser, VisibleRun, still_signed_in
from waystation.api.errors import ApiError
from waystation.api.event_hub import EventHub, InboxSubscription
from waystation.api.schemas import DecisionView
from waystation.api.services import live, streams
from waystation.api.sse import STREAM_HEADERS, sse
from waystation.contracts.events import TERMINAL_EVENT_TYPES
from waystation.contracts.statuses import TERMINAL_RUN_STATUSES

router = APIRouter(tags=["streams"])

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
    followed = live.follow(request.app.state.event_hub, request.app.state.pool, user, run.id,
                           after_seq=start, subscribe_at=run.last_seq,
                           heartbeat=request.app.state.settings.sse_heartbeat_seconds,
                           signed_in=lambda: still_signed_in(request, user))
    return StreamingResponse(_run_stream(request.app.state.pool, user, run.id, start, followed),
                             media_type="text/event-stream", headers=STREAM_HEADERS)


async def _run_stream(pool: asyncpg.Pool, user: User, run_id: UUID, last_sent: int,
                      followed: AsyncGenerator[live.Item]) -> AsyncIterator[bytes]:
    """The live loop's items as SSE: each event's frame, `end` after the run's last event,
    `message.delta` for each piece of a message being written (issue 43), `overflow` for a
    client too slow to keep up, comments as heartbeats."""
    yield b"retry: 1000\n\n"
    looked = False
    async with contextlib.aclosing(followed):  # unsubscribed as the stream ends
        async for item in followed:
            if isinstance(item, live.Events):
                frames = []
                for event in item.events:
                    frames.append(event.frame)
                    last_sent = event.seq
                    if event.type in TERMINAL_EVENT_TYPES:
                        frames.append(sse("end", {"run_id": str(run_id), "last_seq": last_sent}))
                        yield b"".join(frames)
                        return
                yield b"".join(frames)
            elif isinstance(item, live.Deltas):
                yield live_deltas.sse_frames(item.deltas)
            elif isinstance(item, live.Heartbeat):
                yield b": heartbeat\n\n"
            elif isinstance(item, live.Overflowed):
                yield sse("overflow", {"reason": "client too slow; reconnect with Last-Event-ID",
                                       "last_seq": item.last_seq})
                return
            elif isinstance(item, live.CutOff):
                return
            # A run that ended with no terminal event (it never started) must still end streams:
            # looked at once caught up, and again when its status ends it.
            elif (isinstance(item, live.CaughtUp) and not looked) or (
                    isinstance(item, live.StatusChanged) and item.status in TERMINAL_RUN_STATUSES):
                looked = True
                if await streams.finished_without_end_event(pool, user, run_id, last_sent):
                    yield sse("end", {"run_id": str(run_id), "last_seq": last_sent})
                    return


@router.get("/decisions/stream", response_class=StreamingResponse, responses=SSE_RESPONSES)
async def stream_decisions(request: Request, user: CurrentUser) -> StreamingResponse:
    """The caller's inbox, live: `decision.pending` for each open request (all of them first),
    then `decision.pending` / `decision.closed` as requests open and close."""
    hub: EventHub = request.app.state.event_hub
    pool: asyncpg.Pool = request.app.state.pool
    # Memberships are read when the stream opens and again after each access notice about the
    # caller (a member added sees the group's requests from then on).
    subscription = hub.subscribe_inbox(user.owner_filter, await streams.group_roles(pool, user),
                                       caller=user.name)

    async def may_still_read() -> bool:
        if not await still_signed_in(request, user):
            return False
        subscription.group_roles = await streams.group_roles(pool, user)
        return True

    followed = live.follow_inbox(
        hub, subscription, heartbeat=request.app.state.settings.sse_heartbeat_seconds,
        still_reads=may_still_read, read=partial(streams.changed_request, pool, user))
    return StreamingResponse(_inbox_stream(pool, user, subscription, followed),
                             media_type="text/event-stream", headers=STREAM_HEADERS)


async def _inbox_stream(pool: asyncpg.Pool, user: User, sub: InboxSubscription,
                        followed: AsyncGenerator[live.InboxItem]) -> AsyncIterator[bytes]:
    """The live loop's inbox items as SSE: the snapshot, `decision.pending` and
    `decision.closed`, comments as heartbeats."""
    yield b"retry: 1000\n\n"
    async with contextlib.aclosing(followed):
        async for item in followed:
            if isinstance(item, live.Snapshot):
                yield _inbox_snapshot(await streams.open_requests(pool, user))
            elif isinstance(item, live.Heartbeat):
                yield b": heartbeat\n\n"
            elif isinstance(item, live.Changed):
                view: DecisionView = item.read
                # A request the subscriber has voted on has left its inbox, decided or not.
                voted = sub.owner is not None and sub.owner in (item.change.get("voters") or ())
                kind = "decision.pending" if view.status == "pending" and not voted \
                    else "decision.closed"
                yield sse(kind, view.model_dump(mode="json"))
            else:
                return  # cut off


def _inbox_snapshot(pending: list[DecisionView]) -> bytes:
    frames = [sse("decision.pending", v.model_dump(mode="json")) for v in reversed(pending)]
    frames.append(sse("decision.snapshot_done", {"pending": len(pending)}))
    return b"".join(frames)
