"""Rows of the read model as pydantic models: the one place where records become objects."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

import asyncpg
from pydantic import BaseModel, BeforeValidator, Field

from waystation.contracts.statuses import TERMINAL_RUN_STATUSES, ExpiryPolicy, GateStatus, RunStatus
from waystation.contracts.writes import DEFAULT_DECIDER_ROLES, GateOption

# The statuses and GateOption live in the contracts layer; re-exported for the repositories.
__all__ = ["ExpiryPolicy", "GateOption", "GateStatus", "RunStatus", "TERMINAL_RUN_STATUSES"]

# NUMERIC costs arrive as Decimal; the API speaks float.
Usd = Annotated[float, BeforeValidator(float)]


class Row(BaseModel):
    @classmethod
    def from_record(cls, record: asyncpg.Record) -> Any:
        return cls.model_validate(dict(record))


class RunRow(Row):
    id: UUID
    kind: str
    owner: str
    group_id: UUID | None
    project_id: str | None
    workflow_id: str
    status: RunStatus
    current_phase: int
    phase_name: str | None
    hitl_state: str | None
    hitl_checkpoint_at: datetime | None
    input: dict[str, Any]
    result: dict[str, Any] | None
    error_message: str | None
    last_seq: int
    created_at: datetime
    started_at: datetime | None
    updated_at: datetime
    completed_at: datetime | None
    finished_at: datetime | None
    stop_reason: str | None
    context_summary: str | None = None
    # The gate rules the run was started with (migration 023).
    gate_policies: dict[str, Any] | None = None
    # Summed over every model-call attempt (migration 010).
    cost_usd: Usd = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    # Where a forked run came from: run_id, snapshot, checkpoint, decision (migration 058).
    forked_from: dict[str, Any] | None = None
    # Hidden runs (erased_at, migration 020), and who hid one to be restorable (051).
    erased_at: datetime | None = None
    hidden_by: str | None = None
    # Migration 055: the run's name within its group, and the entities its tools returned.
    name: str | None = None
    related_entity_ids: dict[str, list[str]] | None = None


class EventRow(Row):
    run_id: UUID
    seq: int
    event_key: str
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


class SnapshotRow(Row):
    run_id: UUID
    step_ordinal: int
    label: str
    phase: int | None
    state: dict[str, Any]
    created_at: datetime


class GateRow(Row):
    id: UUID
    run_id: UUID
    checkpoint_name: str
    phase: int
    title: str
    description: str
    context: dict[str, Any]
    options: list[GateOption]
    recommended_option: str | None
    digest: str
    expiry_policy: ExpiryPolicy
    default_option: str | None
    status: GateStatus
    decision: str | None
    feedback: str | None
    decision_at: datetime | None
    decision_by: str | None
    answer: Any = None
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    # The group roles that may decide it (migration 012), besides the run's owner.
    decider_roles: list[str] = Field(default_factory=lambda: list(DEFAULT_DECIDER_ROLES))
    # Migration 023: named deciders, quorum, typed answer, reminders and escalation.
    decider_users: list[str] = Field(default_factory=list)
    quorum: int = 1
    answer_schema: dict[str, Any] | None = None
    answer_initial: Any = None
    reminders_sent: int = 0
    escalated_at: datetime | None = None


class VoteRow(Row):
    request_id: UUID
    voter: str
    on_behalf_of: str
    option: str
    feedback: str | None
    answer: Any
    digest: str
    voted_at: datetime


class DelegationRow(Row):
    request_id: UUID
    from_user: str
    to_user: str
    delegated_at: datetime


class GateAudit(BaseModel):
    """Who voted how on a request, and who handed their vote to whom."""

    votes: list[VoteRow]
    delegations: list[DelegationRow]


class GroupRow(Row):
    id: UUID
    name: str
    created_by: str
    created_at: datetime
    role: str | None = None  # the caller's role, when listed for a member


class MemberRow(Row):
    group_id: UUID
    user_name: str
    role: str
    added_by: str
    created_at: datetime
    updated_at: datetime
