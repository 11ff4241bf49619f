"""ValidationRun: five phases of crew work with human gates between them (seed 000).

The workflow history is the checkpoint: there is no resume code. A gate waits on a durable
timer and a condition, so a run that waits a week for a human holds no worker and no cache.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from activities.crew_tasks import CrewTaskActivities, CrewTaskInput, CrewTaskResult
    from activities.validation.outputs import TASK_OUTPUTS
    from persistence.models import GateStatus, RunStatus
    from persistence.writes import RunStateWrite
    from workflows import search_attributes as sa
    from workflows.gated import GatedWorkflow
    from workflows.gates import OpenGate, feedback_number
    from workflows.recorder import RunRecorder
    from workflows.validation_gates import budget_gate_spec, gate_spec, task_failed_gate_spec
    from workflows.validation_models import (
        ValidationRunInput,
        ValidationRunResult,
        ValidationRunState,
    )
    from workflows.validation_phases import PHASE_COUNT, PHASES, PhaseDef, TaskDef

WORKFLOW_ID_PREFIX = "validation-"
TASK_TIMEOUT = timedelta(minutes=10)
# Crew tasks heartbeat while they run: a task whose worker died is retried after this,
# not after TASK_TIMEOUT.
TASK_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
# Model calls fail in bursts (rate limits, overload) that last minutes: back off up to a
# minute between tries, without a count (a worker crash must not use up tries); the task
# itself gives up after its retry window (activities.crew_tasks.RETRY_WINDOW), and a 429's
# Retry-After replaces the backoff.
TASK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0,
                         maximum_interval=timedelta(seconds=60), maximum_attempts=0)
KIND = "validation"

NextStep = Literal["next", "rerun", "end"]


def validation_workflow_id(run_id: object) -> str:
    return f"{WORKFLOW_ID_PREFIX}{run_id}"


@workflow.defn(name="ValidationRun")
class ValidationRun(GatedWorkflow):
    @workflow.init
    def __init__(self, arg: ValidationRunInput) -> None:
        self._arg = arg
        self._state = ValidationRunState(
            run_id=arg.run_id, owner=arg.owner, project_id=arg.input.project_id,
            entrepreneur_input=arg.input.entrepreneur_input)
        self._init_gates(RunRecorder(arg.run_id))
        self._ending: str | None = None
        self._visible: tuple[str, int, bool] | None = None
        self._state.max_cost_usd = arg.input.max_cost_usd
        # The dearest task so far: what the budget check expects the next call to cost.
        self._dearest_task = 0.0

    # --- the run -----------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: ValidationRunInput) -> ValidationRunResult:
        self._state.started_at = workflow.now()
        try:
            self._recorder.stage(
                events=[self._recorder.event("run.started", "run.started", status="running",
                                             progress_pct=0)],
                run=self._run_state())
            index = 0
            while index < PHASE_COUNT:
                phase = PHASES[index]
                await self._run_phase(phase)
                step: NextStep = "next"
                if phase.checkpoint in arg.input.gates:
                    step = await self._ask(phase)
                if step == "end":
                    await self._fail(self._ending or "the run was ended at a gate")
                if step == "next":
                    index += 1
            return await self._complete()
        except asyncio.CancelledError:
            await self._record_cancel()
            raise
        except ActivityError as error:
            cause = error.cause.message if error.cause else str(error)
            await self._fail(f"{error.activity_type or 'activity'} failed: {cause}")
            raise  # unreachable: _fail raises

    async def _run_phase(self, phase: PhaseDef) -> None:
        s = self._state
        attempt = s.phase_attempts.get(phase.number, 0) + 1
        s.phase_attempts[phase.number] = attempt
        s.current_phase, s.phase_name, s.status = phase.number, phase.name, "running"
        prefix = f"p{phase.number}.a{attempt}"
        self._show(f"phase {phase.number} · {phase.name} · attempt {attempt}")
        self._recorder.stage(
            events=[self._recorder.event(f"{prefix}.started", "phase.started",
                                         phase=phase.number, status="started",
                                         progress_pct=self._pct(phase, 0))],
            run=self._run_state())
        for i, task in enumerate(phase.tasks):
            result = await self._run_task(phase, task, i, prefix)
            if result is None:
                s.skipped_tasks.append(f"p{phase.number}.{task.task}")
                continue
            model = TASK_OUTPUTS.get(task.task)
            if task.fills:
                setattr(s, task.fills,
                        model.model_validate(result.output) if model else result.output)
            self._spend(result.cost_usd, result.input_tokens + result.output_tokens)
        self._recorder.stage(
            events=[self._recorder.event(f"{prefix}.completed", "phase.completed",
                                         phase=phase.number, status="completed",
                                         progress_pct=self._pct(phase, len(phase.tasks)))],
            run=self._run_state(),
            snapshot=(f"phase {phase.number} completed", phase.number, self._dump()))

    async def _run_task(self, phase: PhaseDef, task: TaskDef, index: int,
                        prefix: str) -> CrewTaskResult | None:
        """Run a crew task; None when a human chose to skip it after it failed."""
        s = self._state
        tries = 0
        while True:
            await self._within_budget(phase)
            tries += 1
            # A task retried at the task_failed gate writes fresh events under a new key.
            key = f"{prefix}.{task.task}" + (f".t{tries}" if tries > 1 else "")
            try:
                return await workflow.execute_activity_method(
                    CrewTaskActivities.run_crew_task,
                    CrewTaskInput(
                        run_id=s.run_id, event_key=key, phase=phase.number,
                        crew=task.crew, task=task.task, agent=task.agent,
                        instructions=task.instructions, context=self._context(task),
                        feedback=s.feedback.get(phase.number), model=task.model,
                        temperature=task.temperature,
                        progress_pct_started=self._pct(phase, index),
                        progress_pct_done=self._pct(phase, index + 1),
                        prelude=self._recorder.take_staged()),
                    start_to_close_timeout=TASK_TIMEOUT,
                    heartbeat_timeout=TASK_HEARTBEAT_TIMEOUT, retry_policy=TASK_RETRY,
                    summary=f"{task.crew} · {task.task}")
            except ActivityError as error:
                # Histories from before the gate existed ended the run here.
                if (isinstance(error.cause, CancelledError)
                        or not workflow.patched("task-failed-gate")):
                    raise
                cause = error.cause
                message = cause.message if isinstance(cause, ApplicationError) else str(error)
                if isinstance(cause, ApplicationError) and cause.details:
                    spent = cause.details[0]
                    self._spend(float(spent.get("cost_usd", 0)), 0)
                decision = await self._ask_after_failure(phase, task, message)
                if decision == "skip":
                    return None

    async def _ask_after_failure(self, phase: PhaseDef, task: TaskDef, error: str) -> str:
        outcome = await self.ask_human(
            lambda: task_failed_gate_spec(phase, task, error, self._arg.input),
            where=f"phase {phase.number} · {task.task} failed")
        decision = outcome.decision.decision if outcome.decision else None
        if decision in ("retry", "skip"):
            return decision
        await self._fail(f"{task.task} failed and the run was "
                         f"{'aborted' if decision else 'not resumed'}: {error}")
        raise AssertionError("unreachable: _fail raises")

    async def _within_budget(self, phase: PhaseDef) -> None:
        """Wait at raise_budget while the next call would pass max_cost_usd."""
        s = self._state
        while s.max_cost_usd is not None and s.cost_usd + self._dearest_task > s.max_cost_usd:
            outcome = await self.ask_human(
                lambda: budget_gate_spec(phase, s.cost_usd, self._dearest_task, s.max_cost_usd,
                                         self._arg.input),
                where=f"phase {phase.number} · budget")
            d = outcome.decision
            if d is None or d.decision != "raise":
                await self._fail(f"stopped at the budget of ${s.max_cost_usd:g} "
                                 f"(spent ${s.cost_usd:.4f})")
            s.max_cost_usd = feedback_number(d.feedback if d else None)

    def _spend(self, cost_usd: float, tokens: int) -> None:
        s = self._state
        s.cost_usd = round(s.cost_usd + cost_usd, 9)
        s.tokens += tokens
        self._dearest_task = max(self._dearest_task, cost_usd)

    # --- gates ---------------------------------------------------------------------------

    async def _ask(self, phase: PhaseDef) -> NextStep:
        outcome = await self.ask_human(
            lambda: gate_spec(phase, self._state, self._arg.input),
            where=f"phase {phase.number} · {phase.name}")
        if outcome.decision is None:
            self._ending = f"checkpoint {phase.checkpoint} expired with no decision"
            return "end"
        return self._apply(phase, outcome.gate)

    def _apply(self, phase: PhaseDef, gate: OpenGate) -> NextStep:
        """What a decision does to the run."""
        assert gate.decision is not None
        d, s = gate.decision, self._state
        if d.decision == "reject":
            if s.phase_attempts[phase.number] > self._arg.input.max_phase_retries:
                self._ending = (f"phase {phase.number} ({phase.name}) rejected "
                                f"{s.phase_attempts[phase.number]} times")
                return "end"
            s.retry_count += 1
            s.feedback[phase.number] = d.feedback or "rejected without feedback"
            return "rerun"
        if d.decision.startswith("segment_"):
            chosen = next(o for o in gate.spec.options if o.value == d.decision)
            s.target_segment = chosen.label
            s.feedback[phase.number] = d.feedback or f"focus on {chosen.label}"
            return "rerun"
        if d.decision == "override_proceed":
            s.override_proceed = True
        return "next"

    def _on_gate_closed(self, gate: OpenGate, status: GateStatus) -> None:
        d = gate.decision
        self._state.decisions.append({
            "checkpoint_name": gate.spec.checkpoint_name, "request_id": str(gate.request_id),
            "status": status, "decision": d.decision if d else None,
            "feedback": d.feedback if d else None, "decided_by": d.decided_by if d else None,
            "decided_at": gate.decided_at.isoformat() if gate.decided_at else None})

    @workflow.query
    def state(self) -> ValidationRunState:
        return self._state

    # --- endings -------------------------------------------------------------------------

    async def _complete(self) -> ValidationRunResult:
        s = self._state
        rec = s.pivot_recommendation
        # No recommendation (its task was skipped) means no decision, never a silent proceed.
        s.final_decision = rec.decision if rec else None
        s.decision_rationale = rec.rationale if rec else "no pivot recommendation was made"
        s.status, s.completed_at = "completed", workflow.now()
        result = ValidationRunResult(run_id=s.run_id, status="completed",
                                     final_decision=s.final_decision,
                                     pivot_recommendation=s.pivot_recommendation)
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._recorder.write(
            events=[self._recorder.event("run.completed", "run.completed", status="completed",
                                         progress_pct=100,
                                         output={"final_decision": s.final_decision})],
            run=self._run_state(result=result.model_dump(mode="json")),
            snapshot=("completed", s.current_phase, self._dump()))
        self._show(f"completed · final decision: {s.final_decision}")
        return result

    async def _fail(self, message: str) -> None:
        s = self._state
        s.status, s.error_message, s.completed_at = "failed", message, workflow.now()
        s.hitl_state = None
        await self._recorder.write(
            events=[self._recorder.event("run.failed", "run.failed", status="failed",
                                         error_message=message)],
            run=self._run_state(),
            snapshot=("failed", s.current_phase, self._dump()))
        self._show(f"failed · {message}")
        raise ApplicationError(message, type="RunFailed", non_retryable=True)

    async def _record_cancel(self) -> None:
        s = self._state
        await self.close_open_gate("superseded")
        s.status, s.hitl_state, s.completed_at = "canceled", None, workflow.now()
        await self._recorder.write(
            events=[self._recorder.event("run.canceled", "run.canceled", status="canceled")],
            run=self._run_state(),
            snapshot=("canceled", s.current_phase, self._dump()))

    # --- helpers -------------------------------------------------------------------------

    def _set_gate_state(self, waiting_on: str | None, status: RunStatus) -> None:
        self._state.hitl_state, self._state.status = waiting_on, status

    def _run_state(self, result: dict | None = None) -> RunStateWrite:
        s = self._state
        visible = (s.status, s.current_phase, s.hitl_state is not None)
        if visible != self._visible:
            # Only on change: each upsert is an event in the workflow's history.
            self._visible = visible
            workflow.upsert_search_attributes([
                sa.STATUS.value_set(s.status), sa.PHASE.value_set(s.current_phase),
                sa.AWAITING_HUMAN.value_set(s.hitl_state is not None)])
        return RunStateWrite(status=s.status, current_phase=s.current_phase,  # type: ignore[arg-type]
                             phase_name=s.phase_name, hitl_state=s.hitl_state, result=result,
                             error_message=s.error_message)

    def _context(self, task: TaskDef) -> dict:
        """Exactly the state the task reads, and its own earlier output on a re-run."""
        s = self._state
        context = {field: _json(getattr(s, field)) for field in task.reads}
        if s.phase_attempts.get(s.current_phase, 1) > 1 and task.fills:
            previous = getattr(s, task.fills)
            if previous is not None:
                context["previous_output"] = _json(previous)
        return context

    def _pct(self, phase: PhaseDef, tasks_done: int) -> int:
        return int(100 * (phase.number + tasks_done / len(phase.tasks)) / PHASE_COUNT)

    def _dump(self) -> dict:
        return self._state.model_dump(mode="json")

    def _show(self, details: str) -> None:
        workflow.set_current_details(details)


def _json(value: object) -> object:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


__all__ = ["ValidationRun", "validation_workflow_id", "KIND"]
