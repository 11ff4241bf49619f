"""Per-user caps: open streams and writes per minute, 429 with Retry-After, nothing written."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import httpx

from tests.console_helpers import login_path
from tests.fault_helpers import api_settings, auth
from tests.helpers import IDEA
from waystation.api.auth import SESSION_COOKIE
from waystation.persistence import user_limits
from waystation.testing import InProcessApi, eventually, free_port


async def test_write_bucket_refills_continuously(pool):
    """The shared bucket (migration 067): `per_minute` writes at once, then one a second."""
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    async with pool.acquire() as conn:
        assert [await user_limits.take_write(conn, alice, 60) for _ in range(60)] == [0.0] * 60
        assert 0.9 < await user_limits.take_write(conn, alice, 60) <= 1.0  # one a second
        assert await user_limits.take_write(conn, bob, 60) == 0.0  # bob has his own
        await asyncio.sleep(1.05)
        assert await user_limits.take_write(conn, alice, 60) == 0.0


async def _open_stream(http: httpx.AsyncClient, user: str,
                       stack: contextlib.AsyncExitStack) -> httpx.Response:
    response = await stack.enter_async_context(
        http.stream("GET", "/decisions/stream", headers=auth(user)))
    if response.status_code == 200:  # held open until the stack closes
        lines = response.aiter_lines()
        # Dropping the iterator would close the response when it is collected.
        stack.push_async_callback(lines.aclose)
        await anext(lines)
    else:
        await response.aread()
    return response


@contextlib.asynccontextmanager
async def limited_api(migrated_url: str, **limits: int) -> AsyncIterator[InProcessApi]:
    """An API serving with these per-user limits."""
    api = InProcessApi(api_settings(migrated_url, f"127.0.0.1:{free_port()}", "tq-limits",
                                    **limits))
    await api.start()
    try:
        yield api
    finally:
        await api.stop()


async def test_stream_cap_and_write_rate_answer_429_with_retry_after(migrated_url, pool):
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    async with limited_api(migrated_url, max_streams_per_user=2, writes_per_minute=3) as api:
        async with httpx.AsyncClient(base_url=api.url, timeout=10) as http:
            async with contextlib.AsyncExitStack() as streams:
                first = [await _open_stream(http, alice, streams) for _ in range(2)]
                assert [r.status_code for r in first] == [200, 200]
                refused = await _open_stream(http, alice, streams)
                assert refused.status_code == 429
                assert int(refused.headers["Retry-After"]) > 0
                assert refused.json()["error"] == {
                    "code": "rate_limited", "message": "at most 2 open streams per user"}
                assert (await _open_stream(http, bob, streams)).status_code == 200
            # Closed streams free their places (the server notices the disconnect).
            async def reopened() -> bool:
                async with contextlib.AsyncExitStack() as again:
                    return (await _open_stream(http, alice, again)).status_code == 200
            await eventually(reopened, timeout=5, interval=0.1)

            for _ in range(3):  # within the rate: passed on (and refused as not JSON)
                write = await http.post("/runs", headers=auth(alice), content=b"x")
                assert write.status_code == 415, write.text
            start = await http.post("/runs", headers=auth(alice), json={
                "kind": "validation", "input": {"entrepreneur_input": IDEA}})
            assert start.status_code == 429, start.text
            assert 1 <= int(start.headers["Retry-After"]) <= 20
            assert start.json()["error"]["code"] == "rate_limited"
            assert (await http.get("/runs", headers=auth(alice))).status_code == 200  # reads
            unauthenticated = await http.post("/runs", json={})
            assert unauthenticated.status_code == 401
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM runs WHERE owner = $1", alice) == 0


async def test_a_console_session_is_held_to_the_same_caps(migrated_url, pool):
    """A console user signs in by cookie, not a bearer token: their streams and writes count
    too (the cookie is the caller until the route checks it)."""
    user = f"carol-{uuid.uuid4().hex[:6]}"
    async with limited_api(migrated_url, max_streams_per_user=1, writes_per_minute=2) as api:
        async with httpx.AsyncClient(base_url=api.url, timeout=10) as http:
            signed_in = await http.get(await login_path(pool, user))
            assert signed_in.status_code == 303 and SESSION_COOKIE in http.cookies
            async with contextlib.AsyncExitStack() as streams:
                held = await streams.enter_async_context(http.stream("GET", "/decisions/stream"))
                assert held.status_code == 200
                lines = held.aiter_lines()
                streams.push_async_callback(lines.aclose)
                await anext(lines)
                second = await http.get("/decisions/stream")
                assert second.status_code == 429, second.text
            # Within the rate the routes answer (403: no CSRF token); then 429 before them.
            answers = [(await http.post("/runs", json={})).status_code for _ in range(3)]
            assert answers == [403, 403, 429]


async def test_a_users_api_keys_share_the_users_caps(migrated_url, pool):
    """Keys (and sessions, provider tokens) are counted as themselves only until they are
    checked; then as their user, so minting keys does not multiply a user's caps (issue 25)."""
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    async with limited_api(migrated_url, max_streams_per_user=2, writes_per_minute=4) as api:
        async with httpx.AsyncClient(base_url=api.url, timeout=10) as http:
            keys = []
            for name in ("one", "two"):  # two of alice's four writes
                made = await http.post("/api-keys", headers=auth(alice), json={"name": name})
                assert made.status_code == 201, made.text
                keys.append({"Authorization": f"Bearer {made.json()['key']}"})
            async with contextlib.AsyncExitStack() as streams:
                held = await _open_stream(http, alice, streams)
                by_key = await streams.enter_async_context(
                    http.stream("GET", "/decisions/stream", headers=keys[0]))
                assert (held.status_code, by_key.status_code) == (200, 200)
                lines = by_key.aiter_lines()
                streams.push_async_callback(lines.aclose)
                await anext(lines)
                third = await http.get("/decisions/stream", headers=keys[1])
                assert third.status_code == 429, third.text
                assert third.json()["error"] == {
                    "code": "rate_limited", "message": "at most 2 open streams per user"}
            stop = f"/api-keys/{uuid.uuid4()}"
            answers = [(await http.delete(stop, headers=key)).status_code
                       for key in (keys[0], keys[1], keys[0])]
            assert 429 not in answers[:2] and answers[2] == 429, answers


async def test_a_group_key_counts_toward_its_maker(migrated_url, pool):
    """A group key acts as a member of its own (`apikey:<id>`) but gets no limits beyond its
    maker's: its writes are the maker's writes (issue 38)."""
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    async with limited_api(migrated_url, writes_per_minute=4) as api:
        async with httpx.AsyncClient(base_url=api.url, timeout=10) as http:
            group = await http.post("/groups", headers=auth(alice), json={"name": "Ops"})
            assert group.status_code == 201, group.text
            made = await http.post("/api-keys", headers=auth(alice), json={
                "name": "ci", "group_id": group.json()["group_id"], "role": "member"})
            assert made.status_code == 201, made.text
            key = {"Authorization": f"Bearer {made.json()['key']}"}
            assert made.json()["acts_as"].startswith("apikey:")
            stop = f"/api-keys/{uuid.uuid4()}"
            # alice has two of her four writes left, whoever makes them.
            answers = [(await http.delete(stop, headers=headers)).status_code
                       for headers in (key, auth(alice), key)]
            assert 429 not in answers[:2] and answers[2] == 429, answers
