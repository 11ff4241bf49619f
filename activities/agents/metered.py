"""Counts model calls, tokens and cost as they happen, on the worker's metrics endpoint.

The counters live on Temporal's runtime meter, so they are served beside the SDK's own metrics
(WAYSTATION_WORKER_METRICS_PORT); with metrics off the meter discards them. Cost is counted in
millionths of a dollar because the runtime's counters are integers.
"""

from __future__ import annotations

from temporalio.common import MetricMeter

from waystation.activities.agents.base import (
    AgentBackend,
    AgentRequest,
    AgentResponse,
    ProgressReporter,
    Usage,
    answers_in_place,
    usage_of,
)


class ModelMeter:
    """The `waystation_model_*` counters: every model call a worker makes, the crews' through
    the backend and the agent runs' through PydanticAI (waystation.kinds.agent.activities.metering),
    counted here. One per runtime meter."""

    def __init__(self, meter: MetricMeter) -> None:
        self._calls = meter.create_counter(
            "waystation_model_calls", "Agent backend calls, by backend, model and outcome")
        self._tokens = meter.create_counter(
            "waystation_model_tokens", "Tokens the backend reported, by direction", "tokens")
        self._cost = meter.create_counter(
            "waystation_model_cost_microusd", "Cost the backend reported, in 1e-6 USD")

    def count(self, backend: str, usage: Usage, outcome: str) -> None:
        labels = {"backend": backend, "model": usage.model}
        self._calls.add(1, {**labels, "outcome": outcome})
        self._tokens.add(usage.input_tokens, {**labels, "direction": "input"})
        self._tokens.add(usage.output_tokens, {**labels, "direction": "output"})
        self._cost.add(round(usage.cost_usd * 1_000_000), labels)


class MeteredBackend:
    def __init__(self, backend: AgentBackend, meter: ModelMeter) -> None:
        self.name = backend.name
        self._backend = backend
        self._meter = meter

    @property
    def in_place(self) -> bool:
        return answers_in_place(self._backend)

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse:
        try:
            response = await self._backend.run(request, progress)
        except BaseException as error:
            # A failed call may still have cost something (ModelCallFailed carries its usage).
            self._meter.count(self.name, usage_of(error), "error")
            raise
        self._meter.count(self.name, response.usage, "ok")
        return response

    async def aclose(self) -> None:
        await self._backend.aclose()
