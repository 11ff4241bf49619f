"""`GET /metrics` scrape time on a busy read model, beside the same scrape on an empty one and
the bare SQL it runs.

    python -m bench.bench_metrics [--waiting 10000] [--decided 30000] [--items 100000]

A private embedded PostgreSQL (temporary folder) is filled with `--waiting` runs each waiting
at a gate, `--decided` decided requests (the decision-latency histogram reads them all) and
one batch job of `--items` items; the API app is served in-process (ASGI, no network).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import httpx

from bench.common import latency_summary
from waystation.api.app import create_app
from waystation.api.metrics import DECISION_LATENCY_BOUNDS
from waystation.persistence.embedded import embedded_database_url, stop_embedded
from waystation.persistence.metrics import read_figures
from waystation.persistence.migrate import apply_migrations
from waystation.registry import load_registry
from waystation.settings import Settings

SCRAPES = 50

# Each statement takes ($1 waiting runs, $2 decided requests per run, $3 items, $4 job id).
FILL = [
    """INSERT INTO runs (id, kind, owner, workflow_id, status, hitl_state, last_seq)
       SELECT gen_random_uuid(), 'validation', 'user' || (g % 100), 'bench-' || g, 'running',
              'approve_founders_brief', 40
         FROM generate_series(1, $1::int) g""",
    """INSERT INTO hitl_requests (id, run_id, checkpoint_name, phase, title, description,
                                 digest, created_at)
       SELECT gen_random_uuid(), id, 'approve_founders_brief', 0, 't', 'd', md5(id::text),
              now() - random() * interval '7 days'
         FROM runs""",
    """INSERT INTO hitl_requests (id, run_id, checkpoint_name, phase, title, description,
                                 digest, status, decision, decision_at, created_at)
       SELECT gen_random_uuid(), r.id, 'earlier_' || g, 0, 't', 'd', md5(r.id::text || g),
              'approved', 'approve', now(), now() - random() * interval '3 days'
         FROM runs r, generate_series(1, $2::int) g""",
    """INSERT INTO runs (id, kind, owner, workflow_id, status)
       VALUES ($4::uuid, 'batch', 'bench', 'bench-job', 'running')""",
    """INSERT INTO jobs (id, run_id, name, status, spec, total_units, max_workers)
       VALUES ($4::uuid, $4::uuid, 'bench', 'running', '{}', $3::int, 8)""",
    """INSERT INTO work_units (job_id, ordinal, status, payload)
       SELECT $4::uuid, g, (ARRAY['pending', 'running', 'completed', 'failed'])[1 + g % 4],
              '{}'
         FROM generate_series(0, $3::int - 1) g""",
]


def dead_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


async def time_scrapes(http: httpx.AsyncClient) -> list[float]:
    times = []
    for _ in range(SCRAPES):
        began = time.perf_counter()
        response = await http.get("/metrics")
        times.append(time.perf_counter() - began)
        assert response.status_code == 200 and "waystation_read_model_up 1.0" in response.text
    return times


async def time_sql(url: str) -> list[float]:
    conn = await asyncpg.connect(url)
    try:
        times = []
        for _ in range(SCRAPES):
            began = time.perf_counter()
            await read_figures(conn, DECISION_LATENCY_BOUNDS)
            times.append(time.perf_counter() - began)
        return times
    finally:
        await conn.close()


async def measure(url: str, label: str) -> list[float]:
    app = create_app(Settings(database_url=url, temporal_address=dead_address()))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            await time_scrapes(http)  # warm up: connections, plans
            scrapes = await time_scrapes(http)
    sql = await time_sql(url)
    print(f"{label:<44} scrape {latency_summary(scrapes, 1)} | "
          f"its SQL alone {latency_summary(sql, 1)}", flush=True)
    return scrapes


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="ws-bench-metrics-"))
    try:
        url = await asyncio.to_thread(embedded_database_url, folder / "pgdata")
        conn = await asyncpg.connect(url)
        try:
            await apply_migrations(conn, folders=load_registry(
                use_entry_points=False).migration_folders())
            empty = await measure(url, "empty read model")
            began = time.perf_counter()
            per_run = -(-args.decided // args.waiting)
            values = {"$1": args.waiting, "$2": per_run, "$3": args.items, "$4": uuid.uuid4()}
            async with conn.transaction():
                for statement in FILL:
                    used = [key for key in values if key in statement]
                    renumbered = statement
                    for number, key in enumerate(used, start=1):
                        renumbered = renumbered.replace(key, f"${number}")
                    await conn.execute(renumbered, *(values[key] for key in used))
            await conn.execute("ANALYZE")
            counts = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM hitl_requests "
                "WHERE status = 'pending') AS pending, (SELECT count(*) FROM hitl_requests "
                "WHERE decision_at IS NOT NULL) AS decided, (SELECT count(*) FROM work_units) "
                "AS items")
            print(f"filled in {time.perf_counter() - began:.1f}s: {dict(counts)}", flush=True)
        finally:
            await conn.close()
        busy = await measure(url, f"{args.waiting:,} runs waiting at a gate")
        ratio = statistics.median(busy) / statistics.median(empty)
        print(f"scrape p50 busy / empty: {ratio:.2f}x")
    finally:
        await asyncio.to_thread(stop_embedded, folder / "pgdata")
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--decided", type=int, default=30_000)
    parser.add_argument("--items", type=int, default=100_000)
    asyncio.run(main(parser.parse_args()))
