"""The agent run kind over HTTP: dev server, real Postgres, the real app under uvicorn, an
in-process worker with the offline planner."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio

from tests.agent_helpers import BOOK, FOLLOW_UP, LIKE, SEARCH
from tests.helpers import eventually, live_api
from tests.sse_client import sse_events
from waystation.api.auth import issue_token

SECRET = "agent-api-secret-0123456789-0123456789-abc"
ROOT = Path(__file__).resolve().parents[2]


@pytest_asyncio.fixture
async def http(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[httpx.AsyncClient]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        sse_heartbeat_seconds=1.0) as api, \
            httpx.AsyncClient(base_url=api.url, timeout=30, headers=auth("priya")) as client:
        yield client


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user)}"}  # type: ignore[arg-type]


async def start_agent(http: httpx.AsyncClient, **fields) -> str:
    response = await http.post("/runs", json={"kind": "agent", "input": fields})
    assert response.status_code == 201, response.text
    return response.json()["run_id"]


async def waiting_for_message(http: httpx.AsyncClient, run_id: str, answers: int) -> list:
    """The transcript once the run has answered `answers` times and waits (paused)."""
    async def check():
        run = (await http.get(f"/runs/{run_id}")).json()
        page = (await http.get(f"/runs/{run_id}/messages", params={"limit": 500})).json()
        done = [m for m in page["messages"] if m["type"] == "agent.answered"]
        return page if run["status"] == "paused" and len(done) == answers else None
    return await eventually(check)


async def pending_approval(http: httpx.AsyncClient, run_id: str) -> dict:
    async def check():
        run = (await http.get(f"/runs/{run_id}")).json()
        return run if (run["pending_checkpoint"] or "").startswith("approve_") else None
    return await eventually(check)


async def say(http: httpx.AsyncClient, run_id: str, text: str) -> httpx.Response:
    return await http.post(f"/runs/{run_id}/messages", json={"text": text})


async def test_conversation_over_http_with_paging_and_409s(http):
    unknown = await http.post("/runs", json={"kind": "agent", "input": {"agent": "nobody"}})
    assert unknown.status_code == 422
    # The registered agents, listed (other tests of this process register theirs too).
    listed = unknown.json()["error"]["message"].split("unknown agent 'nobody'; one of ", 1)
    assert len(listed) == 2 and "planner" in listed[1].split(", ")

    run_id = await start_agent(http, message=SEARCH)
    await waiting_for_message(http, run_id, answers=1)
    accepted = await say(http, run_id, LIKE)
    assert accepted.status_code == 202, accepted.text
    assert accepted.json() == {"run_id": run_id, "number": 2, "turn": 2}
    # While it works on that message, another is refused and nothing is recorded for it (the
    # offline model may also have answered already: then it is simply the next message).
    racing = await say(http, run_id, "and another thing")
    assert racing.status_code in (202, 409)
    if racing.status_code == 409:
        assert racing.json()["error"]["code"] == "not_waiting_for_message"
    page = await waiting_for_message(http, run_id, answers=2 if racing.status_code == 409 else 3)
    texts = [m["text"] for m in page["messages"] if m["type"] == "message.received"]
    assert texts == [SEARCH, LIKE] + (["and another thing"] if racing.status_code == 202 else [])
    assert "Old Mill Barn (v-venue-02)" in page["context_summary"]
    run = (await http.get(f"/runs/{run_id}")).json()
    assert run["context_summary"] == page["context_summary"]
    answers = [m for m in page["messages"] if m["type"] == "agent.answered"]
    events = (await http.get(f"/runs/{run_id}/events", params={"limit": 1000})).json()["events"]
    total = next(e["output"]["total_usage"] for e in reversed(events)
                 if e["type"] == "agent.answered")
    assert answers and run["input_tokens"] == total["input_tokens"] > 0
    assert run["output_tokens"] == total["output_tokens"] > 0

    everything = page["messages"]
    roles = [(m["role"], m["type"]) for m in everything[:4]]
    assert roles == [("user", "message.received"), ("tool", "tool.called"),
                     ("tool", "tool.returned"), ("agent", "agent.answered")]
    # Paging: after_seq and limit walk the same transcript.
    walked, after = [], 0
    while True:
        chunk = (await http.get(f"/runs/{run_id}/messages",
                                params={"after_seq": after, "limit": 3})).json()
        if not chunk["messages"]:
            break
        assert len(chunk["messages"]) <= 3
        walked += chunk["messages"]
        after = chunk["next_after_seq"]
    assert [m["seq"] for m in walked] == [m["seq"] for m in everything]
    bad_page = await http.get(f"/runs/{run_id}/messages", params={"limit": 501})
    assert bad_page.status_code == 422

    # Somebody else's run is not theirs to see or talk to.
    stranger = await http.post(f"/runs/{run_id}/messages", json={"text": "hi"},
                               headers=auth("mallory"))
    assert stranger.status_code == 404
    await http.post(f"/runs/{run_id}/cancel")


async def test_messages_refused_where_no_message_is_awaited(http):
    validation = await http.post("/runs", json={"kind": "validation", "input": {
        "entrepreneur_input": "A marketplace for wedding vendors in Bangalore"}})
    assert validation.status_code == 201
    refused = await say(http, validation.json()["run_id"], "hello")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "not_waiting_for_message"
    await http.post(f"/runs/{validation.json()['run_id']}/cancel")

    run_id = await start_agent(http, message=BOOK)
    await pending_approval(http, run_id)
    at_gate = await say(http, run_id, "hello")
    assert at_gate.status_code == 409
    assert "waits for an approval" in at_gate.json()["error"]["message"]
    empty = await http.post(f"/runs/{run_id}/messages", json={"text": ""})
    assert empty.status_code == 422
    await http.post(f"/runs/{run_id}/cancel")

    async def canceled():
        return (await http.get(f"/runs/{run_id}")).json()["status"] == "canceled"
    await eventually(canceled)
    finished = await say(http, run_id, "hello")
    assert finished.status_code == 409 and finished.json()["error"]["code"] == "run_finished"


async def test_stream_followed_to_an_approval_then_an_edit_decided_over_http(http):
    run_id = await start_agent(http, message=BOOK)
    seen = []
    async with http.stream("GET", f"/runs/{run_id}/events/stream") as response:
        assert response.status_code == 200
        async for event in sse_events(response):
            seen.append(event)
            if event.event == "gate.opened":
                break
    types = [e.event for e in seen]
    assert types[:2] == ["run.started", "message.received"]
    assert "tool.called" in types and types[-1] == "gate.opened"
    durable = [e for e in seen if e.event != "message.delta"]  # deltas: outside the seq
    assert [e.id for e in durable] == list(range(1, len(durable) + 1))

    run = await pending_approval(http, run_id)
    gate, pending = run["pending_checkpoint"], run["pending_decision"]
    assert gate == "approve_book_vendor_1"
    assert pending["context"]["tool"] == "book_vendor"
    assert pending["context"]["arguments"] == {"vendor_id": "v-venue-03", "date": "2027-02-14",
                                               "guests": 200}
    assert {o["value"]: o["answer"] for o in pending["options"]} == {
        "approve": "none", "reject": "none", "edit": "required"}
    # The edit is a typed answer: the tool's schema, the call's arguments offered to edit.
    assert pending["answer_schema"]["properties"]["guests"]["type"] == "integer"
    assert pending["answer_initial"] == pending["context"]["arguments"]

    bad = await http.post(f"/runs/{run_id}/decisions/{gate}", json={
        "decision": "edit", "digest": pending["digest"],
        "arguments": {"vendor_id": "v-venue-03", "date": "2027-02-14", "guests": "many"}})
    assert bad.status_code == 422, bad.text
    assert bad.json()["error"]["code"] == "invalid_answer"
    assert bad.json()["error"]["message"].startswith("answer.guests:")
    assert bad.json()["error"]["details"] == [{"path": "answer.guests"}]
    # Nothing applied: the gate is still open, with the same request.
    still = (await http.get(f"/runs/{run_id}")).json()
    assert still["pending_checkpoint"] == gate
    assert still["pending_decision"]["digest"] == pending["digest"]

    edited = await http.post(f"/runs/{run_id}/decisions/{gate}", json={
        "decision": "edit", "digest": pending["digest"], "feedback": "fewer guests",
        "arguments": {"vendor_id": "v-venue-03", "date": "2027-02-14", "guests": 150}})
    assert edited.status_code == 200, edited.text
    page = await waiting_for_message(http, run_id, answers=1)
    answer = [m for m in page["messages"] if m["type"] == "agent.answered"][-1]
    assert answer["text"].startswith("Booked Rosewood Estate for 150 guests")
    returned = [m["result"] for m in page["messages"] if m["type"] == "tool.returned"]
    assert returned[-1]["guests"] == 150
    events = (await http.get(f"/runs/{run_id}/events", params={"limit": 1000})).json()["events"]
    decided = [e["output"] for e in events if e["type"] == "gate.decided"]
    assert decided[0]["decision"] == "edit" and decided[0]["answer"]["guests"] == 150
    audit = (await http.get(f"/runs/{run_id}/decisions")).json()["decisions"][0]
    assert audit["answer"]["guests"] == 150 and audit["votes"][0]["answer"]["guests"] == 150
    await http.post(f"/runs/{run_id}/cancel")


async def test_a_model_calling_an_unknown_tool_is_told_and_the_run_carries_on(http):
    run_id = await start_agent(http, message="Compare Old Mill Barn and Rosewood Estate")
    page = await waiting_for_message(http, run_id, answers=1)
    told = [m for m in page["messages"] if m["type"] == "tool.retry"]
    assert [m["tool"] for m in told] == ["compare_vendors"]
    assert "Unknown tool name: 'compare_vendors'" in told[0]["result"]
    assert page["messages"][-1]["text"].startswith("I could not use compare_vendors")
    assert (await say(http, run_id, SEARCH)).status_code == 202
    await waiting_for_message(http, run_id, answers=2)
    await http.post(f"/runs/{run_id}/cancel")


async def test_demo_walks_the_planner_to_the_book_vendor_approval(http, tmp_path):
    # A child process, as a person runs it: the API serves on this test's event loop.
    demo = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "waystation", "demo", "--kind", "agent",
        "--api", str(http.base_url), "--token", issue_token(SECRET, "priya"),  # type: ignore[arg-type]
        cwd=ROOT, env={**os.environ, "WAYSTATION_DATA_DIR": str(tmp_path)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out = (await asyncio.wait_for(demo.communicate(), 60))[0].decode()
    assert demo.returncode == 0, out
    assert "agent.answered" in out and "sent: Book Rosewood Estate" in out
    # The answers are printed as the model writes them (`message.delta`), then whole.
    assert "        writing: I found 3: " in out
    # Issue 43's follow-up: the question is answered from the conversation, not booked.
    follow_up = out.partition(f"sent: {FOLLOW_UP}")[2]
    assert follow_up.split("planner: ", 1)[1].startswith(
        "I shortlisted Old Mill Barn (v-venue-02), Banyan Courtyard (v-venue-01), Rosewood "
        "Estate (v-venue-03). Nothing is booked yet")
    assert "Checkpoint:      approve_book_vendor_1" in out
    edit = next(line for line in out.splitlines() if '"decision": "edit"' in line)
    assert '"guests": 150' in edit and '"vendor_id": "v-venue-03"' in edit
    run_id = out.split("Run id:", 1)[1].split()[0]
    run = (await http.get(f"/runs/{run_id}")).json()
    assert run["pending_checkpoint"] == "approve_book_vendor_1"
    await http.post(f"/runs/{run_id}/cancel")


async def test_two_members_of_a_group_carry_one_conversation_on(http):
    """Seed 003: the bride starts planning; the planner, another member of the wedding's
    group, comes back later and carries the same conversation on; a viewer may only read."""
    group = await http.post("/groups", json={"name": "Priya's wedding"})
    assert group.status_code == 201, group.text
    group_id = group.json()["group_id"]
    for user, role in (("rohan", "approver"), ("auntie", "viewer")):
        added = await http.post(f"/groups/{group_id}/members", json={"user": user, "role": role})
        assert added.status_code == 201, added.text
    started = await http.post("/runs", json={"kind": "agent", "group_id": group_id,
                                             "input": {"message": SEARCH}})
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    await waiting_for_message(http, run_id, answers=1)

    rohan = {"headers": auth("rohan")}
    carried = await http.post(f"/runs/{run_id}/messages", json={"text": LIKE}, **rohan)
    assert carried.status_code == 202, carried.text
    page = await waiting_for_message(http, run_id, answers=2)
    received = [m for m in page["messages"] if m["type"] == "message.received"]
    assert [m["text"] for m in received] == [SEARCH, LIKE]
    assert "Old Mill Barn (v-venue-02)" in page["context_summary"]
    # Rohan reads the same transcript; the viewer reads it but may not talk; a stranger
    # sees nothing.
    as_rohan = (await http.get(f"/runs/{run_id}/messages", params={"limit": 500},
                               **rohan)).json()
    assert [m["seq"] for m in as_rohan["messages"]] == [m["seq"] for m in page["messages"]]
    assert (await http.get(f"/runs/{run_id}", headers=auth("auntie"))).status_code == 200
    viewer = await http.post(f"/runs/{run_id}/messages", json={"text": "hello"},
                             headers=auth("auntie"))
    assert viewer.status_code == 403
    stranger = await http.get(f"/runs/{run_id}", headers=auth("mallory"))
    assert stranger.status_code == 404
    await http.post(f"/runs/{run_id}/cancel")


async def wedding_group(http: httpx.AsyncClient) -> str:
    """Priya's wedding, with Rohan as a member who may start runs and talk to them."""
    group = await http.post("/groups", json={"name": "Priya's wedding"})
    assert group.status_code == 201, group.text
    group_id = group.json()["group_id"]
    added = await http.post(f"/groups/{group_id}/members",
                            json={"user": "rohan", "role": "approver"})
    assert added.status_code == 201, added.text
    return group_id


async def test_a_named_run_in_progress_is_found_before_another_is_created(http):
    """Seed 003: "find the in-progress workflow before creating one". Two members starting
    the group's venue booking at once get one run; asked not to reuse it, a start is refused
    naming it; once it has ended, the name starts a new run."""
    group_id = await wedding_group(http)
    body = {"kind": "agent", "group_id": group_id, "name": "venue booking",
            "input": {"message": SEARCH}}
    first, second = await asyncio.gather(
        http.post("/runs", json=body),
        http.post("/runs", json={**body, "input": {"message": LIKE}}, headers=auth("rohan")))
    assert sorted([first.status_code, second.status_code]) == [200, 201], (first, second)
    created, reused = sorted([first.json(), second.json()], key=lambda r: r["reused"])
    assert created["created"] and not created["reused"]
    assert reused["run_id"] == created["run_id"]
    assert not reused["created"] and reused["reused"]
    run_id = created["run_id"]
    run = (await http.get(f"/runs/{run_id}")).json()
    assert run["name"] == "venue booking" and run["group_id"] == group_id

    refused = await http.post("/runs", json={**body, "reuse_in_progress": False})
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "run_in_progress" and error["message"].startswith("name: ")
    assert error["details"][0]["run_id"] == run_id
    unnamed_group = await http.post("/runs", json={**body, "group_id": None})
    assert unnamed_group.status_code == 422
    assert unnamed_group.json()["error"]["message"].startswith("name: ")
    listed = (await http.get("/runs", params={"group_id": group_id})).json()["runs"]
    assert [r["run_id"] for r in listed] == [run_id]  # the refusals wrote nothing

    other_name = await http.post("/runs", json={**body, "name": "caterer"})
    assert other_name.status_code == 201
    await http.post(f"/runs/{other_name.json()['run_id']}/cancel")
    await http.post(f"/runs/{run_id}/cancel")

    async def canceled():
        return (await http.get(f"/runs/{run_id}")).json()["status"] == "canceled"
    await eventually(canceled)
    again = await http.post("/runs", json=body)
    assert again.status_code == 201 and again.json()["run_id"] != run_id
    await http.post(f"/runs/{again.json()['run_id']}/cancel")


async def test_a_returning_member_is_greeted_with_the_related_entities_on_the_run(http):
    group_id = await wedding_group(http)
    started = await http.post("/runs", json={"kind": "agent", "group_id": group_id,
                                             "input": {"message": SEARCH,
                                                       "return_gap_seconds": 2}})
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    await waiting_for_message(http, run_id, answers=1)
    assert (await say(http, run_id, LIKE)).status_code == 202
    await waiting_for_message(http, run_id, answers=2)
    run = (await http.get(f"/runs/{run_id}")).json()
    assert sorted(run["related_entity_ids"]["vendor_ids"]) == [
        "v-venue-01", "v-venue-02", "v-venue-03"]
    await asyncio.sleep(2.5)  # past the run's return gap
    back = await http.post(f"/runs/{run_id}/messages", headers=auth("rohan"),
                           json={"text": "Which of them are available on 2027-02-14?"})
    assert back.status_code == 202, back.text
    page = await waiting_for_message(http, run_id, answers=3)
    answer = [m for m in page["messages"] if m["type"] == "agent.answered"][-1]
    assert answer["text"].startswith("Welcome back, Rohan! Where things stand: ")
    assert "taken: Old Mill Barn" in answer["text"]
    events = (await http.get(f"/runs/{run_id}/events", params={"limit": 1000})).json()["events"]
    returned = [e for e in events if e["type"] == "member.returned"]
    # (On a loaded machine Priya's second message may have come past the gap too.)
    assert (returned[-1]["agent"], returned[-1]["output"]["turn"]) == ("rohan", 3)
    await http.post(f"/runs/{run_id}/cancel")
