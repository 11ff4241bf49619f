"""Decision analytics: how long people take to decide, how often they overrule the
recommendation, what policies decide and how well shadow policies agree, over what the caller
may read (row-level security on the roll-ups and on the requests, migrations 075 and 022)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from waystation.api.analytics_schemas import (
    AnalyticsQuery,
    Counts,
    DayFigures,
    DecisionAnalytics,
    GateFigures,
    ShadowFigures,
    TimeToDecide,
)
from waystation.api.auth import User
from waystation.persistence import analytics as repo
from waystation.persistence import groups as groups_repo
from waystation.persistence.analytics import FigureRow, Filters

DEFAULT_WINDOW = timedelta(days=30)


async def decisions(conn: asyncpg.Connection, user: User, query: AnalyticsQuery, *,
                    now: datetime | None = None) -> DecisionAnalytics:
    """The figures over the window; from the roll-ups, or from the requests themselves when
    they are a person's (the roll-ups do not keep who decided)."""
    now = now or datetime.now(UTC)
    since = query.since or now - (timedelta(days=query.window) if query.window
                                  else DEFAULT_WINDOW)
    filters = Filters(since=since, kind=query.kind, gate=_gate(query.checkpoint),
                      group_id=query.group_id, project_id=query.project_id,
                      person=query.person)
    if query.person is None:
        scopes = None if user.is_service else repo.scopes_of(
            user.name, list(await groups_repo.member_roles(conn, user.name)))
        rows = await repo.rollup_figures(conn, filters, scopes)
        times = {_key(r): repo.percentiles(r.histogram) for r in rows}
        source = "rollup"
    else:
        rows = await repo.raw_figures(conn, filters)
        none: list[float | None] = [None, None, None]
        times = {_key(r): list(r.percentiles) if r.percentiles else none for r in rows}
        source = "requests"
    pending, overdue = await repo.waiting(conn, filters)
    compared, agreed = await repo.shadow_agreement(conn, filters)
    # The grand total's grouping set answers one row even over nothing.
    total = next(r for r in rows if r.level == 7)
    return DecisionAnalytics(
        since=since, source=source, totals=_counts(total, times[None]),
        pending_now=pending, overdue_now=overdue,
        shadow=ShadowFigures(compared=compared, agreed=agreed,
                             rate=agreed / compared if compared else None),
        by_gate=sorted((GateFigures(kind=r.kind or "", gate=r.gate or "",
                                    **_counts(r, times[_key(r)]).model_dump())
                        for r in rows if r.level == 4), key=lambda g: (g.kind, g.gate)),
        per_day=sorted((DayFigures(day=r.day, **_counts(r, times[_key(r)]).model_dump())
                        for r in rows if r.level == 3 and r.day is not None),
                       key=lambda d: d.day))


def _gate(checkpoint: str | None) -> str | None:
    """The gate a checkpoint belongs to (the roll-ups' `decision_gate`)."""
    if checkpoint is None:
        return None
    head, _, tail = checkpoint.rpartition("_")
    return head if head and tail.isdigit() else checkpoint


def _key(row: FigureRow) -> Any:
    if row.level == 3:
        return row.day
    return (row.kind, row.gate) if row.level == 4 else None


def _counts(row: FigureRow, times: list[float | None]) -> Counts:
    p50, p90, p99 = times
    return Counts(decided=row.approved + row.rejected, approved=row.approved,
                  rejected=row.rejected, expired=row.expired, superseded=row.superseded,
                  policy_decisions=row.policy_decided, overruled=row.overruled,
                  overruled_rate=row.overruled / row.recommended if row.recommended else None,
                  reminders_before_decision=row.reminders,
                  time_to_decide=TimeToDecide(p50=p50, p90=p90, p99=p99))
