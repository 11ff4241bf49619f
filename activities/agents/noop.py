"""A backend that answers at once with an empty output: for benchmarks of the machinery."""

from __future__ import annotations

from activities.agents.base import AgentRequest, AgentResponse, ProgressReporter


class NoopBackend:
    name = "noop"

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse:
        return AgentResponse(output={"task": request.task}, model="noop")

    async def aclose(self) -> None:
        return None
