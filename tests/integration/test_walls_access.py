"""Issue 25, "Walls that hold": access ends when membership ends, and credentials do not
outlive the person. A real API server (uvicorn), a worker on the dev server, real Postgres.

Heartbeats are 30 s here, so a stream that closes within 2 s was closed by the access notice,
not by a periodic look."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest_asyncio

from tests.console_helpers import login_path
from tests.helpers import IDEA, eventually, live_api
from tests.sse_client import SseEvent, sse_events
from waystation.api.auth import SESSION_COOKIE, issue_token
from waystation.contracts.decision_links import sign_link

SECRET = "walls-secret-0123456789-0123456789-abcdef"
GATE = "approve_founders_brief"
CLOSE_WITHIN = 2.0


@pytest_asyncio.fixture
async def http(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[httpx.AsyncClient]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        sse_heartbeat_seconds=30.0, console_cookie_secure=False,
                        max_api_keys_per_user=3) as api, \
            httpx.AsyncClient(base_url=api.url, timeout=30) as client:
        yield client


def auth(user: str, role: str = "user") -> dict[str, str]:
    return bearer(issue_token(SECRET, user, role))  # type: ignore[arg-type]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def people() -> dict[str, str]:
    tag = uuid.uuid4().hex[:6]
    return {name: f"{name}-{tag}" for name in ("alice", "bob", "carol")}


async def group_of(http: httpx.AsyncClient, owner: str, **members: str) -> str:
    created = await http.post("/groups", json={"name": "Walls"}, headers=auth(owner))
    assert created.status_code == 201, created.text
    group_id = created.json()["group_id"]
    for user, role in members.items():
        added = await http.post(f"/groups/{group_id}/members", headers=auth(owner),
                                json={"user": user, "role": role})
        assert added.status_code == 201, added.text
    return group_id


async def run_at_gate(http: httpx.AsyncClient, owner: str, group_id: str | None = None) -> str:
    started = await http.post("/runs", headers=auth(owner), json={
        "kind": "validation", "group_id": group_id,
        "input": {"entrepreneur_input": IDEA, "gates": [GATE]}})
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]

    async def waiting() -> bool:
        run = (await http.get(f"/runs/{run_id}", headers=auth(owner))).json()
        return run.get("pending_checkpoint") == GATE
    await eventually(waiting, timeout=60)
    return run_id


class Follower:
    """An open SSE stream read in the background: what it got, and whether it has ended."""

    def __init__(self, http: httpx.AsyncClient, path: str, headers: dict[str, str]) -> None:
        self.events: list[SseEvent] = []
        self.opened = asyncio.Event()
        self.task = asyncio.create_task(self._read(http, path, headers))

    async def _read(self, http: httpx.AsyncClient, path: str, headers: dict[str, str]) -> None:
        async with http.stream("GET", path, headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            self.opened.set()
            async for event in sse_events(response):
                self.events.append(event)

    async def has(self, event_type: str) -> bool:
        await asyncio.sleep(0)
        return any(e.event == event_type for e in self.events)

    async def ends_by(self, deadline: float) -> None:
        """Asserts the stream ends by `deadline` (loop time)."""
        left = deadline - asyncio.get_running_loop().time()
        done, _ = await asyncio.wait({self.task}, timeout=max(left, 0.0))
        assert done, f"the stream was still open {CLOSE_WITHIN}s after access ended"
        self.task.result()

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def deadline() -> float:
    return asyncio.get_running_loop().time() + CLOSE_WITHIN


async def decide_and_see_more(http: httpx.AsyncClient, owner: str, run_id: str) -> int:
    """The owner decides the gate; returns the run's last seq once events followed it."""
    decided = await http.post(f"/runs/{run_id}/decisions/{GATE}", headers=auth(owner),
                              json={"decision": "approve"})
    assert decided.status_code == 200, decided.text

    async def after_decision() -> int:
        events = (await http.get(f"/runs/{run_id}/events?limit=500",
                                 headers=auth(owner))).json()["events"]
        types = [e["type"] for e in events]
        return events[-1]["seq"] if "gate.decided" in types and types[-1] != "gate.decided" \
            else 0
    return await eventually(after_decision, timeout=30)


def last_seq(follower: Follower) -> int:
    return max((e.id for e in follower.events if e.id is not None), default=0)


# --- streams -------------------------------------------------------------------------------

async def test_removed_member_run_stream_closes_before_the_next_event(http):
    p = people()
    group_id = await group_of(http, p["alice"], **{p["bob"]: "viewer"})
    run_id = await run_at_gate(http, p["alice"], group_id)
    bob = Follower(http, f"/runs/{run_id}/events/stream", auth(p["bob"]))
    try:
        await eventually(lambda: bob.has("gate.opened"))
        seen_before = last_seq(bob)
        by = deadline()
        removed = await http.delete(f"/groups/{group_id}/members/{p['bob']}",
                                    headers=auth(p["alice"]))
        assert removed.status_code == 204
        assert (await http.get(f"/runs/{run_id}", headers=auth(p["bob"]))).status_code == 404
        later = await decide_and_see_more(http, p["alice"], run_id)
        await bob.ends_by(by)
        assert later > seen_before
        assert last_seq(bob) == seen_before, "events reached a removed member"
        assert not await bob.has("gate.decided")
    finally:
        await bob.stop()


async def test_removed_member_inbox_stream_gets_nothing_more_of_the_group(http):
    p = people()
    group_id = await group_of(http, p["alice"], **{p["bob"]: "approver"})
    bob = Follower(http, "/decisions/stream", auth(p["bob"]))
    try:
        await eventually(lambda: bob.has("decision.snapshot_done"))
        run_id = await run_at_gate(http, p["alice"], group_id)
        await eventually(lambda: bob.has("decision.pending"))
        removed = await http.delete(f"/groups/{group_id}/members/{p['bob']}",
                                    headers=auth(p["alice"]))
        assert removed.status_code == 204
        # A second run of the group, and the first one decided: neither reaches Bob.
        second = await run_at_gate(http, p["alice"], group_id)
        await decide_and_see_more(http, p["alice"], run_id)
        watcher = Follower(http, "/decisions/stream", auth(p["alice"]))
        try:
            await eventually(lambda: watcher.has("decision.snapshot_done"))
        finally:
            await watcher.stop()
        about = {e.data.get("run_id") for e in bob.events[1:] if isinstance(e.data, dict)}
        assert second not in about
        assert not any(e.event == "decision.closed" for e in bob.events)
    finally:
        await bob.stop()


async def test_revoked_api_key_ends_its_run_and_inbox_streams(http):
    p = people()
    run_id = await run_at_gate(http, p["alice"])
    made = await http.post("/api-keys", json={"name": "watcher"}, headers=auth(p["alice"]))
    assert made.status_code == 201, made.text
    key = made.json()["key"]
    run_stream = Follower(http, f"/runs/{run_id}/events/stream", bearer(key))
    inbox = Follower(http, "/decisions/stream", bearer(key))
    try:
        await eventually(lambda: run_stream.has("gate.opened"))
        await eventually(lambda: inbox.has("decision.snapshot_done"))
        seen_before = last_seq(run_stream)
        by = deadline()
        revoked = await http.delete(f"/api-keys/{made.json()['key_id']}",
                                    headers=auth(p["alice"]))
        assert revoked.status_code == 204
        await decide_and_see_more(http, p["alice"], run_id)
        await run_stream.ends_by(by)
        await inbox.ends_by(by)
        assert last_seq(run_stream) == seen_before
        assert not await inbox.has("decision.closed")
    finally:
        await run_stream.stop()
        await inbox.stop()


async def test_signed_out_console_session_ends_its_streams(http, pool):
    p = people()
    run_id = await run_at_gate(http, p["alice"])
    async with httpx.AsyncClient(base_url=str(http.base_url), timeout=30) as browser:
        signed_in = await browser.get(await login_path(pool, p["alice"]))
        assert signed_in.status_code == 303, signed_in.text
        csrf = (await browser.get("/console/session")).json()["csrf_token"]
        cookie = {"Cookie": f"{SESSION_COOKIE}={browser.cookies[SESSION_COOKIE]}"}
        run_stream = Follower(http, f"/runs/{run_id}/events/stream", cookie)
        inbox = Follower(http, "/decisions/stream", cookie)
        try:
            await eventually(lambda: run_stream.has("gate.opened"))
            await eventually(lambda: inbox.has("decision.snapshot_done"))
            seen_before = last_seq(run_stream)
            by = deadline()
            out = await browser.post("/console/logout", headers={"X-CSRF-Token": csrf})
            assert out.status_code == 204
            await decide_and_see_more(http, p["alice"], run_id)
            await run_stream.ends_by(by)
            await inbox.ends_by(by)
            assert last_seq(run_stream) == seen_before
        finally:
            await run_stream.stop()
            await inbox.stop()


async def test_erased_user_streams_end_and_so_do_members_streams_of_her_runs(http):
    p = people()
    group_id = await group_of(http, p["alice"], **{p["bob"]: "viewer", p["carol"]: "owner"})
    run_id = await run_at_gate(http, p["alice"], group_id)
    own = Follower(http, f"/runs/{run_id}/events/stream", auth(p["alice"]))
    bob = Follower(http, f"/runs/{run_id}/events/stream", auth(p["bob"]))
    inbox = Follower(http, "/decisions/stream", auth(p["alice"]))
    try:
        for follower in (own, bob):
            await eventually(lambda f=follower: f.has("gate.opened"))
        await eventually(lambda: inbox.has("decision.snapshot_done"))
        by = deadline()
        erased = await http.post("/admin/erasure", json={"user": p["alice"]},
                                 headers=auth("ops", "service"))
        assert erased.status_code == 202, erased.text
        for follower in (own, bob, inbox):
            await follower.ends_by(by)
        assert not await own.has("gate.decided") and not await bob.has("gate.decided")
    finally:
        for follower in (own, bob, inbox):
            await follower.stop()


# --- credentials ---------------------------------------------------------------------------

async def test_a_key_cannot_mint_keys(http, pool):
    p = people()
    group_id = await group_of(http, p["alice"])
    personal = (await http.post("/api-keys", json={"name": "ci"},
                                headers=auth(p["alice"]))).json()["key"]
    group_key = (await http.post("/api-keys", json={"name": "bot", "group_id": group_id},
                                 headers=auth(p["alice"]))).json()["key"]
    async with pool.acquire() as conn:
        before = await conn.fetchval("SELECT count(*) FROM api_keys")
    for key in (personal, group_key):
        for body in ({"name": "child"}, {"name": "child", "group_id": group_id}):
            refused = await http.post("/api-keys", json=body, headers=bearer(key))
            assert refused.status_code == 403, refused.text
            error = refused.json()["error"]
            assert error["code"] == "not_allowed"
            assert "sign-in" in error["message"] and "API key" in error["message"]
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM api_keys") == before


async def test_a_user_holds_a_bounded_number_of_live_keys(http, pool):
    alice = people()["alice"]
    made = []
    for n in range(3):
        created = await http.post("/api-keys", json={"name": f"k{n}"}, headers=auth(alice))
        assert created.status_code == 201, created.text
        made.append(created.json()["key_id"])
    refused = await http.post("/api-keys", json={"name": "one too many"}, headers=auth(alice))
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "too_many_api_keys"
    assert "3" in refused.json()["error"]["message"]
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM api_keys WHERE owner = $1", alice) == 3
    # A revoked key no longer counts.
    assert (await http.delete(f"/api-keys/{made[0]}", headers=auth(alice))).status_code == 204
    again = await http.post("/api-keys", json={"name": "k3"}, headers=auth(alice))
    assert again.status_code == 201, again.text


async def test_group_keys_end_when_their_maker_leaves_the_group(http):
    p = people()
    group_id = await group_of(http, p["carol"], **{p["alice"]: "owner", p["bob"]: "owner"})
    keys = {}
    for who in ("alice", "bob"):
        made = await http.post("/api-keys", json={"name": "bot", "group_id": group_id},
                               headers=auth(p[who]))
        assert made.status_code == 201, made.text
        keys[who] = made.json()
        listed = await http.get(f"/groups/{group_id}/runs", headers=bearer(made.json()["key"]))
        assert listed.status_code == 200
    # Removed by another owner, or leaving: the key stops at once and leaves the group.
    removed = await http.delete(f"/groups/{group_id}/members/{p['alice']}",
                                headers=auth(p["carol"]))
    assert removed.status_code == 204
    left = await http.delete(f"/groups/{group_id}/members/{p['bob']}", headers=auth(p["bob"]))
    assert left.status_code == 204
    members = (await http.get(f"/groups/{group_id}", headers=auth(p["carol"]))).json()["members"]
    for who in ("alice", "bob"):
        refused = await http.get(f"/groups/{group_id}/runs", headers=bearer(keys[who]["key"]))
        assert refused.status_code == 401, refused.text
        assert keys[who]["acts_as"] not in {m["user"] for m in members}


async def test_erasure_ends_every_token_key_and_link_of_the_user_at_once(http, pool):
    p = people()
    group_id = await group_of(http, p["carol"], **{p["alice"]: "owner", p["bob"]: "viewer"})
    her_run = await run_at_gate(http, p["alice"], group_id)
    carols_run = await run_at_gate(http, p["carol"], group_id)
    token = issue_token(SECRET, p["alice"])
    personal = (await http.post("/api-keys", json={"name": "ci"},
                                headers=bearer(token))).json()
    group_key = (await http.post("/api-keys", json={"name": "bot", "group_id": group_id},
                                 headers=bearer(token))).json()
    async with pool.acquire() as conn:
        # A child key made by one of her keys before keys could no longer mint keys.
        child = await conn.fetchval(
            "INSERT INTO api_keys (id, name, owner, secret_hash) VALUES ($1, 'child', $2, 'h') "
            "RETURNING id", uuid.uuid4(), group_key["acts_as"])
        link = await mailed_link(conn, carols_run, p["alice"])
    assert (await http.get(f"/decide-link/{link}")).status_code == 200

    erased = await http.post("/admin/erasure", json={"user": p["alice"]},
                             headers=auth("ops", "service"))
    assert erased.status_code == 202, erased.text

    refused = await http.post("/api-keys", json={"name": "after"}, headers=bearer(token))
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"]["code"] == "token_revoked"
    for key in (personal["key"], group_key["key"]):
        assert (await http.get("/runs", headers=bearer(key))).status_code == 401
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT revoked_at IS NOT NULL FROM api_keys WHERE id = $1",
                                   child)
    for attempt in (http.get(f"/decide-link/{link}"),
                    http.post(f"/decide-link/{link}", json={"decision": "approve"})):
        gone = await attempt
        assert gone.status_code == 403 and gone.json()["error"]["code"] == "invalid_link"
    listed = (await http.get(f"/groups/{group_id}/runs", headers=auth(p["bob"]))).json()["runs"]
    assert [r["run_id"] for r in listed] == [carols_run]
    assert her_run not in {r["run_id"] for r in listed}
    # A token issued after the erasure (the same name, someone new) works: `iat` is in whole
    # seconds, so one issued within the erasure's second is refused, the next second's is not.
    async def fresh_token_reads() -> bool:
        fresh = await http.get("/runs", headers=auth(p["alice"]))
        return fresh.status_code == 200 and fresh.json()["runs"] == []
    await eventually(fresh_token_reads, timeout=3)

async def mailed_link(conn: asyncpg.Connection, run_id: str, user: str) -> str:
    """A decision link for `user` on the run's pending request, as the mailer makes one."""
    request_id = await conn.fetchval(
        "SELECT id FROM hitl_requests WHERE run_id = $1 AND status = 'pending'",
        uuid.UUID(run_id))
    link_id = uuid.uuid4()
    await conn.execute(
        "INSERT INTO decision_links (id, request_id, user_name, email, expires_at) "
        "VALUES ($1, $2, $3, $4, $5)", link_id, request_id, user, f"{user}@example.com",
        datetime.now(UTC) + timedelta(days=1))
    return sign_link(SECRET, link_id)
