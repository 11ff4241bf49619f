"""What a model call cost: genai-prices' maintained table, overridable per model.

Overrides (`WAYSTATION_MODEL_PRICES`) are USD per million tokens, e.g.
`{"my-local-llama": {"input": 0.0, "output": 0.0}, "gpt-4o-mini": {"input": 0.15,
"output": 0.6}}`; they win over the table, and cover models it does not know.
"""

from __future__ import annotations

import logging

from genai_prices import Usage as PricedUsage
from genai_prices import calc_price
from pydantic import BaseModel

log = logging.getLogger(__name__)


class ModelPrice(BaseModel):
    input: float
    output: float


class PriceBook:
    def __init__(self, overrides: dict[str, ModelPrice] | None = None) -> None:
        self._overrides = overrides or {}
        self._unknown: set[str] = set()

    def overridden_usd(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        """The cost by the override for `model`; None when it has none."""
        price = self._overrides.get(model)
        if price is None:
            return None
        return (input_tokens * price.input + output_tokens * price.output) / 1_000_000

    def cost_usd(self, model: str, input_tokens: int, output_tokens: int) -> float:
        overridden = self.overridden_usd(model, input_tokens, output_tokens)
        if overridden is not None:
            return overridden
        try:
            calculated = calc_price(
                PricedUsage(input_tokens=input_tokens, output_tokens=output_tokens), model)
        except LookupError:
            if model not in self._unknown:
                self._unknown.add(model)
                log.warning("no price known for model %r: its cost is recorded as 0; set "
                            "WAYSTATION_MODEL_PRICES to price it", model)
            return 0.0
        return float(calculated.total_price)
