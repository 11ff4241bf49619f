"""ValidationRun logic on the time-skipping server, with the real read model in Postgres."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError

from tests.helpers import eventually, new_validation_run, wait_gate
from waystation.kinds.validation.kind import VALIDATION
from waystation.kinds.validation.models import ValidationRunInput, ValidationRunResult
from waystation.kinds.validation.workflow import ValidationRun
from waystation.persistence import events as events_repo
from waystation.persistence import gates as gates_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence import snapshots as snapshots_repo
from waystation.workflows.gate_rules import DecisionInput


async def start(client: Client, arg: ValidationRunInput, task_queue: str) -> WorkflowHandle:
    return await client.start_workflow(ValidationRun.run, arg,
                                       id=VALIDATION.workflow_id(arg.run_id),
                                       task_queue=task_queue)


async def decide(handle: WorkflowHandle, checkpoint: str, decision: str = "approve",
                 who: str = "alice", **kw: object):
    return await handle.execute_update(
        ValidationRun.decide,
        DecisionInput(checkpoint_name=checkpoint, decision=decision, decided_by=who, **kw))


@pytest.mark.parametrize("tasks", ["activity", "in_place"])
async def test_approved_run_completes_with_full_read_model(time_env, pool, worker, task_queue,
                                                          tasks):
    arg = await new_validation_run(pool, tasks=tasks)
    handle = await start(time_env.client, arg, task_queue)
    for checkpoint in ("approve_founders_brief", "approve_vpc_completion",
                       "approve_desirability_gate"):
        await wait_gate(pool, arg.run_id, checkpoint)
        view = await decide(handle, checkpoint, feedback="fine")
        assert view.status == "approved" and view.decided_by == "alice"
        # Written by the time the Update answers, also when it travels with the next task.
        async with pool.acquire() as conn:
            gate = await gates_repo.latest_gate_for_checkpoint(conn, arg.run_id, checkpoint)
        assert gate is not None and gate.status == "approved"
    result: ValidationRunResult = await handle.result()
    assert result.status == "completed" and result.final_decision in ("proceed", "pivot", "kill")

    async with pool.acquire() as conn:
        run = await runs_repo.get_run(conn, arg.run_id)
        events = await events_repo.list_events(conn, arg.run_id, after_seq=0, limit=1000)
        gates = await gates_repo.list_run_gates(conn, arg.run_id)
        snapshot = await snapshots_repo.latest_snapshot(conn, arg.run_id)
        snapshots = await snapshots_repo.list_snapshots(conn, arg.run_id)
    assert run is not None and run.status == "completed" and run.hitl_state is None
    assert run.completed_at is not None and run.current_phase == 4
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert run.last_seq == len(events)
    task_events = [e for e in events if e.type.startswith("task.")]
    assert len(task_events) == 2 * 12  # 12 crew tasks, started + completed each
    done = [e for e in task_events if e.status == "completed"]
    assert all(e.output and e.duration_ms is not None and e.crew and e.agent for e in done)
    assert events[-1].type == "run.completed" and events[-1].progress_pct == 100
    assert [g.status for g in gates] == ["approved"] * 3
    assert all(g.feedback == "fine" and g.decision_by == "alice" and g.decision_at for g in gates)
    # One snapshot after each of the five phases, one at each of the three gates, one at the end.
    assert len(snapshots) == 5 + 3 + 1
    assert snapshot is not None and snapshot.state["final_decision"] == result.final_decision
    scheduled = [e for e in (await handle.fetch_history()).events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    assert len(scheduled) == (12 if tasks == "activity" else 0)


async def test_validator_refuses_bad_decisions_and_writes_nothing(time_env, pool, worker,
                                                                   task_queue):
    arg = await new_validation_run(pool)
    handle = await start(time_env.client, arg, task_queue)
    await wait_gate(pool, arg.run_id, "approve_founders_brief")
    async with pool.acquire() as conn:
        before = await events_repo.list_events(conn, arg.run_id, after_seq=0, limit=1000)

    cases = [
        (dict(checkpoint="approve_vpc_completion"), "UnknownCheckpoint"),
        (dict(checkpoint="approve_founders_brief", decision="maybe"), "UnknownOption"),
        (dict(checkpoint="approve_founders_brief", request_id=uuid.uuid4()), "StaleRequest"),
        (dict(checkpoint="approve_founders_brief", digest="0" * 64), "StaleRequest"),
    ]
    for kwargs, error_type in cases:
        with pytest.raises(WorkflowUpdateFailedError) as raised:
            await decide(handle, **kwargs)  # type: ignore[arg-type]
        assert isinstance(raised.value.cause, ApplicationError)
        assert raised.value.cause.type == error_type, raised.value.cause.message

    async with pool.acquire() as conn:
        after = await events_repo.list_events(conn, arg.run_id, after_seq=0, limit=1000)
        gate = await gates_repo.latest_gate_for_checkpoint(conn, arg.run_id,
                                                           "approve_founders_brief")
    assert len(after) == len(before)
    assert gate is not None and gate.status == "pending"

    # Citing the real request and digest is accepted; a second, different decision is refused.
    view = await decide(handle, "approve_founders_brief", request_id=gate.id, digest=gate.digest)
    assert view.status == "approved"
    with pytest.raises(WorkflowUpdateFailedError) as raised:
        await decide(handle, "approve_founders_brief", "reject", who="bob")
    assert raised.value.cause.type == "GateNotPending"
    # The same decision again is answered the same and recorded once.
    again = await decide(handle, "approve_founders_brief", request_id=gate.id)
    assert again == view
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()  # a run left open would stall time skipping for later tests


async def test_reject_reruns_phase_with_feedback_then_ends_after_retries(time_env, pool, worker,
                                                                         task_queue):
    arg = await new_validation_run(pool, max_phase_retries=1)
    handle = await start(time_env.client, arg, task_queue)
    await wait_gate(pool, arg.run_id, "approve_founders_brief")
    await decide(handle, "approve_founders_brief", "reject", feedback="focus on dentists")
    await wait_gate(pool, arg.run_id, "approve_founders_brief")
    state = await handle.query(ValidationRun.state)
    assert state.phase_attempts[0] == 2
    assert "focus on dentists" in state.founders_brief.revision_note
    await decide(handle, "approve_founders_brief", "reject", feedback="still no")
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    assert "rejected 2 times" in str(failed.value.cause)
    async with pool.acquire() as conn:
        run = await runs_repo.get_run(conn, arg.run_id)
        gates = await gates_repo.list_run_gates(conn, arg.run_id)
    assert run is not None and run.status == "failed" and "rejected" in (run.error_message or "")
    assert [g.status for g in gates] == ["rejected", "rejected"]


async def test_segment_choice_and_override_change_state(time_env, pool, worker, task_queue):
    arg = await new_validation_run(pool)
    handle = await start(time_env.client, arg, task_queue)
    await wait_gate(pool, arg.run_id, "approve_founders_brief")
    await decide(handle, "approve_founders_brief")
    await wait_gate(pool, arg.run_id, "approve_vpc_completion")
    async with pool.acquire() as conn:
        gate = await gates_repo.latest_gate_for_checkpoint(conn, arg.run_id,
                                                           "approve_vpc_completion")
    assert gate is not None
    segment = next(o for o in gate.options if o.value.startswith("segment_"))
    await decide(handle, "approve_vpc_completion", segment.value)
    await eventually(lambda: _attempts(handle, 1, 2))
    await wait_gate(pool, arg.run_id, "approve_vpc_completion")
    state = await handle.query(ValidationRun.state)
    assert state.target_segment == segment.label
    assert state.customer_profile.segment == segment.label
    await decide(handle, "approve_vpc_completion")
    await wait_gate(pool, arg.run_id, "approve_desirability_gate")
    await decide(handle, "approve_desirability_gate", "override_proceed")
    result = await handle.result()
    assert result.status == "completed"
    assert (await handle.query(ValidationRun.state)).override_proceed is True


async def _attempts(handle: WorkflowHandle, phase: int, n: int) -> bool:
    state = await handle.query(ValidationRun.state)
    return state.phase_attempts.get(phase, 0) >= n


@pytest.mark.parametrize("policy", ["pause", "fail", "default"])
async def test_gate_expires_after_seven_days_by_policy(time_env, pool, worker, task_queue, policy):
    arg = await new_validation_run(pool, expiry_policy=policy, gates=["approve_founders_brief"])
    handle = await start(time_env.client, arg, task_queue)
    await wait_gate(pool, arg.run_id, "approve_founders_brief")
    await time_env.sleep(timedelta(days=7, seconds=1))

    async def gate_status() -> str | None:
        async with pool.acquire() as conn:
            g = await gates_repo.latest_gate_for_checkpoint(conn, arg.run_id,
                                                            "approve_founders_brief")
        return g.status if g and g.status != "pending" else None
    assert await eventually(gate_status) == "expired"

    if policy == "default":
        assert (await handle.result()).status == "completed"
        async with pool.acquire() as conn:
            g = await gates_repo.latest_gate_for_checkpoint(conn, arg.run_id,
                                                            "approve_founders_brief")
        assert g is not None and g.decision == "approve" and g.decision_by == "system"
    elif policy == "fail":
        with pytest.raises(WorkflowFailureError):
            await handle.result()
    else:
        async def paused() -> bool:
            async with pool.acquire() as conn:
                run = await runs_repo.get_run(conn, arg.run_id)
            return run is not None and run.status == "paused" and run.hitl_state is None
        await eventually(paused)
        # A decision after expiry is refused; re-opening asks again.
        with pytest.raises(WorkflowUpdateFailedError) as raised:
            await decide(handle, "approve_founders_brief")
        assert raised.value.cause.type == "GateNotPending"
        from waystation.workflows.gate_rules import ReopenInput
        view = await handle.execute_update(
            ValidationRun.reopen,
            ReopenInput(checkpoint_name="approve_founders_brief", requested_by="alice"))
        assert view.status == "pending"
        await decide(handle, "approve_founders_brief")
        assert (await handle.result()).status == "completed"


async def test_reopen_supersedes_pending_request_and_refuses_stale_citation(
        time_env, pool, worker, task_queue):
    from waystation.workflows.gate_rules import ReopenInput
    arg = await new_validation_run(pool, gates=["approve_founders_brief"])
    handle = await start(time_env.client, arg, task_queue)
    await wait_gate(pool, arg.run_id, "approve_founders_brief")
    async with pool.acquire() as conn:
        old = await gates_repo.latest_gate_for_checkpoint(conn, arg.run_id,
                                                          "approve_founders_brief")
    assert old is not None
    new_view = await handle.execute_update(
        ValidationRun.reopen,
        ReopenInput(checkpoint_name="approve_founders_brief", requested_by="alice"))
    assert new_view.request_id != old.id
    async with pool.acquire() as conn:
        statuses = {g.id: g.status for g in await gates_repo.list_run_gates(conn, arg.run_id)}
    assert statuses == {old.id: "superseded", new_view.request_id: "pending"}
    with pytest.raises(WorkflowUpdateFailedError) as raised:
        await decide(handle, "approve_founders_brief", request_id=old.id)
    assert raised.value.cause.type == "StaleRequest"
    await decide(handle, "approve_founders_brief", request_id=new_view.request_id)
    assert (await handle.result()).status == "completed"


async def test_cancel_marks_run_and_gate(time_env, pool, worker, task_queue):
    arg = await new_validation_run(pool)
    handle = await start(time_env.client, arg, task_queue)
    await wait_gate(pool, arg.run_id, "approve_founders_brief")
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    async with pool.acquire() as conn:
        run = await runs_repo.get_run(conn, arg.run_id)
        gates = await gates_repo.list_run_gates(conn, arg.run_id)
    assert run is not None and run.status == "canceled"
    assert [g.status for g in gates] == ["superseded"]


async def test_signal_decision_is_applied_and_bad_one_dropped(time_env, pool, worker, task_queue):
    arg = await new_validation_run(pool, gates=["approve_founders_brief"])
    handle = await start(time_env.client, arg, task_queue)
    await wait_gate(pool, arg.run_id, "approve_founders_brief")
    await handle.signal(ValidationRun.decide_signal, DecisionInput(
        checkpoint_name="approve_founders_brief", decision="nonsense", decided_by="alice"))
    await handle.signal(ValidationRun.decide_signal, DecisionInput(
        checkpoint_name="approve_founders_brief", decision="approve", decided_by="alice"))
    assert (await handle.result()).status == "completed"
    async with pool.acquire() as conn:
        gates = await gates_repo.list_run_gates(conn, arg.run_id)
    assert [(g.status, g.decision) for g in gates] == [("approved", "approve")]
