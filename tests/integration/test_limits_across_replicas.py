"""Issue 38: two API processes on one database give a user the limits one gives (they are
counted in Postgres): a stream closed on one frees its slot on the other, writes are counted
once for both, and a replica killed outright (kill -9) frees its slots once their leases
lapse."""

from __future__ import annotations

import contextlib
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api_process import ApiProcess
from tests.fault_helpers import auth
from waystation.testing import eventually, free_port

LEASE_SECONDS = 2


@pytest.fixture
def replicas(migrated_url: str, tmp_path: Path) -> Iterator[tuple[ApiProcess, ApiProcess]]:
    temporal = f"127.0.0.1:{free_port()}"  # not needed: the inbox stream and refused writes
    pair = tuple(ApiProcess(migrated_url, temporal, tmp_path / name,
                            WAYSTATION_MAX_STREAMS_PER_USER="2",
                            WAYSTATION_WRITES_PER_MINUTE="3",
                            WAYSTATION_STREAM_LEASE_SECONDS=str(LEASE_SECONDS))
                 for name in ("a", "b"))
    for api in pair:
        api.log_dir.mkdir()
        api.start()
    try:
        yield pair  # type: ignore[misc]
    finally:
        for api in pair:
            api.stop()


async def open_inbox(api: ApiProcess, user: str,
                     stack: contextlib.AsyncExitStack) -> int:
    """The status of `GET /decisions/stream` on `api`, held open until the stack closes."""
    http = await stack.enter_async_context(httpx.AsyncClient(base_url=api.url, timeout=10))
    response = await stack.enter_async_context(
        http.stream("GET", "/decisions/stream", headers=auth(user)))
    if response.status_code == 200:
        lines = response.aiter_lines()
        stack.push_async_callback(lines.aclose)
        await anext(lines)
    else:
        await response.aread()
    return response.status_code


@pytest.mark.slow  # two API processes start (about 15 s each on a loaded machine)
async def test_two_replicas_give_a_user_the_limits_of_one(replicas):
    a, b = replicas
    alice, bob = (f"{name}-{uuid.uuid4().hex[:6]}" for name in ("alice", "bob"))
    async with contextlib.AsyncExitStack() as on_a, contextlib.AsyncExitStack() as on_b:
        assert await open_inbox(a, alice, on_a) == 200
        assert await open_inbox(b, alice, on_b) == 200
        assert await open_inbox(a, alice, on_a) == 429
        assert await open_inbox(b, alice, on_b) == 429
        await on_a.aclose()  # closed on a: b has a slot again, at once
        assert await open_inbox(b, alice, on_b) == 200
        assert await open_inbox(a, alice, on_a) == 429

    async with httpx.AsyncClient(timeout=10) as http:
        answers = [(await http.post(f"{api.url}/runs", headers=auth(alice), content=b"x")
                    ).status_code for api in (a, b, a, b)]
    assert answers == [415, 415, 415, 429]  # three writes a minute, wherever they land

    # b is killed outright while it holds both of bob's slots: they lapse with their leases.
    async with contextlib.AsyncExitStack() as on_a, contextlib.AsyncExitStack() as on_b:
        assert await open_inbox(b, bob, on_b) == 200
        assert await open_inbox(b, bob, on_b) == 200
        assert b.proc is not None
        b.proc.send_signal(signal.SIGKILL)  # its streams never say goodbye
        b.proc.wait()
        killed = time.monotonic()
        assert await open_inbox(a, bob, on_a) == 429

        async def lapsed() -> bool:
            async with contextlib.AsyncExitStack() as again:
                return await open_inbox(a, bob, again) == 200
        await eventually(lapsed, timeout=LEASE_SECONDS + 5, interval=0.2)
        assert time.monotonic() - killed >= LEASE_SECONDS - 0.5
        with contextlib.suppress(httpx.HTTPError):
            await on_b.aclose()
