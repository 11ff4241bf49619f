"""Seed 000's `skipped` progress status over HTTP: a task a person skips at the task_failed gate
writes a progress event saying so. Dev server, real Postgres, an in-process worker whose agent
fails `assess_fit` once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest_asyncio

from tests.helpers import IDEA, FailingTasks, eventually
from tests.inprocess_api import auth
from waystation.api.app import create_app
from waystation.settings import Settings
from waystation.worker import build_worker


@pytest_asyncio.fixture
async def api(settings: Settings, dev_env, pool) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    worker = build_worker(dev_env.client, pool, task_queue=settings.temporal_task_queue,
                          backend=FailingTasks({"assess_fit"}))
    async with app.router.lifespan_context(app), worker:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client


async def test_a_task_skipped_at_the_task_failed_gate_writes_a_skipped_event(api):
    created = await api.post("/runs", headers=auth(), json={
        "kind": "validation", "input": {"entrepreneur_input": IDEA, "gates": []}})
    assert created.status_code == 201, created.text
    run_id = created.json()["run_id"]

    async def waiting() -> dict | None:
        run = (await api.get(f"/runs/{run_id}", headers=auth())).json()
        return run if run["pending_checkpoint"] == "task_failed" else None
    await eventually(waiting, timeout=60)
    decided = await api.post(f"/runs/{run_id}/decisions/task_failed", headers=auth(),
                             json={"decision": "skip", "feedback": "go on without it"})
    assert decided.status_code == 200, decided.text

    async def finished() -> dict | None:
        run = (await api.get(f"/runs/{run_id}", headers=auth())).json()
        return run if run["status"] in ("completed", "failed") else None
    assert (await eventually(finished, timeout=60))["status"] == "completed"

    events = (await api.get(f"/runs/{run_id}/events", params={"limit": 1000},
                            headers=auth())).json()["events"]
    skipped = [e for e in events if e["status"] == "skipped"]
    assert len(skipped) == 1
    event = skipped[0]
    assert event["type"] == "task.skipped" and event["task"] == "assess_fit"
    assert event["phase"] == 1 and event["crew"]
    assert "the answer is invalid" in event["error_message"]
    assert event["output"] == {"decided_at_gate": "task_failed", "missing": "fit_assessment"}
    # Told in order: after the failure and the decision, before the phase completes.
    types = [e["type"] for e in events]
    assert types.index("task.failed") < types.index("gate.decided") \
        < types.index("task.skipped") < types.index("phase.completed", types.index("task.failed"))
