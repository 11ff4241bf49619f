"""An OpenAI Agents SDK triage agent that hands every request off to its `refunds` agent, with
an input guardrail that trips on the word "forbidden": the handoff and the trip are run events
(tests/workflows/test_agent_openai_agents.py). Offline models, deterministic."""

from __future__ import annotations

from typing import Any

from agents import (
    Agent,
    GuardrailFunctionOutput,
    Model,
    ModelResponse,
    RunContextWrapper,
    Usage,
    input_guardrail,
)
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from waystation.kinds.agent.openai_agents import SUMMARY_REQUEST


def _said(text: str) -> ModelResponse:
    return ModelResponse(response_id=None, usage=Usage(requests=1, input_tokens=3,
                                                       output_tokens=2, total_tokens=5),
                         output=[ResponseOutputMessage(
                             type="message", id="msg", role="assistant", status="completed",
                             content=[ResponseOutputText(type="output_text", text=text,
                                                         annotations=[])])])


def _last_user(input: Any) -> str:
    items = [{"role": "user", "content": input}] if isinstance(input, str) else input
    users = [i for i in items if isinstance(i, dict) and i.get("role") == "user"]
    return str(users[-1]["content"]) if users else ""


class Triage(Model):
    async def get_response(self, system_instructions: str | None, input: Any, model_settings: Any,
                           tools: Any, output_schema: Any, handoffs: list[Any],
                           *args: Any, **kwargs: Any) -> ModelResponse:
        if _last_user(input).startswith(SUMMARY_REQUEST) or not handoffs:
            return _said("Triage handed a request to refunds.")
        return ModelResponse(response_id=None, usage=Usage(requests=1, input_tokens=4,
                                                           output_tokens=1, total_tokens=5),
                             output=[ResponseFunctionToolCall(
                                 type="function_call", id="fc_h", call_id="call_h",
                                 name=handoffs[0].tool_name, arguments="{}",
                                 status="completed")])

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class Refunds(Model):
    async def get_response(self, system_instructions: str | None, input: Any,
                           *args: Any, **kwargs: Any) -> ModelResponse:
        return _said(f"Refunds here: {_last_user(input)}")

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@input_guardrail(run_in_parallel=False)
async def nothing_forbidden(context: RunContextWrapper[Any], agent: Agent[Any],
                            input: Any) -> GuardrailFunctionOutput:
    said = _last_user(input)
    return GuardrailFunctionOutput(output_info={"said": said},
                                   tripwire_triggered="forbidden" in said)


refunds = Agent(name="refunds", instructions="Refund.", model=Refunds())
triage = Agent(name="triage", instructions="Hand off.", model=Triage(), handoffs=[refunds],
               input_guardrails=[nothing_forbidden])
AGENTS = {"triage": triage}
