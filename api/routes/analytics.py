"""Decision analytics: `GET /analytics/decisions`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from waystation.api.analytics_schemas import AnalyticsQuery, DecisionAnalytics
from waystation.api.deps import Conn, CurrentUser
from waystation.api.services import analytics

router = APIRouter(prefix="/analytics", tags=["analytics"])


@router.get("/decisions", response_model=DecisionAnalytics)
async def decisions(conn: Conn, user: CurrentUser,
                    query: Annotated[AnalyticsQuery, Query()]) -> DecisionAnalytics:
    """Time to decide, outcomes, overruled recommendations, policy decisions and shadow
    agreement, in all, per gate and per day, over the runs the caller may read."""
    return await analytics.decisions(conn, user, query)
