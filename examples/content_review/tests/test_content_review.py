"""The content-review plug-in, used as a user would: through Waystation's API, its decisions
inbox and its SSE stream, against a real Postgres and a real Temporal dev server."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest
from ag_ui.core import Event
from content_review.workflow import ContentReview
from pydantic import TypeAdapter

from waystation.sdk import replay_histories
from waystation.sdk.testing import LocalStack, eventually, local_stack, sse_events

HISTORIES = Path(__file__).resolve().parent / "histories"
EVENT: TypeAdapter[Event] = TypeAdapter(Event)


@pytest.fixture(scope="module")
async def stack():
    async with local_stack() as running:
        yield running


async def inbox_request(stack: LocalStack, run_id: str, checkpoint: str) -> dict:
    """The pending request of `run_id` at `checkpoint`, as the owner's inbox shows it."""
    async with stack.client("editor") as http:
        async def in_inbox() -> dict | None:
            pending = (await http.get("/decisions")).json()["decisions"]
            return next((r for r in pending if r["run_id"] == run_id
                         and r["checkpoint_name"] == checkpoint), None)
        request: dict = await eventually(in_inbox, timeout=30, interval=0.1)
        return request


async def decide(stack: LocalStack, request: dict, decision: str, feedback: str | None = None):
    async with stack.client("editor") as http:
        response = await http.post(
            f"/runs/{request['run_id']}/decisions/{request['checkpoint_name']}",
            json={"decision": decision, "feedback": feedback,
                  "request_id": request["request_id"], "digest": request["digest"]})
    assert response.status_code == 200, response.text
    return response.json()


async def test_review_decided_from_the_inbox_and_followed_to_the_end(stack: LocalStack):
    async with stack.client("editor") as http:
        created = await http.post("/runs", json={
            "kind": "content_review", "project_id": "blog",
            "input": {"topic": "durable agents", "audience": "platform teams"}})
        assert created.status_code == 201, created.text
        run_id = created.json()["run_id"]
        assert created.json()["workflow_id"] == f"content-review-{run_id}"

        async def follow() -> list:
            async with http.stream("GET", f"/runs/{run_id}/events/stream") as response:
                return [event async for event in sse_events(response)]
        stream = asyncio.create_task(follow())

        first = await inbox_request(stack, run_id, "approve_draft")
        assert first["title"].startswith("Review: Durable agents")
        await decide(stack, first, "reject", "add an example")
        second = await inbox_request(stack, run_id, "approve_draft")
        assert second["request_id"] != first["request_id"]
        assert "Revised after review: add an example" in second["description"]
        await decide(stack, second, "approve")
        await decide(stack, await inbox_request(stack, run_id, "confirm_publish"), "publish")

        events = await asyncio.wait_for(stream, timeout=60)
        types = [e.event for e in events]
        assert types[0] == "run.started" and types[-2:] == ["run.completed", "end"]
        assert types.count("draft.written") == 2 and types.count("gate.decided") == 3
        assert [e.id for e in events if e.id is not None] == \
            list(range(1, len(events)))  # gapless seq, each event once

        run = (await http.get(f"/runs/{run_id}")).json()
        assert run["status"] == "completed" and run["stop_reason"] == "published"
        assert run["finished_at"] is not None and run["project_id"] == "blog"
        assert run["result"]["slug"].startswith("durable-agents")
        listed = (await http.get("/runs", params={"project_id": "blog"})).json()["runs"]
        assert [r["run_id"] for r in listed] == [run_id]
        snapshot = (await http.get(f"/runs/{run_id}/snapshots/latest")).json()
        assert snapshot["state"]["status"] == "completed"
        assert snapshot["state"]["draft"]["revision"] == 2

        if os.environ.get("RECORD_HISTORIES"):
            history = await stack.temporal.get_workflow_handle(
                f"content-review-{run_id}").fetch_history()
            (HISTORIES / "review_reject_then_publish.json").write_text(history.to_json())


async def test_a_plug_in_kind_runs_over_ag_ui(stack: LocalStack):
    """`POST /ag-ui/content_review`: a plug-in's kind gets the AG-UI endpoint too; its gate is
    an interrupt, answered by a resume entry (docs/ag-ui.md)."""
    thread = str(uuid.uuid4())

    async def ag_ui(http, **fields) -> list[dict]:
        body = {"threadId": thread, "runId": str(uuid.uuid4()), "messages": [], "state": {},
                "tools": [], "context": [], **fields}
        async with http.stream("POST", "/ag-ui/content_review", json=body) as response:
            assert response.status_code == 200, await response.aread()
            return [EVENT.validate_json(line[6:]).model_dump(mode="json", by_alias=True)
                    async for line in response.aiter_lines() if line.startswith("data: ")]

    async with stack.client("editor") as http:
        first = await ag_ui(http, forwardedProps={
            "input": {"topic": "durable agents", "audience": "platform teams"}})
        assert first[-1]["type"] == "RUN_FINISHED", first[-1]
        [draft] = first[-1]["outcome"]["interrupts"]
        assert draft["metadata"]["checkpoint"] == "approve_draft"
        assert any(e["type"] == "STATE_SNAPSHOT" for e in first)
        second = await ag_ui(http, resume=[{
            "interruptId": draft["id"], "status": "resolved",
            "payload": {"decision": "approve", "digest": draft["metadata"]["digest"]}}])
        [publish] = second[-1]["outcome"]["interrupts"]
        assert publish["metadata"]["checkpoint"] == "confirm_publish"
        decided = (await http.get(f"/runs/{thread}/decisions")).json()["decisions"][0]
        assert (decided["decision"], decided["decided_by"]) == ("approve", "editor")


async def test_bad_input_is_refused_naming_the_kinds(stack: LocalStack):
    async with stack.client("stranger") as http:
        unknown = await http.post("/runs", json={"kind": "poem", "input": {}})
        assert unknown.status_code == 422
        assert unknown.json()["error"]["message"] == (
            "kind: unknown run kind 'poem'; one of validation, batch, agent, content_review, "
            "mobile_agent")
        short = await http.post("/runs", json={"kind": "content_review",
                                               "input": {"topic": "x"}})
        assert short.status_code == 422 and "topic" in short.json()["error"]["message"]
        extra = await http.post("/runs", json={"kind": "content_review",
                                               "input": {"topic": "tea", "colour": "red"}})
        assert extra.status_code == 422 and "colour" in extra.json()["error"]["message"]
        assert (await http.get("/runs")).json()["runs"] == [], "a refusal writes nothing"


async def test_recorded_histories_replay():
    assert await replay_histories(HISTORIES, [ContentReview])
