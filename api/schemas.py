"""Request and response models of the HTTP API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from api.job_schemas import BatchRunCreate
from persistence.models import EventRow, GateOption, GateRow, GateStatus, RunRow, RunStatus
from workflows.mobile_models import MobileInput
from workflows.validation_models import ValidationInput


class ValidationRunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["validation"]
    input: ValidationInput


# Every run kind's request joins this union, discriminated by `kind`.
class MobileRunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["mobile_agent"]
    input: MobileInput


RunCreate = Annotated[ValidationRunCreate | BatchRunCreate | MobileRunCreate,
                      Field(discriminator="kind")]


class RunCreated(BaseModel):
    run_id: UUID
    workflow_id: str
    kind: str
    status: RunStatus
    created: bool = Field(description="False when an earlier request with the same "
                                      "Idempotency-Key created this run.")


class DecisionView(BaseModel):
    request_id: UUID
    run_id: UUID
    checkpoint_name: str
    phase: int
    title: str
    description: str
    context: dict[str, Any]
    options: list[GateOption]
    recommended_option: str | None
    digest: str
    expiry_policy: str
    default_option: str | None
    status: GateStatus
    decision: str | None
    feedback: str | None
    decided_by: str | None
    decided_at: datetime | None
    expires_at: datetime | None
    created_at: datetime

    @classmethod
    def of(cls, gate: GateRow) -> DecisionView:
        return cls(request_id=gate.id, decided_by=gate.decision_by, decided_at=gate.decision_at,
                   **gate.model_dump(exclude={"id", "decision_by", "decision_at", "updated_at"}))


class RunView(BaseModel):
    run_id: UUID
    kind: str
    owner: str
    workflow_id: str
    status: RunStatus
    current_phase: int
    phase_name: str | None
    pending_checkpoint: str | None
    hitl_checkpoint_at: datetime | None
    pending_decision: DecisionView | None = None
    input: dict[str, Any]
    result: dict[str, Any] | None
    error_message: str | None
    last_seq: int
    created_at: datetime
    started_at: datetime | None
    updated_at: datetime
    completed_at: datetime | None

    @classmethod
    def of(cls, run: RunRow, pending: GateRow | None = None) -> RunView:
        return cls(run_id=run.id, pending_checkpoint=run.hitl_state,
                   pending_decision=DecisionView.of(pending) if pending else None,
                   **run.model_dump(exclude={"id", "hitl_state", "group_id"}))


class RunPage(BaseModel):
    runs: list[RunView]
    next_cursor: str | None


class EventView(BaseModel):
    seq: int
    type: str
    phase: int | None
    crew: str | None
    task: str | None
    agent: str | None
    status: str | None
    progress_pct: int | None
    output: Any
    error_message: str | None
    duration_ms: int | None
    created_at: datetime

    @classmethod
    def of(cls, event: EventRow) -> EventView:
        return cls(**event.model_dump(exclude={"run_id", "event_key"}))


class EventPage(BaseModel):
    run_id: UUID
    events: list[EventView]
    next_after_seq: int = Field(description="Pass as after_seq to read on.")


class SnapshotView(BaseModel):
    run_id: UUID
    step_ordinal: int
    label: str
    phase: int | None
    state: dict[str, Any]
    created_at: datetime


class SnapshotHead(BaseModel):
    step_ordinal: int
    label: str
    phase: int | None
    created_at: datetime


class SnapshotList(BaseModel):
    run_id: UUID
    snapshots: list[SnapshotHead] = Field(description="Oldest first, without their state; "
                                                      "read one by its ordinal.")


class DecisionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decision: str = Field(min_length=1, max_length=200)
    feedback: str | None = Field(None, max_length=10_000)
    request_id: UUID | None = Field(None, description="The request you reviewed; refused if "
                                                      "it is no longer the open one.")
    digest: str | None = Field(None, min_length=64, max_length=64, pattern="^[0-9a-f]{64}$",
                               description="The digest of the request you reviewed.")


class DecisionList(BaseModel):
    decisions: list[DecisionView]


class CancelAccepted(BaseModel):
    run_id: UUID
    status: Literal["canceling"]


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    database: Literal["ok", "unavailable"]
    temporal: Literal["ok", "unavailable"]
