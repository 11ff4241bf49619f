"""A2A by the letter (issue 44): what a strict client or the protocol's own material trips
over, each through the `a2a-sdk` client, or raw JSON-RPC where the client hides it, on the real
stack (uvicorn, the dev server, Postgres, a worker with the offline backend).

The API here keeps the production heartbeat's order of magnitude (30 s): a call that waits
for a status must be woken by the run's own status notice, not by a heartbeat."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio
from a2a.client.client import Client
from a2a.types.a2a_pb2 import CancelTaskRequest, SendMessageRequest

from tests.agent_helpers import SEARCH
from tests.helpers import live_api
from tests.integration.test_a2a import INPUT_REQUIRED, SECRET, a2a, message, sent_task
from waystation.testing import InProcessApi

SLOW_HEARTBEAT = 30.0
# "Within a second of its task needing input" (issue 44), twenty times in a row.
PROMPT, TIMES = 1.0, 20


@pytest_asyncio.fixture
async def api(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[InProcessApi]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        sse_heartbeat_seconds=SLOW_HEARTBEAT) as api:
        yield api


@pytest_asyncio.fixture
def user() -> str:
    return f"ada-{uuid.uuid4().hex[:6]}"


async def _needed_input_at(pool: asyncpg.Pool, task_id: str) -> float:
    """When the run's row last changed (its pause at input-required), as a Unix time."""
    async with pool.acquire() as conn:
        at = await conn.fetchval("SELECT updated_at FROM runs WHERE id = $1",
                                 uuid.UUID(task_id))
    return at.timestamp()


async def _cancel(client: Client, task_ids: list[str]) -> None:
    for task_id in task_ids:
        await client.cancel_task(CancelTaskRequest(id=task_id))


async def test_a_blocking_send_message_answers_within_a_second_of_needing_input(
        api, pool, user):
    lags: list[float] = []
    started: list[str] = []
    async with a2a(api, user) as client:
        for _ in range(TIMES):
            task = await sent_task(client, message(text=SEARCH))  # a new messageId each time
            answered = time.time()
            started.append(task.id)
            assert task.status.state == INPUT_REQUIRED
            lags.append(answered - await _needed_input_at(pool, task.id))
        await _cancel(client, started)
    assert max(lags) < PROMPT, [round(lag, 3) for lag in lags]


async def test_a_streaming_send_message_ends_within_a_second_of_needing_input(api, pool, user):
    lags: list[float] = []
    started: list[str] = []
    async with a2a(api, user, streaming=True) as client:
        for _ in range(TIMES):
            request: SendMessageRequest = message(text=SEARCH)
            responses = [r async for r in client.send_message(request)]
            ended = time.time()
            task_id = responses[0].task.id
            started.append(task_id)
            assert responses[-1].status_update.status.state == INPUT_REQUIRED
            lags.append(ended - await _needed_input_at(pool, task_id))
        await _cancel(client, started)
    assert max(lags) < PROMPT, [round(lag, 3) for lag in lags]
