"""The one live loop (api/services/live.py) against the real Postgres and event hub: a run's
status change reaches its followers as an item of its own, at once (migration 064), in order
with the events committed before it."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from api.auth import User
from api.event_hub import EventHub
from api.services import live
from persistence.runs import create_run
from persistence.writes import EventWrite, ReadModelWrite, RunStateWrite, apply_write

OWNER = "lena"
# Far longer than the test: anything that arrives came from a notice, not a heartbeat.
HEARTBEAT = 60.0


async def _signed_in() -> bool:
    return True


async def test_a_status_change_is_an_item_of_its_own_after_the_events_before_it(
        pool, migrated_url):
    run_id = uuid.uuid4()
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="validation", owner=OWNER, group_id=None,
                         workflow_id=f"validation-{run_id}", idempotency_key=None, input={})
    hub = EventHub(pool, lambda: asyncpg.connect(migrated_url))
    await hub.start()
    followed = live.follow(hub, pool, User(name=OWNER), run_id, after_seq=0, subscribe_at=0,
                           heartbeat=HEARTBEAT, signed_in=_signed_in)
    try:
        assert await anext(followed) == live.CaughtUp(0)
        async with pool.acquire() as conn:
            await apply_write(conn, ReadModelWrite(
                run_id=run_id, run=RunStateWrite(status="running", current_phase=0),
                events=[EventWrite(event_key="run.started", type="run.started")]))
            # A pause that writes no event: before migration 064 nothing told of it.
            await apply_write(conn, ReadModelWrite(
                run_id=run_id, run=RunStateWrite(status="paused", current_phase=0)))
        items = []
        async with asyncio.timeout(2):
            while live.StatusChanged("paused") not in items:
                items.append(await anext(followed))
        events = [i for i in items if isinstance(i, live.Events)]
        assert [e.type for batch in events for e in batch.events] == ["run.started"]
        changes = [i for i in items if isinstance(i, live.StatusChanged)]
        assert changes == [live.StatusChanged("running"), live.StatusChanged("paused")]
        assert items.index(events[0]) < items.index(changes[-1])
        assert hub.open_streams()["run"] == 1
    finally:
        await followed.aclose()
        await hub.stop()
    assert hub.open_streams()["run"] == 0  # closing the loop unsubscribes it
