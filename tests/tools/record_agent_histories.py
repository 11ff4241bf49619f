"""Record AgentRun histories for the replay test: `python -m tests.tools.record_agent_histories`.

Runs the offline planner on the time-skipping server with the real read model and writes
tests/histories/agent_<case>.json. Only the expired-approval path records so far: the
conversation and continue-as-new cases hung in the recorder (see the issue-12 report).
"""

from __future__ import annotations

from datetime import timedelta

import asyncpg
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.agents import backend_named
from tests.agent_helpers import new_agent_run, start_agent, waiting
from tests.tools import history_recording
from tests.tools.history_recording import Case

TASK_QUEUE = "record-agent-histories"


async def _end(env: WorkflowEnvironment, handle: WorkflowHandle, turn: int) -> WorkflowHandle:
    """The current run's handle; its idle timeout ends it, so the recorder gets a finished
    history."""
    await waiting(handle, turn=turn)
    run_id = (await handle.describe()).run_id
    return env.client.get_workflow_handle(handle.id, run_id=run_id)


async def approval_expires(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    arg = await new_agent_run(pool, message="Book Banyan Courtyard on 2027-03-01 for 90 guests",
                              approval_timeout_seconds=3600, idle_timeout_seconds=3600)
    handle = await start_agent(env.client, arg, TASK_QUEUE)
    await waiting(handle, "approval")
    await env.sleep(timedelta(hours=2))
    return await _end(env, handle, 1)


CASES: dict[str, Case] = {
    "approval_expires": approval_expires,
}


def main(argv: list[str] | None = None) -> int:
    return history_recording.main(
        argv, description=__doc__.splitlines()[0], prefix="agent", cases=CASES,
        task_queue=TASK_QUEUE, backend=backend_named("offline"))


if __name__ == "__main__":
    raise SystemExit(main())
