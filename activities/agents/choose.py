"""Chooses the agent backend by name (WAYSTATION_AGENT_BACKEND)."""

from __future__ import annotations

from waystation.activities.agents.base import AgentBackend
from waystation.activities.agents.noop import NoopBackend
from waystation.activities.agents.offline import OfflineBackend
from waystation.activities.agents.prices import ModelPrice, PriceBook


def backend_named(name: str, *, delay_ms: int = 0, base_url: str | None = None,
                  api_key: str | None = None, model: str | None = None,
                  prices: dict[str, ModelPrice] | None = None,
                  timeout_seconds: float = 120.0) -> AgentBackend:
    if name == "offline":
        return OfflineBackend(delay_ms=delay_ms)
    if name == "noop":
        return NoopBackend()
    if name == "openai":
        from waystation.activities.agents.openai_compatible import OpenAICompatibleBackend

        return OpenAICompatibleBackend(
            base_url=base_url or "https://api.openai.com/v1", api_key=api_key,
            model=model or "gpt-4o-mini", prices=PriceBook(prices),
            timeout_seconds=timeout_seconds)
    raise ValueError(f"unknown agent backend {name!r}; choose offline, noop or openai")
