"""Every run kind rides out a PostgreSQL restart: a batch job and a mobile exploration run,
each followed by an SSE client, while the database is stopped for a few seconds. Their
activities wait the outage out instead of spending retries: no item fails or falls back to
running alone, no step is retried, and each client sees every event once.

Like the validation run's outage test in tests/faults/test_infra_faults.py (which this reuses), the
test brings its own PostgreSQL to stop, so the session's shared server is never disturbed.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import httpx
import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from tests.batch_helpers import activity_counts
from tests.fault_helpers import StreamFollower, api_settings, auth, worker_env
from tests.faults.test_durability import WorkerProcesses, assert_read_model_consistent
from tests.faults.test_infra_faults import _read_logs, private_postgres, until_status  # noqa: F401
from tests.helpers import eventually
from tests.mobile_helpers import SHOP
from waystation.kinds.batch.kind import BATCH
from waystation.persistence.db import create_pool
from waystation.testing import InProcessApi

ITEMS = 80
MOBILE_STEPS = 400
OUTAGE_SECONDS = 4.0


@pytest.mark.slow
async def test_batch_and_mobile_runs_wait_out_a_postgres_restart(
        dev_env: WorkflowEnvironment, private_postgres, tmp_path):  # noqa: F811
    server, url = private_postgres
    task_queue = f"tq-{uuid.uuid4()}"
    address = dev_env.client.service_client.config.target_host
    # Each agent call takes 150 ms: the job is still running when the database goes away.
    workers = WorkerProcesses(worker_env(url, address, task_queue, tmp_path / "data",
                                         delay_ms=150), tmp_path)
    api = InProcessApi(api_settings(url, address, task_queue))
    pool = await create_pool(url, max_size=4)
    workers.start()
    await api.start()
    followers: list[asyncio.Task] = []
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
            job = await _start(http, "batch", {
                "name": "outage", "items": [{"text": f"doc {i}"} for i in range(ITEMS)],
                "steps": [{"name": "summarize", "template": "Summarize: {{ item.text }}"}],
                "max_workers": 4, "max_retries": 0})
            explore = await _start(http, "mobile_agent", {
                "app_package": SHOP, "max_steps": MOBILE_STEPS, "policy": "random", "seed": 3,
                "sensitive_actions": "skip", "stall_steps": MOBILE_STEPS})
            seen = {run_id: StreamFollower(api.url, run_id) for run_id in (job, explore)}
            followers = [asyncio.create_task(f.run()) for f in seen.values()]
            await eventually(lambda: _under_way(pool, job, explore), timeout=60)

            await asyncio.to_thread(server.stop)
            # The outage's length is the fault under test: Postgres stays down this long whatever
            # runs.
            await asyncio.sleep(OUTAGE_SECONDS)
            await asyncio.to_thread(server.start)

            for run_id in (job, explore):
                await until_status(pool, run_id, final=True, timeout=120)
            await asyncio.wait_for(asyncio.gather(*followers), timeout=30)
    finally:
        for task in followers:
            task.cancel()
        await api.stop()
        workers.stop_all()

    try:
        await _assert_job_untouched_by_the_outage(pool, dev_env.client, job)
        await _assert_exploration_untouched_by_the_outage(pool, explore)
        for run_id, follower in seen.items():
            events = await assert_read_model_consistent(pool, run_id)
            follower.assert_each_event_once([e.seq for e in events])
    finally:
        await pool.close()
    assert "database unavailable" in _read_logs(tmp_path), workers.logs()


async def _start(http: httpx.AsyncClient, kind: str, run_input: dict) -> uuid.UUID:
    response = await http.post("/runs", headers=auth(), json={"kind": kind, "input": run_input})
    assert response.status_code == 201, response.text
    return uuid.UUID(response.json()["run_id"])


async def _under_way(pool: asyncpg.Pool, job: uuid.UUID, explore: uuid.UUID) -> bool:
    """Both runs in the middle of their work: some items done, some steps explored."""
    async with pool.acquire() as conn:
        items = await conn.fetchval("SELECT count(*) FROM work_units WHERE job_id = $1 "
                                    "AND status = 'completed'", job)
        steps = await conn.fetchval("SELECT count(*) FROM graph_persistence_outcomes "
                                    "WHERE run_id = $1", explore)
    return 8 <= items < ITEMS - 20 and 20 <= steps < MOBILE_STEPS - 100


async def _assert_job_untouched_by_the_outage(pool: asyncpg.Pool, client: Client,
                                              job: uuid.UUID) -> None:
    async with pool.acquire() as conn:
        status = await conn.fetchval("SELECT status FROM runs WHERE id = $1", job)
        units = await conn.fetch("SELECT status, retry_count FROM work_units WHERE job_id = $1",
                                 job)
    assert status == "completed"
    assert len(units) == ITEMS and {(u["status"], u["retry_count"]) for u in units} == {
        ("completed", 0)}
    # No slice gave up: no item was ever run alone.
    counts = await activity_counts(client, client.get_workflow_handle(BATCH.workflow_id(job)))
    assert counts.get("run_batch_item", 0) == 0, counts


async def _assert_exploration_untouched_by_the_outage(pool: asyncpg.Pool,
                                                      explore: uuid.UUID) -> None:
    async with pool.acquire() as conn:
        run = await conn.fetchrow("SELECT status, result FROM runs WHERE id = $1", explore)
        steps = await conn.fetch("SELECT step FROM graph_persistence_outcomes "
                                 "WHERE run_id = $1 ORDER BY step", explore)
        failed = await conn.fetchval("SELECT count(*) FROM run_events WHERE run_id = $1 "
                                     "AND type = 'agent.node.failed'", explore)
    assert run["status"] == "completed" and run["result"]["stop_reason"] == "max_steps", run
    assert [r["step"] for r in steps] == list(range(1, MOBILE_STEPS + 1))
    assert failed == 0
