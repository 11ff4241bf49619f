"""Each kind owns its tables (issue 40), on the real PostgreSQL: a database migrated by the
release before (its core migrations created the kinds' tables, `runs.app_package` a column of
`runs`) upgrades in place with every row, to the schema a new database gets; a new database
gets a kind's tables only from that kind's own migrations; a database with only some of the
old files is refused. The agent kind's columns of `runs` (`context_summary`,
`related_entity_ids`) move likewise from a database at the schema before (086) to its own
`agent_runs`, which the core's progress write fills through the kind's own SQL."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from waystation.persistence.before_the_move import BEFORE_THE_MOVE, MigrationsTooOld
from waystation.persistence.db import create_pool
from waystation.persistence.erasure import erase_due_users, request_erasure
from waystation.persistence.metrics import read_figures
from waystation.persistence.migrate import apply_migrations, checksum, migration_files
from waystation.persistence.retention import delete_runs
from waystation.persistence.schema_dump import dump_database
from waystation.persistence.writes import EventWrite, ReadModelWrite, RunStateWrite, apply_write
from waystation.registry import load_registry
from waystation.testing import create_database

# Today's main's (724ef56) files that the move took out of the core or edited down, verbatim:
# with the core's files that did not change, the migrations of the release before.
BEFORE = Path(__file__).resolve().parents[1] / "migrations_before_kinds_owned_tables"
LAST_BEFORE = 83

# Every table a kind owns now, by kind: none of them is made by the core's migrations.
KIND_TABLES = {
    "batch": {"jobs", "work_units", "item_outputs"},
    "mobile_agent": {"apps", "screens", "actions", "edges", "graph_persistence_outcomes",
                     "mobile_runs"},
    "agent": {"agent_runs"},
}
MOVED = sorted(set().union(*KIND_TABLES.values()) - {"mobile_runs", "agent_runs"})
# The agent kind's columns of `runs` (migrations 011, 055) that its migration 088 moves.
AGENT_COLUMNS = ("context_summary", "related_entity_ids")
MOBILE_RUN, BATCH_RUN, OTHER_MOBILE_RUN = (uuid.uuid4() for _ in range(3))


async def _databases(database_url: str, prefix: str) -> AsyncIterator[str]:
    url = await create_database(database_url, prefix, migrate=False)
    try:
        yield url
    finally:
        admin = await asyncpg.connect(database_url)
        try:
            await admin.execute(f'DROP DATABASE "{url.partition("?")[0].rpartition("/")[2]}" '
                                "WITH (FORCE)")
        finally:
            await admin.close()


@pytest_asyncio.fixture
async def empty_url(database_url: str) -> AsyncIterator[str]:
    async for url in _databases(database_url, "waystation_tables"):
        yield url


@pytest_asyncio.fixture
async def other_empty_url(database_url: str) -> AsyncIterator[str]:
    async for url in _databases(database_url, "waystation_tables_fresh"):
        yield url


def before_the_move() -> list[tuple[int, str, str]]:
    """(version, name, sql) of the release before, in order: the core's unchanged files and
    the old ones."""
    files = {version: (name, sql) for version, name, sql in migration_files()}
    for path in BEFORE.glob("*.sql"):
        version, _, rest = path.name.partition("_")
        files[int(version)] = (rest.removesuffix(".sql"), path.read_text())
    return [(version, *files[version]) for version in sorted(files) if version <= LAST_BEFORE]


async def migrate_as_before(conn: asyncpg.Connection, *, up_to: int = LAST_BEFORE) -> None:
    """What the release before's `waystation migrate` left: each file applied, and its row
    with the file's checksum."""
    await conn.execute("""CREATE TABLE schema_migrations (
                              version int PRIMARY KEY, name text NOT NULL,
                              applied_at timestamptz NOT NULL DEFAULT now(), checksum text)""")
    for version, name, sql in before_the_move():
        if version <= up_to:
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (version, name, checksum) "
                                   "VALUES ($1, $2, $3)", version, name, checksum(sql))


async def fill_the_kinds_tables(conn: asyncpg.Connection) -> None:
    """A row in every table that moved, and two mobile runs' `runs.app_package`."""
    for run_id, kind, input_ in (
            (MOBILE_RUN, "mobile_agent", {"app_package": "com.example.notes"}),
            (OTHER_MOBILE_RUN, "mobile_agent", {"app_package": "com.example.shop"}),
            (BATCH_RUN, "batch", {"name": "a job", "app_package": "not.a.mobile.run"})):
        await conn.execute("INSERT INTO runs (id, kind, workflow_id, owner, input) "
                           "VALUES ($1, $2, $3, 'alice', $4)", run_id, kind, f"w-{run_id}",
                           json.dumps(input_))
    await conn.execute("""
        INSERT INTO jobs (id, run_id, name, spec, total_units, max_workers, description,
                          metadata)
        VALUES ($1, $1, 'a job', '{"steps": []}', 1, 2, 'why', '{"team": "a"}')""", BATCH_RUN)
    unit = await conn.fetchval("""
        INSERT INTO work_units (job_id, ordinal, payload, cost_usd, flags, worker_id)
        VALUES ($1, 0, '{"text": "x"}', 0.123456789, '[{"step": "a"}]', 'worker-1')
        RETURNING id""", BATCH_RUN)
    await conn.execute("""
        INSERT INTO item_outputs (unit_id, step, step_index, output, rendered_prompt, flags)
        VALUES ($1, 'a', 0, '{"answer": 1}', 'prompt', '[{"flag": "placeholder"}]')""", unit)
    await conn.execute("INSERT INTO apps (app_package, declared_activities) "
                       "VALUES ('com.example.notes', '{.Main}')")
    screens = [await conn.fetchval(
        "INSERT INTO screens (app_package, activity, layout_hash, content_hash, first_run_id) "
        "VALUES ('com.example.notes', '.Main', $1, 'c', $2) RETURNING id", layout, MOBILE_RUN)
        for layout in ("l1", "l2")]
    action = await conn.fetchval("INSERT INTO actions (screen_id, selector, kind) "
                                 "VALUES ($1, '#go', 'tap') RETURNING id", screens[0])
    edge = await conn.fetchval(
        "INSERT INTO edges (app_package, from_screen_id, action_id, to_screen_id) "
        "VALUES ('com.example.notes', $1, $2, $3) RETURNING id", screens[0], action, screens[1])
    await conn.execute(
        "INSERT INTO graph_persistence_outcomes (run_id, step, app_package, screen_id, "
        "from_screen_id, action_id, edge_id, new_edge) "
        "VALUES ($1, 1, 'com.example.notes', $2, $3, $4, $5, true)",
        MOBILE_RUN, screens[1], screens[0], action, edge)


async def rows(conn: asyncpg.Connection, table: str) -> list[str]:
    return sorted(r[0] for r in await conn.fetch(f"SELECT to_jsonb(t)::text FROM {table} t"))


async def runs_columns(conn: asyncpg.Connection) -> set[str]:
    return {r[0] for r in await conn.fetch(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'")}


async def tables(conn: asyncpg.Connection) -> set[str]:
    return {r[0] for r in await conn.fetch(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


async def test_a_database_of_the_release_before_upgrades_in_place_with_its_rows(
        empty_url: str, other_empty_url: str) -> None:
    folders = load_registry().migration_folders()
    conn = await asyncpg.connect(empty_url)
    try:
        await migrate_as_before(conn)
        await fill_the_kinds_tables(conn)
        before = {table: await rows(conn, table) for table in MOVED}
        assert all(before.values())

        # The batch's and the screen graph's migrations find their tables made by the old
        # core files; the move of `runs.app_package` runs.
        assert await apply_migrations(conn, folders=folders) == [86, 87, 88, 89, 90, 91]
        assert {table: await rows(conn, table) for table in MOVED} == before
        assert dict(await conn.fetch("SELECT run_id, app_package FROM mobile_runs")) == {
            MOBILE_RUN: "com.example.notes", OTHER_MOBILE_RUN: "com.example.shop"}
        assert await conn.fetchval(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_name = 'runs' AND column_name = 'app_package'") == 0
        applied = dict(await conn.fetch("SELECT version, checksum FROM schema_migrations"))
        assert {v: applied[v] for v in BEFORE_THE_MOVE} == {
            v: c for v, (_, c) in BEFORE_THE_MOVE.items()}, "the old files' rows stay"
        assert {84, 85, 86, 88} <= applied.keys()
        assert await apply_migrations(conn, folders=folders) == []

        # A run started after the move gets its row from the mobile kind's trigger.
        later = uuid.uuid4()
        await conn.execute("INSERT INTO runs (id, kind, workflow_id, owner, input) VALUES "
                           "($1, 'mobile_agent', 'w-later', 'bob', "
                           "'{\"app_package\": \"com.example.later\"}')", later)
        assert await conn.fetchval("SELECT app_package FROM mobile_runs WHERE run_id = $1",
                                   later) == "com.example.later"
    finally:
        await conn.close()

    fresh = await asyncpg.connect(other_empty_url)
    try:
        assert await apply_migrations(fresh, folders=folders) == \
            [version for version, _, _ in migration_files(folders)]
    finally:
        await fresh.close()
    for privileges in (False, True):
        assert await dump_database(empty_url, privileges=privileges) == \
            await dump_database(other_empty_url, privileges=privileges)


async def test_a_new_database_gets_a_kind_s_tables_from_its_own_migrations_only(
        empty_url: str) -> None:
    registry = load_registry()
    batch = registry.kind("batch").data.migrations
    conn = await asyncpg.connect(empty_url)
    try:
        await apply_migrations(conn)
        assert not (await tables(conn)) & set().union(*KIND_TABLES.values())
        assert await conn.fetchval(
            "SELECT count(*) FROM pg_proc WHERE proname IN ('record_mobile_step', "
            "'record_mobile_step_needing_hash', 'worker_unit_totals', 'follow_run_status', "
            "'record_mobile_run', 'record_agent_run_fields')") == 0
        assert await runs_columns(conn) & set(AGENT_COLUMNS) == set()
        # The core works without them: a run is written, counted, swept, its owner erased.
        run_id = uuid.uuid4()
        await conn.execute("INSERT INTO runs (id, kind, workflow_id, owner, input) "
                           "VALUES ($1, 'mobile_agent', 'w', 'alice', "
                           "'{\"app_package\": \"com.example.notes\"}')", run_id)
        figures = await read_figures(conn, [1.0])
        assert sum(r.runs for r in figures.runs) == 1
        pool = await create_pool(empty_url, max_size=2)
        try:
            assert await delete_runs(pool, [run_id]) == []
            async with pool.acquire() as other:
                await request_erasure(other, "alice")
            assert await erase_due_users(pool, requested_before=datetime.now(UTC)) == 1
        finally:
            await pool.close()
        assert await conn.fetchval("SELECT count(*) FROM runs") == 0

        # The batch kind installed later: its tables and no other kind's.
        assert await apply_migrations(conn, folders=[batch]) == [84]
        assert (await tables(conn)) & set().union(*KIND_TABLES.values()) == KIND_TABLES["batch"]
    finally:
        await conn.close()


async def test_a_database_with_only_some_of_the_old_files_is_refused(empty_url: str) -> None:
    folders = load_registry().migration_folders()
    conn = await asyncpg.connect(empty_url)
    try:
        await migrate_as_before(conn, up_to=55)  # before 061-063: an older release's
        with pytest.raises(MigrationsTooOld, match="084_batch_tables .* had only 004, 052:"):
            await apply_migrations(conn, folders=folders)
        # Refused before anything ran.
        assert await conn.fetchval("SELECT max(version) FROM schema_migrations") == 55
    finally:
        await conn.close()


def test_the_old_files_are_those_of_the_release_before() -> None:
    """The checksums the core accepts for the old files are those of the files kept here."""
    kept = {int(p.name[:3]): (p.name[4:].removesuffix(".sql"), checksum(p.read_text()))
            for p in BEFORE.glob("*.sql")}
    assert kept == BEFORE_THE_MOVE


def test_a_number_of_the_old_files_stays_taken(tmp_path: Path) -> None:
    """A kind's new migration numbered as an old core file would be taken for it."""
    (tmp_path / "061_my_table.sql").write_text("CREATE TABLE my_table (id int);")
    with pytest.raises(ValueError, match="061 .* was taken before the kinds owned their tables"):
        migration_files([tmp_path])


# --- the agent kind's columns of `runs` (migrations 087-089) ---------------------------------

SUMMARY_RUN, ENTITIES_RUN, BOTH_RUN, PLAIN_AGENT_RUN, OTHER_KIND_RUN = (
    uuid.uuid4() for _ in range(5))
AGENT_ROWS = {  # run id -> (kind, context_summary, related_entity_ids) as `runs` held them
    SUMMARY_RUN: ("agent", "need: a venue", None),
    ENTITIES_RUN: ("agent", None, {"vendor_ids": ["v-1"]}),
    BOTH_RUN: ("agent", "booked: Banyan Courtyard", {"vendor_ids": ["v-2", "v-3"]}),
    PLAIN_AGENT_RUN: ("agent", None, None),
    OTHER_KIND_RUN: ("validation", None, None),
}
LAST_WITH_THE_COLUMNS = 86  # the schema before the agent kind owned them: main at 092c7cf


async def fill_the_agent_columns(conn: asyncpg.Connection) -> None:
    for run_id, (kind, summary, entities) in AGENT_ROWS.items():
        await conn.execute(
            "INSERT INTO runs (id, kind, workflow_id, owner, input, context_summary, "
            "related_entity_ids) VALUES ($1, $2, $3, 'alice', '{}', $4, $5)",
            run_id, kind, f"w-{run_id}", summary,
            None if entities is None else json.dumps(entities))


async def agent_runs(conn: asyncpg.Connection) -> dict[uuid.UUID, tuple[Any, Any]]:
    return {r["run_id"]: (r["context_summary"], None if r["related_entity_ids"] is None
                          else json.loads(r["related_entity_ids"]))
            for r in await conn.fetch("SELECT run_id, context_summary, "
                                      "related_entity_ids::text FROM agent_runs")}


MOVED_AGENT_ROWS = {run_id: (summary, entities)
                    for run_id, (_, summary, entities) in AGENT_ROWS.items()
                    if summary is not None or entities is not None}


async def test_the_agent_kind_s_columns_move_to_its_own_table_with_their_rows(
        empty_url: str, other_empty_url: str) -> None:
    folders = load_registry().migration_folders()
    conn = await asyncpg.connect(empty_url)
    try:
        await apply_migrations(conn, folders=folders, up_to=LAST_WITH_THE_COLUMNS)
        assert set(AGENT_COLUMNS) <= await runs_columns(conn)
        await fill_the_agent_columns(conn)

        assert await apply_migrations(conn, folders=folders) == [87, 88, 89, 90, 91]
        assert await agent_runs(conn) == MOVED_AGENT_ROWS
        assert await runs_columns(conn) & set(AGENT_COLUMNS) == set()
        assert await conn.fetchval("SELECT count(*) FROM runs") == len(AGENT_ROWS)
        assert await apply_migrations(conn, folders=folders) == []
    finally:
        await conn.close()

    fresh = await asyncpg.connect(other_empty_url)
    try:
        await apply_migrations(fresh, folders=folders)
    finally:
        await fresh.close()
    for privileges in (False, True):
        assert await dump_database(empty_url, privileges=privileges) == \
            await dump_database(other_empty_url, privileges=privileges)


async def test_a_core_only_database_keeps_the_agent_columns_holding_values_until_the_kind_moves_them(  # noqa: E501
        empty_url: str) -> None:
    registry = load_registry()
    agent = registry.kind("agent").data.migrations
    others = [f for f in registry.migration_folders() if f != agent]
    conn = await asyncpg.connect(empty_url)
    try:
        await apply_migrations(conn, folders=others, up_to=LAST_WITH_THE_COLUMNS)
        await fill_the_agent_columns(conn)
        # Without the agent kind: the core stops writing them, and drops none holding a value.
        assert await apply_migrations(conn, folders=others) == [87, 89, 90, 91]
        assert set(AGENT_COLUMNS) <= await runs_columns(conn)
        # The agent kind installed later moves them.
        assert await apply_migrations(conn, folders=[agent]) == [88]
        assert await agent_runs(conn) == MOVED_AGENT_ROWS
        assert await runs_columns(conn) & set(AGENT_COLUMNS) == set()
    finally:
        await conn.close()


async def test_a_kind_s_fields_are_written_with_the_run_s_progress_by_its_own_sql(
        empty_url: str) -> None:
    """The core's progress write hands `kind_fields` to the run's kind's function (087): an
    upsert in the same statement, idempotent, a null field keeping what is stored, nothing
    after the run has finished; a kind that registered no writer refuses the whole write.
    Written as the workers' role writes it."""
    folders = load_registry().migration_folders()
    conn = await asyncpg.connect(empty_url)
    try:
        await apply_migrations(conn, folders=folders)
        await fill_runs_without_the_columns(conn)
        # As the workers write: their role's grants and row-level security.
        await conn.execute("SET ROLE waystation_worker")

        def progress(run_id: uuid.UUID, status: str, fields: dict[str, Any] | None,
                     key: str) -> ReadModelWrite:
            return ReadModelWrite(run_id=run_id, run=RunStateWrite(
                status=status, current_phase=1, kind_fields=fields),
                events=[EventWrite(event_key=key, type="run.progress")])

        first = progress(BOTH_RUN, "running", {"context_summary": "need: a venue"}, "a")
        for _ in range(2):  # applied again (a retried activity): the same
            await apply_write(conn, first)
            assert await agent_runs(conn) == {BOTH_RUN: ("need: a venue", None)}
        await apply_write(conn, progress(BOTH_RUN, "paused", {
            "related_entity_ids": {"vendor_ids": ["v-2"]}}, "b"))
        assert await agent_runs(conn) == {BOTH_RUN: ("need: a venue", {"vendor_ids": ["v-2"]})}
        await apply_write(conn, progress(BOTH_RUN, "completed", {
            "context_summary": "booked", "related_entity_ids": None}, "c"))
        assert await agent_runs(conn) == {BOTH_RUN: ("booked", {"vendor_ids": ["v-2"]})}
        # A finished run's fields stay as they are, as its row does.
        await apply_write(conn, progress(BOTH_RUN, "running", {"context_summary": "late"}, "d"))
        assert await agent_runs(conn) == {BOTH_RUN: ("booked", {"vendor_ids": ["v-2"]})}

        # A run of a kind with no writer: refused, and nothing of the write is left.
        with pytest.raises(asyncpg.UndefinedFunctionError, match="registered no writer"):
            await apply_write(conn, progress(OTHER_KIND_RUN, "running", {"x": 1}, "e"))
        assert await conn.fetchval("SELECT status FROM runs WHERE id = $1",
                                   OTHER_KIND_RUN) == "pending"
        assert await conn.fetchval("SELECT count(*) FROM run_events WHERE run_id = $1",
                                   OTHER_KIND_RUN) == 0
    finally:
        await conn.close()


async def fill_runs_without_the_columns(conn: asyncpg.Connection) -> None:
    for run_id, (kind, _, _) in AGENT_ROWS.items():
        await conn.execute("INSERT INTO runs (id, kind, workflow_id, owner, input) "
                           "VALUES ($1, $2, $3, 'alice', '{}')", run_id, kind, f"w-{run_id}")
