"""Decisions under pressure, through the HTTP API against the dev server and real Postgres:
the same decision twice at once, approve and reject at the same instant, a decision while no
worker runs, and a decision after the gate expired."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
import pytest_asyncio
from temporalio.worker import Worker

from tests.helpers import eventually
from tests.inprocess_api import auth, start_run, wait_pending
from waystation.activities.agents import backend_named
from waystation.api.app import create_app
from waystation.api.services import workflow_updates
from waystation.settings import Settings
from waystation.worker import build_worker

CHECKPOINT = "approve_founders_brief"


class Stack:
    """The API in process, and a worker that a test can stop and start again."""

    def __init__(self, http: httpx.AsyncClient, dev_env, pool, task_queue: str) -> None:  # type: ignore[no-untyped-def]
        self.http, self._env, self._pool, self._queue = http, dev_env, pool, task_queue
        self._worker: Worker | None = None

    async def start_worker(self) -> None:
        assert self._worker is None
        # A short sticky timeout: after a stop, the next task goes to any worker quickly.
        self._worker = build_worker(self._env.client, self._pool, task_queue=self._queue,
                                    backend=backend_named("offline"),
                                    sticky_queue_schedule_to_start_timeout=timedelta(seconds=1))
        await self._worker.__aenter__()

    async def stop_worker(self) -> None:
        assert self._worker is not None
        await self._worker.__aexit__(None, None, None)
        self._worker = None


@pytest_asyncio.fixture
async def stack(settings: Settings, dev_env, pool) -> AsyncIterator[Stack]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            stack = Stack(http, dev_env, pool, settings.temporal_task_queue)
            await stack.start_worker()
            try:
                yield stack
            finally:
                if stack._worker is not None:
                    await stack.stop_worker()


async def gate_rows(pool, run_id: str, checkpoint: str = CHECKPOINT) -> list[dict]:  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT id, status, decision, feedback, decision_by FROM hitl_requests "
            "WHERE run_id = $1 AND checkpoint_name = $2 ORDER BY created_at",
            uuid.UUID(run_id), checkpoint)
    return [dict(r) for r in rows]


async def event_types(pool, run_id: str) -> list[str]:  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT type FROM run_events WHERE run_id = $1 ORDER BY seq",
                                uuid.UUID(run_id))
    return [r["type"] for r in rows]


async def read_model(pool, run_id: str) -> tuple:  # type: ignore[no-untyped-def]
    """Everything the read model holds about a run, to compare before and after."""
    key = uuid.UUID(run_id)
    async with pool.acquire() as conn:
        run = await conn.fetchrow("SELECT status, current_phase, hitl_state, last_seq, result, "
                                  "updated_at FROM runs WHERE id = $1", key)
        gates = await conn.fetch("SELECT id, status, decision, decision_by, updated_at "
                                 "FROM hitl_requests WHERE run_id = $1 ORDER BY created_at", key)
        events = await conn.fetchval("SELECT count(*) FROM run_events WHERE run_id = $1", key)
        snapshots = await conn.fetchval(
            "SELECT count(*) FROM run_snapshots WHERE run_id = $1", key)
    return tuple(run.values()), [tuple(g.values()) for g in gates], events, snapshots


def decided(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["decision"] is not None]


async def test_same_decision_twice_at_once_is_one_decision_with_one_answer(stack, pool):
    http = stack.http
    run_ids = [await start_run(http, gates=[CHECKPOINT]) for _ in range(3)]
    for run_id in run_ids:
        await wait_pending(http, run_id, CHECKPOINT)
    body = {"decision": "approve", "feedback": "ship it"}
    answers = await asyncio.gather(*(
        http.post(f"/runs/{run_id}/decisions/{CHECKPOINT}", json=body, headers=auth())
        for run_id in run_ids for _ in range(2)))
    assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers]
    for i, run_id in enumerate(run_ids):
        first, second = answers[2 * i].json(), answers[2 * i + 1].json()
        assert first == second and first["status"] == "approved"
        rows = await gate_rows(pool, run_id)
        assert len(decided(rows)) == 1 and rows[0]["feedback"] == "ship it"
        # Sent a third time, later: still the same answer, still one decision.
        again = await http.post(f"/runs/{run_id}/decisions/{CHECKPOINT}", json=body,
                                headers=auth())
        assert again.status_code == 200 and again.json() == first
    for run_id in run_ids:
        async def finished(run_id: str = run_id) -> bool:
            run = (await http.get(f"/runs/{run_id}", headers=auth())).json()
            return run["status"] == "completed"
        await eventually(finished, timeout=30)
        assert (await event_types(pool, run_id)).count("gate.decided") == 1
        assert len(decided(await gate_rows(pool, run_id))) == 1


async def test_approve_and_reject_at_the_same_instant_one_wins(stack, pool):
    http = stack.http
    run_ids = [await start_run(http, gates=[CHECKPOINT], max_phase_retries=0)
               for _ in range(4)]
    for run_id in run_ids:
        await wait_pending(http, run_id, CHECKPOINT)
    for run_id in run_ids:
        url = f"/runs/{run_id}/decisions/{CHECKPOINT}"
        approve, reject = await asyncio.gather(
            http.post(url, json={"decision": "approve"}, headers=auth()),
            http.post(url, json={"decision": "reject", "feedback": "no"}, headers=auth()))
        assert sorted([approve.status_code, reject.status_code]) == [200, 409], \
            (approve.text, reject.text)
        winner, loser = (approve, reject) if approve.status_code == 200 else (reject, approve)
        assert loser.json()["error"]["code"] == "not_pending"
        rows = decided(await gate_rows(pool, run_id))
        assert len(rows) == 1
        assert rows[0]["decision"] == winner.json()["decision"]
        assert str(rows[0]["id"]) == winner.json()["request_id"]
    for run_id in run_ids:
        async def finished(run_id: str = run_id) -> bool:
            run = (await http.get(f"/runs/{run_id}", headers=auth())).json()
            return run["status"] in ("completed", "failed")
        await eventually(finished, timeout=30)
        assert (await event_types(pool, run_id)).count("gate.decided") == 1
        assert len(decided(await gate_rows(pool, run_id))) == 1


async def test_decision_while_no_worker_runs_is_503_then_applied_once(stack, pool, monkeypatch):
    """With no worker, the API answers 503 + Retry-After after its update timeout (shortened
    here from 10 s). Temporal keeps the update: when a worker returns it is applied, once,
    and sending the decision again answers with that same outcome."""
    monkeypatch.setattr(workflow_updates, "UPDATE_RPC_TIMEOUT", timedelta(seconds=2))
    http = stack.http
    run_id = await start_run(http, gates=[CHECKPOINT])
    await wait_pending(http, run_id, CHECKPOINT)
    await stack.stop_worker()

    url, body = f"/runs/{run_id}/decisions/{CHECKPOINT}", {"decision": "approve",
                                                         "feedback": "while down"}
    started = time.monotonic()
    response = await http.post(url, json=body, headers=auth())
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == "5"
    assert response.json()["error"]["code"] == "unavailable"
    assert time.monotonic() - started < 10
    # "Nothing is applied without a worker": an absence, shown only by waiting a while.
    await asyncio.sleep(1.0)
    rows = await gate_rows(pool, run_id)
    assert [r["status"] for r in rows] == ["pending"], "nothing is applied without a worker"

    await stack.start_worker()
    # The update the server kept is applied when the worker comes back, without a resend.
    async def applied() -> list[dict]:
        return decided(await gate_rows(pool, run_id))
    rows = await eventually(applied, timeout=30)
    assert len(rows) == 1 and rows[0]["decision"] == "approve"
    assert rows[0]["feedback"] == "while down" and rows[0]["decision_by"] == "alice"
    # The client's retry gets the same outcome; still one decision.
    retried = await http.post(url, json=body, headers=auth())
    assert retried.status_code == 200, retried.text
    assert retried.json()["request_id"] == str(rows[0]["id"])
    assert retried.json()["status"] == "approved"

    async def finished() -> bool:
        run = (await http.get(f"/runs/{run_id}", headers=auth())).json()
        return run["status"] == "completed"
    await eventually(finished, timeout=30)
    assert len(decided(await gate_rows(pool, run_id))) == 1
    assert (await event_types(pool, run_id)).count("gate.decided") == 1


@pytest.mark.parametrize("policy,final_status", [("pause", "paused"), ("fail", "failed"),
                                                 ("default", "completed")])
async def test_decision_after_expiry_is_409_and_changes_nothing(stack, pool, policy,
                                                                final_status):
    http = stack.http
    run_id = await start_run(http, gates=[CHECKPOINT], gate_timeout_seconds=1,
                             expiry_policy=policy)

    async def expired() -> bool:
        rows = await gate_rows(pool, run_id)
        run = (await http.get(f"/runs/{run_id}", headers=auth())).json()
        return bool(rows) and rows[0]["status"] == "expired" and \
            run["status"] == final_status
    await eventually(expired, timeout=30)
    # Whatever follows the expiry has been written: the read model has no "settled" event to
    # await, and the comparison below needs it still.
    await asyncio.sleep(0.5)
    before = await read_model(pool, run_id)

    for body in ({"decision": "approve"}, {"decision": "reject", "feedback": "late"}):
        late = await http.post(f"/runs/{run_id}/decisions/{CHECKPOINT}", json=body,
                               headers=auth())
        assert late.status_code == 409, late.text
        assert late.json()["error"]["code"] in ("not_pending", "run_finished")
    # The late decisions must change nothing: an absence, shown only by waiting a while.
    await asyncio.sleep(0.5)
    assert await read_model(pool, run_id) == before
    rows = await gate_rows(pool, run_id)
    assert rows[0]["status"] == "expired"
    assert all(r["decision_by"] in (None, "system") for r in rows)
    if policy == "pause":
        with contextlib.suppress(Exception):
            await http.post(f"/runs/{run_id}/cancel", headers=auth())
