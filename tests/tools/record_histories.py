"""Record ValidationRun histories for the replay test: `python -m tests.tools.record_histories`.

Runs the workflow on the time-skipping test server with the real read model (an embedded
PostgreSQL in a temporary folder, migrated) through the interesting paths, and writes each
history to tests/histories/validation_<case>.json. tests/replay/test_replay.py replays every file
there against the current workflow code, so a change that breaks determinism for runs already
in flight fails the suite. Re-record only on purpose (a deliberately incompatible change that
ships behind a new workflow name or a patch), and check the files in.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import asyncpg
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from tests.helpers import FailingTasks, eventually, new_validation_run, wait_gate
from tests.tools import history_recording
from tests.tools.history_recording import Case
from waystation.contracts.gate_policy import GATE_POLICY_MEMO
from waystation.contracts.kinds import ForkPoint, RunStart
from waystation.kinds.validation.kind import VALIDATION
from waystation.kinds.validation.workflow import ValidationRun
from waystation.persistence import gates as gates_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence import snapshots as snapshots_repo
from waystation.workflows.gate_rules import DecisionInput, DelegateInput, ReopenInput

TASK_QUEUE = "record-histories"
GATES = ("approve_founders_brief", "approve_vpc_completion", "approve_desirability_gate")
# The offline backend, unless a case makes one of its tasks fail.
BACKEND = FailingTasks()



async def _start(env: WorkflowEnvironment, pool: asyncpg.Pool, *,
                 gate_rules: dict | None = None, **fields: object
                 ) -> tuple[WorkflowHandle, uuid.UUID]:
    arg = await new_validation_run(pool, **fields)
    handle = await env.client.start_workflow(
        ValidationRun.run, arg, id=VALIDATION.workflow_id(arg.run_id), task_queue=TASK_QUEUE,
        memo={GATE_POLICY_MEMO: gate_rules} if gate_rules else None)
    return handle, arg.run_id


async def _decide(handle: WorkflowHandle, checkpoint: str, decision: str = "approve",
                  feedback: str | None = None) -> None:
    await handle.execute_update(ValidationRun.decide, DecisionInput(
        checkpoint_name=checkpoint, decision=decision, decided_by="alice", feedback=feedback))


async def approve_all(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    handle, run_id = await _start(env, pool)
    for checkpoint in GATES:
        await wait_gate(pool, run_id, checkpoint)
        await _decide(handle, checkpoint, feedback="fine")
    return handle


async def reject_segment_override(env: WorkflowEnvironment, pool: asyncpg.Pool
                                  ) -> WorkflowHandle:
    handle, run_id = await _start(env, pool)
    await wait_gate(pool, run_id, GATES[0])
    await _decide(handle, GATES[0], "reject", feedback="focus on dentists")
    await _wait_until_attempt(handle, 0, 2)
    await wait_gate(pool, run_id, GATES[0])
    await _decide(handle, GATES[0])

    await wait_gate(pool, run_id, GATES[1])
    async with pool.acquire() as conn:
        gate = await gates_repo.latest_gate_for_checkpoint(conn, run_id, GATES[1])
    assert gate is not None
    segment = next(o for o in gate.options if o.value.startswith("segment_"))
    await _decide(handle, GATES[1], segment.value)
    await _wait_until_attempt(handle, 1, 2)
    await wait_gate(pool, run_id, GATES[1])
    await _decide(handle, GATES[1])

    await wait_gate(pool, run_id, GATES[2])
    await _decide(handle, GATES[2], "override_proceed", feedback="we accept the risk")
    return handle


async def expire_pause_reopen(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    handle, run_id = await _start(env, pool, gates=[GATES[0]], expiry_policy="pause")
    await wait_gate(pool, run_id, GATES[0])
    await env.sleep(timedelta(days=7, seconds=1))

    async def paused() -> bool:
        async with pool.acquire() as conn:
            run = await runs_repo.get_run(conn, run_id)
        return run is not None and run.status == "paused" and run.hitl_state is None
    await eventually(paused, timeout=30)
    await handle.execute_update(ValidationRun.reopen,
                                ReopenInput(checkpoint_name=GATES[0], requested_by="alice"))
    await wait_gate(pool, run_id, GATES[0])
    await _decide(handle, GATES[0])
    return handle


async def people_quorum_reminders(env: WorkflowEnvironment, pool: asyncpg.Pool
                                  ) -> WorkflowHandle:
    """Gate rules from the memo: two approvals, a typed answer that approving may carry,
    daily reminders, escalation after two days; a vote handed on, then the quorum."""
    handle, run_id = await _start(env, pool, gates=[GATES[0]], gate_rules={"*": {
        "quorum": 2, "answer_schema": {"type": "object", "properties": {
            "budget_usd": {"type": "integer", "minimum": 100}}},
        "answer_options": {"approve": "optional"}, "remind_every": "P1D",
        "escalate_after": "P2D", "escalate_to_roles": ["director"]}})
    await wait_gate(pool, run_id, GATES[0])
    await env.sleep(timedelta(days=2, hours=12))
    await handle.execute_update(ValidationRun.delegate, DelegateInput(
        checkpoint_name=GATES[0], from_user="alice", to_user="dan"))
    await handle.execute_update(ValidationRun.decide, DecisionInput(
        checkpoint_name=GATES[0], decision="approve", decided_by="dan", for_self=False,
        answer={"budget_usd": 500}))
    await handle.execute_update(ValidationRun.decide, DecisionInput(
        checkpoint_name=GATES[0], decision="approve", decided_by="bob"))
    return handle


async def task_failed_skip(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    """A task fails for good; a person skips it at the task_failed gate (a `skipped` event)."""
    BACKEND.failing = {"assess_fit"}
    handle, run_id = await _start(env, pool, gates=[])
    await wait_gate(pool, run_id, "task_failed")
    await _decide(handle, "task_failed", "skip", feedback="go on without it")
    return handle


async def fork_reject_past_decision(env: WorkflowEnvironment, pool: asyncpg.Pool
                                    ) -> WorkflowHandle:
    """A fork (POST /runs/{id}/fork) from a run waiting at its first gate, rejecting it first:
    the fork starts at that gate, applies the rejection, re-runs phase 0, and is approved."""
    source, source_id = await _start(env, pool, gates=[GATES[0]])
    await wait_gate(pool, source_id, GATES[0])
    async with pool.acquire() as conn:
        snapshot = await snapshots_repo.latest_snapshot_at_gate(conn, source_id, GATES[0])
    assert snapshot is not None
    await source.terminate("recorded the fork's source only")
    fork = await new_validation_run(pool, gates=[GATES[0]])
    decision = {"checkpoint_name": GATES[0], "decision": "reject",
                "feedback": "focus on dentists", "decided_by": "alice"}
    assert VALIDATION.forks.start is not None
    arg = VALIDATION.forks.start(
        RunStart(run_id=fork.run_id, owner=fork.owner, input=fork.input),
        ForkPoint(source_run_id=source_id, snapshot=snapshot.step_ordinal, label=snapshot.label,
                  state=snapshot.state, checkpoint=GATES[0], decision=decision,
                  forked_from={"run_id": str(source_id), "snapshot": snapshot.step_ordinal,
                               "checkpoint": GATES[0], "decision": decision}))
    handle = await env.client.start_workflow(
        ValidationRun.run, arg, id=VALIDATION.workflow_id(fork.run_id), task_queue=TASK_QUEUE)
    await _wait_until_attempt(handle, 0, 2)
    await wait_gate(pool, fork.run_id, GATES[0])
    await _decide(handle, GATES[0])
    return handle


async def tasks_in_place(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    """Crew tasks run in place (local activities): each gate's decision is written with the
    next phase's first task; a task fails for good and is retried at task_failed."""
    BACKEND.failing = {"assess_fit"}
    handle, run_id = await _start(env, pool, gates=list(GATES[:2]), tasks="in_place")
    await wait_gate(pool, run_id, GATES[0])
    await _decide(handle, GATES[0], feedback="fine")
    await wait_gate(pool, run_id, "task_failed")
    await _decide(handle, "task_failed", "retry")
    await wait_gate(pool, run_id, GATES[1])
    await _decide(handle, GATES[1])
    return handle


async def _wait_until_attempt(handle: WorkflowHandle, phase: int, attempt: int) -> None:
    async def reached() -> bool:
        state = await handle.query(ValidationRun.state)
        return state.phase_attempts.get(phase, 0) >= attempt
    await eventually(reached, timeout=30)


CASES: dict[str, Case] = {
    "approve_all": approve_all,
    "reject_segment_override": reject_segment_override,
    "expire_pause_reopen": expire_pause_reopen,
    "people_quorum_reminders": people_quorum_reminders,
    "task_failed_skip": task_failed_skip,
    "fork_reject_past_decision": fork_reject_past_decision,
    "tasks_in_place": tasks_in_place,
}


def main(argv: list[str] | None = None) -> int:
    return history_recording.main(
        argv, description=__doc__.splitlines()[0], prefix="validation", cases=CASES,
        task_queue=TASK_QUEUE, backend=BACKEND)


if __name__ == "__main__":
    raise SystemExit(main())
