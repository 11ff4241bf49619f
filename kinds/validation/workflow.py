"""ValidationRun: five phases of crew work with human gates between them (seed 000).

The workflow history is the checkpoint: there is no resume code. A gate waits on a durable
timer and a condition, so a run that waits a week for a human holds no worker and no cache.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeUpdate
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from waystation.kinds.validation.activities.crew_tasks import (
        CrewTaskActivities,
        CrewTaskInput,
        CrewTaskResult,
    )
    from waystation.kinds.validation.activities.outputs import TASK_OUTPUTS
    from waystation.kinds.validation.gates import TASK_FAILED, gate_spec, task_failed_gate_spec
    from waystation.kinds.validation.models import (
        ValidationRunInput,
        ValidationRunResult,
        ValidationRunState,
    )
    from waystation.kinds.validation.phases import (
        PHASE_COUNT,
        PHASES,
        PhaseDef,
        TaskDef,
        phase_completed,
    )
    from waystation.sdk import DecisionInput, GateStatus, RunWorkflow
    from waystation.sdk.gates import (
        STOP_BUDGET,
        OpenGate,
        budget_gate_spec,
        feedback_number,
        stopped_message,
    )
    from waystation.sdk.workflow import search_attributes as sa
    from waystation.sdk.writes import ReadModelWrite

TASK_TIMEOUT = timedelta(minutes=10)
# Crew tasks heartbeat while they run: a task whose worker died is retried after this,
# not after TASK_TIMEOUT.
TASK_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
# Model calls fail in bursts (rate limits, overload) that last minutes: back off up to a
# minute between tries, without a count (a worker crash must not use up tries); the task
# itself gives up after its retry window (activities/crew_tasks.py RETRY_WINDOW), and a
# 429's Retry-After replaces the backoff.
TASK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0,
                         maximum_interval=timedelta(seconds=60), maximum_attempts=0)

NextStep = Literal["next", "rerun", "end"]
# Runs whose input says `tasks: in_place` run each crew task as a local activity, and write a
# phase gate's decision with the next phase's first task; runs from before always ran them as
# regular activities.
TASKS_IN_PLACE = "crew-tasks-in-place"


@workflow.defn(name="ValidationRun", sandboxed=False)  # see waystation/sandboxing.py
class ValidationRun(RunWorkflow):
    @workflow.init
    def __init__(self, arg: ValidationRunInput) -> None:
        self._arg = arg
        if arg.start_from is None:
            self._state = ValidationRunState(
                run_id=arg.run_id, owner=arg.owner, project_id=arg.input.project_id,
                entrepreneur_input=arg.input.entrepreneur_input)
        else:
            # A fork keeps the source's outputs and attempts; its spend starts at nothing,
            # as the fork pays only for its own calls.
            self._state = arg.start_from.state.model_copy(update={
                "run_id": arg.run_id, "owner": arg.owner, "cost_usd": 0.0, "tokens": 0})
        self.init_run(arg.run_id)
        # Why the run is ending at a gate: (stop reason, message).
        self._ending: tuple[str, str] | None = None
        self._state.max_cost_usd = arg.input.max_cost_usd
        # The dearest task so far: what the budget check expects the next call to cost.
        self._dearest_task = 0.0

    # --- the run -----------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: ValidationRunInput) -> ValidationRunResult:
        return await self.lifecycle(self._phases)

    async def _phases(self) -> ValidationRunResult:
        start = self._arg.start_from
        if start is None:
            self.stage_start()
        else:
            self.stage_start(forked_from=start.forked_from)
        index = start.state.current_phase if start else 0
        # A fork from a gate starts at that gate: the phase's outputs are kept, not recomputed.
        at_gate = start is not None and start.at_gate
        decided = start.decision if start else None
        while index < PHASE_COUNT:
            phase = PHASES[index]
            if not at_gate:
                await self._run_phase(phase)
            at_gate = False
            step: NextStep = "next"
            if phase.checkpoint in self._arg.input.gates:
                step = await self._ask(phase, decided=decided)
                decided = None
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
            result = await self._run_task(phase, task, i, prefix)
            if result is None:
                s.skipped_tasks.append(f"p{phase.number}.{task.task}")
                continue
            model = TASK_OUTPUTS.get(task.task)
            if task.fills:
                setattr(s, task.fills,
                        model.model_validate(result.output) if model else result.output)
            self._spend(result.cost_usd, result.input_tokens + result.output_tokens)
        self.stage(events=[self.event(f"{prefix}.completed", "phase.completed",
                                      phase=phase.number, status="completed",
                                      progress_pct=self._pct(phase, len(phase.tasks)))],
                   snapshot=phase_completed(phase.number), with_state=True)

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
            arg = CrewTaskInput(
                run_id=s.run_id, event_key=key, phase=phase.number, crew=task.crew,
                task=task.task, agent=task.agent, instructions=task.instructions,
                context=self._context(task), feedback=s.feedback.get(phase.number),
                model=task.model, temperature=task.temperature,
                progress_pct_started=self._pct(phase, index),
                progress_pct_done=self._pct(phase, index + 1))
            summary = f"{task.crew} · {task.task}"
            try:
                if self._tasks_in_place():
                    return await self._recorder.hand_over(
                        functools.partial(_run_in_place, arg, summary))
                arg.prelude = self._recorder.take_staged()
                return await workflow.execute_activity_method(
                    CrewTaskActivities.run_crew_task, arg,
                    start_to_close_timeout=TASK_TIMEOUT,
                    heartbeat_timeout=TASK_HEARTBEAT_TIMEOUT, retry_policy=TASK_RETRY,
                    summary=summary)
            except (ActivityError, ApplicationError) as error:
                # A regular activity's failure comes wrapped in an ActivityError, a local
                # activity's (in place) as the error the task raised.
                cause = error.cause if isinstance(error, ActivityError) else error
                # Histories from before the gate existed ended the run here.
                if (isinstance(cause, CancelledError)
                        or not workflow.patched("task-failed-gate")):
                    raise
                message = cause.message if isinstance(cause, ApplicationError) else str(error)
                if isinstance(cause, ApplicationError) and cause.details:
                    spent = cause.details[0]
                    self._spend(float(spent.get("cost_usd", 0)), 0)
                decision = await self._ask_after_failure(phase, task, message)
                if decision == "skip":
                    self._record_skip(phase, task, index, prefix, message)
                    return None

    def _tasks_in_place(self) -> bool:
        """Whether crew tasks run in place: a local activity each, a few milliseconds on the
        worker instead of a regular activity's round trips through the server (tens of
        milliseconds). Settled when the run started (`ValidationInput.tasks`), as a replay
        must see the same; `auto` left unsettled (a run started straight through Temporal, not
        by the API) keeps the regular activity."""
        return self._arg.input.tasks == "in_place" and workflow.patched(TASKS_IN_PLACE)

    def _record_skip(self, phase: PhaseDef, task: TaskDef, index: int, prefix: str,
                     error: str) -> None:
        """Say in the progress events that the task was skipped (seed 000's `skipped`), with
        the next write. Histories from before wrote nothing here: the patch keeps what they
        replay exactly what they ran."""
        if not workflow.patched("task-skipped-event"):
            return
        self.stage(events=[self.event(
            f"{prefix}.{task.task}.skipped", "task.skipped", phase=phase.number,
            crew=task.crew, task=task.task, agent=task.agent, status="skipped",
            progress_pct=self._pct(phase, index + 1), error_message=error,
            output={"decided_at_gate": TASK_FAILED, "missing": task.fills})])

    async def _ask_after_failure(self, phase: PhaseDef, task: TaskDef, error: str) -> str:
        outcome = await self.ask_human(
            lambda: task_failed_gate_spec(phase, task, error, self._arg.input),
            where=f"phase {phase.number} · {task.task} failed")
        decision = outcome.decision.decision if outcome.decision else None
        if decision in ("retry", "skip"):
            return decision
        await self.fail(f"{task.task} failed and the run was "
                        f"{'aborted' if decision else 'not resumed'}: {error}",
                        stop_reason="task_failed")

    async def _within_budget(self, phase: PhaseDef) -> None:
        """Wait at raise_budget while the next call would pass max_cost_usd."""
        s = self._state
        while (budget := s.max_cost_usd) is not None and s.cost_usd + self._dearest_task > budget:
            outcome = await self.ask_human(
                lambda: budget_gate_spec(
                    phase=phase.number, spent=s.cost_usd, next_call=self._dearest_task,
                    budget=budget,
                    expires_in=timedelta(seconds=self._arg.input.gate_timeout_seconds),
                    expiry_policy=self._arg.input.expiry_policy),
                where=f"phase {phase.number} · budget")
            d = outcome.decision
            if d is None or d.decision != "raise":
                await self.fail(stopped_message(budget, s.cost_usd), stop_reason=STOP_BUDGET)
            s.max_cost_usd = feedback_number(d.feedback if d else None)

    def _spend(self, cost_usd: float, tokens: int) -> None:
        s = self._state
        s.cost_usd = round(s.cost_usd + cost_usd, 9)
        s.tokens += tokens
        self._dearest_task = max(self._dearest_task, cost_usd)

    # --- gates ---------------------------------------------------------------------------

    async def _ask(self, phase: PhaseDef, *, decided: DecisionInput | None = None) -> NextStep:
        # In place, the next write after a phase gate (the next phase's first task, or the
        # run's end) is done within the workflow task: the decision goes with it.
        outcome = await self.ask_human(
            lambda: gate_spec(phase, self._state, self._arg.input),
            where=f"phase {phase.number} · {phase.name}", decided=decided,
            record_with_next=self._tasks_in_place())
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
        rec = s.pivot_recommendation
        # No recommendation (its task was skipped) means no decision, never a silent proceed.
        s.final_decision = rec.decision if rec else None
        s.decision_rationale = rec.rationale if rec else "no pivot recommendation was made"
        result = ValidationRunResult(run_id=s.run_id, status="completed",
                                     final_decision=s.final_decision,
                                     pivot_recommendation=s.pivot_recommendation)
        await self.complete(result, details=f"completed · final decision: {s.final_decision}",
                            final_decision=s.final_decision)
        return result

    def position(self) -> tuple[int, str | None]:
        return self._state.current_phase, self._state.phase_name

    def search_attribute_updates(self) -> list[SearchAttributeUpdate[Any]]:
        life = self._life
        return [sa.STATUS.value_set(life.status), sa.PHASE.value_set(self._state.current_phase),
                sa.AWAITING_HUMAN.value_set(life.waiting_on is not None)]

    def kind_state(self) -> dict[str, Any]:
        return self._state.model_dump(mode="json")

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


async def _run_in_place(arg: CrewTaskInput, summary: str,
                        prelude: ReadModelWrite | None) -> CrewTaskResult:
    """The crew task as a local activity, given the staged write to apply with its first.
    The same policy as the regular activity's: a worker dying in it fails its workflow task,
    which the next worker replays, running the task again (its writes are keyed, so nothing is
    doubled); there is no heartbeat, the workflow task's liveness is the task's."""
    return await workflow.execute_local_activity_method(
        CrewTaskActivities.run_crew_task, arg.model_copy(update={"prelude": prelude}),
        start_to_close_timeout=TASK_TIMEOUT, retry_policy=TASK_RETRY, summary=summary)


def _json(value: object) -> object:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value
