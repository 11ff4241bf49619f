"""The LangGraph adapter of AgentRun: a registered graph run a turn at a time, its messages as
the run's transcript events, its interrupts as gates (docs/agents.md, "LangGraph").

Workflow code. The graph is compiled once per workflow run with an in-memory checkpointer,
which holds a turn's state while it waits at an interrupt: a worker that restarts replays the
turn, its nodes' activities answered from history, up to the same interrupt. Between turns the
conversation is the run's own `history` (the graph's `messages`), carried across
continue-as-new as LangChain's message dicts; each turn invokes the graph on a thread of its own
with that history and the person's message.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import langgraph.pregel._checkpoint as checkpoints
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        messages_from_dict,
        messages_to_dict,
    )
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base.id import UUID
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command, Interrupt

    from waystation.kinds.agent.activities.langgraph import LangGraphAgent
    from waystation.kinds.agent.activities.live import MESSAGE_ID_KEY
    from waystation.kinds.agent.activities.metering import COST_KEY
    from waystation.kinds.agent.contracts import APPROVAL_SCHEMA_MARK, MODEL_RESPONDED
    from waystation.kinds.agent.models import AgentUsage
    from waystation.kinds.agent.transcript import MakeEvent
    from waystation.sdk import TOOL_CALLED, TOOL_RETRY, TOOL_RETURNED, EventWrite

# The re-priming instructions travel as a system message with this id at the head of a turn's
# input; it is not kept in the history (the next turn is re-primed afresh).
PRIMING_ID = "waystation-priming"

# LangGraph names each checkpoint by a time-based, random uuid6, and derives its tasks' ids,
# and so its interrupts' ids, from it: a worker replaying a turn would get other interrupt ids
# than those its recorded node activities hand back, and a decision resumed by id would miss
# its interrupt. While a run's graph runs, its checkpoints are numbered instead, in order (the
# in-memory checkpointer takes the greatest id as the latest), from one per workflow run.
_checkpoint_numbers: ContextVar[Iterator[int] | None] = ContextVar(
    "waystation_checkpoint_numbers", default=None)
_time_based_uuid6 = checkpoints.uuid6


def _numbered_uuid6(node: int | None = None, clock_seq: int | None = None) -> UUID:
    numbers = _checkpoint_numbers.get()
    if numbers is None:  # a graph run outside an agent run's workflow
        return _time_based_uuid6(node, clock_seq)
    # uuid6's layout, the number as its timestamp: ids that sort in the order they were made.
    number = next(numbers)
    return UUID(int=(number >> 12) << 80 | 0x6 << 76 | (number & 0xFFF) << 64 | 0x8 << 60)


checkpoints.uuid6 = _numbered_uuid6


class GraphConversation:
    """One run's graph and its conversation so far."""

    def __init__(self, agent: LangGraphAgent, recent: list[dict[str, Any]]) -> None:
        self._graph = agent.builder.compile(checkpointer=InMemorySaver(),
                                            **agent.compile_options)
        self.history: list[BaseMessage] = messages_from_dict(recent)
        self._config: RunnableConfig = {}
        self._numbers = itertools.count(1)

    async def start(self, thread: str, text: str, priming: str | None) -> dict[str, Any]:
        """Invoke the graph on `thread` with the history and the person's message."""
        self._config = {"configurable": {"thread_id": thread}}
        head = [SystemMessage(priming, id=PRIMING_ID)] if priming else []
        return await self._invoke({"messages": [*head, *self.history, HumanMessage(text)]},
                                  self._config)

    async def resume(self, answers: dict[str, Any]) -> dict[str, Any]:
        """Resume the turn's interrupts, each by its id with its own answer."""
        return await self._invoke(Command(resume=answers), self._config)

    async def ask(self, thread: str, prompt: str) -> dict[str, Any]:
        """A request outside the conversation (the run's summary), on a thread of its own:
        nothing is kept."""
        config: RunnableConfig = {"configurable": {"thread_id": thread}}
        return await self._invoke({"messages": [*self.history, HumanMessage(prompt)]}, config)

    async def _invoke(self, graph_input: Any, config: RunnableConfig) -> dict[str, Any]:
        token = _checkpoint_numbers.set(self._numbers)
        try:
            return await self._graph.ainvoke(graph_input, config)
        finally:
            _checkpoint_numbers.reset(token)

    def take(self, result: dict[str, Any]) -> None:
        self.history = [m for m in result["messages"] if m.id != PRIMING_ID]

    def turn_start(self) -> int:
        """Where this turn's messages begin in the history: its person's message."""
        for index in range(len(self.history) - 1, -1, -1):
            if isinstance(self.history[index], HumanMessage):
                return index
        return 0

    def recent(self, turns: int) -> list[dict[str, Any]]:
        """The last `turns` turns, as LangChain's message dicts, for a continuation."""
        if turns == 0:
            return []
        starts = [i for i, m in enumerate(self.history) if isinstance(m, HumanMessage)]
        kept = self.history[starts[-turns]:] if len(starts) >= turns else self.history
        return messages_to_dict(kept)


def interrupts(result: dict[str, Any]) -> list[Interrupt]:
    return list(result.get("__interrupt__") or [])


def answer(result: dict[str, Any]) -> str:
    last = result["messages"][-1] if result["messages"] else None
    return last.text if isinstance(last, AIMessage) else ""


def call_of(interrupt: Interrupt) -> tuple[str, str | None, dict[str, Any]]:
    """What the interrupt asks about: the tool (else `interrupt`), its call id and its
    arguments, from a value shaped `{"tool": ..., "call_id": ..., "arguments": {...}}`; another
    value is shown as it is (`{"value": ...}`)."""
    value = interrupt.value
    if isinstance(value, dict) and isinstance(value.get("tool"), str):
        arguments = value.get("arguments")
        return value["tool"], value.get("call_id"), arguments if isinstance(arguments, dict) \
            else {}
    return "interrupt", None, {"value": value}


def answer_schema(interrupt: Interrupt) -> dict[str, Any] | None:
    """The schema an edit is checked against: the `answer` of the interrupt's
    `Approval[...]` response schema (its definitions kept for references); an interrupt with no
    response schema takes any object. None: a response schema that is not an `Approval`, which
    no gate decision could satisfy."""
    schema = interrupt.response_schema
    if schema is None:
        return {"type": "object"}
    if not isinstance(schema, dict) or not schema.get(APPROVAL_SCHEMA_MARK):
        return None
    defs = schema.get("$defs", {})
    edited = schema["properties"]["answer"]
    choices = [s for s in edited.get("anyOf", [edited]) if s.get("type") != "null"]
    found = choices[0] if choices else {"type": "object"}
    ref = found.get("$ref", "")
    found = defs.get(ref.removeprefix("#/$defs/"), found) if ref else found
    return {**found, "$defs": defs} if defs else found


def add_graph_usage(usage: AgentUsage, messages: Sequence[BaseMessage]) -> AgentUsage:
    for message in messages:
        if isinstance(message, AIMessage):
            usage.requests += 1
            usage.input_tokens += _tokens(message)[0]
            usage.output_tokens += _tokens(message)[1]
            usage.cost_usd += _cost(message)
    return usage


def graph_events(make: MakeEvent, turn: int, first: int,
                 messages: Sequence[BaseMessage]) -> list[EventWrite]:
    """Events of `messages`, the turn's messages from position `first` on, keyed as a
    PydanticAI turn's are (waystation.kinds.agent.transcript), so each is recorded once."""
    events: list[EventWrite] = []
    for offset, message in enumerate(messages):
        at = f"t{turn}.m{first + offset}"
        if isinstance(message, AIMessage):
            model = message.response_metadata.get("model_name")
            inputs, outputs = _tokens(message)
            said = {"message_id": id} if (id := message_id_of(message)) else {}
            events.append(make(f"{at}.response", MODEL_RESPONDED, phase=turn,
                               status="completed", agent=model, output={
                                   "model": model, "text": message.text or None, **said,
                                   # Summed into the run's columns by migration 010's trigger.
                                   "usage": {"input_tokens": inputs, "output_tokens": outputs,
                                             "cost_usd": _cost(message)}}))
            for index, call in enumerate(message.tool_calls):
                events.append(make(f"{at}.p{index}", TOOL_CALLED, phase=turn,
                                   task=call["name"], status="started",
                                   output={"turn": turn, "tool": call["name"],
                                           "call_id": call["id"], "arguments": call["args"]}))
        elif isinstance(message, ToolMessage):
            failed = message.status == "error"
            events.append(make(f"{at}.p0", TOOL_RETRY if failed else TOOL_RETURNED, phase=turn,
                               task=message.name, status="retry" if failed else "completed",
                               output={"turn": turn, "tool": message.name,
                                       "call_id": message.tool_call_id,
                                       ("told" if failed else "result"): message.content}))
    return events


def message_id_of(message: BaseMessage) -> str | None:
    """The id a response's live tokens carried
    (waystation.kinds.agent.activities.langgraph.LiveTokens)."""
    if not isinstance(message, AIMessage):
        return None
    metadata = message.response_metadata or \
        message.additional_kwargs.get("response_metadata") or {}
    id = metadata.get(MESSAGE_ID_KEY)
    return id if isinstance(id, str) else None


def _cost(message: AIMessage) -> float:
    """What the worker priced the response at
    (waystation.kinds.agent.activities.langgraph.PricedResponses); 0 for a graph's own model, which
    is not priced."""
    metadata = message.response_metadata or \
        message.additional_kwargs.get("response_metadata") or {}
    return float(metadata.get(COST_KEY, 0.0))


def _tokens(message: AIMessage) -> tuple[int, int]:
    # A node's reply crosses into the workflow as JSON, and LangChain's coercion of that dict
    # back into a message (the `messages` reducer) files its usage under additional_kwargs.
    usage = message.usage_metadata or message.additional_kwargs.get("usage_metadata")
    return (usage["input_tokens"], usage["output_tokens"]) if usage else (0, 0)
