"""The recorder: the one activity every run kind uses to write its read model.

It also tells people what the write did, through each notification channel
(activities/channels.py: webhooks, email to deciders, Slack): in the same transaction each
channel enqueues what it needs; once committed, each makes its first attempt and starts its
durable workflow.
"""

from __future__ import annotations

import asyncio

import asyncpg
from pydantic import BaseModel
from temporalio import activity

from waystation.activities.channels import NotificationChannel, WebhookChannel
from waystation.contracts.writes import RunEnd
from waystation.persistence.runs import run_end
from waystation.persistence.writes import ReadModelWrite, apply_write, apply_write_returning


class RecordResult(BaseModel):
    seqs: dict[str, int]
    # A write ending a run that had already ended writes nothing (migration 028); this is the
    # end it found, which the workflow then ends as (waystation.workflows.lifecycle).
    ended: RunEnd | None = None


class ReadModelActivities:
    def __init__(self, pool: asyncpg.Pool, *,
                 channels: list[NotificationChannel] | None = None) -> None:
        self._pool = pool
        # Every configured way of reaching people (waystation/worker.py builds them);
        # webhooks are always one, as users register them at run time.
        self._channels = channels if channels is not None else [WebhookChannel(None)]

    @activity.defn(name="record")
    async def record(self, write: ReadModelWrite) -> RecordResult:
        return await self.apply(write)

    async def apply(self, write: ReadModelWrite) -> RecordResult:
        """The write, with the notifications it calls for; also for another activity that
        applies a run's staged write with its own first one (a decision written with the next
        step, `ask_human(record_with_next=True)`), so a gate's `gate.decided` is told too."""
        concerned = [c for c in self._channels if c.concerns(write)]
        if not concerned:
            async with self._pool.acquire() as conn:
                # Atomic on its own (apply_write): BEGIN and COMMIT would be two more trips.
                return RecordResult(seqs=await apply_write(conn, write))
        async with self._pool.acquire() as conn, conn.transaction():
            applied = await apply_write_returning(conn, write)
            ended = (await run_end(conn, write.run_id) if write.ends_run and not applied.seqs
                     else None)
            keys = [await c.enqueue(conn, write, applied) for c in concerned]
        # After the commit: the workflows must find their rows. A crash before these lines
        # retries the whole activity, which finds the same pending deliveries and gate. The
        # channels at once: each person hears in the time of their own channel's request.
        await asyncio.gather(*(channel.send(write, channel_keys)
                               for channel, channel_keys in zip(concerned, keys, strict=True)))
        return RecordResult(seqs=applied.seqs, ended=ended)
