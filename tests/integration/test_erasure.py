"""Erasure of one user's data: hidden at once through the API, deleted for good by the
retention sweep after the grace period, and nobody else's data touched."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
from temporalio.api.enums.v1 import EventType

from tests.fault_helpers import SECRET, api_settings
from tests.helpers import eventually
from tests.integration.test_retention import gone, sweep
from tests.retention_helpers import RUN_TABLES, rows_of, seed_run, start_execution
from waystation.activities.artifacts import LocalArtifactStore
from waystation.api.auth import issue_token
from waystation.testing import InProcessApi
from waystation.workflows.retention_models import RetentionSweepInput

SEEDED = {table: 3 if table == "run_events" else 1 for table in RUN_TABLES}


def client(api: InProcessApi, user: str, role: str = "user") -> httpx.AsyncClient:
    token = issue_token(SECRET, user, role=role)  # type: ignore[arg-type]
    return httpx.AsyncClient(base_url=api.url, timeout=30,
                             headers={"Authorization": f"Bearer {token}"})


async def test_erasure_hides_at_once_and_the_sweep_deletes_after_the_grace(
        dev_env, pool, migrated_url, task_queue, tmp_path) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    erased_user, other_user = f"eve-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    erased = [await seed_run(pool, store, owner=erased_user, finished_ago=timedelta(hours=1)),
              await seed_run(pool, store, owner=erased_user, finished_ago=None)]
    kept = await seed_run(pool, store, owner=other_user, finished_ago=timedelta(hours=1))
    for run_id, _ in [*erased, kept]:
        await start_execution(dev_env.client, run_id)
    api = InProcessApi(api_settings(migrated_url, dev_env.client.service_client.config.target_host,
                                    task_queue, erasure_grace_hours=1))
    await api.start()
    try:
        async with client(api, erased_user) as owner, client(api, other_user) as other, \
                client(api, "ops", role="service") as service:
            refused = await other.post("/admin/erasure", json={"user": erased_user})
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"]["code"] == "forbidden"
            invalid = await service.post("/admin/erasure", json={"user": "", "x": 1})
            assert invalid.status_code == 422
            assert (await owner.get(f"/runs/{erased[0][0]}")).status_code == 200

            accepted = await service.post("/admin/erasure", json={"user": erased_user})
            assert accepted.status_code == 202, accepted.text
            assert accepted.json() == {"user": erased_user, "runs_hidden": 2,
                                       "hard_delete_after": 3600.0}
            for run_id, _ in erased:
                assert (await service.get(f"/runs/{run_id}")).status_code == 404
                assert (await service.get(f"/runs/{run_id}/events")).status_code == 404
                assert (await service.get(f"/jobs/{run_id}")).status_code == 404
            # The user's own token stopped working with the erasure
            # (tests/integration/test_walls_access.py).
            for path in ("/runs", "/decisions", f"/runs/{erased[0][0]}"):
                refused = await owner.get(path)
                assert refused.status_code == 401
                assert refused.json()["error"]["code"] == "token_revoked"
            listed = {r["run_id"] for r in (await service.get("/runs?limit=200")).json()["runs"]}
            assert not listed & {str(run_id) for run_id, _ in erased}
            assert (await other.get(f"/runs/{kept[0]}")).status_code == 200
            # The open run was asked to stop (no worker takes it here, so it stays open).
            history = await dev_env.client.get_workflow_handle(
                f"batch-{erased[1][0]}").fetch_history()
            assert any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
                       for e in history.events)
    finally:
        await api.stop()

    # Within the grace period nothing is deleted yet, but the user's mailed links, which went
    # with the erasure request: they would decide as the user.
    await sweep(dev_env, pool, task_queue, tmp_path, RetentionSweepInput(erasure_grace_hours=1))
    for run_id, _ in erased:
        assert await rows_of(pool, run_id) == {**SEEDED, "decision_links": 0}

    await sweep(dev_env, pool, task_queue, tmp_path, RetentionSweepInput(erasure_grace_hours=0))
    for run_id, sha in erased:
        assert set((await rows_of(pool, run_id)).values()) == {0}
        assert store.path(sha) is None
        await eventually(lambda run_id=run_id: gone(dev_env.client, f"batch-{run_id}"))
    assert await rows_of(pool, kept[0]) == SEEDED
    assert store.path(kept[1]) is not None
    assert not await gone(dev_env.client, f"batch-{kept[0]}")
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM runs WHERE owner = $1",
                                   erased_user) == 0
