"""A LangGraph graph's turns (kinds/agent/turns/__init__.py; the adapter that compiles and
invokes the graph and maps its messages to events: kinds/agent/workflow_langgraph.py).

The graph is invoked with the person's message; each interrupt it stops at is asked of
`Approvals`, and the graph resumes with every decision at once, each to its own interrupt.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from langgraph.errors import GraphRecursionError
    from langgraph.types import Interrupt

    from waystation.kinds.agent.activities.langgraph import LangGraphAgent
    from waystation.kinds.agent.approvals import Approvals
    from waystation.kinds.agent.contracts import SUMMARY_PROMPT
    from waystation.kinds.agent.host import AgentHost
    from waystation.kinds.agent.models import MessageInput
    from waystation.kinds.agent.turns import Priming, TurnEnd
    from waystation.kinds.agent.workflow_langgraph import (
        GraphConversation,
        add_graph_usage,
        answer,
        answer_schema,
        call_of,
        graph_events,
        interrupts,
        message_id_of,
    )
    from waystation.sdk import EventWrite


class GraphTurns:
    """A graph's conversation, a turn at a time."""

    def __init__(self, agent: LangGraphAgent, recent: list[dict[str, Any]], host: AgentHost,
                 approvals: Approvals, priming: Priming) -> None:
        self._graph = GraphConversation(agent, recent)
        self._host, self._approvals, self._priming = host, approvals, priming

    async def take(self, message: MessageInput) -> TurnEnd:
        graph, c = self._graph, self._host.carry
        first = len(graph.history)
        result = await self._run(graph.start(f"turn-{c.turn}", message.text, self._priming()))
        while pending := interrupts(result):
            events = self._keep(result, first)
            first = len(graph.history)
            await self._host.record(events=events, with_state=True)
            resume = {interrupt.id: await self._decision(interrupt) for interrupt in pending}
            result = await self._run(graph.resume(resume))
        events = self._keep(result, first)
        c.last_answer = answer(result)
        answer_id = message_id_of(result["messages"][-1]) if result["messages"] else None
        summary = await self._run(graph.ask(f"summary-{c.turn}", SUMMARY_PROMPT))
        # Paid for too: its responses are events after the turn's messages, not kept.
        asked = summary["messages"][len(graph.history) + 1:]
        summary_events = self._events(len(graph.history) - graph.turn_start(), asked)
        c.context_summary = answer(summary)
        return TurnEnd([*events, *summary_events], message_id=answer_id)

    def set_aside(self) -> None:
        self._graph.history = []

    def recent(self, turns: int) -> list[dict[str, Any]]:
        return self._graph.recent(turns)

    async def _run(self, invocation: Any) -> Any:
        try:
            return await invocation
        except (ActivityError, GraphRecursionError) as error:
            # A node failed past its retries, or the graph looped past its limit: the run
            # says so and ends, as for a PydanticAI agent's error.
            why = f"{error}: {error.cause}" if isinstance(error, ActivityError) else str(error)
            await self._host.fail(f"agent {self._host.arg.input.agent}: {why}",
                                  stop_reason="agent_error")

    def _keep(self, result: dict[str, Any], first: int) -> list[EventWrite]:
        """Keep the graph's messages; the events of the new ones (those from `first`)."""
        graph = self._graph
        graph.take(result)
        return self._events(first - graph.turn_start(), graph.history[first:])

    def _events(self, start: int, messages: list[Any]) -> list[EventWrite]:
        add_graph_usage(self._host.carry.usage, messages)
        return graph_events(self._host.event, self._host.carry.turn, start, messages)

    async def _decision(self, interrupt: Interrupt) -> dict[str, Any]:
        """The gate an interrupt raises, and its decision as the `Approval` the graph resumes
        with (waystation.kinds.agent.contracts)."""
        tool, call_id, arguments = call_of(interrupt)
        schema = answer_schema(interrupt)
        if schema is None:
            await self._host.fail(
                f"agent {self._host.arg.input.agent}: an interrupt's response_schema must be "
                "waystation.kinds.agent.langgraph.Approval[...] (or none): a gate's decision is an "
                "Approval", stop_reason="agent_error")
        assert schema is not None
        verdict = await self._approvals.ask(tool, call_id or interrupt.id, arguments, schema)
        return verdict.model_dump()
