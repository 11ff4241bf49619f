"""The HTTP API end to end: dev server, real Postgres, an in-process worker."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import jwt
import pytest

from tests.helpers import IDEA, eventually
from tests.inprocess_api import SECRET, auth, start_run, wait_pending
from waystation.api.app import create_app
from waystation.settings import Settings


async def test_run_through_api_with_decisions(api):
    run_id = await start_run(api)
    run = await wait_pending(api, run_id, "approve_founders_brief")
    pending = run["pending_decision"]
    assert run["status"] == "paused" and pending["recommended_option"] == "approve"
    assert {o["value"] for o in pending["options"]} >= {"approve", "reject"}

    inbox = (await api.get("/decisions", headers=auth())).json()["decisions"]
    assert run_id in {d["run_id"] for d in inbox}

    decided = await api.post(f"/runs/{run_id}/decisions/approve_founders_brief",
                             json={"decision": "approve", "feedback": "ok",
                                   "digest": pending["digest"]}, headers=auth())
    assert decided.status_code == 200, decided.text
    body = decided.json()
    assert body["status"] == "approved" and body["decided_by"] == "alice"
    assert body["feedback"] == "ok" and body["decided_at"]

    # The same decision again: same answer, recorded once.
    again = await api.post(f"/runs/{run_id}/decisions/approve_founders_brief",
                           json={"decision": "approve", "feedback": "ok",
                                 "digest": pending["digest"]}, headers=auth())
    assert again.status_code == 200 and again.json() == body
    # A different decision on the decided gate: 409.
    late = await api.post(f"/runs/{run_id}/decisions/approve_founders_brief",
                          json={"decision": "reject"}, headers=auth())
    assert late.status_code == 409 and late.json()["error"]["code"] == "not_pending"

    await wait_pending(api, run_id, "approve_vpc_completion")
    events = (await api.get(f"/runs/{run_id}/events?after_seq=0&limit=1000",
                            headers=auth())).json()["events"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert sum(e["type"] == "gate.decided" for e in events) == 1
    page = (await api.get(f"/runs/{run_id}/events?after_seq=3&limit=2", headers=auth())).json()
    assert [e["seq"] for e in page["events"]] == [4, 5] and page["next_after_seq"] == 5
    snapshot = await api.get(f"/runs/{run_id}/snapshots/latest", headers=auth())
    assert snapshot.status_code == 200 and snapshot.json()["state"]["founders_brief"]
    history = (await api.get(f"/runs/{run_id}/decisions", headers=auth())).json()["decisions"]
    assert [d["status"] for d in history] == ["approved", "pending"]

    unknown = await api.post(f"/runs/{run_id}/decisions/approve_vpc_completion",
                             json={"decision": "maybe"}, headers=auth())
    assert unknown.status_code == 422 and unknown.json()["error"]["code"] == "unknown_option"
    cancel = await api.post(f"/runs/{run_id}/cancel", headers=auth())
    assert cancel.status_code == 202

    async def canceled():
        return (await api.get(f"/runs/{run_id}", headers=auth())).json()["status"] == "canceled"
    await eventually(canceled)
    run = (await api.get(f"/runs/{run_id}", headers=auth())).json()
    assert run["stop_reason"] == "canceled" and run["finished_at"] is not None
    events = (await api.get(f"/runs/{run_id}/events?limit=1000", headers=auth())).json()["events"]
    assert events[-1]["type"] == "run.canceled"
    assert events[-1]["output"] == {"stop_reason": "canceled"}
    again = await api.post(f"/runs/{run_id}/cancel", headers=auth())
    assert again.status_code == 409


async def test_racing_decisions_exactly_one_wins(api):
    run_id = await start_run(api, gates=["approve_founders_brief"])
    await wait_pending(api, run_id, "approve_founders_brief")
    url = f"/runs/{run_id}/decisions/approve_founders_brief"
    responses = await asyncio.gather(
        api.post(url, json={"decision": "approve"}, headers=auth()),
        api.post(url, json={"decision": "reject", "feedback": "no"}, headers=auth()))
    assert sorted(r.status_code for r in responses) == [200, 409]
    history = (await api.get(f"/runs/{run_id}/decisions", headers=auth())).json()["decisions"]
    assert len(history) >= 1 and history[0]["status"] in ("approved", "rejected")


async def test_idempotency_key_returns_same_run(api):
    body = {"kind": "validation", "input": {"entrepreneur_input": IDEA}}
    headers = {**auth(), "Idempotency-Key": f"key-{uuid.uuid4()}"}
    first = await api.post("/runs", json=body, headers=headers)
    second = await api.post("/runs", json=body, headers=headers)
    assert first.status_code == second.status_code == 201
    assert first.json()["run_id"] == second.json()["run_id"]
    assert second.json()["created"] is False
    other = await api.post("/runs", json={"kind": "validation", "input": {
        "entrepreneur_input": IDEA + " Different."}}, headers=headers)
    assert other.status_code == 409


async def test_other_users_run_is_404_and_lists_are_scoped(api):
    run_id = await start_run(api, user="alice")
    for path in (f"/runs/{run_id}", f"/runs/{run_id}/events", f"/runs/{run_id}/decisions",
                 f"/runs/{run_id}/snapshots/latest"):
        response = await api.get(path, headers=auth("mallory"))
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "run_not_found"
    denied = await api.post(f"/runs/{run_id}/decisions/approve_founders_brief",
                            json={"decision": "approve"}, headers=auth("mallory"))
    assert denied.status_code == 404
    assert (await api.post(f"/runs/{run_id}/cancel", headers=auth("mallory"))).status_code == 404
    mine = (await api.get("/runs", headers=auth("mallory"))).json()["runs"]
    assert run_id not in {r["run_id"] for r in mine}
    service = await api.get(f"/runs/{run_id}", headers=auth("ops", "service"))
    assert service.status_code == 200


async def test_list_runs_filters_and_cursor(api):
    user = f"lister-{uuid.uuid4().hex[:6]}"
    ids = [await start_run(api, user=user) for _ in range(3)]
    page1 = (await api.get("/runs?limit=2", headers=auth(user))).json()
    page2 = (await api.get(f"/runs?limit=2&cursor={page1['next_cursor']}",
                           headers=auth(user))).json()
    seen = [r["run_id"] for r in page1["runs"] + page2["runs"]]
    assert sorted(seen) == sorted(ids) and page2["next_cursor"] is None
    await wait_pending(api, ids[0], "approve_founders_brief", user=user)
    waiting = (await api.get("/runs?awaiting_human=true&kind=validation",
                             headers=auth(user))).json()["runs"]
    assert ids[0] in {r["run_id"] for r in waiting}
    assert all(r["pending_checkpoint"] for r in waiting)


@pytest.mark.parametrize("method,path,kwargs,status,code", [
    ("get", "/runs/not-a-uuid", {}, 422, "invalid_request"),
    ("get", f"/runs/{uuid.uuid4()}", {}, 404, "run_not_found"),
    ("get", "/runs/{run}/events?after_seq=-1", {}, 422, "invalid_request"),
    ("get", "/runs/{run}/events?limit=1000000", {}, 422, "invalid_request"),
    ("post", "/runs/{run}/decisions/approve_founders_brief", {"json": {"decision": "approve",
                                                                     "surprise": 1}},
     422, "invalid_request"),
    ("post", "/runs/{run}/decisions/no_such_checkpoint", {"json": {"decision": "approve"}},
     404, "checkpoint_not_found"),
    ("post", "/runs/{run}/decisions/approve_founders_brief", {"json": {"decision": "approve",
                                                                     "digest": "abc"}},
     422, "invalid_request"),
    ("get", "/runs?limit=100000", {}, 422, "invalid_request"),
    ("get", "/runs?cursor=%%%", {}, 422, "invalid_cursor"),
    ("get", "/runs?status=bogus", {}, 422, "invalid_request"),
    ("post", "/runs", {"json": {"kind": "nope", "input": {}}}, 422, "invalid_request"),
    ("post", "/runs", {"json": {"kind": "validation", "input": {"entrepreneur_input": IDEA,
                                                                "colour": "red"}}},
     422, "invalid_request"),
    ("post", "/runs", {"json": {"kind": "validation", "input": {"entrepreneur_input": "x"}}},
     422, "invalid_request"),
    ("post", "/runs", {"content": b"{not json", "headers": {"Content-Type": "application/json"}},
     422, "invalid_request"),
    ("post", "/runs", {"content": b"kind=validation",
                       "headers": {"Content-Type": "text/plain"}}, 415, "unsupported_media_type"),
    ("post", "/runs", {"content": b"{" + b" " * 400_000 + b"}",
                       "headers": {"Content-Type": "application/json"}},
     413, "payload_too_large"),
])
async def test_bad_input_gets_precise_4xx(api, method, path, kwargs, status, code):
    if "{run}" in path:
        path = path.replace("{run}", await start_run(api, gates=[]))
    headers = {**auth(), **kwargs.pop("headers", {})}
    response = await getattr(api, method)(path, headers=headers, **kwargs)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize("header,code", [
    (None, "unauthenticated"),
    ("Basic abc", "unauthenticated"),
    ("Bearer not.a.token", "invalid_token"),
    (f"Bearer {jwt.encode({'sub': 'alice', 'exp': 1}, SECRET, algorithm='HS256')}",
     "token_expired"),
    (f"Bearer {jwt.encode({'sub': 'alice', 'exp': 4102444800}, 'wrong-secret-0123456789-0123456789', algorithm='HS256')}",  # noqa: E501
     "invalid_token"),
    (f"Bearer {jwt.encode({'sub': 'alice', 'exp': 4102444800}, None, algorithm='none')}",
     "invalid_token"),
])
async def test_bad_tokens_are_401(api, header, code):
    headers = {"Authorization": header} if header else {}
    response = await api.get("/runs", headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == code


async def test_healthz(api):
    response = await api.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "temporal": "ok"}


async def test_temporal_unreachable_is_503_with_retry_after_and_nothing_started(
        migrated_url, pool):
    import socket
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    app = create_app(Settings(database_url=migrated_url, jwt_secret=SECRET,
                              temporal_address=dead))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            response = await client.post("/runs", headers=auth("offline-user"), json={
                "kind": "validation", "input": {"entrepreneur_input": IDEA}})
            assert response.status_code == 503, response.text
            assert response.headers["Retry-After"]
            assert response.json()["error"]["code"] == "unavailable"
            health = await client.get("/healthz")
            assert health.status_code == 503 and health.json()["temporal"] == "unavailable"
            runs = (await client.get("/runs", headers=auth("offline-user"))).json()["runs"]
            assert all(r["status"] == "failed" for r in runs)
