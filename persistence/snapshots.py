"""Repository functions for `run_snapshots` (writes go through waystation.persistence.writes)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import asyncpg

from waystation.persistence.models import Row, SnapshotRow
from waystation.persistence.queries import sql


class SnapshotHeadRow(Row):
    """A snapshot without its state: what a history list needs."""

    run_id: UUID
    step_ordinal: int
    label: str
    phase: int | None
    created_at: datetime


async def latest_snapshot(conn: asyncpg.Connection, run_id: UUID) -> SnapshotRow | None:
    record = await conn.fetchrow(sql("latest_snapshot"), run_id)
    return SnapshotRow.from_record(record) if record else None


async def list_snapshots(conn: asyncpg.Connection, run_id: UUID) -> list[SnapshotRow]:
    return [SnapshotRow.from_record(r) for r in await conn.fetch(sql("list_snapshots"), run_id)]


async def list_snapshot_heads(conn: asyncpg.Connection, run_id: UUID) -> list[SnapshotHeadRow]:
    records = await conn.fetch(sql("list_snapshot_heads"), run_id)
    return [SnapshotHeadRow.from_record(r) for r in records]


async def get_snapshot(conn: asyncpg.Connection, run_id: UUID,
                       step_ordinal: int) -> SnapshotRow | None:
    record = await conn.fetchrow(sql("get_snapshot"), run_id, step_ordinal)
    return SnapshotRow.from_record(record) if record else None


async def latest_snapshot_at_gate(conn: asyncpg.Connection, run_id: UUID,
                                  checkpoint: str) -> SnapshotRow | None:
    """The newest snapshot the run took while it waited on `checkpoint`."""
    record = await conn.fetchrow(sql("latest_snapshot_at_gate"), run_id, checkpoint)
    return SnapshotRow.from_record(record) if record else None
