"""Issue 25's walls through every interface: a member removed from a group reaches the group's
run through none of REST, MCP, A2A and AG-UI, and an erased person's token opens none of them.
The real app under uvicorn, a worker on the dev server, real Postgres; each protocol through
its own client library (`mcp`, `a2a-sdk`; AG-UI's refusal comes before any stream)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from a2a.client.errors import A2AClientError
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, ListTasksRequest
from a2a.utils.errors import TaskNotFoundError
from mcp.shared.exceptions import MCPError

from tests.helpers import eventually, live_api
from tests.integration.test_a2a import a2a, message, send
from tests.integration.test_ag_ui import run_input
from tests.integration.test_mcp import Tasks, call, mcp, refused, task_request
from tests.integration.test_walls_access import GATE, SECRET, auth, group_of, people, run_at_gate
from waystation.testing import InProcessApi


@pytest_asyncio.fixture
async def api(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[InProcessApi]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        sse_heartbeat_seconds=1.0) as api:
        yield api


@pytest_asyncio.fixture
async def http(api: InProcessApi) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as client:
        yield client


def rest_calls(run_id: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    return [("GET", f"/runs/{run_id}", None), ("GET", f"/runs/{run_id}/events", None),
            ("GET", f"/runs/{run_id}/snapshots/latest", None),
            ("POST", f"/runs/{run_id}/decisions/{GATE}", {"decision": "approve"}),
            ("POST", f"/runs/{run_id}/fork", {"from": {"checkpoint": GATE}}),
            ("POST", f"/runs/{run_id}/hide", None), ("POST", f"/runs/{run_id}/cancel", None)]


def mcp_calls(run_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [("get_run", {"run_id": run_id}), ("read_events", {"run_id": run_id}),
            ("decide", {"run_id": run_id, "checkpoint": GATE, "decision": "approve"}),
            ("fork_run", {"run_id": run_id, "from": {"checkpoint": GATE}}),
            ("cancel_run", {"run_id": run_id})]


async def test_a_removed_member_reaches_the_run_through_no_interface(api, http):
    p = people()
    group_id = await group_of(http, p["alice"], **{p["bob"]: "approver"})
    run_id = await run_at_gate(http, p["alice"], group_id)
    # While a member, Bob reads it through each interface: what follows is the removal's doing.
    assert (await http.get(f"/runs/{run_id}", headers=auth(p["bob"]))).status_code == 200
    async with mcp(api, p["bob"], headers=auth(p["bob"])) as client:
        assert (await call(client, "get_run", run_id=run_id))["run_id"] == run_id
    async with a2a(api, p["bob"], headers=auth(p["bob"])) as client:
        assert (await client.get_task(GetTaskRequest(id=run_id))).id == run_id

    removed = await http.delete(f"/groups/{group_id}/members/{p['bob']}",
                                headers=auth(p["alice"]))
    assert removed.status_code == 204

    for method, path, body in rest_calls(run_id):
        answer = await http.request(method, path, json=body, headers=auth(p["bob"]))
        assert answer.status_code == 404, (path, answer.text)
        assert answer.json()["error"]["code"] == "run_not_found", path
    async with mcp(api, p["bob"], headers=auth(p["bob"])) as client:
        for tool, arguments in mcp_calls(run_id):
            assert (await refused(client, tool, **arguments))["code"] == "run_not_found", tool
        listed = await call(client, "list_runs")
        assert run_id not in [r["run_id"] for r in listed["runs"]]
        inbox = await call(client, "list_pending_decisions")
        assert run_id not in [d["run_id"] for d in inbox["decisions"]]
    async with mcp(api, p["bob"], headers=auth(p["bob"]), extensions=[Tasks()]) as client:
        answer = {"message-1": {"action": "accept", "content": {"text": "hello"}}}
        for method, params in [("tasks/get", {}), ("tasks/result", {}), ("tasks/cancel", {}),
                               ("tasks/update", {"input_responses": answer})]:
            with pytest.raises(MCPError) as hidden_task:
                await task_request(client, method, run_id, **params)
            assert hidden_task.value.error.data["error"]["code"] == "run_not_found", method  # type: ignore[index]
        # Asked with progress (an SSE answer, issue 43): refused the same, nothing told.
        heard: list[str | None] = []

        async def progress(at: float, total: float | None, text: str | None) -> None:
            heard.append(text)
        with pytest.raises(MCPError) as hidden_progress:
            await task_request(client, "tasks/result", run_id, progress_callback=progress)
        assert hidden_progress.value.error.data["error"]["code"] == "run_not_found"  # type: ignore[index]
        assert heard == []
    async with a2a(api, p["bob"], headers=auth(p["bob"])) as client:
        for refused_call in (client.get_task(GetTaskRequest(id=run_id)),
                             client.cancel_task(CancelTaskRequest(id=run_id)),
                             send(client, message(task_id=run_id, data={"decision": "approve"}))):
            with pytest.raises(TaskNotFoundError) as hidden:
                await refused_call
            assert hidden.value.data["code"] == "run_not_found"
        assert run_id not in [t.id for t in (await client.list_tasks(ListTasksRequest())).tasks]
    thread = await http.post("/ag-ui/validation", json=run_input(run_id), headers=auth(p["bob"]))
    assert thread.status_code == 404 and thread.json()["error"]["code"] == "run_not_found"

    # Nothing Bob tried was written: the run still waits at its gate, undecided, not forked.
    run = (await http.get(f"/runs/{run_id}", headers=auth(p["alice"]))).json()
    assert run["status"] == "paused" and run["pending_checkpoint"] == GATE
    assert not run.get("hidden_at")
    mine = (await http.get("/runs", headers=auth(p["bob"]))).json()
    assert not [r for r in mine["runs"] if (r.get("forked_from") or {}).get("run_id") == run_id]


async def test_an_erased_person_s_token_opens_no_interface(api, http):
    p = people()
    run_id = await run_at_gate(http, p["alice"])
    held = auth(p["alice"])  # the token she signed in with before she was erased
    erased = await http.post("/admin/erasure", json={"user": p["alice"]},
                             headers=auth("ops", role="service"))
    assert erased.status_code == 202, erased.text

    for method, path, body in [*rest_calls(run_id), ("POST", "/api-keys", {"name": "k"})]:
        answer = await http.request(method, path, json=body, headers=held)
        assert answer.status_code == 401, (path, answer.text)
    tools = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
             "params": {"name": "get_run", "arguments": {"run_id": run_id}}}
    answer = await http.post("/mcp", json=tools, headers={
        **held, "Accept": "application/json, text/event-stream"})
    assert answer.status_code == 401, answer.text
    streamed = {"jsonrpc": "2.0", "id": 2, "method": "tasks/result",
                "params": {"taskId": run_id, "_meta": {"progressToken": "p"}}}
    answer = await http.post("/mcp", json=streamed, headers={
        **held, "Accept": "application/json, text/event-stream"})
    assert answer.status_code == 401, answer.text  # before any stream
    async with a2a(api, p["alice"], headers=held) as client:
        with pytest.raises(A2AClientError, match="401"):
            await client.get_task(GetTaskRequest(id=run_id))
    thread = await http.post("/ag-ui/validation", json=run_input(str(uuid.uuid4())),
                             headers=held)
    assert thread.status_code == 401, thread.text


async def test_a_member_removed_mid_answer_is_told_no_more_progress(api, http, monkeypatch):
    """MCP's progress on `tasks/result` (issue 43) goes through the live loop's access check:
    Bob, removed from the group while the agent writes, gets `run_not_found` at once, not the
    rest of the answer."""
    monkeypatch.setenv("WAYSTATION_OFFLINE_TOKEN_MS", "100")  # an answer of some seconds
    p = people()
    group_id = await group_of(http, p["alice"], **{p["bob"]: "approver"})
    started = await http.post("/runs", headers=auth(p["alice"]), json={
        "kind": "agent", "group_id": group_id, "input": {"message": "Hi, I need a wedding "
                                                         "venue in Bangalore for 200 guests"}})
    run_id = started.json()["run_id"]
    heard: list[str] = []
    first = asyncio.Event()

    async def progress(at: float, total: float | None, text: str | None) -> None:
        heard.append(text or "")
        first.set()

    async def remove_bob() -> int:
        await first.wait()
        removed = await http.delete(f"/groups/{group_id}/members/{p['bob']}",
                                    headers=auth(p["alice"]))
        assert removed.status_code == 204
        return len(heard)

    async with mcp(api, p["bob"], headers=auth(p["bob"]), extensions=[Tasks()]) as client:
        removing = asyncio.create_task(remove_bob())
        with pytest.raises(MCPError) as cut:
            await task_request(client, "tasks/result", run_id, progress_callback=progress)
        assert cut.value.error.data["error"]["code"] == "run_not_found"  # type: ignore[index]
        told_by_removal = await removing

    async def answered() -> str | None:
        transcript = (await http.get(f"/runs/{run_id}/messages",
                                     headers=auth(p["alice"]))).json()["messages"]
        return next((m["text"] for m in transcript if m["type"] == "agent.answered"), None)
    answer = await eventually(answered, timeout=60)
    assert heard and answer.startswith(heard[-1]) and len(heard[-1]) < len(answer)
    assert len(heard) <= told_by_removal + 1  # at most one already on its way
