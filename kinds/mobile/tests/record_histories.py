"""Record MobileAgentRun histories for the replay test, from the repository's root:
`PYTHONPATH=. .venv/bin/python kinds/mobile/tests/record_histories.py` (the repository's test
kit, `tests`, on the path; this folder is, as the script's).

Runs the workflow on the time-skipping test server with the real read model (an embedded
PostgreSQL in a temporary folder) through its interesting paths and writes each history to
the repository's tests/histories/mobile_<case>.json, beside the other released histories,
which tests/replay/test_replay.py replays against the current code. Re-record only on
purpose, as for the validation histories.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import asyncpg
from mobile_helpers import NOTES, SHOP, new_mobile_run
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from waystation_mobile.kind import MOBILE
from waystation_mobile.models import MobileFork, MobileRunState
from waystation_mobile.workflow import WORKFLOW_TASK_TIMEOUT, MobileAgentRun

from tests.helpers import eventually
from tests.tools import history_recording
from tests.tools.history_recording import Case
from waystation.activities.agents import backend_named
from waystation.persistence import runs as runs_repo
from waystation.persistence import snapshots as snapshots_repo
from waystation.workflows.gate_rules import DecisionInput

HISTORIES = Path(__file__).resolve().parents[3] / "tests" / "histories"
TASK_QUEUE = "record-mobile-histories"



async def _start(env: WorkflowEnvironment, pool: asyncpg.Pool, **fields: object
                 ) -> WorkflowHandle:
    arg = await new_mobile_run(pool, **fields)
    return await env.client.start_workflow(MobileAgentRun.run, arg,
                                           id=MOBILE.workflow_id(arg.run_id),
                                           task_queue=TASK_QUEUE,
                                           task_timeout=WORKFLOW_TASK_TIMEOUT)


async def explore_continue_as_new(env: WorkflowEnvironment, pool: asyncpg.Pool
                                  ) -> WorkflowHandle:
    # The first of several histories: it ends in continue-as-new, carrying the policy state.
    return await _start(env, pool, app_package=NOTES, max_steps=60, continue_as_new_every=30,
                        sensitive_actions="allow", seed=5)


async def sensitive_gates(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    handle = await _start(env, pool, app_package=SHOP, max_steps=60, seed=1)
    run_id = handle.id.removeprefix("mobile-")
    decided: list[str] = []

    async def gate_or_done() -> str | None:
        desc = await handle.describe()
        if desc.status is not None and desc.status.name != "RUNNING":
            return "done"
        async with pool.acquire() as conn:
            run = await runs_repo.get_run(conn, run_id)  # type: ignore[arg-type]
        return run.hitl_state if run and run.hitl_state not in decided else None

    while (checkpoint := await eventually(gate_or_done, timeout=60)) != "done":
        await handle.execute_update(MobileAgentRun.decide, DecisionInput(
            checkpoint_name=checkpoint, decision="reject" if decided else "approve",
            decided_by="alice"))
        decided.append(checkpoint)
    return handle


async def fork_from_step(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    """A fork (POST /runs/{id}/fork) from step 12 of a finished run: it copies the source's
    steps, walks back to its screen and explores on."""
    source = await _start(env, pool, app_package=NOTES, max_steps=20, seed=3,
                          sensitive_actions="skip")
    await source.result()
    source_id = uuid.UUID(source.id.removeprefix("mobile-"))
    async with pool.acquire() as conn:
        at = next(s for s in await snapshots_repo.list_snapshots(conn, source_id)
                  if s.label == "step 12")
    arg = await new_mobile_run(pool, app_package=NOTES, max_steps=30, seed=3,
                               sensitive_actions="skip")
    fork = arg.model_copy(update={"fork": MobileFork(
        source_run_id=source_id, state=MobileRunState.model_validate(at.state),
        forked_from={"run_id": str(source_id), "snapshot": at.step_ordinal,
                     "checkpoint": None, "decision": None})})
    return await env.client.start_workflow(MobileAgentRun.run, fork,
                                           id=MOBILE.workflow_id(fork.run_id),
                                           task_queue=TASK_QUEUE,
                                           task_timeout=WORKFLOW_TASK_TIMEOUT)


CASES: dict[str, Case] = {
    "explore_continue_as_new": explore_continue_as_new,
    "sensitive_gates": sensitive_gates,
    # The same run once each decision's Update answers before the next step (patch
    # `answer-before-local-work`); `sensitive_gates` keeps the history from before it.
    "sensitive_gates_answered_first": sensitive_gates,
    "fork_from_step": fork_from_step,
}


def main(argv: list[str] | None = None) -> int:
    return history_recording.main(
        argv, description=__doc__.splitlines()[0], prefix="mobile", cases=CASES,
        task_queue=TASK_QUEUE, backend=backend_named("offline"), out=HISTORIES)


if __name__ == "__main__":
    raise SystemExit(main())
