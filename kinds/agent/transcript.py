"""An agent turn's PydanticAI messages as run events, and their usage and cost.

Each event's key is derived from the turn and the part's position within the turn, so a
replayed workflow (or a retried write) records every message, tool call and tool result once.
Deterministic: called from workflow code on messages that came out of activities.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )

    from waystation.kinds.agent.activities.live import MESSAGE_ID_KEY
    from waystation.kinds.agent.activities.metering import cost_usd
    from waystation.kinds.agent.contracts import MODEL_RESPONDED
    from waystation.kinds.agent.models import AgentUsage
    from waystation.sdk import TOOL_CALLED, TOOL_RETRY, TOOL_RETURNED, EventWrite

MakeEvent = Callable[..., EventWrite]


def add_usage(usage: AgentUsage, messages: Sequence[ModelMessage]) -> AgentUsage:
    for message in messages:
        if isinstance(message, ModelResponse):
            usage.requests += 1
            usage.input_tokens += message.usage.input_tokens
            usage.output_tokens += message.usage.output_tokens
            usage.cost_usd = round(usage.cost_usd + cost_usd(message), 8)
    return usage


def turn_events(make: MakeEvent, turn: int, first: int,
                messages: Sequence[ModelMessage],
                written: set[str] | frozenset[str] = frozenset()) -> list[EventWrite]:
    """Events of `messages`, the turn's messages from position `first` on; but not the results
    of the tool calls in `written` (their `tool.returned` went out as they ran:
    `returned_event`)."""
    events: list[EventWrite] = []
    for offset, message in enumerate(messages):
        at = f"t{turn}.m{first + offset}"
        if isinstance(message, ModelResponse):
            events.append(make(f"{at}.response", MODEL_RESPONDED, phase=turn, status="completed",
                               agent=message.model_name, output=_response(message)))
        for index, part in enumerate(message.parts):
            if isinstance(part, ToolReturnPart) and part.outcome == "success" \
                    and part.tool_call_id in written:
                continue
            event = _part_event(make, f"{at}.p{index}", turn, part)
            if event is not None:
                events.append(event)
    return events


def answered_message_id(messages: Sequence[ModelMessage]) -> str | None:
    """The id of the response that holds the turn's answer (its last with text), as its model
    request named it for its live deltas (waystation.kinds.agent.activities.live)."""
    for message in reversed(messages):
        if isinstance(message, ModelResponse) and any(isinstance(p, TextPart)
                                                      for p in message.parts):
            id = (message.metadata or {}).get(MESSAGE_ID_KEY)
            return id if isinstance(id, str) else None
    return None


def returned_event(make: MakeEvent, turn: int, part: ToolReturnPart) -> EventWrite:
    """A tool call's `tool.returned`, written as soon as the tool has run. Keyed by the call's
    id (from the model's response, in the history: a replay and a retried write name it the
    same) instead of its position in the turn's messages."""
    event = _part_event(make, f"t{turn}.call.{part.tool_call_id}.returned", turn, part)
    assert event is not None
    return event


def _response(message: ModelResponse) -> dict[str, Any]:
    # `usage` is what migration 010's trigger adds to the run's cost and token columns: each
    # response's own, once (its event key is written once).
    said = {"message_id": id} if (id := (message.metadata or {}).get(MESSAGE_ID_KEY)) else {}
    return {"model": message.model_name, **said,
            "usage": {"input_tokens": message.usage.input_tokens,
                      "output_tokens": message.usage.output_tokens,
                      "cost_usd": cost_usd(message)},
            "text": "".join(p.content for p in message.parts if isinstance(p, TextPart)) or None}


def _part_event(make: MakeEvent, key: str, turn: int, part: Any) -> EventWrite | None:
    if isinstance(part, ToolCallPart):
        return make(key, TOOL_CALLED, phase=turn, task=part.tool_name, status="started",
                    output={"turn": turn, "tool": part.tool_name, "call_id": part.tool_call_id,
                            "arguments": part.args_as_dict()})
    if isinstance(part, ToolReturnPart) and part.outcome == "retried":
        # The model called an unknown tool or gave bad arguments: PydanticAI answers the call
        # with what was wrong (`outcome="retried"`), the model is told, and carries on.
        return make(key, TOOL_RETRY, phase=turn, task=part.tool_name, status="retry",
                    output={"turn": turn, "tool": part.tool_name, "call_id": part.tool_call_id,
                            "told": part.model_response_str()})
    if isinstance(part, ToolReturnPart):
        return make(key, TOOL_RETURNED, phase=turn, task=part.tool_name, status="completed",
                    output={"turn": turn, "tool": part.tool_name, "call_id": part.tool_call_id,
                            "result": part.model_response_object()})
    return None
