"""Seed 002's per-item pipeline tools over HTTP: items by the step they stand at, one step's
outputs across a job, re-running chosen items from a chosen step, and the placeholder check.

Dev server, real Postgres, an in-process worker whose agent answers by a script: an item whose
text says FAIL fails at `grade`, and every answer repeats its prompt (so a placeholder in an
item reaches the answer, as an unrendered one reached the model in the seed's incident).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest_asyncio

from tests.batch_helpers import ScriptedBackend
from tests.helpers import eventually
from tests.inprocess_api import auth
from waystation.activities.agents import AgentRequest
from waystation.api.app import create_app
from waystation.kinds.batch.activities.checks import output_flags
from waystation.settings import Settings
from waystation.worker import build_worker

STEPS = [
    {"name": "summarize", "template": "Summarize: {{ item.text }}",
     "branches": [{"when": "item.short", "goto": "end"}]},
    {"name": "grade", "template": "Grade: {{ outputs.summarize }}"},
    {"name": "publish", "template": "Publish: {{ outputs.grade }}"},
]


def _answer(request: AgentRequest, n: int) -> dict[str, Any]:
    if request.task == "grade" and "FAIL" in request.instructions:
        raise RuntimeError("the grader gave up")
    return {"text": f"{request.task}: {request.instructions}"}


@pytest_asyncio.fixture
async def backend() -> ScriptedBackend:
    return ScriptedBackend(_answer)


@pytest_asyncio.fixture
async def api(settings: Settings, dev_env, pool,
              backend: ScriptedBackend) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    worker = build_worker(dev_env.client, pool, task_queue=settings.temporal_task_queue,
                          backend=backend)
    async with app.router.lifespan_context(app), worker:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client


ITEMS = [{"text": "one", "short": True}, {"text": "two FAIL", "short": False},
         {"text": "three", "short": False}, {"text": "four FAIL", "short": False},
         {"text": "five", "short": True}]


async def finished_job(api: httpx.AsyncClient, items: list[dict] | None = None, *,
                       steps: list[dict] | None = None) -> str:
    created = await api.post("/runs", headers=auth(), json={"kind": "batch", "input": {
        "name": "postings", "items": items or ITEMS, "steps": steps or STEPS,
        "max_retries": 0, "failure_threshold": 0.9}})
    assert created.status_code == 201, created.text
    job_id = created.json()["run_id"]

    async def done() -> dict | None:
        job = (await api.get(f"/jobs/{job_id}", headers=auth())).json()
        return job if job.get("status") in ("completed", "failed") else None
    await eventually(done, timeout=40)
    return job_id


async def items_at(api: httpx.AsyncClient, job_id: str, step: str, **params) -> list[int]:
    response = await api.get(f"/jobs/{job_id}/items", params={"at_step": step, **params},
                             headers=auth())
    assert response.status_code == 200, response.text
    return [i["ordinal"] for i in response.json()["items"]]


async def test_items_by_the_step_they_stand_at(api):
    job_id = await finished_job(api)
    # Short items ended at summarize; the FAIL items failed at grade and stand there; the
    # rest went through to publish.
    assert await items_at(api, job_id, "summarize") == [0, 4]
    assert await items_at(api, job_id, "grade") == [1, 3]
    assert await items_at(api, job_id, "grade", status="completed") == []
    assert await items_at(api, job_id, "publish") == [2]
    page = (await api.get(f"/jobs/{job_id}/items", params={"at_step": "grade", "limit": 1},
                          headers=auth())).json()
    assert [i["ordinal"] for i in page["items"]] == [1] and page["items"][0]["at_step"] == "grade"
    rest = await items_at(api, job_id, "grade", cursor=page["next_cursor"])
    assert rest == [3]
    item = (await api.get(f"/items/{page['items'][0]['item_id']}", headers=auth())).json()
    assert item["at_step"] == "grade" and item["path"] == ["summarize"]

    unknown = await api.get(f"/jobs/{job_id}/items", params={"at_step": "review"},
                            headers=auth())
    assert unknown.status_code == 422
    error = unknown.json()["error"]
    assert error["message"].startswith("query.at_step: ") and "'review'" in error["message"]
    assert error["details"][0]["loc"] == ["query", "at_step"]


async def test_one_steps_outputs_across_the_job_paged(api):
    job_id = await finished_job(api)
    first = (await api.get(f"/jobs/{job_id}/steps/summarize/outputs", params={"limit": 3},
                           headers=auth())).json()
    assert [o["ordinal"] for o in first["outputs"]] == [0, 1, 2]
    assert first["outputs"][1]["output"]["text"] == "summarize: Summarize: two FAIL"
    assert {o["step"] for o in first["outputs"]} == {"summarize"}
    rest = (await api.get(f"/jobs/{job_id}/steps/summarize/outputs",
                          params={"cursor": first["next_cursor"]}, headers=auth())).json()
    assert [o["ordinal"] for o in rest["outputs"]] == [3, 4] and rest["next_cursor"] is None
    # Only the items that ran a step have its output.
    grade = (await api.get(f"/jobs/{job_id}/steps/grade/outputs", headers=auth())).json()
    assert [o["ordinal"] for o in grade["outputs"]] == [2]

    unknown = await api.get(f"/jobs/{job_id}/steps/review/outputs", headers=auth())
    assert unknown.status_code == 422
    assert unknown.json()["error"]["details"][0]["loc"] == ["path", "step"]
    assert (await api.get(f"/jobs/{job_id}/steps/summarize/outputs",
                          headers=auth("mallory"))).status_code == 404



def _never_fails(request: AgentRequest, n: int) -> dict[str, Any]:
    return {"text": f"{request.task}: {request.instructions}"}


async def outputs_of(api: httpx.AsyncClient, item_id: str) -> dict[str, dict]:
    found = (await api.get(f"/items/{item_id}/outputs", headers=auth())).json()
    return {o["step"]: o for o in found["outputs"]}


async def test_rerun_chosen_items_from_a_step_keeps_their_earlier_outputs(api, backend, pool):
    job_id = await finished_job(api)
    items = (await api.get(f"/jobs/{job_id}/items", headers=auth())).json()["items"]
    failed, completed = items[1], items[2]
    backend.rule = _never_fails  # the grader works now

    body = {"item_ids": [completed["item_id"], failed["item_id"]], "from_step": "grade"}
    rerun = await api.post(f"/jobs/{job_id}/rerun", json=body,
                           headers={**auth(), "Idempotency-Key": "rerun-1"})
    assert rerun.status_code == 201, rerun.text
    new_id = rerun.json()["run_id"]
    again = await api.post(f"/jobs/{job_id}/rerun", json=body,
                           headers={**auth(), "Idempotency-Key": "rerun-1"})
    assert again.json()["run_id"] == new_id and again.headers["Idempotent-Replayed"] == "true"
    other_body = await api.post(f"/jobs/{job_id}/rerun", json={**body, "from_step": "publish"},
                                headers={**auth(), "Idempotency-Key": "rerun-1"})
    assert other_body.status_code == 409

    run = (await api.get(f"/runs/{new_id}", headers=auth())).json()
    assert run["input"]["retry_of"] == job_id and run["input"]["rerun_from"] == "grade"
    assert run["input"]["name"] == "postings (rerun from grade)"
    new_job = await eventually(lambda: _finished(api, new_id), timeout=40)
    assert new_job["counts"] == {"completed": 2}
    new_items = (await api.get(f"/jobs/{new_id}/items", headers=auth())).json()["items"]
    # The job's order, whatever order the ids came in.
    assert [i["payload"]["text"] for i in new_items] == ["two FAIL", "three"]
    for source, new in ((failed, new_items[0]), (completed, new_items[1])):
        assert new["path"] == ["summarize", "grade", "publish"]
        before, after = await outputs_of(api, source["item_id"]), \
            await outputs_of(api, new["item_id"])
        # The kept step is the source's output, not a new answer; grade ran again.
        assert after["summarize"]["output"] == before["summarize"]["output"]
        assert after["summarize"]["rendered_prompt"] == before["summarize"]["rendered_prompt"]
        assert after["grade"]["output"]["text"].startswith("grade: Grade: summarize:")
        asked = [r.task for r in backend.requests if r.item_id == new["item_id"]]
        assert asked == ["grade", "publish"]
    # The source job never moves.
    assert (await api.get(f"/jobs/{job_id}", headers=auth())).json()["counts"] \
        == {"completed": 3, "failed": 2}


async def _finished(api: httpx.AsyncClient, job_id: str) -> dict | None:
    job = (await api.get(f"/jobs/{job_id}", headers=auth())).json()
    return job if job.get("status") in ("completed", "failed") else None


async def test_rerun_refusals_name_the_field_and_write_nothing(api, pool):
    job_id = await finished_job(api)
    other_job = await finished_job(api, [{"text": "elsewhere", "short": True}])
    items = (await api.get(f"/jobs/{job_id}/items", headers=auth())).json()["items"]
    stranger = (await api.get(f"/jobs/{other_job}/items", headers=auth())).json()["items"][0]
    mine = items[0]["item_id"]

    async def refused(body: dict, loc: list) -> str:
        response = await api.post(f"/jobs/{job_id}/rerun", json=body, headers=auth())
        assert response.status_code == 422, response.text
        assert response.json()["error"]["details"][0]["loc"] == loc
        return response.json()["error"]["message"]

    message = await refused({"from_step": "review"}, ["body", "from_step"])
    assert "'review'" in message
    await refused({"item_ids": [mine], "from_step": "not a step"}, ["body", "from_step"])
    unknown = "00000000-0000-4000-8000-000000000000"
    message = await refused({"item_ids": [mine, unknown], "from_step": "grade"},
                            ["body", "item_ids", 1])
    assert unknown in message
    await refused({"item_ids": [stranger["item_id"]], "from_step": "grade"},
                  ["body", "item_ids", 0])
    await refused({"item_ids": [], "from_step": "grade"}, ["body", "item_ids"])
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM runs WHERE input->>'retry_of' = $1",
                                   job_id) == 0
    assert (await api.post(f"/jobs/{job_id}/rerun", json={"from_step": "grade"},
                           headers=auth("mallory"))).status_code == 404

    # Without item_ids: every item, here from the first step (nothing kept).
    everything = await api.post(f"/jobs/{job_id}/rerun", json={"from_step": "summarize"},
                                headers=auth())
    assert everything.status_code == 201
    run = (await api.get(f"/runs/{everything.json()['run_id']}", headers=auth())).json()
    assert len(run["input"]["items"]) == 5 and run["input"]["kept_outputs"] is None


async def test_answers_with_unrendered_placeholders_are_flagged(api):
    items = [{"text": "Grade {session_9_output} please", "short": True},
             {"text": "fine text", "short": True},
             {"text": "Hello {{ customer.name }}, {% if vip %}welcome{% endif %}",
              "short": True}]
    job_id = await finished_job(api, items)
    flagged = (await api.get(f"/jobs/{job_id}/items", params={"flagged": "true"},
                             headers=auth())).json()["items"]
    assert [i["ordinal"] for i in flagged] == [0, 2]
    # Flagged, not failed: the answer is kept for a person to judge.
    assert {i["status"] for i in flagged} == {"completed"}
    flag = flagged[0]["flags"][0]
    assert flag["check"] == "unrendered_placeholder" and flag["step"] == "summarize"
    assert flag["found"] == ["{session_9_output}"]
    assert "{session_9_output}" in flag["reason"] and "never filled in" in flag["reason"]
    assert flagged[1]["flags"][0]["found"] == ["{{ customer.name }}", "{% if vip %}",
                                               "{% endif %}"]
    clean = (await api.get(f"/jobs/{job_id}/items", params={"flagged": "false"},
                           headers=auth())).json()["items"]
    assert [(i["ordinal"], i["flags"]) for i in clean] == [(1, [])]
    item = (await api.get(f"/items/{flagged[0]['item_id']}", headers=auth())).json()
    assert item["flags"] == flagged[0]["flags"]
    output = (await api.get(f"/items/{flagged[0]['item_id']}/outputs/summarize",
                            headers=auth())).json()
    assert output["flags"] == flagged[0]["flags"]

    # A re-run keeps the flags of the outputs it keeps (this item's branch ends it at once).
    rerun = await api.post(f"/jobs/{job_id}/rerun", headers=auth(), json={
        "item_ids": [flagged[0]["item_id"]], "from_step": "grade"})
    new_id = rerun.json()["run_id"]
    await eventually(lambda: _finished(api, new_id), timeout=40)
    kept = (await api.get(f"/jobs/{new_id}/items", headers=auth())).json()["items"][0]
    assert kept["status"] == "completed" and kept["flags"] == flagged[0]["flags"]


def test_the_placeholder_check_leaves_json_and_plain_text_alone():
    assert output_flags("s", '{"summary": "ok", "nested": {"score": 3}}') == []
    assert output_flags("s", "a set {1, 2} and a dict {}") == []
    assert [f.found for f in output_flags("s", "Dear ${first_name}")] == [["${first_name}"]]
