"""The recorder: the one activity every run kind uses to write its read model."""

from __future__ import annotations

import asyncpg
from pydantic import BaseModel
from temporalio import activity

from persistence.writes import ReadModelWrite, apply_write


class RecordResult(BaseModel):
    seqs: dict[str, int]


class ReadModelActivities:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @activity.defn(name="record")
    async def record(self, write: ReadModelWrite) -> RecordResult:
        async with self._pool.acquire() as conn:
            return RecordResult(seqs=await apply_write(conn, write))
