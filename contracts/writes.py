"""What a run writes to the read model, as one model applied in one transaction.

Workflows describe a write (events, the run's visible state, a snapshot, a gate opening or
closing) and the recorder activity applies it (persistence.writes.apply_write). Every part is
idempotent: events by key, snapshots by ordinal, gates by the id the workflow chose, the run
row by refusing to leave a terminal status.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field

from contracts.statuses import ExpiryPolicy, GateStatus, RunStatus

# Who in a run's group may decide a gate that names no roles.
DEFAULT_DECIDER_ROLES = ("owner", "approver")


class GateOption(BaseModel):
    value: str
    label: str
    description: str = ""


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


class GateCloseWrite(BaseModel):
    id: UUID
    status: GateStatus
    decision: str | None = None
    feedback: str | None = None
    decision_by: str | None = None
    decision_at: datetime | None = None
    arguments: dict[str, Any] | None = None


class ReadModelWrite(BaseModel):
    run_id: UUID
    events: list[EventWrite] = Field(default_factory=list)
    run: RunStateWrite | None = None
    snapshots: list[SnapshotWrite] = Field(default_factory=list)
    open_gate: GateOpenWrite | None = None
    close_gate: GateCloseWrite | None = None


def merge_writes(first: ReadModelWrite, then: ReadModelWrite) -> ReadModelWrite:
    """One write doing `first` and then `then` (the later run state wins)."""
    return ReadModelWrite(
        run_id=first.run_id, events=first.events + then.events, run=then.run or first.run,
        snapshots=first.snapshots + then.snapshots,
        open_gate=then.open_gate or first.open_gate, close_gate=then.close_gate or first.close_gate)
