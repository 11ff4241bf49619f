"""`waystation.kinds.agent.openai_agents.local_activity_as_tool` (issue 31): an OpenAI Agents SDK
agent's fast tool as a Temporal local activity, behind its approval gate like any other."""

from __future__ import annotations

import json
from typing import Annotated

from agents import Agent
from openai_agents_agent.model import OfflineDesk
from pydantic import Field
from temporalio import activity

from tests.agent_helpers import decide, new_agent_run, start_agent, waiting
from waystation.kinds.agent.activities.registry import register_agent
from waystation.kinds.agent.openai_agents import local_activity_as_tool, needs_approval

LOCAL_ACTIVITY = "tests.local_issue_refund"
RUNS: list[str] = []


@activity.defn(name=LOCAL_ACTIVITY)
async def issue_refund(order_id: Annotated[str, Field(pattern=r"^A-\d{4}$")],
                       amount_eur: Annotated[int, Field(gt=0, le=500)],
                       reason: Annotated[str, Field(max_length=200)]) -> str:
    """Refund `amount_eur` euros on order `order_id` (A-0000). Needs a person's approval."""
    RUNS.append(order_id)
    return json.dumps({"refund_id": f"rf-{order_id}-{amount_eur}", "order_id": order_id,
                       "amount_eur": amount_eur, "reason": reason}, separators=(",", ":"))


local_desk = Agent(name="local_refunds", instructions="Refund what is asked.",
                   model=OfflineDesk(),
                   tools=[needs_approval(local_activity_as_tool(issue_refund))])
register_agent("local_refunds", local_desk, "test")


async def test_an_approved_local_activity_tool_runs_once_as_a_local_activity(
        time_env, pool, worker, task_queue):
    RUNS.clear()
    arg = await new_agent_run(pool, agent="local_refunds", message="hello?")
    handle = await start_agent(time_env.client, arg, task_queue)
    await waiting(handle, "approval")
    assert RUNS == []  # not before the approval
    await decide(handle, "approve_issue_refund_1", "approve")
    state = await waiting(handle, turn=1)
    assert state.last_answer == "Refunded 40 EUR on order A-1001 (rf-A-1001-40)."
    assert RUNS == ["A-1001"]
    history = await handle.fetch_history()
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name
                 for e in history.events
                 if e.HasField("activity_task_scheduled_event_attributes")]
    assert LOCAL_ACTIVITY not in scheduled
    local = [json.loads(e.marker_recorded_event_attributes.details["data"].payloads[0].data)
             for e in history.events if e.HasField("marker_recorded_event_attributes")
             and e.marker_recorded_event_attributes.marker_name == "core_local_activity"]
    assert [m["activity_type"] for m in local].count(LOCAL_ACTIVITY) == 1
    await handle.terminate("done")
