"""What a run writes to the read model, as one model applied in one transaction.

Workflows describe a write (events, the run's visible state, a snapshot, a gate opening or
closing) and the recorder activity applies it. Every part is idempotent: events by key,
snapshots by ordinal, gates by the id the workflow chose, the run row by refusing to leave a
terminal status. So a retried activity or a replayed workflow may apply it again harmlessly.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg
from pydantic import BaseModel, Field

from persistence.events import append_events
from persistence.models import ExpiryPolicy, GateOption, GateStatus, RunStatus
from persistence.queries import sql


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


class GateCloseWrite(BaseModel):
    id: UUID
    status: GateStatus
    decision: str | None = None
    feedback: str | None = None
    decision_by: str | None = None
    decision_at: datetime | None = None


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


async def apply_write(conn: asyncpg.Connection, write: ReadModelWrite) -> dict[str, int]:
    """Apply `write` atomically; returns the seq of each event key."""
    async with conn.transaction():
        if (gate := write.open_gate) is not None:
            await conn.execute(sql("supersede_pending_gates"), write.run_id, gate.checkpoint_name,
                               gate.id)
            await conn.execute(
                sql("insert_gate"), gate.id, write.run_id, gate.checkpoint_name, gate.phase,
                gate.title, gate.description, gate.context,
                [o.model_dump() for o in gate.options], gate.recommended_option, gate.digest,
                gate.expiry_policy, gate.default_option, gate.expires_at,
            )
        if (close := write.close_gate) is not None:
            await conn.execute(sql("close_gate"), close.id, close.status, close.decision,
                               close.feedback, close.decision_by, close.decision_at)
        if (run := write.run) is not None:
            await conn.execute(sql("update_run_progress"), write.run_id, run.status,
                               run.current_phase, run.phase_name, run.hitl_state, run.result,
                               run.error_message)
        for snap in write.snapshots:
            await conn.execute(sql("insert_snapshot"), write.run_id, snap.step_ordinal,
                               snap.label, snap.phase, snap.state)
        if not write.events:
            return {}
        return await append_events(conn, write.run_id, write.events)
