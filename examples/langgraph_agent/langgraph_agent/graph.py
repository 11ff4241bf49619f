"""The `refunds_graph` agent: a plain LangGraph graph, plus what makes it a Waystation agent.

- Each node says where it runs (`metadata={"execute_in": "activity"}`): inside the `agent` run
  each is a Temporal activity (`agent__refunds_graph.model`, `...tools`), so a worker that dies
  mid-turn repeats no completed refund. Node functions are module-level, and get the state as
  JSON (messages as dicts: `convert_to_messages`), because it crosses into the activity.
- The `tools` node asks before each refund with `interrupt(..., response_schema=
  Approval[RefundArguments])`: the run raises a gate (approve, reject with feedback the model
  reads, or edit the arguments, checked against `RefundArguments`) and resumes the node with the
  decision.
- The routing function runs in the workflow: async, deterministic.
- `configured_chat_model(...)`: a run follows the worker's model configuration
  (`WAYSTATION_AGENT_BACKEND=openai`: the configured endpoint); otherwise the graph keeps its
  own model, the offline one here.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, SystemMessage, ToolMessage, convert_to_messages
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

from langgraph_agent.model import OfflineDesk
from langgraph_agent.tools import RefundArguments, issue_refund
from waystation.kinds.agent.langgraph import MODEL_RETRY, Approval, configured_chat_model

INSTRUCTIONS = ("You are a shop's refunds desk. Refund the order the customer names with "
                "issue_refund (a person approves each refund) and say what happened. Be brief.")
# The tool as the model sees it (its name, description and parameters); the `tools` node runs
# it, after the gate.
REFUND_TOOL = {"type": "function", "function": {
    "name": "issue_refund", "description": issue_refund.__doc__,
    "parameters": RefundArguments.model_json_schema()}}


async def call_model(state: MessagesState) -> dict[str, Any]:
    model = configured_chat_model(OfflineDesk()).bind_tools([REFUND_TOOL])
    reply = await model.ainvoke([SystemMessage(INSTRUCTIONS),
                                 *convert_to_messages(state["messages"])])
    return {"messages": [reply]}


async def run_tools(state: MessagesState) -> dict[str, Any]:
    last = convert_to_messages(state["messages"])[-1]
    assert isinstance(last, AIMessage)
    results = []
    for call in last.tool_calls:
        proposed = RefundArguments.model_validate(call["args"])
        # Stops the graph at a gate; on resume, returns the person's decision.
        approval: Approval[RefundArguments] = interrupt(
            {"tool": call["name"], "call_id": call["id"], "arguments": call["args"]},
            response_schema=Approval[RefundArguments])
        if approval.decision == "reject":
            content = approval.feedback or "the reviewer said no"
        else:
            content = issue_refund(approval.arguments(proposed)).model_dump_json()
        results.append(ToolMessage(content, tool_call_id=call["id"], name=call["name"]))
    return {"messages": results}


async def route(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


builder = StateGraph(MessagesState)
builder.add_node("model", call_model,
                 metadata={"execute_in": "activity", "retry_policy": MODEL_RETRY})
builder.add_node("tools", run_tools, metadata={"execute_in": "activity"})
builder.add_edge(START, "model")
builder.add_conditional_edges("model", route, ["tools", END])
builder.add_edge("tools", "model")
refunds_graph = builder.compile()
