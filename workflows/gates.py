"""Human gates: the one mechanism every run kind uses to stop for a human decision.

A gate is opened (a `hitl_requests` row), waits, costing nothing, until a decision arrives
by Update (validated first, so a bad decision is refused before anything is written) or by
Signal, or until it expires. While it waits the workflow holds no worker slot; it may be
evicted from every cache and replayed later from history.

Each request carries a digest of what it shows the human; a decision that cites a request id
or digest other than the open request's is refused, so nobody approves what they did not see.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID

import jsonschema_rs
from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from contracts.statuses import ExpiryPolicy, GateStatus
    from contracts.writes import (
        DEFAULT_DECIDER_ROLES,
        GateCloseWrite,
        GateOpenWrite,
        GateOption,
    )

SYSTEM_DECIDER = "system"

# ApplicationError types raised by decision validation; the API maps them to HTTP statuses.
UNKNOWN_CHECKPOINT = "UnknownCheckpoint"
GATE_NOT_PENDING = "GateNotPending"
UNKNOWN_OPTION = "UnknownOption"
STALE_REQUEST = "StaleRequest"
INVALID_ARGUMENTS = "InvalidArguments"
INVALID_FEEDBACK = "InvalidFeedback"


class GateSpec(BaseModel):
    """What a workflow asks a human."""

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
    rejecting_options: list[str] = Field(default_factory=lambda: ["reject"])
    # A gate whose answer may carry arguments (an agent's tool call, edited before it runs):
    # the JSON Schema they must satisfy, and the option that requires them.
    arguments_schema: dict[str, Any] | None = None
    arguments_option: str = "edit"
    # Options whose feedback must be a number above `feedback_number_above` (a new budget).
    feedback_number_for: list[str] = Field(default_factory=list)
    feedback_number_above: float = 0.0
    # The roles of the run's group that may decide (the run's owner always may). Not part of
    # the digest: who decides is not what is decided.
    decider_roles: list[str] = Field(default_factory=lambda: list(DEFAULT_DECIDER_ROLES))

    def digest(self) -> str:
        shown = {"checkpoint": self.checkpoint_name, "title": self.title,
                 "description": self.description, "context": self.context,
                 "options": [o.model_dump() for o in self.options]}
        canonical = json.dumps(shown, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()


class DecisionInput(BaseModel):
    """A human's answer to a gate (Update and Signal argument)."""

    checkpoint_name: str
    decision: str
    feedback: str | None = None
    decided_by: str
    request_id: UUID | None = None
    digest: str | None = None
    # Edited arguments, only for a gate with an `arguments_schema` (an "edit" decision).
    arguments: dict[str, Any] | None = None


class GateView(BaseModel):
    """A request as the decider sees it after deciding (Update result)."""

    request_id: UUID
    checkpoint_name: str
    status: GateStatus
    decision: str | None = None
    feedback: str | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    digest: str
    arguments: dict[str, Any] | None = None


class ReopenInput(BaseModel):
    checkpoint_name: str
    requested_by: str


class OpenGate:
    """The gate a workflow is waiting on now."""

    def __init__(self, request_id: UUID, spec: GateSpec, expires_at: datetime) -> None:
        self.request_id = request_id
        self.spec = spec
        self.digest = spec.digest()
        self.expires_at = expires_at
        self.decision: DecisionInput | None = None
        self.decided_at: datetime | None = None
        self.recorded = False

    def status_for(self, option: str) -> GateStatus:
        return "rejected" if option in self.spec.rejecting_options else "approved"

    def view(self, status: GateStatus) -> GateView:
        d = self.decision
        return GateView(request_id=self.request_id, checkpoint_name=self.spec.checkpoint_name,
                        status=status, decision=d.decision if d else None,
                        feedback=d.feedback if d else None,
                        decided_by=d.decided_by if d else None, decided_at=self.decided_at,
                        digest=self.digest, arguments=d.arguments if d else None)

    def open_write(self) -> GateOpenWrite:
        s = self.spec
        return GateOpenWrite(
            id=self.request_id, checkpoint_name=s.checkpoint_name, phase=s.phase, title=s.title,
            description=s.description, context=s.context, options=s.options,
            recommended_option=s.recommended_option, digest=self.digest,
            expiry_policy=s.expiry_policy, default_option=s.default_option,
            expires_at=self.expires_at, decider_roles=s.decider_roles)

    def close_write(self, status: GateStatus) -> GateCloseWrite:
        d = self.decision
        return GateCloseWrite(id=self.request_id, status=status,
                              decision=d.decision if d else None,
                              feedback=d.feedback if d else None,
                              decision_by=d.decided_by if d else None,
                              decision_at=self.decided_at,
                              arguments=d.arguments if d else None)


class GateBook:
    """The open gate plus every decided one, and the rules for accepting a decision."""

    def __init__(self) -> None:
        self.open: OpenGate | None = None
        self.closed: dict[str, GateView] = {}

    def is_repeat(self, d: DecisionInput) -> GateView | None:
        """The earlier outcome if `d` repeats the decision already taken on its checkpoint."""
        done = self.closed.get(d.checkpoint_name)
        if (done is not None and (self.open is None
                                  or self.open.spec.checkpoint_name != d.checkpoint_name)
                and done.decision == d.decision and done.decided_by == d.decided_by
                and done.feedback == d.feedback and done.arguments == d.arguments
                and d.request_id in (None, done.request_id)):
            return done
        return None

    def validate(self, d: DecisionInput) -> None:
        """Raise an ApplicationError naming why `d` cannot be accepted now."""
        if self.is_repeat(d) is not None:
            return
        gate = self.open
        if gate is None or gate.spec.checkpoint_name != d.checkpoint_name:
            if d.checkpoint_name in self.closed:
                raise ApplicationError(
                    f"checkpoint {d.checkpoint_name!r} is not pending "
                    f"(it is {self.closed[d.checkpoint_name].status})", type=GATE_NOT_PENDING)
            waiting = f"; the run waits on {gate.spec.checkpoint_name!r}" if gate else ""
            raise ApplicationError(
                f"checkpoint {d.checkpoint_name!r} is not pending{waiting}",
                type=UNKNOWN_CHECKPOINT)
        if gate.decision is not None:
            raise ApplicationError(
                f"checkpoint {d.checkpoint_name!r} was already decided "
                f"({gate.decision.decision!r} by {gate.decision.decided_by})",
                type=GATE_NOT_PENDING)
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
        if d.request_id is not None and d.request_id != gate.request_id:
            raise ApplicationError(
                f"request {d.request_id} is not the open request for {d.checkpoint_name!r} "
                "(it was superseded); review the current request and decide again",
                type=STALE_REQUEST)
        if d.digest is not None and d.digest != gate.digest:
            raise ApplicationError(
                f"digest does not match the open request for {d.checkpoint_name!r}: what you "
                "reviewed has changed; review the current request and decide again",
                type=STALE_REQUEST)
        _check_arguments(gate.spec, d)

    def accept(self, d: DecisionInput) -> OpenGate:
        """Take `d` as the open gate's decision (call right after validate, before any await)."""
        self.validate(d)
        gate = self.open
        assert gate is not None
        gate.decision = d
        gate.decided_at = workflow.now()
        return gate

    def close(self, status: GateStatus) -> GateView:
        gate = self.open
        assert gate is not None
        view = gate.view(status)
        self.closed[gate.spec.checkpoint_name] = view
        self.open = None
        return view


def _check_arguments(spec: GateSpec, d: DecisionInput) -> None:
    """Edited arguments go with the arguments option only, and must fit the schema, so an
    edit that would fail the tool is refused before anything is applied."""
    option = spec.arguments_option
    if spec.arguments_schema is None or (d.arguments is not None and d.decision != option):
        if d.arguments is not None:
            where = f"only with the {option!r} option" if spec.arguments_schema else "none"
            raise ApplicationError(f"arguments: {spec.checkpoint_name!r} takes {where}",
                                   type=INVALID_ARGUMENTS)
        return
    if d.decision != option:
        return
    if d.arguments is None:
        raise ApplicationError(f"arguments: required with the {option!r} option",
                               type=INVALID_ARGUMENTS)
    for error in jsonschema_rs.validator_for(spec.arguments_schema).iter_errors(d.arguments):
        field = ".".join(["arguments", *(str(p) for p in error.instance_path)])
        raise ApplicationError(f"{field}: {error.message}", type=INVALID_ARGUMENTS)
def feedback_number(feedback: str | None) -> float | None:
    """The number a decision's feedback holds ("2.5", "$2.50"), if it is one."""
    try:
        value = float((feedback or "").strip().lstrip("$"))
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


GateOutcome = Literal["decided", "expired"]
