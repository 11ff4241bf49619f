"""Migrations raced on an empty database: three workers and two APIs started at once (each
migrates before it serves), five `waystation migrate` processes released at the same instant,
and five connections in one process.
Each migration is recorded once, every process exits 0, and the schema is exactly the one a
single sequential migration builds."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import pytest_asyncio

from waystation.persistence.migrate import MIGRATION_LOCK_ID, apply_migrations, migration_files
from waystation.registry import load_registry
from waystation.testing import eventually, free_port, with_database

ROOT = Path(__file__).resolve().parents[2]
# The core's migrations and the built-in kinds' own, as `waystation migrate` applies them.
FOLDERS = load_registry().migration_folders()
PROCESSES = 5
SCHEMA_QUERIES = {
    "columns": """SELECT table_name, column_name, data_type, is_nullable, column_default
                    FROM information_schema.columns WHERE table_schema = 'public'
                   ORDER BY 1, 2""",
    "functions": """SELECT proname, pg_get_function_identity_arguments(oid), prosrc
                      FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1, 2""",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
               "ORDER BY 1",
    "constraints": """SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
                        FROM pg_constraint WHERE connamespace = 'public'::regnamespace
                       ORDER BY 1, 2""",
    "triggers": """SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid)
                     FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2""",
}


@pytest_asyncio.fixture
async def empty_database(database_url: str) -> AsyncIterator[str]:
    """A new, empty database on the test server; dropped afterwards."""
    name = f"waystation_race_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(database_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield with_database(database_url, name)
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def schema_of(url: str) -> dict[str, list[tuple]]:
    conn = await asyncpg.connect(url)
    try:
        return {what: [tuple(r.values()) for r in await conn.fetch(query)]
                for what, query in SCHEMA_QUERIES.items()}
    finally:
        await conn.close()


async def assert_migrated_once(url: str, reference_url: str) -> None:
    expected = [(version, name) for version, name, _ in migration_files(FOLDERS)]
    conn = await asyncpg.connect(url)
    try:
        recorded = [tuple(r.values()) for r in await conn.fetch(
            "SELECT version, name FROM schema_migrations ORDER BY version")]
        assert recorded == expected
        tables = {r["tablename"] for r in await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        assert {"runs", "run_events", "run_snapshots", "hitl_requests",
                "schema_migrations"} <= tables
        assert await conn.fetchval(
            "SELECT count(*) FROM pg_proc WHERE proname = 'append_run_events'") == 1
        # Usable, not just present: a run and an event through the function.
        run_id = uuid.uuid4()
        await conn.execute("INSERT INTO runs (id, kind, owner, workflow_id, input) "
                           "VALUES ($1, 'validation', 'x', $2, '{}')", run_id, f"w-{run_id}")
        rows = await conn.fetch("SELECT * FROM append_run_events($1, $2::jsonb)", run_id,
                                '[{"event_key": "k", "type": "t"}]')
        assert [tuple(r.values()) for r in rows] == [("k", 1)]
    finally:
        await conn.close()
    assert await schema_of(url) == await schema_of(reference_url)



async def all_queued(gate: asyncpg.Connection, procs: list[asyncio.subprocess.Process]) -> bool:
    """Every process waits on the migration lock that `gate` holds."""
    assert all(p.returncode is None for p in procs), "a process ended before the race"
    waiting = await gate.fetchval(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND objid = $1", MIGRATION_LOCK_ID)
    return bool(waiting >= len(procs))


# Five processes importing Waystation and migrating a whole database: the slow tier.
@pytest.mark.slow
async def test_five_migrate_processes_released_at_once(empty_database, migrated_url,
                                                       tmp_path):
    # Hold the migration lock, start every process, wait until all of them queue on the
    # lock, then let go: they contend at the same instant.
    gate = await asyncpg.connect(empty_database)
    await gate.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_ID)
    env = {**os.environ, "DATABASE_URL": empty_database, "WAYSTATION_OTEL_EXPORTER": "none",
           "WAYSTATION_DATA_DIR": str(tmp_path / "data")}
    procs = [await asyncio.create_subprocess_exec(
        sys.executable, "-m", "waystation", "migrate", cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        for _ in range(PROCESSES)]
    try:
        await eventually(lambda: all_queued(gate, procs), timeout=60, interval=0.05)
        await gate.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_ID)
        outputs = []
        for proc in procs:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
            outputs.append((proc.returncode, out.decode(errors="replace")))
    finally:
        await gate.close()
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert [rc for rc, _ in outputs] == [0] * PROCESSES, outputs
    versions = [v for v, _, _ in migration_files(FOLDERS)]
    applied = [out for _, out in outputs if "applied migrations" in out]
    assert len(applied) == 1 and f"applied migrations: {versions}" in applied[0], outputs
    assert sum("database is up to date" in out for _, out in outputs) == PROCESSES - 1
    await assert_migrated_once(empty_database, migrated_url)


async def test_five_connections_race_in_one_process(empty_database, migrated_url):
    conns = [await asyncpg.connect(empty_database) for _ in range(PROCESSES)]
    try:
        results = await asyncio.gather(*(apply_migrations(c, folders=FOLDERS) for c in conns))
    finally:
        await asyncio.gather(*(c.close() for c in conns))
    versions = [v for v, _, _ in migration_files(FOLDERS)]
    assert sorted(results, key=len) == [[]] * (PROCESSES - 1) + [versions]
    await assert_migrated_once(empty_database, migrated_url)


@pytest.mark.slow
async def test_three_workers_and_two_apis_started_at_once_on_an_empty_database(
        empty_database, migrated_url, dev_env, tmp_path):
    """The real processes, each migrating before it serves: one applies the migrations, the
    others wait on the lock and find the database up to date; all of them then serve."""
    gate = await asyncpg.connect(empty_database)
    await gate.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_ID)
    base = {**os.environ, "DATABASE_URL": empty_database, "WAYSTATION_OTEL_EXPORTER": "none",
            "WAYSTATION_DATA_DIR": str(tmp_path / "data"),
            "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
            "TEMPORAL_TASK_QUEUE": f"race-{uuid.uuid4().hex[:6]}"}
    api_ports = [free_port(), free_port()]
    commands = [("worker", {})] * 3 + [("api", {"WAYSTATION_API_PORT": str(port)})
                                       for port in api_ports]
    procs = [await asyncio.create_subprocess_exec(
        sys.executable, "-m", "waystation", command, cwd=ROOT, env={**base, **extra},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        for command, extra in commands]
    try:
        await eventually(lambda: all_queued(gate, procs), timeout=60, interval=0.05)
        await gate.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_ID)
        async with httpx.AsyncClient(timeout=2) as http:
            for port in api_ports:
                async def healthy(port: int = port) -> bool:
                    assert all(p.returncode is None for p in procs), "a process died"
                    with contextlib.suppress(httpx.HTTPError):
                        response = await http.get(f"http://127.0.0.1:{port}/healthz")
                        return response.status_code == 200
                    return False
                await eventually(healthy, timeout=60, interval=0.2)
        # Every process keeps serving for a while after the race: a window of time is what
        # the assertion below is about, so it is fixed.
        await asyncio.sleep(1.0)
        assert all(p.returncode is None for p in procs), "every worker and API still serves"
    finally:
        await gate.close()
        logs = []
        for proc in procs:
            if proc.returncode is None:
                proc.terminate()
            _, err = await asyncio.wait_for(proc.communicate(), timeout=30)
            logs.append(err.decode(errors="replace"))
    versions = [v for v, _, _ in migration_files(FOLDERS)]
    assert sum(f"applied migrations: {versions}" in log for log in logs) == 1, logs
    await assert_migrated_once(empty_database, migrated_url)
