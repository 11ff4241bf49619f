"""BatchJob logic on the time-skipping server, with the real read model in Postgres."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from tests.batch_helpers import (
    ScriptedBackend,
    activity_counts,
    carried_work,
    chain,
    new_batch_run,
)
from tests.helpers import eventually
from waystation.activities.agents import AgentRequest
from waystation.kinds.batch import repository as jobs_repo
from waystation.kinds.batch.activities import items as batch_items
from waystation.kinds.batch.kind import BATCH
from waystation.kinds.batch.models import BatchRunInput, BatchRunResult, PauseInput
from waystation.kinds.batch.workflow import BatchJob
from waystation.persistence import events as events_repo
from waystation.persistence import runs as runs_repo
from waystation.worker import build_worker
from waystation.workflows.gate_rules import DecisionInput


@pytest_asyncio.fixture
async def run_with() -> AsyncIterator:
    """Start a worker with a given backend; stopped at the end of the test."""
    stack: list = []

    async def start_worker(env: WorkflowEnvironment, pool: asyncpg.Pool, task_queue: str,
                           backend: ScriptedBackend) -> None:
        worker = build_worker(env.client, pool, task_queue=task_queue, backend=backend)
        await worker.__aenter__()
        stack.append(worker)
    yield start_worker
    for worker in stack:
        await worker.__aexit__(None, None, None)


async def start(client: Client, arg: BatchRunInput, task_queue: str) -> WorkflowHandle:
    return await client.start_workflow(BatchJob.run, arg, id=BATCH.workflow_id(arg.run_id),
                                       task_queue=task_queue)


async def units(pool: asyncpg.Pool, job_id: uuid.UUID) -> list[jobs_repo.UnitRow]:
    async with pool.acquire() as conn:
        return await jobs_repo.list_units(conn, job_id, status=None, after_ordinal=-1,
                                          limit=10_000)


async def outputs(pool: asyncpg.Pool, unit_id: uuid.UUID) -> dict[str, jobs_repo.OutputRow]:
    async with pool.acquire() as conn:
        return {o.step: o for o in await jobs_repo.list_outputs(conn, unit_id)}


PIPELINE = [
    {"name": "summarize", "template": "Summarize: {{ item.text }}",
     "branches": [{"when": "item.score < 5", "goto": "end"}]},
    {"name": "grade", "template": "Grade this summary: {{ outputs.summarize.text }}"},
]


async def test_pipeline_branches_and_records_outputs(time_env, pool, task_queue, run_with):
    backend = ScriptedBackend()
    await run_with(time_env, pool, task_queue, backend)
    items = [{"text": f"posting {i}", "score": i} for i in range(8)]
    arg = await new_batch_run(pool, items=items, steps=PIPELINE, max_workers=3, round_size=3)
    result: BatchRunResult = await (await start(time_env.client, arg, task_queue)).result()
    assert (result.status, result.total, result.completed, result.failed) == ("completed", 8, 8, 0)

    rows = await units(pool, arg.run_id)
    assert [u.path for u in rows] == [["summarize"]] * 5 + [["summarize", "grade"]] * 3
    assert all(u.status == "completed" and u.completed_at for u in rows)
    high = await outputs(pool, rows[7].id)
    assert high["grade"].rendered_prompt == "Grade this summary: summarize: Summarize: posting 7"
    assert high["summarize"].next_step == "grade" and high["grade"].next_step is None
    assert rows[7].cost_usd == pytest.approx(0.002) and rows[7].input_tokens > 0
    assert [t["step"] for t in rows[7].conversation] == ["summarize", "grade"]
    # Continued as new twice (rounds of 3), and the event log stayed small.
    async with pool.acquire() as conn:
        events = await events_repo.list_events(conn, arg.run_id, after_seq=0, limit=1000)
        run = await runs_repo.get_run(conn, arg.run_id)
    types = [e.type for e in events]
    assert types[0] == "run.started" and types[-1] == "run.completed"
    assert {"job.round.1", "job.round.2"} <= {e.event_key for e in events}
    assert run is not None and run.status == "completed"
    assert len(events) < 30


async def test_seed_002_outputs_come_from_the_store_and_missing_ones_fail(
        time_env, pool, task_queue, run_with):
    """Seed 002's bug: the grade step ran with `{conversation_3341_output}` after a reload.

    Here the worker 'forgets' between steps (grade fails once after summarize was stored, so
    the retry reloads the item), and one path skips summarize altogether: the retried grade
    renders from the stored summary, and the skipped one fails naming `outputs.summarize`,
    with no prompt ever sent that still holds a placeholder.
    """
    def rule(request: AgentRequest, n: int) -> dict:
        if request.task == "grade" and n == 1:
            raise RuntimeError("worker lost its memory between waves")
        return {"text": f"{request.task} of [{request.instructions}]"}

    backend = ScriptedBackend(rule)
    await run_with(time_env, pool, task_queue, backend)
    steps = [
        {"name": "triage", "template": "Triage {{ item.text }}",
         "branches": [{"when": "item.skip", "goto": "grade"}]},
        {"name": "summarize", "template": "Summarize {{ item.text }}"},
        {"name": "grade", "template": "Grade this summary: {{ outputs.summarize.text }}"},
    ]
    items = [{"text": "python dev role", "skip": False}, {"text": "rust role", "skip": True}]
    arg = await new_batch_run(pool, items=items, steps=steps, max_retries=2,
                              retry_initial_seconds=0.1, failure_threshold=0.5)
    result = await (await start(time_env.client, arg, task_queue)).result()
    assert (result.completed, result.failed) == (1, 1)

    good, skipped = await units(pool, arg.run_id)
    graded = (await outputs(pool, good.id))["grade"]
    assert graded.rendered_prompt == ("Grade this summary: summarize of "
                                      "[Summarize python dev role]")
    assert good.retry_count == 1 and good.path == ["triage", "summarize", "grade"]
    # The retry did not run the stored steps again.
    assert backend.calls[("summarize", str(good.id))] == 1
    assert backend.calls[("triage", str(good.id))] == 1

    assert skipped.status == "failed" and skipped.path == ["triage"]
    assert skipped.error == "outputs.summarize is undefined"
    assert skipped.retry_count == 0  # a template error is not retried
    for request in backend.requests:
        assert "{" not in request.instructions and "outputs." not in request.instructions


async def test_item_retries_then_fails_and_threshold_fails_the_job(
        time_env, pool, task_queue, run_with):
    def rule(request: AgentRequest, n: int) -> dict:
        if "bad" in request.instructions:
            raise RuntimeError(f"boom {n}")
        return {"text": "ok"}

    await run_with(time_env, pool, task_queue, ScriptedBackend(rule))
    steps = [{"name": "work", "template": "Do {{ item.id }}"}]
    arg = await new_batch_run(pool, items=[{"id": "a"}, {"id": "bad-1"}, {"id": "c"},
                                           {"id": "d"}],
                              steps=steps, max_retries=2, retry_initial_seconds=0.05,
                              failure_threshold=0.25)
    result = await (await start(time_env.client, arg, task_queue)).result()
    assert (result.status, result.completed, result.failed) == ("completed", 3, 1)
    failed = [u for u in await units(pool, arg.run_id) if u.status == "failed"]
    assert len(failed) == 1 and failed[0].retry_count == 2
    assert failed[0].error == "RuntimeError: boom 3"

    many = await new_batch_run(pool, items=[{"id": f"bad-{i}"} for i in range(3)] + [{"id": "x"}],
                               steps=steps, max_retries=0, failure_threshold=0.25,
                               max_workers=1)
    handle = await start(time_env.client, many, task_queue)
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    assert "more than the failure threshold" in str(failure.value.cause)
    async with pool.acquire() as conn:
        run = await runs_repo.get_run(conn, many.run_id)
        job = await jobs_repo.get_job(conn, many.run_id)
    assert run is not None and run.status == "failed" and job is not None
    assert job.status == "failed"
    # The job stopped starting items once the threshold was crossed.
    assert [u.status for u in await units(pool, many.run_id)][-1] == "pending"


@pytest.mark.parametrize("decision", ["proceed", "abort"])
async def test_failed_test_item_waits_at_a_gate(time_env, pool, task_queue, run_with, decision):
    def rule(request: AgentRequest, n: int) -> dict:
        if "first" in request.instructions:
            raise RuntimeError("the prompt is wrong")
        return {"text": "ok"}

    backend = ScriptedBackend(rule)
    await run_with(time_env, pool, task_queue, backend)
    items = [{"id": "first"}] + [{"id": f"n{i}"} for i in range(4)]
    arg = await new_batch_run(pool, items=items, steps=[{"name": "w", "template": "{{ item.id }}"}],
                              test_first=True, max_retries=0, failure_threshold=0.5)
    handle = await start(time_env.client, arg, task_queue)

    async def waiting() -> bool:
        async with pool.acquire() as conn:
            run = await runs_repo.get_run(conn, arg.run_id)
        return run is not None and run.hitl_state == "test_unit_failed"
    await eventually(waiting)
    assert len(backend.requests) == 1  # nothing but the test item ran
    view = await handle.execute_update(BatchJob.decide, DecisionInput(
        checkpoint_name="test_unit_failed", decision=decision, decided_by="alice"))
    assert view.status == ("approved" if decision == "proceed" else "rejected")
    if decision == "proceed":
        result = await handle.result()
        assert (result.completed, result.failed) == (4, 1)
    else:
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        assert len(backend.requests) == 1


async def test_pause_resume_and_cancel(time_env, pool, task_queue, run_with):
    backend = ScriptedBackend(delay=0.05)
    await run_with(time_env, pool, task_queue, backend)
    steps = [{"name": "w", "template": "{{ item.id }}"}]
    arg = await new_batch_run(pool, items=[{"id": i} for i in range(30)], steps=steps,
                              max_workers=2)
    handle = await start(time_env.client, arg, task_queue)
    await eventually(lambda: asyncio.sleep(0, len(backend.requests) >= 2))
    paused = await handle.execute_update(BatchJob.pause, PauseInput(requested_by="alice"))
    assert paused.status == "paused"
    # Items already handed to the backend finish after the pause; there is no event for "none in
    # flight".
    await asyncio.sleep(0.3)
    calls = len(backend.requests)
    # Nothing new starts while paused: an absence, shown only by waiting a while.
    await asyncio.sleep(0.3)
    assert len(backend.requests) == calls < 30  # nothing new starts while paused
    async with pool.acquire() as conn:
        run = await runs_repo.get_run(conn, arg.run_id)
    assert run is not None and run.status == "paused"
    await handle.execute_update(BatchJob.resume, PauseInput(requested_by="alice"))
    result = await handle.result()
    assert result.completed == 30

    second = await new_batch_run(pool, items=[{"id": i} for i in range(30)], steps=steps,
                                 max_workers=1)
    handle = await start(time_env.client, second, task_queue)
    await eventually(lambda: asyncio.sleep(0, len(backend.requests) >= 33))
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    async with pool.acquire() as conn:
        run = await runs_repo.get_run(conn, second.run_id)
        job = await jobs_repo.get_job(conn, second.run_id)
    assert run is not None and run.status == "canceled"
    assert job is not None and job.status == "canceled"


async def test_failed_item_in_a_slice_is_retried_alone_then_marked_failed(
        time_env, pool, task_queue, run_with):
    def rule(request: AgentRequest, n: int) -> dict:
        if "bad" in request.instructions:
            raise RuntimeError(f"boom {n}")
        if "flaky" in request.instructions and n == 1:
            raise RuntimeError("once")
        return {"text": "ok"}

    backend = ScriptedBackend(rule)
    await run_with(time_env, pool, task_queue, backend)
    items = [{"id": f"n{i}"} for i in range(16)]
    items[5], items[9] = {"id": "bad"}, {"id": "flaky"}
    # 16 items for one worker: slices of four.
    arg = await new_batch_run(pool, items=items, steps=[{"name": "w", "template": "{{ item.id }}"}],
                              max_workers=1, max_retries=2, retry_initial_seconds=0.05,
                              failure_threshold=0.5)
    handle = await start(time_env.client, arg, task_queue)
    result = await handle.result()
    assert (result.completed, result.failed) == (15, 1)

    rows = await units(pool, arg.run_id)
    assert rows[5].status == "failed" and rows[5].retry_count == 2
    assert rows[5].error == "RuntimeError: boom 3"
    assert rows[9].status == "completed" and rows[9].retry_count == 1
    assert all(u.status == "completed" and u.retry_count == 0
               for i, u in enumerate(rows) if i not in (5, 9))
    # Only the two failed items ran again, each alone; the others ran once, in slices.
    assert sorted(backend.calls.values()) == [1] * 14 + [2, 3]
    counts = await activity_counts(time_env.client, handle)
    assert counts["run_batch_slice"] == 4 and counts["run_batch_item"] == 2
    assert backend.most_running == 1


async def test_slices_never_exceed_max_workers_and_hand_back_what_they_did_not_reach(
        time_env, pool, task_queue, run_with, monkeypatch):
    # No time for a second item: every slice runs one item and hands the rest back.
    monkeypatch.setattr(batch_items, "SLICE_BUDGET_SECONDS", 0.0)
    backend = ScriptedBackend(delay=0.01)
    await run_with(time_env, pool, task_queue, backend)
    arg = await new_batch_run(pool, items=[{"id": i} for i in range(40)],
                              steps=[{"name": "w", "template": "{{ item.id }}"}], max_workers=3)
    handle = await start(time_env.client, arg, task_queue)
    assert (await handle.result()).completed == 40
    assert sorted(backend.calls.values()) == [1] * 40
    assert backend.most_running <= 3
    assert (await activity_counts(time_env.client, handle))["run_batch_slice"] == 40
    assert all(u.status == "completed" for u in await units(pool, arg.run_id))


@pytest.mark.slow
async def test_a_failing_slice_falls_back_to_single_items(time_env, pool, task_queue, run_with,
                                                          monkeypatch):
    async def broken(*args: object) -> None:
        raise ConnectionError("the database went away")

    monkeypatch.setattr(batch_items.BatchActivities, "_slice_item", broken)
    # Longer than a slice is willing to wait for the database.
    monkeypatch.setattr(batch_items, "OUTAGE_PATIENCE_SECONDS", 0.1)
    handle = await _eight_items_complete_once_each(time_env, pool, task_queue, run_with)
    # Slices of two, each tried SLICE_RETRY's three times (retries are not history events).
    counts = await activity_counts(time_env.client, handle)
    assert counts["run_batch_slice"] == 4 and counts["run_batch_item"] == 8


async def test_a_slice_waits_out_a_short_database_outage(time_env, pool, task_queue, run_with,
                                                         monkeypatch):
    real, refusals = batch_items.BatchActivities._slice_item, []

    async def flaky(*args: object) -> object:
        if len(refusals) < 2:
            refusals.append(1)
            raise ConnectionRefusedError("the database is restarting")
        return await real(*args)

    monkeypatch.setattr(batch_items.BatchActivities, "_slice_item", flaky)
    handle = await _eight_items_complete_once_each(time_env, pool, task_queue, run_with)
    # Each slice once, no item alone: the outage cost neither retries nor the fallback.
    counts = await activity_counts(time_env.client, handle)
    assert counts["run_batch_slice"] == 4 and counts.get("run_batch_item", 0) == 0


# A job run until its history passes the budget (10 s): the slow tier.
@pytest.mark.slow
async def test_history_budget_continues_as_new_with_queued_work(time_env, pool, task_queue,
                                                                run_with):
    def rule(request: AgentRequest, n: int) -> dict:
        if "bad" in request.instructions and n == 1:
            raise RuntimeError("once")
        return {"text": "ok"}

    backend = ScriptedBackend(rule)
    await run_with(time_env, pool, task_queue, backend)
    items = [{"id": f"bad{i}" if i % 3 == 0 else f"n{i}"} for i in range(24)]
    arg = await new_batch_run(pool, items=items, steps=[{"name": "w", "template": "{{ item.id }}"}],
                              # Retries 2 s out (skipped by the test server's clock): some
                              # are surely queued when the budget ends a run, where 0.05 s
                              # let them all run first now and then (a CI failure).
                              max_workers=2, max_retries=1, retry_initial_seconds=2,
                              history_budget=40)
    handle = await start(time_env.client, arg, task_queue)
    result = await handle.result()
    assert (result.completed, result.failed) == (24, 0)
    assert sorted(backend.calls.values()) == [1] * 16 + [2] * 8
    async with pool.acquire() as conn:
        rounds = await conn.fetchval(
            "SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'job.progress' "
            "AND event_key LIKE 'job.round.%'", arg.run_id)
    assert rounds >= 2  # one round of 24 items, cut into several runs by the budget
    runs = await chain(time_env.client, handle)
    assert len(runs) == rounds + 1
    # Some run ended with retries still queued: the next one ran them.
    assert any(carried_work(h)["retries"] for h in runs)


async def test_a_database_error_in_a_slice_fails_the_slice_not_the_item(
        time_env, pool, task_queue, run_with, monkeypatch):
    record = jobs_repo.record_step_output
    broken = {"times": 0}

    async def flaky_record(conn: asyncpg.Connection, write: jobs_repo.StepOutputWrite) -> None:
        if broken["times"] == 0:
            broken["times"] += 1
            raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed")
        await record(conn, write)

    monkeypatch.setattr(batch_items.jobs_repo, "record_step_output", flaky_record)
    backend = ScriptedBackend()
    await run_with(time_env, pool, task_queue, backend)
    arg = await new_batch_run(pool, items=[{"id": i} for i in range(8)],
                              steps=[{"name": "w", "template": "{{ item.id }}"}],
                              max_workers=1, max_retries=0)
    handle = await start(time_env.client, arg, task_queue)
    result = await handle.result()
    # No retries allowed, yet nothing failed: the slice was tried again, not the item failed.
    assert (result.completed, result.failed) == (8, 0)
    assert broken["times"] == 1
    rows = await units(pool, arg.run_id)
    assert all(u.status == "completed" and u.retry_count == 0 for u in rows)
    assert "run_batch_item" not in await activity_counts(time_env.client, handle)


async def _eight_items_complete_once_each(time_env, pool, task_queue, run_with):
    """A one-worker job of eight items (slices of two): it completes, each item called once."""
    backend = ScriptedBackend()
    await run_with(time_env, pool, task_queue, backend)
    arg = await new_batch_run(pool, items=[{"id": i} for i in range(8)],
                              steps=[{"name": "w", "template": "{{ item.id }}"}], max_workers=1)
    handle = await start(time_env.client, arg, task_queue)
    assert (await handle.result()).completed == 8
    assert sorted(backend.calls.values()) == [1] * 8
    return handle
