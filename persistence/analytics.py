"""Decision analytics' reads: the daily roll-ups (migration 075) and, for a person's
decisions and as a baseline, the requests themselves."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any
from uuid import UUID

import asyncpg
from pydantic import BaseModel

from persistence.models import Row
from persistence.queries import sql

# The roll-ups' histogram (decision_bucket, migration 075): bucket 1 holds times under a
# second, bucket i from 2^((i-2)/2) to 2^((i-1)/2) seconds, bucket 49 everything longer.
BUCKETS = 49
QUANTILES = (0.5, 0.9, 0.99)


def bucket_bounds(bucket: int) -> tuple[float, float]:
    """A bucket's lower and upper bounds in seconds."""
    if bucket <= 1:
        return 0.0, 1.0
    return 2 ** ((bucket - 2) / 2), 2 ** ((bucket - 1) / 2)


def percentiles(histogram: dict[int, int]) -> list[float | None]:
    """The QUANTILES of a histogram, each interpolated within its bucket (geometrically: the
    buckets grow by a factor √2, so the estimate is within that factor of the true value)."""
    total = sum(histogram.values())
    if total == 0:
        return [None] * len(QUANTILES)
    found: list[float | None] = []
    for q in QUANTILES:
        rank, seen = q * total, 0
        for bucket in sorted(histogram):
            count = histogram[bucket]
            if seen + count >= rank:
                low, high = bucket_bounds(bucket)
                share = (rank - seen) / count
                found.append(low + (high - low) * share if low == 0 or bucket == BUCKETS
                             else low * math.pow(high / low, share))
                break
            seen += count
    return found


class Filters(BaseModel):
    since: datetime
    kind: str | None = None
    gate: str | None = None
    group_id: UUID | None = None
    project_id: str | None = None
    person: str | None = None


class FigureRow(Row):
    """Counts per day (level 3), per kind and gate (level 4) or in all (level 7): the
    GROUPING() of (day, kind, gate)."""

    level: int
    day: date | None
    kind: str | None
    gate: str | None
    approved: int
    rejected: int
    expired: int
    superseded: int
    policy_decided: int
    recommended: int
    overruled: int
    reminders: int
    percentiles: list[float] | None = None


class BucketRow(Row):
    level: int
    day: date | None
    kind: str | None
    gate: str | None
    bucket: int
    n: int


async def rollup_figures(conn: asyncpg.Connection,
                         f: Filters) -> tuple[list[FigureRow], list[BucketRow]]:
    args = (f.since.date(), f.kind, f.gate, f.group_id, f.project_id)
    figures = await conn.fetch(sql("rollup_figures"), *args)
    buckets = await conn.fetch(sql("rollup_histograms"), *args)
    return ([FigureRow.from_record(r) for r in figures],
            [BucketRow.from_record(r) for r in buckets])


async def raw_figures(conn: asyncpg.Connection, f: Filters) -> list[FigureRow]:
    records = await conn.fetch(sql("raw_figures"), f.since, f.kind, f.gate, f.group_id,
                               f.project_id, f.person)
    return [FigureRow.from_record(r) for r in records]


async def waiting(conn: asyncpg.Connection, f: Filters) -> tuple[int, int]:
    record = await conn.fetchrow(sql("waiting_figures"), f.kind, f.gate, f.group_id,
                                 f.project_id, f.person)
    return record["pending"], record["overdue"]


async def shadow_agreement(conn: asyncpg.Connection, f: Filters) -> tuple[int, int]:
    record = await conn.fetchrow(sql("shadow_agreement"), f.since, f.kind, f.gate, f.group_id,
                                 f.project_id, f.person)
    return record["compared"], record["agreed"]


class GateHistogram(BaseModel):
    kind: str
    gate: str
    buckets: dict[int, int]
    seconds: float


async def time_to_decide(conn: asyncpg.Connection) -> list[GateHistogram]:
    """Every gate's histogram over all time (GET /metrics)."""
    gates: dict[tuple[str, str], GateHistogram] = {}
    for r in await conn.fetch(sql("time_to_decide_histograms")):
        gate = gates.setdefault((r["kind"], r["gate"]), GateHistogram(
            kind=r["kind"], gate=r["gate"], buckets={}, seconds=r["seconds"]))
        gate.buckets[r["bucket"]] = r["n"]
    return list(gates.values())


def histograms(rows: Sequence[BucketRow]) -> dict[Any, dict[int, int]]:
    """The bucket rows as histograms keyed by day, by (kind, gate), and None for all."""
    found: dict[Any, dict[int, int]] = {}
    for r in rows:
        key = r.day if r.day is not None else (r.kind, r.gate) if r.kind is not None else None
        found.setdefault(key, {})[r.bucket] = r.n
    return found
