"""Repository functions for Slack: linked users, link codes, the messages showing each
request, and the signatures of requests Slack sent (migration 077)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from uuid import UUID

import asyncpg

from waystation.persistence.models import GateRow, Row
from waystation.persistence.queries import sql


class SlackUser(Row):
    user_name: str
    linked_at: datetime


class SlackMessageRow(Row):
    request_id: UUID
    audience: str  # a channel id, or `dm:<user>`
    channel: str | None
    ts: str | None
    shown: str | None
    reminders: int
    escalated: bool
    attempts: int
    last_error: str | None
    updated_at: datetime
    # The intents committed before a post and before thread replies (migration 090).
    post_started_at: datetime | None
    reply_started_at: datetime | None


async def slack_user_of(conn: asyncpg.Connection, team_id: str,
                        slack_user: str) -> SlackUser | None:
    record = await conn.fetchrow(sql("slack_user_of"), team_id, slack_user)
    return SlackUser.from_record(record) if record else None


async def slack_ids_of(conn: asyncpg.Connection, user_name: str) -> list[str]:
    return [r["slack_user"] for r in await conn.fetch(sql("slack_ids_of"), user_name)]


async def add_link_code(conn: asyncpg.Connection, code_hash: str, team_id: str,
                        slack_user: str, expires_at: datetime) -> None:
    await conn.execute(sql("insert_slack_link_code"), code_hash, team_id, slack_user,
                       expires_at)


async def claim_link_code(conn: asyncpg.Connection, code_hash: str) -> tuple[str, str] | None:
    """The (team, Slack user) of a fresh, unused code, which is spent by this; else None."""
    record = await conn.fetchrow(sql("claim_slack_link_code"), code_hash)
    return (record["team_id"], record["slack_user"]) if record else None


async def link_user(conn: asyncpg.Connection, team_id: str, slack_user: str, user_name: str,
                    api_key_id: UUID | None) -> SlackUser:
    record = await conn.fetchrow(sql("link_slack_user"), team_id, slack_user, user_name,
                                 api_key_id)
    return SlackUser.from_record(record)


async def known_user(conn: asyncpg.Connection, user_name: str) -> bool:
    return bool(await conn.fetchval(sql("known_user"), user_name))


async def first_sight(conn: asyncpg.Connection, signature: str) -> bool:
    """Whether a request with this signature is seen for the first time (and now noted)."""
    return bool(await conn.fetchval(sql("note_slack_request"), signature))


@asynccontextmanager
async def run_locked(conn: asyncpg.Connection, run_id: UUID) -> AsyncIterator[None]:
    """One sender at a time brings a run's messages up to date (two would post one twice).
    A session lock, not a transaction's: each message's send is committed as it is made."""
    await conn.execute(sql("lock_run_slack_messages"), run_id)
    try:
        yield
    finally:
        await conn.execute(sql("unlock_run_slack_messages"), run_id)


async def gates_to_show(conn: asyncpg.Connection, run_id: UUID) -> list[GateRow]:
    return [GateRow.from_record(r) for r in await conn.fetch(sql("run_gates_for_slack"), run_id)]


async def messages_of(conn: asyncpg.Connection, request_id: UUID) -> list[SlackMessageRow]:
    return [SlackMessageRow.from_record(r)
            for r in await conn.fetch(sql("slack_messages_of"), request_id)]


async def messages_of_run(conn: asyncpg.Connection, run_id: UUID) -> list[SlackMessageRow]:
    return [SlackMessageRow.from_record(r)
            for r in await conn.fetch(sql("slack_messages_of_run"), run_id)]


async def deciders_of(conn: asyncpg.Connection, request_id: UUID) -> list[str]:
    return [r["user_name"] for r in await conn.fetch(sql("slack_deciders_of"), request_id)]


async def message_row(conn: asyncpg.Connection, request_id: UUID,
                      audience: str) -> SlackMessageRow:
    record = await conn.fetchrow(sql("upsert_slack_message"), request_id, audience)
    return SlackMessageRow.from_record(record)


async def post_started(conn: asyncpg.Connection, row: SlackMessageRow,
                       channel: str) -> SlackMessageRow:
    """The intent to post `row`'s message to `channel`, committed before the post."""
    record = await conn.fetchrow(sql("slack_post_started"), row.request_id, row.audience,
                                 channel)
    return SlackMessageRow.from_record(record)


async def reply_started(conn: asyncpg.Connection, row: SlackMessageRow) -> SlackMessageRow:
    """The intent to reply in `row`'s thread, committed before the first reply."""
    record = await conn.fetchrow(sql("slack_reply_started"), row.request_id, row.audience)
    return SlackMessageRow.from_record(record)


async def message_sent(conn: asyncpg.Connection, row: SlackMessageRow) -> None:
    await conn.execute(sql("slack_message_sent"), row.request_id, row.audience, row.channel,
                       row.ts, row.shown, row.reminders, row.escalated, row.reply_started_at)


async def message_failed(conn: asyncpg.Connection, request_id: UUID, audience: str,
                         error: str) -> None:
    await conn.execute(sql("slack_message_failed"), request_id, audience, error)
