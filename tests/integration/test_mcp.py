"""The MCP server at /mcp, driven by the official `mcp` client over Streamable HTTP: the real
app under uvicorn, a worker with the offline backend on the dev server, real Postgres."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal

import httpx
import httpx2
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, EmptyResult, Request, RequestParams, Result
from pydantic import ConfigDict

from tests.agent_helpers import LIKE, SEARCH
from tests.helpers import IDEA, eventually, live_api
from tests.mobile_helpers import NOTES
from waystation.api.app import create_app
from waystation.api.auth import issue_token
from waystation.settings import Settings
from waystation.testing import InProcessApi

SECRET = "mcp-api-secret-0123456789-0123456789-abcd"
TASKS = "io.modelcontextprotocol/tasks"
TOOLS = {"list_run_kinds", "start_run", "get_run", "list_runs", "read_events",
         "list_pending_decisions", "decide", "send_message", "cancel_run", "job_progress",
         "list_items", "retry_failed", "fork_run"}


@pytest_asyncio.fixture
async def api(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[InProcessApi]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        console_url="https://waystation.example") as api:
        yield api


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user)}"}


@asynccontextmanager
async def mcp(api: InProcessApi, user: str, *, headers: dict[str, str] | None = None,
              **options: Any) -> AsyncIterator[Client]:
    """An MCP client signed in as `user` (or with `headers`, another module's credentials)."""
    async with httpx2.AsyncClient(headers=headers or auth(user), timeout=30) as http, \
            Client(streamable_http_client(f"{api.url}/mcp", http_client=http),
                   **options) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """The API's error body a tool error carries."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return json.loads(result.content[0].text)["error"]  # type: ignore[union-attr]


async def waiting_at(client: Client, run_id: str, checkpoint: str) -> dict[str, Any]:
    async def pending() -> dict[str, Any] | None:
        inbox = await call(client, "list_pending_decisions")
        return next((d for d in inbox["decisions"] if d["run_id"] == run_id
                     and d["checkpoint_name"] == checkpoint), None)
    return await eventually(pending, timeout=40)


async def start_validation(client: Client, **input_fields: Any) -> str:
    created = await call(client, "start_run", kind="validation",
                         input={"entrepreneur_input": IDEA, **input_fields})
    return created["run_id"]


async def test_tools_start_wait_decide_and_read_events(api):
    async with mcp(api, "alice") as client:
        assert (client.server_info.name, client.server_info.version) == ("waystation", "0.1.0")
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        assert all(t.description and t.output_schema for t in tools.values())
        start = tools["start_run"].input_schema
        assert {"validation", "batch", "agent"} <= set(start["properties"]["kind"]["enum"])
        assert start["required"] == ["kind", "input"]
        assert set(tools["decide"].input_schema["required"]) == {"run_id", "checkpoint",
                                                                 "decision"}
        assert "pending_decision" in tools["get_run"].output_schema["properties"]
        kinds = {k["kind"]: k for k in (await call(client, "list_run_kinds"))["kinds"]}
        assert "entrepreneur_input" in kinds["validation"]["input_schema"]["properties"]

        unknown = await refused(client, "start_run", kind="nope", input={})
        assert unknown["code"] == "invalid_request" and "unknown run kind 'nope'" in \
            unknown["message"]
        run_id = await start_validation(client, gates=["approve_founders_brief"])
        request = await waiting_at(client, run_id, "approve_founders_brief")
        run = await call(client, "get_run", run_id=run_id)
        assert run["pending_checkpoint"] == "approve_founders_brief"
        assert run["pending_decision"]["request_id"] == request["request_id"]

        # An option the gate does not offer: a tool error naming it, and nothing written.
        bad = await refused(client, "decide", run_id=run_id, checkpoint="approve_founders_brief",
                            decision="maybe")
        assert bad["code"] == "unknown_option"
        assert "choose one of approve, reject" in bad["message"]
        after = await call(client, "get_run", run_id=run_id)
        assert after["last_seq"] == run["last_seq"]
        assert after["pending_decision"]["votes"] == []

        decided = await call(client, "decide", run_id=run_id, checkpoint="approve_founders_brief",
                             decision="approve", feedback="good brief",
                             digest=request["digest"])
        assert (decided["status"], decided["decided_by"]) == ("approved", "alice")
        page = await call(client, "read_events", run_id=run_id)
        types = [e["type"] for e in page["events"]]
        assert types[0] == "run.started" and "gate.decided" in types
        newer = await call(client, "read_events", run_id=run_id,
                           after_seq=page["next_after_seq"])
        assert all(e["seq"] > page["next_after_seq"] for e in newer["events"])
        listed = await call(client, "list_runs", kind="validation")
        assert run_id in [r["run_id"] for r in listed["runs"]]

        resource = await client.read_resource(f"waystation://runs/{run_id}")
        assert json.loads(resource.contents[0].text)["run_id"] == run_id  # type: ignore[union-attr]
        snapshot = await client.read_resource(f"waystation://runs/{run_id}/snapshots/latest")
        assert json.loads(snapshot.contents[0].text)["run_id"] == run_id  # type: ignore[union-attr]
        uris = [str(r.uri) for r in (await client.list_resources()).resources]
        assert f"waystation://runs/{run_id}" in uris
        templates = (await client.list_resource_templates()).resource_templates
        assert {t.uri_template for t in templates} == {
            "waystation://runs/{run_id}", "waystation://runs/{run_id}/snapshots/latest",
            "waystation://runs/{run_id}/graph"}
        no_graph = await _resource_error(client, f"waystation://runs/{run_id}/graph")
        assert no_graph["code"] == "graph_not_found"

    # A handshake-era client (2025-11-25) is served the same tools, statelessly.
    async with mcp(api, "alice", mode="legacy") as legacy:
        assert legacy.protocol_version == "2025-11-25"
        assert (await call(legacy, "get_run", run_id=run_id))["run_id"] == run_id
        with pytest.raises(MCPError) as unknown_tool:
            await legacy.call_tool("no_such_tool", {})
        assert unknown_tool.value.error.code == -32602

    # Another user sees none of it, exactly as the REST API hides it.
    async with mcp(api, "mallory") as other:
        assert (await refused(other, "get_run", run_id=run_id))["code"] == "run_not_found"
        assert (await call(other, "list_runs"))["runs"] == []
        assert (await call(other, "list_pending_decisions"))["decisions"] == []
        denied = await refused(other, "decide", run_id=run_id,
                               checkpoint="approve_founders_brief", decision="approve")
        assert denied["code"] == "run_not_found"
        assert (await refused(other, "read_events", run_id=run_id))["code"] == "run_not_found"
        assert (await refused(other, "cancel_run", run_id=run_id))["code"] == "run_not_found"
        assert (await other.list_resources()).resources == []
        hidden = await _resource_error(other, f"waystation://runs/{run_id}")
        assert hidden["code"] == "run_not_found"


async def test_the_readme_s_client_configuration_works_as_shown(api):
    """The README's `mcpServers` block, with this API's address for the default one and a real
    key made as the README shows, in place of its placeholder."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = re.search(r"```json\n(\{\"mcpServers\".*?)```", readme, re.DOTALL)
    assert block is not None, "README shows an MCP client configuration"
    server = json.loads(block[1])["mcpServers"]["waystation"]
    assert server["type"] == "http" and server["url"] == "http://127.0.0.1:8000/mcp"
    async with httpx.AsyncClient(base_url=api.url, headers=auth("alice")) as http:
        made = await http.post("/api-keys", json={"name": "my assistant"})
        assert made.status_code == 201, made.text
    headers = {name: value.replace("wsk_...", made.json()["key"])
               for name, value in server["headers"].items()}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http2, Client(
            streamable_http_client(server["url"].replace("http://127.0.0.1:8000", api.url),
                                   http_client=http2)) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        assert (await call(client, "list_runs", limit=1))["runs"] is not None


async def _resource_error(client: Client, uri: str) -> dict[str, Any]:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    assert caught.value.error.code == -32602
    return caught.value.error.data["error"]  # type: ignore[index]


async def test_unauthenticated_is_401_with_a_challenge(api):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx.AsyncClient(base_url=api.url) as http:
        missing = await http.post("/mcp", json=body)
        assert missing.status_code == 401
        assert missing.headers["WWW-Authenticate"] == "Bearer"
        assert missing.json()["error"]["code"] == "unauthenticated"
        forged = await http.post("/mcp", json=body, headers={"Authorization": "Bearer nope"})
        assert forged.status_code == 401
        assert forged.headers["WWW-Authenticate"] == \
            'Bearer error="invalid_token", error_description="invalid_token"'
        # No identity provider configured: no protected-resource metadata to point at.
        assert (await http.get("/.well-known/oauth-protected-resource/mcp")).status_code == 404


async def test_with_an_identity_provider_401_points_at_the_resource_metadata(settings_kw):
    app = create_app(Settings(**settings_kw, jwks_url="https://id.example/jwks",
                              jwt_audience="waystation", jwt_issuer="https://id.example/",
                              console_url="https://waystation.example"))
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http:
        challenge = await http.post("/mcp", json={})
        assert challenge.status_code == 401
        assert challenge.headers["WWW-Authenticate"] == (
            'Bearer resource_metadata="https://waystation.example/.well-known/'
            'oauth-protected-resource/mcp"')
        for path in ("/.well-known/oauth-protected-resource/mcp",
                     "/.well-known/oauth-protected-resource"):
            metadata = (await http.get(path)).json()
            assert metadata["resource"] == "https://waystation.example/mcp"
            assert metadata["authorization_servers"] == ["https://id.example/"]
            assert metadata["bearer_methods_supported"] == ["header"]


@pytest.fixture
def settings_kw(migrated_url, task_queue) -> dict[str, Any]:
    return {"database_url": migrated_url, "jwt_secret": SECRET,
            "temporal_task_queue": task_queue}


class TaskParams(RequestParams):
    task_id: str
    input_responses: dict[str, Any] | None = None  # tasks/update's


class TaskRequest(Request[TaskParams, str]):
    # The extension routes tasks/* by the task: the SDK mirrors the id into `Mcp-Name`.
    name_param: ClassVar[str | None] = "taskId"


class TaskState(Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task", "complete"] | None = None
    task_id: str
    status: str


class Tasks(ClientExtension):
    """The client half of the tasks extension: declared, and a task result accepted."""

    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=until_finished)]


class CreatedTask(TaskState):
    result_type: Literal["task"] = "task"  # type: ignore[assignment]


async def task_request(client: Any, method: str, task_id: str, *,
                       progress_callback: Any = None, **params: Any) -> Any:
    """tasks/get's task, tasks/result's `CallToolResult`, or the empty acknowledgement of
    tasks/update and tasks/cancel; `progress_callback` hears its progress notifications."""
    session = client if not isinstance(client, Client) else client.session
    request = TaskRequest(method=method, params=TaskParams(task_id=task_id, **params))
    answer = {"tasks/get": TaskState, "tasks/result": CallToolResult}.get(method, EmptyResult)
    return await session.send_request(request, answer, progress_callback=progress_callback)


async def until_finished(task: CreatedTask, ctx: ClaimContext) -> CallToolResult:
    """Polls the task to its end (what a client does for a run with no gate)."""
    async def finished() -> TaskState | None:
        state = await task_request(ctx.session, "tasks/get", task.task_id)
        return state if state.status in ("completed", "failed", "cancelled") else None
    state = await eventually(finished, timeout=60)
    return CallToolResult.model_validate(state.model_extra["result"])  # type: ignore[index]


async def test_a_run_as_a_task_through_its_gate_to_completed(api):
    async with mcp(api, "alice", extensions=[Tasks()]) as client:
        created = await client.session.call_tool(
            "start_run", {"kind": "validation", "input": {
                "entrepreneur_input": IDEA, "gates": ["approve_founders_brief"]}},
            allow_claimed=True)
        assert isinstance(created, CreatedTask) and created.status == "working"
        task_id = created.task_id

        async def asking() -> TaskState | None:
            state = await task_request(client, "tasks/get", task_id)
            return state if state.status == "input_required" else None
        state = await eventually(asking, timeout=40)
        asks = state.model_extra["inputRequests"]  # type: ignore[index]
        (key, ask), = asks.items()
        run = await call(client, "get_run", run_id=task_id)
        assert key == f"decision-{run['pending_decision']['request_id']}"
        assert ask["method"] == "elicitation/create"
        assert ask["params"]["mode"] == "url"
        # The run's page in the console, which signs the person in itself: no token.
        assert ask["params"]["url"] == f"https://waystation.example/#/runs/{task_id}"
        # What decide would take instead, for a client that answers for the person.
        decide = ask["params"]["_meta"]["waystation/decide"]
        assert (decide["tool"], decide["checkpoint"]) == ("decide", "approve_founders_brief")
        assert decide["schema"]["properties"]["decision"]["enum"] == ["approve", "reject"]
        # Accepting the elicitation decides nothing; the decision is the person's.
        await task_request(client, "tasks/update", task_id,
                           input_responses={key: {"action": "accept"}})
        assert (await task_request(client, "tasks/get", task_id)).status == "input_required"
        # No result while the gate waits: refused (after a short wait), naming the status.
        with pytest.raises(MCPError) as unfinished:
            await task_request(client, "tasks/result", task_id)
        assert unfinished.value.error.code == -32600
        assert unfinished.value.error.data == {"taskId": task_id, "status": "input_required"}
        await call(client, "decide", run_id=task_id, checkpoint="approve_founders_brief",
                   decision="approve")
        # tasks/result waits for the rest of the run and answers the finished run.
        answered = await task_request(client, "tasks/result", task_id)
        assert answered.structured_content["status"] == "completed"
        assert answered.structured_content["run_id"] == task_id
        assert answered.meta["io.modelcontextprotocol/related-task"] == {"taskId": task_id}

        async def done() -> TaskState | None:
            state = await task_request(client, "tasks/get", task_id)
            return state if state.status not in ("working", "input_required") else None
        final = await eventually(done, timeout=60)
        assert final.status == "completed"
        result = final.model_extra["result"]  # type: ignore[index]
        assert result["structuredContent"]["status"] == "completed"
        assert result["structuredContent"]["result"] is not None

        # A client following the task transparently: call_tool answers the finished run.
        finished = await client.call_tool("start_run", {"kind": "validation", "input": {
            "entrepreneur_input": IDEA, "gates": []}})
        assert finished.structured_content["status"] == "completed"  # type: ignore[index]

        # tasks/cancel cancels the run.
        waiting = await client.session.call_tool(
            "start_run", {"kind": "validation", "input": {"entrepreneur_input": IDEA}},
            allow_claimed=True)
        assert isinstance(waiting, CreatedTask)
        await task_request(client, "tasks/cancel", waiting.task_id)

        async def cancelled() -> bool:
            state = await task_request(client, "tasks/get", waiting.task_id)
            return state.status == "cancelled"
        await eventually(cancelled, timeout=40)
        with pytest.raises(MCPError) as no_result:
            await task_request(client, "tasks/result", waiting.task_id)
        assert no_result.value.error.data["status"] == "cancelled"  # type: ignore[index]

    async with mcp(api, "mallory", extensions=[Tasks()]) as other:
        for method in ("tasks/get", "tasks/result"):
            with pytest.raises(MCPError) as hidden:
                await task_request(other, method, task_id)
            assert hidden.value.error.code == -32602
            assert hidden.value.error.data["error"]["code"] == "run_not_found"  # type: ignore[index]
    # A client that did not declare the extension gets plain results, and no task methods.
    async with mcp(api, "alice") as plain:
        started = await call(plain, "start_run", kind="validation",
                             input={"entrepreneur_input": IDEA})
        assert set(started) == {"run_id", "workflow_id", "kind", "status", "created", "reused"}
        with pytest.raises(MCPError) as undeclared:
            await task_request(plain, "tasks/get", started["run_id"])
        assert undeclared.value.error.code == -32021


async def test_fork_run_amends_a_decision_through_the_same_service(api):
    async with mcp(api, "alice") as client:
        run_id = await start_validation(client, gates=["approve_founders_brief"])
        await waiting_at(client, run_id, "approve_founders_brief")
        forked = await call(client, "fork_run", run_id=run_id,
                            **{"from": {"checkpoint": "approve_founders_brief"}},
                            decision={"decision": "reject", "feedback": "dentists only"})
        fork = await call(client, "get_run", run_id=forked["run_id"])
        assert fork["forked_from"]["run_id"] == run_id
        assert fork["forked_from"]["decision"]["decision"] == "reject"
        missing = await refused(client, "fork_run", run_id=run_id, **{"from": {"snapshot": 999}})
        assert missing["code"] == "invalid_request" and "from.snapshot" in missing["message"]
    async with mcp(api, "bob") as other:
        hidden = await refused(other, "fork_run", run_id=run_id,
                               **{"from": {"checkpoint": "approve_founders_brief"}})
        assert hidden["code"] == "run_not_found"


async def test_batch_job_progress_items_and_retry_failed(api):
    items = [{"text": "first"}, {"headline": "no text"}, {"text": "third"}]
    async with mcp(api, "alice") as client:
        created = await call(client, "start_run", kind="batch", input={
            "name": "postings", "items": items, "failure_threshold": 0.9, "test_first": False,
            "steps": [{"name": "summarize", "template": "Summarize: {{ item.text }}"}]})
        job_id = created["run_id"]

        async def finished() -> dict[str, Any] | None:
            # The job's row is the workflow's to write: until then it is job_not_found.
            result = await client.call_tool("job_progress", {"job_id": job_id})
            job = result.structured_content
            return job if job and job["status"] == "completed" else None
        job = await eventually(finished, timeout=40)
        assert job["counts"] == {"completed": 2, "failed": 1}
        failed = await call(client, "list_items", job_id=job_id, status="failed")
        assert [i["payload"] for i in failed["items"]] == [items[1]]
        assert failed["items"][0]["error"]
        everything = await call(client, "list_items", job_id=job_id, limit=2)
        assert len(everything["items"]) == 2 and everything["next_cursor"] is not None

        retry = await call(client, "retry_failed", job_id=job_id)
        assert retry["kind"] == "batch" and retry["run_id"] != job_id
        run = await call(client, "get_run", run_id=retry["run_id"])
        assert run["input"]["items"] == [items[1]] and run["input"]["retry_of"] == job_id

    async with mcp(api, "mallory") as other:
        assert (await refused(other, "job_progress", job_id=job_id))["code"] == "job_not_found"
        assert (await refused(other, "retry_failed", job_id=job_id))["code"] == "job_not_found"


async def test_an_agent_run_takes_the_next_message(api):
    async with mcp(api, "priya") as client:
        run_id = (await call(client, "start_run", kind="agent",
                             input={"message": SEARCH}))["run_id"]

        async def waiting() -> bool:
            return (await call(client, "get_run", run_id=run_id))["status"] == "paused"
        await eventually(waiting, timeout=40)
        accepted = await call(client, "send_message", run_id=run_id, text=LIKE)
        assert accepted == {"run_id": run_id, "number": 2, "turn": 2}
        validation = await start_validation(client)
        refusal = await refused(client, "send_message", run_id=validation, text="hello")
        assert refusal["code"] == "not_waiting_for_message"


async def test_an_agent_run_as_a_task_asks_for_its_next_message(api):
    """A conversation waiting for its next message is `input_required` with a form asking
    for it; the accepted form, through tasks/update, is the message (sent once)."""
    async with mcp(api, "priya", extensions=[Tasks()]) as client:
        created = await client.session.call_tool("start_run", {
            "kind": "agent", "input": {"message": SEARCH}}, allow_claimed=True)
        assert isinstance(created, CreatedTask)
        task_id = created.task_id

        async def asking() -> TaskState | None:
            state = await task_request(client, "tasks/get", task_id)
            return state if state.status == "input_required" else None
        state = await eventually(asking, timeout=40)
        assert state.model_extra["statusMessage"] == "waiting for the next message"  # type: ignore[index]
        (key, ask), = state.model_extra["inputRequests"].items()  # type: ignore[index]
        assert key.startswith("message-")
        assert ask["method"] == "elicitation/create" and ask["params"]["mode"] == "form"
        form = ask["params"]["requestedSchema"]
        assert form["required"] == ["text"] and form["properties"]["text"]["type"] == "string"

        # Bad answers are refused, naming where, and send nothing.
        for key_sent, response, where in [
                (key, {"action": "accept", "content": {"text": ""}}, f"inputResponses.{key}.text"),
                (key, {"action": "maybe"}, f"inputResponses.{key}.action"),
                ("vote-1", {"action": "accept"}, "inputResponses.vote-1")]:
            with pytest.raises(MCPError) as bad:
                await task_request(client, "tasks/update", task_id,
                                   input_responses={key_sent: response})
            assert bad.value.error.code == -32602
            assert bad.value.error.data["error"]["message"].startswith(where)  # type: ignore[index]
        # More answers than a task can ask for: refused before any is read.
        many = {f"message-{n}": {"action": "cancel"} for n in range(51)}
        with pytest.raises(MCPError) as too_many:
            await task_request(client, "tasks/update", task_id, input_responses=many)
        assert too_many.value.error.code == -32602
        # A dismissed form sends nothing either.
        await task_request(client, "tasks/update", task_id,
                           input_responses={key: {"action": "cancel"}})
        run = await call(client, "get_run", run_id=task_id)
        assert run["status"] == "paused"

        answer = {key: {"action": "accept", "content": {"text": LIKE}}}
        await task_request(client, "tasks/update", task_id, input_responses=answer)

        async def next_wait() -> TaskState | None:
            state = await task_request(client, "tasks/get", task_id)
            keys = set((state.model_extra or {}).get("inputRequests", {}))
            return state if state.status == "input_required" and keys != {key} else None
        await eventually(next_wait, timeout=40)
        # The answer again, to a request no longer open: refused; the message went once.
        with pytest.raises(MCPError) as closed:
            await task_request(client, "tasks/update", task_id, input_responses=answer)
        assert closed.value.error.data["error"]["code"] == "not_waiting_for_message"  # type: ignore[index]
        async with httpx.AsyncClient(base_url=api.url, headers=auth("priya")) as http:
            transcript = (await http.get(f"/runs/{task_id}/messages")).json()["messages"]
        sent = [m for m in transcript if m["type"] == "message.received"]
        assert [m["text"] for m in sent] == [SEARCH, LIKE]

    async with mcp(api, "mallory", extensions=[Tasks()]) as other:
        with pytest.raises(MCPError) as hidden:
            await task_request(other, "tasks/update", task_id, input_responses=answer)
        assert hidden.value.error.data["error"]["code"] == "run_not_found"  # type: ignore[index]


async def test_a_failed_run_is_a_failed_task(api):
    async with mcp(api, "alice", extensions=[Tasks()]) as client:
        created = await client.session.call_tool("start_run", {"kind": "batch", "input": {
            "name": "doomed", "items": [{"headline": "no text"}], "test_first": False,
            "steps": [{"name": "summarize", "template": "Summarize: {{ item.text }}"}]}},
            allow_claimed=True)
        assert isinstance(created, CreatedTask)

        async def ended() -> TaskState | None:
            state = await task_request(client, "tasks/get", created.task_id)
            return state if state.status not in ("working", "input_required") else None
        state = await eventually(ended, timeout=40)
        assert state.status == "failed"
        error = state.model_extra["error"]  # type: ignore[index]
        assert error["code"] == -32603 and error["data"]["run_id"] == created.task_id
        assert error["data"]["stop_reason"] == "failure_threshold"
        # tasks/result answers the same error.
        with pytest.raises(MCPError) as failed:
            await task_request(client, "tasks/result", created.task_id)
        assert (failed.value.error.code, failed.value.error.data) == (-32603, error["data"])


async def test_a_mobile_run_s_screen_graph_is_a_resource(api):
    async with mcp(api, "alice") as client:
        run_id = (await call(client, "start_run", kind="mobile_agent", input={
            "app_package": NOTES, "max_steps": 10, "sensitive_actions": "skip"}))["run_id"]

        async def finished() -> bool:
            return (await call(client, "get_run", run_id=run_id))["status"] == "completed"
        await eventually(finished, timeout=60)
        graph = await client.read_resource(f"waystation://runs/{run_id}/graph")
        content = json.loads(graph.contents[0].text)  # type: ignore[union-attr]
        assert (content["app_package"], content["run_id"]) == (NOTES, run_id)
        assert content["screens"] and content["edges"]
        assert content["edges"][0]["first_seen_at"][10] == "T"  # ISO 8601, as REST writes it
        # The mobile kind's own filter of list_runs (`ApiHooks.run_filters`), and its field.
        listed = await call(client, "list_runs", app_package=NOTES)
        assert run_id in [r["run_id"] for r in listed["runs"]]
        assert (await call(client, "get_run", run_id=run_id))["app_package"] == NOTES
    async with mcp(api, "mallory") as other:
        hidden = await _resource_error(other, f"waystation://runs/{run_id}/graph")
        assert hidden["code"] == "run_not_found"
        assert (await call(other, "list_runs", app_package=NOTES))["runs"] == []


# --- progress on a running task (issue 43) ------------------------------------------------


async def test_tasks_result_with_a_progress_token_streams_the_answer_as_it_is_written(
        migrated_url, dev_env, pool, task_queue, monkeypatch):
    """A `tasks/result` with a progressToken is answered on an SSE stream: the planner's
    answer so far arrives as `notifications/progress` messages while the offline model writes,
    the last one the answer the run keeps, and the call ends once the run asks for its next
    message. It is an open stream of its caller (one allowed here); every other request stays
    JSON; another user gets no progress of the run, only "not found"."""
    monkeypatch.setenv("WAYSTATION_OFFLINE_TOKEN_MS", "25")  # a model that takes a while
    priya = f"priya-{uuid.uuid4().hex[:6]}"
    content_types: dict[str, str] = {}

    async def seen(response: httpx2.Response) -> None:
        body = json.loads(response.request.content or b"{}")
        if isinstance(body, dict) and "method" in body:
            content_types[body["method"]] = response.headers.get("content-type", "")

    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        max_streams_per_user=1) as api, \
            httpx2.AsyncClient(headers=auth(priya), timeout=30,
                               event_hooks={"response": [seen]}) as http, \
            Client(streamable_http_client(f"{api.url}/mcp", http_client=http),
                   extensions=[Tasks()]) as client:
        created = await client.session.call_tool("start_run", {
            "kind": "agent", "input": {"message": SEARCH}}, allow_claimed=True)
        assert isinstance(created, CreatedTask)
        told: list[tuple[float, str | None]] = []

        async def progress(at: float, total: float | None, message: str | None) -> None:
            told.append((at, message))
        began = time.monotonic()
        with pytest.raises(MCPError) as paused:
            await task_request(client, "tasks/result", created.task_id,
                               progress_callback=progress)
        # Ended by the run's pause for its next message, not by the wait's limit.
        assert paused.value.error.data["status"] == "input_required"  # type: ignore[index]
        assert time.monotonic() - began < 20  # the wait's limit is 60 s
        assert content_types["tasks/result"].startswith("text/event-stream")
        assert content_types["tools/call"].startswith("application/json")

        texts = [text for _, text in told]
        assert len(texts) > 3, texts
        assert [at for at, _ in told] == sorted({at for at, _ in told})  # increasing
        assert all(text and later.startswith(text)
                   for text, later in zip(texts, texts[1:], strict=False))
        async with httpx.AsyncClient(base_url=api.url, headers=auth(priya)) as rest:
            transcript = (await rest.get(f"/runs/{created.task_id}/messages")).json()
        [answer] = [m["text"] for m in transcript["messages"] if m["type"] == "agent.answered"]
        assert texts[-1] == answer

        # Without a progress token: plain JSON, as before.
        with pytest.raises(MCPError):
            await task_request(client, "tasks/result", created.task_id)
        assert content_types["tasks/result"].startswith("application/json")

        # The stream counts against the caller's open streams: with one held, refused.
        async with httpx.AsyncClient(base_url=api.url, headers=auth(priya), timeout=30) as rest, \
                rest.stream("GET", f"/runs/{created.task_id}/events/stream") as held:
            assert held.status_code == 200
            with pytest.raises(MCPError) as limited:
                await task_request(client, "tasks/result", created.task_id,
                                   progress_callback=progress)
            assert limited.value.error.data["error"]["code"] == "rate_limited"  # type: ignore[index]

        async with mcp(api, "mallory", extensions=[Tasks()]) as other:
            heard: list[str | None] = []

            async def overheard(at: float, total: float | None, message: str | None) -> None:
                heard.append(message)
            with pytest.raises(MCPError) as hidden:
                await task_request(other, "tasks/result", created.task_id,
                                   progress_callback=overheard)
            assert hidden.value.error.data["error"]["code"] == "run_not_found"  # type: ignore[index]
            assert heard == []
