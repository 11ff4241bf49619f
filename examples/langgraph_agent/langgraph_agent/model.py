"""The desk's offline chat model: a LangChain `BaseChatModel`, deterministic, with no network.

On the conversation's first message, whatever it says, it asks to refund (so a newcomer meets
the approval at once): the order and amount the message names, else order A-1001 and 40 EUR.
Later it refunds again when asked to refund; after the tool's result it says what happened,
the reviewer's words when the refund was refused. Asked for the run's summary, it lists the
refunds. A real model (`WAYSTATION_AGENT_BACKEND=openai`) replaces it unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from waystation.kinds.agent.langgraph import SUMMARY_REQUEST

MODEL_NAME = "refunds-graph-offline"
ORDER = re.compile(r"\bA-\d{4}\b")
AMOUNT = re.compile(r"(\d+)\s*(?:eur|euros?|€)", re.IGNORECASE)
DEFAULT_ORDER, DEFAULT_AMOUNT_EUR = "A-1001", 40
HELP = "I refund orders: say which (A-0000) and how much, e.g. 'refund A-1234, 25 EUR'."


class OfflineDesk(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return MODEL_NAME

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineDesk:
        # It knows its one tool already.
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        reply = respond(messages)
        # Words in and out stand in for tokens, so a run's usage moves.
        words_in = sum(len(str(m.content).split()) for m in messages)
        words_out = len(str(reply.content).split()) + 10 * len(reply.tool_calls)
        reply.usage_metadata = {"input_tokens": words_in, "output_tokens": words_out,
                                "total_tokens": words_in + words_out}
        reply.response_metadata = {"model_name": MODEL_NAME}
        return ChatResult(generations=[ChatGeneration(message=reply)])


def respond(messages: list[BaseMessage]) -> AIMessage:
    latest = messages[-1]
    if isinstance(latest, ToolMessage):
        return AIMessage(_said(latest))
    prompt = str(latest.content) if isinstance(latest, HumanMessage) else ""
    if prompt.startswith(SUMMARY_REQUEST):
        return AIMessage(_summary(messages))
    if _prompts(messages) == 1 or "refund" in prompt.lower():
        return AIMessage("", tool_calls=[_refund_call(prompt, messages)])
    return AIMessage(HELP)


def _refund_call(prompt: str, messages: list[BaseMessage]) -> dict[str, Any]:
    order, amount = ORDER.search(prompt), AMOUNT.search(prompt)
    calls = sum(len(m.tool_calls) for m in messages if isinstance(m, AIMessage))
    return {"name": "issue_refund", "id": f"call_{calls + 1}", "type": "tool_call", "args": {
        "order_id": order.group(0) if order else DEFAULT_ORDER,
        "amount_eur": int(amount.group(1)) if amount else DEFAULT_AMOUNT_EUR,
        "reason": prompt[:200]}}


def _said(message: ToolMessage) -> str:
    try:
        refund = json.loads(str(message.content))
    except ValueError:
        # Refused at the gate (or expired): the reviewer's feedback is the tool's result.
        return f"I did not refund: {message.content}"
    return (f"Refunded {refund['amount_eur']} EUR on order {refund['order_id']} "
            f"({refund['refund_id']}).")


def _summary(messages: list[BaseMessage]) -> str:
    done = [_said(m) for m in messages if isinstance(m, ToolMessage)]
    return " ".join(done) or "No refund yet."


def _prompts(messages: list[BaseMessage]) -> int:
    """How many messages the person has sent (summary requests are not kept in the history)."""
    return sum(isinstance(m, HumanMessage) for m in messages)
