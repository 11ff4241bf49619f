"""A run ends once in the read model (migration 028): a second end, written by a workflow path
Temporal refused after its writes had committed, changes nothing; a retried end changes
nothing; and ending a run supersedes its pending requests."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from tests.console_helpers import open_gate
from tests.helpers import new_validation_run
from waystation.contracts.writes import EventWrite, ReadModelWrite, RunStateWrite, SnapshotWrite
from waystation.persistence.writes import apply_write


def end(run_id: UUID, status: str, ordinal: int) -> ReadModelWrite:
    return ReadModelWrite(
        run_id=run_id, run=RunStateWrite(status=status, current_phase=5, stop_reason=status),
        events=[EventWrite(event_key=f"run.{status}", type=f"run.{status}", status=status)],
        snapshots=[SnapshotWrite(step_ordinal=ordinal, label=status, state={"status": status})])


async def test_a_second_end_changes_nothing_and_a_retried_end_is_one(
        pool: asyncpg.Pool) -> None:
    run_id = (await new_validation_run(pool)).run_id
    async with pool.acquire() as conn:
        assert list(await apply_write(conn, end(run_id, "completed", 1))) == ["run.completed"]
        assert await apply_write(conn, end(run_id, "completed", 1)) == {}
        assert await apply_write(conn, end(run_id, "canceled", 2)) == {}
        assert await conn.fetchval("SELECT status FROM runs WHERE id = $1", run_id) == "completed"
        assert [r["type"] for r in await conn.fetch(
            "SELECT type FROM run_events WHERE run_id = $1 ORDER BY seq", run_id)] == [
            "run.completed"]
        assert [r["label"] for r in await conn.fetch(
            "SELECT label FROM run_snapshots WHERE run_id = $1", run_id)] == ["completed"]


async def test_ending_a_run_supersedes_its_pending_requests(pool: asyncpg.Pool) -> None:
    run_id = (await new_validation_run(pool)).run_id
    gate_id = await open_gate(pool, run_id)
    async with pool.acquire() as conn:
        await apply_write(conn, end(run_id, "canceled", 1))
        assert await conn.fetchval("SELECT status FROM hitl_requests WHERE id = $1",
                                   gate_id) == "superseded"
