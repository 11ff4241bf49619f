"""A worker SIGKILLed in the middle of a mobile run: the run resumes on a new worker and the
read model comes out with every step, event and snapshot written once."""

from __future__ import annotations

import os
import signal

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.faults.test_durability import (  # noqa: F401 - fixtures
    _result_if_done,
    assert_read_model_consistent,
    cleanup_handles,
    worker_processes,
)
from tests.helpers import eventually
from tests.mobile_helpers import SHOP, new_mobile_run
from waystation.kinds.mobile.kind import MOBILE
from waystation.kinds.mobile.workflow import WORKFLOW_TASK_TIMEOUT, MobileAgentRun


@pytest.mark.slow
async def test_sigkill_mid_run_resumes_without_duplicates(
        dev_env: WorkflowEnvironment, pool, task_queue,
        worker_processes, cleanup_handles):  # noqa: F811 - the imported fixtures
    arg = await new_mobile_run(pool, app_package=SHOP, max_steps=300, policy="random",
                               continue_as_new_every=100, sensitive_actions="skip", seed=9)
    first = worker_processes.start()
    handle = await dev_env.client.start_workflow(
        MobileAgentRun.run, arg, id=MOBILE.workflow_id(arg.run_id), task_queue=task_queue,
        task_timeout=WORKFLOW_TASK_TIMEOUT)
    cleanup_handles.append(handle)

    async def steps_done() -> int:
        async with pool.acquire() as conn:
            return await conn.fetchval("SELECT count(*) FROM graph_persistence_outcomes "
                                       "WHERE run_id = $1", arg.run_id)
    try:
        await eventually(lambda: _at_least(steps_done, 60), timeout=60, interval=0.02)
    except AssertionError:
        raise AssertionError(f"no progress; worker log:\n{worker_processes.logs()}") from None
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)

    worker_processes.start()
    try:
        result = await eventually(lambda: _result_if_done(handle), timeout=90, interval=0.2)
    except AssertionError:
        raise AssertionError(f"run did not finish:\n{worker_processes.logs()}") from None
    assert result.stop_reason == "max_steps" and result.steps == 300

    events = await assert_read_model_consistent(pool, arg.run_id)
    assert [e.type for e in events].count("run.started") == 1
    assert events[-1].type == "run.completed"
    async with pool.acquire() as conn:
        steps = await conn.fetch("SELECT step FROM graph_persistence_outcomes WHERE run_id = $1 "
                                 "ORDER BY step", arg.run_id)
        dupes = await conn.fetchval(
            "SELECT count(*) FROM (SELECT 1 FROM screens WHERE app_package = $1 "
            "GROUP BY activity, layout_hash HAVING count(*) > 1) d", SHOP)
    assert [r["step"] for r in steps] == list(range(1, 301)) and dupes == 0


async def _at_least(count, n: int) -> bool:
    return await count() >= n
