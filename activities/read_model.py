"""The recorder: the one activity every run kind uses to write its read model.

It also enqueues, in the same transaction, the webhook deliveries the write calls for, and
starts them once committed (see activities/webhooks.py).
"""

from __future__ import annotations

import asyncpg
from pydantic import BaseModel
from temporalio import activity

from activities.notifications import notifications_of
from activities.webhooks import start_deliveries
from persistence import webhooks as webhooks_repo
from persistence.writes import ReadModelWrite, apply_write


class RecordResult(BaseModel):
    seqs: dict[str, int]


class ReadModelActivities:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @activity.defn(name="record")
    async def record(self, write: ReadModelWrite) -> RecordResult:
        async with self._pool.acquire() as conn, conn.transaction():
            seqs = await apply_write(conn, write)
            notes = await notifications_of(conn, write)
            deliveries = await webhooks_repo.enqueue(conn, write.run_id, notes) if notes else []
        if deliveries:
            # After the commit: a delivery workflow must find its row. A crash before this
            # line retries the whole activity, which finds the same pending deliveries.
            await start_deliveries(activity.client(), activity.info().task_queue, deliveries)
        return RecordResult(seqs=seqs)
