"""Chooses the agent backend by name (WAYSTATION_AGENT_BACKEND)."""

from __future__ import annotations

from activities.agents.base import AgentBackend
from activities.agents.noop import NoopBackend
from activities.agents.offline import OfflineBackend


def backend_named(name: str, *, delay_ms: int = 0, **options: str | None) -> AgentBackend:
    if name == "offline":
        return OfflineBackend(delay_ms=delay_ms)
    if name == "noop":
        return NoopBackend()
    if name == "openai":
        from activities.agents.openai_compatible import OpenAICompatibleBackend

        return OpenAICompatibleBackend(
            base_url=options.get("base_url") or "https://api.openai.com/v1",
            api_key=options.get("api_key"),
            model=options.get("model") or "gpt-4o-mini",
        )
    raise ValueError(f"unknown agent backend {name!r}; choose offline, noop or openai")
