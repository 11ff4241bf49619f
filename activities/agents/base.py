"""The agent-backend interface."""

from __future__ import annotations

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


class AgentBackend(Protocol):
    name: str

    async def run(self, request: AgentRequest) -> AgentResponse: ...
