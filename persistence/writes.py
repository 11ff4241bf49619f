"""Applies a run's write (waystation.contracts.writes.ReadModelWrite) to the read model in one
transaction.

Every part is idempotent: events by key, snapshots by ordinal, gates by the id the workflow
chose, the run row by refusing to leave a terminal status. So a retried activity or a
replayed workflow may apply it again harmlessly.
"""

from __future__ import annotations

import contextlib

import asyncpg
from pydantic import BaseModel

from waystation.contracts.writes import (
    DelegationWrite,
    EventWrite,
    GateCloseWrite,
    GateOpenWrite,
    ReadModelWrite,
    RunStateWrite,
    SnapshotWrite,
    VoteWrite,
    merge_writes,
)
from waystation.persistence.models import GateRow
from waystation.persistence.queries import sql

# The write models are the contracts layer's; re-exported for the activities that apply them.
__all__ = ["AppliedWrite", "DelegationWrite", "EventWrite", "GateCloseWrite", "GateOpenWrite",
           "ReadModelWrite", "RunStateWrite", "SnapshotWrite", "VoteWrite", "apply_write",
           "apply_write_returning", "merge_writes"]


class AppliedWrite(BaseModel):
    """What a write's statements answered: each event key's seq, and the request its
    `close_gate` closed, as the close left it (None when it closed none: the request was
    closed already, by an earlier try of the write, or its run is erased)."""

    seqs: dict[str, int]
    closed_gate: GateRow | None = None


async def apply_write(conn: asyncpg.Connection, write: ReadModelWrite) -> dict[str, int]:
    """Apply `write` atomically; returns the seq of each event key. Inside a caller's
    transaction it is part of that one (no savepoint: two round trips fewer, and an error
    aborts the caller's transaction either way). A write without gate parts, nearly every
    one, is a single statement: one round trip."""
    return (await apply_write_returning(conn, write)).seqs


async def apply_write_returning(conn: asyncpg.Connection,
                                write: ReadModelWrite) -> AppliedWrite:
    """`apply_write`, answering also the request it closed (the recorder tells of it)."""
    if not write.has_gate_parts:
        return AppliedWrite(seqs=await _apply_progress(conn, write))
    async with contextlib.nullcontext() if conn.is_in_transaction() else conn.transaction():
        closed = await _apply_gate_parts(conn, write)
        return AppliedWrite(seqs=await _apply_progress(conn, write), closed_gate=closed)


async def _apply_progress(conn: asyncpg.Connection, write: ReadModelWrite) -> dict[str, int]:
    """The run state, snapshots and events (migration 028's function, 091's one update of the
    run's row)."""
    if write.run is None and not write.snapshots and not write.events:
        return {}
    # JSON text made by pydantic in one pass (not a dict for the pool's encoder), parsed once.
    rows = await conn.fetch(sql("apply_progress_write"), write.run_id,
                            write.model_dump_json(include={"run", "snapshots", "events"}))
    return {r["out_key"]: r["out_seq"] for r in rows}


async def _apply_gate_parts(conn: asyncpg.Connection, write: ReadModelWrite) -> GateRow | None:
    """The gate parts; answers the request `close_gate` closed, if it closed one."""
    closed = None
    if (gate := write.open_gate) is not None:
        await conn.execute(sql("supersede_pending_gates"), write.run_id, gate.checkpoint_name,
                           gate.id)
        await conn.execute(
            sql("insert_gate"), gate.id, write.run_id, gate.checkpoint_name, gate.phase,
            gate.title, gate.description, gate.context,
            [o.model_dump() for o in gate.options], gate.recommended_option, gate.digest,
            gate.expiry_policy, gate.default_option, gate.expires_at, gate.decider_roles,
            gate.decider_users, gate.quorum, gate.answer_schema, gate.answer_initial,
        )
    if (close := write.close_gate) is not None:
        record = await conn.fetchrow(sql("close_gate"), close.id, close.status, close.decision,
                                     close.feedback, close.decision_by, close.decision_at,
                                     close.answer)
        closed = GateRow.from_record(record) if record else None
    for vote in write.votes:
        await conn.execute(sql("insert_vote"), vote.request_id, vote.voter, vote.on_behalf_of,
                           vote.option, vote.feedback, vote.answer, vote.digest, vote.voted_at)
    if (handed := write.delegation) is not None:
        await conn.execute(sql("insert_delegation"), handed.request_id, handed.from_user,
                           handed.to_user, handed.delegated_at)
    if (notice := write.gate_notice) is not None:
        if notice.kind == "escalated":
            await conn.execute(sql("record_escalation"), notice.request_id,
                               notice.decider_roles)
        else:
            await conn.execute(sql("record_reminder"), notice.request_id, notice.number)
    return closed
