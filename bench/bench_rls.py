"""What row-level security costs the API's hot reads (migration 022).

    python -m bench.bench_rls [--users 1000] [--runs 10000] [--events 2000] [--calls 300]

A private embedded PostgreSQL holds `--runs` runs of `--users` users, each run with a pending
request and ten events; the reader owns 1% of the runs, is a member of 20 groups with a run
each, and one of its runs has `--events` events. Each hot read is the repository call the API
makes:

- GET /runs/{id}: `get_run`;
- an events page (GET /runs/{id}/events?after_seq=N): 100 events from the middle;
- the inbox (GET /decisions): 100 pending requests, newest first;
- SSE catch-up: 500 events from the start, the stream's first read.

Two legs, alternated call by call on two pools of one connection each:

- **RLS on**: the API's way, role `waystation_api`; every call borrows the connection, sets
  the reader's claims (one round trip) and runs the query under the policies;
- **bypassed** (baseline): the superuser the embedded server connects as, which row-level
  security never applies to; every call borrows the connection and runs the same query.

Also printed: the RLS leg without the claims round trip (the query alone, claims already set),
which shows what the policies themselves cost; and `GET /runs/{id}` through the API (ASGI, no
network; two queries and the claims) beside the claims round trip alone, the fixed cost RLS
adds to every request.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench.bench_metrics import dead_address
from bench.common import latency_summary
from waystation.api.app import create_app
from waystation.api.auth import issue_token
from waystation.persistence import events as events_repo
from waystation.persistence import gates as gates_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence.claims import API_ROLE, Claims, set_claims
from waystation.persistence.db import create_pool
from waystation.persistence.embedded import embedded_database_url, stop_embedded
from waystation.persistence.migrate import apply_migrations
from waystation.registry import load_registry
from waystation.settings import Settings

READER = "reader"
GROUPS = 20
GOAL = 1.10  # RLS on / bypassed, p50

# ($1 users, $2 runs, $3 events of the reader's big run). Runs are spread over the users;
# the reader owns every hundredth run; 20 groups each hold one run of someone else's.
FILL = [
    """INSERT INTO runs (id, kind, owner, workflow_id, status, hitl_state, created_at)
       SELECT gen_random_uuid(), 'validation',
              CASE WHEN g % 100 = 0 THEN 'reader' ELSE 'user' || (g % $1::int) END,
              'run-' || g, 'paused', 'approve_founders_brief',
              now() - g * interval '1 second'
         FROM generate_series(1, $2::int) g""",
    """INSERT INTO groups (id, name, created_by)
       SELECT gen_random_uuid(), 'group ' || g, 'someone' FROM generate_series(1, 20) g""",
    """INSERT INTO group_members (group_id, user_name, role, added_by)
       SELECT id, u, r, 'someone' FROM groups,
              (VALUES ('reader', 'approver'), ('someone', 'owner')) AS m (u, r)""",
    """INSERT INTO runs (id, kind, owner, group_id, workflow_id, status, hitl_state)
       SELECT gen_random_uuid(), 'validation', 'someone', id, 'group-run-' || id, 'paused',
              'approve_founders_brief' FROM groups""",
    """INSERT INTO hitl_requests (id, run_id, checkpoint_name, phase, title, description,
                                 digest, created_at)
       SELECT gen_random_uuid(), id, 'approve_founders_brief', 0, 't', 'd', md5(id::text),
              created_at FROM runs""",
    """INSERT INTO run_events (run_id, seq, event_key, type, output)
       SELECT r.id, s, 'e' || s, 'task.progress', '{"note": "working"}'::jsonb
         FROM runs r, generate_series(1, 10) s""",
    """UPDATE runs SET last_seq = 10""",
]


async def fill(url: str, args: argparse.Namespace) -> uuid.UUID:
    """Fills the database; returns the reader's big run."""
    conn = await asyncpg.connect(url)
    try:
        await apply_migrations(conn, folders=load_registry(
            use_entry_points=False).migration_folders())
        async with conn.transaction():
            for statement in FILL:
                used = [n for n in (1, 2) if f"${n}::int" in statement]
                values = {1: args.users, 2: args.runs}
                await conn.execute(statement, *(values[n] for n in used))
            big = await conn.fetchval("SELECT id FROM runs WHERE owner = $1 LIMIT 1", READER)
            await conn.execute(
                """INSERT INTO run_events (run_id, seq, event_key, type, output)
                   SELECT $1, s, 'e' || s, 'task.progress', '{"note": "working"}'::jsonb
                     FROM generate_series(11, $2::int) s""", big, args.events)
            await conn.execute("UPDATE runs SET last_seq = $2 WHERE id = $1", big, args.events)
        await conn.execute("ANALYZE")
        return big
    finally:
        await conn.close()


Read = Callable[[asyncpg.Connection], Awaitable[Any]]


def hot_reads(big: uuid.UUID, middle: int) -> dict[str, Read]:
    return {
        "GET run": lambda c: runs_repo.get_run(c, big),
        "events page (100)": lambda c: events_repo.list_events(c, big, after_seq=middle,
                                                               limit=100),
        "inbox (100 pending)": lambda c: gates_repo.list_inbox(c, owner=READER,
                                                               status="pending", limit=100),
        "SSE catch-up (500)": lambda c: events_repo.list_events(c, big, after_seq=0, limit=500),
    }


async def timed_pair(read: Read, api: asyncpg.Pool, bypass: asyncpg.Pool, claims: Claims,
                     calls: int) -> tuple[list[float], list[float]]:
    """(RLS on, bypassed): each call borrows its pool's connection, as a request does."""
    on: list[float] = []
    off: list[float] = []
    for i in range(calls + 10):  # the first ten warm plans and caches
        began = time.perf_counter()
        async with api.acquire() as conn:
            await set_claims(conn, claims)
            await read(conn)
        middle = time.perf_counter()
        async with bypass.acquire() as conn:
            await read(conn)
        ended = time.perf_counter()
        if i >= 10:
            on.append(middle - began)
            off.append(ended - middle)
    return on, off


async def timed_query_only(read: Read, api: asyncpg.Pool, claims: Claims,
                           calls: int) -> list[float]:
    times = []
    async with api.acquire() as conn:
        await set_claims(conn, claims)
        for i in range(calls + 10):
            began = time.perf_counter()
            await read(conn)
            if i >= 10:
                times.append(time.perf_counter() - began)
    return times


async def timed_api_get_run(url: str, run_id: uuid.UUID, calls: int) -> list[float]:
    settings = Settings(database_url=url, temporal_address=dead_address())
    app = create_app(settings)
    headers = {"Authorization": f"Bearer {issue_token(settings.jwt_secret, READER)}"}
    times = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            for i in range(calls + 10):
                began = time.perf_counter()
                response = await http.get(f"/runs/{run_id}", headers=headers)
                if i >= 10:
                    times.append(time.perf_counter() - began)
                assert response.status_code == 200, response.text
    return times


async def check_same_answers(reads: dict[str, Read], api: asyncpg.Pool, bypass: asyncpg.Pool,
                             claims: Claims) -> None:
    """Both legs must answer the same: the policies hide nothing the reader may see."""
    for name, read in reads.items():
        async with api.acquire() as conn:
            await set_claims(conn, claims)
            with_rls = await read(conn)
        async with bypass.acquire() as conn:
            without = await read(conn)
        assert with_rls == without, name


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="ws-bench-rls-"))
    try:
        url = await asyncio.to_thread(embedded_database_url, folder / "pgdata")
        big = await fill(url, args)
        print(f"filled: {args.runs + GROUPS} runs, {args.users} users, one pending request "
              f"each, the reader's run with {args.events} events", flush=True)
        claims = Claims(user=READER)
        reads = hot_reads(big, args.events // 2)
        api = await create_pool(url, min_size=1, max_size=1, role=API_ROLE)
        bypass = await create_pool(url, min_size=1, max_size=1)
        try:
            await check_same_answers(reads, api, bypass, claims)
            worst = 0.0
            for name, read in reads.items():
                on, off = await timed_pair(read, api, bypass, claims, args.calls)
                alone = await timed_query_only(read, api, claims, args.calls)
                ratio = statistics.median(on) / statistics.median(off)
                worst = max(worst, ratio)
                print(f"{name:<20} RLS on {latency_summary(on, 3)} | "
                      f"bypassed {latency_summary(off, 3)} | ratio p50 {ratio:.2f}x | "
                      f"query alone with RLS {latency_summary(alone, 3)}",
                      flush=True)
            print(f"worst ratio {worst:.2f}x (goal {GOAL:.2f}x): "
                  f"{'met' if worst <= GOAL else 'NOT met'}")
            claims_alone = await timed_query_only(lambda c: set_claims(c, claims), api, claims,
                                                  args.calls)
        finally:
            await api.close()
            await bypass.close()
        http = await timed_api_get_run(url, big, args.calls)
        share = statistics.median(claims_alone) / statistics.median(http)
        print(f"GET /runs/{{id}} through the API (ASGI) {latency_summary(http, 3)} | "
              f"the claims round trip alone {latency_summary(claims_alone, 3)} | "
              f"{share:.1%} of the request, p50")
    finally:
        await asyncio.to_thread(stop_embedded, folder / "pgdata")
        shutil.rmtree(folder, ignore_errors=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=300)
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
