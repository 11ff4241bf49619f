"""The recorder: the one activity every run kind uses to write its read model.

It also enqueues, in the same transaction, the webhook deliveries the write calls for, and
starts them once committed (see activities/webhooks.py), and the email to a new gate's
deciders (activities/decision_mail.py).
"""

from __future__ import annotations

import asyncpg
from pydantic import BaseModel
from temporalio import activity

from activities.decision_mail import start_decision_mail
from activities.notifications import may_notify, notifications_of
from activities.webhooks import WebhookActivities, start_notifications
from contracts.writes import RunEnd
from persistence import webhooks as webhooks_repo
from persistence.runs import run_end
from persistence.writes import ReadModelWrite, apply_write


class RecordResult(BaseModel):
    seqs: dict[str, int]
    # A write ending a run that had already ended writes nothing (migration 028); this is the
    # end it found, which the workflow then ends as (workflows.lifecycle).
    ended: RunEnd | None = None


class ReadModelActivities:
    def __init__(self, pool: asyncpg.Pool, *, webhooks: WebhookActivities | None = None,
                 mail_deciders: bool = False) -> None:
        self._pool = pool
        # Sends each delivery's first attempt as soon as it is committed.
        self._webhooks = webhooks
        # With SMTP configured, each gate opened is mailed to those who may decide it.
        self._mail_deciders = mail_deciders

    @activity.defn(name="record")
    async def record(self, write: ReadModelWrite) -> RecordResult:
        if not may_notify(write):
            async with self._pool.acquire() as conn:
                # Atomic on its own (apply_write): BEGIN and COMMIT would be two more trips.
                return RecordResult(seqs=await apply_write(conn, write))
        async with self._pool.acquire() as conn, conn.transaction():
            seqs = await apply_write(conn, write)
            ended = await run_end(conn, write.run_id) if write.ends_run and not seqs else None
            notes = await notifications_of(conn, write)
            events = await webhooks_repo.enqueue(conn, write.run_id, notes) if notes else []
        # After the commit: the workflows must find their rows. A crash before these lines
        # retries the whole activity, which finds the same pending deliveries and gate.
        if events:
            if self._webhooks is not None:
                await self._webhooks.first_attempts(write.run_id, events)
            await start_notifications(activity.client(), activity.info().task_queue,
                                      write.run_id, events)
        if self._mail_deciders and write.open_gate is not None:
            await start_decision_mail(activity.client(), activity.info().task_queue,
                                      write.open_gate.id)
        if self._mail_deciders and (notice := write.gate_notice) is not None:
            reminder = notice.number if notice.kind == "reminded" else 0
            await start_decision_mail(
                activity.client(), activity.info().task_queue, notice.request_id,
                occasion=f"reminder-{reminder}" if reminder else "escalated", reminder=reminder)
        return RecordResult(seqs=seqs, ended=ended)
