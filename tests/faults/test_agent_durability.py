"""An agent run's worker SIGKILLed between a tool call and the next model request (dev
server, real Postgres, `python -m waystation worker` subprocesses): the run finishes its turn
on a new worker, no tool call runs twice, and no event is recorded twice. The planner's
search is a local tool (issue 31): its completion is a local-activity marker in the history,
recorded with the workflow task that schedules the next model request."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from tests.agent_helpers import BOOK, SEARCH, decide, new_agent_run, start_agent, waiting
from tests.fault_helpers import eventually_or_logs, run_paused, worker_env
from tests.faults.test_durability import WorkerProcesses, assert_read_model_consistent

# Each offline model request takes this long: the window in which the worker is killed.
MODEL_DELAY_MS = 1500


@pytest.fixture
def workers(dev_env: WorkflowEnvironment, migrated_url: str, task_queue: str,
            tmp_path: Path) -> Iterator[WorkerProcesses]:
    procs = WorkerProcesses(worker_env(migrated_url,
                                       dev_env.client.service_client.config.target_host,
                                       task_queue, tmp_path / "data", delay_ms=MODEL_DELAY_MS),
                            tmp_path)
    yield procs
    procs.stop_all()


def activities(history, event_type: EventType.ValueType, kind: str) -> list:
    """The history's events of `event_type` for activities whose type name contains `kind`."""
    scheduled = {e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
                 for e in history.events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED}
    found = []
    for e in history.events:
        if e.event_type != event_type:
            continue
        if event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = scheduled[e.event_id]
        elif event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            name = scheduled[e.activity_task_started_event_attributes.scheduled_event_id]
        else:
            name = scheduled[e.activity_task_completed_event_attributes.scheduled_event_id]
        if kind in name:
            found.append(e)
    return found


def local_tool_runs(history, kind: str) -> list:
    """The history's local-activity markers of local tools whose type name contains `kind`."""
    found = []
    for e in history.events:
        if e.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
            continue
        marker = e.marker_recorded_event_attributes
        if marker.marker_name != "core_local_activity":
            continue
        data = json.loads(marker.details["data"].payloads[0].data)
        if data["activity_type"].startswith("local_tool__") and kind in data["activity_type"]:
            found.append(e)
    return found


async def model_request_after_a_tool_call(handle: WorkflowHandle) -> bool:
    """A tool call has completed and the next model request is scheduled: the worker is
    inside it (the offline model sleeps MODEL_DELAY_MS)."""
    history = await handle.fetch_history()
    tool_done = local_tool_runs(history, "search_vendors")
    if not tool_done:
        return False
    models = activities(history, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, "model_request")
    return any(m.event_id > tool_done[0].event_id for m in models)


@pytest.mark.slow
async def test_worker_sigkilled_between_a_tool_call_and_the_next_model_request(
        dev_env, pool, task_queue, workers):
    arg = await new_agent_run(pool, message=SEARCH)
    first = workers.start()
    handle = await start_agent(dev_env.client, arg, task_queue)
    await eventually_or_logs(lambda: model_request_after_a_tool_call(handle), workers.logs,
                             "no tool call; worker log", timeout=60, interval=0.05)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    assert first.returncode == -signal.SIGKILL

    workers.start()
    await eventually_or_logs(lambda: run_paused(pool, arg.run_id), workers.logs,
                             "turn not finished; worker logs", timeout=60, interval=0.2)

    history = await handle.fetch_history()
    # The tool's call completed once, and was not run again by the new worker (a local tool
    # the worker had died in would have run again: its marker records its only completion).
    assert len(local_tool_runs(history, "search_vendors")) == 1
    assert not activities(history, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, "call_tool")
    # The model request the worker died in really was run again, on the new worker.
    attempts = [e.activity_task_started_event_attributes.attempt for e in activities(
        history, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED, "model_request")]
    assert max(attempts) >= 2, attempts

    events = await assert_read_model_consistent(pool, arg.run_id)
    types = [e.type for e in events]
    assert types.count("tool.called") == 1 and types.count("tool.returned") == 1
    assert types.count("agent.answered") == 1 and types.count("message.received") == 1
    answer = next(e.output for e in events if e.type == "agent.answered")
    assert answer["text"].startswith("I found 3:")
    await handle.terminate("test over")


@pytest.mark.slow
async def test_worker_sigkilled_after_the_approved_tools_result_is_written(
        dev_env, pool, task_queue, workers):
    """The approved booking's result is written as the tool has run (issue 31); the worker
    dies in the model request that follows. The new worker finishes the turn: the booking ran
    once, its `tool.returned` is in the read model once (written before the kill, not again)."""
    arg = await new_agent_run(pool, message=BOOK)
    first = workers.start()
    handle = await start_agent(dev_env.client, arg, task_queue)
    await waiting(handle, "approval", timeout=60)
    await decide(handle, "approve_book_vendor_1", "approve")

    async def returned_then_model_request() -> bool:
        history = await handle.fetch_history()
        booked = activities(history, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, "call_tool")
        models = activities(history, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
                            "model_request")
        return bool(booked) and any(m.event_id > booked[0].event_id for m in models)
    await eventually_or_logs(returned_then_model_request, workers.logs,
                             "no booking; worker log", timeout=60, interval=0.05)
    async with pool.acquire() as conn:
        early = await conn.fetchval(
            "SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'tool.returned'",
            arg.run_id)
    assert early == 1  # written before the model request, which the worker now dies in
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)

    workers.start()
    try:
        await waiting(handle, turn=1, timeout=60)
    except AssertionError:
        raise AssertionError(f"turn not finished; worker logs:\n{workers.logs()}") from None
    history = await handle.fetch_history()
    bookings = activities(history, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED, "call_tool")
    assert [e.activity_task_started_event_attributes.attempt for e in bookings] == [1]
    events = await assert_read_model_consistent(pool, arg.run_id)
    returned = [e for e in events if e.type == "tool.returned"]
    assert len(returned) == 1 and returned[0].event_key.startswith("t1.call.")
    assert returned[0].output["result"]["booked"] is True
    answer = next(e.output for e in events if e.type == "agent.answered")
    assert answer["text"].startswith("Booked Rosewood Estate")
    await handle.terminate("test over")
