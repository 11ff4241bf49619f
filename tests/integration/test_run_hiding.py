"""Seed 000's soft delete over HTTP: an owner hides a run (gone from every read, list and
stream, for group members too), restores it within the grace period, and the retention sweep
deletes it after; nobody but the owner (or the service role) hides or restores."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from tests.inprocess_api import auth
from tests.integration.test_retention import sweep
from waystation.persistence.runs import create_run
from waystation.workflows.retention_models import RetentionSweepInput


async def _run(pool: asyncpg.Pool, owner: str, *, status: str = "completed",
               group_id: str | None = None) -> str:
    run_id = uuid.uuid4()
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="batch", owner=owner,
                         group_id=uuid.UUID(group_id) if group_id else None,
                         workflow_id=f"batch-{run_id}", idempotency_key=None,
                         input={"name": "x"})
        await conn.execute("UPDATE runs SET status = $2 WHERE id = $1", run_id, status)
    return str(run_id)


async def _group(api, owner: str, member: str) -> str:
    group = (await api.post("/groups", json={"name": "team"}, headers=auth(owner))).json()
    added = await api.post(f"/groups/{group['group_id']}/members",
                           json={"user": member, "role": "approver"}, headers=auth(owner))
    assert added.status_code == 201, added.text
    return group["group_id"]


async def _listed(api, user: str, **params) -> set[str]:
    page = (await api.get("/runs", params={"limit": 200, **params}, headers=auth(user))).json()
    return {r["run_id"] for r in page["runs"]}


async def test_owner_hides_and_restores_a_run_members_see_neither(api, pool):
    owner, member = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    group_id = await _group(api, owner, member)
    run_id = await _run(pool, owner, group_id=group_id)
    assert run_id in await _listed(api, member)

    refused = await api.post(f"/runs/{run_id}/hide", headers=auth(member))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_allowed"
    assert (await api.post(f"/runs/{run_id}/hide",
                           headers=auth("mallory"))).status_code == 404

    hidden = await api.post(f"/runs/{run_id}/hide", headers=auth(owner))
    assert hidden.status_code == 200, hidden.text
    body = hidden.json()
    assert body["hidden"] is True
    # The grace period is WAYSTATION_ERASURE_GRACE_HOURS (72 by default).
    assert (datetime.fromisoformat(body["restore_until"])
            - datetime.fromisoformat(body["hidden_at"])).total_seconds() == 72 * 3600
    again = await api.post(f"/runs/{run_id}/hide", headers=auth(owner))
    assert again.status_code == 200 and again.json() == body

    for user in (owner, member):
        for path in (f"/runs/{run_id}", f"/runs/{run_id}/events", f"/jobs/{run_id}",
                     f"/runs/{run_id}/events/stream"):
            assert (await api.get(path, headers=auth(user))).status_code == 404, (user, path)
        assert run_id not in await _listed(api, user)
    assert run_id in await _listed(api, owner, hidden="true")
    assert run_id not in await _listed(api, member, hidden="true")
    # A member cannot tell a hidden run from none.
    assert (await api.post(f"/runs/{run_id}/restore",
                           headers=auth(member))).status_code == 404

    restored = await api.post(f"/runs/{run_id}/restore", headers=auth(owner))
    assert restored.status_code == 200 and restored.json()["hidden"] is False
    assert (await api.get(f"/runs/{run_id}", headers=auth(member))).status_code == 200
    assert run_id in await _listed(api, member)
    # Restoring a visible run changes nothing.
    assert (await api.post(f"/runs/{run_id}/restore", headers=auth(owner))).json() \
        == {"run_id": run_id, "hidden": False, "hidden_at": None, "restore_until": None}


async def test_only_finished_runs_are_hidden(api, pool):
    run_id = await _run(pool, "alice", status="running")
    refused = await api.post(f"/runs/{run_id}/hide", headers=auth())
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_not_finished"
    assert (await api.get(f"/runs/{run_id}", headers=auth())).status_code == 200


async def test_after_the_grace_period_no_restore_and_the_sweep_deletes(
        api, pool, dev_env, task_queue, tmp_path):
    run_id = await _run(pool, "alice")
    service = auth("ops", "service")
    assert (await api.post(f"/runs/{run_id}/hide", headers=service)).status_code == 200
    async with pool.acquire() as conn:
        await conn.execute("UPDATE runs SET erased_at = now() - interval '73 hours' "
                           "WHERE id = $1", uuid.UUID(run_id))
    late = await api.post(f"/runs/{run_id}/restore", headers=auth())
    assert late.status_code == 409 and late.json()["error"]["code"] == "restore_period_over"

    # A queue of its own: the api fixture's worker holds the test's.
    await sweep(dev_env, pool, f"{task_queue}-sweep", tmp_path,
                RetentionSweepInput(erasure_grace_hours=72))
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM runs WHERE id = $1",
                                   uuid.UUID(run_id)) == 0


async def test_a_run_an_erasure_hid_is_never_restored(api, pool):
    owner = f"eve-{uuid.uuid4().hex[:6]}"
    hid_first, visible = await _run(pool, owner), await _run(pool, owner)
    assert (await api.post(f"/runs/{hid_first}/hide", headers=auth(owner))).status_code == 200
    erased = await api.post("/admin/erasure", json={"user": owner},
                            headers=auth("ops", "service"))
    assert erased.status_code == 202 and erased.json()["runs_hidden"] == 1
    for run_id in (hid_first, visible):
        refused = await api.post(f"/runs/{run_id}/restore", headers=auth("ops", "service"))
        assert refused.status_code == 404, run_id
