"""Decision analytics over a year of decided requests: the roll-ups beside the raw query.

    python -m bench.bench_analytics [--requests 1000000] [--calls 20]

A private embedded PostgreSQL holds `--requests` closed requests the reader may read
(approved, rejected, a few expired) spread over 365 days, 3 kinds and 4 gates each, on runs of
the reader's own and of the 5 groups the reader is in, and a tenth as many of other people's,
which the reader must not count. Times to decide run from seconds to weeks. The roll-ups are
filled by the migration's own function (`decision_rollup_count`, what the trigger calls as
each request closes), timed.

Timed, as the reader (role `waystation_api`, row-level security on), each call on one pooled
connection, as `GET /analytics/decisions` makes it (the service function, without HTTP):

- **roll-ups**: the default answer, a year (`window=365`), every kind and gate;
- **raw**: the same figures read from the requests themselves, exact percentiles (what a
  person filter answers from): the baseline;
- one kind and gate, over 30 days, both ways.

The percentiles of both are printed side by side (the roll-ups' are within a factor √2).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from bench.common import percentile
from waystation.api.analytics_schemas import AnalyticsQuery
from waystation.api.auth import User
from waystation.api.services import analytics
from waystation.persistence import analytics as repo
from waystation.persistence.claims import API_ROLE, Claims, set_claims
from waystation.persistence.db import create_pool
from waystation.persistence.embedded import embedded_database_url, stop_embedded
from waystation.persistence.migrate import apply_migrations
from waystation.registry import load_registry

READER = "reader"
READER_USER = User(name=READER, role="user")
GOAL_MS = 200.0
# Runs (of 50 requests each) whose requests are counted in one transaction.
ROLLUP_RUNS = 40

# $1: requests the reader may read. Runs of 50 requests each: of every 11, five are the
# reader's own, five are in its groups, and one is someone else's (which the reader must not
# count). One request in 50 expires, one in 7 is rejected. A request's time to decide is
# log-uniform from 2 s to ~4 weeks.
FILL = [
    """INSERT INTO groups (id, name, created_by)
       SELECT gen_random_uuid(), 'group ' || g, 'someone' FROM generate_series(1, 10) g""",
    """INSERT INTO group_members (group_id, user_name, role, added_by)
       SELECT id, CASE WHEN name IN ('group 1', 'group 2', 'group 3', 'group 4', 'group 5')
                       THEN 'reader' ELSE 'someone' END, 'approver', 'someone' FROM groups""",
    """INSERT INTO runs (id, kind, owner, group_id, workflow_id, status)
       SELECT gen_random_uuid(), (ARRAY['validation', 'agent', 'batch'])[1 + g % 3],
              CASE WHEN g % 11 < 5 THEN 'reader' ELSE 'other' || g % 7 END,
              CASE WHEN g % 11 BETWEEN 5 AND 9
                   THEN (SELECT id FROM groups WHERE name = 'group ' || (1 + g % 5))
                   WHEN g % 22 = 10
                   THEN (SELECT id FROM groups WHERE name = 'group ' || (6 + g % 5)) END,
              'run-' || g, 'completed'
         FROM generate_series(0, ($1::int * 11 / 10 + 49) / 50 - 1) g""",
    """INSERT INTO hitl_requests (id, run_id, checkpoint_name, phase, title, description,
                                 digest, recommended_option, status, decision, decision_by,
                                 created_at, decision_at, reminders_sent)
       SELECT gen_random_uuid(), r.id, 'gate_' || (s % 4) || '_' || s, 0, 't', 'd', 'x',
              'approve', x.status,
              CASE WHEN x.status = 'expired' THEN NULL
                   WHEN x.status = 'rejected' THEN 'reject' ELSE 'approve' END,
              CASE WHEN x.status = 'expired' THEN NULL
                   WHEN s % 9 = 0 THEN 'policy:auto@1' ELSE 'person' || s % 5 END,
              x.opened, CASE WHEN x.status <> 'expired' THEN x.opened + x.took END, s % 3
         FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM runs) r,
              generate_series(1, 50) s,
              LATERAL (SELECT CASE WHEN (r.n * 50 + s) % 50 = 7 THEN 'expired'
                                   WHEN (r.n * 50 + s) % 7 = 0 THEN 'rejected'
                                   ELSE 'approved' END AS status,
                              now() - random() * interval '365 days' AS opened,
                              exp(ln(2) + random() * ln(1200000.0)) * interval '1 second'
                                  AS took) x""",
]


async def fill(url: str, requests: int) -> float:
    """Fills the database; returns the seconds the roll-ups took to fill, request by
    request."""
    conn = await asyncpg.connect(url)
    try:
        await apply_migrations(conn, folders=load_registry(
            use_entry_points=False).migration_folders())
        async with conn.transaction():
            for statement in FILL:
                if "$1" in statement:
                    await conn.execute(statement, requests)
                else:
                    await conn.execute(statement)
        # Counted as the trigger counts them, a transaction at a time (here 2,000 requests
        # each: one statement over all of them would leave every row version behind).
        runs = [r["id"] for r in await conn.fetch("SELECT id FROM runs ORDER BY id")]
        began = time.perf_counter()
        for first in range(0, len(runs), ROLLUP_RUNS):
            await conn.execute("SELECT decision_rollup_count(h) FROM hitl_requests h "
                               "WHERE h.run_id = ANY($1::uuid[])", runs[first:first + ROLLUP_RUNS])
        took = time.perf_counter() - began
        await conn.execute("VACUUM ANALYZE")
        return took
    finally:
        await conn.close()


Call = Callable[[asyncpg.Connection], Awaitable[Any]]


async def timed(pool: asyncpg.Pool, call: Call, calls: int) -> list[float]:
    times = []
    async with pool.acquire() as conn:
        await set_claims(conn, Claims(user=READER))
        for i in range(calls + 2):  # the first two warm plans and caches
            began = time.perf_counter()
            await call(conn)
            if i >= 2:
                times.append(time.perf_counter() - began)
    return times


def _p(figures: Any) -> str:
    t = figures.time_to_decide
    return "/".join("-" if v is None else f"{v:,.0f}" for v in (t.p50, t.p90, t.p99))


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="ws-bench-analytics-"))
    try:
        url = await asyncio.to_thread(embedded_database_url, folder / "pgdata")
        began = time.perf_counter()
        rollup_seconds = await fill(url, args.requests)
        print(f"filled {args.requests:,} decided requests in "
              f"{time.perf_counter() - began:.0f} s (roll-ups, row by row: {rollup_seconds:.1f} s"
              f", {rollup_seconds / args.requests * 1e6:.0f} µs a request)", flush=True)
        pool = await create_pool(url, min_size=1, max_size=1, role=API_ROLE)
        try:
            now = datetime.now(UTC)
            year = AnalyticsQuery(window=365)
            month = AnalyticsQuery(window=30, kind="agent", checkpoint="gate_1")
            cases: dict[str, Call] = {
                "year, roll-ups": lambda c: analytics.decisions(c, READER_USER, year, now=now),
                "year, raw": lambda c: repo.raw_figures(c, repo.Filters(
                    since=now - timedelta(days=365))),
                "30 days, one gate, roll-ups": lambda c: analytics.decisions(
                    c, READER_USER, month, now=now),
                "30 days, one gate, raw": lambda c: repo.raw_figures(c, repo.Filters(
                    since=now - timedelta(days=30), kind="agent", gate="gate_1")),
            }
            async with pool.acquire() as conn:
                await set_claims(conn, Claims(user=READER))
                answer = await analytics.decisions(conn, READER_USER, year, now=now)
                raw = await repo.raw_figures(conn, repo.Filters(
                    since=now - timedelta(days=365)))
            total = next(r for r in raw if r.level == 7)
            print(f"the reader sees {answer.totals.decided:,} decided, "
                  f"{answer.totals.expired:,} expired "
                  f"(raw: {total.approved + total.rejected:,}); p50/p90/p99 seconds: "
                  f"roll-ups {_p(answer.totals)}, raw "
                  + "/".join(f"{v:,.0f}" for v in (total.percentiles or [])), flush=True)
            print("\n| query | p50 ms | p90 ms | calls |\n|---|---|---|---|")
            results = {}
            for name, call in cases.items():
                times = await timed(pool, call, args.calls)
                results[name] = percentile(times, 50) * 1000
                print(f"| {name} | {percentile(times, 50) * 1000:.1f} | "
                      f"{percentile(times, 90) * 1000:.1f} | {len(times)} |", flush=True)
                del times
            print(f"\ngoal: year over the roll-ups under {GOAL_MS:.0f} ms p50: "
                  f"{'met' if results['year, roll-ups'] < GOAL_MS else 'NOT met'} "
                  f"({results['year, roll-ups']:.1f} ms; raw {results['year, raw']:.1f} ms, "
                  f"{results['year, raw'] / results['year, roll-ups']:.0f}x)")
        finally:
            await pool.close()
    finally:
        await asyncio.to_thread(stop_embedded, folder / "pgdata")
        shutil.rmtree(folder, ignore_errors=True)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=20)
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
