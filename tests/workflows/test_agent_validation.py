"""A validation run against an OpenAI-compatible server: typed, grounded, costed, resilient.

Temporal (time-skipping) and Postgres are real; the paid model is the local stub server.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.helpers import new_validation_run, wait_gate
from tests.openai_stub import Fail, OpenAIStub, Reply
from tests.workflows.test_validation_workflow import decide, start
from waystation.activities.agents import AgentRequest, backend_named
from waystation.activities.agents.offline import use_offline_answers
from waystation.activities.agents.openai_compatible import OpenAICompatibleBackend
from waystation.kinds.validation.activities.crew_tasks import TASK_OUTPUTS
from waystation.kinds.validation.activities.outputs import (
    DesirabilityEvidence,
    Experiment,
    FitAssessment,
    ValidationSignal,
)
from waystation.kinds.validation.kind import VALIDATION
from waystation.kinds.validation.workflow import ValidationRun
from waystation.persistence import events as events_repo
from waystation.persistence import gates as gates_repo
from waystation.persistence import runs as runs_repo
from waystation.worker import build_worker

EVIDENCE = DesirabilityEvidence(summary="1 of 2 passed", experiments=[
    Experiment(name="pre-order page", metric="conversion_pct", result=7.5, threshold=5,
               sample_size=240, source="landing page, 2 weeks"),
    Experiment(name="clinic interviews", metric="would_pay_pct", result=31, threshold=40,
               sample_size=12, source="12 interviews")])


@pytest_asyncio.fixture
async def worker(time_env: WorkflowEnvironment, pool: asyncpg.Pool, task_queue: str,
                 stub: OpenAIStub) -> AsyncIterator[Worker]:
    backend = OpenAICompatibleBackend(base_url=stub.base_url, api_key="sk-test",
                                      model="gpt-4o-mini")
    async with build_worker(time_env.client, pool, task_queue=task_queue,
                            backend=backend) as w:
        yield w
    await backend.aclose()


async def run_events(pool: asyncpg.Pool, run_id) -> list:  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        return await events_repo.list_events(conn, run_id, after_seq=0, limit=1000)


async def run_row(pool: asyncpg.Pool, run_id):  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        return await runs_repo.get_run(conn, run_id)


def spent(events: list) -> float:
    return sum(e.output["usage"]["cost_usd"] for e in events
               if isinstance(e.output, dict) and "usage" in e.output)


async def test_tasks_are_grounded_typed_and_costed(time_env, pool, worker, task_queue, stub):
    stub.script(Reply(EVIDENCE.model_dump_json()), task="run_desirability_experiments")
    arg = await new_validation_run(pool, gates=[])
    result = await (await start(time_env.client, arg, task_queue)).result()
    assert result.status == "completed" and result.final_decision == "proceed"

    judge = stub.of_task("judge_desirability")[0]
    assert "pre-order page" in judge.user_text and "7.5" in judge.user_text
    assert "evidence judge" in judge.system_text
    assert judge.body["response_format"]["json_schema"]["schema"]["properties"]["strength"]
    # Exactly what each task reads: the value map sees the profile, the judge no brief.
    assert '"customer_profile"' in stub.of_task("design_value_map")[0].user_text
    assert '"founders_brief"' not in judge.user_text
    pivot = stub.of_task("recommend_pivot")[0].user_text
    assert all(f'"{s}_signal"' in pivot for s in ("desirability", "feasibility", "viability"))

    state = (await run_row(pool, arg.run_id)).result
    assert state["pivot_recommendation"]["decision"] == "proceed"
    events = await run_events(pool, arg.run_id)
    completed = [e for e in events if e.type == "task.completed"]
    assert len(completed) == 12
    assert all(e.output["usage"]["cost_usd"] > 0 and e.output["usage"]["input_tokens"] > 0
               for e in completed)
    run = await run_row(pool, arg.run_id)
    assert run.cost_usd == pytest.approx(spent(events), abs=1e-8) and run.cost_usd > 0
    assert run.input_tokens > 0 and run.output_tokens > 0


async def test_invalid_answer_reasked_then_task_failed_gate_and_retry(time_env, pool, worker,
                                                                      task_queue, stub):
    bad = json.dumps({"segment": "clinics", "gaps": [], "alternative_segments": []})
    stub.script(Reply(bad), Reply("```json\n" + bad + "\n```"), task="assess_fit")
    arg = await new_validation_run(pool, gates=[])
    handle = await start(time_env.client, arg, task_queue)
    await wait_gate(pool, arg.run_id, "task_failed")
    async with pool.acquire() as conn:
        gate = await gates_repo.latest_gate_for_checkpoint(conn, arg.run_id, "task_failed")
    assert gate is not None and "fit_score" in gate.context["error"]
    assert [o.value for o in gate.options] == ["retry", "skip", "abort"]
    asked = stub.of_task("assess_fit")
    assert len(asked) == 2 and "fit_score" in asked[1].body["messages"][-1]["content"]

    await decide(handle, "task_failed", "retry")
    result = await handle.result()
    assert result.status == "completed"
    events = await run_events(pool, arg.run_id)
    failed = [e for e in events if e.type == "task.failed"]
    assert len(failed) == 1 and failed[0].output["usage"]["cost_usd"] > 0
    # The failed attempt's two calls are paid for too.
    assert (await run_row(pool, arg.run_id)).cost_usd == pytest.approx(spent(events), abs=1e-8)
    assert spent(failed) > 0


async def test_refused_request_asks_a_human_and_abort_fails_the_run(time_env, pool, worker,
                                                                    task_queue, stub):
    stub.script(Fail(401, message="invalid api key"), task="draft_founders_brief")
    arg = await new_validation_run(pool, gates=[])
    handle = await start(time_env.client, arg, task_queue)
    await wait_gate(pool, arg.run_id, "task_failed")
    async with pool.acquire() as conn:
        gate = await gates_repo.latest_gate_for_checkpoint(conn, arg.run_id, "task_failed")
    assert "HTTP 401" in gate.description and "WAYSTATION_OPENAI_API_KEY" in gate.description
    # The brief is needed by everything after it: it cannot be skipped.
    assert [o.value for o in gate.options] == ["retry", "abort"]
    assert len(stub.of_task("draft_founders_brief")) == 1  # a 401 is not retried
    await decide(handle, "task_failed", "abort")
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    run = await run_row(pool, arg.run_id)
    assert run.status == "failed" and "aborted" in run.error_message


async def test_a_429_burst_longer_than_a_minute_does_not_fail_the_run(time_env, pool, worker,
                                                                      task_queue, stub):
    stub.script(*[Fail(429, retry_after=25, message="rate limited")] * 3,
                task="interview_founder")
    arg = await new_validation_run(pool, gates=[])
    started = time.monotonic()
    result = await (await start(time_env.client, arg, task_queue)).result()
    assert result.status == "completed"
    asked = [r.at for r in stub.of_task("interview_founder")]
    assert len(asked) == 4
    failed = [e for e in await run_events(pool, arg.run_id) if e.type == "task.failed"]
    assert len(failed) == 3 and all("429" in e.error_message for e in failed)
    # 75 s of Retry-After on the server's clock; the time-skipping server skipped them.
    assert time.monotonic() - started < 60


async def test_budget_stops_the_run_at_a_gate(time_env, pool, worker, task_queue, stub):
    arg = await new_validation_run(pool, gates=[], max_cost_usd=0.00001)
    handle = await start(time_env.client, arg, task_queue)
    await wait_gate(pool, arg.run_id, "raise_budget")
    assert len(stub.requests) == 1  # the first call showed what a call costs
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await decide(handle, "raise_budget", "raise", feedback="0.000001")
    assert refused.value.cause.type == "InvalidFeedback"
    await decide(handle, "raise_budget", "stop")
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    run = await run_row(pool, arg.run_id)
    assert run.status == "failed" and "budget" in run.error_message
    assert len(stub.requests) == 1 and run.cost_usd > 0.00001 / 10


async def test_raising_the_budget_lets_the_run_go_on(time_env, pool, worker, task_queue, stub):
    arg = await new_validation_run(pool, gates=[], max_cost_usd=0.00001)
    handle = await start(time_env.client, arg, task_queue)
    await wait_gate(pool, arg.run_id, "raise_budget")
    await decide(handle, "raise_budget", "raise", feedback="$5")
    assert (await handle.result()).status == "completed"
    state = await handle.query(ValidationRun.state)
    assert state.max_cost_usd == 5 and isinstance(state.desirability_signal, ValidationSignal)


async def test_offline_answers_are_typed_consistent_and_deterministic() -> None:
    # The validation kind's answers, as a worker gives them to the offline backend, to
    # requests as its crew task sends them (each asking for its task's output schema).
    use_offline_answers(VALIDATION.worker.offline_answers)
    backend = backend_named("offline")

    async def ask(task: str, context: dict[str, Any]) -> dict[str, Any]:
        output = (await backend.run(AgentRequest(
            crew="d", task=task, agent="a", instructions="i", context=context,
            output_schema=TASK_OUTPUTS[task].model_json_schema()))).output
        assert output is not None
        return output

    context = {"entrepreneur_input": "An app that helps small clinics cut no-shows."}
    runs = [await ask("interview_founder", context) for _ in range(2)]
    assert runs[0] == runs[1]
    profile = await ask("profile_customer_segment",
                        {"founders_brief": None, "target_segment": "dentists"})
    value_map = await ask("design_value_map", {"founders_brief": None, "customer_profile": profile})
    fit = FitAssessment.model_validate(
        await ask("assess_fit", {"customer_profile": profile, "value_map": value_map}))
    relieved = {r["relieves"] for r in value_map["pain_relievers"]}
    assert fit.segment == "dentists"
    assert set(fit.gaps) >= {p["description"] for p in profile["pains"]} - relieved


async def test_offline_gates_recommend_from_the_evidence(time_env, pool, task_queue):
    async with build_worker(time_env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline")):
        arg = await new_validation_run(pool, gates=["approve_vpc_completion",
                                                    "approve_desirability_gate"])
        handle = await start(time_env.client, arg, task_queue)
        await wait_gate(pool, arg.run_id, "approve_vpc_completion")
        async with pool.acquire() as conn:
            canvas = await gates_repo.latest_gate_for_checkpoint(conn, arg.run_id,
                                                                 "approve_vpc_completion")
        fit = canvas.context["fit_assessment"]
        assert f"fit score {fit['fit_score']}" in canvas.context["recommendation_reason"]
        expected = "approve" if fit["fit_score"] >= 60 else "segment_"
        assert canvas.recommended_option.startswith(expected)
        await decide(handle, "approve_vpc_completion")
        await wait_gate(pool, arg.run_id, "approve_desirability_gate")
        async with pool.acquire() as conn:
            gate = await gates_repo.latest_gate_for_checkpoint(conn, arg.run_id,
                                                               "approve_desirability_gate")
        signal = gate.context["signal"]
        experiments = gate.context["evidence"]["experiments"]
        passed = sum(e["result"] >= e["threshold"] for e in experiments)
        strength = ("strong" if passed == len(experiments)
                    else "moderate" if passed * 2 >= len(experiments) else "weak")
        assert signal["strength"] == strength and signal["strength"] in gate.title
        assert gate.recommended_option == ("reject" if strength == "weak" else "approve")
        await decide(handle, "approve_desirability_gate", "override_proceed")
        result = await handle.result()
        state = await handle.query(ValidationRun.state)
        assert result.final_decision == state.pivot_recommendation.decision
