"""A LangGraph graph that asks two approvals at once: two parallel nodes, each stopping at its
own `interrupt()`, then a node that says what each was told."""

from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt
from pydantic import BaseModel

from waystation.kinds.agent.langgraph import Approval

ACTIVITY = {"execute_in": "activity"}


class Amount(BaseModel):
    amount: int


def _ask(tool: str) -> ToolMessage:
    proposed = Amount(amount=10)
    approval: Approval[Amount] = interrupt(
        {"tool": tool, "call_id": f"call_{tool}", "arguments": proposed.model_dump()},
        response_schema=Approval[Amount])
    told = approval.feedback if approval.decision == "reject" else \
        approval.arguments(proposed).amount
    return ToolMessage(f"{tool}: {approval.decision} {told}", tool_call_id=f"call_{tool}",
                       name=tool)


async def refund(state: MessagesState) -> dict[str, Any]:
    return {"messages": [_ask("refund")]}


async def notify(state: MessagesState) -> dict[str, Any]:
    return {"messages": [_ask("notify")]}


async def reply(state: MessagesState) -> dict[str, Any]:
    told = sorted(m["content"] for m in state["messages"] if m["type"] == "tool")
    return {"messages": [AIMessage(" / ".join(told))]}


builder = StateGraph(MessagesState)
builder.add_node("refund", refund, metadata=ACTIVITY)
builder.add_node("notify", notify, metadata=ACTIVITY)
builder.add_node("reply", reply, metadata=ACTIVITY)
builder.add_edge(START, "refund")
builder.add_edge(START, "notify")
builder.add_edge(["refund", "notify"], "reply")
builder.add_edge("reply", END)
two_approvals = builder.compile()
AGENTS = {"two_approvals": two_approvals}
