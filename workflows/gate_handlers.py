"""The human-gate handlers and waiting loop, shared by every workflow that asks a human.

Run kinds get it through `waystation.workflows.lifecycle.RunWorkflow`, which calls `_init_gates` and
provides the hooks at the bottom (the run's visible state); a kind calls `ask_human`. The
workflow then answers the `decide` Update (validated before anything is written), the
`decide_signal` Signal and the `reopen` Update exactly like every other run kind, so the API
and the Web UI need not know which kind of run they talk to.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal
from uuid import UUID

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import TypeAdapter

    from waystation.activities.decision_policies import DecisionPolicyActivities
    from waystation.contracts.decision_policies import (
        EvaluatePoliciesInput,
        PolicyRequest,
        PolicyVerdict,
        PolicyVerdicts,
    )
    from waystation.contracts.gate_policy import GATE_POLICY_MEMO, GatePolicies, policy_for
    from waystation.contracts.refusals import GATE_NOT_PENDING
    from waystation.contracts.statuses import GateStatus, RunStatus
    from waystation.contracts.writes import DelegationWrite, GateNoticeWrite, RunStateWrite
    from waystation.workflows.gate_rules import (
        SYSTEM_DECIDER,
        DecisionInput,
        DelegateInput,
        GateBook,
        GateSpec,
        GateView,
        OpenGate,
        ReopenInput,
    )
    from waystation.workflows.recorder import RECORD_RETRY, RunRecorder


@dataclass
class GateOutcome:
    gate: OpenGate
    status: GateStatus
    # None only when the gate expired under the `fail` policy.
    decision: DecisionInput | None


def _recorded(gate: OpenGate) -> bool:
    return gate.recorded


def _applied(verdicts: PolicyVerdicts, spec: GateSpec) -> GateSpec:
    """The gate as the policies that route it or ask a larger quorum leave it: routed to
    their roles (instead of its own) and people, and to the largest quorum asked."""
    update: dict[str, Any] = {}
    if roles := verdicts.route_roles():
        update["decider_roles"] = roles
    if users := verdicts.route_users():
        update["decider_users"] = list(dict.fromkeys(spec.decider_users + users))
    if (quorum := verdicts.quorum()) is not None and quorum > spec.quorum:
        update["quorum"] = quorum
    return spec.model_copy(update=update) if update else spec


def _shown(verdicts: PolicyVerdicts) -> dict[str, Any]:
    """The `gate.opened` event's word on the policies that judged the gate (none: nothing)."""
    return {"policies": verdicts.shown()} if verdicts.verdicts else {}


def _decision_of(verdict: PolicyVerdict, checkpoint_name: str,
                 request_id: UUID) -> DecisionInput:
    """A policy's decision, cast as a person's vote is, named `policy:<name>@<version>`."""
    assert verdict.decision is not None and verdict.decision.decision is not None
    return DecisionInput(checkpoint_name=checkpoint_name, decision=verdict.decision.decision,
                         feedback=verdict.decision.feedback, answer=verdict.decision.answer,
                         decided_by=verdict.decided_by, request_id=request_id)


_POLICIES = TypeAdapter(GatePolicies)
# Typed answers (their schema and initial document) joined the digest after agent runs had
# recorded tool-call approvals without them.
TYPED_ANSWER_DIGEST = "typed-answer-digest"
# Runs that opened a gate before `record_with_next` existed wrote its decision on their own.
DECISION_WITH_NEXT_WRITE = "decision-with-next-write"
# A decision's Update answers when its workflow task completes, and local activities keep the
# task open (their results go out with it): a mobile run's chain of steps held a click's answer
# up to the task's heartbeat, 1.6 s. Runs from before ran their local work in the same task.
ANSWER_BEFORE_LOCAL_WORK = "answer-before-local-work"
# The shortest timer: it ends the workflow task. It fires at once only where the cluster's
# history.timerProcessorMaxTimeShift is short (the dev servers' is 1 ms); at Temporal's default
# (1 s) it fires a second late, and so do the run's next steps (docs/operations.md).
ANSWER_BREAK = timedelta(milliseconds=1)
# Gates opened before decision policies existed were not judged by them.
DECISION_POLICIES = "decision-policies"
POLICY_TIMEOUT = timedelta(seconds=30)


class GatedWorkflow:
    _gates: GateBook
    _recorder: RunRecorder
    _reopen: str | None
    _paused_at: str | None
    _gate_policies: GatePolicies | None

    def _init_gates(self, recorder: RunRecorder) -> None:
        self._gates = GateBook()
        self._recorder = recorder
        recorder.before_write = self.answer_decisions_first
        # The history length of the workflow task in which a decision's Update answered.
        self._answered_in_task: int | None = None
        self._reopen = None
        self._paused_at = None
        self._gate_policies = None

    def _policed(self, spec: GateSpec) -> GateSpec:
        """`spec` under the rules the run started with (its kind's defaults and its own
        overrides, in the memo of its start event, so a replay sees the same)."""
        if self._gate_policies is None:
            raw = workflow.memo_value(GATE_POLICY_MEMO, default=None)
            self._gate_policies = _POLICIES.validate_python(raw or {})
        return spec.with_policy(policy_for(self._gate_policies, spec.checkpoint_name))

    # --- asking --------------------------------------------------------------------------

    async def ask_human(self, make_spec: Callable[[], GateSpec], *, where: str,
                        record_with_next: bool = False,
                        decided: DecisionInput | None = None) -> GateOutcome:
        """Open a gate and wait for its outcome, re-opening it when asked to.

        `make_spec` is called for every (re-)opening, so a re-opened request shows the
        current state; `where` prefixes the Web UI's current details ("phase 1 · discovery").

        With `record_with_next`, a decision is written with the kind's next recorder write
        (`record`, `complete`, `fail`) instead of on its own: one local activity and one
        round trip fewer between a click and the next step, for kinds whose next step is a
        recorder write, or a local activity run through `RunRecorder.hand_over` (which applies
        the write with its own first). The Update still answers only once that write is done.
        A kind whose next step is a regular activity must not use it: its decision would stay
        unwritten (and the request pending in the read model) until that activity took the
        write.

        `decided` is a decision taken before the gate opened (a fork's, `POST /runs/{id}/fork`
        with `decision`): it is applied to the first request as soon as it is open, through
        the same path as the `decide` Update, so the read model shows the request opened and
        decided by that person. One the gate refuses is dropped, and the gate waits as usual.
        """
        while True:
            spec = self._policed(make_spec())
            covers_answer = spec.answer_schema is None or workflow.patched(TYPED_ANSWER_DIGEST)
            request_id = workflow.uuid4()
            verdicts = await self._judged(request_id, spec)
            spec = _applied(verdicts, spec)
            gate = OpenGate(request_id, spec, workflow.now() + spec.expires_in,
                            covers_answer=covers_answer)
            gate.with_next_write = record_with_next and workflow.patched(
                DECISION_WITH_NEXT_WRITE)
            self._reopen, self._paused_at = None, None
            self._set_gate_state(spec.checkpoint_name, "paused")
            await self._recorder.write(
                open_gate=gate.open_write(),
                events=[self._gate_event(gate, "opened", "pending",
                                         expires_at=gate.expires_at.isoformat(),
                                         **_shown(verdicts))],
                run=self._run_state(),
                snapshot=(f"gate {spec.checkpoint_name}", spec.phase, self.snapshot_state()))
            # Only now may decisions be accepted: the request row exists to be closed.
            self._gates.open = gate
            workflow.set_current_details(
                f"{where} · waiting for decision {spec.checkpoint_name} until "
                f"{gate.expires_at:%Y-%m-%d %H:%M} UTC")
            if decided is None and (deciding := verdicts.deciding()) is not None:
                decided = _decision_of(deciding, spec.checkpoint_name, request_id)
            if decided is not None:
                await self._decide_first(gate, decided)
                decided = None
            if gate.decision is None:
                await self._wait_on(gate, where)
            if gate.decision is not None:
                if not gate.with_next_write:
                    await workflow.wait_condition(functools.partial(_recorded, gate))
                return GateOutcome(gate, gate.status_for(gate.decision.decision), gate.decision)
            if self._reopen is not None:
                self._gates.close("superseded")
                continue  # the new request supersedes this one in the read model too
            outcome = await self._expire(gate, where)
            if outcome is not None:
                return outcome

    async def _judged(self, request_id: UUID, spec: GateSpec) -> PolicyVerdicts:
        """The decision policies' verdicts on the gate about to open (an activity reads and
        evaluates them: its result is in the history, so a replay acts on the same verdicts
        whatever the policies have become)."""
        if not workflow.patched(DECISION_POLICIES):
            return PolicyVerdicts()
        request = PolicyRequest.of(spec.checkpoint_name, [o.value for o in spec.options],
                                   spec.recommended_option, spec.context)
        return await workflow.execute_local_activity_method(
            DecisionPolicyActivities.evaluate,
            EvaluatePoliciesInput(run_id=self._recorder.run_id, request_id=request_id,
                                  request=request),
            start_to_close_timeout=POLICY_TIMEOUT, retry_policy=RECORD_RETRY,
            summary=f"decision policies on {spec.checkpoint_name}")

    async def _decide_first(self, gate: OpenGate, decision: DecisionInput) -> None:
        """Apply a decision taken before its gate opened; one that could not be applied now
        (the gate's options differ from those it was checked against) leaves the gate open."""
        try:
            self._gates.validate(decision)
        except ApplicationError as refused:
            workflow.logger.warning("decision taken before the gate dropped: %s",
                                    refused.message)
            return
        # Written on its own: taken here, by the run's own coroutine, it cannot wait for the
        # kind's next write, which comes only once ask_human has returned.
        gate.with_next_write = False
        await self._take_decision(decision, answers=False)

    async def answer_decisions_first(self) -> None:
        """Call before local work (the recorder does, before each write): a decision whose
        Update answered in this workflow task goes out now, the task ended by a 1 ms timer,
        instead of waiting for the local activities that follow it."""
        if self._answered_in_task is None or \
                self._answered_in_task != workflow.info().get_current_history_length():
            return
        self._answered_in_task = None
        if workflow.patched(ANSWER_BEFORE_LOCAL_WORK):
            await workflow.sleep(ANSWER_BREAK)

    def _decision_written(self, gate: OpenGate, answers: bool) -> None:
        gate.mark_recorded()
        if answers:  # the Update returns in this workflow task (a Signal has no answer)
            self._answered_in_task = workflow.info().get_current_history_length()

    def _answered_or_reopened(self, gate: OpenGate) -> bool:
        return gate.decision is not None or self._reopen is not None

    async def _wait_on(self, gate: OpenGate, where: str) -> None:
        """Wait until the gate is decided, re-opened or expired, reminding and escalating on
        its schedule meanwhile (durable timers: the wait still costs nothing)."""
        spec, answered = gate.spec, functools.partial(self._answered_or_reopened, gate)
        notices = spec.notices(workflow.now(), gate.expires_at)
        if not notices:  # one timer, as every gate had before reminders
            try:
                await workflow.wait_condition(answered, timeout=spec.expires_in,
                                              timeout_summary=f"{spec.checkpoint_name} expiry")
            except TimeoutError:
                pass
            return
        reminders = 0
        for at, kind in [*notices, (gate.expires_at, "expiry")]:
            try:
                await workflow.wait_condition(
                    answered, timeout=max(at - workflow.now(), timedelta(0)),
                    timeout_summary=f"{spec.checkpoint_name} {kind}")
                return
            except TimeoutError:
                pass
            if kind == "reminded":
                reminders += 1
                await self._notice(gate, "reminded", reminders)
            elif kind == "escalated":
                gate.spec = spec = spec.model_copy(update={"decider_roles": list(dict.fromkeys(
                    spec.decider_roles + spec.escalate_to_roles))})
                await self._notice(gate, "escalated", 1, decider_roles=spec.decider_roles)
                workflow.set_current_details(
                    f"{where} · waiting for decision {spec.checkpoint_name} (escalated to "
                    f"{', '.join(spec.escalate_to_roles)}) until "
                    f"{gate.expires_at:%Y-%m-%d %H:%M} UTC")

    async def _notice(self, gate: OpenGate, kind: Literal["reminded", "escalated"],
                      number: int, **output: Any) -> None:
        await self._recorder.write(
            gate_notice=GateNoticeWrite(request_id=gate.request_id, kind=kind, number=number,
                                        decider_roles=output.get("decider_roles")),
            events=[self._gate_event(gate, f"{kind}.{number}", "pending", gate_event=kind,
                                     number=number, expires_at=gate.expires_at.isoformat(),
                                     **output)])

    async def _expire(self, gate: OpenGate, where: str) -> GateOutcome | None:
        """Close an expired gate by its policy; None means: paused, then re-opened."""
        spec = gate.spec
        if spec.expiry_policy == "default" and spec.default_option:
            gate.decision = DecisionInput(
                checkpoint_name=spec.checkpoint_name, decision=spec.default_option,
                decided_by=SYSTEM_DECIDER,
                feedback=f"expired after {spec.expires_in}; default option applied")
            gate.decided_at = workflow.now()
        self._set_gate_state(None, "paused" if spec.expiry_policy == "pause" else "running")
        self._gates.close("expired")
        self._on_gate_closed(gate, "expired")
        await self._recorder.write(
            close_gate=gate.close_write("expired"),
            events=[self._gate_event(gate, "expired", "expired", policy=spec.expiry_policy,
                                     decision=gate.decision.decision if gate.decision else None)],
            run=self._run_state())
        if spec.expiry_policy == "default" and gate.decision is not None:
            return GateOutcome(gate, "expired", gate.decision)
        if spec.expiry_policy == "fail":
            return GateOutcome(gate, "expired", None)
        self._paused_at = spec.checkpoint_name
        workflow.set_current_details(f"{where} · decision {spec.checkpoint_name} expired; "
                                     "paused until it is re-opened")
        await workflow.wait_condition(lambda: self._reopen is not None)
        return None

    def _gate_event(self, gate: OpenGate, what: str, status: str, *,
                    gate_event: str | None = None, **output: Any):
        """A `gate.<what>` event (`gate_event` names the type when `what` is more exact)."""
        return self._recorder.event(
            f"gate.{gate.request_id}.{what}", f"gate.{gate_event or what}",
            phase=gate.spec.phase, status=status,
            output={"checkpoint_name": gate.spec.checkpoint_name,
                    "request_id": str(gate.request_id), **output})

    async def close_open_gate(self, status: GateStatus) -> None:
        """Close whatever request is open (the run is being canceled or is ending)."""
        if self._gates.open is not None:
            gate = self._gates.open
            self._gates.close(status)
            await self._recorder.write(close_gate=gate.close_write(status))

    # --- messages ------------------------------------------------------------------------

    @workflow.update
    async def decide(self, decision: DecisionInput) -> GateView:
        """Decide the pending gate; refused by the validator unless it can be applied."""
        if (earlier := self._gates.is_repeat(decision)) is not None:
            return earlier
        return await self._take_decision(decision)

    @decide.validator
    def _validate_decide(self, decision: DecisionInput) -> None:
        self._gates.validate(decision)

    @workflow.signal
    async def decide_signal(self, decision: DecisionInput) -> None:
        """Fire-and-forget decision; one that cannot be applied is logged and dropped."""
        try:
            self._gates.validate(decision)
        except ApplicationError as refused:
            workflow.logger.warning("decision signal dropped: %s", refused.message)
            return
        if self._gates.is_repeat(decision) is None:
            await self._take_decision(decision, answers=False)

    async def _take_decision(self, decision: DecisionInput, *, answers: bool = True
                             ) -> GateView:
        # accept() and close() run before the first await, so a racing second decision
        # already sees this one and is refused.
        gate, votes = self._gates.accept(decision)
        answer = {"answer": decision.answer} if decision.answer is not None else {}
        if gate.decision is None:  # a vote towards the quorum; the gate stays open
            await self._recorder.write(votes=votes, events=[self._gate_event(
                gate, f"voted.{decision.decided_by}", "pending", gate_event="voted",
                decision=decision.decision, decided_by=decision.decided_by,
                feedback=decision.feedback, on_behalf_of=[v.on_behalf_of for v in votes],
                approvals=gate.approvals(), quorum=gate.spec.quorum, **answer)])
            return gate.view("pending")
        status = gate.status_for(decision.decision)
        view = self._gates.close(status)
        self._on_gate_closed(gate, status)
        self._set_gate_state(None, "running")
        quorum: dict[str, Any] = ({"votes": [v.on_behalf_of for v in gate.votes],
                                   "quorum": gate.spec.quorum} if gate.spec.quorum > 1 else {})
        decided = self._gate_event(gate, "decided", status, decision=decision.decision,
                                   decided_by=decision.decided_by, feedback=decision.feedback,
                                   **answer, **quorum)
        if gate.with_next_write:
            self._recorder.stage(close_gate=gate.close_write(status), votes=votes,
                                 events=[decided], run=self._run_state(),
                                 on_written=functools.partial(self._decision_written, gate,
                                                              answers))
            await workflow.wait_condition(functools.partial(_recorded, gate))
            return view
        await self._recorder.write(close_gate=gate.close_write(status), votes=votes,
                                   events=[decided], run=self._run_state())
        self._decision_written(gate, answers)
        return view

    @workflow.update
    async def delegate(self, handed: DelegateInput) -> GateView:
        """Hand one's vote on the open request to another person, who then casts it."""
        gate = self._gates.validate_delegation(handed)
        gate.delegations[handed.from_user] = handed.to_user
        await self._recorder.write(
            delegation=DelegationWrite(request_id=gate.request_id, from_user=handed.from_user,
                                       to_user=handed.to_user, delegated_at=workflow.now()),
            events=[self._gate_event(gate, f"delegated.{handed.from_user}", "pending",
                                     gate_event="delegated", from_user=handed.from_user,
                                     to_user=handed.to_user)])
        return gate.view("pending")

    @delegate.validator
    def _validate_delegate(self, handed: DelegateInput) -> None:
        self._gates.validate_delegation(handed)

    @workflow.update
    async def reopen(self, request: ReopenInput) -> GateView:
        """Open a fresh request for a checkpoint that expired or whose request is stale."""
        self._reopen = request.checkpoint_name
        await workflow.wait_condition(
            lambda: self._gates.open is not None
            and self._gates.open.spec.checkpoint_name == request.checkpoint_name
            and self._reopen is None)
        assert self._gates.open is not None
        return self._gates.open.view("pending")

    @reopen.validator
    def _validate_reopen(self, request: ReopenInput) -> None:
        open_gate = self._gates.open
        if open_gate is not None:
            if open_gate.spec.checkpoint_name != request.checkpoint_name:
                raise ApplicationError(
                    f"checkpoint {request.checkpoint_name!r} is not open; the run waits on "
                    f"{open_gate.spec.checkpoint_name!r}", type=GATE_NOT_PENDING)
            if open_gate.decision is not None:
                raise ApplicationError(
                    f"checkpoint {request.checkpoint_name!r} was already decided",
                    type=GATE_NOT_PENDING)
            return
        if self._paused_at != request.checkpoint_name:
            raise ApplicationError(
                f"checkpoint {request.checkpoint_name!r} is neither pending nor expired",
                type=GATE_NOT_PENDING)

    @workflow.query
    def pending_gate(self) -> GateSpec | None:
        return self._gates.open.spec if self._gates.open else None

    # --- hooks each gated workflow provides ----------------------------------------------

    def _set_gate_state(self, waiting_on: str | None, status: RunStatus) -> None:
        raise NotImplementedError

    def _run_state(self) -> RunStateWrite:
        raise NotImplementedError

    def snapshot_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _on_gate_closed(self, gate: OpenGate, status: GateStatus) -> None:
        """Keep the outcome in the workflow's own state, if it wants to."""
