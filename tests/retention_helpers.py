"""Runs with a row in every table that belongs to a run, for the retention and erasure tests."""

from __future__ import annotations

import uuid
from datetime import timedelta

import asyncpg
from temporalio.client import Client

from waystation.activities.artifacts import LocalArtifactStore

# Every table whose rows belong to one run (directly by run_id, or through jobs / work units).
RUN_TABLES = {
    "run_events": "SELECT count(*) FROM run_events WHERE run_id = $1",
    "run_snapshots": "SELECT count(*) FROM run_snapshots WHERE run_id = $1",
    "hitl_requests": "SELECT count(*) FROM hitl_requests WHERE run_id = $1",
    "jobs": "SELECT count(*) FROM jobs WHERE run_id = $1",
    "work_units": "SELECT count(*) FROM work_units u JOIN jobs j ON j.id = u.job_id "
                  "WHERE j.run_id = $1",
    "item_outputs": "SELECT count(*) FROM item_outputs o JOIN work_units u ON u.id = o.unit_id "
                    "JOIN jobs j ON j.id = u.job_id WHERE j.run_id = $1",
    "graph_persistence_outcomes": "SELECT count(*) FROM graph_persistence_outcomes "
                                  "WHERE run_id = $1",
    "run_artifacts": "SELECT count(*) FROM run_artifacts WHERE run_id = $1",
    "webhook_deliveries": "SELECT count(*) FROM webhook_deliveries WHERE run_id = $1",
    "webhook_attempts": "SELECT count(*) FROM webhook_attempts a JOIN webhook_deliveries d "
                        "ON d.id = a.delivery_id WHERE d.run_id = $1",
    "decision_links": "SELECT count(*) FROM decision_links l JOIN hitl_requests h "
                      "ON h.id = l.request_id WHERE h.run_id = $1",
    "runs": "SELECT count(*) FROM runs WHERE id = $1",
}


async def seed_run(pool: asyncpg.Pool, store: LocalArtifactStore, *, owner: str,
                   finished_ago: timedelta | None, events: int = 3) -> tuple[uuid.UUID, str]:
    """A run (finished `finished_ago`, or still running) with rows in every RUN_TABLES table
    and one artifact of its own; returns (run id, artifact sha)."""
    run_id = uuid.uuid4()
    sha = store.put(f"screenshot of {run_id}".encode())
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "INSERT INTO runs (id, kind, owner, workflow_id, status, completed_at) "
            "VALUES ($1, 'batch', $2, $3, $4, now() - $5::interval)",
            run_id, owner, f"batch-{run_id}",
            "running" if finished_ago is None else "completed", finished_ago)
        await conn.execute(
            "INSERT INTO run_events (run_id, seq, event_key, type) "
            "SELECT $1, n, 'e' || n, 'test.event' FROM generate_series(1, $2::int) n",
            run_id, events)
        await conn.execute("INSERT INTO run_snapshots (run_id, step_ordinal, label, state) "
                           "VALUES ($1, 1, 'start', '{}')", run_id)
        gate = uuid.uuid4()
        await conn.execute(
            "INSERT INTO hitl_requests (id, run_id, checkpoint_name, phase, title, "
            "description, digest) VALUES ($1, $2, 'gate', 0, 't', 'd', 'x')", gate, run_id)
        await conn.execute(
            "INSERT INTO decision_links (id, request_id, user_name, email, expires_at) "
            "VALUES ($1, $2, $3, 'someone@example.com', now() + interval '1 day')",
            uuid.uuid4(), gate, owner)
        hook, delivery = uuid.uuid4(), uuid.uuid4()
        await conn.execute("INSERT INTO webhooks (id, owner, url, secret, events) "
                           "VALUES ($1, $2, 'https://example.com/hook', 's', '{}')", hook, owner)
        await conn.execute(
            "INSERT INTO webhook_deliveries (id, webhook_id, run_id, event_key, event_type, "
            "payload) VALUES ($1, $2, $3, 'k', 'run.completed', '{}')", delivery, hook, run_id)
        await conn.execute("INSERT INTO webhook_attempts (delivery_id, attempt, duration_ms) "
                           "VALUES ($1, 1, 5)", delivery)
        await conn.execute("INSERT INTO jobs (id, run_id, name, spec, max_workers) "
                           "VALUES ($1, $1, 'job', '{}', 1)", run_id)
        unit = await conn.fetchval("INSERT INTO work_units (job_id, ordinal, payload) "
                                   "VALUES ($1, 0, '{}') RETURNING id", run_id)
        await conn.execute("INSERT INTO item_outputs (unit_id, step, step_index, output, "
                           "rendered_prompt) VALUES ($1, 's', 0, '{}', 'p')", unit)
        await conn.execute("INSERT INTO graph_persistence_outcomes (run_id, step, app_package) "
                           "VALUES ($1, 1, 'com.example')", run_id)
        await conn.execute("INSERT INTO run_artifacts (run_id, step, kind, sha256, "
                           "content_type, size_bytes) VALUES ($1, 1, 'screenshot', $2, "
                           "'image/png', 10)", run_id, sha)
    return run_id, sha


async def rows_of(pool: asyncpg.Pool, run_id: uuid.UUID) -> dict[str, int]:
    async with pool.acquire() as conn:
        return {table: await conn.fetchval(query, run_id) for table, query in RUN_TABLES.items()}


async def start_execution(client: Client, run_id: uuid.UUID) -> None:
    """A Temporal execution under the run's workflow id (no worker ever takes it)."""
    await client.start_workflow("BatchJob", id=f"batch-{run_id}",
                                task_queue=f"nobody-{uuid.uuid4()}")
