"""What partitioning run_events by month costs the queries that use it.

    python -m bench.bench_partitions [--runs N] [--events N] [--months N] [--samples N]

One embedded PostgreSQL (or DATABASE_URL's server), two databases filled alike: one as release
020 left it (run_events one table, the baseline) and one migrated through 021 (monthly
partitions; the events' `--months` months and three ahead exist, so every read probes that
many partitions). `--runs` runs (default 400) of `--events` events (500) each, the runs
starting evenly over the months, an event every three hours. Figures, side by side (ms):

1. append: one event appended to a run (append_run_events: the key look-up and the insert),
2. catch-up: the next 100 events of a run after a seq (the SSE catch-up and event pages),
3. retention: deleting one run with its events (retention's delete_runs), 20 times.

Each database is measured twice, alternately; the second round is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

import asyncpg

from bench.common import markdown_table, percentile, ratio
from waystation.contracts.writes import EventWrite
from waystation.persistence import retention as retention_repo
from waystation.persistence.db import create_pool
from waystation.persistence.embedded import embedded_database_url, stop_embedded
from waystation.persistence.events import append_events, list_events
from waystation.persistence.migrate import apply_migrations
from waystation.testing import create_database

SEED_RUNS = """
INSERT INTO runs (id, kind, owner, workflow_id, status, created_at, last_seq)
SELECT id, 'validation', 'bench', 'validation-' || id, 'completed',
       now() - make_interval(months => $3) + (i * 30 * $3 / $1::int) * interval '1 day', $2
  FROM (SELECT gen_random_uuid() AS id, i FROM generate_series(1, $1::int) i) r"""
SEED_EVENTS = """
INSERT INTO run_events (run_id, seq, event_key, type, output, created_at)
SELECT r.id, n, 'e' || n, 'task.progress', jsonb_build_object('n', n),
       r.created_at + n * interval '3 hours'
  FROM runs r, generate_series(1, $1::int) n"""


async def fill(url: str, args: argparse.Namespace, *, up_to: int | None) -> None:
    conn = await asyncpg.connect(url)
    try:
        await apply_migrations(conn, up_to=up_to)
        await conn.execute(SEED_RUNS, args.runs, args.events, args.months)
        await conn.execute(SEED_EVENTS, args.events)
        if up_to is None:  # the events were written after the migration: give them months
            await conn.execute("SELECT create_run_events_partitions(now() - make_interval("
                               "months => $1), now() + interval '3 months')", args.months)
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()


async def measure(url: str, args: argparse.Namespace, round_: int) -> dict[str, list[float]]:
    pool = await create_pool(url, max_size=4)
    rng = random.Random(7)
    times: dict[str, list[float]] = {"append": [], "catch-up": [], "retention": []}
    try:
        async with pool.acquire() as conn:
            runs = [r["id"] for r in await conn.fetch("SELECT id FROM runs ORDER BY id")]
            for i in range(args.samples):
                run_id = rng.choice(runs[40:])
                began = time.perf_counter()
                await append_events(conn, run_id,
                                    [EventWrite(event_key=f"new{round_}.{i}", type="t")])
                times["append"].append(time.perf_counter() - began)
                began = time.perf_counter()
                await list_events(conn, run_id, after_seq=rng.randrange(args.events), limit=100)
                times["catch-up"].append(time.perf_counter() - began)
        for run_id in runs[20 * round_:20 * round_ + 20]:
            began = time.perf_counter()
            await retention_repo.delete_runs(pool, [run_id])
            times["retention"].append(time.perf_counter() - began)
    finally:
        await pool.close()
    return times


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="ws-bench-partitions-"))
    embedded = os.environ.get("DATABASE_URL") is None
    try:
        server = (await asyncio.to_thread(embedded_database_url, folder / "pgdata")
                  if embedded else os.environ["DATABASE_URL"])
        one_table = await create_database(server, "bench_unpartitioned", migrate=False)
        monthly = await create_database(server, "bench_partitioned", migrate=False)
        for url, up_to in ((one_table, 20), (monthly, None)):
            began = time.perf_counter()
            await fill(url, args, up_to=up_to)
            print(f"filled {urlparse(url).path[1:]} in {time.perf_counter() - began:.1f} s",
                  flush=True)
        # Alternately, twice; the second round counts (caches warm, the machine's noise spread
        # over both databases alike).
        for round_ in (0, 1):
            base = await measure(one_table, args, round_)
            parts = await measure(monthly, args, round_)
        rows = []
        for name in base:
            for pct in (50, 99):
                b, p = percentile(base[name], pct) * 1000, percentile(parts[name], pct) * 1000
                rows.append([f"{name} p{pct}", f"{b:.2f}", f"{p:.2f}", ratio(p, b)])
        print(f"\n{args.runs * args.events:,} events over {args.months} months; "
              f"{args.samples} appends and catch-ups, 20 run deletions\n")
        print(markdown_table(["ms", "one table (020)", "monthly partitions (021)", "ratio"],
                             rows, [False, True, True, True]))
    finally:
        if embedded:
            stop_embedded(folder / "pgdata")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--months", type=int, default=24)
    parser.add_argument("--samples", type=int, default=2000)
    asyncio.run(main(parser.parse_args()))
