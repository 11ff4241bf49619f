"""Email to the people who may decide a request, each with a signed, single-use link.

Started like webhook deliveries: the recorder, having written a gate, sends the mails once
itself (`first_attempt`) and then starts one `DecisionMail` workflow for it (workflow id from
the request id, so once), whose activity is retried by Temporal with backoff. Each person's
link row is made once and marked sent after the mail went out, so a retry writes only to those
not yet written to (a crash between sending and marking sends that one mail again, with the
same link).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID

import asyncpg
from pydantic import BaseModel
from temporalio import activity
from temporalio.client import Client

from waystation.activities.smtp import send_mail
from waystation.activities.start_once import start_once
from waystation.contracts.decision_links import sign_link
from waystation.persistence import decision_mail as mail_repo
from waystation.persistence import gates as gates_repo
from waystation.persistence.models import GateRow

log = logging.getLogger(__name__)
DECISION_MAIL_WORKFLOW = "DecisionMail"
# How long the recorder waits for a gate's mails before leaving them to the workflow.
FIRST_ATTEMPT_WITHIN_SECONDS = 2.0


@dataclass(frozen=True)
class MailSettings:
    smtp_url: str
    sender: str
    # Where links point (the API's public address) and what signs them (the API checks).
    link_base: str
    link_secret: str
    link_ttl: timedelta = timedelta(hours=72)


class DecisionMailInput(BaseModel):
    request_id: UUID
    # 0: the first mail (to everyone not yet written to, e.g. after an escalation too);
    # n: the n-th reminder, to everyone who has not voted and not yet had it.
    reminder: int = 0


class DecisionMailResult(BaseModel):
    sent: int


async def start_decision_mail(client: Client, task_queue: str, request_id: UUID, *,
                              occasion: str = "", reminder: int = 0) -> None:
    """One mail workflow per request and occasion (opened, `escalated`, `reminder-<n>`)."""
    await start_once(client, DECISION_MAIL_WORKFLOW,
                     DecisionMailInput(request_id=request_id, reminder=reminder),
                     workflow_id=f"decision-mail-{request_id}{'-' + occasion if occasion else ''}",
                     task_queue=task_queue,
                     summary=f"email the deciders of request {request_id} {occasion}".rstrip())


class DecisionMailActivities:
    def __init__(self, pool: asyncpg.Pool, settings: MailSettings) -> None:
        self._pool = pool
        self._settings = settings

    @activity.defn(name="send_decision_mail")
    async def send(self, arg: DecisionMailInput) -> DecisionMailResult:
        """Mail each person who may decide (and has an address) their own link, once."""
        return await self._send(arg)

    async def first_attempt(self, arg: DecisionMailInput) -> None:
        """The mails sent now, by the recorder that has just committed the gate (or its
        reminder), before their workflow starts: a person hears of a gate in the time of one
        SMTP exchange rather than after a workflow's start and first task (issue 31). What
        fails, or is not sent within FIRST_ATTEMPT_WITHIN_SECONDS (the run's workflow task
        waits for it), is left to the workflow; a mail cut short after the server took it
        goes again from there, with the same link, as after a crash."""
        try:
            await asyncio.wait_for(self._send(arg), FIRST_ATTEMPT_WITHIN_SECONDS)
        except Exception as error:  # noqa: BLE001 - the workflow's attempts send it
            log.info("first attempt of decision mail %s left to its workflow: %r",
                     arg.request_id, error)

    async def _send(self, arg: DecisionMailInput) -> DecisionMailResult:
        s, sent = self._settings, 0
        async with self._pool.acquire() as conn:
            gate = await gates_repo.get_gate(conn, arg.request_id)
            if gate is None or gate.status != "pending":
                return DecisionMailResult(sent=0)  # decided already: nothing to ask
            now = datetime.now(UTC)
            expires_at = min(gate.expires_at or now + s.link_ttl, now + s.link_ttl)
            for user, email in await mail_repo.deciders_with_email(conn, gate.id):
                link = await mail_repo.upsert_link(conn, link_id=uuid.uuid4(),
                                                   request_id=gate.id, user=user, email=email,
                                                   expires_at=expires_at)
                if (link.sent_at is not None if not arg.reminder
                        else link.used_at is not None or link.reminded >= arg.reminder):
                    continue
                url = f"{s.link_base}/decide-link/{sign_link(s.link_secret, link.id)}"
                subject = f"{'Reminder: d' if arg.reminder else 'D'}ecision needed: {gate.title}"
                await asyncio.to_thread(send_mail, s.smtp_url, sender=s.sender, to=link.email,
                                        subject=subject,
                                        text=_mail_text(gate, user, url, link.expires_at))
                await mail_repo.mark_sent(conn, link.id)
                if arg.reminder:
                    await mail_repo.mark_reminded(conn, link.id, arg.reminder)
                sent += 1
        return DecisionMailResult(sent=sent)


def _mail_text(gate: GateRow, user: str, url: str, expires_at: datetime) -> str:
    options = "\n".join(f"  - {o.value}: {o.label}" for o in gate.options)
    return (f"Hello {user},\n\na run waits for your decision.\n\n{gate.title}\n\n"
            f"{gate.description}\n\nOptions:\n{options}\n\n"
            f"Open this link to see the request and decide it (once; it expires "
            f"{expires_at:%Y-%m-%d %H:%M} UTC):\n{url}\n")
