"""Forward-only SQL migrations, applied once each, in order, under an advisory lock.

Several workers and API processes may start at once on an empty database: the advisory lock
makes all but one wait, and the `schema_migrations` table makes the rest no-ops.

The core's migrations are `persistence/migrations/NNN_name.sql`; a run kind may bring a folder
of its own (`RunKind.migrations`, passed in as `folders`). All of them are applied in one
global order of their numbers, and a number is taken once across every folder, so a kind's
migration may depend on the core's before it (and the core's later ones on nothing of a
kind's).

The kinds' tables were the core's migrations' until issue 40. Those files (`BEFORE_THE_MOVE`:
their numbers and the checksums the databases they reached hold) were then taken out of the
core, or edited down to the core's part, and each kind got one migration creating its tables
as they stood, whose first line names the old files it stands for (`-- replaces: 004 052`).
A database where every one of those files was applied already has that kind's tables: its
migration is recorded as applied there without running, and the old files' rows and
checksums stay as they are and are accepted. Recorded this way rather than with a core
migration that adopts the kinds' tables, because the core no longer knows the kinds' tables,
and a kind not installed must leave none behind on a new database; only a number and a
checksum per old file stay in the core, so nothing of a kind's schema does. A database that
had only some of those files (a release before the one the move followed) is refused: it
migrates with that release first.

Each applied migration's checksum is stored beside it. A migration file edited after it was
applied would never run again, so the databases it already reached and the new ones would
silently differ: every start compares the checksums and refuses to go on instead.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable
from importlib import resources
from typing import Any

import asyncpg

log = logging.getLogger(__name__)

# Any constant works; it only has to be the same in every process of one installation.
MIGRATION_LOCK_ID = 0x5741_5953  # "WAYS"


# The core's migration files that created or changed a kind's tables before the kinds owned
# them (issue 40), by number: their names and the checksums the databases they reached hold.
# 005, 010, 022, 027 and 028 were edited down to the core's part; the others left the core.
# A number here is taken for good: only the core's edited file of that name may use it.
BEFORE_THE_MOVE: dict[int, tuple[str, str]] = {
    4: ("batch_jobs", "ccb50331110b21b196d2c5e39a24d8c3608ad9df79ea6b4a9a0bf46f51666a0d"),
    5: ("screen_graph", "828a4572e943c1ab16e8563c585cd1043c652a41e47dda41d5d5caf663e8e8c5"),
    10: ("agents_costs", "e39d2fe8d1012495a585a646db51ed516aa4fedc8dba88de2f169e424ff82237"),
    22: ("row_level_security",
         "b7a7b1cff62c0f5060a0fef548057383651552152292b7b7eccfa18d072abc8e"),
    27: ("mobile_step_function",
         "08be6668a52150819cf24ffd5acf867319d09f4b97ee51a8a02ba649455ab116"),
    28: ("progress_write_function",
         "83a68c750787e2b01ebc396fa256627feff65e2489c2ec1d9a008032acec06e1"),
    30: ("screen_hash_after_the_step",
         "6456cfc04b2a831c1ee62e55025d02bff8e3114639f63627fcf92967e3bdd17b"),
    50: ("mobile_app_package", "c291fa9e747888bb36bc4ece656ae3f4c14ab3eddf6160872bc166c4d091f504"),
    52: ("output_flags", "30eb493cc61631c3f0206b025a5b745631328ea25dcbb4c7b1959f4871b49775"),
    61: ("work_unit_workers", "477d78e68bb67f6fb0dae8cc6b3be211491b94cdfc3d8c94c4c36bbe838c9709"),
    62: ("job_description_metadata",
         "59c453501753c6142e9b6901e20fc0e165087c4d3769bcb26dbc73ac78bb73a0"),
    63: ("worker_unit_totals", "a225fe319bf617aebf7ff65f244285c6e05e321c6fed9786b88f54a7d97fc67e"),
}
# A kind's migration that stands for old core files: its first line names them.
REPLACES = re.compile(r"\A-- replaces:((?: \d{3})+)\n")


class MigrationEdited(RuntimeError):
    """An applied migration's file no longer matches what was applied."""


class MigrationsTooOld(RuntimeError):
    """The database had only some of the core files a kind's migration stands for."""


def checksum(sql: str) -> str:
    """sha256 of the file's text; line endings do not count (a checkout may convert them)."""
    return hashlib.sha256(sql.replace("\r\n", "\n").encode()).hexdigest()


def migration_files(folders: Iterable[Any] = ()) -> list[tuple[int, str, str]]:
    """(version, name, sql) of every bundled migration and those of `folders` (`Path`s or
    `importlib.resources` Traversables: the kinds' own), in version order; a version found in
    two files is refused."""
    found: dict[int, tuple[str, str, str]] = {}
    core = resources.files("persistence") / "migrations"
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
                     if BEFORE_THE_MOVE.get(version, ("", ""))[1] == applied}
        made = {version: _already_present(version, name, sql, old_files)
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


def _already_present(version: int, name: str, sql: str, done: set[int]) -> set[int]:
    """The old core files (`BEFORE_THE_MOVE`) that `sql`, a kind's migration, stands for, when
    the database had every one of them (`done`: those applied as they were then; empty: the
    migration is to run); refused when it had only some."""
    found = REPLACES.match(sql)
    if found is None:
        return set()
    replaced = {int(v) for v in found.group(1).split()}
    if unknown := replaced - BEFORE_THE_MOVE.keys():
        raise ValueError(f"migration {version:03d}_{name} replaces {sorted(unknown)}, which "
                         "are no core migrations of before the kinds owned their tables")
    if replaced <= done or not replaced & done:
        return replaced & done
    raise MigrationsTooOld(
        f"migration {version:03d}_{name} stands for the core's migrations "
        f"{', '.join(f'{v:03d}' for v in sorted(replaced))}, and this database had only "
        f"{', '.join(f'{v:03d}' for v in sorted(replaced & done))}: migrate it with the "
        "release before the kinds owned their tables first (Waystation 724ef56)")


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
        if row["checksum"] is not None and \
                BEFORE_THE_MOVE.get(row["version"], ("", ""))[1] == row["checksum"]:
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
