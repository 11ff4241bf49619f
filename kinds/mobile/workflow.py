"""MobileAgentRun: explore an Android app step by step and record its screen graph (seed 001).

observe → identify → persist (one activity, see kinds/mobile/activities/steps.py) → choose (the
policy, here in the workflow: deterministic) → act (first thing of the next step's activity)
→ repeat, until a stop condition: max steps, nothing left to explore, the goal activity
reached, a cancel, or the error budget spent. The history is the checkpoint; the run continues
as new every `continue_as_new_every` steps carrying the policy's state, so a run of any length
keeps a bounded history. Before an action the policy marks sensitive (purchase, sign-in,
delete) the run asks a human through the same gate as every run kind.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from waystation.kinds.mobile.activities.models import (
        ActionCommand,
        ActionView,
        ExploreStepInput,
        ExploreStepResult,
        ForkGraphInput,
    )
    from waystation.kinds.mobile.activities.steps import MobileActivities
    from waystation.kinds.mobile.models import (
        MobileAgentRunInput,
        MobileAgentRunResult,
        MobileCarry,
        MobileFork,
        MobileRunState,
    )
    from waystation.kinds.mobile.policy import (
        LAUNCH,
        POLICIES,
        Choice,
        ExplorationState,
        StopReason,
        command_for,
        restored_state,
        route,
    )
    from waystation.sdk import GateOption, GateSpec, RunStatus, RunWorkflow

# Simulator steps take milliseconds: local activities (persisted with the workflow task).
# The timeout leaves room for a step to wait out a database outage of about a minute
# (waystation.kinds.mobile.activities.steps OUTAGE_PATIENCE_SECONDS) rather than be retried and act
# again.
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
# Copying a fork's steps is one short transaction, but it may wait out a database outage.
RESTORE_TIMEOUT = timedelta(minutes=2)


@workflow.defn(name="MobileAgentRun", sandboxed=False)  # see waystation/sandboxing.py
class MobileAgentRun(RunWorkflow):
    @workflow.init
    def __init__(self, arg: MobileAgentRunInput) -> None:
        self._arg = arg
        inp = arg.input
        self._policy = POLICIES[inp.policy](stall_steps=inp.stall_steps)
        # A fork starts at its source's step, with its counts; its error budget is its own.
        at = arg.fork.state if arg.fork else MobileRunState(run_id=arg.run_id,
                                                            app_package=inp.app_package)
        self._carry = arg.carry or MobileCarry(
            step=at.step, snapshots=0, errors=0, policy=ExplorationState(seed=inp.seed),
            next_command=LAUNCH, screens_seen=at.screens_seen, new_edges=at.new_edges,
            discovery=list(at.discovery))
        c = self._carry
        self._state = MobileRunState(
            run_id=arg.run_id, app_package=inp.app_package, step=c.step,
            screens_seen=c.screens_seen, new_edges=c.new_edges, errors=c.errors,
            discovery=c.discovery, continued=c.continued,
            screen_id=c.last.screen_id if c.last else None)
        self.init_run(arg.run_id, snapshots_taken=c.snapshots)

    @workflow.run
    async def run(self, arg: MobileAgentRunInput) -> MobileAgentRunResult:
        c, inp = self._carry, arg.input
        if arg.carry is None:
            c.started_at = workflow.now()
            forked = {"forked_from": arg.fork.forked_from} if arg.fork else {}
            self.stage_start(app_package=inp.app_package, driver=inp.driver,
                             max_steps=inp.max_steps, policy=inp.policy, **forked)
        return await self.lifecycle(self._explore_app)

    async def _explore_app(self) -> MobileAgentRunResult:
        c, inp = self._carry, self._arg.input
        if self._arg.fork is not None and self._arg.carry is None:
            await self._restore(self._arg.fork)
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

    # --- one step ----------------------------------------------------------------------

    async def _step(self) -> StopReason | None:
        c, inp = self._carry, self._arg.input
        c.step += 1
        taken = c.next_command
        self.show(f"step {c.step} · {taken.kind} {taken.label}".strip())
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
        choice = self._along_route(result) or await self._choose(result)
        if choice.stop is not None:
            return choice.stop
        assert choice.command is not None
        c.next_command = choice.command
        self._state.last_action = f"{choice.command.kind} {choice.command.label}".strip()
        self.stage(
            events=[self.event(
                f"s{c.step}.choose", "agent.node.completed", task="choose", status="completed",
                output={"step": c.step, "action": choice.command.kind,
                        "action_id": choice.command.action_id, "label": choice.command.label,
                        "why": choice.why})],
            snapshot=f"step {c.step}", with_state=True)
        return None

    async def _explore(self, command: ActionCommand) -> ExploreStepResult:
        c, inp = self._carry, self._arg.input
        step_input = ExploreStepInput(
            run_id=self._arg.run_id, session_id=str(self._arg.run_id), step=c.step,
            app_package=inp.app_package, driver=inp.driver, device_serial=inp.device_serial,
            command=command, input_text=inp.input_text, persist=inp.persist,
            prelude=self._recorder.take_staged())
        summary = f"step {c.step} · {command.kind} {command.label}"[:100]
        if inp.driver == "simulator":
            await self.answer_decisions_first()
            return await workflow.execute_local_activity_method(
                MobileActivities.explore_step, step_input,
                start_to_close_timeout=LOCAL_STEP_TIMEOUT, retry_policy=STEP_RETRY,
                summary=summary)
        return await workflow.execute_activity_method(
            MobileActivities.explore_step, step_input,
            start_to_close_timeout=DEVICE_STEP_TIMEOUT, heartbeat_timeout=DEVICE_HEARTBEAT,
            retry_policy=STEP_RETRY, summary=summary)

    async def _restore(self, fork: MobileFork) -> None:
        """Carry on from the source's graph at the fork's step: the policy's state rebuilt from
        the recorded steps, now the fork's own. The device cannot be put back on the screen
        the source stood at (the app's data and back stack are the device's), so the fork
        relaunches the app and walks the shortest recorded route from its launch screen."""
        c, inp = self._carry, self._arg.input
        graph = await workflow.execute_activity_method(
            MobileActivities.restore_fork,
            ForkGraphInput(run_id=self._arg.run_id, source_run_id=fork.source_run_id,
                           up_to_step=fork.state.step),
            start_to_close_timeout=RESTORE_TIMEOUT, retry_policy=STEP_RETRY,
            summary=f"steps 1–{fork.state.step} of {fork.source_run_id}")
        c.policy = restored_state(inp.seed, graph.steps, graph.actions)
        # Every run's first step is a launch: the screen it saw is the launch screen.
        launched = next((s.screen_id for s in graph.steps if s.screen_id is not None), None)
        if launched is not None and fork.state.screen_id is not None:
            c.route = route(c.policy, launched, fork.state.screen_id)

    def _along_route(self, current: ExploreStepResult) -> Choice | None:
        """A fork's next hop back to its source's screen, while the app follows the route."""
        c, inp = self._carry, self._arg.input
        if not c.route:
            return None
        src, action_id = (int(v) for v in c.route.pop(0).split(":"))
        action = next((a for a in current.actions if a.id == action_id), None)
        if current.screen_id != src or action is None or \
                (action.sensitive and inp.sensitive_actions != "allow"):
            # Off the route (the app's content moved on), or a hop a human would have to
            # allow again: the policy explores from here.
            c.route = []
            return None
        return Choice(command_for(action, src), action,
                      why=f"back to the fork's screen, {len(c.route) + 1} away")

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
        c.continued += 1

        def carried(snapshots: int) -> MobileAgentRunInput:
            c.snapshots = snapshots
            return self._arg.model_copy(update={"carry": c})
        await self.continue_as_new(carried, task_timeout=WORKFLOW_TASK_TIMEOUT)

    async def _finish(self, reason: StopReason) -> MobileAgentRunResult:
        c = self._carry
        if reason == "error_budget":
            await self.fail(f"error budget spent: {c.errors} driver errors",
                            stop_reason=reason, result=self._result(reason, "failed"))
        result = self._result(reason, "completed")
        await self.complete(
            result, stop_reason=reason,
            details=f"completed · {reason} after {c.step} steps, {c.screens_seen} new screens",
            steps=c.step, screens_seen=c.screens_seen)
        return result

    def _result(self, reason: StopReason, status: RunStatus) -> MobileAgentRunResult:
        c = self._carry
        return MobileAgentRunResult(run_id=self._arg.run_id, status=status,
                                    stop_reason=reason, steps=c.step,
                                    screens_seen=c.screens_seen, new_edges=c.new_edges)

    # --- the base's hooks --------------------------------------------------------------

    @workflow.query
    def state(self) -> MobileRunState:
        return self._state

    def position(self) -> tuple[int, str | None]:
        s = self._state
        return s.step, f"step {s.step} · {s.activity or 'starting'}"

    def kind_state(self) -> dict[str, Any]:
        return self._state.model_dump(mode="json")
