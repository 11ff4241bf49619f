"""Row-level security as a second wall (migration 022): queries without any owner filter, run
the way the API runs them (its pool's role, the caller's claims), still see only the caller's
rows; the workers' role writes everything."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from tests.console_helpers import open_gate
from tests.helpers import new_validation_run
from waystation.persistence import gates as gates_repo
from waystation.persistence import groups as groups_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence.claims import (
    API_ROLE,
    AUTHENTICATOR,
    SERVICE,
    WORKER_ROLE,
    Claims,
    claimed_connection,
)
from waystation.persistence.db import create_pool
from waystation.persistence.migrate import apply_migrations
from waystation.persistence.writes import EventWrite, ReadModelWrite, SnapshotWrite, apply_write
from waystation.registry import load_registry
from waystation.testing import with_database

# The run tables, read with no WHERE at all: the policies are the only filter.
UNFILTERED = {
    "runs": "SELECT id AS run_id FROM runs",
    "run_events": "SELECT run_id FROM run_events",
    "run_snapshots": "SELECT run_id FROM run_snapshots",
    "hitl_requests": "SELECT run_id FROM hitl_requests",
}


@pytest_asyncio.fixture(scope="module")
async def api_pool(migrated_url: str) -> AsyncIterator[asyncpg.Pool]:
    """Connections as the API's are: role waystation_api."""
    pool = await create_pool(migrated_url, max_size=2, role=API_ROLE)
    yield pool
    await pool.close()


@pytest_asyncio.fixture(scope="module")
async def worker_pool(migrated_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(migrated_url, max_size=2, role=WORKER_ROLE)
    yield pool
    await pool.close()


@pytest_asyncio.fixture(scope="module")
async def world(worker_pool: asyncpg.Pool) -> dict[str, object]:
    """Written by the workers' role: alice's run, bob's run, and bob's group run that carol
    belongs to; each run with an event, a snapshot and a pending request."""
    tag = uuid.uuid4().hex[:8]
    alice, bob, carol = f"alice-{tag}", f"bob-{tag}", f"carol-{tag}"
    group_id = uuid.uuid4()
    async with worker_pool.acquire() as conn:
        await groups_repo.create_group(conn, group_id=group_id, name="crew", creator=bob)
        await groups_repo.put_member(conn, group_id=group_id, user=carol, role="viewer",
                                     added_by=bob)
    runs = {"alice": (await new_validation_run(worker_pool, alice)).run_id,
            "bob": (await new_validation_run(worker_pool, bob)).run_id,
            "group": (await new_validation_run(worker_pool, bob, group_id=group_id)).run_id}
    for run_id in runs.values():
        await open_gate(worker_pool, run_id)
        async with worker_pool.acquire() as conn:
            await apply_write(conn, ReadModelWrite(
                run_id=run_id, events=[EventWrite(event_key="started", type="run.started")],
                snapshots=[SnapshotWrite(step_ordinal=1, label="start", state={"ok": True})]))
    return {"alice": alice, "bob": bob, "carol": carol, "group_id": group_id, "runs": runs}


async def visible(pool: asyncpg.Pool, claims: Claims | None) -> dict[str, set[uuid.UUID]]:
    """The run ids each unfiltered query returns for `claims` (None: none set)."""
    async with pool.acquire() as conn:
        if claims is not None:
            await conn.execute("SELECT set_config('waystation.user', $1, false), "
                               "set_config('waystation.role', $2, false)",
                               claims.user or "", claims.role)
        return {table: {r["run_id"] for r in await conn.fetch(query)}
                for table, query in UNFILTERED.items()}


async def test_a_user_sees_only_their_runs_without_any_owner_filter(api_pool, world):
    runs = world["runs"]
    async with claimed_connection(api_pool, Claims(user=world["alice"])) as conn:
        seen = {table: {r["run_id"] for r in await conn.fetch(query)}
                for table, query in UNFILTERED.items()}
        # The inbox query with its owner filter removed (NULL: the service role's "all").
        inbox = await gates_repo.list_inbox(conn, owner=None, status="pending", limit=1000)
        # By id, another user's run is not there either.
        assert await runs_repo.get_run(conn, runs["bob"]) is None
    assert seen == {table: {runs["alice"]} for table in UNFILTERED}
    assert {g.run_id for g in inbox} == {runs["alice"]}


async def test_group_members_see_group_runs_and_nothing_else(api_pool, world):
    runs = world["runs"]
    async with claimed_connection(api_pool, Claims(user=world["carol"])) as conn:
        seen = {table: {r["run_id"] for r in await conn.fetch(query)}
                for table, query in UNFILTERED.items()}
        members = {r["user_name"] for r in await conn.fetch("SELECT user_name FROM group_members")}
        groups = {r["id"] for r in await conn.fetch("SELECT id FROM groups")}
    assert seen == {table: {runs["group"]} for table in UNFILTERED}
    assert members == {world["bob"], world["carol"]}
    assert groups == {world["group_id"]}
    bob = await visible(api_pool, Claims(user=world["bob"]))
    assert bob["runs"] == {runs["bob"], runs["group"]}


async def test_no_claims_no_rows_and_claims_do_not_outlive_a_borrowing(api_pool, world):
    assert await visible(api_pool, None) == {table: set() for table in UNFILTERED}
    # Claims for someone unknown, or the credential lookups' claims: no run rows either.
    assert await visible(api_pool, Claims(user="nobody-at-all")) == {t: set() for t in UNFILTERED}
    assert await visible(api_pool, AUTHENTICATOR) == {t: set() for t in UNFILTERED}
    # The pool's reset (RESET ALL) clears them when a connection goes back: the next
    # borrower without claims sees nothing, whoever had the connection before.
    async with claimed_connection(api_pool, SERVICE):
        pass
    async with claimed_connection(api_pool, Claims(user=world["alice"])):
        pass
    assert await visible(api_pool, None) == {table: set() for table in UNFILTERED}


async def test_a_login_role_pool_gives_connections_back_outside_any_transaction(migrated_url):
    """A pool without a role (the workers') skips the reset round trip on release; what it
    keeps: a transaction left open is rolled back, so the next borrower starts clean."""
    pool = await create_pool(migrated_url, max_size=1)
    run_id = uuid.uuid4()
    try:
        async with pool.acquire() as conn:
            await conn.execute("BEGIN")
            await conn.execute("INSERT INTO runs (id, kind, owner, workflow_id) "
                               "VALUES ($1, 'validation', 'x', $2)", run_id, f"open-{run_id}")
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT count(*) FROM runs WHERE id = $1", run_id) == 0
    finally:
        await pool.close()


async def test_the_service_role_sees_every_run(api_pool, world):
    seen = await visible(api_pool, SERVICE)
    assert set(world["runs"].values()) <= seen["runs"]  # type: ignore[union-attr]
    assert set(world["runs"].values()) <= seen["hitl_requests"]  # type: ignore[union-attr]


async def test_a_user_cannot_write_what_they_cannot_see(api_pool, world):
    async with claimed_connection(api_pool, Claims(user=world["alice"])) as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            await conn.execute(
                "INSERT INTO runs (id, kind, owner, workflow_id) VALUES ($1, 'validation', $2, $3)",
                uuid.uuid4(), world["bob"], f"forged-{uuid.uuid4()}")
        changed = await conn.execute("UPDATE runs SET status = 'canceled' WHERE id = $1",
                                     world["runs"]["bob"])
        assert changed == "UPDATE 0"


async def test_the_worker_role_reads_and_writes_everything(worker_pool, world):
    runs = world["runs"]
    async with worker_pool.acquire() as conn:  # no claims at all
        assert await conn.fetchval("SELECT current_user") == WORKER_ROLE
        count = await conn.fetchval("SELECT count(*) FROM runs WHERE id = ANY($1::uuid[])",
                                    list(runs.values()))
        seqs = await apply_write(conn, ReadModelWrite(
            run_id=runs["bob"], events=[EventWrite(event_key="more", type="task.completed")]))
    assert count == 3
    assert seqs == {"more": 2}


async def test_every_table_but_the_migrations_ledger_forces_row_level_security(pool):
    """A table added later without policies fails here (the API role is granted every new
    table by default privileges, so without RLS it would read all of it)."""
    rows = await pool.fetch(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition "
        "AND NOT (c.relrowsecurity AND c.relforcerowsecurity)")
    assert [r["relname"] for r in rows] == ["schema_migrations"]
    # Neither the ledger nor a partition (read directly, it has no policies) is the API's.
    readable = await pool.fetch(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind = 'r' "
        "AND (c.relispartition OR c.relname = 'schema_migrations') "
        "AND has_table_privilege($1, c.oid, 'SELECT')", API_ROLE)
    assert readable == []
    partitions = await pool.fetchval(
        "SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relispartition")
    assert partitions >= 1  # the check above looked at some


def as_login(url: str, login: str) -> str:
    """`url` signing in as `login` (no password: the test server trusts local sockets; a
    DATABASE_URL server must trust it too)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{login}@{rest.partition('@')[2]}"


async def test_a_non_superuser_owner_deployment(database_url: str):
    """Production's shape: a plain login role owns the database, is granted both roles, runs
    the migrations (so it owns the tables and the SECURITY DEFINER function, and forced RLS
    holds it to the policies), and serves the API (as waystation_api) and the workers (as
    itself: its membership of waystation_worker lets it write everything)."""
    tag = uuid.uuid4().hex[:8]
    login, name = f"ws_owner_{tag}", f"waystation_rls_{tag}"
    admin = await asyncpg.connect(database_url)
    try:
        await admin.execute(f"CREATE ROLE {login} LOGIN NOSUPERUSER NOBYPASSRLS")
        await admin.execute(f"CREATE DATABASE {name} OWNER {login}")
        url = as_login(with_database(database_url, name), login)
        conn = await asyncpg.connect(url)
        try:
            # The roles exist already (cluster-wide); the migration only uses them.
            await admin.execute(f"GRANT {API_ROLE}, {WORKER_ROLE} TO {login}")
            await apply_migrations(conn, folders=load_registry(
                use_entry_points=False).migration_folders())
        finally:
            await conn.close()
        api = await create_pool(url, max_size=1, role=API_ROLE)
        worker = await create_pool(url, max_size=1)
        try:
            async with worker.acquire() as conn:
                group_id = uuid.uuid4()
                await groups_repo.create_group(conn, group_id=group_id, name="g", creator="bob")
                await groups_repo.put_member(conn, group_id=group_id, user="carol",
                                             role="viewer", added_by="bob")
            mine = (await new_validation_run(worker, "alice")).run_id
            shared = (await new_validation_run(worker, "bob", group_id=group_id)).run_id
            await new_validation_run(worker, "bob")
            for user, expected in (("alice", {mine}), ("carol", {shared}), (None, set())):
                async with claimed_connection(api, Claims(user=user)) as conn:
                    seen = {r["id"] for r in await conn.fetch("SELECT id FROM runs")}
                assert seen == expected, user
            # A mobile run the API writes gets its kind's row (a SECURITY DEFINER trigger of
            # the mobile kind's migration), visible with the run only.
            mobile = uuid.uuid4()
            async with claimed_connection(api, Claims(user="alice")) as conn:
                await conn.execute("INSERT INTO runs (id, kind, workflow_id, owner, input) "
                                   "VALUES ($1, 'mobile_agent', 'w-m', 'alice', "
                                   "'{\"app_package\": \"com.example.notes\"}')", mobile)
            for user, packages in (("alice", ["com.example.notes"]), ("carol", [])):
                async with claimed_connection(api, Claims(user=user)) as conn:
                    assert [r[0] for r in await conn.fetch(
                        "SELECT app_package FROM mobile_runs")] == packages, user
        finally:
            await api.close()
            await worker.close()
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.execute(f"DROP ROLE IF EXISTS {login}")
        await admin.close()
