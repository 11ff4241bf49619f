"""An OpenAI Agents SDK agent as an agent run on the time-skipping server (issue 28): the
example's `refunds_desk` (examples/openai_agents_agent), its `needs_approval` tool a Waystation
gate decided by approve, reject with feedback, or an edit checked against the tool's parameters
schema; its model calls and its tool activities (Temporal's OpenAI Agents integration); a
conversation that waits ten days and carries on, continued as new."""

from __future__ import annotations

from datetime import timedelta

import pytest
import pytest_asyncio
from openai_agents_agent.agent import refunds_desk
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowUpdateFailedError

from tests.agent_helpers import (
    decide,
    events_of,
    new_agent_run,
    run_row,
    say,
    start_agent,
    waiting,
    waiting_recorded,
)
from tests.helpers import eventually
from waystation.activities.agents import backend_named
from waystation.contracts.refusals import INVALID_ANSWER
from waystation.kinds.agent.activities.registry import register_agent
from waystation.persistence import gates as gates_repo
from waystation.worker import build_worker

# Registered as its entry point registers it when a worker or the API starts.
register_agent("refunds_desk", refunds_desk, "test")
AGENT = "refunds_desk"
TOOL_ACTIVITY = "openai_agents_agent.issue_refund"


def activity_runs(history, name: str) -> list[int]:
    """The attempts of the activity's started tasks, in order."""
    scheduled = {e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
                 for e in history.events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED}
    return [e.activity_task_started_event_attributes.attempt for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
            and scheduled[e.activity_task_started_event_attributes.scheduled_event_id] == name]


async def test_the_first_message_waits_at_the_tools_gate_and_approve_runs_the_tool_once(
        time_env, pool, worker, task_queue):
    arg = await new_agent_run(pool, agent=AGENT, message="hello?")
    handle = await start_agent(time_env.client, arg, task_queue)
    await waiting(handle, "approval")
    async with pool.acquire() as conn:
        [gate] = await gates_repo.list_run_gates(conn, arg.run_id)
    assert gate.checkpoint_name == "approve_issue_refund_1" and gate.status == "pending"
    assert gate.context["arguments"] == {"order_id": "A-1001", "amount_eur": 40,
                                         "reason": "hello?"}
    assert gate.context["call_id"] == "call_1"
    assert gate.answer_schema["properties"]["amount_eur"]["maximum"] == 500
    history = await handle.fetch_history()
    assert activity_runs(history, TOOL_ACTIVITY) == []  # not before the approval
    await decide(handle, "approve_issue_refund_1", "approve")
    state = await waiting(handle, turn=1)
    assert state.last_answer == "Refunded 40 EUR on order A-1001 (rf-A-1001-40)."
    assert state.context_summary == state.last_answer
    events = await events_of(pool, arg.run_id)
    types = [e.type for e in events]
    assert types.count("tool.called") == 1 and types.count("tool.returned") == 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    # In the order they happened: the response asking for the tool, the call, the gate, the
    # tool's result, the response that read it, the summary's.
    assert [t for t in types if t not in ("run.started", "message.received")][:7] == [
        "model.responded", "tool.called", "gate.opened", "gate.decided", "tool.returned",
        "model.responded", "model.responded"]
    history = await handle.fetch_history()
    assert activity_runs(history, TOOL_ACTIVITY) == [1]  # the refund ran once
    # Each model call an activity of the integration; each response's usage, the summary's
    # too, summed on the run.
    assert len(activity_runs(history, "invoke_model_activity")) == 3
    usage = [e.output["usage"] for e in events if e.type == "model.responded"]
    assert len(usage) == 3 == state.usage.requests
    row = await run_row(pool, arg.run_id)
    assert row.input_tokens == state.usage.input_tokens > 0
    assert row.output_tokens == state.usage.output_tokens > 0
    await handle.terminate("done")


async def test_reject_reaches_the_model_as_feedback_and_an_edit_is_checked_then_runs(
        time_env, pool, worker, task_queue):
    arg = await new_agent_run(pool, agent=AGENT, message="refund A-2002, 15 EUR please")
    handle = await start_agent(time_env.client, arg, task_queue)
    await waiting(handle, "approval")
    await decide(handle, "approve_issue_refund_1", "reject", feedback="already refunded")
    state = await waiting(handle, turn=1)
    assert state.last_answer == "I did not refund: already refunded"
    await say(handle, "refund A-3003, 30 EUR")
    await waiting(handle, "approval")
    with pytest.raises(WorkflowUpdateFailedError) as bad:
        await decide(handle, "approve_issue_refund_2", "edit",
                     answer={"order_id": "A-3003", "amount_eur": 900, "reason": "late"})
    assert bad.value.cause.type == INVALID_ANSWER
    assert bad.value.cause.message.startswith("answer.amount_eur:")
    await decide(handle, "approve_issue_refund_2", "edit",
                 answer={"order_id": "A-3003", "amount_eur": 25, "reason": "late"})
    state = await waiting(handle, turn=2)
    assert state.last_answer == "Refunded 25 EUR on order A-3003 (rf-A-3003-25)."
    events = await events_of(pool, arg.run_id)
    decided = [e.output for e in events if e.type == "gate.decided"]
    assert [d["decision"] for d in decided] == ["reject", "edit"]
    returned = [e.output["result"] for e in events if e.type == "tool.returned"]
    assert returned[0] == "already refunded" and '"amount_eur":25' in returned[1]
    # The rejected call never ran; the edited one ran once, with the edited arguments.
    assert activity_runs(await handle.fetch_history(), TOOL_ACTIVITY) == [1]
    await handle.terminate("done")


@pytest_asyncio.fixture
async def own_worker(own_time_env, pool, task_queue):
    async with build_worker(own_time_env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline")) as w:
        yield w


async def test_a_conversation_waits_ten_days_and_another_member_carries_on(
        own_time_env, pool, own_worker, task_queue):
    arg = await new_agent_run(pool, agent=AGENT, message="hello?", history_budget=50)
    handle = await start_agent(own_time_env.client, arg, task_queue)
    await waiting(handle, "approval")
    await decide(handle, "approve_issue_refund_1", "approve")
    row = await waiting_recorded(pool, arg.run_id, turn=1)
    await own_time_env.sleep(timedelta(days=10))
    assert "rf-A-1001-40" in row.context_summary
    await say(handle, "refund A-2002, 15 EUR", by="rohan")
    await waiting(handle, "approval")
    await decide(handle, "approve_issue_refund_2", "approve")
    state = await waiting(handle, turn=2)
    assert state.last_answer == "Refunded 15 EUR on order A-2002 (rf-A-2002-15)."
    # Past the history budget, it continued as new at its wait, and the conversation came
    # along (a member back after ten days is re-primed from the summary).
    assert state.continued >= 1 and state.returns == 1
    assert "rf-A-2002-15" in state.context_summary
    events = await events_of(pool, arg.run_id)
    assert [e.output["sent_by"] for e in events if e.type == "message.received"] == [
        "priya", "rohan"]
    assert len([e for e in events if e.type == "member.returned"]) == 1
    await handle.terminate("done")


async def test_a_handoff_and_a_guardrail_trip_are_run_events(time_env, pool, worker,
                                                             task_queue):
    from tests.plugin_samples.agent_openai_handoff import triage

    register_agent("triage", triage, "test")
    arg = await new_agent_run(pool, agent="triage", message="my parcel is late")
    handle = await start_agent(time_env.client, arg, task_queue)
    state = await waiting(handle, turn=1)
    assert state.last_answer == "Refunds here: my parcel is late"
    await say(handle, "something forbidden")
    state = await waiting(handle, turn=2)
    assert state.last_answer == "input guardrail nothing_forbidden tripped"
    events = await events_of(pool, arg.run_id)
    [handoff] = [e for e in events if e.type == "agent.handoff"]
    assert handoff.output == {"turn": 1, "from": "triage", "to": "refunds"}
    [tripped] = [e for e in events if e.type == "guardrail.tripped"]
    assert tripped.output == {"turn": 2, "guardrail": "nothing_forbidden", "kind": "input",
                              "info": {"said": "something forbidden"}}
    await handle.terminate("done")


async def test_the_conversations_items_are_carried_across_continue_as_new(
        time_env, pool, worker, task_queue):
    """Continued as new at its wait (past the history budget) with no member returning, the
    next turn goes on from the carried input items: the desk knows it has refunded already
    (its first message only asks to refund whatever it says)."""
    arg = await new_agent_run(pool, agent=AGENT, message="hello?", history_budget=50,
                              return_gap_seconds=None)
    handle = await start_agent(time_env.client, arg, task_queue)
    await waiting(handle, "approval")
    await decide(handle, "approve_issue_refund_1", "approve")
    await waiting(handle, turn=1)
    await say(handle, "thanks!")
    state = await waiting(handle, turn=2)
    assert state.continued >= 1 and state.returns == 0
    assert state.last_answer.startswith("I refund orders")
    # The carried items reached the model: the summary still names the first refund.
    assert "rf-A-1001-40" in state.context_summary
    await handle.terminate("done")


async def test_an_expired_approval_is_a_rejection_the_model_reads(own_time_env, pool,
                                                                   own_worker, task_queue):
    arg = await new_agent_run(pool, agent=AGENT, message="refund A-6006, 60 EUR",
                              approval_timeout_seconds=3600)
    handle = await start_agent(own_time_env.client, arg, task_queue)

    async def gate_pending():
        # Read from the database, not queried: no query may be left behind a sleep.
        async with pool.acquire() as conn:
            return await gates_repo.list_run_gates(conn, arg.run_id) or None
    await eventually(gate_pending)
    await own_time_env.sleep(timedelta(hours=2))
    row = await waiting_recorded(pool, arg.run_id, turn=1)
    assert row.context_summary == \
        "I did not refund: nobody approved issue_refund in time; it was not run"
    history = await handle.fetch_history()
    assert activity_runs(history, TOOL_ACTIVITY) == []
    await handle.terminate("done")
