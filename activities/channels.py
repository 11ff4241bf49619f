"""One way to reach people: each notification channel (webhooks, mail, Slack) is one
`NotificationChannel`, and the recorder (activities/read_model.py) calls every configured one
the same way. A new chat (Microsoft Teams next) is one more module implementing it.

The shape every channel shares: what a write calls for is decided from the committed read
model, so nothing is lost or invented; after the commit the channel makes a first attempt at
once (a person hears in the time of one request, issue 31), then starts its durable workflow
(workflow id from the write, so a retried or replayed recorder starts nothing twice), whose
activities Temporal retries with backoff, recording each attempt in the channel's log.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from uuid import UUID

import asyncpg
from temporalio import activity

from waystation.activities.decision_mail import (
    DecisionMailActivities,
    DecisionMailInput,
    start_decision_mail,
)
from waystation.activities.notifications import may_notify, notifications_of
from waystation.activities.slack.channel import (
    SlackActivities,
    slack_may_change,
    start_slack_sync,
    sync_key,
)
from waystation.activities.webhooks import WebhookActivities, start_notifications
from waystation.contracts.writes import ReadModelWrite
from waystation.persistence import webhooks as webhooks_repo
from waystation.persistence.writes import AppliedWrite


class NotificationChannel(ABC):
    """A way of telling people what a read-model write did."""

    @abstractmethod
    def concerns(self, write: ReadModelWrite) -> bool:
        """Whether `write` may call for a message on this channel (cheap: no I/O). A write
        that concerns no channel is applied alone, without a transaction."""

    async def enqueue(self, conn: asyncpg.Connection, write: ReadModelWrite,
                      applied: AppliedWrite) -> list[str]:
        """In the recorder's transaction, after the write (`applied`: what its statements
        answered): what to send, as keys the channel's `send` understands (a channel that
        reads the committed rows later needs none)."""
        return []

    @abstractmethod
    async def send(self, write: ReadModelWrite, keys: list[str]) -> None:
        """After the commit: a first attempt now, then the durable workflow for the rest.
        Runs inside the recorder's activity (its client and task queue)."""


class WebhookChannel(NotificationChannel):
    """Standard Webhooks deliveries, one row per webhook and event (activities/webhooks.py)."""

    def __init__(self, webhooks: WebhookActivities | None) -> None:
        # None: no first attempt here (the workflow makes them all).
        self._webhooks = webhooks

    def concerns(self, write: ReadModelWrite) -> bool:
        return may_notify(write)

    async def enqueue(self, conn: asyncpg.Connection, write: ReadModelWrite,
                      applied: AppliedWrite) -> list[str]:
        notes = await notifications_of(conn, write, closed_gate=applied.closed_gate)
        return await webhooks_repo.enqueue(conn, write.run_id, notes) if notes else []

    async def send(self, write: ReadModelWrite, keys: list[str]) -> None:
        if not keys:
            return
        if self._webhooks is not None:
            await self._webhooks.first_attempts(write.run_id, keys)
        await start_notifications(activity.client(), activity.info().task_queue,
                                  write.run_id, keys)


class MailChannel(NotificationChannel):
    """Email with a signed decision link to each decider (activities/decision_mail.py)."""

    def __init__(self, mail: DecisionMailActivities) -> None:
        self._mail = mail

    def concerns(self, write: ReadModelWrite) -> bool:
        return write.open_gate is not None or write.gate_notice is not None

    async def send(self, write: ReadModelWrite, keys: list[str]) -> None:
        if write.open_gate is not None:
            await self._now_and_durably(write.open_gate.id)
        if (notice := write.gate_notice) is not None:
            reminder = notice.number if notice.kind == "reminded" else 0
            await self._now_and_durably(
                notice.request_id, reminder=reminder,
                occasion=f"reminder-{reminder}" if reminder else "escalated")

    async def _now_and_durably(self, request_id: UUID, *, reminder: int = 0,
                               occasion: str = "") -> None:
        await self._mail.first_attempt(DecisionMailInput(request_id=request_id,
                                                         reminder=reminder))
        await start_decision_mail(activity.client(), activity.info().task_queue, request_id,
                                  occasion=occasion, reminder=reminder)


class SlackChannel(NotificationChannel):
    """Each request as a Slack message kept true (activities/slack/channel.py)."""

    def __init__(self, slack: SlackActivities) -> None:
        self._slack = slack

    def concerns(self, write: ReadModelWrite) -> bool:
        return slack_may_change(write)

    async def send(self, write: ReadModelWrite, keys: list[str]) -> None:
        # Done at once (the usual case): no workflow is needed, as nothing is left to retry.
        if not await self._slack.first_attempt(write.run_id):
            await start_slack_sync(activity.client(), activity.info().task_queue,
                                   write.run_id, sync_key(write))
