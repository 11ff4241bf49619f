"""A gate's Slack message and its thread replies are posted once though the worker dies between
Slack taking a post and the row recording it: the worker's database connection is cut at that
moment (the stand-in's `after_taking`, before its answer leaves), as a `kill -9` would cut it,
and the retry finds the post in Slack by its metadata instead of posting it again."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from tests.integration.test_slack import (
    CHANNEL,
    Stack,
    auth,
    pending,
    slack_stack,
    start_validation,
)
from tests.slack_client import buttons
from tests.slack_stub import TOKEN, Message, SlackStub
from waystation.activities.slack.channel import SlackActivities, SlackSyncInput
from waystation.activities.slack.web_api import SlackConfig
from waystation.persistence.db import create_pool

# The channel the test's own sender posts to (the worker's posts go to CHANNEL).
ONCE = "CONCE"
CUT = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)


@pytest_asyncio.fixture
async def slack(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[Stack]:
    async with slack_stack(migrated_url, dev_env, pool, task_queue) as stack:
        yield stack


@pytest_asyncio.fixture
async def own_pool(migrated_url: str) -> AsyncIterator[asyncpg.Pool]:
    """One connection: the one a sender works on, whose server process the test can end."""
    pool = await create_pool(migrated_url, min_size=1, max_size=1)
    yield pool
    await pool.close()


async def cut_after(stub: SlackStub, pool: asyncpg.Pool, victim: asyncpg.Pool, *,
                    reply: bool) -> None:
    """Once Slack has taken the next post to ONCE (a thread reply, or not), end the sender's
    database connection (`victim`'s only one) before the answer reaches it."""
    loop = asyncio.get_running_loop()
    async with victim.acquire() as conn:
        pid = conn.get_server_pid()

    def after_taking(method: str, body: dict[str, Any]) -> None:
        if method != "chat.postMessage" or body.get("channel") != ONCE \
                or bool(body.get("thread_ts")) != reply:
            return
        stub.after_taking = None
        ended = asyncio.run_coroutine_threadsafe(
            pool.fetchval("SELECT pg_terminate_backend($1, 5000)", pid), loop)
        assert ended.result(10)
    stub.after_taking = after_taking


async def row_of(pool: asyncpg.Pool, request_id: str) -> asyncpg.Record:
    async with pool.acquire() as conn:
        return await conn.fetchrow("SELECT * FROM slack_messages WHERE request_id = $1 "
                                   "AND audience = $2", uuid.UUID(request_id), ONCE)


def in_once(stub: SlackStub, where: Callable[[Message], bool]) -> list[Message]:
    return [m for m in stub.messages.values() if m.channel == ONCE and where(m)]


async def test_a_post_and_a_reply_whose_answers_were_lost_are_not_posted_again(
        slack: Stack, pool: asyncpg.Pool, own_pool: asyncpg.Pool):
    http, stub = slack.http, slack.stub
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    run_id = await start_validation(http, alice)
    gate = await pending(http, run_id, alice)
    await slack.message_for(gate["request_id"])  # the worker's own, in CHANNEL: done
    sender = SlackActivities(own_pool, SlackConfig(
        bot_token=TOKEN, api_url=stub.url, channel=CHANNEL,
        channels={"kind:validation": ONCE}))
    sync = SlackSyncInput(run_id=uuid.UUID(run_id))

    # The post: Slack takes it, the sender dies before recording its ts.
    await cut_after(stub, pool, own_pool, reply=False)
    with pytest.raises(CUT):
        await sender.sync(sync)
    posted = in_once(stub, lambda m: m.thread_ts is None)
    assert len(posted) == 1
    lost = await row_of(pool, gate["request_id"])
    assert lost["ts"] is None and lost["post_started_at"] is not None
    # The retry finds it by its metadata, records it, and brings it up to date: no second post.
    again = await sender.sync(sync)
    assert (again.posted, again.adopted, again.updated) == (0, 1, 1)
    assert in_once(stub, lambda m: m.thread_ts is None) == posted
    found = await row_of(pool, gate["request_id"])
    assert found["ts"] == posted[0].ts and found["shown"] is not None
    assert buttons(posted[0]) and ("conversations.history", 200) in stub.calls

    # A reminder: the same, in the message's thread.
    async with pool.acquire() as conn:
        await conn.execute("UPDATE hitl_requests SET reminders_sent = 1 WHERE id = $1",
                           uuid.UUID(gate["request_id"]))
    await cut_after(stub, pool, own_pool, reply=True)
    with pytest.raises(CUT):
        await sender.sync(sync)
    replies = in_once(stub, lambda m: m.thread_ts == posted[0].ts)
    assert [r.text.split(":")[0] for r in replies] == ["Reminder 1"]
    lost = await row_of(pool, gate["request_id"])
    assert lost["reminders"] == 0 and lost["reply_started_at"] is not None
    again = await sender.sync(sync)
    assert (again.replies, again.adopted) == (0, 1)
    assert in_once(stub, lambda m: m.thread_ts == posted[0].ts) == replies
    found = await row_of(pool, gate["request_id"])
    assert found["reminders"] == 1 and found["reply_started_at"] is None
    # Nothing is left to do, and nothing more is read.
    reads = len([c for c in stub.calls if c[0].startswith("conversations.")])
    done = await sender.sync(sync)
    assert (done.posted, done.updated, done.replies, done.adopted) == (0, 0, 0, 0)
    assert len([c for c in stub.calls if c[0].startswith("conversations.")]) == reads
    await http.post(f"/runs/{run_id}/cancel", headers=auth(alice))


async def test_a_lost_post_is_posted_again_where_the_app_may_not_read(
        slack: Stack, pool: asyncpg.Pool, own_pool: asyncpg.Pool):
    """Without the history scopes (an app installed before they were added) the post cannot
    be looked for: shown twice rather than lost."""
    http, stub = slack.http, slack.stub
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    run_id = await start_validation(http, alice)
    gate = await pending(http, run_id, alice)
    await slack.message_for(gate["request_id"])
    sender = SlackActivities(own_pool, SlackConfig(
        bot_token=TOKEN, api_url=stub.url, channel=CHANNEL,
        channels={"kind:validation": ONCE}))
    stub.scopes.discard("channels:history")
    await cut_after(stub, pool, own_pool, reply=False)
    with pytest.raises(CUT):
        await sender.sync(SlackSyncInput(run_id=uuid.UUID(run_id)))
    again = await sender.sync(SlackSyncInput(run_id=uuid.UUID(run_id)))
    assert (again.posted, again.adopted) == (1, 0)
    assert len(in_once(stub, lambda m: m.thread_ts is None)) == 2
    assert ("conversations.history", 200) in stub.calls  # answered missing_scope
    found = await row_of(pool, gate["request_id"])
    assert found["ts"] is not None
    await http.post(f"/runs/{run_id}/cancel", headers=auth(alice))
