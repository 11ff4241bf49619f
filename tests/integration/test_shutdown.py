"""SIGTERM with open streams: `waystation api` exits promptly instead of waiting for its SSE
clients (run streams and the decision inbox), and they resume on the next API with
Last-Event-ID, losing nothing."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import httpx
import pytest

from tests.api_process import ApiProcess
from tests.fault_helpers import StreamFollower, auth, free_port
from tests.helpers import eventually, new_validation_run
from tests.sse_client import sse_events
from waystation.persistence.events import append_events
from waystation.persistence.writes import EventWrite
from waystation.settings import Settings
from waystation.testing import InProcessApi

STREAMS = 20


async def append(pool: asyncpg.Pool, run_id: uuid.UUID, first: int, count: int,
                 type_: str = "task.in_progress") -> None:
    async with pool.acquire() as conn:
        await append_events(conn, run_id, [EventWrite(event_key=f"e{i}", type=type_)
                                           for i in range(first, first + count)])


async def follow_inbox(base_url: str, opened: asyncio.Event) -> None:
    """The decision inbox's stream, read until the server ends it."""
    async with httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(10, read=60)) as http:
        async with http.stream("GET", "/decisions/stream", headers=auth()) as response:
            assert response.status_code == 200
            async for event in sse_events(response):
                if event.event == "decision.snapshot_done":
                    opened.set()


@pytest.mark.slow
async def test_sigterm_with_open_streams_exits_fast_and_clients_lose_nothing(
        pool, migrated_url, tmp_path):
    run = await new_validation_run(pool)
    await append(pool, run.run_id, 0, 5)
    # Nothing here needs Temporal: the API connects to it lazily.
    api = ApiProcess(migrated_url, f"127.0.0.1:{free_port()}", tmp_path,
                     WAYSTATION_SSE_HEARTBEAT_SECONDS="30")
    api.start()
    followers = [StreamFollower(api.url, run.run_id) for _ in range(STREAMS)]
    following = [asyncio.create_task(f.run()) for f in followers]
    inbox_open = asyncio.Event()
    inbox = asyncio.create_task(follow_inbox(api.url, inbox_open))
    try:
        await eventually(lambda: asyncio.sleep(0, all(len(f.seqs) == 5 for f in followers)))
        await asyncio.wait_for(inbox_open.wait(), 10)
        exit_seconds = await asyncio.to_thread(api.terminate)
        await asyncio.wait_for(inbox, 5)  # the inbox stream ended too, cleanly
        assert exit_seconds < 2, f"{exit_seconds:.2f}s to exit:\n{api.logs()}"
        assert "Waiting for connections to close" not in api.logs()

        await append(pool, run.run_id, 5, 5)  # while no API runs
        await asyncio.to_thread(api.start)
        await append(pool, run.run_id, 10, 5)
        await append(pool, run.run_id, 15, 1, type_="run.completed")
        await asyncio.wait_for(asyncio.gather(*following), timeout=30)
    finally:
        for task in (*following, inbox):
            task.cancel()
        api.stop()
    for follower in followers:
        follower.assert_each_event_once(list(range(1, 17)))
        assert follower.connections == 2, (follower.connections, follower.errors)
    print(f"SIGTERM with {STREAMS} open streams: exited in {exit_seconds:.2f}s")


async def test_an_in_process_api_stopped_leaves_no_lifespan_suspended(migrated_url, dev_env):
    """`InProcessApi.stop` ends the app's lifespan on its own loop (its pool closed): a
    lifespan left suspended is finalized by some thread's garbage collection later, which
    crashed CPython 3.11 on a workflow worker's thread (docs/tests.md)."""
    api = InProcessApi(Settings(
        database_url=migrated_url, jwt_secret="shutdown-test-secret-0123456789-abcdef",
        temporal_address=dev_env.client.service_client.config.target_host))
    await api.start()
    assert api.app is not None
    pool = api.app.state.pool
    await api.stop()
    closed = pool.is_closing()
    lifespans = [repr(t) for t in asyncio.all_tasks() if "LifespanOn.main" in repr(t.get_coro())]
    assert closed and lifespans == []
