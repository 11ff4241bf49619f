"""One AG-UI run's events: a thread's run events after a position, each as the AG-UI events it
stands for with its SSE id, until the Waystation run waits for a person or ends.

Run events are read from the table through the service layer, in seq order; the event hub wakes
the stream. Access is walled as on every stream (docs/security.md): the caller is checked again
before anything more is sent after an access notice, a quiet heartbeat period or the start, and
only events the hub has handed over (so any access notice committed before them has been seen)
or committed before such a check are sent.

A snapshot goes out right after the last run event of the write that stored it: the recorder
writes every snapshot with events, in one statement, so they share its `created_at` (the
transaction's time), and the last event of a full page waits for the next page, where the rest
of its write may be.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from ag_ui.core import (
    BaseEvent,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
)
from ag_ui.encoder import EventEncoder

from api import live_deltas
from api.auth import User
from api.errors import ApiError, escaped_error
from api.event_hub import EventHub, RunSubscription
from api.protocols.ag_ui.mapping import (
    LiveMessages,
    Position,
    RunFraming,
    interrupt,
    messages,
    positions,
    state_event,
    translate,
)
from api.queries import EventQuery, TranscriptQuery
from api.schemas import EventView, SnapshotHead
from api.services import decisions as decisions_service
from api.services import events as events_service
from api.services import messages as messages_service
from api.services import runs as runs_service
from contracts.events import MESSAGE_RECEIVED
from persistence.claims import Claims, claimed_connection
from persistence.models import TERMINAL_RUN_STATUSES, RunRow
from waystation.registry import Registry

CATCH_UP_PAGE = 500
TRANSCRIPT_PAGE = 500
# How often a stream with nothing to send looks at its run again: an agent run starts waiting
# for a message with a state write that carries no event, so no notification tells of it.
POLL_SECONDS = 1.0
_ENCODER = EventEncoder()


def frame(event: BaseEvent, at: Position) -> bytes:
    """An SSE frame of `event` with `at` as its id (the encoder writes only `data:`)."""
    return f"id: {at}\n{_ENCODER.encode(event)}".encode()


@dataclass
class ThreadStream:
    """The state of one response: where it stands, what the client's state is, which steps,
    messages and tool calls this AG-UI run has open."""

    pool: asyncpg.Pool
    claims: Claims
    user: User
    registry: Registry
    run: RunRow
    thread_id: str
    run_id: str
    position: Position
    # Whether the caller may still read the run (api/deps.py `still_reads_run`).
    may_still_read: Callable[[], Awaitable[bool]]
    prelude: list[BaseEvent] = field(default_factory=list)
    refusal: ApiError | None = None
    framing: RunFraming = field(default_factory=RunFraming)
    live: LiveMessages = field(default_factory=LiveMessages)
    # The ordinal and state of the newest snapshot the client has.
    state: tuple[int, dict[str, Any]] | None = None
    heads: list[SnapshotHead] = field(default_factory=list)
    # The heads hold every snapshot of the writes of run events up to this seq (they were read
    # after those events were): a page reaching past it reads them again.
    heads_through: int = 0
    last_type: str | None = None
    # Run events up to this seq may be sent: handed over by the hub, or committed before the
    # caller's last access check.
    readable_through: int = 0

    async def open(self, conn: asyncpg.Connection) -> None:
        """What a (re)opened thread gets first: its messages and state as of where this
        response starts (a reconnection, which has them, gets neither)."""
        seq = self.position.seq
        self.prelude.append(await self._messages_snapshot(conn))
        last = await self._event_at(conn, seq)
        if last is None:
            return
        self.last_type = last.type
        self.heads = (await events_service.list_snapshots(conn, self.run)).snapshots
        self.heads_through = seq
        written = [h.step_ordinal for h in self.heads if h.created_at <= last.created_at]
        if written:
            self.prelude.append(await self._state_event(conn, max(written)))

    async def frames(self, hub: EventHub, heartbeat: float) -> AsyncIterator[bytes]:
        """The response: RUN_STARTED, the prelude, then the run events until the AG-UI run
        ends (a refusal of what the request asked ends it at once)."""
        at = self.position
        yield frame(RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id), at)
        for event in self.prelude:
            yield frame(event, at)
        if self.refusal is not None:
            yield frame(RunErrorEvent(message=self.refusal.message, code=self.refusal.code), at)
            return
        async for chunk in self._follow(hub, heartbeat):
            yield chunk

    async def _follow(self, hub: EventHub, heartbeat: float) -> AsyncIterator[bytes]:
        subscription = hub.subscribe_run(self.run.id, from_seq=self.run.last_seq,
                                         caller=self.user.name)
        idle, joined = 0.0, False
        try:
            while True:
                if subscription.stale and not await self._still_reads(subscription):
                    return  # a reader who may no longer read gets nothing more
                sent_up_to = self.position
                try:
                    async with claimed_connection(self.pool, self.claims) as conn:
                        sent = b"".join([chunk async for chunk in self._catch_up(conn)])
                        end = None if sent else await self._ending(conn, subscription)
                except Exception as error:  # noqa: BLE001 - answered as every transport does
                    refusal = escaped_error(error, f"the AG-UI stream of run {self.run.id}")
                    end = RunErrorEvent(message=refusal.message, code=refusal.code)
                    sent, self.position = b"", sent_up_to
                if sent:
                    idle = 0.0
                    yield sent
                    continue
                # Deltas only once the caller's access was checked after any notice before them.
                if not subscription.stale and (live := await self._live_frames(
                        subscription, joining=not joined)):
                    yield live
                joined = joined or not subscription.stale
                if end is not None:
                    yield b"".join(frame(e, self.position)
                                   for e in [*self.framing.closing(), end])
                    return
                if subscription.stale:
                    continue  # events the hub has not handed over: check, then send them
                subscription = await self._wait(hub, subscription)
                if subscription.closed:
                    return  # the API is shutting down: the client resumes with Last-Event-ID
                idle += POLL_SECONDS
                if idle >= heartbeat:
                    # A token or session can expire without a notice.
                    idle, subscription.stale = 0.0, True
                    yield b": heartbeat\n\n"
        finally:
            hub.unsubscribe_run(subscription)

    async def _messages_snapshot(self, conn: asyncpg.Connection) -> MessagesSnapshotEvent:
        """The thread's messages up to the position, as the transcript has them."""
        seq = self.position.seq
        entries, after = [], 0
        while True:
            page = await messages_service.transcript(
                conn, self.run, TranscriptQuery(after_seq=after, limit=TRANSCRIPT_PAGE),
                registry=self.registry)
            entries += [e for e in page.messages if e.seq <= seq]
            if len(page.messages) < TRANSCRIPT_PAGE or page.next_after_seq >= seq:
                break
            after = page.next_after_seq
        return MessagesSnapshotEvent(messages=messages(entries))

    async def _live_frames(self, subscription: RunSubscription, *, joining: bool) -> bytes:
        """The messages being written (issue 43): what the hub handed over of them, or, as the
        response starts following, each whole so far. A retried model request's reset drops
        its failed attempt from the client's messages: a MESSAGES_SNAPSHOT without it."""
        deltas = await (live_deltas.joined if joining else live_deltas.taken)(
            self.pool, self.claims, subscription)
        frames: list[bytes] = []
        for delta in deltas:
            if self.live.reset(delta):
                async with claimed_connection(self.pool, self.claims) as conn:
                    frames.append(frame(await self._messages_snapshot(conn), self.position))
            frames += [frame(event, self.position) for event in self.live.events(delta)]
        return b"".join(frames)

    async def _still_reads(self, subscription: RunSubscription) -> bool:
        """Checks the caller again; what was committed before the check may then be sent."""
        subscription.stale = False  # a notice during the check marks it stale again
        async with claimed_connection(self.pool, self.claims) as conn:
            try:
                through = (await runs_service.visible_run(conn, self.user, self.run.id)).last_seq
            except ApiError:
                return False
        if not await self.may_still_read():
            return False
        self.readable_through = max(self.readable_through, through)
        return True

    async def _wait(self, hub: EventHub, subscription: RunSubscription) -> RunSubscription:
        """Until the hub hands over events (or an access notice), or POLL_SECONDS."""
        try:
            handed = [await asyncio.wait_for(subscription.queue.get(), timeout=POLL_SECONDS)]
        except TimeoutError:
            handed = []
        while not subscription.queue.empty():
            handed.append(subscription.queue.get_nowait())
        # The hub hands an event over only after the access notices committed before it.
        self.readable_through = max([self.readable_through, *(e.seq for e in handed)])
        if subscription.overflowed:
            hub.unsubscribe_run(subscription)
            return hub.subscribe_run(self.run.id, from_seq=self.position.seq,
                                     caller=self.user.name)
        return subscription

    async def _catch_up(self, conn: asyncpg.Connection) -> AsyncIterator[bytes]:
        """The frames of the run events after the position, one page."""
        skip = 0 if self.position.index is None else self.position.index + 1
        after = self.position.seq - (0 if self.position.index is None else 1)
        read = (await events_service.list_events(
            conn, self.run, EventQuery(after_seq=after, limit=CATCH_UP_PAGE))).events
        page = [e for e in read if e.seq <= self.readable_through]
        cut = len(page) < len(read)
        if cut or len(read) == CATCH_UP_PAGE:
            # The rest of the last event's write is not to be sent yet, or is on the next page:
            # the write's events go together, its snapshots after its last one.
            rest_of_write = read[len(page)].created_at if cut else read[-1].created_at
            held = [e for e in page if e.created_at != rest_of_write]
            if held or cut:
                page = held
        # By seq, not by time: a transaction's time is when it began, not when it committed.
        if page and page[-1].seq > self.heads_through:
            self.heads = (await events_service.list_snapshots(conn, self.run)).snapshots
            self.heads_through = read[-1].seq
        for number, event in enumerate(page):
            last_of_write = number + 1 == len(page) \
                or page[number + 1].created_at != event.created_at
            written = [h.step_ordinal for h in self.heads
                       if last_of_write and h.created_at == event.created_at]
            states = [await self._state_event(conn, ordinal) for ordinal in written]
            translated = translate(event, states)
            ids = positions(event.seq, len(translated))
            frames: list[bytes] = []
            for index, (each, at) in enumerate(zip(translated, ids, strict=True)):
                if number == 0 and index < skip:
                    self.framing.skip(each)
                    continue
                for kept in self.live.durable(each):
                    frames += [frame(extra, self.position)
                               for extra in self.framing.before(kept)]
                    frames.append(frame(kept, at))
                self.position = at
            self.position, self.last_type, skip = Position(event.seq), event.type, 0
            yield b"".join(frames)

    async def _state_event(self, conn: asyncpg.Connection, ordinal: int) -> BaseEvent:
        """Snapshot `ordinal` as the client's next state: a delta from the one before it."""
        before = None
        if self.state is not None and self.state[0] == ordinal - 1:
            before = self.state[1]
        elif ordinal > 1 and self.state is not None:
            before = (await events_service.snapshot(conn, self.run, ordinal - 1)).state
        after = (await events_service.snapshot(conn, self.run, ordinal)).state
        self.state = (ordinal, after)
        return state_event(before, after)

    async def _event_at(self, conn: asyncpg.Connection, seq: int) -> EventView | None:
        if seq == 0:
            return None
        found = (await events_service.list_events(
            conn, self.run, EventQuery(after_seq=seq - 1, limit=1))).events
        return found[0] if found else None

    async def _ending(self, conn: asyncpg.Connection,
                      subscription: RunSubscription) -> BaseEvent | None:
        """How this AG-UI run ends now that every run event has been sent, if it does: the
        run has ended, waits for a decision (its open requests as interrupts), or waits for a
        message (paused with nothing to decide).

        The run and its requests are read in one snapshot: read apart, a write committed
        between the two reads (a gate opened with the phase's last events) showed its request
        to a stream that had not seen its events, which then ended without them."""
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            return await self._ending_in(conn, subscription)

    async def _ending_in(self, conn: asyncpg.Connection,
                         subscription: RunSubscription) -> BaseEvent | None:
        run = await runs_service.visible_run(conn, self.user, self.run.id)
        if run.last_seq > self.position.seq:
            if self.readable_through < run.last_seq:
                subscription.stale = True  # committed, not handed over: check, then send
            return None
        if run.status in TERMINAL_RUN_STATUSES:
            return self._finished(run)
        requests = (await decisions_service.run_decisions(conn, run)).decisions
        open_requests = [interrupt(r) for r in requests if r.status == "pending"]
        if open_requests:
            return RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id,
                                    outcome=RunFinishedInterruptOutcome(
                                        interrupts=open_requests))
        if self.last_type is None:
            last = await self._event_at(conn, self.position.seq)
            self.last_type = last.type if last else None
        # A message just received has not started its turn yet: the run is paused until then.
        if run.status == "paused" and self.last_type != MESSAGE_RECEIVED:
            return RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id,
                                    outcome=RunFinishedSuccessOutcome())
        return None

    def _finished(self, run: RunRow) -> BaseEvent:
        if run.status == "failed":
            return RunErrorEvent(code="run_failed", message=run.error_message
                                 or f"the run failed ({run.stop_reason})")
        outcome = RunFinishedCancelledOutcome() if run.status == "canceled" \
            else RunFinishedSuccessOutcome()
        return RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id,
                                result=run.result, outcome=outcome)
