"""Agent model requests priced by the worker's price table and counted on its metrics.

`ConfiguredModel` wraps the model that serves each request in `PricedModel`; PydanticAI
applies capabilities' model wrappers inside the model-request activity, around the model that
sends. The response carries its cost in `metadata` (`WAYSTATION_MODEL_PRICES` first, through
the crews' `PriceBook`, else genai-prices), so the workflow sums what the activity priced: it is
in the run's history, and a worker restarted with other prices does not reprice the past. The
call is counted on the worker's `waystation_model_*` counters (backend `agent`), a failed
attempt as `error`. In an agent run's activity the request is streamed and its deltas
published live (waystation.kinds.agent.activities.live).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from waystation.kinds.agent.activities.live import (
    MESSAGE_ID_KEY,
    message_id,
    streamed_request,
    streams,
)
from waystation.sdk.agents import ModelMeter, PriceBook, Usage

COST_KEY = "waystation_cost_usd"
METER_BACKEND = "agent"


@dataclass
class Accounting:
    prices: PriceBook = field(default_factory=PriceBook)
    meter: ModelMeter | None = None


# Set once by the worker as it starts (`use_accounting`): genai-prices and no counters until then.
_accounting = Accounting()


def use_accounting(accounting: Accounting) -> None:
    global _accounting
    _accounting = accounting


def cost_usd(response: ModelResponse) -> float:
    """What the response cost: as the activity priced it, else (a response recorded before
    responses were priced there, or sent by an agent without `ConfiguredModel`) genai-prices'
    price, 0 for a model it does not know (offline)."""
    priced = (response.metadata or {}).get(COST_KEY)
    if isinstance(priced, int | float):
        return float(priced)
    try:
        return float(response.cost().total_price)
    except (LookupError, ValueError, AssertionError):
        return 0.0


def priced(model: str, input_tokens: int, output_tokens: int) -> float:
    """A response of another framework's model call (waystation.kinds.agent.activities.openai,
    waystation.kinds.agent.activities.langgraph): its cost by the worker's price table, counted on
    the worker's model counters."""
    cost = _accounting.prices.cost_usd(model, input_tokens, output_tokens)
    if _accounting.meter is not None:
        _accounting.meter.count(METER_BACKEND, Usage(input_tokens=input_tokens,
                                                     output_tokens=output_tokens,
                                                     cost_usd=cost, model=model), "ok")
    return cost


def count_failed(model: str) -> None:
    """A model call that failed, counted on the worker's model counters."""
    if _accounting.meter is not None:
        _accounting.meter.count(METER_BACKEND, Usage(model=model), "error")


class PricedModel(WrapperModel):
    async def request(self, messages: list[ModelMessage], model_settings: ModelSettings | None,
                      model_request_parameters: ModelRequestParameters) -> ModelResponse:
        meter = _accounting.meter
        try:
            if streams(self.wrapped, messages):
                response = await streamed_request(self.wrapped, messages, model_settings,
                                                  model_request_parameters)
            else:
                response = await super().request(messages, model_settings,
                                                 model_request_parameters)
        except Exception:
            if meter is not None:
                meter.count(METER_BACKEND, Usage(model=self.model_name), "error")
            raise
        # Priced by the model the server says answered, as the crews' backend does.
        model = response.model_name or self.model_name
        tokens = response.usage.input_tokens, response.usage.output_tokens
        overridden = _accounting.prices.overridden_usd(model, *tokens)
        cost = overridden if overridden is not None else cost_usd(response)
        # The id its deltas carried (waystation.kinds.agent.activities.live), for its durable
        # events.
        said = {MESSAGE_ID_KEY: id} if (id := message_id()) is not None else {}
        response.metadata = {**(response.metadata or {}), COST_KEY: cost, **said}
        if meter is not None:
            meter.count(METER_BACKEND, Usage(input_tokens=tokens[0], output_tokens=tokens[1],
                                             cost_usd=cost, model=model), "ok")
        return response
