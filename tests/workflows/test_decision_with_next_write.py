"""A decision written with the run's next write (`ask_human(..., record_with_next=True)`), on
the time-skipping server with the real read model: one transaction holds the decision and the
next step, the Update still answers with the decision written, a decision just before the
run's end is written by its completion, quorum votes before it are written at once, the
history replays, a decision whose write a cancel cuts short is written with the run's last
write, and a cancel racing the run's end leaves one end."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import asyncpg
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateStage,
)
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer, Worker

from tests.helpers import eventually
from tests.plugin_samples.quick_steps import (
    GATE,
    QUICK_STEPS,
    QuickInput,
    QuickResult,
    QuickSteps,
)
from waystation.activities.agents import backend_named
from waystation.api.run_kinds import start_run
from waystation.persistence.runs import create_run
from waystation.registry import load_registry
from waystation.temporal_client import DATA_CONVERTER
from waystation.worker import build_worker
from waystation.workflows import search_attributes as sa
from waystation.workflows.gate_handlers import GatedWorkflow
from waystation.workflows.gate_rules import DecisionInput
from waystation.workflows.lifecycle import RUN_FAILED_ERROR

T = TypeVar("T")
EVENTS = "SELECT event_key, type, seq, created_at FROM run_events WHERE run_id = $1 ORDER BY seq"


@pytest.fixture
async def worker(time_env: Any, pool: asyncpg.Pool, task_queue: str) -> AsyncIterator[Worker]:
    registry = load_registry(["tests.plugin_samples.quick_steps"], use_entry_points=False)
    async with build_worker(time_env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline"), registry=registry) as w:
        yield w


async def start(client: Client, pool: asyncpg.Pool, task_queue: str, quick: QuickInput,
                gates: dict[str, Any] | None = None) -> tuple[uuid.UUID, WorkflowHandle]:
    run_id = uuid.uuid4()
    async with pool.acquire() as conn:
        run, _ = await create_run(
            conn, run_id=run_id, kind=QUICK_STEPS.name, owner="alice", group_id=None,
            workflow_id=QUICK_STEPS.workflow_id(run_id), idempotency_key=None,
            input=quick.model_dump(mode="json"), gate_policies=gates)
    await start_run(client, task_queue, QUICK_STEPS, run)
    handle = client.get_workflow_handle(run.workflow_id, result_type=QuickResult)

    async def pending() -> bool:
        async with pool.acquire() as conn:
            return bool(await conn.fetchval(
                "SELECT 1 FROM hitl_requests WHERE run_id = $1 AND status = 'pending'", run_id))
    await eventually(pending)
    return run_id, handle


async def events(pool: asyncpg.Pool, run_id: uuid.UUID) -> dict[str, asyncpg.Record]:
    async with pool.acquire() as conn:
        return {row["event_key"].rsplit(".", 1)[-1] if row["type"].startswith("gate.")
                else row["event_key"]: row for row in await conn.fetch(EVENTS, run_id)}


async def request_status(pool: asyncpg.Pool, run_id: uuid.UUID) -> str:
    async with pool.acquire() as conn:
        return await conn.fetchval("SELECT status FROM hitl_requests WHERE run_id = $1", run_id)


async def decide_and_cancel_while_the_run_is_locked(
        pool: asyncpg.Pool, run_id: uuid.UUID, decide: Callable[[], Awaitable[T]],
        handle: WorkflowHandle, *, hold_s: float) -> T:
    """`decide`, then cancel, while the run's row is locked (every write of the run waits on
    it) for `hold_s` seconds; what `decide` returned."""
    async with pool.acquire() as blocker:
        lock = blocker.transaction()
        await lock.start()
        await blocker.execute("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", run_id)
        decided = await decide()
        await handle.cancel()
        # The lock is held for a chosen time: the race under test is between the cancel and this
        # lock.
        await asyncio.sleep(hold_s)
        await lock.rollback()
    return decided


APPROVAL = DecisionInput(checkpoint_name=GATE, decision="approve", decided_by="alice")


def record_markers(history: Any) -> int:
    """The recorder's writes (local activities named `record`; a gate's decision policies are
    evaluated by another, `evaluate_decision_policies`)."""
    return sum(1 for e in history.events if e.HasField("marker_recorded_event_attributes")
               and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
               and json.loads(e.marker_recorded_event_attributes.details["data"].payloads[0]
                              .data)["activity_type"] == "record")


async def test_the_decision_and_the_next_step_are_one_write(
        time_env: Any, pool: asyncpg.Pool, task_queue: str, worker: Worker) -> None:
    run_id, handle = await start(time_env.client, pool, task_queue,
                                 QuickInput(steps=3, gate_after=1))
    view = await handle.execute_update(GatedWorkflow.decide, APPROVAL)
    assert view.status == "approved"
    # The Update answered: the decision is in the read model, with the next step.
    assert await request_status(pool, run_id) == "approved"
    assert (await handle.result()).decision == "approve"
    written = await events(pool, run_id)
    assert written["decided"]["seq"] + 1 == written["step.2"]["seq"]
    assert written["decided"]["created_at"] == written["step.2"]["created_at"]  # one commit
    assert written["step.1"]["created_at"] != written["opened"]["created_at"]
    assert list(written) == ["run.started", "step.1", "opened", "decided", "step.2",
                                    "step.3", "run.completed"]
    history = await handle.fetch_history()
    # step 1, the gate, the decision with step 2, step 3, the completion.
    assert record_markers(history) == 5
    await Replayer(workflows=[QuickSteps], data_converter=DATA_CONVERTER
                   ).replay_workflow(history)


def event_types(history: Any) -> list[str]:
    return [EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
            + (f":{e.marker_recorded_event_attributes.marker_name}"
               if e.HasField("marker_recorded_event_attributes") else "")
            for e in history.events]


async def test_the_update_answers_before_the_steps_after_the_decision(
        time_env: Any, pool: asyncpg.Pool, task_queue: str, worker: Worker) -> None:
    """An Update answers when its workflow task completes; the local activities after the
    decision would keep that task open (a mobile run's steps held a click's answer up to the
    task's 1.6 s heartbeat). The task ends right after the decision's write instead."""
    _, handle = await start(time_env.client, pool, task_queue, QuickInput(steps=3, gate_after=1))
    await handle.execute_update(GatedWorkflow.decide, APPROVAL)
    await handle.result()
    types = event_types(await handle.fetch_history())
    answered = types.index("WORKFLOW_EXECUTION_UPDATE_COMPLETED")
    after = types[answered:]
    # Step 3 and the completion come in the next workflow task, after a 1 ms timer.
    assert after.count("MARKER_RECORDED:core_local_activity") == 2
    assert after.index("WORKFLOW_TASK_STARTED") < after.index(
        "MARKER_RECORDED:core_local_activity")
    assert "TIMER_FIRED" in after
    await Replayer(workflows=[QuickSteps], data_converter=DATA_CONVERTER
                   ).replay_workflow(await handle.fetch_history())


async def test_a_decision_just_before_the_end_is_written_by_the_completion(
        time_env: Any, pool: asyncpg.Pool, task_queue: str, worker: Worker) -> None:
    run_id, handle = await start(time_env.client, pool, task_queue,
                                 QuickInput(steps=2, gate_after=2))
    view = await handle.execute_update(GatedWorkflow.decide, DecisionInput(
        checkpoint_name=GATE, decision="reject", decided_by="alice", feedback="enough"))
    assert view.status == "rejected"
    assert (await handle.result()).decision == "reject"
    assert await request_status(pool, run_id) == "rejected"
    written = await events(pool, run_id)
    assert list(written)[-3:] == ["opened", "decided", "run.completed"]
    assert written["decided"]["seq"] + 1 == written["run.completed"]["seq"]


async def test_votes_before_the_quorum_are_written_at_once(
        time_env: Any, pool: asyncpg.Pool, task_queue: str, worker: Worker) -> None:
    run_id, handle = await start(time_env.client, pool, task_queue,
                                 QuickInput(steps=2, gate_after=1), gates={"*": {"quorum": 2}})
    first = await handle.execute_update(GatedWorkflow.decide, DecisionInput(
        checkpoint_name=GATE, decision="approve", decided_by="alice"))
    assert first.status == "pending"
    assert (await events(pool, run_id))["alice"]["type"] == "gate.voted"
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM gate_votes gv JOIN hitl_requests h "
                                   "ON h.id = gv.request_id WHERE h.run_id = $1", run_id) == 1
    assert await request_status(pool, run_id) == "pending"
    second = await handle.execute_update(GatedWorkflow.decide, DecisionInput(
        checkpoint_name=GATE, decision="approve", decided_by="bob"))
    assert second.status == "approved"
    assert await request_status(pool, run_id) == "approved"
    written = await events(pool, run_id)
    assert written["decided"]["created_at"] == written["step.2"]["created_at"]
    assert (await handle.result()).decision == "approve"


async def test_a_decision_whose_write_is_cut_short_by_a_cancel_is_written_at_the_end(
        time_env: Any, pool: asyncpg.Pool, task_queue: str, worker: Worker) -> None:
    run_id, handle = await start(time_env.client, pool, task_queue,
                                 QuickInput(steps=3, gate_after=1))
    # The write carrying the decision (and step 2) is under way, blocked, past the workflow
    # task's heartbeat (80% of the kind's 2 s task timeout), so the workflow sees the cancel.
    update = await decide_and_cancel_while_the_run_is_locked(
        pool, run_id, lambda: handle.start_update(
            GatedWorkflow.decide, APPROVAL, wait_for_stage=WorkflowUpdateStage.ACCEPTED),
        handle, hold_s=3)
    assert (await update.result()).status == "approved"
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    assert await request_status(pool, run_id) == "approved"
    written = await events(pool, run_id)
    assert list(written)[-2:] == ["decided", "run.canceled"]
    assert "step.2" not in written


@pytest.mark.parametrize("fail_at_end", [False, True], ids=["completed", "failed"])
async def test_a_cancel_racing_the_runs_end_leaves_one_end_everywhere(
        time_env: Any, pool: asyncpg.Pool, task_queue: str, worker: Worker,
        fail_at_end: bool) -> None:
    """The cancel arrives while the run's last local activities are held up, within one
    workflow task: their writes commit, Temporal refuses the completion, and the replay takes
    the cancel's path. The read model keeps the end it has (migration 028), and the workflow
    ends the same way: Temporal, the Web UI's status and the read model agree. (Decided by the
    Signal: an Update's answer would end the workflow task before the steps after it.)"""
    run_id, handle = await start(time_env.client, pool, task_queue,
                                 QuickInput(steps=3, gate_after=1, fail_at_end=fail_at_end))
    # Held under the workflow task's 1.6 s heartbeat.
    await decide_and_cancel_while_the_run_is_locked(
        pool, run_id, lambda: handle.signal(GatedWorkflow.decide_signal, APPROVAL), handle,
        hold_s=0.5)
    end = "failed" if fail_at_end else "completed"
    if fail_at_end:
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        assert isinstance(failure.value.cause, ApplicationError)
        assert failure.value.cause.type == RUN_FAILED_ERROR
        assert failure.value.cause.message == "told to fail after approve"
    else:
        assert await handle.result() == QuickResult(decision="approve")
    written = await events(pool, run_id)
    assert [key for key in written if key.startswith("run.") and key != "run.started"] == \
        [f"run.{end}"]
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT status FROM runs WHERE id = $1", run_id) == end
    history = await handle.fetch_history()
    # The cancel did reach the workflow: this is the race, not a run that ended first.
    assert any(e.HasField("workflow_execution_cancel_requested_event_attributes")
               for e in history.events)
    assert (await handle.describe()).status == (
        WorkflowExecutionStatus.FAILED if fail_at_end else WorkflowExecutionStatus.COMPLETED)
    assert shown_statuses(history)[-1] == end
    await Replayer(workflows=[QuickSteps], data_converter=DATA_CONVERTER
                   ).replay_workflow(history)


def shown_statuses(history: Any) -> list[str]:
    """The WaystationStatus of each upsert that sets it (a patch upserts its own attribute)."""
    upserts = [e.upsert_workflow_search_attributes_event_attributes.search_attributes
               for e in history.events
               if e.HasField("upsert_workflow_search_attributes_event_attributes")]
    return [json.loads(fields.indexed_fields["WaystationStatus"].data) for fields in upserts
            if "WaystationStatus" in fields.indexed_fields]


async def test_the_web_uis_search_attributes_follow_the_run(
        time_env: Any, pool: asyncpg.Pool, task_queue: str, worker: Worker) -> None:
    """Started as `pending` by the API, the run upserts its status on each change (not on
    every write). The first upsert stays even though a run's first state is always `running`:
    a worker that skipped it would not replay the histories of runs whose first task an
    older worker ran."""
    _, handle = await start(time_env.client, pool, task_queue, QuickInput(steps=2, gate_after=1))
    await handle.execute_update(GatedWorkflow.decide, DecisionInput(
        checkpoint_name=GATE, decision="approve", decided_by="alice"))
    await handle.result()
    history = await handle.fetch_history()
    assert shown_statuses(history) == ["running", "paused", "running", "completed"]
    shown = (await handle.describe()).typed_search_attributes
    assert (shown.get(sa.STATUS), shown.get(sa.AWAITING_HUMAN)) == ("completed", False)
