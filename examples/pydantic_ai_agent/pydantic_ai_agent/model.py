"""The desk's offline model: a PydanticAI `FunctionModel`, deterministic, with no network.

On the conversation's first message, whatever it says, it asks to refund (so a newcomer meets
the approval at once): the order and amount the message names, else order A-1001 and 40 EUR.
Later it refunds again when asked to refund; after the tool's result it says what happened,
the reviewer's words when the refund was refused. Asked for the run's summary, it lists the
refunds. A real model (`WAYSTATION_AGENT_BACKEND=openai`) replaces it unchanged.
"""

from __future__ import annotations

import re
from typing import Any

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

from waystation.kinds.agent.sdk import SUMMARY_REQUEST

MODEL_NAME = "refunds-offline"
ORDER = re.compile(r"\bA-\d{4}\b")
AMOUNT = re.compile(r"(\d+)\s*(?:eur|euros?|€)", re.IGNORECASE)
DEFAULT_ORDER, DEFAULT_AMOUNT_EUR = "A-1001", 40
HELP = "I refund orders: say which (A-0000) and how much, e.g. 'refund A-1234, 25 EUR'."


async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    latest = messages[-1]
    assert isinstance(latest, ModelRequest)
    returned = [p for p in latest.parts if isinstance(p, ToolReturnPart)]
    prompt = " ".join(str(p.content) for p in latest.parts if isinstance(p, UserPromptPart))
    if returned:
        parts: list[TextPart | ToolCallPart] = [TextPart(" ".join(map(_said, returned)))]
    elif prompt.startswith(SUMMARY_REQUEST):
        parts = [TextPart(_summary(messages))]
    elif _prompts(messages) == 1 or "refund" in prompt.lower():
        parts = [_refund_call(prompt)]
    else:
        parts = [TextPart(HELP)]
    return ModelResponse(parts=parts, model_name=MODEL_NAME)


def _refund_call(prompt: str) -> ToolCallPart:
    order, amount = ORDER.search(prompt), AMOUNT.search(prompt)
    return ToolCallPart("issue_refund", {
        "order_id": order.group(0) if order else DEFAULT_ORDER,
        "amount_eur": int(amount.group(1)) if amount else DEFAULT_AMOUNT_EUR,
        "reason": prompt[:200]})


def _said(part: ToolReturnPart) -> str:
    if part.outcome == "success":
        refund: dict[str, Any] = part.model_response_object()
        return (f"Refunded {refund['amount_eur']} EUR on order {refund['order_id']} "
                f"({refund['refund_id']}).")
    # Refused at the gate (or expired): the reviewer's feedback is the tool's result.
    return f"I did not refund: {part.model_response_str()}"


def _summary(messages: list[ModelMessage]) -> str:
    done = [_said(p) for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    return " ".join(done) or "No refund yet."


def _prompts(messages: list[ModelMessage]) -> int:
    """How many messages the person has sent (summary requests are not kept in the history)."""
    return sum(isinstance(p, UserPromptPart) for m in messages for p in m.parts)


def offline_model() -> FunctionModel:
    return FunctionModel(respond, model_name=MODEL_NAME)
