"""Live SSE streams through a real HTTP server (uvicorn), fed by LISTEN/NOTIFY."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from tests.helpers import IDEA, eventually, live_api
from tests.sse_client import SseEvent, sse_events
from waystation.api.auth import issue_token
from waystation.testing import InProcessApi

SECRET = "stream-secret-0123456789-0123456789-abcdef"


@pytest_asyncio.fixture
async def live(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[InProcessApi]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET, delay_ms=30,
                        sse_heartbeat_seconds=1.0) as api:
        yield api


def auth(user: str = "alice") -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user)}"}


async def start_run(http: httpx.AsyncClient, user: str = "alice", **fields) -> str:
    response = await http.post("/runs", headers=auth(user), json={
        "kind": "validation", "input": {"entrepreneur_input": IDEA, **fields}})
    assert response.status_code == 201, response.text
    return response.json()["run_id"]


async def read_stream(http: httpx.AsyncClient, run_id: str, *, headers: dict | None = None,
                      params: dict | None = None, stop_after: int | None = None,
                      user: str = "alice", opened: asyncio.Event | None = None,
                      ) -> list[SseEvent]:
    got: list[SseEvent] = []
    async with http.stream("GET", f"/runs/{run_id}/events/stream", params=params,
                           headers={**auth(user), **(headers or {})}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        if opened is not None:
            opened.set()
        async for event in sse_events(response):
            got.append(event)
            if event.event == "end" or (stop_after and len(got) >= stop_after):
                break
    return got


def seqs(events: list[SseEvent]) -> list[int]:
    return [e.id for e in events if e.id is not None]


async def test_finished_run_stream_sends_all_events_then_ends(live):
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        run_id = await start_run(http, gates=[])
        events = await asyncio.wait_for(read_stream(http, run_id), timeout=60)
        assert events[-1].event == "end"
        assert seqs(events) == list(range(1, len(seqs(events)) + 1))
        assert events[-2].event == "run.completed"
        # The stream is exactly the table.
        table = (await http.get(f"/runs/{run_id}/events?limit=1000",
                                headers=auth())).json()["events"]
        assert [e["seq"] for e in table] == seqs(events)
        assert any(e.event == "task.in_progress" for e in events)
        # Opened again after the end: the same events, and the end again.
        again = await asyncio.wait_for(read_stream(http, run_id), timeout=30)
        assert seqs(again) == seqs(events) and again[-1].event == "end"


async def test_reconnect_with_last_event_id_gets_missing_events_exactly_once(live):
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        run_id = await start_run(http, gates=[])
        first = await read_stream(http, run_id, stop_after=7)  # cut mid-stream
        last = seqs(first)[-1]
        rest = await asyncio.wait_for(
            read_stream(http, run_id, headers={"Last-Event-ID": str(last)}), timeout=60)
        combined = seqs(first) + seqs(rest)
        assert combined == list(range(1, len(combined) + 1))
        assert rest[-1].event == "end"
        by_query = await read_stream(http, run_id, params={"after_seq": last})
        assert seqs(by_query) == seqs(rest)


async def test_live_events_arrive_while_run_progresses(live):
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        run_id = await start_run(http, gates=["approve_founders_brief"])

        async def waiting() -> bool:
            run = (await http.get(f"/runs/{run_id}", headers=auth())).json()
            return run["pending_checkpoint"] == "approve_founders_brief"
        await eventually(waiting)
        opened = asyncio.Event()
        reader = asyncio.create_task(read_stream(http, run_id, opened=opened))
        await asyncio.wait_for(opened.wait(), timeout=30)
        decided = await http.post(f"/runs/{run_id}/decisions/approve_founders_brief",
                                  headers=auth(), json={"decision": "approve"})
        assert decided.status_code == 200
        events = await asyncio.wait_for(reader, timeout=60)
        assert seqs(events) == list(range(1, len(seqs(events)) + 1))
        types = [e.event for e in events]
        assert "gate.decided" in types and types[-2:] == ["run.completed", "end"]


async def test_other_users_stream_is_404_and_bad_resume_is_422(live):
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        run_id = await start_run(http, gates=[])
        other = await http.get(f"/runs/{run_id}/events/stream", headers=auth("mallory"))
        assert other.status_code == 404
        missing = await http.get(f"/runs/{uuid.uuid4()}/events/stream", headers=auth())
        assert missing.status_code == 404
        bad = await http.get(f"/runs/{run_id}/events/stream",
                             headers={**auth(), "Last-Event-ID": "abc"})
        assert bad.status_code == 422
        assert (await http.get(f"/runs/{run_id}/events/stream")).status_code == 401


async def test_api_restart_mid_run_loses_nothing_for_reconnecting_client(live):
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        run_id = await start_run(http, gates=[])
        first = await read_stream(http, run_id, stop_after=5)
    await live.stop()
    # The run goes on writing while no API is up: the outage's length is the fault itself.
    await asyncio.sleep(1.0)
    await live.start()
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        rest = await asyncio.wait_for(read_stream(
            http, run_id, headers={"Last-Event-ID": str(seqs(first)[-1])}), timeout=60)
    combined = seqs(first) + seqs(rest)
    assert combined == list(range(1, len(combined) + 1)) and rest[-1].event == "end"


async def test_decision_inbox_stream_shows_pending_and_closed(live):
    user = f"inbox-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        seen: list[SseEvent] = []

        async def follow() -> None:
            async with http.stream("GET", "/decisions/stream", headers=auth(user)) as response:
                assert response.status_code == 200
                async for event in sse_events(response):
                    seen.append(event)
                    if event.event == "decision.closed":
                        return
        follower = asyncio.create_task(follow())
        await eventually(lambda: asyncio.sleep(0, any(
            e.event == "decision.snapshot_done" for e in seen)))
        run_id = await start_run(http, user=user, gates=["approve_founders_brief"])
        await eventually(lambda: asyncio.sleep(0, any(
            e.event == "decision.pending" for e in seen)), timeout=30)
        pending = next(e for e in seen if e.event == "decision.pending")
        assert pending.data["run_id"] == run_id
        assert pending.data["checkpoint_name"] == "approve_founders_brief"
        response = await http.post(f"/runs/{run_id}/decisions/approve_founders_brief",
                                   headers=auth(user), json={"decision": "approve"})
        assert response.status_code == 200
        await asyncio.wait_for(follower, timeout=30)
        closed = seen[-1]
        assert closed.data["status"] == "approved" and closed.data["run_id"] == run_id
        # Someone else's inbox never saw it.
        others = (await http.get("/decisions", headers=auth("mallory"))).json()["decisions"]
        assert run_id not in {d["run_id"] for d in others}


async def test_open_streams_do_not_hold_database_connections(live):
    """More open streams than the API's pool has connections: every stream gets its events
    and plain requests still answer, because a stream borrows a connection only per read."""
    clients = 30  # the API pool holds 20
    limits = httpx.Limits(max_connections=clients + 5)
    async with httpx.AsyncClient(base_url=live.url, timeout=30, limits=limits) as http:
        run_id = await start_run(http, gates=["approve_founders_brief"])

        async def waiting() -> bool:
            run = (await http.get(f"/runs/{run_id}", headers=auth())).json()
            return run["pending_checkpoint"] == "approve_founders_brief"
        await eventually(waiting)
        readers = [asyncio.create_task(read_stream(http, run_id)) for _ in range(clients)]
        # The streams must all stay open for a while (none ends early): only a span of time
        # can show it.
        await asyncio.sleep(1.0)
        assert not any(r.done() for r in readers)
        answered = await asyncio.wait_for(http.get(f"/runs/{run_id}", headers=auth()), 5)
        assert answered.status_code == 200
        decided = await asyncio.wait_for(http.post(
            f"/runs/{run_id}/decisions/approve_founders_brief", headers=auth(),
            json={"decision": "approve"}), 10)
        assert decided.status_code == 200
        streams = await asyncio.wait_for(asyncio.gather(*readers), timeout=60)
        expected = seqs(streams[0])
        assert expected == list(range(1, len(expected) + 1))
        assert all(seqs(s) == expected and s[-1].event == "end" for s in streams)


@pytest.mark.parametrize("kind, run_input, stop_reason", [
    ("batch", {"name": "two items", "items": [{"text": "a"}, {"text": "b"}],
               "steps": [{"name": "echo", "template": "Echo: {{ item.text }}"}]}, "completed"),
    ("mobile_agent", {"app_package": "com.waystation.sample.notes", "max_steps": 12,
                      "sensitive_actions": "skip"}, "max_steps"),
])
async def test_every_kind_stream_ends_with_its_final_event(live, kind, run_input, stop_reason):
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        created = await http.post("/runs", headers=auth(),
                                  json={"kind": kind, "input": run_input})
        assert created.status_code == 201, created.text
        run_id = created.json()["run_id"]
        # Heartbeats come every second here; the end must follow the final event, not one.
        events = await asyncio.wait_for(read_stream(http, run_id), timeout=60)
        assert [e.event for e in events][0] == "run.started"
        assert [e.event for e in events][-2:] == ["run.completed", "end"]
        assert events[-2].data["output"]["stop_reason"] == stop_reason
        run = (await http.get(f"/runs/{run_id}", headers=auth())).json()
        assert run["status"] == "completed" and run["stop_reason"] == stop_reason
        assert run["finished_at"] == run["completed_at"] is not None
