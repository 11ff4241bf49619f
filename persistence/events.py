"""Repository functions for `run_events` (appends go through waystation.persistence.writes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from uuid import UUID

import asyncpg

from waystation.persistence.models import EventRow
from waystation.persistence.queries import sql

# How far ahead run_events' monthly partitions are created: the worker does it at start and
# before each retention batch, so an event's month always exists long before its first event.
PARTITION_MONTHS_AHEAD = 3

if TYPE_CHECKING:
    from waystation.contracts.writes import EventWrite


async def append_events(
    conn: asyncpg.Connection, run_id: UUID, events: list[EventWrite]
) -> dict[str, int]:
    rows = await conn.fetch(sql("append_events"), run_id,
                            [e.model_dump(mode="json") for e in events])
    return {r["out_key"]: r["out_seq"] for r in rows}


async def list_events(
    conn: asyncpg.Connection, run_id: UUID, *, after_seq: int, limit: int,
    types: Sequence[str] | None = None,
) -> list[EventRow]:
    """Events after `after_seq`; only those of `types` when given."""
    if types is None:
        records = await conn.fetch(sql("list_events"), run_id, after_seq, limit)
    else:
        records = await conn.fetch(sql("list_events_of_types"), run_id, after_seq, limit,
                                   list(types))
    return [EventRow.from_record(r) for r in records]


async def maintain_partitions(conn: asyncpg.Connection,
                              months_ahead: int = PARTITION_MONTHS_AHEAD) -> tuple[int, int]:
    """Create run_events' missing monthly partitions through `months_ahead` months from now and
    drop the past ones retention emptied; returns (created, dropped)."""
    created = await conn.fetchval(sql("create_event_partitions"), months_ahead)
    dropped = await conn.fetchval(sql("drop_empty_event_partitions"))
    return int(created), int(dropped)
