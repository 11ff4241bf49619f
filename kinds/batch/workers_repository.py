"""Repository functions for the workers view: items by the worker that ran them."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import asyncpg

from waystation.kinds.batch.repository import sql
from waystation.sdk.reads import Row


class WorkerTotals(Row):
    worker_id: str
    running: int
    completed: int
    failed: int
    execution_ms: int
    last_assigned_at: datetime | None


class RunningUnit(Row):
    worker_id: str
    unit_id: UUID
    job_id: UUID
    run_id: UUID
    ordinal: int
    assigned_at: datetime | None
    started_at: datetime | None


async def unit_totals(conn: asyncpg.Connection, worker_ids: list[str]) -> list[WorkerTotals]:
    """Totals of workers `worker_ids` and of every worker with an item running, over every
    item (whoever's: counts only)."""
    return [WorkerTotals.from_record(r)
            for r in await conn.fetch(sql("worker_unit_totals"), worker_ids)]


async def running_units(conn: asyncpg.Connection, worker_ids: list[str]) -> list[RunningUnit]:
    """The items running on `worker_ids` that the connection's caller may see."""
    return [RunningUnit.from_record(r)
            for r in await conn.fetch(sql("worker_running_units"), worker_ids)]
