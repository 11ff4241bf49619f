"""Fans committed events out to live streams: one LISTEN connection per API process.

Postgres is the source of truth; a notification is only a wake-up. For each run that has
subscribers the hub reads new rows once and hands them to every subscriber's bounded queue.
A subscriber sends strictly `last_sent + 1` next and reads any gap from `run_events` itself,
so a missed notification, a listener reconnect or an API restart loses nothing and never
sends an event twice. A subscriber whose queue overflows is told to reconnect and dropped,
so a slow client never holds up writers or other clients.

Live model tokens (issue 43) come on `waystation_deltas`: each is handed to the run's
subscribers beside its events, in a bounded buffer of its own that is never read from the
table and never ends a stream. A subscriber that falls that far behind loses its queued deltas
instead (drop to latest): its stream then sends each message whole so far, from its partial row.

Access can end while a stream is open (a member removed, a key revoked, a session signed out,
a user erased: migration 036 notifies `waystation_access`). The hub marks the streams it may
concern as stale, in the order notifications arrive, so an event committed after the change
is never handed over before the stream has checked its caller again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

import asyncpg

from waystation.api.schemas import EventView, MessageDelta
from waystation.api.sse import LiveEvent
from waystation.persistence import events as events_repo
from waystation.persistence.claims import SERVICE, claimed_connection

log = logging.getLogger(__name__)

EVENTS_CHANNEL = "waystation_events"
GATES_CHANNEL = "waystation_gates"
ACCESS_CHANNEL = "waystation_access"
STATUS_CHANNEL = "waystation_status"
DELTAS_CHANNEL = "waystation_deltas"
# Deltas a subscriber may have waiting; past it they are dropped for the messages whole.
DELTA_CAPACITY = 1_000
FETCH_PAGE = 1000


@dataclass(frozen=True, slots=True)
class StatusNotice:
    """The run's row changed status (migration 064): loops waiting for a status look again."""

    status: str


# What a run subscriber's queue holds: the next events, status notices, and None, which only
# wakes the stream (to see that it is closed, must check its caller again, or has deltas).
Handed = LiveEvent | StatusNotice | None


@dataclass(eq=False)
class RunSubscription:
    run_id: UUID
    capacity: int
    caller: str | None = None  # whom access notices name (a user, `apikey:<id>`)
    queue: asyncio.Queue[Handed] = field(default_factory=asyncio.Queue)
    overflowed: bool = False
    closed: bool = False
    # The caller must be checked again before anything more is sent. True at first: access
    # may have ended between the stream's authentication and its subscription.
    stale: bool = True
    deltas: list[MessageDelta] = field(default_factory=list)
    # Deltas were dropped: the stream sends the messages whole so far before any more.
    deltas_dropped: bool = False

    def push_delta(self, delta: MessageDelta) -> None:
        if self.closed:
            return
        waiting = bool(self.deltas) or self.deltas_dropped
        if len(self.deltas) >= DELTA_CAPACITY:
            self.deltas.clear()
            self.deltas_dropped = True
        else:
            self.deltas.append(delta)
        if not waiting:  # one wake-up per batch the stream takes
            self.queue.put_nowait(None)

    def take_deltas(self) -> tuple[list[MessageDelta], bool]:
        """The deltas waiting, and whether some were dropped before them."""
        taken, dropped = self.deltas, self.deltas_dropped
        self.deltas, self.deltas_dropped = [], False
        return taken, dropped

    def push(self, event: LiveEvent | StatusNotice) -> None:
        if self.overflowed or self.closed:
            return
        if self.queue.qsize() >= self.capacity:
            self.overflowed = True
            self.queue.put_nowait(event)  # wakes the reader so it sees the overflow
            return
        self.queue.put_nowait(event)

    def close(self) -> None:
        """The stream ends at its next look at the queue (the API is shutting down)."""
        self.closed = True
        self.queue.put_nowait(None)

    def access_changed(self) -> None:
        self.stale = True
        self.queue.put_nowait(None)


@dataclass(eq=False)
class InboxSubscription:
    owner: str | None  # None: every owner (service role)
    # The subscriber's role in each of its groups, read again whenever its access changes.
    group_roles: dict[str, str] = field(default_factory=dict)
    caller: str | None = None  # whom access notices name
    queue: asyncio.Queue[dict] = field(default_factory=asyncio.Queue)
    closed: bool = False
    stale: bool = True  # as RunSubscription.stale

    def close(self) -> None:
        self.closed = True
        self.queue.put_nowait({})

    def access_changed(self) -> None:
        self.stale = True
        self.queue.put_nowait({})

    def concerns(self, change: dict) -> bool:
        """A request on the subscriber's own run, on its group's run where its role is one
        the request names, or naming it (the same rule as the inbox query)."""
        if self.owner is None or self.owner == change.get("owner"):
            return True
        if self.owner in (change.get("decider_users") or ()) or self.owner in (
                change.get("delegates") or ()):
            return True
        role = self.group_roles.get(str(change.get("group_id")))
        return role is not None and role in (change.get("decider_roles") or ())


@dataclass(eq=False)
class _RunChannel:
    fetched_seq: int
    subscribers: set[RunSubscription] = field(default_factory=set)
    # The highest seq a notification has announced. A table read hands over no row beyond
    # it: a row's own notification comes after any access notice committed before the row,
    # so no subscriber gets a row before it has seen the access notices that preceded it.
    announced_seq: float = 0
    dirty: bool = False
    pump: asyncio.Task[None] | None = None


class EventHub:
    def __init__(self, pool: asyncpg.Pool, connect: Callable[[], asyncpg.Connection], *,
                 subscriber_capacity: int = 10_000) -> None:
        self._pool = pool
        self._connect = connect
        self._capacity = subscriber_capacity
        self._channels: dict[UUID, _RunChannel] = {}
        self._inboxes: set[InboxSubscription] = set()
        self._supervisor: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._lost = asyncio.Event()
        self._closing = False
        # How events reached subscribers: straight from notifications, or by reading the table.
        self.delivered_inline = 0
        self.table_reads = 0
        self.overflows = 0  # streams ended because their client fell behind

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        self._supervisor = asyncio.create_task(self._keep_listening())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._listening.wait(), timeout=10)

    async def stop(self) -> None:
        if self._supervisor:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        for channel in self._channels.values():
            if channel.pump:
                channel.pump.cancel()

    def close_streams(self) -> None:
        """End every open stream, and any opened from now on (the API is shutting down)."""
        self._closing = True
        for channel in self._channels.values():
            for subscriber in channel.subscribers:
                subscriber.close()
        for inbox in self._inboxes:
            inbox.close()

    def open_streams(self) -> dict[str, int]:
        return {"run": sum(len(c.subscribers) for c in self._channels.values()),
                "inbox": len(self._inboxes)}

    @property
    def listening(self) -> bool:
        return self._listening.is_set()

    async def _keep_listening(self) -> None:
        backoff = 0.1
        while True:
            conn = None
            try:
                conn = await self._connect()
                self._lost.clear()
                conn.add_termination_listener(lambda _c: self._lost.set())
                await conn.add_listener(EVENTS_CHANNEL, self._on_event)
                await conn.add_listener(GATES_CHANNEL, self._on_gate)
                await conn.add_listener(ACCESS_CHANNEL, self._on_access)
                await conn.add_listener(STATUS_CHANNEL, self._on_status)
                await conn.add_listener(DELTAS_CHANNEL, self._on_delta)
                self._listening.set()
                backoff = 0.1
                log.info("listening for %s, %s, %s, %s and %s", EVENTS_CHANNEL, GATES_CHANNEL,
                         ACCESS_CHANNEL, STATUS_CHANNEL, DELTAS_CHANNEL)
                # Whatever was committed while nobody listened is read now.
                self._resync_all()
                while not self._lost.is_set() and not conn.is_closed():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._lost.wait(), timeout=1.0)
                log.warning("listening connection lost; reconnecting")
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
                log.warning("cannot listen for events (%s); retrying in %.1fs", error, backoff)
            finally:
                self._listening.clear()
                if conn is not None and not conn.is_closed():
                    conn.terminate()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    def _resync_all(self) -> None:
        for channel in self._channels.values():
            for subscriber in channel.subscribers:
                subscriber.access_changed()  # a missed access notice must not go unchecked
        for run_id, channel in list(self._channels.items()):
            channel.announced_seq = math.inf  # notifications were missed; all are stale
            self._wake(run_id)
        for inbox in self._inboxes:
            inbox.access_changed()
            inbox.queue.put_nowait({"resync": True})

    # --- notifications -------------------------------------------------------------------

    def _on_event(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        try:
            note = json.loads(payload)
            run_id = UUID(note["run_id"])
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring malformed event notification %r", payload)
            return
        channel = self._channels.get(run_id)
        if channel is None:
            return
        announced = note.get("seq")
        channel.announced_seq = max(channel.announced_seq, announced
                                    if isinstance(announced, int) else math.inf)
        if not self._deliver_inline(channel, note):
            self._wake(run_id)

    def _deliver_inline(self, channel: _RunChannel, note: dict) -> bool:
        """Hand the rows a notification carries straight to the subscribers, when they are
        exactly the next ones; anything else (rows too big to carry, a gap, a read in
        progress) is read from the table instead."""
        rows = note.get("events")
        if (not rows or channel.dirty or (channel.pump is not None and not channel.pump.done())
                or note.get("first") != channel.fetched_seq + 1):
            return False
        try:
            events = [LiveEvent.of(EventView.model_validate(row)) for row in rows]
        except ValueError:
            return False
        for event in events:
            for subscriber in list(channel.subscribers):
                subscriber.push(event)
        channel.fetched_seq = events[-1].seq
        self.delivered_inline += len(events)
        return True

    def _on_delta(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        try:
            delta = MessageDelta.model_validate_json(payload)
        except ValueError:
            log.warning("ignoring malformed delta notification %r", payload[:200])
            return
        channel = self._channels.get(delta.run_id)
        for subscriber in channel.subscribers if channel is not None else ():
            subscriber.push_delta(delta)

    def _on_gate(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        try:
            change = json.loads(payload)
        except ValueError:
            return
        for inbox in self._inboxes:
            if inbox.concerns(change):
                inbox.queue.put_nowait(change)

    def _on_status(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        """A run's status changed: handed to its subscribers in order with its events (the
        events committed before it were announced before it)."""
        try:
            note = json.loads(payload)
            run_id, status = UUID(note["run_id"]), str(note["status"])
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring malformed status notification %r", payload)
            return
        channel = self._channels.get(run_id)
        if channel is None:
            return
        for subscriber in list(channel.subscribers):
            subscriber.push(StatusNotice(status))

    def _on_access(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        """A membership, key, session or user changed: the streams of the caller it names, or
        of the run it names, check their caller again before they send anything more."""
        try:
            note = json.loads(payload)
            user, run_id = note.get("user"), note.get("run_id")
            run = UUID(run_id) if run_id is not None else None
        except (ValueError, AttributeError, TypeError):
            # Unreadable: every stream checks again rather than none.
            log.warning("malformed access notification %r: checking every stream", payload)
            user, run = None, None
            note = None
        for channel in self._channels.values():
            for subscriber in channel.subscribers:
                if note is None or subscriber.caller == user or subscriber.run_id == run:
                    subscriber.access_changed()
        for inbox in self._inboxes:
            if note is None or inbox.caller == user:
                inbox.access_changed()

    def _wake(self, run_id: UUID) -> None:
        channel = self._channels.get(run_id)
        if channel is None:
            return
        channel.dirty = True
        if channel.pump is None or channel.pump.done():
            channel.pump = asyncio.create_task(self._pump(run_id, channel))

    async def _pump(self, run_id: UUID, channel: _RunChannel) -> None:
        """Read new rows once for all of a run's subscribers."""
        while channel.dirty and channel.subscribers:
            channel.dirty = False
            self.table_reads += 1
            try:
                # One read for every subscriber of the run, whoever they are: each was
                # allowed to read the run when it subscribed.
                async with claimed_connection(self._pool, SERVICE) as conn:
                    rows = await events_repo.list_events(conn, run_id,
                                                         after_seq=channel.fetched_seq,
                                                         limit=FETCH_PAGE)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
                # Subscribers catch up from the table themselves on their next heartbeat.
                log.warning("cannot read events of run %s: %s", run_id, error)
                return
            announced = [row for row in rows if row.seq <= channel.announced_seq]
            for row in announced:
                event = LiveEvent.of(EventView.of(row))
                for subscriber in list(channel.subscribers):
                    subscriber.push(event)
            if announced:
                channel.fetched_seq = announced[-1].seq
            if len(announced) == FETCH_PAGE:
                channel.dirty = True

    # --- subscriptions -------------------------------------------------------------------

    def subscribe_run(self, run_id: UUID, from_seq: int,
                      caller: str | None = None) -> RunSubscription:
        subscription = RunSubscription(run_id=run_id, capacity=self._capacity, caller=caller)
        channel = self._channels.get(run_id)
        if channel is None:
            channel = self._channels[run_id] = _RunChannel(fetched_seq=from_seq)
        channel.subscribers.add(subscription)
        if self._closing:
            subscription.close()
        return subscription

    def unsubscribe_run(self, subscription: RunSubscription) -> None:
        if subscription.overflowed:
            self.overflows += 1
        channel = self._channels.get(subscription.run_id)
        if channel is None:
            return
        channel.subscribers.discard(subscription)
        if not channel.subscribers:
            if channel.pump:
                channel.pump.cancel()
            del self._channels[subscription.run_id]

    def subscribe_inbox(self, owner: str | None, group_roles: dict[str, str] | None = None,
                        caller: str | None = None) -> InboxSubscription:
        subscription = InboxSubscription(owner=owner, group_roles=group_roles or {},
                                         caller=caller)
        self._inboxes.add(subscription)
        if self._closing:
            subscription.close()
        return subscription

    def unsubscribe_inbox(self, subscription: InboxSubscription) -> None:
        self._inboxes.discard(subscription)
