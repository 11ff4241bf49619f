"""ValidationRun: five phases of crew work with human gates between them (seed 000).

The workflow history is the checkpoint: there is no resume code. A gate waits on a durable
timer and a condition, so a run that waits a week for a human holds no worker and no cache.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeUpdate

with workflow.unsafe.imports_passed_through():
    from activities.crew_tasks import CrewTaskActivities, CrewTaskInput
    from contracts.statuses import GateStatus
    from workflows import search_attributes as sa
    from workflows.gates import OpenGate
    from workflows.lifecycle import RunWorkflow
    from workflows.validation_gates import gate_spec
    from workflows.validation_models import (
        ValidationRunInput,
        ValidationRunResult,
        ValidationRunState,
    )
    from workflows.validation_phases import PHASE_COUNT, PHASES, PhaseDef, TaskDef

TASK_TIMEOUT = timedelta(minutes=10)
# Crew tasks heartbeat while they run: a task whose worker died is retried after this,
# not after TASK_TIMEOUT.
TASK_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
TASK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)

NextStep = Literal["next", "rerun", "end"]


@workflow.defn(name="ValidationRun")
class ValidationRun(RunWorkflow):
    @workflow.init
    def __init__(self, arg: ValidationRunInput) -> None:
        self._arg = arg
        self._state = ValidationRunState(
            run_id=arg.run_id, owner=arg.owner, project_id=arg.input.project_id,
            entrepreneur_input=arg.input.entrepreneur_input)
        self.init_run(arg.run_id)
        # Why the run is ending at a gate: (stop reason, message).
        self._ending: tuple[str, str] | None = None

    # --- the run -----------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: ValidationRunInput) -> ValidationRunResult:
        return await self.lifecycle(self._phases)

    async def _phases(self) -> ValidationRunResult:
        self.stage_start()
        index = 0
        while index < PHASE_COUNT:
            phase = PHASES[index]
            await self._run_phase(phase)
            step: NextStep = "next"
            if phase.checkpoint in self._arg.input.gates:
                step = await self._ask(phase)
            if step == "end":
                reason, message = self._ending or ("ended_at_gate", "the run was ended at a gate")
                await self.fail(message, stop_reason=reason)
            if step == "next":
                index += 1
        return await self._finish()

    async def _run_phase(self, phase: PhaseDef) -> None:
        s = self._state
        attempt = s.phase_attempts.get(phase.number, 0) + 1
        s.phase_attempts[phase.number] = attempt
        s.current_phase, s.phase_name, self._life.status = phase.number, phase.name, "running"
        prefix = f"p{phase.number}.a{attempt}"
        self.show(f"phase {phase.number} · {phase.name} · attempt {attempt}")
        self.stage(events=[self.event(f"{prefix}.started", "phase.started", phase=phase.number,
                                      status="started", progress_pct=self._pct(phase, 0))],
                   with_state=True)
        for i, task in enumerate(phase.tasks):
            result = await workflow.execute_activity_method(
                CrewTaskActivities.run_crew_task,
                CrewTaskInput(
                    run_id=s.run_id, event_key=f"{prefix}.{task.task}", phase=phase.number,
                    crew=task.crew, task=task.task, agent=task.agent,
                    instructions=task.instructions, context=self._context(task),
                    feedback=s.feedback.get(phase.number),
                    progress_pct_started=self._pct(phase, i),
                    progress_pct_done=self._pct(phase, i + 1),
                    prelude=self._recorder.take_staged()),
                start_to_close_timeout=TASK_TIMEOUT, heartbeat_timeout=TASK_HEARTBEAT_TIMEOUT,
                retry_policy=TASK_RETRY,
                summary=f"{task.crew} · {task.task}")
            if task.fills:
                setattr(s, task.fills, result.output)
            s.cost_usd += result.cost_usd
            s.tokens += result.input_tokens + result.output_tokens
        self.stage(events=[self.event(f"{prefix}.completed", "phase.completed",
                                      phase=phase.number, status="completed",
                                      progress_pct=self._pct(phase, len(phase.tasks)))],
                   snapshot=f"phase {phase.number} completed", with_state=True)

    # --- gates ---------------------------------------------------------------------------

    async def _ask(self, phase: PhaseDef) -> NextStep:
        outcome = await self.ask_human(
            lambda: gate_spec(phase, self._state, self._arg.input),
            where=f"phase {phase.number} · {phase.name}")
        if outcome.decision is None:
            self._ending = ("gate_expired",
                            f"checkpoint {phase.checkpoint} expired with no decision")
            return "end"
        return self._apply(phase, outcome.gate)

    def _apply(self, phase: PhaseDef, gate: OpenGate) -> NextStep:
        """What a decision does to the run."""
        assert gate.decision is not None
        d, s = gate.decision, self._state
        if d.decision == "reject":
            if s.phase_attempts[phase.number] > self._arg.input.max_phase_retries:
                self._ending = ("rejected", f"phase {phase.number} ({phase.name}) rejected "
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

    # --- ending and the base's hooks -----------------------------------------------------

    async def _finish(self) -> ValidationRunResult:
        s = self._state
        rec = s.pivot_recommendation or {}
        s.final_decision = str(rec.get("decision", "proceed"))
        s.decision_rationale = rec.get("rationale")
        result = ValidationRunResult(run_id=s.run_id, status="completed",
                                     final_decision=s.final_decision,
                                     pivot_recommendation=s.pivot_recommendation)
        await self.complete(result, details=f"completed · final decision: {s.final_decision}",
                            final_decision=s.final_decision)
        return result

    def _position(self) -> tuple[int, str | None]:
        return self._state.current_phase, self._state.phase_name

    def _search_attribute_updates(self) -> list[SearchAttributeUpdate[Any]]:
        life = self._life
        return [sa.STATUS.value_set(life.status), sa.PHASE.value_set(self._state.current_phase),
                sa.AWAITING_HUMAN.value_set(life.waiting_on is not None)]

    def _dump(self) -> dict[str, Any]:
        return self._state.model_dump(mode="json")

    def _context(self, task: TaskDef) -> dict:
        s = self._state
        context: dict = {"entrepreneur_input": s.entrepreneur_input}
        if s.target_segment:
            context["target_segment"] = s.target_segment
        if task.task == "recommend_pivot":
            for field in ("desirability_signal", "feasibility_signal", "viability_signal"):
                context[field] = (getattr(s, field) or {}).get("signal")
        return context

    def _pct(self, phase: PhaseDef, tasks_done: int) -> int:
        return int(100 * (phase.number + tasks_done / len(phase.tasks)) / PHASE_COUNT)
