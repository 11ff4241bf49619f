"""Human gates: the one mechanism every run kind uses to stop for a human decision.

A gate is opened (a `hitl_requests` row), waits, costing nothing, until a decision arrives
by Update (validated first, so a bad decision is refused before anything is written) or by
Signal, or until it expires. While it waits the workflow holds no worker slot; it may be
evicted from every cache and replayed later from history.

Each request carries a digest of what it shows the human; a decision that cites a request id
or digest other than the open request's is refused, so nobody approves what they did not see.

A decision is a vote, recorded with the digest its voter saw. A gate with a quorum of one is
decided by its first vote; with a quorum of n, by the n-th approving vote (which gives the
outcome its option, and its answer or else the latest answer an approver sent), or at once by
any rejecting vote: one "no" stops what several must approve. A voter may hand their vote to
another person before casting it.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from pydantic import AliasChoices, BaseModel, ConfigDict, Field
from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from waystation.contracts.gate_policy import AnswerMode, GatePolicy
    from waystation.contracts.refusals import (
        ALREADY_VOTED,
        GATE_NOT_PENDING,
        INVALID_ANSWER,
        INVALID_DELEGATION,
        INVALID_FEEDBACK,
        NOT_ALLOWED,
        STALE_REQUEST,
        UNKNOWN_CHECKPOINT,
        UNKNOWN_OPTION,
    )
    from waystation.contracts.statuses import ExpiryPolicy, GateStatus
    from waystation.contracts.user_schemas import user_schema_validator
    from waystation.contracts.writes import (
        DEFAULT_DECIDER_ROLES,
        DEFAULT_REJECTING,
        GateCloseWrite,
        GateOpenWrite,
        GateOption,
        VoteWrite,
        answer_mode,
    )

SYSTEM_DECIDER = "system"


class GateSpec(BaseModel):
    """What a workflow asks a human, and who may answer it how."""

    checkpoint_name: str
    phase: int
    title: str
    description: str
    context: dict[str, Any] = Field(default_factory=dict)
    options: list[GateOption]
    recommended_option: str | None = None
    expires_in: timedelta = timedelta(days=7)
    expiry_policy: ExpiryPolicy = "pause"
    default_option: str | None = None
    # Which options count as a rejection (everything else approves).
    rejecting_options: list[str] = Field(default_factory=lambda: list(DEFAULT_REJECTING))
    # A typed answer: the JSON Schema it must satisfy and the document offered for editing
    # (an agent's tool-call arguments, a draft). Options say whether they carry it
    # (GateOption.answer); when none says, every approving option requires it.
    answer_schema: dict[str, Any] | None = None
    answer_initial: Any = None
    # Options whose feedback must be a number above `feedback_number_above` (a new budget).
    feedback_number_for: list[str] = Field(default_factory=list)
    feedback_number_above: float = 0.0
    # Who decides: the run's owner always; members of the run's group with one of these
    # roles; these named people. `quorum` approvals approve; one rejection rejects. Not part
    # of the digest: who decides is not what is decided.
    decider_roles: list[str] = Field(default_factory=lambda: list(DEFAULT_DECIDER_ROLES))
    decider_users: list[str] = Field(default_factory=list)
    quorum: int = 1
    # While it waits: reminders, and after `escalate_after` the escalation roles decide too.
    remind_before_expiry: timedelta | None = None
    remind_every: timedelta | None = None
    escalate_after: timedelta | None = None
    escalate_to_roles: list[str] = Field(default_factory=list)

    def digest(self, *, covers_answer: bool = True) -> str:
        """What the human is shown, hashed. A gate without a typed answer keeps the digest it
        always had; `covers_answer=False` is the digest of an agent's tool-call approval
        opened before typed answers joined the digest (its replay must compute the same)."""
        covers_answer = covers_answer and self.answer_schema is not None
        shown: dict[str, Any] = {
            "checkpoint": self.checkpoint_name, "title": self.title,
            "description": self.description, "context": self.context,
            "options": [o.shown() if covers_answer else o.model_dump(exclude={"answer"})
                        for o in self.options]}
        if covers_answer:
            shown |= {"answer_schema": self.answer_schema, "answer_initial": self.answer_initial}
        canonical = json.dumps(shown, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def answer_mode(self, option: str) -> AnswerMode:
        return answer_mode(self.options, self.answer_schema, option,
                           rejecting=self.rejecting_options)

    def with_policy(self, policy: GatePolicy | None) -> GateSpec:
        """This gate under a kind's or a run's rules (waystation.contracts.gate_policy)."""
        if policy is None:
            return self
        update = {name: value for name in _POLICY_FIELDS
                  if (value := getattr(policy, name)) is not None}
        if policy.answer_options:
            update["options"] = [
                o.model_copy(update={"answer": policy.answer_options[o.value]})
                if o.value in policy.answer_options else o for o in self.options]
        return self.model_copy(update=update)

    def notices(self, opened_at: datetime, expires_at: datetime) -> list[tuple[datetime, str]]:
        """When to remind and escalate while the gate waits, in order (at most
        MAX_REMINDERS reminders, so a week-long wait cannot grow its history without bound)."""
        times: list[tuple[datetime, str]] = []
        if self.remind_every is not None:
            at = opened_at + self.remind_every
            while at < expires_at and len(times) < MAX_REMINDERS:
                times.append((at, "reminded"))
                at += self.remind_every
        if self.remind_before_expiry is not None:
            at = expires_at - self.remind_before_expiry
            if at > opened_at and (at, "reminded") not in times:
                times.append((at, "reminded"))
        if self.escalate_after is not None and self.escalate_to_roles:
            at = opened_at + self.escalate_after
            if at < expires_at:
                times.append((at, "escalated"))
        return sorted(times)


_POLICY_FIELDS = ("decider_roles", "decider_users", "quorum", "answer_schema",
                  "remind_before_expiry", "remind_every", "escalate_after", "escalate_to_roles")
MAX_REMINDERS = 50


class DecisionInput(BaseModel):
    """A human's answer to a gate (Update and Signal argument): one vote, which decides the
    gate unless it waits for a quorum."""

    model_config = ConfigDict(populate_by_name=True)

    checkpoint_name: str
    decision: str
    feedback: str | None = None
    decided_by: str
    request_id: UUID | None = None
    digest: str | None = None
    # The typed answer (an edited document, a tool call's edited arguments). Histories
    # recorded before typed answers were general call it `arguments`.
    answer: Any = Field(None, validation_alias=AliasChoices("answer", "arguments"))
    # False when the voter may decide only through votes delegated to them.
    for_self: bool = True


class DelegateInput(BaseModel):
    """Hand one's vote on the open request to another person (Update argument)."""

    checkpoint_name: str
    from_user: str
    to_user: str
    request_id: UUID | None = None


class GateView(BaseModel):
    """A request as the decider sees it after voting or deciding (Update result)."""

    request_id: UUID
    checkpoint_name: str
    status: GateStatus
    decision: str | None = None
    feedback: str | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    digest: str
    answer: Any = None


class ReopenInput(BaseModel):
    checkpoint_name: str
    requested_by: str


class OpenGate:
    """The gate a workflow is waiting on now."""

    def __init__(self, request_id: UUID, spec: GateSpec, expires_at: datetime, *,
                 covers_answer: bool = True) -> None:
        self.request_id = request_id
        self.spec = spec
        self.digest = spec.digest(covers_answer=covers_answer)
        self.expires_at = expires_at
        # The vote that decided it (or the expiry's default).
        self.decision: DecisionInput | None = None
        self.decided_at: datetime | None = None
        self.recorded = False
        # The decision goes out with the run's next write (ask_human's `record_with_next`).
        self.with_next_write = False
        self.votes: list[VoteWrite] = []
        self.delegations: dict[str, str] = {}

    def mark_recorded(self) -> None:
        self.recorded = True

    def status_for(self, option: str) -> GateStatus:
        return "rejected" if option in self.spec.rejecting_options else "approved"

    def approvals(self) -> int:
        return sum(1 for v in self.votes if v.option not in self.spec.rejecting_options)

    def holder(self, user: str) -> str:
        """Who casts `user`'s vote now (following delegations)."""
        seen = {user}
        while user in self.delegations:
            user = self.delegations[user]
            if user in seen:
                break
            seen.add(user)
        return user

    def voted(self, user: str) -> bool:
        """Whether `user`'s vote has been cast (by them or by whom they handed it to)."""
        return any(v.on_behalf_of == user for v in self.votes)

    def has_voted(self, user: str) -> bool:
        """Whether `user` has cast a vote, their own or one handed to them: once is all."""
        return any(user in (v.voter, v.on_behalf_of) for v in self.votes)

    def carried_by(self, voter: str, *, for_self: bool) -> list[str]:
        """Whose votes `voter` casts: their own (unless they may vote only for others) and
        every not-yet-cast vote delegated to them."""
        own = [voter] if for_self and voter not in self.delegations else []
        handed = sorted(u for u in self.delegations
                        if u != voter and self.holder(u) == voter and not self.voted(u))
        return [u for u in own + handed if not self.voted(u)]

    def view(self, status: GateStatus) -> GateView:
        d = self.decision
        return GateView(request_id=self.request_id, checkpoint_name=self.spec.checkpoint_name,
                        status=status, decision=d.decision if d else None,
                        feedback=d.feedback if d else None,
                        decided_by=d.decided_by if d else None, decided_at=self.decided_at,
                        digest=self.digest, answer=d.answer if d else None)

    def open_write(self) -> GateOpenWrite:
        s = self.spec
        return GateOpenWrite(
            id=self.request_id, checkpoint_name=s.checkpoint_name, phase=s.phase, title=s.title,
            description=s.description, context=s.context,
            # Each option says whether it takes the answer, so no reader need know the rule.
            options=[o.model_copy(update={"answer": s.answer_mode(o.value)}) for o in s.options],
            recommended_option=s.recommended_option, digest=self.digest,
            expiry_policy=s.expiry_policy, default_option=s.default_option,
            expires_at=self.expires_at, decider_roles=s.decider_roles,
            decider_users=s.decider_users, quorum=s.quorum, answer_schema=s.answer_schema,
            answer_initial=s.answer_initial)

    def close_write(self, status: GateStatus) -> GateCloseWrite:
        d = self.decision
        return GateCloseWrite(id=self.request_id, status=status,
                              decision=d.decision if d else None,
                              feedback=d.feedback if d else None,
                              decision_by=d.decided_by if d else None,
                              decision_at=self.decided_at,
                              answer=d.answer if d else None)


class GateBook:
    """The open gate plus every decided one, and the rules for accepting a vote."""

    def __init__(self) -> None:
        self.open: OpenGate | None = None
        self.closed: dict[str, GateView] = {}

    def is_repeat(self, d: DecisionInput) -> GateView | None:
        """The earlier outcome if `d` repeats the decision already taken on its checkpoint."""
        done = self.closed.get(d.checkpoint_name)
        if (done is not None and (self.open is None
                                  or self.open.spec.checkpoint_name != d.checkpoint_name)
                and done.decision == d.decision and done.decided_by == d.decided_by
                and done.feedback == d.feedback and done.answer == d.answer
                and d.request_id in (None, done.request_id)):
            return done
        return None

    def pending(self, checkpoint_name: str) -> OpenGate:
        """The open, undecided gate for `checkpoint_name`, or an ApplicationError saying why
        there is none."""
        gate = self.open
        if gate is None or gate.spec.checkpoint_name != checkpoint_name:
            if checkpoint_name in self.closed:
                raise ApplicationError(
                    f"checkpoint {checkpoint_name!r} is not pending "
                    f"(it is {self.closed[checkpoint_name].status})", type=GATE_NOT_PENDING)
            waiting = f"; the run waits on {gate.spec.checkpoint_name!r}" if gate else ""
            raise ApplicationError(
                f"checkpoint {checkpoint_name!r} is not pending{waiting}",
                type=UNKNOWN_CHECKPOINT)
        if gate.decision is not None:
            raise ApplicationError(
                f"checkpoint {checkpoint_name!r} was already decided "
                f"({gate.decision.decision!r} by {gate.decision.decided_by})",
                type=GATE_NOT_PENDING)
        return gate

    def validate(self, d: DecisionInput) -> None:
        """Raise an ApplicationError naming why `d` cannot be accepted now."""
        if self.is_repeat(d) is not None:
            return
        gate = self.pending(d.checkpoint_name)
        allowed = [o.value for o in gate.spec.options]
        if d.decision not in allowed:
            raise ApplicationError(
                f"unknown option {d.decision!r} for {d.checkpoint_name!r}; "
                f"choose one of {', '.join(allowed)}", type=UNKNOWN_OPTION)
        if d.decision in gate.spec.feedback_number_for:
            above = gate.spec.feedback_number_above
            if (amount := feedback_number(d.feedback)) is None or amount <= above:
                raise ApplicationError(
                    f"option {d.decision!r} needs feedback holding a number above {above:g}",
                    type=INVALID_FEEDBACK)
        _check_current(gate, d.checkpoint_name, d.request_id, d.digest)
        _check_voter(gate, d)
        _check_answer(gate.spec, d)

    def accept(self, d: DecisionInput) -> tuple[OpenGate, list[VoteWrite]]:
        """Take `d`'s votes on the open gate (call right after validate, before any await);
        the gate is decided (`gate.decision` set) when they reach its quorum or reject it."""
        self.validate(d)
        gate = self.open
        assert gate is not None
        now = workflow.now()
        votes = [VoteWrite(request_id=gate.request_id, voter=d.decided_by, on_behalf_of=who,
                           option=d.decision, feedback=d.feedback, answer=d.answer,
                           digest=gate.digest, voted_at=now)
                 for who in gate.carried_by(d.decided_by, for_self=d.for_self)]
        gate.votes.extend(votes)
        if gate.status_for(d.decision) == "rejected":
            gate.decision, gate.decided_at = d, now
        elif gate.approvals() >= gate.spec.quorum:
            # An approval without an answer keeps the latest edit an earlier approver sent,
            # so "approve with edits" by one and plain approvals by others use the edits.
            edits = [v.answer for v in gate.votes if v.answer is not None
                     and v.option not in gate.spec.rejecting_options]
            if d.answer is None and edits:
                d = d.model_copy(update={"answer": edits[-1]})
            gate.decision, gate.decided_at = d, now
        return gate, votes

    def validate_delegation(self, handed: DelegateInput) -> OpenGate:
        gate = self.pending(handed.checkpoint_name)
        _check_current(gate, handed.checkpoint_name, handed.request_id, None)
        giver, taker = handed.from_user, handed.to_user
        if giver == taker:
            raise ApplicationError("to: you cannot delegate to yourself", type=INVALID_DELEGATION)
        if gate.voted(giver) or giver in gate.delegations:
            raise ApplicationError(
                f"{giver} has already {'voted' if gate.voted(giver) else 'delegated'} on "
                f"{handed.checkpoint_name!r}", type=ALREADY_VOTED)
        if gate.has_voted(gate.holder(taker)):
            raise ApplicationError(f"{taker} has already voted on {handed.checkpoint_name!r}",
                                   type=ALREADY_VOTED)
        if gate.holder(taker) == giver:
            raise ApplicationError(f"to: {taker}'s vote is delegated to {giver}: that would be "
                                   "a circle", type=INVALID_DELEGATION)
        return gate

    def close(self, status: GateStatus) -> GateView:
        gate = self.open
        assert gate is not None
        view = gate.view(status)
        self.closed[gate.spec.checkpoint_name] = view
        self.open = None
        return view


def _check_current(gate: OpenGate, checkpoint_name: str, request_id: UUID | None,
                   digest: str | None) -> None:
    if request_id is not None and request_id != gate.request_id:
        raise ApplicationError(
            f"request {request_id} is not the open request for {checkpoint_name!r} "
            "(it was superseded); review the current request and decide again",
            type=STALE_REQUEST)
    if digest is not None and digest != gate.digest:
        raise ApplicationError(
            f"digest does not match the open request for {checkpoint_name!r}: what you "
            "reviewed has changed; review the current request and decide again",
            type=STALE_REQUEST)


def _check_voter(gate: OpenGate, d: DecisionInput) -> None:
    """One vote per person: a second one, or one after handing the vote on, is refused."""
    who = d.decided_by
    if gate.has_voted(who):
        raise ApplicationError(f"{who} has already voted on {d.checkpoint_name!r}",
                               type=ALREADY_VOTED)
    if who in gate.delegations and not gate.carried_by(who, for_self=False):
        raise ApplicationError(f"{who} handed their vote on {d.checkpoint_name!r} to "
                               f"{gate.holder(who)}", type=ALREADY_VOTED)
    if not gate.carried_by(who, for_self=d.for_self):
        raise ApplicationError(f"{who} holds no vote on {d.checkpoint_name!r}",
                               type=NOT_ALLOWED)


def _check_answer(spec: GateSpec, d: DecisionInput) -> None:
    """A typed answer goes with the options that take one and must fit the gate's schema, so
    an answer the workflow cannot use is refused before anything is written."""
    mode = spec.answer_mode(d.decision)
    if d.answer is None:
        if mode == "required":
            raise ApplicationError(f"answer: required with the {d.decision!r} option",
                                   {"path": "answer"}, type=INVALID_ANSWER)
        return
    if mode == "none":
        where = ("takes none" if spec.answer_schema is None
                 else f"takes none with the {d.decision!r} option")
        raise ApplicationError(f"answer: {spec.checkpoint_name!r} {where}", {"path": "answer"},
                               type=INVALID_ANSWER)
    assert spec.answer_schema is not None
    # The schema was checked at submit; the validator still refuses retrieval, so an update
    # validator (workflow code) can never do I/O, and its patterns cannot backtrack.
    for error in user_schema_validator(spec.answer_schema).iter_errors(d.answer):
        path = answer_path(error.instance_path)
        raise ApplicationError(f"{path}: {error.message}", {"path": path}, type=INVALID_ANSWER)


def answer_path(instance_path: list[str | int]) -> str:
    """`answer.guests[2].name`: where in the answer a schema error is."""
    return "answer" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                              for p in instance_path)


def feedback_number(feedback: str | None) -> float | None:
    """The number a decision's feedback holds ("2.5", "$2.50"), if it is one."""
    try:
        value = float((feedback or "").strip().lstrip("$"))
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


GateOutcome = Literal["decided", "expired"]
