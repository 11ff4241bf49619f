"""A run's recorded history: its events after a seq, and its full-state snapshots."""

from __future__ import annotations

import asyncpg

from waystation.api.errors import ApiError
from waystation.api.queries import EventQuery
from waystation.api.schemas import EventPage, EventView, SnapshotHead, SnapshotList, SnapshotView
from waystation.persistence import events as events_repo
from waystation.persistence import snapshots as snapshots_repo
from waystation.persistence.models import RunRow


async def list_events(conn: asyncpg.Connection, run: RunRow, query: EventQuery) -> EventPage:
    """The run's events after `query.after_seq`, in seq order."""
    events = await events_repo.list_events(conn, run.id, after_seq=query.after_seq,
                                           limit=query.limit)
    return EventPage(run_id=run.id, events=[EventView.of(e) for e in events],
                     next_after_seq=events[-1].seq if events else query.after_seq)


async def latest_snapshot(conn: asyncpg.Connection, run: RunRow) -> SnapshotView:
    """The newest full-state snapshot of the run."""
    snapshot = await snapshots_repo.latest_snapshot(conn, run.id)
    if snapshot is None:
        raise ApiError(404, "snapshot_not_found", f"run {run.id} has no snapshot yet")
    return SnapshotView(**snapshot.model_dump())


async def list_snapshots(conn: asyncpg.Connection, run: RunRow) -> SnapshotList:
    """The run's snapshot history, oldest first, without the states themselves."""
    heads = await snapshots_repo.list_snapshot_heads(conn, run.id)
    return SnapshotList(run_id=run.id, snapshots=[
        SnapshotHead(**h.model_dump(exclude={"run_id"})) for h in heads])


async def snapshot(conn: asyncpg.Connection, run: RunRow, step_ordinal: int) -> SnapshotView:
    """One snapshot of the run by its ordinal (1 is the first)."""
    found = await snapshots_repo.get_snapshot(conn, run.id, step_ordinal)
    if found is None:
        raise ApiError(404, "snapshot_not_found", f"run {run.id} has no snapshot {step_ordinal}")
    return SnapshotView(**found.model_dump())
