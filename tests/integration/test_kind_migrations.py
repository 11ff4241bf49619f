"""A kind's own migrations (`DataHooks.migrations`) join the core's in one order on a real
database, also when the kind is installed after the core's later ones ran."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest_asyncio

from waystation.persistence.migrate import apply_migrations, migration_files
from waystation.registry import load_registry
from waystation.testing import with_database


@pytest_asyncio.fixture
async def fresh_url(database_url: str) -> AsyncIterator[str]:
    name = f"waystation_kinds_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(database_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(database_url, name)
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


async def test_a_kind_s_migrations_apply_once_after_the_core_s(fresh_url: str,
                                                               tmp_path: Path) -> None:
    builtin = load_registry(use_entry_points=False).migration_folders()
    core = [version for version, _, _ in migration_files()]
    conn = await asyncpg.connect(fresh_url)
    try:
        assert await apply_migrations(conn) == core
        # The built-in kinds' own, after every one of the core's.
        assert await apply_migrations(conn, folders=builtin) == [84, 85, 86]
        assert await apply_migrations(conn, folders=builtin) == []

        (tmp_path / "069_my_kind_rows.sql").write_text(
            "CREATE TABLE my_kind_rows (run_id uuid PRIMARY KEY REFERENCES runs (id));")
        assert await apply_migrations(conn, folders=[*builtin, tmp_path]) == [69]
        assert await conn.fetchval("SELECT to_regclass('my_kind_rows')::text") == \
            "my_kind_rows"
        assert await apply_migrations(conn, folders=[*builtin, tmp_path]) == []
    finally:
        await conn.close()

