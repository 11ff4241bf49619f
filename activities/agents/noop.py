"""A backend that answers at once: for benchmarks of the machinery, not of a model.

A task that asks for typed output gets the smallest value its schema accepts (the same
schema example the offline backend uses), so typed tasks pass their checks; any other gets an
empty output.
"""

from __future__ import annotations

from waystation.activities.agents.base import AgentRequest, AgentResponse, ProgressReporter
from waystation.activities.agents.schema_example import example_for


class NoopBackend:
    name = "noop"
    # Its calls are short and local: work calling it may run as a local activity.
    in_place = True

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse:
        if request.output_schema is not None:
            return AgentResponse(output=example_for(request.output_schema), model="noop")
        return AgentResponse(output={"task": request.task}, model="noop")

    async def aclose(self) -> None:
        return None
