"""The one live loop: a run followed as it happens, for every interface that streams a run (the
REST SSE stream, AG-UI, A2A's streams and blocking calls, MCP's `tasks/result`). Each only maps
what the loop yields to its own wire format.

The loop subscribes to the event hub (api/event_hub.py), catches up from the table by seq
(the only way events are read in order, without gaps: a notification is only a wake-up), and
yields typed items: the next events, the run's status changes (migration 064), the live
model tokens of the messages being written (`Deltas`, issue 43), a quiet heartbeat, and
`CaughtUp` whenever everything readable has been yielded and it is about to wait. It checks
its caller again (the credential, then `GET /runs/{id}`'s rule) at the start, after every
access notice and on every heartbeat, and ends with `CutOff`, sending nothing
more, when the caller may no longer read. Only events handed over by the hub (so any access
notice committed before them has been seen) or committed before the caller's last check are
yielded. Its buffer is the hub's bounded queue: a follower that falls behind gets
`Overflowed`, and if iterated on, subscribes afresh and catches up from the table. It ends
quietly when the API shuts down (the client resumes by seq elsewhere).

Deltas have a bounded buffer of their own in the hub's subscription, never read from the table
and never ending the loop: a follower that falls that far behind loses the deltas waiting
(drop to latest), and the loop then yields each message whole so far (its partial row) before
the next ones, as it does when it starts following. They are yielded only when the caller's
last check still holds, and partials are read over the caller's own connection (row-level
security shows a run's partials to whoever may read its events).

The decision inbox follows gate changes instead of a run (`follow_inbox`), through the same
wait, re-check and shutdown (`_taken`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, Protocol, TypeVar
from uuid import UUID

import asyncpg

from waystation.api.auth import User
from waystation.api.errors import ApiError
from waystation.api.event_hub import (
    EventHub,
    Handed,
    InboxSubscription,
    RunSubscription,
    StatusNotice,
)
from waystation.api.schemas import EventView, MessageDelta
from waystation.api.services import deltas as deltas_service
from waystation.api.services import runs
from waystation.api.services.access import claims_of
from waystation.api.sse import LiveEvent
from waystation.persistence import events as events_repo
from waystation.persistence.claims import claimed_connection

CATCH_UP_PAGE = 500
T = TypeVar("T")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Events:
    """The run's next events after the loop's position, in seq order, with no gap."""

    events: tuple[LiveEvent, ...]


@dataclass(frozen=True, slots=True)
class StatusChanged:
    """The run's row now has this status (events committed before the change may still
    follow: an interface that waits for a status compares the run's `last_seq` with what it
    has sent)."""

    status: str


@dataclass(frozen=True, slots=True)
class Deltas:
    """Pieces of the run's messages being written (issue 43), outside the seq sequence, in the
    order they came; a message whole so far is a piece from offset 0 (where the loop started
    following, or dropped deltas). Pieces may overlap what an interface has sent, and a
    `reset` one starts a retried model request over: api/live_deltas.py's `Shown` keeps what
    one client lacks."""

    deltas: tuple[MessageDelta, ...]


@dataclass(frozen=True, slots=True)
class CaughtUp:
    """Every event readable now has been yielded, up to `last_seq`: the loop waits next."""

    last_seq: int


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A quiet heartbeat period went by, and the caller checked again still reads."""


@dataclass(frozen=True, slots=True)
class Overflowed:
    """The hub dropped this follower: it fell `capacity` events behind."""

    last_seq: int


@dataclass(frozen=True, slots=True)
class CutOff:
    """The caller may no longer read the run (the last item): `refusal` is why, when the
    run's own rule refused it (None: the credential has ended)."""

    refusal: ApiError | None


Item = Events | StatusChanged | Deltas | CaughtUp | Heartbeat | Overflowed | CutOff


@dataclass(frozen=True, slots=True)
class Snapshot:
    """An inbox's whole state is to be sent (at the start, and after the listener missed
    notices)."""


@dataclass(frozen=True, slots=True)
class Changed(Generic[V]):
    """A gate change that concerns the inbox, as its reader read it."""

    change: dict[str, Any]
    read: V


InboxItem = Snapshot | Changed[Any] | Heartbeat | CutOff


@dataclass
class _Follower:
    """Where one follower of a run stands."""

    pool: asyncpg.Pool
    user: User
    run_id: UUID
    signed_in: Callable[[], Awaitable[bool]]
    last_seq: int
    # Events up to this seq may be yielded: handed over by the hub, or committed before the
    # caller's last check.
    readable: int = 0

    async def check(self, subscription: RunSubscription) -> CutOff | None:
        """The caller checked again; None when it still reads the run."""
        subscription.stale = False  # a notice during the check marks it stale again
        if not await self.signed_in():
            return CutOff(None)
        async with claimed_connection(self.pool, claims_of(self.user)) as conn:
            try:
                run = await runs.visible_run(conn, self.user, self.run_id)
            except ApiError as refused:
                if refused.status >= 500:
                    raise
                return CutOff(refused)
        self.readable = max(self.readable, run.last_seq)
        return None

    async def read(self) -> list[EventView]:
        async with claimed_connection(self.pool, claims_of(self.user)) as conn:
            rows = await events_repo.list_events(conn, self.run_id, after_seq=self.last_seq,
                                                 limit=CATCH_UP_PAGE)
        return [EventView.of(row) for row in rows]

    async def deltas(self, subscription: RunSubscription, *, joining: bool) -> Deltas | None:
        """The deltas the hub holds for the follower; joining (or after some were dropped),
        each message whole so far first, then only the held deltas that add to it."""
        if not (joining or subscription.deltas_dropped):
            held, _ = subscription.take_deltas()
            return Deltas(tuple(held)) if held else None
        subscription.take_deltas()  # all in the wholes about to be read
        dropped = True
        while dropped:  # dropped again while the wholes were read: read them again
            async with claimed_connection(self.pool, claims_of(self.user)) as conn:
                whole = await deltas_service.partial_messages(conn, self.run_id)
            # Those that came during the read: the whole may hold them already.
            held, dropped = subscription.take_deltas()
        found = [*whole, *deltas_service.beyond(whole, held)]
        return Deltas(tuple(found)) if found else None


async def follow(hub: EventHub, pool: asyncpg.Pool, user: User, run_id: UUID, *,
                 after_seq: int, subscribe_at: int, heartbeat: float,
                 signed_in: Callable[[], Awaitable[bool]]) -> AsyncGenerator[Item]:
    """The run's events after `after_seq` and what else happens to it, live, until the caller
    stops iterating, is cut off or the API shuts down. `subscribe_at`: the run's `last_seq`
    as the caller last read it (where the hub's reading starts if nobody follows the run yet);
    `signed_in`: whether the request's credential still signs in as `user`."""
    me = _Follower(pool=pool, user=user, run_id=run_id, signed_in=signed_in,
                   last_seq=after_seq)
    subscription = hub.subscribe_run(run_id, from_seq=subscribe_at, caller=user.name)
    read_table = joining = True
    try:
        while True:
            while read_table:
                if subscription.stale and (cut := await me.check(subscription)):
                    yield cut
                    return
                page = await me.read()
                fresh = tuple(LiveEvent.of(e) for e in page if e.seq <= me.readable)
                if len(fresh) < len(page):
                    subscription.stale = True  # committed, not handed over: check, then read
                if fresh:
                    me.last_seq = fresh[-1].seq
                    yield Events(fresh)
                read_table = len(page) == CATCH_UP_PAGE or len(fresh) < len(page)
            if joining:  # the messages being written as the loop starts following
                joining = False
                if subscription.stale and (cut := await me.check(subscription)):
                    yield cut
                    return
                if joined := await me.deltas(subscription, joining=True):
                    yield joined
            yield CaughtUp(me.last_seq)
            taken = await _taken(subscription, heartbeat, partial(me.check, subscription))
            if taken is None:
                return  # shutting down: the client resumes by seq elsewhere
            if isinstance(taken, CutOff):
                yield taken
                return
            if isinstance(taken, Heartbeat):
                yield taken
                read_table = True  # in case a notification was missed
                continue
            if subscription.overflowed:
                yield Overflowed(me.last_seq)
                hub.unsubscribe_run(subscription)
                subscription = hub.subscribe_run(run_id, from_seq=me.last_seq, caller=user.name)
                read_table = joining = True
                continue
            handed = taken
            async for item in _in_order(me, handed):
                yield item
            # A notice after the batch's check comes before deltas it may concern.
            if subscription.stale and (cut := await me.check(subscription)):
                yield cut
                return
            if deltas := await me.deltas(subscription, joining=False):
                yield deltas
            read_table = me.last_seq < me.readable  # a gap: the rest is in the table
    finally:
        hub.unsubscribe_run(subscription)


class _Followed(Protocol[T]):
    """A hub subscription, of a run or of an inbox."""

    queue: asyncio.Queue[T]
    closed: bool
    stale: bool


async def _taken(subscription: _Followed[T], heartbeat: float,
                 check: Callable[[], Awaitable[CutOff | None]],
                 ) -> list[T] | Heartbeat | CutOff | None:
    """What the hub hands over next (all that is queued, up to a page); `Heartbeat` after a
    quiet `heartbeat` (the caller checked again: a credential may end with no notice);
    `CutOff` when a check says the caller may no longer read; None when the API shuts down."""
    try:
        handed = [await asyncio.wait_for(subscription.queue.get(), timeout=heartbeat)]
    except TimeoutError:
        return await check() or Heartbeat()
    if subscription.closed:
        return None
    while len(handed) < CATCH_UP_PAGE and not subscription.queue.empty():
        handed.append(subscription.queue.get_nowait())
    # Checked after the batch is taken: any notice that came before one of its items has
    # marked the subscription stale by now.
    if subscription.stale and (cut := await check()):
        return cut
    return handed


async def _in_order(me: _Follower, handed: list[Handed]) -> AsyncIterator[Item]:
    """What the hub handed over, as items in the order it came: the events that follow the
    position (any beyond a gap are read from the table), and status changes."""
    batch: list[LiveEvent] = []
    for each in handed:
        if isinstance(each, StatusNotice):
            if batch:
                yield Events(tuple(batch))
                batch = []
            yield StatusChanged(each.status)
        elif each is not None:
            me.readable = max(me.readable, each.seq)
            if each.seq == me.last_seq + 1:
                batch.append(each)
                me.last_seq = each.seq
    if batch:
        yield Events(tuple(batch))


async def follow_inbox(hub: EventHub, subscription: InboxSubscription, *, heartbeat: float,
                       still_reads: Callable[[], Awaitable[bool]],
                       read: Callable[[dict[str, Any]], Awaitable[V | None]],
                       ) -> AsyncGenerator[Snapshot | Changed[V] | Heartbeat | CutOff]:
    """A caller's decision inbox, live: `Snapshot` first, then each gate change that concerns
    it, read by `read` (None: nothing to send) and yielded only if the caller still reads once
    it is read, until it is cut off or the API shuts down. `still_reads`: the credential still
    signs in (and what it reads is brought up to date)."""
    async def check() -> CutOff | None:
        subscription.stale = False  # a notice during the check marks it stale again
        return None if await still_reads() else CutOff(None)

    try:
        if cut := await check():
            yield cut
            return
        yield Snapshot()
        while True:
            taken = await _taken(subscription, heartbeat, check)
            if taken is None:
                return  # shutting down: the client reconnects and gets the snapshot again
            if not isinstance(taken, list):
                yield taken
                if isinstance(taken, CutOff):
                    return
                continue
            for change in taken:
                if change.get("resync"):
                    yield Snapshot()
                elif change:  # else only a wake-up
                    found = await read(change)
                    if subscription.stale and (cut := await check()):
                        yield cut
                        return
                    if found is not None:
                        yield Changed(change, found)
    finally:
        hub.unsubscribe_inbox(subscription)
