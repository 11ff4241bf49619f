"""A LangGraph builder registered without compile(): refused at registration."""

from langgraph.graph import MessagesState, StateGraph

AGENTS = {"uncompiled": StateGraph(MessagesState)}
