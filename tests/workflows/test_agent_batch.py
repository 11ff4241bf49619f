"""Batch pipelines against an OpenAI-compatible server: text outputs in templates and
branches, per-step schema, system prompt, model and temperature, cost per attempt."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from pydantic import ValidationError
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError

from tests.batch_helpers import new_batch_run
from tests.helpers import wait_gate
from tests.openai_stub import OpenAIStub, Recorded, Reply
from tests.workflows.test_batch_workflow import outputs, run_with, start, units
from tests.workflows.test_validation_workflow import decide
from waystation.activities.agents.openai_compatible import OpenAICompatibleBackend
from waystation.kinds.batch import repository as jobs_repo
from waystation.kinds.batch.models import BatchInput
from waystation.persistence import runs as runs_repo

# The pipeline of docs/batch.md, plus a scored step with a schema.
STEPS = [
    {"name": "summarize", "template": "Summarize: {{ item.text }}",
     "system": "You write one-line summaries.", "model": "gpt-4o", "temperature": 0.1},
    {"name": "grade", "template": "Grade this summary: {{ outputs.summarize }}",
     "branches": [{"when": "'poor' in output", "goto": "rewrite"}], "next": "score"},
    {"name": "rewrite", "template": "Rewrite: {{ outputs.summarize }} ({{ outputs.grade }})",
     "next": "end"},
    {"name": "score", "template": "Score {{ outputs.summarize | tojson }}",
     "output_schema": {"type": "object", "properties": {"score": {"type": "integer"}},
                       "required": ["score"]},
     "branches": [{"when": "output.score < 5", "goto": "end"}]},
    {"name": "report",
     "template": "Report: {{ outputs.score.score }} {{ outputs.score | tojson }}"},
]


def answer(request: Recorded) -> str:
    text = request.user_text
    if text.startswith("Summarize:"):
        return f"summary of {text.split(': ', 1)[1]}"
    if text.startswith("Grade"):
        return "This summary is poor." if "alpha" in text else "A good summary."
    if request.task == "score":
        return json.dumps({"score": 7})
    return "done"


@pytest_asyncio.fixture
async def stub() -> AsyncIterator[OpenAIStub]:
    server = OpenAIStub(default_text=answer)
    await server.start()
    yield server
    await server.stop()


@pytest_asyncio.fixture
async def backend(stub: OpenAIStub) -> AsyncIterator[OpenAICompatibleBackend]:
    b = OpenAICompatibleBackend(base_url=stub.base_url, api_key=None, model="gpt-4o-mini")
    yield b
    await b.aclose()


async def test_text_outputs_render_and_branch_and_cost_is_summed(time_env, pool, task_queue,
                                                                 run_with, stub, backend):
    await run_with(time_env, pool, task_queue, backend)
    arg = await new_batch_run(pool, items=[{"text": "alpha doc"}, {"text": "beta doc"}],
                              steps=STEPS)
    result = await (await start(time_env.client, arg, task_queue)).result()
    assert (result.completed, result.failed) == (2, 0)

    alpha, beta = await units(pool, arg.run_id)
    assert alpha.path == ["summarize", "grade", "rewrite"]
    assert beta.path == ["summarize", "grade", "score", "report"]
    a, b = await outputs(pool, alpha.id), await outputs(pool, beta.id)
    assert a["grade"].rendered_prompt == "Grade this summary: summary of alpha doc"
    assert a["rewrite"].rendered_prompt == ("Rewrite: summary of alpha doc "
                                            "(This summary is poor.)")
    assert b["score"].rendered_prompt == 'Score "summary of beta doc"'
    assert b["report"].rendered_prompt == 'Report: 7 {"score": 7}'
    assert b["score"].output == {"text": '{"score": 7}', "fields": {"score": 7}}

    first = stub.requests[0].body
    assert first["model"] == "gpt-4o" and first["temperature"] == 0.1
    assert first["messages"][0] == {"role": "system", "content": "You write one-line summaries."}
    scored = stub.of_task("score")[0].body["response_format"]["json_schema"]
    assert scored["strict"] is True and scored["schema"]["required"] == ["score"]

    assert all(o.cost_usd > 0 for o in [*a.values(), *b.values()])
    assert alpha.cost_usd == pytest.approx(sum(o.cost_usd for o in a.values()))
    async with pool.acquire() as conn:
        counts = await jobs_repo.unit_counts(conn, arg.run_id)
    assert sum(c.cost_usd for c in counts) == pytest.approx(alpha.cost_usd + beta.cost_usd)


async def test_an_answer_failing_the_step_schema_fails_the_item_with_its_cost(
        time_env, pool, task_queue, run_with, stub, backend):
    await run_with(time_env, pool, task_queue, backend)
    stub.script(Reply('{"score": "high"}'), Reply('```json\n{"score": "7"}\n```'), task="score")
    arg = await new_batch_run(pool, items=[{"text": "beta doc"}], steps=STEPS, max_retries=2,
                              failure_threshold=1)
    result = await (await start(time_env.client, arg, task_queue)).result()
    assert (result.completed, result.failed) == (0, 1)
    (item,) = await units(pool, arg.run_id)
    assert item.status == "failed" and "'score'" in item.error and item.retry_count == 0
    assert len(stub.of_task("score")) == 2  # asked once more, then not retried
    stored = sum(o.cost_usd for o in (await outputs(pool, item.id)).values())
    assert item.cost_usd > stored > 0  # the failed attempt's two calls are counted


@pytest.mark.parametrize("decision", ["raise", "stop"])
async def test_budget_stops_the_job_at_a_gate(time_env, pool, task_queue, run_with, stub,
                                              backend, decision):
    await run_with(time_env, pool, task_queue, backend)
    arg = await new_batch_run(pool, items=[{"text": f"doc {i}"} for i in range(6)],
                              steps=STEPS[:1], max_workers=1, max_cost_usd=0.0000001)
    handle = await start(time_env.client, arg, task_queue)
    await wait_gate(pool, arg.run_id, "raise_budget")
    assert len(stub.requests) == 2  # one slice of two items ran, then the budget was hit
    with pytest.raises(WorkflowUpdateFailedError):
        await decide(handle, "raise_budget", "raise", feedback="0.0000001")
    if decision == "raise":
        await decide(handle, "raise_budget", "raise", feedback="1")
        result = await handle.result()
        assert (result.completed, result.failed) == (6, 0)
        return
    await decide(handle, "raise_budget", "stop")
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    async with pool.acquire() as conn:
        run = await runs_repo.get_run(conn, arg.run_id)
    assert run is not None and run.status == "failed" and "budget" in (run.error_message or "")
    assert len(stub.requests) == 2


def test_a_step_schema_that_is_not_one_is_refused_naming_the_step() -> None:
    bad = [{"name": "s", "template": "x", "output_schema": {"type": "object",
                                                            "properties": {"a": {"type": 5}}}}]
    with pytest.raises(ValidationError) as refused:
        BatchInput(name="j", items=[{}], steps=bad)
    assert "output_schema" in str(refused.value) and "not a valid JSON Schema" in str(
        refused.value)


__all__ = ["run_with"]
