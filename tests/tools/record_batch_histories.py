"""Record BatchJob histories for the replay test: `python -m tests.tools.record_batch_histories`.

Runs the batch workflow on the time-skipping server with the real read model (an embedded
PostgreSQL in a temporary folder) through its interesting paths and writes each history to
tests/histories/batch_<case>.json; tests/replay/test_replay.py replays them all. Re-record only on
purpose, and check the files in.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from tests.batch_helpers import ScriptedBackend, new_batch_run
from tests.helpers import eventually
from tests.tools import history_recording
from tests.tools.history_recording import Case
from waystation.activities.agents import AgentRequest
from waystation.kinds.batch.kind import BATCH
from waystation.kinds.batch.models import BatchRunInput, PauseInput
from waystation.kinds.batch.trial import TEST_GATE
from waystation.kinds.batch.workflow import BatchJob
from waystation.persistence import runs as runs_repo
from waystation.workflows.gate_rules import DecisionInput

TASK_QUEUE = "record-batch-histories"
STEPS = [
    {"name": "summarize", "template": "Summarize: {{ item.text }}",
     "branches": [{"when": "item.short", "goto": "end"}]},
    {"name": "grade", "template": "Grade: {{ outputs.summarize.text }}"},
]


def _rule(request: AgentRequest, n: int) -> dict:
    if "fails" in request.instructions and n == 1:
        raise RuntimeError("first attempt fails")
    if "broken" in request.instructions:
        raise RuntimeError("always fails")
    return {"text": f"{request.task} done"}


async def _start(env: WorkflowEnvironment, arg: BatchRunInput) -> WorkflowHandle:
    return await env.client.start_workflow(BatchJob.run, arg, id=BATCH.workflow_id(arg.run_id),
                                           task_queue=TASK_QUEUE)


async def pipeline_continue_as_new(env: WorkflowEnvironment, pool: asyncpg.Pool
                                   ) -> WorkflowHandle:
    items = [{"text": f"t{i}", "short": i % 2 == 0} for i in range(5)]
    items.append({"text": "fails", "short": False})
    arg = await new_batch_run(pool, items=items, steps=STEPS, max_workers=2, round_size=4,
                              retry_initial_seconds=0.1)
    return await _start(env, arg)


async def slices_with_retry(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    """Slices of three items; one item fails in its slice and is retried alone."""
    items = [{"text": f"t{i}", "short": True} for i in range(12)]
    items[4] = {"text": "fails", "short": True}
    arg = await new_batch_run(pool, items=items, steps=STEPS, max_workers=1,
                              retry_initial_seconds=0.1)
    return await _start(env, arg)


async def test_gate_proceed(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    items = [{"text": t, "short": False} for t in ("broken", "a", "b")]
    arg = await new_batch_run(pool, items=items, steps=STEPS, test_first=True, max_retries=0,
                              failure_threshold=0.5)
    handle = await _start(env, arg)

    async def waiting() -> bool:
        async with pool.acquire() as conn:
            run = await runs_repo.get_run(conn, arg.run_id)
        return run is not None and run.hitl_state == TEST_GATE
    await eventually(waiting, timeout=30)
    await handle.execute_update(BatchJob.decide, DecisionInput(
        checkpoint_name=TEST_GATE, decision="proceed", decided_by="alice"))
    return handle


async def fork_test_gate_decided(env: WorkflowEnvironment, pool: asyncpg.Pool
                                 ) -> WorkflowHandle:
    """A fork (POST /runs/{id}/fork) carrying a decision for its test gate: it names its
    source, its test item fails, and the gate takes the decision as it opens."""
    items = [{"text": t, "short": False} for t in ("broken", "a", "b")]
    arg = await new_batch_run(pool, items=items, steps=STEPS, test_first=True, max_retries=0,
                              failure_threshold=0.5)
    source = {"run_id": str(uuid.uuid4()), "snapshot": 2, "checkpoint": TEST_GATE,
              "decision": None}
    fork = arg.model_copy(update={"forked_from": source, "decided": DecisionInput(
        checkpoint_name=TEST_GATE, decision="proceed", decided_by="alice")})
    return await _start(env, fork)


async def pause_resume(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    items = [{"text": f"t{i}", "short": True} for i in range(6)]
    arg = await new_batch_run(pool, items=items, steps=STEPS, max_workers=1)
    handle = await _start(env, arg)
    await handle.execute_update(BatchJob.pause, PauseInput(requested_by="alice"))
    # The recorded case is a pause of some length, then a resume: the time is the case.
    await asyncio.sleep(0.2)
    await handle.execute_update(BatchJob.resume, PauseInput(requested_by="alice"))
    return handle


CASES: dict[str, Case] = {
    "pipeline_continue_as_new": pipeline_continue_as_new,
    "slices_with_retry": slices_with_retry,
    "test_gate_proceed": test_gate_proceed,
    "pause_resume": pause_resume,
    "fork_test_gate_decided": fork_test_gate_decided,
}


def main(argv: list[str] | None = None) -> int:
    return history_recording.main(
        argv, description=__doc__.splitlines()[0], prefix="batch", cases=CASES,
        task_queue=TASK_QUEUE, backend=ScriptedBackend(_rule))


if __name__ == "__main__":
    raise SystemExit(main())
