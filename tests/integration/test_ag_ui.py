"""`POST /ag-ui/{kind}` against the real app under uvicorn, the dev server and Postgres: a
validation run from a fresh thread to its first interrupt, resumed to the next; every event
parsed back with the `ag-ui-protocol` models; resumption by `Last-Event-ID` exact; refusals as
RUN_ERROR with the REST API's codes and nothing written; 401 and 404 before any stream."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest_asyncio
from ag_ui.core import Event
from pydantic import TypeAdapter

from tests.agent_helpers import BOOK, SEARCH
from tests.console_helpers import login_path
from tests.helpers import IDEA, live_api
from waystation.api.auth import issue_token
from waystation.api.decision_payload import payload_schema
from waystation.api.schemas import DecisionView

SECRET = "ag-ui-test-secret-0123456789-0123456789-abc"
EVENT = TypeAdapter(Event)


@dataclass
class Sent:
    id: str
    event: dict[str, Any]


@pytest_asyncio.fixture
async def http(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[httpx.AsyncClient]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        sse_heartbeat_seconds=1.0, console_cookie_secure=False,
                        cors_origins="http://frontend.test") as api, \
            httpx.AsyncClient(base_url=api.url, timeout=60, headers=auth("ana")) as client:
        yield client


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user)}"}  # type: ignore[arg-type]


def run_input(thread: str, **fields: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": str(uuid.uuid4()), "messages": [], "state": {},
            "tools": [], "context": [], **fields}


async def ag_ui(http: httpx.AsyncClient, kind: str, body: dict[str, Any], *,
                last_event_id: str | None = None, headers: dict[str, str] | None = None,
                stop_after: int | None = None) -> list[Sent]:
    """The AG-UI events of one POST, each parsed back with the protocol's models."""
    sent: list[Sent] = []
    extra = {**(headers or {}), **({"Last-Event-ID": last_event_id} if last_event_id else {})}
    async with http.stream("POST", f"/ag-ui/{kind}", json=body, headers=extra) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        buffer = ""
        async for chunk in response.aiter_text():
            buffer += chunk
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                fields = dict(line.split(": ", 1) for line in block.splitlines()
                              if not line.startswith(":"))
                if "data" not in fields:
                    continue
                data = json.loads(fields["data"])
                EVENT.validate_python(data)  # every event is an AG-UI 1.0 event
                sent.append(Sent(fields["id"], data))
                if stop_after is not None and len(sent) >= stop_after:
                    return sent
    return sent


def finished(sent: list[Sent]) -> dict[str, Any]:
    assert sent[0].event["type"] == "RUN_STARTED"
    assert sent[-1].event["type"] in ("RUN_FINISHED", "RUN_ERROR"), sent[-1]
    return sent[-1].event


def interrupts(sent: list[Sent]) -> list[dict[str, Any]]:
    end = finished(sent)
    assert end["type"] == "RUN_FINISHED" and end["outcome"]["type"] == "interrupt", end
    return end["outcome"]["interrupts"]


async def test_validation_thread_to_an_interrupt_resumed_to_the_next(http):
    thread = str(uuid.uuid4())
    first = await ag_ui(http, "validation", run_input(
        thread, forwardedProps={"input": {"entrepreneur_input": IDEA}}))
    types = [s.event["type"] for s in first]
    assert types[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert "STEP_STARTED" in types and "STEP_FINISHED" in types and "STATE_SNAPSHOT" in types
    assert any(s.event["type"] == "CUSTOM" and s.event["name"] == "waystation.run.started"
               for s in first)
    [gate] = interrupts(first)
    request = (await http.get(f"/runs/{thread}")).json()["pending_decision"]
    assert gate["id"] == request["request_id"] and gate["reason"] == "confirmation"
    assert gate["message"].startswith(request["title"])
    assert gate["responseSchema"] == payload_schema(DecisionView.model_validate(request))
    assert gate["metadata"]["digest"] == request["digest"]
    assert gate["metadata"]["checkpoint"] == "approve_founders_brief"
    assert gate["expiresAt"] == request["expires_at"].replace("Z", "+00:00") \
        or gate["expiresAt"].startswith(request["expires_at"][:19])
    # Ids: the run events' seqs, in order, each AG-UI event of one run event but the last `seq.n`.
    ids = [s.id for s in first[2:] if s.event["type"] not in ("RUN_FINISHED",)]
    assert ids == sorted(ids, key=lambda i: (int(i.split(".")[0]), "." not in i, i))

    second = await ag_ui(http, "validation", run_input(thread, resume=[{
        "interruptId": gate["id"], "status": "resolved",
        "payload": {"decision": "approve", "feedback": "go", "digest": gate["metadata"]["digest"]},
    }]))
    [after] = interrupts(second)
    assert after["id"] != gate["id"] and after["metadata"]["checkpoint"] == "approve_vpc_completion"
    assert [s.event["type"] for s in second[:3]] == ["RUN_STARTED", "MESSAGES_SNAPSHOT",
                                                      "STATE_SNAPSHOT"]
    decided = [s.event for s in second if s.event.get("name") == "waystation.gate.decided"]
    assert decided and decided[0]["value"]["output"]["decided_by"] == "ana"
    assert any(s.event["type"] == "STATE_DELTA" for s in second)
    votes = (await http.get(f"/runs/{thread}/decisions")).json()["decisions"][0]
    assert votes["decision"] == "approve" and votes["feedback"] == "go"

    # Resumable: from any id, the rest of the thread exactly (nothing missing or repeated).
    whole = await ag_ui(http, "validation", run_input(thread), last_event_id="0")
    body = [s for s in whole if s.event["type"] not in ("RUN_STARTED", "RUN_FINISHED")]
    for cut in (3, len(body) // 2, len(body) - 2):
        rest = await ag_ui(http, "validation", run_input(thread), last_event_id=body[cut].id)
        assert [same(s) for s in run_events(rest, body[cut].id)] == \
            [same(s) for s in body[cut + 1:]]

    # `cancelled` rejects, through the same decide path (the feedback goes with it): the phase
    # runs again and asks anew.
    rejected = await ag_ui(http, "validation", run_input(thread, resume=[{
        "interruptId": after["id"], "status": "cancelled",
        "payload": {"feedback": "aim at dentists"}}]))
    [again] = interrupts(rejected)
    assert again["id"] != after["id"]
    assert again["metadata"]["checkpoint"] == "approve_vpc_completion"
    request = next(d for d in (await http.get(f"/runs/{thread}/decisions")).json()["decisions"]
                   if d["request_id"] == after["id"])
    assert (request["status"], request["decision"], request["feedback"],
            request["decided_by"]) == ("rejected", "reject", "aim at dentists", "ana")


def run_events(sent: list[Sent], start: str) -> list[Sent]:
    """What a stream sent for run events: not the framing that keeps one AG-UI run
    well-formed (RUN_STARTED, a step re-opened, ...), which repeats the id before it."""
    found, last = [], start
    for each in sent:
        if each.id != last:
            found.append(each)
        last = each.id
    return found


def same(sent: Sent) -> tuple[str, Any]:
    """An event as resumption must repeat it: a resumed stream's first state is whole."""
    if sent.event["type"] in ("STATE_SNAPSHOT", "STATE_DELTA"):
        return sent.id, "STATE"
    return sent.id, sent.event


async def test_batch_and_mobile_kinds_run_over_ag_ui(http):
    """A new thread of the built-in kinds the other tests do not take (validation and agent
    are above and below; the content_review plug-in's gate is in its example's tests): a batch
    job's failed item is a step and its failure a RUN_ERROR; a mobile exploration's steps are
    steps."""
    job = await ag_ui(http, "batch", run_input(str(uuid.uuid4()), forwardedProps={"input": {
        "name": "one fails", "items": [{"text": "a"}, {"other": "b"}], "test_first": False,
        "steps": [{"name": "s", "template": "Summarize: {{ item.text }}"}]}}))
    steps = [(s.event["type"], s.event["stepName"]) for s in job
             if s.event["type"].startswith("STEP_")]
    assert steps == [("STEP_STARTED", "item 1"), ("STEP_FINISHED", "item 1")]
    assert finished(job)["code"] == "run_failed"

    explored = await ag_ui(http, "mobile_agent", run_input(str(uuid.uuid4()), forwardedProps={
        "input": {"app_package": "com.waystation.sample.shop", "max_steps": 4}}))
    started = [s.event["stepName"] for s in explored if s.event["type"] == "STEP_STARTED"]
    assert started and all(name.startswith("step ") for name in started), started
    assert finished(explored)["outcome"]["type"] == "success"


async def test_malformed_input_is_a_422_in_the_one_error_shape(http):
    for body in ({}, {"threadId": 1}, {**run_input(str(uuid.uuid4())),
                                       "messages": [{"role": "robot"}]}):
        response = await http.post("/ag-ui/validation", json=body)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "invalid_request"
    not_json = await http.post("/ag-ui/validation", content=b"{",
                               headers={"Content-Type": "application/json"})
    assert not_json.status_code == 422 and not_json.json()["error"]["code"] == "invalid_request"
    bad_id = await http.post("/ag-ui/validation", json=run_input(str(uuid.uuid4())),
                             headers={"Last-Event-ID": "seven"})
    assert bad_id.status_code == 422 and bad_id.json()["error"]["code"] == "invalid_request"


async def test_refusals_are_run_errors_with_the_api_codes_and_write_nothing(http, pool):
    thread = str(uuid.uuid4())
    [gate] = interrupts(await ag_ui(http, "validation", run_input(
        thread, forwardedProps={"input": {"entrepreneur_input": IDEA}})))
    before = (await http.get(f"/runs/{thread}")).json()
    digest = gate["metadata"]["digest"]
    refused = {
        "interrupt_not_found": {"interruptId": str(uuid.uuid4()), "status": "resolved",
                                "payload": {"decision": "approve"}},
        "stale_request": {"interruptId": gate["id"], "status": "resolved",
                          "payload": {"decision": "approve", "digest": "0" * 64}},
        "unknown_option": {"interruptId": gate["id"], "status": "resolved",
                           "payload": {"decision": "maybe", "digest": digest}},
        "invalid_request": {"interruptId": gate["id"], "status": "resolved",
                            "payload": {"decision": "approve", "colour": "blue"}},
    }
    for code, entry in refused.items():
        sent = await ag_ui(http, "validation", run_input(thread, resume=[entry]))
        end = finished(sent)
        assert end["type"] == "RUN_ERROR" and end["code"] == code, (code, end)
    after = (await http.get(f"/runs/{thread}")).json()
    assert after["last_seq"] == before["last_seq"]
    assert after["pending_decision"]["votes"] == []

    # Refused before any stream: the API's one error shape.
    async def post(kind: str, body: dict[str, Any], headers: dict[str, str] | None = None):
        return await http.post(f"/ag-ui/{kind}", json=body, headers=headers)
    unknown_kind = await post("nope", run_input(thread))
    assert unknown_kind.status_code == 404 and unknown_kind.json()["error"]["code"] == \
        "kind_not_found"
    for missing in (str(uuid.uuid4()), "not-a-uuid"):
        response = await post("validation", run_input(missing))
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "run_not_found"
    foreign = await post("validation", run_input(thread), headers=auth("mallory"))
    assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "run_not_found"
    # Nor can another user take the thread id to start a run of their own.
    taken = await post("validation", run_input(
        thread, forwardedProps={"input": {"entrepreneur_input": IDEA}}),
        headers=auth("mallory"))
    assert taken.status_code == 404 and taken.json()["error"]["code"] == "run_not_found"
    wrong_kind = await post("agent", run_input(thread))
    assert wrong_kind.status_code == 404
    bad_input = await post("validation", run_input(str(uuid.uuid4()),
                                                   forwardedProps={"input": {"idea": 1}}))
    assert bad_input.status_code == 422
    assert bad_input.json()["error"]["message"].startswith("body.forwardedProps.input")
    anonymous = await http.post("/ag-ui/validation", json=run_input(thread),
                                headers={"Authorization": ""})
    assert anonymous.status_code == 401
    # The console's session cookie signs in as everywhere, its POSTs with the CSRF token.
    async with httpx.AsyncClient(base_url=str(http.base_url), timeout=30) as browser:
        signed_in = await browser.get(await login_path(pool, "ana"))
        assert signed_in.status_code == 303, signed_in.text
        csrf = (await browser.get("/console/session")).json()["csrf_token"]
        forged = await browser.post("/ag-ui/validation", json=run_input(thread))
        assert forged.status_code == 403 and forged.json()["error"]["code"] == "csrf_failed"
        [same] = interrupts(await ag_ui(browser, "validation", run_input(thread),
                                        headers={"X-CSRF-Token": csrf}))
        assert same["id"] == gate["id"]
    # A browser frontend on another origin (WAYSTATION_CORS_ORIGINS) may call it.
    preflight = await http.options("/ag-ui/validation", headers={
        "Origin": "http://frontend.test", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,last-event-id"})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "http://frontend.test"
    assert "access-control-allow-credentials" not in preflight.headers  # bearer tokens only


async def test_a_vote_short_of_the_quorum_leaves_the_interrupt_open(http):
    thread = str(uuid.uuid4())
    [gate] = interrupts(await ag_ui(http, "validation", run_input(thread, forwardedProps={
        "input": {"entrepreneur_input": IDEA},
        "gates": {"approve_founders_brief": {"quorum": 2}}})))
    assert gate["metadata"]["quorum"] == 2
    voted = await ag_ui(http, "validation", run_input(thread, resume=[{
        "interruptId": gate["id"], "status": "resolved", "payload": {"decision": "approve"}}]))
    [still] = interrupts(voted)
    assert still["id"] == gate["id"] and still["metadata"]["votes"] == 1
    assert any(s.event.get("name") == "waystation.gate.voted" for s in voted)
    # A second resume entry for an unknown request: nothing of the request is applied.
    again = await ag_ui(http, "validation", run_input(thread, resume=[
        {"interruptId": gate["id"], "status": "cancelled"},
        {"interruptId": str(uuid.uuid4()), "status": "resolved"}]))
    assert finished(again)["code"] == "interrupt_not_found"
    request = (await http.get(f"/runs/{thread}")).json()["pending_decision"]
    assert [v["option"] for v in request["votes"]] == ["approve"]


async def test_agent_tool_call_approved_with_an_edit(http):
    thread = str(uuid.uuid4())
    first = await ag_ui(http, "agent", run_input(
        thread, forwardedProps={"input": {"agent": "planner", "message": BOOK}}))
    [approval] = interrupts(first)
    calls = [s.event for s in first if s.event["type"] == "TOOL_CALL_START"]
    assert approval["reason"] == "tool_call"
    assert approval["toolCallId"] in [c["toolCallId"] for c in calls]
    user = [s.event for s in first if s.event["type"] == "TEXT_MESSAGE_START"]
    assert user[0]["role"] == "user"
    edited = dict(approval["metadata"]["answerInitial"], guests=150)
    second = await ag_ui(http, "agent", run_input(thread, resume=[{
        "interruptId": approval["id"], "status": "resolved",
        "payload": {"decision": "edit", "answer": edited}}]))
    end = finished(second)
    assert end["type"] == "RUN_FINISHED" and end["outcome"]["type"] == "success", end
    results = [s.event for s in second if s.event["type"] == "TOOL_CALL_RESULT"]
    assert any(r["toolCallId"] == approval["toolCallId"] for r in results)
    answer = [s.event for s in second if s.event["type"] == "TEXT_MESSAGE_START"
              and s.event["role"] == "assistant"]
    assert answer
    snapshot = [s.event for s in second if s.event["type"] == "MESSAGES_SNAPSHOT"][0]
    assert [m["role"] for m in snapshot["messages"]][:1] == ["user"]
    decided = (await http.get(f"/runs/{thread}/decisions")).json()["decisions"][0]
    assert decided["decision"] == "edit" and decided["answer"]["guests"] == 150

    # The next message: the client's last user message is sent to the run.
    third = await ag_ui(http, "agent", run_input(thread, messages=[
        {"id": "client-1", "role": "user", "content": "Thanks, that is all"}]))
    assert finished(third)["type"] == "RUN_FINISHED"
    said = [s.event for s in third if s.event["type"] == "TEXT_MESSAGE_CONTENT"]
    assert said[0]["delta"] == "Thanks, that is all"

    # A chat frontend's new thread: the kind's input without a message, the user's message in
    # `messages`; it becomes the run's first message.
    chat = str(uuid.uuid4())
    answered = await ag_ui(http, "agent", run_input(
        chat, forwardedProps={"input": {"agent": "planner"}},
        messages=[{"id": "client-2", "role": "user", "content": SEARCH}]))
    assert finished(answered)["outcome"]["type"] == "success"
    starts = [s.event["role"] for s in answered if s.event["type"] == "TEXT_MESSAGE_START"]
    assert starts[0] == "user" and starts[-1] == "assistant"


async def test_a_key_revoked_mid_stream_gets_nothing_more(migrated_url, dev_env, pool,
                                                         task_queue):
    """The access wall of every stream (docs/security.md) holds for an AG-UI run: a personal
    API key still reads its maker's runs through row-level security, so only the stream's own
    re-check ends it. Slow tasks keep the stream open and heartbeats are 30 s: a stream that
    ends within 2.5 s of the revocation was ended by the access notice."""
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET, delay_ms=1500,
                        sse_heartbeat_seconds=30.0, max_streams_per_user=1) as api, \
            httpx.AsyncClient(base_url=api.url, timeout=60, headers=auth(alice)) as http:
        key = (await http.post("/api-keys", json={"name": "ag-ui"})).json()
        thread = str(uuid.uuid4())
        [gate] = interrupts(await ag_ui(http, "validation", run_input(
            thread, forwardedProps={"input": {"entrepreneur_input": IDEA}})))

        received: list[str] = []
        decided = asyncio.Event()

        async def follow() -> None:
            body = run_input(thread, resume=[{"interruptId": gate["id"], "status": "resolved",
                                              "payload": {"decision": "approve"}}])
            async with http.stream("POST", "/ag-ui/validation", json=body, headers={
                    "Authorization": f"Bearer {key['key']}"}) as response:
                async for line in response.aiter_lines():
                    received.append(line)
                    if "waystation.gate.decided" in line:
                        decided.set()

        with_key = asyncio.create_task(follow())
        await asyncio.wait_for(decided.wait(), timeout=30)
        # An AG-UI run is an open stream for the per-caller limit (one here).
        second = await http.post("/ag-ui/validation", json=run_input(thread), headers={
            "Authorization": f"Bearer {key['key']}"})
        assert second.status_code == 429 and second.json()["error"]["code"] == "rate_limited"
        revoked = await http.delete(f"/api-keys/{key['key_id']}")
        assert revoked.status_code == 204, revoked.text
        at_revocation = (await http.get(f"/runs/{thread}")).json()["last_seq"]
        await asyncio.wait_for(with_key, timeout=2.5)
        ids = [int(line[4:].split(".")[0]) for line in received if line.startswith("id: ")]
        assert max(ids) <= at_revocation
        assert not any('"RUN_FINISHED"' in line for line in received)
        assert (await http.get(f"/runs/{thread}")).json()["status"] == "running"
