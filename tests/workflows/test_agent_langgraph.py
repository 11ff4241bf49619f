"""A LangGraph graph as an agent run on the time-skipping server (issue 28): the example's
`refunds_graph` (examples/langgraph_agent), its `interrupt()` a Waystation gate decided by
approve, reject with feedback, or an edit checked against the interrupt's schema; its nodes
activities; a conversation that waits ten days and carries on, continued as new."""

from __future__ import annotations

from datetime import timedelta

import pytest
import pytest_asyncio
from langgraph_agent.graph import refunds_graph
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
from tests.plugin_samples.agent_graph_two_approvals import two_approvals
from waystation.activities.agents import backend_named
from waystation.contracts.refusals import INVALID_ANSWER
from waystation.kinds.agent.activities.registry import register_agent
from waystation.persistence import gates as gates_repo
from waystation.worker import build_worker

# Registered as its entry point registers it when a worker or the API starts.
register_agent("refunds_graph", refunds_graph, "test")
AGENT = "refunds_graph"


def tool_nodes_run(history) -> list[int]:
    """The attempts of the `tools` node's completed activities, in order."""
    scheduled = {e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
                 for e in history.events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED}
    started = {e.event_id: e.activity_task_started_event_attributes.attempt
               for e in history.events
               if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED}
    return [started[e.activity_task_completed_event_attributes.started_event_id]
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
            and scheduled[e.activity_task_completed_event_attributes.scheduled_event_id]
            == "agent__refunds_graph.tools"]


async def test_the_first_message_waits_at_the_interrupts_gate_and_approve_runs_the_tool_once(
        time_env, pool, worker, task_queue):
    arg = await new_agent_run(pool, agent=AGENT, message="hello?")
    handle = await start_agent(time_env.client, arg, task_queue)
    await waiting(handle, "approval")
    async with pool.acquire() as conn:
        [gate] = await gates_repo.list_run_gates(conn, arg.run_id)
    assert gate.checkpoint_name == "approve_issue_refund_1" and gate.status == "pending"
    assert gate.context["arguments"] == {"order_id": "A-1001", "amount_eur": 40,
                                         "reason": "hello?"}
    assert gate.answer_schema["properties"]["amount_eur"]["maximum"] == 500
    await decide(handle, "approve_issue_refund_1", "approve")
    state = await waiting(handle, turn=1)
    assert state.last_answer == "Refunded 40 EUR on order A-1001 (rf-A-1001-40)."
    assert state.context_summary == state.last_answer
    events = await events_of(pool, arg.run_id)
    types = [e.type for e in events]
    assert types.count("tool.called") == 1 and types.count("tool.returned") == 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    # The node ran twice (stopped at the interrupt, then resumed), each once: one refund.
    assert tool_nodes_run(await handle.fetch_history()) == [1, 1]
    # Each model response's usage, the summary's too, summed on the run.
    usage = [e.output["usage"] for e in events if e.type == "model.responded"]
    assert len(usage) == 3 == state.usage.requests
    row = await run_row(pool, arg.run_id)
    assert row.input_tokens == state.usage.input_tokens > 0
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
    await handle.terminate("done")


@pytest_asyncio.fixture
async def own_worker(own_time_env, pool, task_queue):
    async with build_worker(own_time_env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline")) as w:
        yield w


async def test_a_graph_conversation_waits_ten_days_and_another_member_carries_on(
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
    # Past the history budget, it continued as new at its wait, and the graph's conversation
    # came along (a member back after ten days is re-primed from the summary).
    assert state.continued >= 1 and state.returns == 1
    assert "rf-A-2002-15" in state.context_summary
    events = await events_of(pool, arg.run_id)
    assert [e.output["sent_by"] for e in events if e.type == "message.received"] == [
        "priya", "rohan"]
    assert len([e for e in events if e.type == "member.returned"]) == 1
    await handle.terminate("done")


async def pending_gate(pool, run_id, number: int):
    async def pending():
        async with pool.acquire() as conn:
            gates = await gates_repo.list_run_gates(conn, run_id)
        return gates[-1] if len(gates) == number and gates[-1].status == "pending" else None
    return await eventually(pending)


# Two gates at once through a LangGraph graph (10 s): the slow tier.
@pytest.mark.slow
async def test_two_interrupts_at_once_are_two_gates_each_answer_reaching_its_own_interrupt(
        time_env, pool, task_queue):
    """Two parallel nodes stop at once; each interrupt is its own gate, and each answer reaches
    its own interrupt, though the worker keeps no workflow cached: each of its workflow tasks
    replays the turn from history, as a restarted worker does."""
    register_agent("two_approvals", two_approvals, "test")
    arg = await new_agent_run(pool, agent="two_approvals", message="go")
    async with build_worker(time_env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline"), max_cached_workflows=0):
        handle = await start_agent(time_env.client, arg, task_queue)
        gates = {}
        for number, (decision, fields) in enumerate(
                [("edit", {"answer": {"amount": 7}}), ("reject", {"feedback": "not now"})], 1):
            gate = await pending_gate(pool, arg.run_id, number)
            gates[gate.context["tool"]] = decision
            await decide(handle, gate.checkpoint_name, decision, **fields)
        assert set(gates) == {"refund", "notify"}
        state = await waiting(handle, turn=1)
        told = {"edit": "edit 7", "reject": "reject not now"}
        assert state.last_answer == " / ".join(sorted(f"{tool}: {told[decision]}"
                                                      for tool, decision in gates.items()))
        await handle.terminate("done")
