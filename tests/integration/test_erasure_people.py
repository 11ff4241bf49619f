"""Erasure of one user beyond their runs: their access ends at the request; after the grace
period nothing in any table names them (personal rows deleted, their part in others' records
under a pseudonym), and no row that was not about them has changed."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio

from tests.fault_helpers import api_settings
from tests.integration.test_erasure import client
from tests.integration.test_retention import sweep
from waystation.persistence.db import create_pool
from waystation.testing import InProcessApi, create_database
from waystation.workflows.retention_models import RetentionSweepInput

TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
   AND c.relname NOT IN ('schema_migrations', 'user_erasures')
 ORDER BY 1"""


@pytest_asyncio.fixture
async def own_pool(database_url: str) -> AsyncIterator[tuple[str, asyncpg.Pool]]:
    """A database of its own: every table is compared whole before and after."""
    url = await create_database(database_url, "waystation_erasure")
    pool = await create_pool(url, max_size=4)
    yield url, pool
    await pool.close()


async def rows_by_table(conn: asyncpg.Connection, *, without: list[str]) -> dict[str, set[str]]:
    """Each table's rows (as text) that contain none of `without`."""
    found = {}
    for table in [r["relname"] for r in await conn.fetch(TABLES)]:
        rows = await conn.fetch(f"SELECT t::text AS row FROM {table} t")
        found[table] = {r["row"] for r in rows if not any(w in r["row"] for w in without)}
    return found


async def seed(conn: asyncpg.Connection, eve: str, bob: str, carol: str) -> dict[str, uuid.UUID]:
    """Eve's own run, and Bob's group run on which Eve decided, voted and delegated; groups,
    webhooks, keys, sessions, contacts and links of all three."""
    ids = {name: uuid.uuid4() for name in (
        "group", "eve_run", "bob_run", "decided", "pending", "eve_hook", "group_hook",
        "bob_hook", "eve_delivery", "bob_delivery", "eve_key", "bob_key")}
    x = ids
    await conn.execute("INSERT INTO groups (id, name, created_by) VALUES ($1, 'team', $2)",
                       x["group"], eve)
    await conn.executemany(
        "INSERT INTO group_members (group_id, user_name, role, added_by) VALUES ($1, $2, $3, $4)",
        [(x["group"], eve, "owner", eve), (x["group"], bob, "approver", eve),
         (x["group"], carol, "member", bob)])
    for run, owner, group in ((x["eve_run"], eve, None), (x["bob_run"], bob, x["group"])):
        await conn.execute(
            "INSERT INTO runs (id, kind, owner, group_id, workflow_id, status, last_seq) "
            "VALUES ($1, 'validation', $2, $3, $4, 'running', 3)",
            run, owner, group, f"validation-{run}")
    await conn.execute(
        "INSERT INTO hitl_requests (id, run_id, checkpoint_name, phase, title, description, "
        "digest, status, decision, feedback, decision_by, decision_at, decider_users) "
        "VALUES ($1, $2, 'brief', 0, 't', 'd', 'x', 'approved', 'approve', 'fine', $3, now(), "
        "ARRAY[$3, $4])", x["decided"], x["bob_run"], eve, bob)
    await conn.execute(
        "INSERT INTO hitl_requests (id, run_id, checkpoint_name, phase, title, description, "
        "digest, quorum, decider_users) VALUES ($1, $2, 'vpc', 1, 't', 'd', 'y', 3, "
        "ARRAY[$3, $4])", x["pending"], x["bob_run"], eve, carol)
    await conn.executemany(
        "INSERT INTO gate_votes (request_id, voter, on_behalf_of, option, digest, voted_at) "
        "VALUES ($1, $2, $3, 'approve', 'y', now())",
        [(x["pending"], eve, eve), (x["pending"], carol, bob)])
    await conn.executemany(
        "INSERT INTO gate_delegations (request_id, from_user, to_user, delegated_at) "
        "VALUES ($1, $2, $3, now())", [(x["pending"], bob, carol), (x["decided"], eve, bob)])
    for run in (x["eve_run"], x["bob_run"]):
        await conn.executemany(
            "INSERT INTO run_events (run_id, seq, event_key, type, output) "
            "VALUES ($1, $2, $3, $4, $5::jsonb)",
            [(run, 1, f"gate.{x['pending']}.opened", "gate.opened",
              {"decider_users": [eve, carol]}),
             (run, 2, f"gate.{x['pending']}.voted.{eve}", "gate.voted",
              {"decided_by": eve, "feedback": "ok", "on_behalf_of": [eve]}),
             (run, 3, "p0.task:completed", "task.completed", {"text": "an answer"})])
        await conn.execute(
            "INSERT INTO run_snapshots (run_id, step_ordinal, label, state) "
            "VALUES ($1, 1, 'gate', $2::jsonb)", run,
            {"decisions": [{"decided_by": eve, "decision": "approve"}]})
    await conn.executemany(
        "INSERT INTO webhooks (id, owner, group_id, url, secret, events) "
        "VALUES ($1, $2, $3, $4, 's', ARRAY['gate.opened'])",
        [(x["eve_hook"], eve, None, "https://eve.example/hook"),
         (x["group_hook"], eve, x["group"], "https://team.example/hook"),
         (x["bob_hook"], bob, None, "https://bob.example/hook")])
    await conn.executemany(
        "INSERT INTO webhook_deliveries (id, webhook_id, run_id, event_key, event_type, payload) "
        "VALUES ($1, $2, $3, 'k', 'gate.decided', $4::jsonb)",
        [(x["eve_delivery"], x["eve_hook"], x["bob_run"], {"n": 1}),
         (x["bob_delivery"], x["bob_hook"], x["bob_run"], {"decision_by": eve})])
    await conn.executemany(
        "INSERT INTO webhook_attempts (delivery_id, attempt, status_code, duration_ms) "
        "VALUES ($1, 1, 200, 5)", [(x["eve_delivery"],), (x["bob_delivery"],)])
    await conn.executemany(
        "INSERT INTO api_keys (id, name, owner, secret_hash) VALUES ($1, 'k', $2, $3)",
        [(x["eve_key"], eve, "h-eve"), (x["bob_key"], bob, "h-bob")])
    for user in (eve, bob):
        await conn.execute(
            "INSERT INTO console_sessions (id_hash, user_name, role, csrf_token, expires_at) "
            "VALUES ($1, $2, 'user', 'c', now() + interval '1 hour')", f"s-{user}", user)
        await conn.execute(
            "INSERT INTO console_login_codes (code_hash, user_name, role, expires_at) "
            "VALUES ($1, $2, 'user', now() + interval '1 hour')", f"c-{user}", user)
        await conn.execute("INSERT INTO user_contacts (user_name, email) VALUES ($1, $2)",
                           user, f"{user}@example.com")
    await conn.executemany(
        "INSERT INTO decision_links (id, request_id, user_name, email, expires_at) "
        "VALUES ($1, $2, $3, $4, now() + interval '1 day')",
        [(uuid.uuid4(), x["pending"], eve, f"{eve}@example.com"),
         (uuid.uuid4(), x["pending"], carol, f"{carol}@example.com")])
    return ids


async def test_erasure_leaves_nothing_of_the_user_and_touches_no_one_else(
        dev_env, own_pool, task_queue, tmp_path) -> None:
    url, pool = own_pool
    tag = uuid.uuid4().hex[:6]
    eve, bob, carol = f"eve-{tag}", f"bob-{tag}", f"carol-{tag}"
    async with pool.acquire() as conn:
        x = await seed(conn, eve, bob, carol)
        about_eve = [eve, str(x["eve_run"]), str(x["eve_hook"]), str(x["eve_delivery"])]
        untouched = await rows_by_table(conn, without=about_eve)

    api = InProcessApi(api_settings(url, dev_env.client.service_client.config.target_host,
                                    task_queue, erasure_grace_hours=0))
    await api.start()
    try:
        async with client(api, "ops", role="service") as service:
            accepted = await service.post("/admin/erasure", json={"user": eve})
            assert accepted.status_code == 202, accepted.text
            assert accepted.json()["runs_hidden"] == 1
    finally:
        await api.stop()

    async with pool.acquire() as conn:
        # At once: no session, sign-in code or key of Eve's works; her own webhook is stopped.
        assert await conn.fetchval("SELECT count(*) FROM console_sessions WHERE user_name = $1",
                                   eve) == 0
        assert await conn.fetchval(
            "SELECT count(*) FROM console_login_codes WHERE user_name = $1", eve) == 0
        assert await conn.fetchval("SELECT revoked_at IS NOT NULL FROM api_keys WHERE id = $1",
                                   x["eve_key"])
        hooks = {r["id"]: r["deleted_at"] for r in await conn.fetch(
            "SELECT id, deleted_at FROM webhooks")}
        assert hooks[x["eve_hook"]] is not None
        assert hooks[x["group_hook"]] is None and hooks[x["bob_hook"]] is None
        assert await conn.fetchval("SELECT revoked_at FROM api_keys WHERE id = $1",
                                   x["bob_key"]) is None

    result = await sweep(dev_env, pool, task_queue, tmp_path,
                         RetentionSweepInput(erasure_grace_hours=0, batch_pause_seconds=0))
    assert (result.runs_deleted, result.users_erased) == (1, 1)

    async with pool.acquire() as conn:
        for table in [r["relname"] for r in await conn.fetch(TABLES)]:
            left = await conn.fetch(
                f"SELECT t::text FROM {table} t WHERE strpos(t::text, $1) > 0", eve)
            assert left == [], (table, left)
        assert await conn.fetchval("SELECT count(*) FROM user_erasures") == 0
        pseudonym = await conn.fetchval("SELECT decision_by FROM hitl_requests WHERE id = $1",
                                        x["decided"])
        assert pseudonym.startswith("erased-user-")

        # Every row that was not about Eve is as it was.
        after = await rows_by_table(conn, without=[pseudonym])
        for table, rows in untouched.items():
            assert rows <= after[table], (table, rows - after[table])

        # Bob's run keeps its whole record, Eve's part in it under the pseudonym.
        assert await conn.fetchval("SELECT decider_users FROM hitl_requests WHERE id = $1",
                                   x["pending"]) == [pseudonym, carol]
        votes = await conn.fetch("SELECT voter, on_behalf_of FROM gate_votes "
                                 "WHERE request_id = $1 ORDER BY voter", x["pending"])
        assert {(v["voter"], v["on_behalf_of"]) for v in votes} == {
            (pseudonym, pseudonym), (carol, bob)}
        assert await conn.fetchval(
            "SELECT from_user FROM gate_delegations WHERE request_id = $1", x["decided"]
        ) == pseudonym
        keys = [r["event_key"] for r in await conn.fetch(
            "SELECT event_key FROM run_events WHERE run_id = $1 ORDER BY seq", x["bob_run"])]
        assert keys[1] == f"gate.{x['pending']}.voted.{pseudonym}" and len(keys) == 3
        assert await conn.fetchval("SELECT state FROM run_snapshots WHERE run_id = $1",
                                   x["bob_run"]) == {
            "decisions": [{"decided_by": pseudonym, "decision": "approve"}]}
        assert await conn.fetchval("SELECT owner FROM webhooks WHERE id = $1",
                                   x["group_hook"]) == pseudonym
        assert await conn.fetchval("SELECT created_by FROM groups WHERE id = $1",
                                   x["group"]) == pseudonym
        assert {r["user_name"] for r in await conn.fetch(
            "SELECT user_name FROM group_members WHERE group_id = $1", x["group"])} == {
            bob, carol}
        gone = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM webhooks WHERE id = $1) AS hook, "
            "(SELECT count(*) FROM webhook_deliveries WHERE id = $2) AS delivery, "
            "(SELECT count(*) FROM webhook_attempts WHERE delivery_id = $2) AS attempts",
            x["eve_hook"], x["eve_delivery"])
        assert dict(gone) == {"hook": 0, "delivery": 0, "attempts": 0}
