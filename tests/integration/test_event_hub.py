"""The hub hands committed events to subscribers from the notification when it carries them,
from the table when it does not; either way the frames are the same and in seq order."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from waystation.api.event_hub import EventHub
from waystation.api.schemas import EventView
from waystation.api.sse import LiveEvent
from waystation.persistence import events as events_repo
from waystation.persistence.runs import create_run
from waystation.persistence.writes import EventWrite


async def _new_run(pool: asyncpg.Pool) -> uuid.UUID:
    run_id = uuid.uuid4()
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="validation", owner="hub", group_id=None,
                         workflow_id=f"validation-{run_id}", idempotency_key=None, input={})
    return run_id


async def _take(queue: asyncio.Queue[LiveEvent], n: int) -> list[LiveEvent]:
    return [await asyncio.wait_for(queue.get(), timeout=5) for _ in range(n)]


async def test_small_events_arrive_from_the_notification_big_ones_from_the_table(
        pool, migrated_url):
    hub = EventHub(pool, lambda: asyncpg.connect(migrated_url))
    await hub.start()
    try:
        run_id = await _new_run(pool)
        sub = hub.subscribe_run(run_id, from_seq=0)
        big = {"text": "x" * 9000}  # past NOTIFY's 8000 bytes: announced without its rows
        writes = [EventWrite(event_key="a", type="task.started", phase=1, output={"n": 1}),
                  EventWrite(event_key="b", type="task.completed", phase=1, output=big),
                  EventWrite(event_key="c", type="task.started", crew="c", progress_pct=5)]
        received: list[LiveEvent] = []
        async with pool.acquire() as conn:
            for write in writes:
                await events_repo.append_events(conn, run_id, [write])
                received += await _take(sub.queue, 1)
            # A retried write of the same keys adds nothing and announces nothing.
            await events_repo.append_events(conn, run_id, writes)
        # The retried write must announce nothing: an absence, shown only by waiting a while.
        await asyncio.sleep(0.2)
        assert [e.seq for e in received] == [1, 2, 3]
        assert sub.queue.empty()
        assert hub.delivered_inline == 2 and hub.table_reads == 1
        async with pool.acquire() as conn:
            rows = await events_repo.list_events(conn, run_id, after_seq=0, limit=10)
        # Whichever way an event came, its frame is the one the table gives.
        assert [e.frame for e in received] == [LiveEvent.of(EventView.of(r)).frame
                                                for r in rows]
    finally:
        await hub.stop()
