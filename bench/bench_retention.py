"""The retention sweep deleting finished runs, and what it costs live runs meanwhile.

    python -m bench.bench_retention [--runs N] [--events N] [--writers N]

One process, one Temporal dev server and one embedded PostgreSQL, both started here (or
--temporal-address / DATABASE_URL). N finished runs (default 10,000), each with `--events`
events (20) and two snapshots, are written 40 days old; `--writers` live runs append one event
at a time in a loop. Figures, in the same run:

1. Runs deleted per second by one RetentionSweep (batches of 200, `--pause` seconds (1)
   between them, the sweep's default; each run's Temporal
   execution is deleted too: none exists here, so each is one NotFound round trip).
2. Event-append latency of the live runs while the sweep runs, beside the same appends with
   retention idle (p50 and p99, ms).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from typing import Any

import asyncpg

from bench.bench_validation import bench_database, bench_temporal, log
from bench.common import markdown_table, percentile, ratio
from waystation.activities.agents import backend_named
from waystation.contracts.writes import EventWrite
from waystation.persistence.db import create_pool
from waystation.persistence.events import append_events
from waystation.persistence.runs import create_run
from waystation.worker import build_worker
from waystation.workflows.retention import RetentionSweep
from waystation.workflows.retention_models import RetentionSweepInput

TASK_QUEUE = "bench-retention"
IDLE_SECONDS = 15.0


async def seed_finished(pool: asyncpg.Pool, runs: int, events: int) -> None:
    """`runs` runs finished 40 days ago, with their events and snapshots, in a few statements."""
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO runs (id, kind, owner, workflow_id, status, completed_at, last_seq) "
            "SELECT id, 'validation', 'old', 'validation-' || id, 'completed', "
            "now() - interval '40 days', $2 FROM (SELECT gen_random_uuid() AS id "
            "FROM generate_series(1, $1::int)) r", runs, events)
        await conn.execute(
            "INSERT INTO run_events (run_id, seq, event_key, type, output) "
            "SELECT r.id, n, 'e' || n, 'task.completed', '{\"text\": \"an answer\"}' "
            "FROM runs r, generate_series(1, $1::int) n WHERE r.owner = 'old'", events)
        await conn.execute(
            "INSERT INTO run_snapshots (run_id, step_ordinal, label, state) "
            "SELECT r.id, n, 'phase', '{\"state\": \"of the run\"}' "
            "FROM runs r, generate_series(1, 2) n WHERE r.owner = 'old'")


async def live_run(pool: asyncpg.Pool) -> uuid.UUID:
    run_id = uuid.uuid4()
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="validation", owner="live", group_id=None,
                         workflow_id=f"validation-{run_id}", idempotency_key=None, input={})
    return run_id


async def append_loop(pool: asyncpg.Pool, run_id: uuid.UUID, stop: asyncio.Event,
                      samples: list[float]) -> None:
    """Append one event at a time until `stop`, noting each append's latency (ms)."""
    while not stop.is_set():
        event = EventWrite(event_key=f"live-{uuid.uuid4()}", type="task.in_progress")
        started = time.perf_counter()
        async with pool.acquire() as conn:
            await append_events(conn, run_id, [event])
        samples.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.01)


async def appends_during(pool: asyncpg.Pool, writers: list[uuid.UUID],
                         work: asyncio.Future[Any] | None) -> list[float]:
    """Latencies of the writers' appends during `work`, or for IDLE_SECONDS without it."""
    stop, samples = asyncio.Event(), list[float]()
    tasks = [asyncio.create_task(append_loop(pool, run_id, stop, samples)) for run_id in writers]
    if work is None:
        await asyncio.sleep(IDLE_SECONDS)
    else:
        await work
    stop.set()
    await asyncio.gather(*tasks)
    return samples


async def main_async(args: argparse.Namespace) -> None:
    async with bench_database() as url, bench_temporal(args.temporal_address, "default") as client:
        pool = await create_pool(url, max_size=args.writers + 10)
        log(f"seeding {args.runs} finished runs with {args.events} events each")
        await seed_finished(pool, args.runs, args.events)
        writers = [await live_run(pool) for _ in range(args.writers)]
        idle = await appends_during(pool, writers, None)
        async with build_worker(client, pool, task_queue=TASK_QUEUE,
                                backend=backend_named("offline")):
            log("sweeping")
            started = time.perf_counter()
            sweep = asyncio.ensure_future(client.execute_workflow(
                RetentionSweep.run, RetentionSweepInput(
                    retention_days=30, max_batches=10_000, batch_pause_seconds=args.pause),
                id=f"bench-sweep-{uuid.uuid4()}", task_queue=TASK_QUEUE))
            busy = await appends_during(pool, writers, sweep)
            elapsed = time.perf_counter() - started
        deleted = sweep.result().runs_deleted
        async with pool.acquire() as conn:
            left = await conn.fetchval("SELECT count(*) FROM runs WHERE owner = 'old'")
        await pool.close()
    print(f"\nRetention: {deleted} runs ({args.events} events, 2 snapshots each) deleted in "
          f"{elapsed:.1f} s, {deleted / elapsed:.0f} runs/s; {left} left\n")
    rows = [[label, str(len(s)), f"{percentile(s, 50):.2f}", f"{percentile(s, 99):.2f}"]
            for label, s in (("retention idle", idle), ("retention sweeping", busy))]
    print(markdown_table(["live appends", "appends", "p50 ms", "p99 ms"], rows,
                         [False, True, True, True]))
    print(f"\np99 sweeping / idle: {ratio(percentile(busy, 99), percentile(idle, 99))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--writers", type=int, default=20)
    parser.add_argument("--pause", type=float, default=1.0,
                        help="the sweep's pause between batches, seconds")
    parser.add_argument("--temporal-address")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
