"""What the API's /metrics reports from the read model, read in one go at scrape time."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg
from pydantic import BaseModel, ConfigDict

from waystation.persistence.analytics import GateHistogram, time_to_decide
from waystation.persistence.queries import sql


class RunCount(BaseModel):
    kind: str
    status: str
    runs: int
    events: int


class PendingGates(BaseModel):
    kind: str
    pending: int
    oldest_age_seconds: float


class LatencyBucket(BaseModel):
    kind: str
    bucket: int  # index into the bounds: latencies below bounds[bucket] (len(bounds): above all)
    decided: int
    seconds: float


class ReadModelFigures(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    runs: list[RunCount]
    pending_gates: list[PendingGates]
    decision_latency: list[LatencyBucket]
    # The kinds' own figures (`DataHooks.metrics`): Prometheus metric families, as they are.
    kind_metrics: list[Any] = []
    # Time to decide by kind and gate, from the daily roll-ups (migration 075).
    time_to_decide: list[GateHistogram] = []


async def read_figures(conn: asyncpg.Connection, latency_bounds: Sequence[float],
                       kinds: Sequence[Callable[[Any], Awaitable[Sequence[Any]]]] = (),
                       ) -> ReadModelFigures:
    """One snapshot, in one read-only transaction so the figures agree with each other
    (the kinds' `metrics` hooks read in it too)."""
    kind_metrics: list[Any] = []
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        runs = await conn.fetch(sql("metrics_runs"))
        gates = await conn.fetch(sql("metrics_pending_gates"))
        latency = await conn.fetch(sql("metrics_decision_latency"), list(latency_bounds))
        per_gate = await time_to_decide(conn)
        for kind in kinds:
            kind_metrics.extend(await kind(conn))
    return ReadModelFigures(
        runs=[RunCount.model_validate(dict(r)) for r in runs],
        pending_gates=[PendingGates.model_validate(dict(r)) for r in gates],
        decision_latency=[LatencyBucket.model_validate(dict(r)) for r in latency],
        kind_metrics=kind_metrics, time_to_decide=per_gate)
