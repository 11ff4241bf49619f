"""The one live loop (api/services/live.py) against the real Postgres and event hub: a run's
status change reaches its followers as an item of its own, at once (migration 064), in order
with the events committed before it; live model tokens (issue 43) come through it as `Deltas`,
a slow follower's dropped for the message whole so far."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from tests.helpers import eventually
from waystation.api.auth import User
from waystation.api.event_hub import DELTA_CAPACITY, EventHub
from waystation.api.services import live
from waystation.persistence.runs import create_run
from waystation.persistence.writes import EventWrite, ReadModelWrite, RunStateWrite, apply_write

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


async def _publish(conn: asyncpg.Connection, run_id: uuid.UUID, pieces: list[str]) -> None:
    """The deltas of message `m1` (attempt 1), as a model activity publishes them (migration
    081), in one transaction: their notices arrive together."""
    async with conn.transaction():
        for piece in pieces:
            await conn.execute("SELECT publish_message_delta($1, 'm1', 1, NULL, NULL, $2)",
                               run_id, piece)


async def test_deltas_come_through_the_loop_and_a_slow_follower_gets_the_message_whole(
        pool, migrated_url):
    run_id = uuid.uuid4()
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="agent", owner=OWNER, group_id=None,
                         workflow_id=f"agent-{run_id}", idempotency_key=None, input={})
    hub = EventHub(pool, lambda: asyncpg.connect(migrated_url))
    await hub.start()
    followed = live.follow(hub, pool, User(name=OWNER), run_id, after_seq=0, subscribe_at=0,
                           heartbeat=HEARTBEAT, signed_in=_signed_in)
    # Beside the loop's: filled by the same notices, it says when they have all arrived.
    beside = hub.subscribe_run(run_id, from_seq=0)
    try:
        assert await anext(followed) == live.CaughtUp(0)
        async with pool.acquire() as conn:
            await _publish(conn, run_id, ["Hel", "lo"])
        async with asyncio.timeout(2):
            item = await anext(followed)
        assert isinstance(item, live.Deltas)
        assert [(d.at, d.delta) for d in item.deltas] == [(0, "Hel"), (3, "lo")]
        assert await anext(followed) == live.CaughtUp(0)
        beside.take_deltas()

        # More than the buffer holds arrive while the follower does not read: the loop drops
        # them for the message whole so far (the ones held since the drop are in it: not sent
        # twice).
        pieces = [f" {n}" for n in range(DELTA_CAPACITY + 5)]
        async with pool.acquire() as conn:
            await _publish(conn, run_id, pieces)
        await eventually(lambda: _true(beside.deltas_dropped and len(beside.deltas) == 4))
        async with asyncio.timeout(2):
            item = await anext(followed)
        assert isinstance(item, live.Deltas)
        assert [(d.at, d.delta) for d in item.deltas] == [(0, "Hello" + "".join(pieces))]
    finally:
        hub.unsubscribe_run(beside)
        await followed.aclose()
        await hub.stop()


async def _true(holds: bool) -> bool:
    return holds
