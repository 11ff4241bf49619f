"""A worker SIGKILLed mid-job: no item lost, no completed step run again."""

from __future__ import annotations

import os
import signal

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.batch_helpers import new_batch_run
from tests.faults.test_durability import (  # noqa: F401 - fixtures
    _result_if_done,
    assert_read_model_consistent,
    cleanup_handles,
    worker_processes,
)
from tests.helpers import eventually
from waystation.kinds.batch.kind import BATCH
from waystation.kinds.batch.slices import slice_size
from waystation.kinds.batch.workflow import BatchJob

STEPS = [{"name": "summarize", "template": "Summarize {{ item.text }}"},
         {"name": "grade", "template": "Grade {{ outputs.summarize.summary }}"}]


@pytest.mark.slow
async def test_sigkill_mid_job_then_new_worker_finishes_without_rerunning_steps(
        dev_env: WorkflowEnvironment, pool, task_queue, worker_processes,  # noqa: F811
        cleanup_handles):  # noqa: F811
    arg = await new_batch_run(pool, items=[{"text": f"posting {i}"} for i in range(16)],
                              steps=STEPS, max_workers=4, max_retries=2, round_size=6)
    first = worker_processes.start()
    handle = await dev_env.client.start_workflow(
        BatchJob.run, arg, id=BATCH.workflow_id(arg.run_id), task_queue=task_queue)
    cleanup_handles.append(handle)

    async def some_outputs_stored() -> int:
        async with pool.acquire() as conn:
            return await conn.fetchval(
                "SELECT count(*) FROM item_outputs o JOIN work_units w ON w.id = o.unit_id "
                "WHERE w.job_id = $1", arg.run_id) >= 6
    try:
        await eventually(some_outputs_stored, timeout=30, interval=0.02)
    except AssertionError:
        raise AssertionError(f"no outputs; logs:\n{worker_processes.logs()}") from None
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    async with pool.acquire() as conn:
        stored_before = {(r["unit_id"], r["step"]): r["created_at"] for r in await conn.fetch(
            "SELECT o.unit_id, o.step, o.created_at FROM item_outputs o "
            "JOIN work_units w ON w.id = o.unit_id WHERE w.job_id = $1", arg.run_id)}
    assert len(stored_before) < 32  # killed mid-job

    worker_processes.start()
    try:
        result = await eventually(lambda: _result_if_done(handle), timeout=60, interval=0.2)
    except AssertionError:
        raise AssertionError(f"job did not finish; logs:\n{worker_processes.logs()}") from None
    assert (result.status, result.completed, result.failed) == ("completed", 16, 0)

    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT o.unit_id, o.step, o.created_at, o.executions FROM item_outputs o "
            "JOIN work_units w ON w.id = o.unit_id WHERE w.job_id = $1", arg.run_id)
        statuses = await conn.fetch("SELECT status, path FROM work_units WHERE job_id = $1",
                                    arg.run_id)
    assert len(rows) == 32 and all(r["executions"] == 1 for r in rows)
    for row in rows:  # every output stored before the kill is the same row, untouched
        if (row["unit_id"], row["step"]) in stored_before:
            assert row["created_at"] == stored_before[(row["unit_id"], row["step"])]
    assert all(s["status"] == "completed" and s["path"] == ["summarize", "grade"]
               for s in statuses)
    events = await assert_read_model_consistent(pool, arg.run_id)
    assert events[-1].type == "run.completed"


@pytest.mark.slow
async def test_sigkill_mid_slice_reruns_no_completed_step(
        dev_env: WorkflowEnvironment, pool, task_queue, worker_processes,  # noqa: F811
        cleanup_handles):  # noqa: F811
    # One worker slot and 12 items: slices of three items (0.6 s each with the offline agent),
    # so the kill lands inside a slice that has finished some of its items.
    arg = await new_batch_run(pool, items=[{"text": f"posting {i}"} for i in range(12)],
                              steps=STEPS, max_workers=1, max_retries=0, round_size=12)
    assert slice_size(12, 1) == 3
    first = worker_processes.start()
    handle = await dev_env.client.start_workflow(
        BatchJob.run, arg, id=BATCH.workflow_id(arg.run_id), task_queue=task_queue)
    cleanup_handles.append(handle)

    async def half_of_item_1_stored() -> bool:
        async with pool.acquire() as conn:
            return await conn.fetchval(
                "SELECT count(*) FROM item_outputs o JOIN work_units w ON w.id = o.unit_id "
                "WHERE w.job_id = $1", arg.run_id) >= 3
    try:
        await eventually(half_of_item_1_stored, timeout=30, interval=0.02)
    except AssertionError:
        raise AssertionError(f"no outputs; logs:\n{worker_processes.logs()}") from None
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    async with pool.acquire() as conn:
        before = {r["ordinal"]: r["status"] for r in await conn.fetch(
            "SELECT ordinal, status FROM work_units WHERE job_id = $1", arg.run_id)}
        stored_before = {(r["unit_id"], r["step"]): r["created_at"] for r in await conn.fetch(
            "SELECT o.unit_id, o.step, o.created_at FROM item_outputs o "
            "JOIN work_units w ON w.id = o.unit_id WHERE w.job_id = $1", arg.run_id)}
    # Killed inside the first slice (items 0-2): item 0 done, item 2 not yet.
    assert before[0] == "completed" and before[2] in ("pending", "running"), before

    worker_processes.start()
    try:
        result = await eventually(lambda: _result_if_done(handle), timeout=60, interval=0.2)
    except AssertionError:
        raise AssertionError(f"job did not finish; logs:\n{worker_processes.logs()}") from None
    # The slice was retried (a worker's death is no item's failure): nothing failed.
    assert (result.status, result.completed, result.failed) == ("completed", 12, 0)
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT o.unit_id, o.step, o.created_at, o.executions FROM item_outputs o "
            "JOIN work_units w ON w.id = o.unit_id WHERE w.job_id = $1", arg.run_id)
    assert len(rows) == 24 and all(r["executions"] == 1 for r in rows)
    for row in rows:
        if (row["unit_id"], row["step"]) in stored_before:
            assert row["created_at"] == stored_before[(row["unit_id"], row["step"])]
    await assert_read_model_consistent(pool, arg.run_id)
