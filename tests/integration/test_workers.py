"""Issue 29, seed 004 over HTTP: items record the worker that ran them (as GET /workers names
it), the files and session id of their answers, and a failed item the prompt and turn it
failed on; jobs keep a description, metadata and whether their test item passed; GET /workers
counts each worker's items and lists only the running items the caller may read.

A dev server, real Postgres, and an in-process worker with its own Temporal identity, so its
counts are this test's alone."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import pytest_asyncio
from temporalio.client import Client

from tests.helpers import eventually
from tests.inprocess_api import auth
from waystation.activities.agents import AgentRequest, AgentResponse
from waystation.activities.agents.base import (
    MODEL_REFUSED,
    ModelCallFailed,
    ProgressReporter,
    Usage,
)
from waystation.api.app import create_app
from waystation.kinds.batch.workers_service import EVERYONES
from waystation.settings import Settings
from waystation.temporal_client import DATA_CONVERTER
from waystation.worker import build_worker

STEPS = [{"name": "summarize", "template": "Summarize {{ item.topic }}"},
         {"name": "grade", "template": "Grade {{ outputs.summarize.summary }} for {{ item.text }}"}]


class FilesBackend:
    """An agent that writes each answer to a file and says so, gives each answer a session
    id, refuses any prompt that says REFUSE, and answers only while `open` is set."""

    name = "files"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.open = asyncio.Event()
        self.open.set()

    async def aclose(self) -> None:
        return None

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse:
        await self.open.wait()
        if "REFUSE" in request.instructions:
            raise ModelCallFailed("the model refused the request", type=MODEL_REFUSED,
                                  non_retryable=True, usage=Usage(input_tokens=7))
        path = self.folder / f"{request.item_id}-{request.task}.txt"
        path.write_text(request.instructions)
        return AgentResponse(output={"summary": request.instructions.lower()},
                             session_id=f"sess-{request.item_id}-{request.task}",
                             output_files=[str(path)], input_tokens=3, output_tokens=2)


@dataclass
class Stack:
    http: httpx.AsyncClient
    worker_id: str
    backend: FilesBackend


@pytest_asyncio.fixture
async def stack(settings: Settings, dev_env, pool,
                tmp_path: Path) -> AsyncIterator[Stack]:
    # Read afresh on every request: these tests watch totals change.
    app = create_app(settings.model_copy(update={"workers_cache_seconds": 0}))
    # Its own connection: a worker's identity is its client's (what pollers and items show).
    worker_id = f"{uuid.uuid4().hex[:8]}@test-worker"
    client = await Client.connect(dev_env.client.service_client.config.target_host,
                                  namespace=dev_env.client.namespace, identity=worker_id,
                                  data_converter=DATA_CONVERTER)
    backend = FilesBackend(tmp_path)
    worker = build_worker(client, pool, task_queue=settings.temporal_task_queue,
                          backend=backend)
    async with app.router.lifespan_context(app), worker:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield Stack(http, worker_id, backend)


async def submit(http: httpx.AsyncClient, user: str = "alice", **job) -> httpx.Response:
    return await http.post("/runs", json={"kind": "batch", "input": {
        "name": "reviews", "steps": STEPS, "max_retries": 0, **job}}, headers=auth(user))


async def wait_job(http: httpx.AsyncClient, job_id: str, done, user: str = "alice") -> dict:
    async def check() -> dict | None:
        job = (await http.get(f"/jobs/{job_id}", headers=auth(user))).json()
        return job if done(job) else None
    return await eventually(check, timeout=40)


async def worker_row(http: httpx.AsyncClient, worker_id: str, user: str = "alice",
                     role: str = "user") -> dict | None:
    response = await http.get("/workers", headers=auth(user, role))
    assert response.status_code == 200, response.text
    return next((w for w in response.json()["workers"] if w["worker_id"] == worker_id), None)


async def test_items_record_their_worker_files_session_and_failed_prompt(stack):
    http = stack.http
    # Polling (once it has polled for both kinds of task), nothing run yet.
    async def polling() -> dict | None:
        row = await worker_row(http, stack.worker_id)
        return row if row and sorted(row["polls"]) == ["activity", "workflow"] else None
    row = await eventually(polling, timeout=20)
    assert row["status"] == "idle" and row["units_completed"] == 0

    created = await submit(http, items=[{"topic": "Pens", "text": "fine"},
                                        {"topic": "Ink", "text": "REFUSE"}],
                           failure_threshold=0.9, description="Grade the stationery reviews",
                           metadata={"ticket": "OPS-12", "owner_team": ["ops", 2]})
    assert created.status_code == 201, created.text
    job_id = created.json()["run_id"]
    job = await wait_job(http, job_id, lambda j: j.get("status") == "completed")
    assert job["counts"] == {"completed": 1, "failed": 1}
    assert job["description"] == "Grade the stationery reviews"
    assert job["metadata"] == {"ticket": "OPS-12", "owner_team": ["ops", 2]}
    assert job["test_passed"] is None  # no test item asked for

    items = (await http.get(f"/jobs/{job_id}/items", headers=auth())).json()["items"]
    done, failed = items
    assert done["worker_id"] == failed["worker_id"] == stack.worker_id
    assert datetime.fromisoformat(done["assigned_at"]) <= datetime.fromisoformat(
        done["started_at"])
    assert done["session_id"] == f"sess-{done['item_id']}-grade"
    assert [Path(f).name for f in done["output_files"]] == [
        f"{done['item_id']}-summarize.txt", f"{done['item_id']}-grade.txt"]

    # The failed item keeps the prompt it failed on and its whole conversation.
    assert failed["status"] == "failed" and "refused" in failed["error"]
    summary = "summarize ink"
    assert failed["rendered_prompt"] == f"Grade {summary} for REFUSE"
    assert [(t["step"], t.get("error")) for t in failed["conversation"]] == [
        ("summarize", None), ("grade", "the model refused the request")]
    assert failed["conversation"][0]["output"]["fields"] == {"summary": summary}
    assert failed["conversation"][1]["prompt"] == failed["rendered_prompt"]
    assert failed["session_id"] == f"sess-{failed['item_id']}-summarize"

    # A re-run of the failed item is the same job again: it keeps what the job is about.
    retry = await http.post(f"/jobs/{job_id}/retry-failed", headers=auth())
    assert retry.status_code == 201, retry.text
    again = await wait_job(http, retry.json()["run_id"], lambda j: j.get("status") == "failed")
    assert (again["description"], again["metadata"]) == (job["description"], job["metadata"])

    # The worker's counts are those items'.
    row = await worker_row(http, stack.worker_id)
    assert row is not None and row["status"] == "idle" and row["running"] == 0
    assert (row["units_completed"], row["units_failed"]) == (1, 2)
    assert row["total_execution_seconds"] == done["execution_ms"] / 1000
    assert row["last_heartbeat"] is not None and row["current_items"] == []


async def test_a_job_records_whether_its_test_item_passed(stack):
    http = stack.http
    passing = await submit(http, items=[{"topic": "a", "text": "ok"}, {"topic": "b", "text": "ok"}],
                           test_first=True)
    failing = await submit(http, items=[{"topic": "a", "text": "REFUSE"},
                                        {"topic": "b", "text": "ok"}], test_first=True)
    passed = await wait_job(http, passing.json()["run_id"],
                            lambda j: j.get("status") == "completed")
    assert passed["test_passed"] is True and passed["test_unit_id"] is not None
    # The failed test item stops the job at a gate; the job says why already.
    stopped = await wait_job(http, failing.json()["run_id"],
                             lambda j: j.get("test_passed") is not None)
    assert stopped["test_passed"] is False and stopped["counts"].get("failed") == 1
    await http.post(f"/runs/{failing.json()['run_id']}/cancel", headers=auth())


async def test_description_and_metadata_are_bounded(stack):
    http = stack.http
    items = [{"topic": "a", "text": "b"}]
    cases = [
        ({"description": "x" * 4001}, "description", "string_too_long"),
        ({"metadata": {"blob": "x" * 17_000}}, "metadata", "value_error"),
        ({"metadata": ["not", "an", "object"]}, "metadata", "dict_type"),
        # Whether the test item passed is the job's finding, never the caller's say.
        ({"test_passed": True}, "test_passed", "extra_forbidden"),
    ]
    for fields, name, kind in cases:
        response = await submit(http, items=items, **fields)
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_request"
        detail = error["details"][0]
        assert detail["loc"][-1] == name and detail["type"] == kind, detail
        assert error["message"].startswith(".".join(str(p) for p in detail["loc"]))
    too_big = await submit(http, items=items, metadata={"blob": "x" * 17_000})
    assert "at most 16384 bytes of JSON" in too_big.json()["error"]["message"]


async def test_workers_list_only_the_running_items_the_caller_may_read(stack):
    http = stack.http
    stack.backend.open.clear()  # the item stays running until the test lets it answer
    created = await submit(http, items=[{"topic": "held", "text": "ok"}])
    job_id = created.json()["run_id"]

    async def running() -> dict | None:
        row = await worker_row(http, stack.worker_id)
        return row if row and row["current_items"] else None
    mine = await eventually(running, timeout=30)
    assert mine["status"] == "active" and mine["running"] == 1
    [item] = mine["current_items"]
    assert (item["job_id"], item["run_id"], item["ordinal"]) == (job_id, job_id, 0)

    # Another user sees the worker busy, but not whose item it runs.
    theirs = await worker_row(http, stack.worker_id, user="mallory")
    assert theirs is not None and theirs["status"] == "active" and theirs["running"] == 1
    assert theirs["current_items"] == []
    assert job_id not in (await http.get("/workers", headers=auth("mallory"))).text
    # The service role sees every item.
    ops = await worker_row(http, stack.worker_id, user="ops", role="service")
    assert ops is not None and [i["item_id"] for i in ops["current_items"]] == [item["item_id"]]
    assert (await http.get("/workers")).status_code == 401

    stack.backend.open.set()
    await wait_job(http, job_id, lambda j: j.get("status") == "completed")
    row = await worker_row(http, stack.worker_id)
    assert row is not None and row["status"] == "idle" and row["units_completed"] == 1


async def test_consoles_polling_workers_cost_one_read_per_window(settings, dev_env,
                                                                pool):
    """Issue 38: twenty GET /workers by four users within the cache's window read Temporal's
    pollers and the totals once (the console asks every 2 s, in every tab); the cache makes
    these GETs cheap rather than limiting them."""
    app = create_app(settings.model_copy(update={"workers_cache_seconds": 30}))
    users = [f"{name}-{uuid.uuid4().hex[:6]}" for name in ("ann", "ben", "cy", "di")]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            before = EVERYONES.reads
            answers = [await http.get("/workers", headers=auth(user))
                       for _ in range(5) for user in users]
    assert [a.status_code for a in answers] == [200] * 20
    assert len({a.text for a in answers}) == 1  # the same view: no one's items run
    assert EVERYONES.reads == before + 1
