"""Live model tokens (issue 43): what a model-request activity publishes as the model writes.

Deltas are ephemeral: never the workflow's history, never a run event, never a `seq`. Each goes
to Postgres as one call of `publish_message_delta` (migration 081), which appends it to the
message's compact partial row (what a client connecting mid-answer catches up from) and
notifies `waystation_deltas`; the API's event hub hands it to the run's live streams. The
finished message stays the durable event it is, with the `message_id` the deltas carried;
committing it deletes the partial (migration 082).

A `MessageStream` never slows the model: `text()` and `tool_args()` only queue, and one writer
task sends what is queued, merging the deltas that waited into one call, so a slow database
costs fewer, larger deltas and no memory beyond the answer itself. A database that cannot be
reached costs the live view only: the request goes on and its durable message is written as
ever. A retried attempt publishes a reset first, so clients drop what they showed of the
failed one.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from types import TracebackType
from uuid import UUID

import asyncpg

from waystation.persistence.queries import sql

log = logging.getLogger(__name__)

# A notice carries at most 8000 bytes: a longer delta is sent in pieces of this many characters
# (up to four bytes each in UTF-8, with room for the notice's other fields).
MAX_DELTA_CHARS = 1500
# How long the end of a request waits for its last deltas to be sent.
FLUSH_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class _Delta:
    call_id: str | None  # None: the message's text
    tool: str | None
    text: str


# Set by the worker as it builds its activities (`use_deltas`); None publishes nothing.
_pool: asyncpg.Pool | None = None


def use_deltas(pool: asyncpg.Pool | None) -> None:
    global _pool
    _pool = pool


def publishing() -> bool:
    return _pool is not None


class MessageStream:
    """The deltas of one model request, `async with`-scoped: a reset first when `attempt` is
    a retry, every queued delta sent (in order) before the block ends."""

    def __init__(self, run_id: UUID, message_id: str, attempt: int) -> None:
        self.run_id, self.message_id, self.attempt = run_id, message_id, attempt
        self._queue: list[_Delta] = []
        self._ready = asyncio.Event()
        self._done = False
        self._writer: asyncio.Task[None] | None = None
        self.sent = 0  # calls made (a test reads how deltas were merged)

    def text(self, delta: str) -> None:
        self._put(_Delta(None, None, delta))

    def tool_args(self, call_id: str, tool: str | None, delta: str) -> None:
        self._put(_Delta(call_id, tool, delta))

    def _put(self, delta: _Delta) -> None:
        if delta.text or delta.tool:
            self._queue.append(delta)
            self._ready.set()

    async def __aenter__(self) -> MessageStream:
        if _pool is not None:
            self._writer = asyncio.create_task(self._write(_pool))
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        if self._writer is None:
            return
        self._done = True
        self._ready.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._writer), FLUSH_TIMEOUT_S)
        except TimeoutError:
            self._writer.cancel()
            log.warning("deltas of message %s not all sent in %.0f s", self.message_id,
                        FLUSH_TIMEOUT_S)

    async def _write(self, pool: asyncpg.Pool) -> None:
        try:
            async with pool.acquire() as conn:
                if self.attempt > 1:
                    await conn.execute(sql("publish_message_reset"), self.run_id,
                                       self.message_id, self.attempt)
                while True:
                    await self._ready.wait()
                    self._ready.clear()
                    batch, self._queue = _merged(self._queue), []
                    for delta in batch:
                        for start in range(0, max(len(delta.text), 1), MAX_DELTA_CHARS):
                            await conn.execute(sql("publish_message_delta"), self.run_id,
                                               self.message_id, self.attempt, delta.call_id,
                                               delta.tool, delta.text[start:start
                                                                      + MAX_DELTA_CHARS])
                            self.sent += 1
                    if self._done and not self._queue:
                        return
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            # The live view is lost, not the answer: its durable event is written as ever.
            log.warning("cannot publish deltas of message %s: %s", self.message_id, error)


def _merged(queue: list[_Delta]) -> list[_Delta]:
    """Consecutive deltas of one part as one (what waited while the writer was busy)."""
    merged: list[_Delta] = []
    for delta in queue:
        last = merged[-1] if merged else None
        if last is not None and last.call_id == delta.call_id:
            merged[-1] = _Delta(last.call_id, last.tool or delta.tool, last.text + delta.text)
        else:
            merged.append(delta)
    return merged

