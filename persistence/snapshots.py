"""Repository functions for `run_snapshots` (writes go through persistence.writes)."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from persistence.models import SnapshotRow
from persistence.queries import sql


async def latest_snapshot(conn: asyncpg.Connection, run_id: UUID) -> SnapshotRow | None:
    record = await conn.fetchrow(sql("latest_snapshot"), run_id)
    return SnapshotRow.from_record(record) if record else None


async def list_snapshots(conn: asyncpg.Connection, run_id: UUID) -> list[SnapshotRow]:
    return [SnapshotRow.from_record(r) for r in await conn.fetch(sql("list_snapshots"), run_id)]
