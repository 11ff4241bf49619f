"""The desk's offline model: an `agents.Model`, deterministic, with no network.

On the conversation's first message, whatever it says, it asks to refund (so a newcomer meets
the approval at once): the order and amount the message names, else order A-1001 and 40 EUR.
Later it refunds again when asked to refund; after the tool's result it says what happened,
the reviewer's words when the refund was refused. Asked for the run's summary, it lists the
refunds. A real model (`WAYSTATION_AGENT_BACKEND=openai`) replaces it unchanged.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agents import Model, ModelResponse, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from waystation.kinds.agent.openai_agents import SUMMARY_REQUEST

MODEL_NAME = "refunds-desk-offline"
ORDER = re.compile(r"\bA-\d{4}\b")
AMOUNT = re.compile(r"(\d+)\s*(?:eur|euros?|€)", re.IGNORECASE)
DEFAULT_ORDER, DEFAULT_AMOUNT_EUR = "A-1001", 40
HELP = "I refund orders: say which (A-0000) and how much, e.g. 'refund A-1234, 25 EUR'."


class OfflineDesk(Model):
    async def get_response(self, system_instructions: str | None, input: Any,
                           *args: Any, **kwargs: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else \
            [dict(item) for item in input]
        output = respond(items)
        # Words in and out stand in for tokens, so a run's usage moves.
        words_in = sum(len(_text(item).split()) for item in items)
        words_out = sum(len(_text(o.model_dump()).split()) for o in output) + 10 * sum(
            isinstance(o, ResponseFunctionToolCall) for o in output)
        return ModelResponse(output=list(output), response_id=None, usage=Usage(
            requests=1, input_tokens=words_in, output_tokens=words_out,
            total_tokens=words_in + words_out))

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the offline desk does not stream")


def respond(items: list[dict[str, Any]]) -> list[Any]:
    latest = items[-1]
    if latest.get("type") == "function_call_output":
        return [_message(_said(str(latest["output"])))]
    prompt = _text(latest) if latest.get("role") == "user" else ""
    if prompt.startswith(SUMMARY_REQUEST):
        return [_message(_summary(items))]
    if _prompts(items) == 1 or "refund" in prompt.lower():
        return [_refund_call(prompt, items)]
    return [_message(HELP)]


def _refund_call(prompt: str, items: list[dict[str, Any]]) -> ResponseFunctionToolCall:
    order, amount = ORDER.search(prompt), AMOUNT.search(prompt)
    calls = sum(item.get("type") == "function_call" for item in items)
    return ResponseFunctionToolCall(
        type="function_call", id=f"fc_{calls + 1}", call_id=f"call_{calls + 1}",
        name="issue_refund", status="completed", arguments=json.dumps({
            "order_id": order.group(0) if order else DEFAULT_ORDER,
            "amount_eur": int(amount.group(1)) if amount else DEFAULT_AMOUNT_EUR,
            "reason": prompt[:200]}))


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(type="message", id="msg", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text,
                                                             annotations=[])])


def _said(output: str) -> str:
    try:
        refund = json.loads(output)
    except ValueError:
        # Refused at the gate (or expired): the reviewer's feedback is the tool's result.
        return f"I did not refund: {output}"
    return (f"Refunded {refund['amount_eur']} EUR on order {refund['order_id']} "
            f"({refund['refund_id']}).")


def _summary(items: list[dict[str, Any]]) -> str:
    done = [_said(str(item["output"])) for item in items
            if item.get("type") == "function_call_output"]
    return " ".join(done) or "No refund yet."


def _prompts(items: list[dict[str, Any]]) -> int:
    """How many messages the person has sent (summary requests are not kept in the history)."""
    return sum(item.get("role") == "user" for item in items)


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(item.get("arguments") or item.get("output") or "")
