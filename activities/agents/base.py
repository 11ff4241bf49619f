"""The agent-backend interface."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pydantic import BaseModel, Field


class AgentRequest(BaseModel):
    """One task for one agent of a crew."""

    crew: str
    task: str
    agent: str
    instructions: str
    context: dict[str, Any] = Field(default_factory=dict)
    feedback: str | None = None


class AgentResponse(BaseModel):
    output: dict[str, Any]
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    model: str = ""


# A backend may report how far along it is while it works: (percent of the task, a note).
ProgressReporter = Callable[[int, str], Awaitable[None]]


class AgentBackend(Protocol):
    name: str

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse: ...
