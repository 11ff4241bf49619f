"""Local tools (`waystation.kinds.agent.sdk.local_tool`, issue 31): a PydanticAI agent's fast tools
run as Temporal local activities in a run, and a local tool that needs approval runs only after its
gate is approved (never when rejected)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import RunContext

from tests.agent_helpers import decide, events_of, new_agent_run, start_agent, waiting
from waystation.contracts.events import AGENT_ANSWERED, TOOL_RETURNED
from waystation.kinds.agent.activities.registry import register_agent
from waystation.kinds.agent.contracts import MODEL_RESPONDED
from waystation.kinds.agent.sdk import SUMMARY_REQUEST, local_tool

CALLS: list[str] = []


async def lookup(code: str) -> dict[str, Any]:
    """Look a code up."""
    CALLS.append(f"lookup {code}")
    return {"code": code, "name": f"item {code}"}


async def hold(code: str, days: int) -> str:
    """Hold an item for some days. Needs approval."""
    CALLS.append(f"hold {code} {days}")
    return f"held {code} for {days} days"


async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    latest = messages[-1]
    assert isinstance(latest, ModelRequest)
    returned = [p for p in latest.parts if isinstance(p, ToolReturnPart)]
    prompt = " ".join(str(p.content) for p in latest.parts if isinstance(p, UserPromptPart))
    if prompt.startswith(SUMMARY_REQUEST):
        return ModelResponse(parts=[TextPart("summary: " + "; ".join(CALLS))])
    if returned and returned[0].tool_name == "lookup":
        return ModelResponse(parts=[ToolCallPart("hold", {"code": "X1", "days": 3})])
    if returned:
        return ModelResponse(parts=[TextPart(f"done: {returned[0].model_response_str()}")])
    return ModelResponse(parts=[ToolCallPart("lookup", {"code": "X1"})])


local_desk: Agent[None, str | DeferredToolRequests] = Agent(
    FunctionModel(respond), name="local_desk", output_type=[str, DeferredToolRequests],
    tools=[local_tool(lookup), local_tool(hold, requires_approval=True)],
    capabilities=[TemporalDurability()])
register_agent("local_desk", local_desk, "test")


def _activity_kinds(history: Any) -> tuple[list[str], int]:
    """The regular activities' types and the number of local activity markers."""
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name
                 for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    markers = sum(1 for e in history.events if e.HasField("marker_recorded_event_attributes"))
    return scheduled, markers


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_local_tools_run_as_local_activities_the_approved_one_after_its_gate(
        time_env, pool, worker, task_queue, decision):
    CALLS.clear()
    arg = await new_agent_run(pool, agent="local_desk", message="hold X1")
    handle = await start_agent(time_env.client, arg, task_queue)
    await waiting(handle, "approval")
    assert CALLS == ["lookup X1"]  # the gated tool has not run
    await decide(handle, "approve_hold_1", decision,
                 **({"feedback": "not now"} if decision == "reject" else {}))
    state = await waiting(handle, turn=1)
    if decision == "approve":
        assert CALLS == ["lookup X1", "hold X1 3"]
        assert state.last_answer == "done: held X1 for 3 days"
    else:
        assert CALLS == ["lookup X1"]
        assert state.last_answer == "done: not now"
    # The approved tool's result was written as it ran, once, before the model's answer to it.
    events = await events_of(pool, arg.run_id)
    returned = [e for e in events if e.type == TOOL_RETURNED]
    assert [e.output["tool"] for e in returned] == ["lookup", "hold"]
    hold_result = returned[1]
    if decision == "reject":  # the denial, with the turn's events
        assert hold_result.event_key.startswith("t1.m")
    else:
        assert hold_result.event_key.startswith("t1.call.")
        assert hold_result.output["result"] == {"return_value": "held X1 for 3 days"}
        later = [e.type for e in events if e.seq > hold_result.seq]
        assert later.index(MODEL_RESPONDED) < later.index(AGENT_ANSWERED)
    scheduled, markers = _activity_kinds(await handle.fetch_history())
    # Only model requests went to the server; the tools were local activities (markers, with
    # the recorder's writes).
    assert scheduled and not any("tool" in name for name in scheduled)
    assert markers > 0
    await handle.terminate("done")


def test_a_local_tool_is_async_and_takes_no_run_context() -> None:
    def sync_lookup(code: str) -> str:
        return code

    async def with_ctx(ctx: RunContext[None], code: str) -> str:
        return code

    with pytest.raises(UserError, match="async"):
        local_tool(sync_lookup)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="RunContext"):
        local_tool(with_ctx)


async def test_outside_a_run_a_local_tool_is_its_function() -> None:
    CALLS.clear()
    result = await local_desk.run("hold X1")
    assert isinstance(result.output, DeferredToolRequests)
    assert CALLS == ["lookup X1"]
