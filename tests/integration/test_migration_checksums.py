"""Applied migrations carry checksums; one edited after it was applied stops every process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from waystation.persistence.migrate import apply_migrations, checksum, migration_files
from waystation.testing import with_database

ROOT = Path(__file__).resolve().parents[2]


@pytest_asyncio.fixture
async def fresh_url(database_url: str) -> AsyncIterator[str]:
    name = f"waystation_sums_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(database_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(database_url, name)
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


async def _sums(conn: asyncpg.Connection) -> dict[int, str | None]:
    rows = await conn.fetch("SELECT version, checksum FROM schema_migrations")
    return {r["version"]: r["checksum"] for r in rows}


# Two whole databases migrated and edited (8 s): the slow tier.
@pytest.mark.slow
async def test_checksums_recorded_backfilled_and_edits_refused(fresh_url: str):
    files = {version: checksum(sql) for version, _, sql in migration_files()}
    conn = await asyncpg.connect(fresh_url)
    try:
        await apply_migrations(conn)
        assert await _sums(conn) == files

        # A database migrated before checksums were kept takes the files' sums once.
        await conn.execute("UPDATE schema_migrations SET checksum = NULL")
        assert await apply_migrations(conn) == []
        assert await _sums(conn) == files

        # What was applied differs from the file now: as if 003 had been edited since.
        await conn.execute("UPDATE schema_migrations SET checksum = $1 WHERE version = 3",
                           checksum("-- the version that was applied\n"))
    finally:
        await conn.close()

    env = {**os.environ, "DATABASE_URL": fresh_url, "WAYSTATION_OTEL_EXPORTER": "none"}
    for command in ("migrate", "worker"):
        done = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "waystation", command], cwd=ROOT, env=env,
            capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert (f"waystation {command}: refusing to start: applied migrations were edited "
                "since: 003_notify_gate_changes.sql") in done.stderr
        assert "Traceback" not in done.stderr
