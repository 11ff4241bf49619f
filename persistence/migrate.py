"""Forward-only SQL migrations, applied once each, in order, under an advisory lock.

Several workers and API processes may start at once on an empty database: the advisory lock
makes all but one wait, and the `schema_migrations` table makes the rest no-ops.
"""

from __future__ import annotations

import logging
from importlib import resources

import asyncpg

log = logging.getLogger(__name__)

# Any constant works; it only has to be the same in every process of one installation.
MIGRATION_LOCK_ID = 0x5741_5953  # "WAYS"


def migration_files() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every bundled migration, in version order."""
    folder = resources.files("persistence") / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version, _, rest = entry.name.partition("_")
            found.append((int(version), rest.removesuffix(".sql"), entry.read_text()))
    return sorted(found)


async def apply_migrations(conn: asyncpg.Connection) -> list[int]:
    """Apply pending migrations; returns the versions applied now (empty when up to date)."""
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_ID)
    try:
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version int PRIMARY KEY,
                   name text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        applied = []
        for version, name, sql in migration_files():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
            log.info("applied migration %03d_%s", version, name)
            applied.append(version)
        return applied
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_ID)
