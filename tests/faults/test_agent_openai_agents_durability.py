"""An OpenAI Agents SDK agent run's worker SIGKILLed at a `needs_approval` tool's gate, the
approval given while no worker runs (dev server, real Postgres, `python -m waystation worker`
subprocesses, the agent registered by examples/openai_agents_agent's entry point): the new
worker replays the turn from history (the model call's activity is not run again), applies the
approval, and the tool's activity runs exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from tests.agent_helpers import decide, new_agent_run, start_agent, waiting
from tests.fault_helpers import worker_env
from tests.faults.test_agent_durability import activities
from tests.faults.test_durability import WorkerProcesses, assert_read_model_consistent
from waystation.registry import load_registry

# The agent's entry point, as the worker processes register it (the run's input names it).
load_registry()


@pytest.fixture
def workers(dev_env: WorkflowEnvironment, migrated_url: str, task_queue: str,
            tmp_path: Path) -> Iterator[WorkerProcesses]:
    procs = WorkerProcesses(worker_env(migrated_url,
                                       dev_env.client.service_client.config.target_host,
                                       task_queue, tmp_path / "data"), tmp_path)
    yield procs
    procs.stop_all()


@pytest.mark.slow
async def test_worker_sigkilled_between_the_approval_and_the_tool_runs_it_once(
        dev_env, pool, task_queue, workers):
    arg = await new_agent_run(pool, agent="refunds_desk", message="refund A-5005, 70 EUR")
    first = workers.start()
    handle = await start_agent(dev_env.client, arg, task_queue)
    try:
        await waiting(handle, "approval", timeout=60)
    except AssertionError:
        raise AssertionError(f"no gate; worker log:\n{workers.logs()}") from None
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    assert first.returncode == -signal.SIGKILL

    # The person approves while no worker runs: the decision waits for one.
    approval = asyncio.create_task(decide(handle, "approve_issue_refund_1", "approve"))
    await asyncio.sleep(1)
    assert not approval.done()
    workers.start()
    await asyncio.wait_for(approval, timeout=60)

    try:
        await waiting(handle, turn=1, timeout=60)
    except AssertionError:
        raise AssertionError(f"turn not finished; worker logs:\n{workers.logs()}") from None

    history = await handle.fetch_history()
    # The tool's activity: not on the killed worker (it stopped at the gate), once on the new
    # one with the approval, a single attempt: the refund ran once. The first model call is
    # not made again (answered from history).
    tool_runs = activities(history, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
                           "openai_agents_agent.issue_refund")
    assert [e.activity_task_started_event_attributes.attempt for e in tool_runs] == [1]
    model_runs = activities(history, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
                            "invoke_model_activity")
    assert [e.activity_task_started_event_attributes.attempt for e in model_runs] == [1, 1, 1]
    events = await assert_read_model_consistent(pool, arg.run_id)
    types = [e.type for e in events]
    assert types.count("tool.called") == 1 and types.count("tool.returned") == 1
    assert types.count("gate.decided") == 1 and types.count("agent.answered") == 1
    answer = next(e.output for e in events if e.type == "agent.answered")
    assert answer["text"] == "Refunded 70 EUR on order A-5005 (rf-A-5005-70)."
    await handle.terminate("test over")
