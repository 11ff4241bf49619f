"""The query and the answer of `GET /analytics/decisions`."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_WINDOW = timedelta(days=3660)


class AnalyticsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    since: datetime | None = Field(None, description="From this instant (the roll-ups count "
                                                     "whole UTC days: from its day).")
    window: int | None = Field(None, ge=1, le=3660, description="Or the last this many days "
                                                                "(30 when neither is given).")
    kind: str | None = Field(None, min_length=1, max_length=100, pattern=r"^[^\x00]+$")
    checkpoint: str | None = Field(None, min_length=1, max_length=200,
                                   pattern=r"^[a-z0-9_]+$",
                                   description="A gate (a trailing request number, as in "
                                               "`approve_book_vendor_2`, is dropped).")
    group_id: UUID | None = None
    person: str | None = Field(None, min_length=1, max_length=200, pattern=r"^[^\x00]+$",
                               description="Only what this person decided.")
    project_id: str | None = Field(None, min_length=1, max_length=200, pattern=r"^[^\x00]+$")

    @model_validator(mode="after")
    def _one_start(self) -> AnalyticsQuery:
        if self.since is not None and self.window is not None:
            raise ValueError("give since or window, not both")
        if self.since is not None and self.since.tzinfo is None:
            raise ValueError("since: give a time zone (e.g. 2026-11-01T00:00:00Z)")
        return self


class TimeToDecide(BaseModel):
    """Seconds from a request opening to its decision."""

    p50: float | None
    p90: float | None
    p99: float | None


class Counts(BaseModel):
    decided: int
    approved: int
    rejected: int
    expired: int
    superseded: int
    policy_decisions: int = Field(description="Decided by a policy (`policy:<name>@<v>`).")
    overruled: int = Field(description="Decided otherwise than the request recommended.")
    overruled_rate: float | None = Field(description="Of the decided requests that "
                                                     "recommended an option.")
    reminders_before_decision: int
    time_to_decide: TimeToDecide


class GateFigures(Counts):
    kind: str
    gate: str


class DayFigures(Counts):
    day: date


class ShadowFigures(BaseModel):
    compared: int
    agreed: int
    rate: float | None


class DecisionAnalytics(BaseModel):
    since: datetime
    source: Literal["rollup", "requests"] = Field(
        description="`rollup`: the daily roll-ups (percentiles within a factor √2); "
                    "`requests`: the requests themselves (a person's, exact).")
    totals: Counts
    pending_now: int
    overdue_now: int = Field(description="Pending past their expiry.")
    shadow: ShadowFigures
    by_gate: list[GateFigures]
    per_day: list[DayFigures]
