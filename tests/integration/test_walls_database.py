"""Issue 38 item 7: the API and the workers log in as roles that cannot leave row-level
security or change the schema; only the owner migrates (real PostgreSQL, migrated)."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from waystation.api.app import create_app
from waystation.database import login_url
from waystation.persistence.claims import API_ROLE, WORKER_ROLE, Claims, set_claims
from waystation.persistence.db import create_pool
from waystation.persistence.events import maintain_partitions
from waystation.persistence.runs import create_run
from waystation.settings import Settings
from waystation.testing import free_port

SECRET = "database-roles-secret-0123456789-012345678"
# What a login that could leave the walls would try, each refused to both roles.
ESCAPES = ("ALTER TABLE runs DISABLE ROW LEVEL SECURITY",
           "ALTER TABLE runs NO FORCE ROW LEVEL SECURITY",
           "DROP POLICY api_visible ON runs",
           "CREATE TABLE stolen (x int)",
           "ALTER TABLE runs ADD COLUMN stolen int",
           "SET session_replication_role = replica",
           "SELECT count(*) FROM schema_migrations")


def _settings(migrated_url: str) -> Settings:
    return Settings(database_url=migrated_url, jwt_secret=SECRET,
                    temporal_address=f"127.0.0.1:{free_port()}")


async def _runs_of_two(pool: asyncpg.Pool) -> tuple[str, uuid.UUID, uuid.UUID]:
    tag = uuid.uuid4().hex[:6]
    ids = uuid.uuid4(), uuid.uuid4()
    async with pool.acquire() as conn:
        for owner, run_id in zip((f"alice-{tag}", f"bob-{tag}"), ids, strict=True):
            await create_run(conn, run_id=run_id, kind="validation", owner=owner,
                             group_id=None, workflow_id=f"validation-{run_id}",
                             idempotency_key=None, input={})
    return tag, *ids


async def _refused_everything(conn: asyncpg.Connection, owner: str) -> None:
    for statement in (f'SET ROLE "{owner}"', *ESCAPES):
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            async with conn.transaction():
                await conn.execute(statement)
    role = await conn.fetchrow(
        "SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb FROM pg_roles "
        "WHERE rolname = session_user")
    assert not any(role.values()), dict(role)
    assert await conn.fetchval("SELECT count(*) FROM pg_class c JOIN pg_roles r "
                               "ON r.oid = c.relowner WHERE r.rolname = session_user") == 0


async def test_the_api_role_is_refused_another_user_s_row_even_after_reset_role(
        migrated_url, pool):
    owner = await pool.fetchval("SELECT current_user")
    tag, alices, bobs = await _runs_of_two(pool)
    app = create_app(_settings(migrated_url))
    async with app.router.lifespan_context(app), app.state.pool.acquire() as conn:
        # The app's own pool logs in as the API's role, not as the owner.
        assert await conn.fetchval("SELECT session_user") == API_ROLE != owner
        await set_claims(conn, Claims(user=f"alice-{tag}"))
        visible = "SELECT array_agg(id) FROM runs WHERE id = ANY($1::uuid[])"
        assert await conn.fetchval(visible, [alices, bobs]) == [alices]
        await conn.execute("RESET ROLE")
        assert await conn.fetchval("SELECT current_user") == API_ROLE
        assert await conn.fetchval(visible, [alices, bobs]) == [alices]
        assert await conn.fetchval("SELECT count(*) FROM runs WHERE owner = $1",
                                   f"bob-{tag}") == 0
        await conn.execute("RESET ALL")  # no claims: no rows at all
        assert await conn.fetchval(visible, [alices, bobs]) is None
        await _refused_everything(conn, owner)


async def test_the_worker_role_keeps_partitions_but_changes_no_schema(migrated_url, pool):
    owner = await pool.fetchval("SELECT current_user")
    _, alices, bobs = await _runs_of_two(pool)
    worker = await create_pool(login_url(_settings(migrated_url), WORKER_ROLE), max_size=1)
    try:
        async with worker.acquire() as conn:
            assert await conn.fetchval("SELECT session_user") == WORKER_ROLE
            # The worker writes every run's rows, whatever the claims (policy worker_all).
            assert await conn.fetchval("SELECT count(*) FROM runs WHERE id = ANY($1::uuid[])",
                                       [alices, bobs]) == 2
            # Partition upkeep is DDL it may do only through the owner's two functions: a
            # month three years ahead is created, in `public`, owned by the owner.
            await maintain_partitions(conn, months_ahead=36)
            far = await conn.fetchrow(
                "SELECT n.nspname, r.rolname FROM pg_class c JOIN pg_roles r ON r.oid = "
                "c.relowner JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = "
                "'run_events_' || to_char(now() AT TIME ZONE 'UTC' + interval '36 months', "
                "'YYYY_MM')")
            assert far is not None and tuple(far) == ("public", owner)
            await _refused_everything(conn, owner)
    finally:
        await worker.close()


async def test_login_urls_name_each_role_and_its_password(migrated_url):
    settings = Settings(database_url="postgresql://owner:secret@db:5432/waystation",
                        api_database_password="api pass/1", jwt_secret=SECRET)
    assert login_url(settings, API_ROLE) == \
        "postgresql://waystation_api:api%20pass%2F1@db:5432/waystation"
    assert login_url(settings, WORKER_ROLE) == "postgresql://waystation_worker@db:5432/waystation"
    own = Settings(database_url="postgresql://waystation_api:pw@db/waystation", jwt_secret=SECRET)
    assert login_url(own, API_ROLE) == "postgresql://waystation_api:pw@db/waystation"
    local = login_url(_settings(migrated_url), API_ROLE)
    assert local.startswith("postgresql://waystation_api@") and "?host=" in local
