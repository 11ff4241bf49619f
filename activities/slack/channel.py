"""Slack as a notification channel: every message showing a run's requests brought up to date.

One operation serves every occasion (a gate opened, a vote, a decision anywhere, an expiry, a
supersede, a run's end, a reminder): `sync` renders each request as it stands now, posts the
message to each audience that has none (a channel, each linked decider's DM), updates with
`chat.update` each message that shows something else, and answers reminders and escalations in
the message's thread. Each step is recorded as it is made (slack_messages), so a retry does
only what is left, and one sender at a time works on a run (an advisory lock), so no message
is posted twice by two of them. A post whose answer was lost (a worker killed, an attempt timed
out, between Slack taking it and its row recording it) is found in Slack by its metadata and
adopted, not posted again (activities/slack/posted.py).

Started as mail and webhooks are (activities/channels.py): the recorder, having committed the
write, makes one attempt at once, and if that does not finish, starts a `SlackNotification`
workflow (workflows/slack_notification.py) whose retries, with backoff over hours, bring the
messages up to date across a Slack outage; a 429's `Retry-After` is the delay before the next.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from datetime import timedelta
from typing import Literal
from uuid import UUID

import asyncpg
from pydantic import BaseModel
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from waystation.activities.slack.blocks import SlackMessage, gate_message, gone_message, notice_text
from waystation.activities.slack.posted import PostKey, posted_since
from waystation.activities.slack.web_api import (
    SlackConfig,
    SlackError,
    SlackRateLimited,
    SlackRefused,
    SlackWebApi,
)
from waystation.activities.start_once import start_once
from waystation.contracts.writes import ReadModelWrite
from waystation.persistence import gates as gates_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence import slack as slack_repo
from waystation.persistence.models import GateRow, RunRow
from waystation.persistence.slack import SlackMessageRow

log = logging.getLogger(__name__)
SLACK_WORKFLOW = "SlackNotification"
# How long the recorder waits for its attempt before leaving the rest to the workflow.
FIRST_ATTEMPT_WITHIN_SECONDS = 2.0
ERROR_TEXT_LIMIT = 500
DM_PREFIX = "dm:"


class SlackSyncInput(BaseModel):
    run_id: UUID


class SlackSyncResult(BaseModel):
    posted: int = 0
    updated: int = 0
    replies: int = 0
    # Posts and replies an earlier attempt made without recording them, found in Slack.
    adopted: int = 0


def slack_may_change(write: ReadModelWrite) -> bool:
    """Whether `write` may change what a message shows: anything touching a gate, or the run's
    end (which supersedes its pending requests)."""
    return bool(write.open_gate or write.close_gate or write.votes or write.delegation
                or write.gate_notice or write.ends_run)


def sync_key(write: ReadModelWrite) -> str:
    """The same write (a retried recorder, a replay) gives the same workflow id."""
    parts = write.model_dump_json(include={"open_gate", "close_gate", "votes", "delegation",
                                           "gate_notice", "run"})
    return hashlib.sha256(parts.encode()).hexdigest()[:24]


async def start_slack_sync(client: Client, task_queue: str, run_id: UUID, key: str) -> None:
    await start_once(client, SLACK_WORKFLOW, SlackSyncInput(run_id=run_id),
                     workflow_id=f"slack-{run_id}-{key}", task_queue=task_queue,
                     summary=f"bring the Slack messages of run {run_id} up to date")


class SlackActivities:
    def __init__(self, pool: asyncpg.Pool, config: SlackConfig) -> None:
        self._pool = pool
        self._config = config
        self._api = SlackWebApi(config)
        # First attempts that outlived the recorder's wait, referenced until they end.
        self._finishing: set[asyncio.Future[SlackSyncResult]] = set()

    @activity.defn(name="sync_slack_messages")
    async def sync(self, arg: SlackSyncInput) -> SlackSyncResult:
        """Bring the run's messages up to date; raises (so Temporal retries) while Slack
        does not take what is left, after a 429 no sooner than its Retry-After."""
        try:
            return await self._sync(arg.run_id)
        except SlackRateLimited as limited:
            raise ApplicationError(str(limited), type="SlackRateLimited",
                                   next_retry_delay=timedelta(seconds=limited.retry_after)
                                   ) from limited
        except SlackError as failed:
            raise ApplicationError(str(failed), type="SlackSendFailed") from failed

    async def first_attempt(self, run_id: UUID) -> bool:
        """One attempt now, by the recorder that has just committed the write: whether it
        left nothing to do. The recorder waits FIRST_ATTEMPT_WITHIN_SECONDS for it (the run's
        workflow task waits for the recorder); what it did not finish is the workflow's. An
        attempt still running then is left to finish, not cut short: a post cut short may
        have reached Slack unrecorded, and the next attempt would have to look for it there.
        It holds the run's lock, so the workflow's attempt starts from what it recorded."""
        attempt = asyncio.ensure_future(self._sync(run_id))
        done, _ = await asyncio.wait({attempt}, timeout=FIRST_ATTEMPT_WITHIN_SECONDS)
        if not done:
            self._finishing.add(attempt)
            attempt.add_done_callback(self._finished)
            log.info("first Slack attempt for run %s is slow: its workflow takes over", run_id)
            return False
        if (error := attempt.exception()) is not None:
            log.info("first Slack attempt for run %s left to its workflow: %r", run_id, error)
            return False
        return True

    def _finished(self, attempt: asyncio.Future[SlackSyncResult]) -> None:
        self._finishing.discard(attempt)
        if not attempt.cancelled() and attempt.exception() is not None:
            log.info("slow first Slack attempt failed: %r", attempt.exception())

    async def _sync(self, run_id: UUID) -> SlackSyncResult:
        result = SlackSyncResult()
        failed: SlackError | None = None
        async with self._pool.acquire() as conn, slack_repo.run_locked(conn, run_id):
            run = await runs_repo.get_run(conn, run_id)
            if run is None:  # erased (or deleted): its messages keep nothing of it
                await self._empty(conn, run_id, result)
                return result
            gates = await slack_repo.gates_to_show(conn, run_id)
            audits = await gates_repo.list_audits(conn, [g.id for g in gates]) if gates else {}
            for gate in gates:
                message = gate_message(gate, run, audits.get(gate.id), self._config)
                for row in await self._rows(conn, gate, run):
                    try:
                        await self._bring_up_to_date(conn, row, gate, message, result)
                    except SlackRateLimited:
                        raise  # nothing more goes before Retry-After
                    except SlackError as error:
                        await slack_repo.message_failed(conn, gate.id, row.audience,
                                                        str(error)[:ERROR_TEXT_LIMIT])
                        if not isinstance(error, SlackRefused):
                            failed = failed or error
        if failed is not None:
            raise failed
        return result

    async def _empty(self, conn: asyncpg.Connection, run_id: UUID,
                     result: SlackSyncResult) -> None:
        """Every message of an erased run emptied of what it showed, a post an attempt made
        without recording it included."""
        gone = gone_message()
        for row in await slack_repo.messages_of_run(conn, run_id):
            if (ts := await self._lost_post(row)) is not None:
                row = row.model_copy(update={"ts": ts, "shown": None})
                result.adopted += 1
            if row.ts is not None and row.shown != gone.shown:
                await self._api.call("chat.update", channel=row.channel, ts=row.ts,
                                     text=gone.text, blocks=gone.blocks)
                await slack_repo.message_sent(conn, row.model_copy(update={"shown": gone.shown}))
                result.updated += 1

    async def _rows(self, conn: asyncpg.Connection, gate: GateRow,
                    run: RunRow) -> list[SlackMessageRow]:
        """The messages of `gate`: those it has, and while it waits, one for each audience
        it should have (an escalation's new deciders get theirs)."""
        rows = {m.audience: m for m in await slack_repo.messages_of(conn, gate.id)}
        if gate.status == "pending":
            for audience in await self._audiences(conn, gate, run):
                if audience not in rows:
                    rows[audience] = await slack_repo.message_row(conn, gate.id, audience)
        return list(rows.values())

    async def _audiences(self, conn: asyncpg.Connection, gate: GateRow, run: RunRow) -> list[str]:
        c = self._config
        keys = [f"project:{run.project_id}" if run.project_id else None,
                f"group:{run.group_id}" if run.group_id else None, f"kind:{run.kind}"]
        channel = next((c.channels[k] for k in keys if k and k in c.channels), c.channel)
        audiences = [channel] if channel else []
        if c.dm_deciders:
            for user in await slack_repo.deciders_of(conn, gate.id):
                audiences += [DM_PREFIX + s for s in await slack_repo.slack_ids_of(conn, user)]
        return audiences

    async def _bring_up_to_date(self, conn: asyncpg.Connection, row: SlackMessageRow,
                                gate: GateRow, message: SlackMessage,
                                result: SlackSyncResult) -> None:
        if row.ts is None:
            row = await self._post(conn, row, gate, message, result)
            if row.ts is None:
                return  # closed before it was ever shown: nothing to tell
        if row.shown != message.shown:
            # chat.update is idempotent by nature (it sets what the message shows): an update
            # whose answer was lost is made again to the same effect, so it needs no intent.
            await self._api.call("chat.update", channel=row.channel, ts=row.ts,
                                 text=message.text, blocks=message.blocks)
            row = row.model_copy(update={"shown": message.shown})
            await slack_repo.message_sent(conn, row)
            result.updated += 1
        if gate.status == "pending":
            await self._replies(conn, row, gate, result)

    async def _post(self, conn: asyncpg.Connection, row: SlackMessageRow, gate: GateRow,
                    message: SlackMessage, result: SlackSyncResult) -> SlackMessageRow:
        """The message posted, or found where an attempt whose answer was lost posted it (then
        recorded as showing nothing yet, so that it is updated to what it should show). A
        request closed meanwhile is posted no more, but a lost post of it is found."""
        if (ts := await self._lost_post(row)) is not None:
            shown: str | None = None
            result.adopted += 1
        elif gate.status != "pending":
            return row
        else:
            row = await slack_repo.post_started(
                conn, row, row.channel or await self._channel_of(row.audience))
            sent = await self._api.call("chat.postMessage", channel=row.channel,
                                        text=message.text, blocks=message.blocks,
                                        unfurl_links=False,
                                        metadata=_key(row, "gate").metadata())
            ts, shown = str(sent["ts"]), message.shown
            result.posted += 1
        # Reminders and an escalation before this message are not replayed in its thread.
        row = row.model_copy(update={
            "ts": ts, "shown": shown, "reminders": gate.reminders_sent,
            "escalated": gate.escalated_at is not None})
        await slack_repo.message_sent(conn, row)
        return row

    async def _lost_post(self, row: SlackMessageRow) -> str | None:
        """The ts of the message an attempt posted without recording it, if Slack shows one
        (only an attempt that recorded its intent, and so its channel, may have)."""
        if row.ts is not None or row.post_started_at is None or row.channel is None:
            return None
        found = await posted_since(self._api, row.channel, row.post_started_at)
        return (found or {}).get(_key(row, "gate"))

    async def _replies(self, conn: asyncpg.Connection, row: SlackMessageRow, gate: GateRow,
                       result: SlackSyncResult) -> None:
        """The thread replies the message lacks (reminders, then the escalation), each made
        once: an attempt that replied but did not count it left its intent, and the thread
        then shows what it made."""
        due = [(_key(row, "reminder", n), notice_text(gate, "reminded", n))
               for n in range(row.reminders + 1, gate.reminders_sent + 1)]
        if gate.escalated_at is not None and not row.escalated:
            due.append((_key(row, "escalation"), notice_text(gate, "escalated", 0)))
        if not due:
            return
        found: dict[PostKey, str] = {}
        if row.reply_started_at is None:
            row = await slack_repo.reply_started(conn, row)
        elif row.channel is not None and row.ts is not None:
            found = await posted_since(self._api, row.channel, row.reply_started_at,
                                       thread_ts=row.ts) or {}
        for key, text in due:
            if key in found:
                result.adopted += 1
            else:
                await self._api.call("chat.postMessage", channel=row.channel, thread_ts=row.ts,
                                     text=text, metadata=key.metadata())
                result.replies += 1
            counted: dict[str, object] = {"reminders": key.number} if key.what == "reminder" \
                else {"escalated": True}
            row = row.model_copy(update=counted | (
                {"reply_started_at": None} if key == due[-1][0] else {}))
            await slack_repo.message_sent(conn, row)

    async def _channel_of(self, audience: str) -> str:
        if not audience.startswith(DM_PREFIX):
            return audience
        opened = await self._api.call("conversations.open",
                                      users=audience.removeprefix(DM_PREFIX))
        return str(opened["channel"]["id"])


def _key(row: SlackMessageRow, what: Literal["gate", "reminder", "escalation"],
         number: int = 0) -> PostKey:
    """What a post for `row` is, as its metadata names it."""
    return PostKey(request_id=str(row.request_id), audience=row.audience, what=what,
                   number=number)
