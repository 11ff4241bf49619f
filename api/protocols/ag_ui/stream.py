"""One AG-UI run's events: a thread's run events after a position, each as the AG-UI events it
stands for with its SSE id, until the Waystation run waits for a person or ends.

Run events come from the one live loop (api/services/live.py), in seq order, which walls access
as on every stream (docs/security.md); the run's status changes (a pause for the next message
carries no event) wake it as its events do. So do the live tokens of the messages being written
(issue 43), which go out as text-message and tool-call events (mapping.LiveMessages).

A snapshot goes out right after the last run event of the write that stored it: the recorder
writes every snapshot with events, in one statement, so they share its `created_at` (the
transaction's time), and the last write of a batch waits for the next batch, where the rest of
it may be, or for the loop to have caught up.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
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

from waystation.api.auth import User
from waystation.api.errors import ApiError, escaped_error
from waystation.api.event_hub import EventHub
from waystation.api.protocols.ag_ui.mapping import (
    LiveMessages,
    Position,
    RunFraming,
    interrupt,
    messages,
    positions,
    state_event,
    translate,
)
from waystation.api.queries import EventQuery, TranscriptQuery
from waystation.api.schemas import EventView, MessageDelta, SnapshotHead
from waystation.api.services import decisions as decisions_service
from waystation.api.services import events as events_service
from waystation.api.services import live
from waystation.api.services import messages as messages_service
from waystation.api.services import runs as runs_service
from waystation.contracts.events import MESSAGE_RECEIVED
from waystation.persistence.claims import Claims, claimed_connection
from waystation.persistence.models import TERMINAL_RUN_STATUSES, RunRow
from waystation.registry import Registry

TRANSCRIPT_PAGE = 500
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
        """The live loop's items (api/services/live.py) as AG-UI events, until the AG-UI run
        ends. The last write of each batch of events is held until the next batch or until
        the loop has caught up: the rest of the write may be in the next one, and its
        snapshots go out after its last event."""
        at = self.position
        followed = live.follow(hub, self.pool, self.user, self.run.id,
                               after_seq=at.seq - (0 if at.index is None else 1),
                               subscribe_at=self.run.last_seq, heartbeat=heartbeat,
                               signed_in=self.may_still_read)
        held: list[EventView] = []
        # Deltas that came while events were held: sent after those, as they came after them.
        waiting: list[MessageDelta] = []
        sent_up_to = self.position
        try:
            async with contextlib.aclosing(followed):
                async for item in followed:
                    if isinstance(item, live.CutOff):
                        return  # a reader who may no longer read gets nothing more
                    if isinstance(item, live.Heartbeat):
                        yield b": heartbeat\n\n"
                        continue
                    if isinstance(item, live.Events):
                        held += [e.view for e in item.events]
                        ready, held = _but_last_write(held)
                    elif isinstance(item, live.CaughtUp):
                        ready, held = held, []
                    elif isinstance(item, live.Deltas):
                        waiting += item.deltas
                        if held:
                            continue
                        ready = []
                    else:
                        continue  # a status change is looked at once caught up
                    sent_up_to = self.position
                    async with claimed_connection(self.pool, self.claims) as conn:
                        sent = await self._frames_of(conn, ready)
                        if waiting and not held:
                            sent += await self._live_frames(conn, waiting)
                            waiting = []
                        end = await self._ending(conn) \
                            if isinstance(item, live.CaughtUp) else None
                    if sent:
                        yield sent
                    if end is not None:
                        yield b"".join(frame(e, self.position)
                                       for e in [*self.framing.closing(), end])
                        return
        except Exception as error:  # noqa: BLE001 - answered as every transport does
            refusal = escaped_error(error, f"the AG-UI stream of run {self.run.id}")
            self.position = sent_up_to
            yield b"".join(frame(e, self.position) for e in [
                *self.framing.closing(), RunErrorEvent(message=refusal.message,
                                                       code=refusal.code)])

    async def _frames_of(self, conn: asyncpg.Connection, page: list[EventView]) -> bytes:
        """The frames of run events after the position, each with the states of its write
        after the write's last event."""
        skip = 0 if self.position.index is None else self.position.index + 1
        # By seq, not by time: a transaction's time is when it began, not when it committed.
        if page and page[-1].seq > self.heads_through:
            self.heads = (await events_service.list_snapshots(conn, self.run)).snapshots
            self.heads_through = page[-1].seq
        frames: list[bytes] = []
        for number, event in enumerate(page):
            last_of_write = number + 1 == len(page) \
                or page[number + 1].created_at != event.created_at
            written = [h.step_ordinal for h in self.heads
                       if last_of_write and h.created_at == event.created_at]
            states = [await self._state_event(conn, ordinal) for ordinal in written]
            translated = translate(event, states)
            ids = positions(event.seq, len(translated))
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
        return b"".join(frames)

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

    async def _live_frames(self, conn: asyncpg.Connection,
                           deltas: Sequence[MessageDelta]) -> bytes:
        """The messages being written (issue 43), as the live loop yields them. A retried
        model request's reset drops its failed attempt from the client's messages: a
        MESSAGES_SNAPSHOT without it."""
        frames: list[bytes] = []
        for delta in deltas:
            if self.live.reset(delta):
                frames.append(frame(await self._messages_snapshot(conn), self.position))
            frames += [frame(event, self.position) for event in self.live.events(delta)]
        return b"".join(frames)

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

    async def _ending(self, conn: asyncpg.Connection) -> BaseEvent | None:
        """How this AG-UI run ends now that every run event has been sent, if it does: the
        run has ended, waits for a decision (its open requests as interrupts), or waits for a
        message (paused with nothing to decide).

        The run and its requests are read in one snapshot: read apart, a write committed
        between the two reads (a gate opened with the phase's last events) showed its request
        to a stream that had not seen its events, which then ended without them."""
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            return await self._ending_in(conn)

    async def _ending_in(self, conn: asyncpg.Connection) -> BaseEvent | None:
        run = await runs_service.visible_run(conn, self.user, self.run.id)
        if run.last_seq > self.position.seq:
            return None  # committed after the loop's read: its notice wakes the loop
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


def _but_last_write(events: list[EventView]) -> tuple[list[EventView], list[EventView]]:
    """The events before the last write's (those sharing the last event's `created_at`), and
    the last write's."""
    cut = len(events)
    while cut and events[cut - 1].created_at == events[-1].created_at:
        cut -= 1
    return events[:cut], events[cut:]
