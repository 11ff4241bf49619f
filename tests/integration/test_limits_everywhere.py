"""Issue 38: every way in counts against its user's limits, and every list a body carries is
bounded: A2A streams hold stream slots, JSON-RPC writes count as writes (reads do not), a
1,800-entry AG-UI resume and JSON-RPC batches are refused before anything is done, and a
user's webhooks and push configs are capped."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest_asyncio

from tests.helpers import IDEA, live_api, wait_gate
from waystation.api.auth import issue_token
from waystation.testing import InProcessApi

SECRET = "limits-test-secret-0123456789-0123456789-ab"
GATE = "approve_founders_brief"
A2A = {"A2A-Version": "1.0"}
MCP = {"Accept": "application/json, text/event-stream"}


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user)}"}  # type: ignore[arg-type]


@pytest_asyncio.fixture
async def api(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[InProcessApi]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        sse_heartbeat_seconds=1.0, max_streams_per_user=8,
                        writes_per_minute=60, max_webhooks_per_user=2,
                        max_push_configs_per_user=1) as api:
        yield api


def user() -> str:
    return f"una-{uuid.uuid4().hex[:6]}"


async def waiting_run(http: httpx.AsyncClient, pool: Any, owner: str) -> str:
    started = await http.post("/runs", headers=auth(owner), json={
        "kind": "validation", "input": {"entrepreneur_input": IDEA, "gates": [GATE]}})
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    await wait_gate(pool, uuid.UUID(run_id), GATE)
    return run_id


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}


async def subscribe(http: httpx.AsyncClient, owner: str, run_id: str,
                    stack: contextlib.AsyncExitStack) -> httpx.Response:
    """An A2A SubscribeToTask held open (its first event read) until the stack closes."""
    response = await stack.enter_async_context(http.stream(
        "POST", "/a2a", json=rpc("SubscribeToTask", {"id": run_id}),
        headers={**auth(owner), **A2A}))
    if response.status_code == 200:
        lines = response.aiter_lines()
        stack.push_async_callback(lines.aclose)
        async for line in lines:
            if line.startswith("data:"):
                assert json.loads(line[5:])["result"]["task"]["id"] == run_id
                break
    else:
        await response.aread()
    return response


async def test_a2a_subscriptions_count_as_open_streams_of_their_user(api, pool):
    owner = user()
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        run_id = await waiting_run(http, pool, owner)
        async with contextlib.AsyncExitStack() as held:
            answers = [(await subscribe(http, owner, run_id, held)).status_code
                       for _ in range(24)]
            assert answers == [200] * 8 + [429] * 16
            refused = await subscribe(http, owner, run_id, held)
            assert refused.json()["error"] == {
                "code": "rate_limited", "message": "at most 8 open streams per user"}
            # The inbox stream is one more of the same user's: refused too.
            inbox = await http.get("/decisions/stream", headers=auth(owner))
            assert inbox.status_code == 429
            # A streaming message holds a slot as well.
            streamed = await http.post("/a2a", headers={**auth(owner), **A2A}, json=rpc(
                "SendStreamingMessage", {"message": {
                    "messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": run_id,
                    "parts": [{"text": "hello"}]}}))
            assert streamed.status_code == 429, streamed.text
        # Closed, they free their slots.
        async with contextlib.AsyncExitStack() as again:
            assert (await subscribe(http, owner, run_id, again)).status_code == 200


async def test_json_rpc_writes_count_as_writes_and_reads_do_not(migrated_url, dev_env, pool,
                                                               task_queue):
    owner = user()
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        writes_per_minute=3) as api, \
            httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        run_id = await waiting_run(http, pool, owner)  # one write
        for _ in range(5):  # reads: A2A GetTask, MCP tools/list, none counted
            got = await http.post("/a2a", headers={**auth(owner), **A2A},
                                  json=rpc("GetTask", {"id": run_id}))
            assert got.json()["result"]["id"] == run_id, got.text
            listed = await http.post("/mcp", headers={**auth(owner), **MCP},
                                     json=rpc("tools/list", {}))
            assert listed.status_code == 200 and "result" in listed.json(), listed.text
        # Two writes left: an A2A push config and an MCP start_run; the third is refused.
        push = rpc("CreateTaskPushNotificationConfig", {
            "taskId": run_id, "url": "https://hooks.example.com/a"})
        assert "result" in (await http.post("/a2a", headers={**auth(owner), **A2A},
                                             json=push)).json()
        start = rpc("tools/call", {"name": "start_run", "arguments": {
            "kind": "validation", "input": {"entrepreneur_input": IDEA, "gates": [GATE]}}})
        started = await http.post("/mcp", headers={**auth(owner), **MCP}, json=start)
        assert started.json()["result"]["isError"] is False, started.text
        cancel = rpc("tools/call", {"name": "cancel_run", "arguments": {"run_id": run_id}})
        tried = await http.post("/mcp", headers={**auth(owner), **MCP}, json=cancel)
        assert tried.status_code == 200, tried.text
        assert tried.json()["error"]["data"]["error"]["code"] == "rate_limited", tried.text
        refused = await http.post("/a2a", headers={**auth(owner), **A2A}, json=push)
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
        run = (await http.get(f"/runs/{run_id}", headers=auth(owner))).json()
        assert run["status"] == "paused", run  # the refused cancel did nothing
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM runs WHERE owner = $1", owner) == 2


async def test_a_1800_entry_resume_is_a_422_and_decides_nothing(api, pool):
    owner = user()
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        run_id = await waiting_run(http, pool, owner)
        before = (await http.get(f"/runs/{run_id}", headers=auth(owner))).json()
        request_id = before["pending_decision"]["request_id"]
        entry = {"interruptId": request_id, "status": "resolved",
                 "payload": {"decision": "approve"}}
        response = await http.post("/ag-ui/validation", headers=auth(owner), json={
            "threadId": run_id, "runId": str(uuid.uuid4()), "messages": [],
            "resume": [entry] * 1800})
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_request"
        assert error["details"][0]["loc"] == ["body", "resume"]
        # Within the bound, an interrupt named twice is refused too: each is answered once.
        twice = await http.post("/ag-ui/validation", headers=auth(owner), json={
            "threadId": run_id, "runId": str(uuid.uuid4()), "messages": [],
            "resume": [entry] * 2})
        assert twice.status_code == 422, twice.text
        assert "interruptId repeats" in twice.text
        after = (await http.get(f"/runs/{run_id}", headers=auth(owner))).json()
        assert after["last_seq"] == before["last_seq"]
        assert after["pending_decision"]["votes"] == []


async def test_json_rpc_batches_are_refused_before_any_write(api, pool):
    owner = user()
    start = {"messageId": "", "role": "ROLE_USER", "metadata": {"kind": "validation"},
             "parts": [{"data": {"entrepreneur_input": IDEA, "gates": [GATE]}}]}
    a2a_batch = [rpc("SendMessage", {"configuration": {"returnImmediately": True},
                                     "message": {**start, "messageId": str(uuid.uuid4())}})
                 for _ in range(50)]
    mcp_batch = [rpc("tools/call", {"name": "start_run", "arguments": {
        "kind": "validation", "input": {"entrepreneur_input": IDEA}}}) for _ in range(50)]
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        a2a = await http.post("/a2a", headers={**auth(owner), **A2A}, json=a2a_batch)
        assert a2a.json()["error"]["code"] == -32600, a2a.text  # invalid request
        mcp = await http.post("/mcp", headers={**auth(owner), **MCP}, json=mcp_batch)
        assert mcp.status_code == 400 or "error" in mcp.json(), mcp.text
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM runs WHERE owner = $1", owner) == 0


async def test_webhooks_and_push_configs_are_capped_and_viewers_register_none(api, pool):
    owner, viewer, approver = user(), user(), user()
    hook = {"url": "https://hooks.example.com/x", "events": ["run.finished"]}
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        made = [(await http.post("/webhooks", headers=auth(owner), json=hook)).status_code
                for _ in range(2)]
        assert made == [201, 201]
        third = await http.post("/webhooks", headers=auth(owner), json=hook)
        assert third.status_code == 409, third.text
        assert third.json()["error"]["code"] == "too_many_webhooks"
        assert "at most 2 live webhooks per user" in third.json()["error"]["message"]
        # Push configs are counted apart: one allowed, the second refused.
        run_id = await waiting_run(http, pool, owner)
        configs = [await http.post("/a2a", headers={**auth(owner), **A2A}, json=rpc(
            "CreateTaskPushNotificationConfig",
            {"taskId": run_id, "url": f"https://hooks.example.com/{n}"})) for n in range(2)]
        assert "result" in configs[0].json(), configs[0].text
        assert "at most 1 live push configs" in configs[1].json()["error"]["message"]

        group = (await http.post("/groups", headers=auth(owner), json={"name": "Ops"})).json()
        for member, role in ((viewer, "viewer"), (approver, "approver")):
            added = await http.post(f"/groups/{group['group_id']}/members", headers=auth(owner),
                                    json={"user": member, "role": role})
            assert added.status_code == 201, added.text
        group_hook = {**hook, "group_id": group["group_id"]}
        refused = await http.post("/webhooks", headers=auth(viewer), json=group_hook)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["details"] == [
            {"role": "viewer", "allowed_roles": ["owner", "approver"]}]
        assert (await http.post("/webhooks", headers=auth(approver),
                                json=group_hook)).status_code == 201
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM webhooks WHERE owner = $1",
                                   viewer) == 0
        assert await conn.fetchval("SELECT count(*) FROM webhooks WHERE owner = $1",
                                   owner) == 3
