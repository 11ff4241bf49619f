"""A LangGraph graph with a node that does not say where it runs: refused at registration."""

from typing import Any

from langgraph.graph import END, START, MessagesState, StateGraph


async def answer(state: MessagesState) -> dict[str, Any]:
    return {"messages": []}


builder = StateGraph(MessagesState)
builder.add_node("answer", answer)  # no metadata={"execute_in": ...}
builder.add_edge(START, "answer")
builder.add_edge("answer", END)
AGENTS = {"unplaced": builder.compile()}
