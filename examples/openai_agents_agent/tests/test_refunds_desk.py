"""Your own OpenAI Agents SDK agent, registered by its entry point, used as a person would: over
Waystation's HTTP API on a real stack (Postgres, the Temporal dev server, a worker, the API).
Each refund stops the agent at its `needs_approval` tool, a Waystation gate; approve runs the
tool's activity once, reject reaches the model as its feedback, an edit is checked against the
tool's parameters schema (422 naming the field) and the edited call runs."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType

from waystation.sdk.testing import LocalStack, eventually, local_stack

GATE = "approve_issue_refund_1"


@pytest.fixture(scope="module")
async def stack():
    async with local_stack() as running:
        yield running


@pytest.fixture
async def http(stack: LocalStack):
    async with stack.client("maya") as client:
        yield client


async def start(http: httpx.AsyncClient, message: str) -> str:
    created = await http.post("/runs", json={"kind": "agent", "input": {
        "agent": "refunds_desk", "message": message}})
    assert created.status_code == 201, created.text
    return str(created.json()["run_id"])


async def at_gate(http: httpx.AsyncClient, run_id: str, gate: str = GATE) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        run = (await http.get(f"/runs/{run_id}")).json()
        return run if run["pending_checkpoint"] == gate else None
    return await eventually(check, timeout=60)


async def answered(http: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    """The transcript once the run has answered and waits for the next message."""
    async def check() -> list[dict[str, Any]] | None:
        run = (await http.get(f"/runs/{run_id}")).json()
        page = (await http.get(f"/runs/{run_id}/messages", params={"limit": 500})).json()
        done = any(m["type"] == "agent.answered" for m in page["messages"])
        return page["messages"] if run["status"] == "paused" and done else None
    return await eventually(check, timeout=60)


async def decide(http: httpx.AsyncClient, run_id: str, pending: dict[str, Any],
                 decision: str, **fields: Any) -> httpx.Response:
    return await http.post(f"/runs/{run_id}/decisions/{pending['checkpoint_name']}", json={
        "decision": decision, "digest": pending["digest"], **fields})


async def tool_runs(stack: LocalStack, run_id: str) -> int:
    """How many times the tool's activity was scheduled: once per approved call."""
    history = await stack.temporal.get_workflow_handle(f"agent-{run_id}").fetch_history()
    return sum(1 for e in history.events
               if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
               and e.activity_task_scheduled_event_attributes.activity_type.name
               == "openai_agents_agent.issue_refund")


async def test_the_first_message_whatever_it_says_waits_at_the_gate_and_approve_runs_it(
        stack: LocalStack, http: httpx.AsyncClient) -> None:
    run_id = await start(http, "hello?")
    run = await at_gate(http, run_id)
    pending = run["pending_decision"]
    assert pending["context"]["tool"] == "issue_refund"
    assert pending["context"]["arguments"] == {"order_id": "A-1001", "amount_eur": 40,
                                               "reason": "hello?"}
    assert pending["answer_schema"]["properties"]["amount_eur"]["maximum"] == 500
    assert await tool_runs(stack, run_id) == 0  # not before the approval

    approved = await decide(http, run_id, pending, "approve")
    assert approved.status_code == 200, approved.text
    transcript = await answered(http, run_id)
    assert transcript[-1]["text"] == "Refunded 40 EUR on order A-1001 (rf-A-1001-40)."
    assert [m["result"] for m in transcript if m["type"] == "tool.returned"] == [
        '{"refund_id":"rf-A-1001-40","order_id":"A-1001","amount_eur":40,"reason":"hello?"}']
    assert await tool_runs(stack, run_id) == 1  # one refund
    # The next message that asks for a refund waits at its own gate.
    again = await http.post(f"/runs/{run_id}/messages", json={"text": "refund A-2002, 15 EUR"})
    assert again.status_code == 202, again.text
    second = await at_gate(http, run_id, "approve_issue_refund_2")
    assert second["pending_decision"]["context"]["arguments"]["order_id"] == "A-2002"
    await http.post(f"/runs/{run_id}/cancel")


async def test_a_rejection_reaches_the_model_as_its_feedback(stack: LocalStack,
                                                             http: httpx.AsyncClient) -> None:
    run_id = await start(http, "Refund A-3003, 90 EUR: the parcel never came")
    pending = (await at_gate(http, run_id))["pending_decision"]
    assert pending["context"]["arguments"]["amount_eur"] == 90
    rejected = await decide(http, run_id, pending, "reject",
                            feedback="The parcel was delivered on Monday; no refund.")
    assert rejected.status_code == 200, rejected.text
    transcript = await answered(http, run_id)
    assert transcript[-1]["text"] == \
        "I did not refund: The parcel was delivered on Monday; no refund."
    await http.post(f"/runs/{run_id}/cancel")


async def test_an_edit_is_checked_against_the_tools_schema_and_the_edited_call_runs(
        stack: LocalStack, http: httpx.AsyncClient) -> None:
    run_id = await start(http, "Refund A-4004, 120 EUR")
    pending = (await at_gate(http, run_id))["pending_decision"]
    too_much = await decide(http, run_id, pending, "edit", answer={
        "order_id": "A-4004", "amount_eur": 900, "reason": "damaged"})
    assert too_much.status_code == 422, too_much.text
    assert too_much.json()["error"]["code"] == "invalid_answer"
    assert too_much.json()["error"]["message"].startswith("answer.amount_eur:")
    assert too_much.json()["error"]["details"] == [{"path": "answer.amount_eur"}]
    still = (await http.get(f"/runs/{run_id}")).json()
    assert still["pending_checkpoint"] == GATE  # nothing applied

    edited = await decide(http, run_id, pending, "edit", answer={
        "order_id": "A-4004", "amount_eur": 60, "reason": "half: one item was fine"})
    assert edited.status_code == 200, edited.text
    transcript = await answered(http, run_id)
    assert transcript[-1]["text"] == "Refunded 60 EUR on order A-4004 (rf-A-4004-60)."
    await http.post(f"/runs/{run_id}/cancel")
