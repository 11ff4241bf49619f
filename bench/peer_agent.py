"""The agent conversation the peers benchmark and bench.bench_agent run: the built-in planner
(kinds/agent/planner) with its offline `FunctionModel`, three messages of one tool call each.

Waystation runs the planner itself (the `agent` run kind). The peers run the same model and
the same tool functions in a ReAct loop of their own (model request, tool calls, model
request, then the summary request, as AgentRun's turn), each request and each tool call one
durable step of theirs; this module gives them those two steps as plain functions over JSON,
so that each peer's checkpoints hold what a real one would.

`FIRST_REQUEST` notes when the model is first asked after a person's message, the same way
for every system (the model runs in the harness's process for all three), so that "message →
the agent's first step" is measured alike.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic_ai import Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import FunctionModel

from waystation.kinds.agent.contracts import SUMMARY_PROMPT
from waystation.kinds.agent.planner.agent import INSTRUCTIONS, planner
from waystation.kinds.agent.planner.catalogue import check_availability, search_vendors, shortlist

MESSAGES = ("I need a wedding venue in Bangalore for 200 guests, rustic style",
            "I like the first three",
            "Which of them are available on 2027-02-14?")
TOOLS: dict[str, Callable[..., Awaitable[Any]]] = {
    f.__name__: f for f in (search_vendors, shortlist, check_availability)}
PARAMETERS = ModelRequestParameters(function_tools=[Tool(f).tool_def for f in TOOLS.values()],
                                    allow_text_output=True)


class FirstRequest:
    """When the model was first asked since `reset` (perf_counter), by any system."""

    def __init__(self) -> None:
        self.at: float | None = None

    def reset(self) -> None:
        self.at = None

    def since(self, sent: float) -> float:
        assert self.at is not None, "the model was not asked"
        return (self.at - sent) * 1000


FIRST_REQUEST = FirstRequest()


def _model() -> FunctionModel:
    model = planner.model
    assert isinstance(model, FunctionModel), model
    return model


def _instrument() -> None:
    """Wrap the planner model's functions once, so that every system's request is noted:
    `function` answers a whole request (the peers' and the summary), `stream_function` a
    streamed one (Waystation's model requests since issue 43: noting only `function` timed
    its message → the summary request instead)."""
    model = _model()
    plan, stream = model.function, model.stream_function
    if getattr(plan, "_noted", False) or plan is None:
        return

    def note() -> None:
        if FIRST_REQUEST.at is None:
            FIRST_REQUEST.at = time.perf_counter()

    async def noted(messages: list[ModelMessage], info: Any) -> ModelResponse:
        note()
        return await plan(messages, info)  # type: ignore[misc]
    noted._noted = True  # type: ignore[attr-defined]
    model.function = noted
    if stream is not None:
        def noted_stream(messages: list[ModelMessage], info: Any) -> AsyncIterator[Any]:
            note()
            return stream(messages, info)
        model.stream_function = noted_stream


_instrument()


def user_message(text: str) -> list[Any]:
    """A person's message as the JSON of one model request."""
    return ModelMessagesTypeAdapter.dump_python(
        [ModelRequest(parts=[UserPromptPart(text)], instructions=INSTRUCTIONS)], mode="json")


async def model_request(history: list[Any]) -> list[Any]:
    """One model request over the JSON history; the response, as JSON."""
    messages = ModelMessagesTypeAdapter.validate_python(history)
    response = await _model().request(messages, None, PARAMETERS)
    return ModelMessagesTypeAdapter.dump_python([response], mode="json")


def tool_calls(response: list[Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(tool call id, tool name, arguments) of each call a JSON model response asks for."""
    message = ModelMessagesTypeAdapter.validate_python(response)[0]
    return [(p.tool_call_id, p.tool_name, p.args_as_dict()) for p in message.parts
            if isinstance(p, ToolCallPart)]


async def call_tool(call_id: str, name: str, args: dict[str, Any]) -> list[Any]:
    """One tool call; its return as the JSON of the model request that carries it."""
    result = await TOOLS[name](**args)
    return ModelMessagesTypeAdapter.dump_python(
        [ModelRequest(parts=[ToolReturnPart(name, result, tool_call_id=call_id)],
                      instructions=INSTRUCTIONS)], mode="json")


def summary_request() -> list[Any]:
    return user_message(SUMMARY_PROMPT)
