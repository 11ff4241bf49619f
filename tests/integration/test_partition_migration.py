"""Migration 021 moves run_events into monthly partitions: a database as release 020 left it,
filled with events spread over months and runs, loses nothing (count, content, gapless seq,
run totals), every event lands in its month's partition, and appends afterwards stay
idempotent across partitions and gapless under concurrent writers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlparse

import asyncpg
import pytest
import pytest_asyncio

from waystation.contracts.writes import EventWrite
from waystation.persistence.db import create_pool
from waystation.persistence.events import append_events, maintain_partitions
from waystation.persistence.migrate import apply_migrations
from waystation.testing import create_database, eventually

BEFORE_PARTITIONS = 20

# Runs start over the last seven months, an event every three hours, so most runs span two
# or three months; every 50th event carries a model call's usage (the run-totals trigger).
SEED_RUNS = """
INSERT INTO runs (id, kind, owner, workflow_id, status, created_at, last_seq)
SELECT id, 'validation', 'seed', 'validation-' || id, 'completed',
       now() - interval '7 months' + (i * 200 / $1::int) * interval '1 day', $2
  FROM (SELECT gen_random_uuid() AS id, i FROM generate_series(1, $1::int) i) r"""
SEED_EVENTS = """
INSERT INTO run_events (run_id, seq, event_key, type, phase, output, created_at)
SELECT r.id, n, 'e' || n, CASE WHEN n % 50 = 0 THEN 'task.completed' ELSE 'task.progress' END,
       n % 5,
       CASE WHEN n % 50 = 0
            THEN jsonb_build_object('usage', jsonb_build_object(
                     'cost_usd', 0.001, 'input_tokens', 10, 'output_tokens', 5))
            ELSE jsonb_build_object('n', n, 'text', 'progress of ' || r.id) END,
       r.created_at + n * interval '3 hours'
  FROM runs r, generate_series(1, $1::int) n WHERE r.owner = 'seed'"""
# A clock far ahead: its events fall outside every monthly partition (the default one).
FUTURE_EVENTS = 10

FINGERPRINT = """
SELECT count(*) AS events,
       sum(hashtextextended(to_jsonb(e)::text, 0)::numeric) AS content
  FROM run_events e"""
RUN_TOTALS = "SELECT sum(cost_usd) AS cost, sum(input_tokens) AS tokens, sum(last_seq) AS seqs " \
             "FROM runs"
# Runs whose seqs are not exactly 1..last_seq.
GAPPED = """
SELECT count(*) FROM runs r
  LEFT JOIN (SELECT run_id, count(*) AS n, count(DISTINCT seq) AS d, min(seq) AS lo,
                    max(seq) AS hi FROM run_events GROUP BY run_id) e ON e.run_id = r.id
 WHERE r.last_seq > 0 AND (e.n IS NULL OR e.n <> r.last_seq OR e.d <> e.n OR e.lo <> 1
                           OR e.hi <> r.last_seq)"""
# Events outside the partition named after their UTC month.
MISPLACED = """
SELECT count(*) FROM run_events
 WHERE tableoid::regclass::text <> 'run_events_' || to_char(created_at AT TIME ZONE 'UTC',
                                                            'YYYY_MM')"""


@pytest_asyncio.fixture
async def release_020_url(database_url: str) -> AsyncIterator[str]:
    url = await create_database(database_url, "waystation_parts", migrate=False)
    conn = await asyncpg.connect(url)
    try:
        await apply_migrations(conn, up_to=BEFORE_PARTITIONS)
    finally:
        await conn.close()
    yield url
    admin = await asyncpg.connect(database_url)
    try:
        await admin.execute(f'DROP DATABASE "{urlparse(url).path[1:]}" WITH (FORCE)')
    finally:
        await admin.close()


async def _seed(conn: asyncpg.Connection, runs: int, per_run: int) -> uuid.UUID:
    """`runs` runs of `per_run` events each, and one run whose events are a year ahead."""
    await conn.execute(SEED_RUNS, runs, per_run)
    await conn.execute(SEED_EVENTS, per_run)
    future = uuid.uuid4()
    await conn.execute("INSERT INTO runs (id, kind, owner, workflow_id, last_seq) "
                       "VALUES ($1, 'validation', 'future', $2, $3)",
                       future, f"validation-{future}", FUTURE_EVENTS)
    await conn.execute(
        "INSERT INTO run_events (run_id, seq, event_key, type, created_at) "
        "SELECT $1, n, 'e' || n, 'task.progress', now() + interval '1 year' "
        "FROM generate_series(1, $2::int) n", future, FUTURE_EVENTS)
    return future


async def _migrate_and_check(url: str, runs: int, per_run: int) -> None:
    conn = await asyncpg.connect(url)
    try:
        future = await _seed(conn, runs, per_run)
        before = dict(await conn.fetchrow(FINGERPRINT))
        totals = dict(await conn.fetchrow(RUN_TOTALS))
        assert before["events"] == runs * per_run + FUTURE_EVENTS

        started = time.perf_counter()
        assert BEFORE_PARTITIONS + 1 in await apply_migrations(conn)
        print(f"\nmigration 021 moved {before['events']:,} events in "
              f"{time.perf_counter() - started:.1f} s")

        assert await conn.fetchval(
            "SELECT relkind::text FROM pg_class WHERE relname = 'run_events'") == "p"
        assert dict(await conn.fetchrow(FINGERPRINT)) == before
        assert dict(await conn.fetchrow(RUN_TOTALS)) == totals
        assert await conn.fetchval(GAPPED) == 0
        months = await conn.fetchval(
            "SELECT count(DISTINCT tableoid) FROM run_events WHERE run_id <> $1", future)
        assert months >= 7
        # Only the year-ahead events sit in the default partition, until their month exists.
        assert await conn.fetchval(MISPLACED) == FUTURE_EVENTS
        assert await conn.fetchval("SELECT count(*) FROM run_events_default") == FUTURE_EVENTS
        assert await conn.fetchval("SELECT create_run_events_partitions(now(), "
                                   "now() + interval '13 months')") >= 1
        assert await conn.fetchval(MISPLACED) == 0
        assert await conn.fetchval("SELECT count(*) FROM run_events_default") == 0
        assert dict(await conn.fetchrow(FINGERPRINT)) == before
        assert dict(await conn.fetchrow(RUN_TOTALS)) == totals
    finally:
        await conn.close()
    await _appends_after(url, per_run)


async def _appends_after(url: str, per_run: int) -> None:
    pool = await create_pool(url, max_size=8)
    try:
        async with pool.acquire() as conn:
            async with conn.transaction():
                assert await maintain_partitions(conn) == (0, 0)  # all there, none empty
                # ... and so it did not lock run_events against appends either.
                assert not await conn.fetchval(
                    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() "
                    "AND relation = 'run_events'::regclass AND mode = 'AccessExclusiveLock')")
            run_id = await conn.fetchval("SELECT id FROM runs WHERE owner = 'seed' "
                                         "ORDER BY created_at LIMIT 1")
            # A key first written months ago keeps its seq: the look-up spans partitions.
            batch = [EventWrite(event_key="e1", type="task.progress"),
                     EventWrite(event_key="fresh", type="task.progress")]
            assert await append_events(conn, run_id, batch) == {"e1": 1, "fresh": per_run + 1}
            assert await append_events(conn, run_id, batch) == {"e1": 1, "fresh": per_run + 1}

        # Eight writers at once, each retrying overlapping keys.
        async def writer(w: int) -> None:
            for i in range(10):
                keys = [f"w{w}:{i}", f"w{(w + 1) % 8}:{i}"]
                async with pool.acquire() as conn:
                    await append_events(conn, run_id,
                                        [EventWrite(event_key=k, type="t") for k in keys])

        await asyncio.gather(*(writer(w) for w in range(8)))
        async with pool.acquire() as conn:
            seqs = [r["seq"] for r in await conn.fetch(
                "SELECT seq FROM run_events WHERE run_id = $1 ORDER BY seq", run_id)]
            total = per_run + 1 + 8 * 10  # the seeded ones, "fresh", the writers' keys
            assert seqs == list(range(1, total + 1))
            assert await conn.fetchval(
                "SELECT count(DISTINCT event_key) FROM run_events WHERE run_id = $1",
                run_id) == len(seqs)
            # The foreign key still cascades from the partitioned table.
            await conn.execute("DELETE FROM runs WHERE id = $1", run_id)
            assert await conn.fetchval(
                "SELECT count(*) FROM run_events WHERE run_id = $1", run_id) == 0

            # Once retention has emptied the oldest month, its partition goes.
            oldest = await conn.fetchval(
                "SELECT min(tableoid::regclass::text) FROM run_events "
                "WHERE tableoid <> 'run_events_default'::regclass")
            await conn.execute(f"DELETE FROM runs WHERE id IN (SELECT run_id FROM {oldest})")
            kept = await conn.fetchval("SELECT count(*) FROM run_events")
            # While a reader holds the table, the drop gives up at once instead of queueing
            # every append behind its lock.
            async with pool.acquire() as reader, reader.transaction():
                await reader.fetchval("SELECT count(*) FROM run_events WHERE run_id = $1",
                                      run_id)
                began = time.perf_counter()
                assert await maintain_partitions(conn) == (0, 0)
                assert time.perf_counter() - began < 2
            # Any other lock on the table makes a drop give up, and the next maintenance call
            # tries again: after that delete, autovacuum may hold a partition for a while.
            async def maintained() -> tuple[int, int] | None:
                result = await maintain_partitions(conn)
                return result if result[1] else None
            created, dropped = await eventually(maintained, timeout=30, interval=0.5)
            assert created == 0 and dropped >= 1  # the next month may have emptied too
            assert await conn.fetchval("SELECT count(*) FROM run_events") == kept
            assert await conn.fetchval("SELECT to_regclass($1)::text", oldest) is None
            assert await conn.fetchval(GAPPED) == 0
    finally:
        await pool.close()


async def test_partition_migration_keeps_10k_events(release_020_url: str) -> None:
    await _migrate_and_check(release_020_url, runs=50, per_run=200)


@pytest.mark.slow
async def test_partition_migration_keeps_1m_events(release_020_url: str) -> None:
    await _migrate_and_check(release_020_url, runs=2000, per_run=500)


async def test_workers_starting_at_once_create_each_month_once(pool: asyncpg.Pool) -> None:
    async def create() -> int:
        async with pool.acquire() as conn:
            return int(await conn.fetchval(
                "SELECT create_run_events_partitions(now(), now() + interval '9 months')"))

    async with pool.acquire() as conn:
        before = await conn.fetchval(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'run_events'::regclass")
    created = await asyncio.gather(*(create() for _ in range(4)))
    async with pool.acquire() as conn:
        after = await conn.fetchval(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'run_events'::regclass")
    assert sum(created) == after - before
    assert sorted(created)[:3] == [0, 0, 0]
