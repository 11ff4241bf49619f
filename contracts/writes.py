"""What a run writes to the read model, as one model applied in one transaction.

Workflows describe a write (events, the run's visible state, a snapshot, a gate opening or
closing) and the recorder activity applies it (waystation.persistence.writes.apply_write). Every
part is idempotent: events by key, snapshots by ordinal, gates by the id the workflow chose, the run
row by refusing to leave a terminal status.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from waystation.contracts.gate_policy import AnswerMode
from waystation.contracts.statuses import TERMINAL_RUN_STATUSES, ExpiryPolicy, GateStatus, RunStatus

# Who in a run's group may decide a gate that names no roles.
DEFAULT_DECIDER_ROLES = ("owner", "approver")


class GateOption(BaseModel):
    value: str
    label: str
    description: str = ""
    # Whether choosing it carries the gate's typed answer: `required` (the option is the
    # answer), `optional` ("approve with edits"), or `none`.
    answer: AnswerMode = "none"

    def shown(self) -> dict[str, Any]:
        """What the digest covers (an option without an answer as it always was)."""
        return self.model_dump(exclude={"answer"} if self.answer == "none" else None)


# The options that reject when a gate names none (GateSpec.rejecting_options' default).
DEFAULT_REJECTING = ["reject"]


def answer_mode(options: list[GateOption], answer_schema: dict[str, Any] | None, option: str,
                *, rejecting: list[str]) -> AnswerMode:
    """Whether choosing `option` carries the gate's typed answer: as the option says; when
    no option says, every approving option requires it (a gate with a schema asks for it)."""
    if answer_schema is None:
        return "none"
    modes = {o.value: o.answer for o in options}
    if any(mode != "none" for mode in modes.values()):
        return modes.get(option, "none")
    return "none" if option in rejecting else "required"


class EventWrite(BaseModel):
    event_key: str
    type: str
    phase: int | None = None
    crew: str | None = None
    task: str | None = None
    agent: str | None = None
    status: str | None = None
    progress_pct: int | None = None
    output: Any = None
    error_message: str | None = None
    duration_ms: int | None = None


class RunStateWrite(BaseModel):
    status: RunStatus
    current_phase: int
    phase_name: str | None = None
    hitl_state: str | None = None
    result: dict[str, Any] | None = None
    error_message: str | None = None
    stop_reason: str | None = None
    # An agent run's re-priming summary (issue 12); None leaves the stored one as it is.
    context_summary: str | None = None
    # An agent run's related entities by kind (seed 003); None leaves the stored ones.
    related_entity_ids: dict[str, list[str]] | None = None


class RunEnd(BaseModel):
    """How a run ended, as its `runs` row has it."""

    status: RunStatus
    result: dict[str, Any] | None = None
    error_message: str | None = None
    stop_reason: str | None = None


class SnapshotWrite(BaseModel):
    step_ordinal: int
    label: str
    phase: int | None = None
    state: dict[str, Any]


class GateOpenWrite(BaseModel):
    id: UUID
    checkpoint_name: str
    phase: int
    title: str
    description: str
    context: dict[str, Any] = Field(default_factory=dict)
    options: list[GateOption]
    recommended_option: str | None = None
    digest: str
    expiry_policy: ExpiryPolicy = "pause"
    default_option: str | None = None
    expires_at: datetime | None = None
    # The group roles that may decide it, besides the run's owner (see GateSpec).
    decider_roles: list[str] = Field(default_factory=lambda: list(DEFAULT_DECIDER_ROLES))
    decider_users: list[str] = Field(default_factory=list)
    quorum: int = 1
    answer_schema: dict[str, Any] | None = None
    answer_initial: Any = None


class GateCloseWrite(BaseModel):
    id: UUID
    status: GateStatus
    decision: str | None = None
    feedback: str | None = None
    decision_by: str | None = None
    decision_at: datetime | None = None
    answer: Any = None


class VoteWrite(BaseModel):
    """One person's vote on a request (cast by `voter`, for `on_behalf_of` when delegated)."""

    request_id: UUID
    voter: str
    on_behalf_of: str
    option: str
    feedback: str | None = None
    answer: Any = None
    digest: str
    voted_at: datetime


class DelegationWrite(BaseModel):
    request_id: UUID
    from_user: str
    to_user: str
    delegated_at: datetime


class GateNoticeWrite(BaseModel):
    """A reminder or escalation of a waiting request (`number` counts them, for idempotency)."""

    request_id: UUID
    kind: Literal["reminded", "escalated"]
    number: int
    # After an escalation: everyone who may now decide.
    decider_roles: list[str] | None = None


# The parts of a write that touch a gate. A write without them, nearly every one, is a step's
# progress (run state, snapshots, events), which one SQL function applies (migrations 027, 028).
GATE_PARTS = frozenset({"open_gate", "close_gate", "votes", "delegation", "gate_notice"})


class ReadModelWrite(BaseModel):
    run_id: UUID
    events: list[EventWrite] = Field(default_factory=list)
    run: RunStateWrite | None = None
    snapshots: list[SnapshotWrite] = Field(default_factory=list)
    open_gate: GateOpenWrite | None = None
    close_gate: GateCloseWrite | None = None
    votes: list[VoteWrite] = Field(default_factory=list)
    delegation: DelegationWrite | None = None
    gate_notice: GateNoticeWrite | None = None

    @property
    def has_gate_parts(self) -> bool:
        return any(getattr(self, part) for part in GATE_PARTS)

    @property
    def ends_run(self) -> bool:
        return self.run is not None and self.run.status in TERMINAL_RUN_STATUSES


def merge_writes(first: ReadModelWrite, then: ReadModelWrite) -> ReadModelWrite:
    """One write doing `first` and then `then` (the later run state wins)."""
    return ReadModelWrite(
        run_id=first.run_id, events=first.events + then.events, run=then.run or first.run,
        snapshots=first.snapshots + then.snapshots,
        open_gate=then.open_gate or first.open_gate, close_gate=then.close_gate or first.close_gate,
        votes=first.votes + then.votes, delegation=then.delegation or first.delegation,
        gate_notice=then.gate_notice or first.gate_notice)
