"""`GET /runs?app_package=` and `?stale_after=` (seeds 001 and 002) over HTTP, real Postgres.

Runs are written with the repository (no workflow needed: the filters read the `runs` row and
the mobile kind's `mobile_runs`, which its trigger fills as the run is written); how long a run
has been quiet is set on its row, since nobody waits an hour in a test.
"""

from __future__ import annotations

import uuid

import asyncpg

from tests.inprocess_api import auth
from waystation.persistence.runs import create_run


async def _run(pool: asyncpg.Pool, kind: str, input: dict, owner: str = "alice") -> str:
    run_id = uuid.uuid4()
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind=kind, owner=owner, group_id=None,
                         workflow_id=f"test-{run_id}", idempotency_key=None, input=input)
    return str(run_id)


async def _ids(api, **params) -> list[str]:
    response = await api.get("/runs", params={"limit": 200, **params}, headers=auth())
    assert response.status_code == 200, response.text
    return [r["run_id"] for r in response.json()["runs"]]


async def test_app_package_is_the_mobile_kind_s_field_and_filter(api, pool):
    package = f"com.example.notes{uuid.uuid4().hex[:6]}"
    mine = await _run(pool, "mobile_agent", {"app_package": package, "driver": "simulator"})
    other_app = await _run(pool, "mobile_agent", {"app_package": "com.example.other"})
    # An input field of the same name on another kind is not a mobile run's package.
    batch = await _run(pool, "batch", {"app_package": package, "name": "x"})
    await _run(pool, "mobile_agent", {"app_package": package}, owner="mallory")

    assert await _ids(api, app_package=package) == [mine]
    view = (await api.get(f"/runs/{mine}", headers=auth())).json()
    assert view["app_package"] == package
    assert (await api.get(f"/runs/{other_app}", headers=auth())).json()["app_package"] \
        == "com.example.other"
    # The mobile kind's (its `view` and `run_filters` hooks): another kind's runs have none.
    assert "app_package" not in (await api.get(f"/runs/{batch}", headers=auth())).json()

    refused = await api.get("/runs", params={"app_package": "not a package"}, headers=auth())
    assert refused.status_code == 422
    assert refused.json()["error"]["message"].startswith("query.app_package:")


async def test_stale_after_lists_running_runs_not_updated_for_that_long(api, pool):
    stale, fresh, paused = [await _run(pool, "batch", {"name": n}) for n in "abc"]
    async with pool.acquire() as conn:
        await conn.execute("UPDATE runs SET status = 'running', "
                           "updated_at = now() - interval '2 hours' WHERE id = $1",
                           uuid.UUID(stale))
        await conn.execute("UPDATE runs SET status = 'running' WHERE id = $1", uuid.UUID(fresh))
        # Waiting for a person is not being stuck: only `running` runs are stale.
        await conn.execute("UPDATE runs SET status = 'paused', "
                           "updated_at = now() - interval '2 hours' WHERE id = $1",
                           uuid.UUID(paused))

    found = await _ids(api, stale_after=3600)
    assert stale in found and fresh not in found and paused not in found
    assert stale not in await _ids(api, stale_after=3 * 3600)

    for bad in ("0", "-5", str(31 * 24 * 3600), "soon"):
        refused = await api.get("/runs", params={"stale_after": bad}, headers=auth())
        assert refused.status_code == 422, bad
        assert refused.json()["error"]["message"].startswith("query.stale_after:")

