"""Batch jobs through the HTTP API: dev server, real Postgres, an in-process worker."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio

from tests.helpers import eventually
from tests.inprocess_api import auth
from waystation.activities.agents import backend_named
from waystation.api.app import create_app
from waystation.kinds.batch.settings import BatchSettings
from waystation.settings import Settings
from waystation.worker import build_worker


@pytest_asyncio.fixture
async def api(settings: Settings, dev_env, pool,
              tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    # Items files may come from this test's folder only (WAYSTATION_ITEMS_DIRS).
    settings = settings.model_copy(
        update={"kind_settings": (BatchSettings(items_dirs=str(tmp_path)),)})
    app = create_app(settings)
    worker = build_worker(dev_env.client, pool, task_queue=settings.temporal_task_queue,
                          backend=backend_named("offline", delay_ms=30),
                          settings=settings)
    async with app.router.lifespan_context(app), worker:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client


STEPS = [
    {"name": "summarize", "template": "Summarize: {{ item.text }}",
     "branches": [{"when": "item.short", "goto": "end"}]},
    {"name": "grade", "template": "Grade this summary: {{ outputs.summarize.summary }}"},
]


async def submit(api: httpx.AsyncClient, **job) -> httpx.Response:
    return await api.post("/runs", json={"kind": "batch", "input": {"name": "postings", **job}},
                          headers=auth())


async def wait_status(api: httpx.AsyncClient, job_id: str, *statuses: str) -> dict:
    async def check() -> dict | None:
        job = (await api.get(f"/jobs/{job_id}", headers=auth())).json()
        return job if job.get("status") in statuses else None
    return await eventually(check, timeout=40)


async def test_invalid_templates_are_refused_naming_the_step(api):
    bad = [{"name": "summarize", "template": "{{ item.text }"}]
    response = await submit(api, items=[{"text": "x"}], steps=bad)
    assert response.status_code == 422
    assert "step 'summarize': template: syntax error" in response.json()["error"]["message"]
    forward = [{"name": "a", "template": "{{ outputs.b }}"}, {"name": "b", "template": "x"}]
    response = await submit(api, items=[{"text": "x"}], steps=forward)
    assert response.status_code == 422
    assert "step 'a': template: outputs.b is not an earlier step" in response.text
    unknown = [{"name": "a", "template": "{{ posting.text }}"}]
    assert "unknown name 'posting'" in (await submit(api, items=[{}], steps=unknown)).text


async def test_job_items_and_outputs_queries(api, tmp_path: Path):
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps({"text": f"job posting {i}", "short": i % 2 == 0})
                              for i in range(12)) + "\n")
    created = await submit(api, items_path=str(path), steps=STEPS, max_workers=4)
    assert created.status_code == 201, created.text
    job_id = created.json()["run_id"]
    job = await wait_status(api, job_id, "completed")
    assert job["counts"] == {"completed": 12} and job["total_units"] == 12
    assert job["input_tokens"] > 0 and job["steps"] == ["summarize", "grade"]

    first = (await api.get(f"/jobs/{job_id}/items", params={"limit": 5}, headers=auth())).json()
    assert [i["ordinal"] for i in first["items"]] == [0, 1, 2, 3, 4]
    rest = (await api.get(f"/jobs/{job_id}/items",
                          params={"cursor": first["next_cursor"], "status": "completed"},
                          headers=auth())).json()
    assert [i["ordinal"] for i in rest["items"]] == list(range(5, 12))
    assert rest["next_cursor"] is None
    assert (await api.get(f"/jobs/{job_id}/items", params={"status": "failed"},
                          headers=auth())).json()["items"] == []

    long_item = first["items"][1]
    assert long_item["path"] == ["summarize", "grade"]
    outs = (await api.get(f"/items/{long_item['item_id']}/outputs", headers=auth())).json()
    assert [o["step"] for o in outs["outputs"]] == ["summarize", "grade"]
    summary = outs["outputs"][0]["output"]["fields"]["summary"]
    grade = (await api.get(f"/items/{long_item['item_id']}/outputs/grade",
                           headers=auth())).json()
    assert grade["rendered_prompt"] == f"Grade this summary: {summary}"
    short = first["items"][0]
    assert short["path"] == ["summarize"]
    missing = await api.get(f"/items/{short['item_id']}/outputs/grade", headers=auth())
    assert missing.status_code == 404

    # Another user sees none of it.
    for url in (f"/jobs/{job_id}", f"/jobs/{job_id}/items",
                f"/items/{short['item_id']}/outputs"):
        assert (await api.get(url, headers=auth("mallory"))).status_code == 404
    assert (await api.get(url, headers=auth("ops", "service"))).status_code == 200


async def test_pause_resume_and_cancel_through_the_api(api):
    items = [{"text": f"p{i}"} for i in range(200)]
    steps = [{"name": "summarize", "template": "{{ item.text }}"}]
    job_id = (await submit(api, items=items, steps=steps, max_workers=2)).json()["run_id"]
    await wait_status(api, job_id, "running")
    paused = await api.post(f"/jobs/{job_id}/pause", headers=auth())
    assert paused.status_code == 202 and paused.json()["status"] == "paused"
    again = await api.post(f"/jobs/{job_id}/pause", headers=auth())
    assert again.status_code == 409 and again.json()["error"]["code"] == "job_not_running"
    assert (await api.post(f"/jobs/{job_id}/pause", headers=auth("mallory"))).status_code == 404
    job = await wait_status(api, job_id, "paused")
    resumed = await api.post(f"/jobs/{job_id}/resume", headers=auth())
    assert resumed.status_code == 202 and resumed.json()["status"] == "running"
    await wait_status(api, job_id, "running")
    canceled = await api.post(f"/runs/{job_id}/cancel", headers=auth())
    assert canceled.status_code == 202
    job = await wait_status(api, job_id, "canceled")
    assert job["counts"].get("pending", 0) > 0


async def test_retry_failed_runs_the_failed_items_again_as_a_new_job(api):
    items = [{"text": "first"}, {"headline": "no text"}, {"text": "third"}, {"other": 1}]
    created = await submit(api, items=items, failure_threshold=0.9, test_first=False,
                           steps=[{"name": "summarize", "template": "Summarize: {{ item.text }}"}])
    job_id = created.json()["run_id"]
    job = await wait_status(api, job_id, "completed")
    assert job["counts"] == {"completed": 2, "failed": 2}

    retry = await api.post(f"/jobs/{job_id}/retry-failed", headers=auth())
    assert retry.status_code == 201, retry.text
    retry_id = retry.json()["run_id"]
    assert retry_id != job_id and retry.json()["kind"] == "batch"
    retried = (await api.get(f"/runs/{retry_id}", headers=auth())).json()
    assert retried["input"]["items"] == [items[1], items[3]]
    assert retried["input"]["retry_of"] == job_id
    assert retried["input"]["name"] == "postings (retry)"
    # The same items with the same pipeline fail the same way here (the offline backend is
    # deterministic; a model's transient failures would pass now): both fail, above 90 %.
    again = await wait_status(api, retry_id, "failed")
    assert again["total_units"] == 2 and again["counts"] == {"failed": 2}
    # The finished job never moves; another user cannot retry it.
    assert (await api.get(f"/jobs/{job_id}", headers=auth())).json()["counts"] == job["counts"]
    other = await api.post(f"/jobs/{job_id}/retry-failed", headers=auth("mallory"))
    assert other.status_code == 404


async def test_retry_failed_refuses_running_jobs_and_jobs_without_failures(api):
    created = await submit(api, items=[{"text": f"t{i}"} for i in range(40)], max_workers=1,
                           steps=[{"name": "summarize", "template": "{{ item.text }}"}])
    job_id = created.json()["run_id"]
    await wait_status(api, job_id, "running")
    running = await api.post(f"/jobs/{job_id}/retry-failed", headers=auth())
    assert running.status_code == 409 and running.json()["error"]["code"] == "job_not_finished"
    job = await wait_status(api, job_id, "completed")
    assert job["counts"] == {"completed": 40}
    none = await api.post(f"/jobs/{job_id}/retry-failed", headers=auth())
    assert none.status_code == 409 and none.json()["error"]["code"] == "no_failed_items"
