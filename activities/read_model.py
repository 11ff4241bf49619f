"""The recorder: the one activity every run kind uses to write its read model.

It also enqueues, in the same transaction, the webhook deliveries the write calls for; once
committed it makes their first attempts and starts their workflows (activities/webhooks.py),
and it does the same for the email to a new gate's deciders (activities/decision_mail.py).
"""

from __future__ import annotations

from uuid import UUID

import asyncpg
from pydantic import BaseModel
from temporalio import activity

from activities.decision_mail import (
    DecisionMailActivities,
    DecisionMailInput,
    start_decision_mail,
)
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
                 mail: DecisionMailActivities | None = None) -> None:
        self._pool = pool
        # Sends each delivery's first attempt as soon as it is committed.
        self._webhooks = webhooks
        # With SMTP configured, each gate opened is mailed to those who may decide it.
        self._mail = mail

    @activity.defn(name="record")
    async def record(self, write: ReadModelWrite) -> RecordResult:
        return await self.apply(write)

    async def apply(self, write: ReadModelWrite) -> RecordResult:
        """The write, with the notifications it calls for; also for another activity that
        applies a run's staged write with its own first one (a decision written with the next
        step, `ask_human(record_with_next=True)`), so a gate's `gate.decided` is told too."""
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
        if self._mail is not None and write.open_gate is not None:
            await self._mail_now_and_durably(write.open_gate.id)
        if self._mail is not None and (notice := write.gate_notice) is not None:
            reminder = notice.number if notice.kind == "reminded" else 0
            await self._mail_now_and_durably(
                notice.request_id, reminder=reminder,
                occasion=f"reminder-{reminder}" if reminder else "escalated")
        return RecordResult(seqs=seqs, ended=ended)

    async def _mail_now_and_durably(self, request_id: UUID, *, reminder: int = 0,
                                    occasion: str = "") -> None:
        """The mails sent at once, then their workflow started to retry what did not go."""
        assert self._mail is not None
        await self._mail.first_attempt(DecisionMailInput(request_id=request_id,
                                                         reminder=reminder))
        await start_decision_mail(activity.client(), activity.info().task_queue, request_id,
                                  occasion=occasion, reminder=reminder)
