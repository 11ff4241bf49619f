"""Live model tokens on the run's SSE stream (issue 43): the real app under uvicorn, a worker
on the dev server with the offline planner (which streams), real Postgres. The answer arrives
as `message.delta` events outside the `seq` sequence whose text is the durable answer's; a
client joining mid-answer catches up from the message's partial; a member removed while
watching is sent no delta more; a stranger opens no stream."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx

from tests.agent_helpers import SEARCH, shown_text
from tests.helpers import eventually
from tests.integration.test_walls_access import auth, group_of
from tests.integration.test_walls_interfaces import api, http  # noqa: F401 - the fixtures
from tests.sse_client import sse_events
from waystation.api.services.deltas import partial_messages
from waystation.persistence.claims import API_ROLE, WORKER_ROLE, Claims, claimed_connection
from waystation.persistence.db import create_pool


async def follow(client: httpx.AsyncClient, run_id: str, user: str, *, after_seq: int = 0,
                 until: str = "agent.answered") -> list[Any]:
    """The stream's events up to the first `until` (or its end)."""
    seen: list[Any] = []
    async with client.stream("GET", f"/runs/{run_id}/events/stream?after_seq={after_seq}",
                             headers=auth(user)) as response:
        assert response.status_code == 200
        async for event in sse_events(response):
            seen.append(event)
            if event.event in (until, "end"):
                break
    return seen


def folded(events: list[Any], message_id: str) -> str:
    return shown_text([e.data for e in events if e.event == "message.delta"], message_id)


async def test_the_answer_arrives_as_deltas_outside_the_seq_sequence(http):  # noqa: F811
    owner = f"priya-{uuid.uuid4().hex[:6]}"
    started = await http.post("/runs", headers=auth(owner),
                              json={"kind": "agent", "input": {"message": SEARCH}})
    run_id = started.json()["run_id"]
    events = await asyncio.wait_for(follow(http, run_id, owner), 60)
    answered = events[-1].data["output"]
    deltas = [e for e in events if e.event == "message.delta"]
    text = [e for e in deltas if e.data["message_id"] == answered["message_id"]]
    assert len(text) > 3 and all(e.id is None for e in deltas)
    assert folded(events, answered["message_id"]) == answered["text"]
    # The durable events keep their gapless seq; the deltas came before the answer's event.
    seqs = [e.id for e in events if e.id is not None]
    assert seqs == list(range(1, len(seqs) + 1))
    called = next(e.data["output"] for e in events if e.event == "tool.called")
    args = [e.data for e in deltas if e.data["call_id"] == called["call_id"]]
    assert json.loads("".join(a["delta"] for a in args)) == called["arguments"]


async def test_a_client_joining_mid_answer_catches_up_from_the_partial(http,  # noqa: F811
                                                                     pool, monkeypatch):
    monkeypatch.setenv("WAYSTATION_OFFLINE_TOKEN_MS", "60")  # a slow model: a window to join
    owner = f"priya-{uuid.uuid4().hex[:6]}"
    started = await http.post("/runs", headers=auth(owner),
                              json={"kind": "agent", "input": {"message": SEARCH}})
    run_id = started.json()["run_id"]

    async def writing() -> str | None:
        async with pool.acquire() as conn:
            return await conn.fetchval(
                "SELECT message_id FROM message_partials WHERE run_id = $1 "
                "AND length(text) > 20", uuid.UUID(run_id))
    message_id = await eventually(writing, timeout=60)
    events = await asyncio.wait_for(follow(http, run_id, owner), 60)
    deltas = [e.data for e in events if e.event == "message.delta"
              and e.data["message_id"] == message_id]
    assert deltas[0]["at"] == 0 and len(deltas[0]["delta"]) > 20  # the message so far, whole
    answered = events[-1].data["output"]
    assert answered["message_id"] == message_id
    assert folded(events, message_id) == answered["text"]


async def test_a_member_removed_while_watching_is_sent_no_delta_more(http):  # noqa: F811
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    group_id = await group_of(http, alice, **{bob: "approver"})
    started = await http.post("/runs", headers=auth(alice), json={
        "kind": "agent", "group_id": group_id, "input": {"message": SEARCH}})
    run_id = started.json()["run_id"]
    first = await asyncio.wait_for(follow(http, run_id, bob), 60)
    assert [e for e in first if e.event == "message.delta"]  # a member watches it written
    last_seq = first[-1].id
    stranger = await http.get(f"/runs/{run_id}/events/stream", headers=auth("mallory"))
    assert stranger.status_code == 404

    seen: list[Any] = []

    async def watch() -> None:
        async with http.stream("GET", f"/runs/{run_id}/events/stream?after_seq={last_seq}",
                               headers=auth(bob)) as response:
            async for event in sse_events(response):
                seen.append(event)

    watching = asyncio.create_task(watch())
    await asyncio.sleep(0.5)
    removed = await http.delete(f"/groups/{group_id}/members/{bob}", headers=auth(alice))
    assert removed.status_code == 204
    await asyncio.wait_for(watching, 10)  # his stream ends at its next look
    sent = await http.post(f"/runs/{run_id}/messages", headers=auth(alice),
                           json={"text": "Shortlist the first three"})
    assert sent.status_code == 202, sent.text
    after = await asyncio.wait_for(follow(http, run_id, alice, after_seq=last_seq), 60)
    assert [e for e in after if e.event == "message.delta"]  # Alice watches the answer
    assert not [e for e in seen if e.event == "message.delta"]


async def test_nobody_reads_the_partials_of_a_run_they_may_not_read(http,  # noqa: F811
                                                                  migrated_url):
    """Row-level security on the partials (migration 080), as the API's and the workers' roles
    run: the worker publishes, the owner reads the partial, another user reads none."""
    owner = f"priya-{uuid.uuid4().hex[:6]}"
    started = await http.post("/runs", headers=auth(owner),
                              json={"kind": "agent", "input": {"message": SEARCH}})
    run_id = uuid.UUID(started.json()["run_id"])
    await asyncio.wait_for(follow(http, str(run_id), owner), 60)
    worker = await create_pool(migrated_url, max_size=1, role=WORKER_ROLE)
    api_pool = await create_pool(migrated_url, max_size=1, role=API_ROLE)
    try:
        async with worker.acquire() as conn:
            await conn.execute("SELECT publish_message_delta($1, 'm-test', 1, NULL, NULL, "
                               "'secret')", run_id)
        async with claimed_connection(api_pool, Claims(user="nobody")) as conn:
            assert await partial_messages(conn, run_id) == []
        async with claimed_connection(api_pool, Claims(user=owner)) as conn:
            assert [d.delta for d in await partial_messages(conn, run_id)] == ["secret"]
        # A run that ends drops what it was writing (migration 082).
        assert (await http.post(f"/runs/{run_id}/cancel", headers=auth(owner))).is_success

        async def dropped() -> bool:
            async with claimed_connection(api_pool, Claims(user=owner)) as conn:
                return not await partial_messages(conn, run_id)
        await eventually(dropped)
    finally:
        await worker.close()
        await api_pool.close()
