"""Decision analytics' reads: the daily roll-ups (migration 075) and, for a person's
decisions and as a baseline, the requests themselves."""

from __future__ import annotations

import math
from datetime import date, datetime
from uuid import UUID

import asyncpg
from pydantic import BaseModel, ConfigDict

from waystation.persistence.models import Row
from waystation.persistence.queries import sql

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
    GROUPING() of (day, kind, gate); with its time-to-decide histogram (roll-ups) or its
    exact percentiles (requests)."""

    model_config = ConfigDict(extra="ignore")
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
    histogram: dict[int, int] = {}
    percentiles: list[float] | None = None

    @classmethod
    def from_record(cls, record: asyncpg.Record) -> FigureRow:
        return cls.model_validate({**dict(record), "histogram": _histogram(record)})


def _histogram(record: asyncpg.Record) -> dict[int, int]:
    """The h1..h49 columns of a roll-up row, as bucket -> count (none for the requests')."""
    if "h1" not in record:
        return {}
    return {i: n for i in range(1, BUCKETS + 1) if (n := record[f"h{i}"] or 0)}


def scopes_of(user: str, groups: list[UUID]) -> list[str]:
    """The roll-up scopes a person reads: their own runs' and their groups' (migration 075)."""
    return [f"owner:{user}", *(str(g) for g in groups)]


async def rollup_figures(conn: asyncpg.Connection, f: Filters,
                         scopes: list[str] | None) -> list[FigureRow]:
    """`scopes`: the caller's (`scopes_of`), None for the service role; row-level security
    applies either way."""
    records = await conn.fetch(sql("rollup_figures"), f.since.date(), f.kind, f.gate,
                               f.group_id, f.project_id, scopes)
    return [FigureRow.from_record(r) for r in records]


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
    return [GateHistogram(kind=r["kind"], gate=r["gate"], buckets=_histogram(r),
                          seconds=r["seconds"])
            for r in await conn.fetch(sql("time_to_decide_histograms"))]
