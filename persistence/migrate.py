"""Forward-only SQL migrations, applied once each, in order, under an advisory lock.

Several workers and API processes may start at once on an empty database: the advisory lock
makes all but one wait, and the `schema_migrations` table makes the rest no-ops.

The core's migrations are `persistence/migrations/NNN_name.sql`; a run kind may bring a folder
of its own (`DataHooks.migrations`, passed in as `folders`). All of them are applied in one
global order of their numbers, and a number is taken once across every folder, so a kind's
migration may depend on the core's before it (and the core's later ones on nothing of a
kind's).

The kinds' tables were the core's migrations' until issue 40:
`waystation.persistence.before_the_move` recognises a database those files reached (see there).

Each applied migration's checksum is stored beside it. A migration file edited after it was
applied would never run again, so the databases it already reached and the new ones would
silently differ: every start compares the checksums and refuses to go on instead.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from importlib import resources
from typing import Any

import asyncpg

from waystation.persistence.before_the_move import (
    BEFORE_THE_MOVE,
    applied_before_the_move,
    stands_for,
)

log = logging.getLogger(__name__)

# Any constant works; it only has to be the same in every process of one installation.
MIGRATION_LOCK_ID = 0x5741_5953  # "WAYS"


class MigrationEdited(RuntimeError):
    """An applied migration's file no longer matches what was applied."""


def checksum(sql: str) -> str:
    """sha256 of the file's text; line endings do not count (a checkout may convert them)."""
    return hashlib.sha256(sql.replace("\r\n", "\n").encode()).hexdigest()


def migration_files(folders: Iterable[Any] = ()) -> list[tuple[int, str, str]]:
    """(version, name, sql) of every bundled migration and those of `folders` (`Path`s or
    `importlib.resources` Traversables: the kinds' own), in version order; a version found in
    two files is refused."""
    found: dict[int, tuple[str, str, str]] = {}
    core = resources.files("waystation.persistence") / "migrations"
    for folder in [core, *folders]:
        for entry in folder.iterdir():
            if not entry.name.endswith(".sql"):
                continue
            version, _, rest = entry.name.partition("_")
            if int(version) in BEFORE_THE_MOVE and (
                    folder is not core or BEFORE_THE_MOVE[int(version)][0] + ".sql" != rest):
                raise ValueError(f"migration number {int(version):03d} ({entry}) was taken "
                                 "before the kinds owned their tables: use another")
            if int(version) in found:
                raise ValueError(f"migration number {int(version):03d} is taken twice: "
                                 f"{found[int(version)][2]} and {entry}")
            found[int(version)] = (rest.removesuffix(".sql"), entry.read_text(), str(entry))
    return [(version, name, sql) for version, (name, sql, _) in sorted(found.items())]


async def apply_migrations(conn: asyncpg.Connection, *, up_to: int | None = None,
                           folders: Iterable[Any] = ()) -> list[int]:
    """Apply pending migrations, the core's and those of `folders` (the registered kinds':
    `Registry.migration_folders()`), in one order (those up to version `up_to` only, when
    given: a test builds a database as an older release left it); returns the versions
    applied now (not those recorded as applied because the old core files made their tables:
    `BEFORE_THE_MOVE`)."""
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_ID)
    try:
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version int PRIMARY KEY,
                   name text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        await conn.execute("ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum text")
        files = migration_files(folders)
        done = await _check_applied(conn, files)
        pending = [(version, name, sql) for version, name, sql in files
                   if version not in done and (up_to is None or version <= up_to)]
        # Refused before anything runs: a database too old for the move stays as it was.
        old_files = {version for version, applied in done.items()
                     if applied_before_the_move(version, applied)}
        made = {version: stands_for(version, name, sql, old_files)
                for version, name, sql in pending}
        applied = []
        for version, name, sql in pending:
            present = made[version]
            async with conn.transaction():
                if not present:
                    await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    version, name, checksum(sql))
            if present:
                log.info("migration %03d_%s: its tables were made by the core's migrations "
                         "%s before the kinds owned them; recorded as applied", version, name,
                         ", ".join(f"{v:03d}" for v in sorted(present)))
            else:
                log.info("applied migration %03d_%s", version, name)
                applied.append(version)
        return applied
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_ID)


async def _check_applied(conn: asyncpg.Connection,
                         files: list[tuple[int, str, str]]) -> dict[int, str]:
    """The versions already applied and their checksums, after checking each against its
    file; rows from before checksums were kept take the current file's. A core file of before
    the kinds owned their tables (`BEFORE_THE_MOVE`) applied then keeps its checksum of then."""
    by_version = {version: (name, sql) for version, name, sql in files}
    rows = await conn.fetch("SELECT version, name, checksum FROM schema_migrations")
    applied = {row["version"]: row["checksum"] for row in rows}
    edited = []
    for row in rows:
        if applied_before_the_move(row["version"], row["checksum"]):
            continue
        if row["version"] not in by_version:
            log.warning("migration %03d_%s is applied but not in this release",
                        row["version"], row["name"])
            continue
        name, sql = by_version[row["version"]]
        expected = checksum(sql)
        if row["checksum"] is None:
            await conn.execute("UPDATE schema_migrations SET checksum = $2 WHERE version = $1",
                               row["version"], expected)
            applied[row["version"]] = expected
        elif row["checksum"] != expected:
            edited.append(f"{row['version']:03d}_{name}.sql (applied {row['checksum'][:12]}, "
                          f"file now {expected[:12]})")
    if edited:
        raise MigrationEdited(
            "applied migrations were edited since: " + "; ".join(edited) + ". Restore them "
            "as they were and put the change in a new migration.")
    return applied
