"""MobileAgentRun: explore an Android app step by step and record its screen graph (seed 001).

observe → identify → persist (one activity, see activities/mobile/steps.py) → choose (the
policy, here in the workflow: deterministic) → act (first thing of the next step's activity)
→ repeat, until a stop condition: max steps, nothing left to explore, the goal activity
reached, a cancel, or the error budget spent. The history is the checkpoint; the run continues
as new every `continue_as_new_every` steps carrying the policy's state, so a run of any length
keeps a bounded history. Before an action the policy marks sensitive (purchase, sign-in,
delete) the run asks a human through the same gate as every run kind.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from activities.mobile.models import (
        ActionCommand,
        ActionView,
        ExploreStepInput,
        ExploreStepResult,
    )
    from activities.mobile.steps import MobileActivities
    from persistence.models import GateOption, RunStatus
    from persistence.writes import RunStateWrite
    from workflows import search_attributes as sa
    from workflows.gated import GatedWorkflow
    from workflows.gates import GateSpec
    from workflows.mobile_models import (
        MobileAgentRunInput,
        MobileAgentRunResult,
        MobileCarry,
        MobileRunState,
    )
    from workflows.mobile_policy import (
        LAUNCH,
        POLICIES,
        Choice,
        ExplorationState,
        StopReason,
    )
    from workflows.recorder import RunRecorder

WORKFLOW_ID_PREFIX = "mobile-"
KIND = "mobile_agent"
# Simulator steps take milliseconds: local activities (persisted with the workflow task).
# The timeout leaves room for a step to wait out a database outage of about a minute
# (activities.mobile.steps OUTAGE_PATIENCE_SECONDS) rather than be retried and act again.
LOCAL_STEP_TIMEOUT = timedelta(seconds=90)
# A real device may take seconds to dump its hierarchy: a regular activity that heartbeats.
DEVICE_STEP_TIMEOUT = timedelta(minutes=2)
DEVICE_HEARTBEAT = timedelta(seconds=30)
# Driver failures come back as results (the error budget counts them); what raises is the
# database being away, worth a patient retry, but not forever.
STEP_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200),
                         maximum_interval=timedelta(seconds=10), maximum_attempts=30)
SENSITIVE_GATE_EXPIRY = timedelta(days=1)
# Local activities run back to back inside one workflow task, which the SDK heartbeats (and
# so completes, letting a cancel, a query or an Update in) at 80 % of the task timeout. The
# default 10 s would hold those up to 8 s; 2 s bounds it to 1.6 s and bounds the steps a
# crash repeats the same way. (A 1 ms timer every N steps does it too, but server timers
# fire with about one second's granularity: measured, it capped a run at 20 steps/s.)
WORKFLOW_TASK_TIMEOUT = timedelta(seconds=2)
MAX_RECHOOSE = 20


def mobile_workflow_id(run_id: object) -> str:
    return f"{WORKFLOW_ID_PREFIX}{run_id}"


@workflow.defn(name="MobileAgentRun")
class MobileAgentRun(GatedWorkflow):
    @workflow.init
    def __init__(self, arg: MobileAgentRunInput) -> None:
        self._arg = arg
        inp = arg.input
        self._policy = POLICIES[inp.policy](stall_steps=inp.stall_steps)
        self._carry = arg.carry or MobileCarry(
            step=0, snapshots=0, errors=0, policy=ExplorationState(seed=inp.seed),
            next_command=LAUNCH)
        c = self._carry
        self._state = MobileRunState(
            run_id=arg.run_id, app_package=inp.app_package, step=c.step,
            screens_seen=c.screens_seen, new_edges=c.new_edges, errors=c.errors,
            discovery=c.discovery, continued=c.continued,
            screen_id=c.last.screen_id if c.last else None)
        self._init_gates(RunRecorder(arg.run_id, snapshots_taken=c.snapshots))
        self._visible: tuple[str, bool] | None = None

    @workflow.run
    async def run(self, arg: MobileAgentRunInput) -> MobileAgentRunResult:
        c, inp = self._carry, arg.input
        if arg.carry is None:
            c.started_at = workflow.now()
            self._recorder.stage(
                events=[self._recorder.event(
                    "agent.run.started", "agent.run.started", status="running",
                    output={"app_package": inp.app_package, "driver": inp.driver,
                            "max_steps": inp.max_steps, "policy": inp.policy})],
                run=self._run_state())
        try:
            steps_here = 0
            while True:
                if c.step >= inp.max_steps:
                    return await self._finish("max_steps")
                if steps_here >= inp.continue_as_new_every or \
                        workflow.info().is_continue_as_new_suggested():
                    await self._continue_as_new()
                steps_here += 1
                stop = await self._step()
                if stop is not None:
                    return await self._finish(stop)
        except asyncio.CancelledError:
            await self._record_end("canceled", "canceled")
            raise

    # --- one step ----------------------------------------------------------------------

    async def _step(self) -> StopReason | None:
        c, inp = self._carry, self._arg.input
        c.step += 1
        taken = c.next_command
        self._show(f"step {c.step} · {taken.kind} {taken.label}".strip())
        result = await self._explore(taken)
        self._state.step = c.step
        if result.error is not None:
            c.errors += 1
            self._state.errors = c.errors
            c.next_command = LAUNCH  # recover from a known state
            if c.errors > inp.max_errors:
                return "error_budget"
            return None
        self._policy.observe(c.policy, c.step, taken, result)
        c.last = result
        self._count(result)
        if inp.goal_activity and result.in_app and result.activity == inp.goal_activity:
            return "goal_reached"
        choice = await self._choose(result)
        if choice.stop is not None:
            return choice.stop
        assert choice.command is not None
        c.next_command = choice.command
        self._state.last_action = f"{choice.command.kind} {choice.command.label}".strip()
        self._recorder.stage(
            events=[self._recorder.event(
                f"s{c.step}.choose", "agent.node.completed", task="choose", status="completed",
                output={"step": c.step, "action": choice.command.kind,
                        "action_id": choice.command.action_id, "label": choice.command.label,
                        "why": choice.why})],
            run=self._run_state(),
            snapshot=(f"step {c.step}", None, self._dump()))
        return None

    async def _explore(self, command: ActionCommand) -> ExploreStepResult:
        c, inp = self._carry, self._arg.input
        step_input = ExploreStepInput(
            run_id=self._arg.run_id, session_id=str(self._arg.run_id), step=c.step,
            app_package=inp.app_package, driver=inp.driver, device_serial=inp.device_serial,
            command=command, input_text=inp.input_text, persist=inp.persist,
            prelude=self._recorder.take_staged())
        summary = f"step {c.step} · {command.kind} {command.label}"[:100]
        try:
            if inp.driver == "simulator":
                return await workflow.execute_local_activity_method(
                    MobileActivities.explore_step, step_input,
                    start_to_close_timeout=LOCAL_STEP_TIMEOUT, retry_policy=STEP_RETRY,
                    summary=summary)
            return await workflow.execute_activity_method(
                MobileActivities.explore_step, step_input,
                start_to_close_timeout=DEVICE_STEP_TIMEOUT, heartbeat_timeout=DEVICE_HEARTBEAT,
                retry_policy=STEP_RETRY, summary=summary)
        except ActivityError as error:
            if is_cancelled_exception(error):
                raise asyncio.CancelledError() from error
            cause = error.cause.message if error.cause else str(error)
            await self._record_end("failed", "error_budget", f"step {c.step} failed: {cause}")
            raise ApplicationError(f"step {c.step} failed: {cause}", type="RunFailed",
                                   non_retryable=True) from error

    async def _choose(self, current: ExploreStepResult) -> Choice:
        """The policy's choice, with sensitive actions gated (or skipped) first."""
        c, inp = self._carry, self._arg.input
        for _ in range(MAX_RECHOOSE):
            choice = self._policy.choose(c.policy, c.step, current)
            action = choice.action
            if action is None or not action.sensitive or inp.sensitive_actions == "allow" \
                    or action.id in c.approved:
                return choice
            if inp.sensitive_actions == "ask" and await self._approved(action):
                c.approved.append(action.id)
                return choice
            c.policy.blocked.append(action.id)
        return Choice(LAUNCH, why="only sensitive actions left here; restart")

    async def _approved(self, action: ActionView) -> bool:
        c = self._carry
        checkpoint = f"sensitive_action_{action.id}"
        outcome = await self.ask_human(lambda: GateSpec(
            checkpoint_name=checkpoint, phase=0,
            title=f"Allow “{action.label}”?",
            description=(f"The explorer wants to {action.kind} “{action.label}” on "
                         f"{self._state.activity} (step {c.step}). It looks like a purchase, "
                         "a sign-in or a deletion."),
            context={"step": c.step, "screen_id": self._state.screen_id,
                     "action_id": action.id, "selector": action.selector},
            options=[GateOption(value="approve", label="Do it"),
                     GateOption(value="reject", label="Skip it")],
            recommended_option="reject", expires_in=SENSITIVE_GATE_EXPIRY,
            expiry_policy="default", default_option="reject"),
            where=f"step {c.step}")
        return outcome.status == "approved"

    def _count(self, result: ExploreStepResult) -> None:
        c, s = self._carry, self._state
        s.screen_id, s.activity = result.screen_id, result.activity
        bucket = (c.step - 1) // 100
        while len(c.discovery) <= bucket:
            c.discovery.append(0)
        if result.new_screen:
            c.screens_seen += 1
            c.discovery[bucket] += 1
        if result.new_edge:
            c.new_edges += 1
        s.screens_seen, s.new_edges, s.discovery = c.screens_seen, c.new_edges, c.discovery

    # --- continuing and ending ---------------------------------------------------------

    async def _continue_as_new(self) -> None:
        c = self._carry
        # Staged writes live in memory only: flush them before this history ends.
        await self._recorder.write()
        await workflow.wait_condition(workflow.all_handlers_finished)
        c.snapshots = self._recorder.snapshots_taken
        c.continued += 1
        workflow.continue_as_new(self._arg.model_copy(update={"carry": c}),
                                 task_timeout=WORKFLOW_TASK_TIMEOUT)

    async def _finish(self, reason: StopReason) -> MobileAgentRunResult:
        status: RunStatus = "failed" if reason == "error_budget" else "completed"
        await workflow.wait_condition(workflow.all_handlers_finished)
        message = f"{self._carry.errors} driver errors" if status == "failed" else None
        await self._record_end(status, reason, message)
        if status == "failed":
            raise ApplicationError(f"error budget spent: {message}", type="RunFailed",
                                   non_retryable=True)
        return self._result(reason)

    def _result(self, reason: StopReason) -> MobileAgentRunResult:
        c = self._carry
        return MobileAgentRunResult(run_id=self._arg.run_id, status=self._state.status,
                                    stop_reason=reason, steps=c.step,
                                    screens_seen=c.screens_seen, new_edges=c.new_edges)

    async def _record_end(self, status: RunStatus, reason: StopReason,
                          message: str | None = None) -> None:
        s = self._state
        if status == "canceled":
            await self.close_open_gate("superseded")
        s.status, s.stop_reason, s.waiting_on = status, reason, None
        result = self._result(reason).model_dump(mode="json")
        await self._recorder.write(
            events=[self._recorder.event(
                f"agent.run.{status}", f"agent.run.{status}", status=status,
                error_message=message, output={"stop_reason": reason, "steps": s.step,
                                               "screens_seen": s.screens_seen})],
            run=self._run_state(result=result, error_message=message),
            snapshot=(status, None, self._dump()))
        self._show(f"{status} · {reason} after {s.step} steps, {s.screens_seen} new screens")

    # --- hooks and helpers -------------------------------------------------------------

    @workflow.query
    def state(self) -> MobileRunState:
        return self._state

    def _set_gate_state(self, waiting_on: str | None, status: RunStatus) -> None:
        self._state.waiting_on, self._state.status = waiting_on, status

    def _run_state(self, result: dict | None = None,
                   error_message: str | None = None) -> RunStateWrite:
        s = self._state
        visible = (s.status, s.waiting_on is not None)
        if visible != self._visible:
            # Only on change: each upsert is an event in the workflow's history.
            self._visible = visible
            workflow.upsert_search_attributes([
                sa.STATUS.value_set(s.status),
                sa.AWAITING_HUMAN.value_set(s.waiting_on is not None)])
        return RunStateWrite(status=s.status, current_phase=s.step,
                             phase_name=f"step {s.step} · {s.activity or 'starting'}",
                             hitl_state=s.waiting_on, result=result, error_message=error_message)

    def _dump(self) -> dict:
        return self._state.model_dump(mode="json")

    def _show(self, details: str) -> None:
        workflow.set_current_details(details)


__all__ = ["MobileAgentRun", "mobile_workflow_id", "KIND", "WORKFLOW_ID_PREFIX",
           "WORKFLOW_TASK_TIMEOUT"]
