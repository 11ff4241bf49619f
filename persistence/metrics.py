"""What the API's /metrics reports from the read model, read in one go at scrape time."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg
from pydantic import BaseModel

from persistence.queries import sql


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


class ItemCount(BaseModel):
    status: str
    items: int


class ReadModelFigures(BaseModel):
    runs: list[RunCount]
    pending_gates: list[PendingGates]
    decision_latency: list[LatencyBucket]
    batch_items: list[ItemCount]


async def read_figures(conn: asyncpg.Connection,
                       latency_bounds: Sequence[float]) -> ReadModelFigures:
    """One snapshot, in one read-only transaction so the figures agree with each other."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        runs = await conn.fetch(sql("metrics_runs"))
        gates = await conn.fetch(sql("metrics_pending_gates"))
        latency = await conn.fetch(sql("metrics_decision_latency"), list(latency_bounds))
        items = await conn.fetch(sql("metrics_batch_items"))
    return ReadModelFigures(
        runs=[RunCount.model_validate(dict(r)) for r in runs],
        pending_gates=[PendingGates.model_validate(dict(r)) for r in gates],
        decision_latency=[LatencyBucket.model_validate(dict(r)) for r in latency],
        batch_items=[ItemCount.model_validate(dict(r)) for r in items])
