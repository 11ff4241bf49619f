"""Two writers appending to one run at once (the workflow's recorder and a crew task reporting
progress), with retried batches, while readers follow `seq` the way the API and the SSE
streams do: no reader ever skips a seq or sees one out of order, and the table ends up with
every event exactly once, numbered 1..n without a gap."""

from __future__ import annotations

import asyncio
import random

from tests.helpers import new_validation_run
from waystation.persistence.events import append_events, list_events
from waystation.persistence.writes import EventWrite, ReadModelWrite, SnapshotWrite, apply_write

EVENTS_PER_WRITER = 400


def _batch(writer: str, first: int, size: int) -> list[EventWrite]:
    return [EventWrite(event_key=f"{writer}:{i}", type="task.in_progress", crew=writer,
                       progress_pct=i % 100, output={"i": i})
            for i in range(first, first + size)]


async def _recorder(pool, run_id, rng: random.Random) -> None:  # type: ignore[no-untyped-def]
    """Writes the way the recorder activity does: events with a snapshot, one transaction."""
    i, ordinal = 0, 0
    while i < EVENTS_PER_WRITER:
        size = min(rng.randint(1, 6), EVENTS_PER_WRITER - i)
        ordinal += 1
        write = ReadModelWrite(run_id=run_id, events=_batch("recorder", i, size),
                               snapshots=[SnapshotWrite(step_ordinal=ordinal, label="s",
                                                        state={"i": i})])
        async with pool.acquire() as conn:
            await apply_write(conn, write)
            if rng.random() < 0.2:  # a retried activity applies the same write again
                await apply_write(conn, write)
        i += size
        # Random jitter between writes interleaves the writers differently each round: part of the
        # test.
        await asyncio.sleep(rng.random() * 0.002)


async def _reporter(pool, run_id, rng: random.Random) -> None:  # type: ignore[no-untyped-def]
    """Writes the way a crew task reports progress: bare event appends."""
    i = 0
    while i < EVENTS_PER_WRITER:
        size = min(rng.randint(1, 3), EVENTS_PER_WRITER - i)
        batch = _batch("reporter", i, size)
        async with pool.acquire() as conn:
            seqs = await append_events(conn, run_id, batch)
            if rng.random() < 0.2:  # retried: the same keys keep their first seq
                assert await append_events(conn, run_id, batch) == seqs
        i += size
        # Random jitter, as above.
        await asyncio.sleep(rng.random() * 0.002)


async def _follow(pool, run_id, done: asyncio.Event, limit: int) -> tuple[list, int]:  # type: ignore[no-untyped-def]
    """Read on from the last seq seen until the writers are done and nothing is left; also
    how many pages came while the writers were still writing."""
    seen: list = []
    last, live_pages = 0, 0
    while True:
        finished = done.is_set()
        async with pool.acquire() as conn:
            page = await list_events(conn, run_id, after_seq=last, limit=limit)
        for event in page:
            assert event.seq == last + 1, f"after seq {last} the reader got {event.seq}"
            last = event.seq
        seen.extend(page)
        live_pages += bool(page) and not finished
        if finished and not page:
            return seen, live_pages
        if not page:
            await asyncio.sleep(0)


async def test_two_writers_one_run_readers_never_skip_a_seq(pool):
    run = await new_validation_run(pool)
    rng = random.Random(6)
    done = asyncio.Event()
    readers = [asyncio.create_task(_follow(pool, run.run_id, done, limit))
               for limit in (1, 7, 1000)]
    await asyncio.gather(_recorder(pool, run.run_id, random.Random(rng.random())),
                         _reporter(pool, run.run_id, random.Random(rng.random())))
    done.set()
    results = await asyncio.wait_for(asyncio.gather(*readers), timeout=30)

    total = 2 * EVENTS_PER_WRITER
    expected_keys = {f"{w}:{i}" for w in ("recorder", "reporter")
                     for i in range(EVENTS_PER_WRITER)}
    for seen, live_pages in results:
        assert live_pages > 10, "the reader followed the writers, not just the end result"
        assert [e.seq for e in seen] == list(range(1, total + 1))
        assert {e.event_key for e in seen} == expected_keys
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT seq, event_key FROM run_events WHERE run_id = $1 "
                                "ORDER BY seq", run.run_id)
        last_seq = await conn.fetchval("SELECT last_seq FROM runs WHERE id = $1", run.run_id)
    assert [r["seq"] for r in rows] == list(range(1, total + 1))
    assert sorted(r["event_key"] for r in rows) == sorted(expected_keys)
    assert last_seq == total
    # Each writer's own events keep their order.
    for writer in ("recorder", "reporter"):
        mine = [int(r["event_key"].split(":")[1]) for r in rows
                if r["event_key"].startswith(writer)]
        assert mine == sorted(mine)
