"""Prometheus scrape endpoint.

Who may scrape: with `WAYSTATION_METRICS_TOKEN` set, whoever sends it as a bearer token (what a
Prometheus `authorization` block does); without it, anyone on a dev stack, and only the
service role elsewhere, since the figures describe every user's runs.

The read model's figures are counts over whole tables, read at most once per interval
(api/services/metrics.py).
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Header, Request, Response

from waystation.api.deps import SettingsDep, authenticate_request
from waystation.api.errors import ApiError
from waystation.api.metrics import CONTENT_TYPE_LATEST, ApiMetrics
from waystation.api.services.metrics import CachedFigures

router = APIRouter(tags=["operations"])


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, settings: SettingsDep,
                  authorization: Annotated[str | None, Header()] = None) -> Response:
    """The process's metrics and the read model's figures, in Prometheus text format."""
    if settings.metrics_token is not None:
        if not hmac.compare_digest(authorization or "", f"Bearer {settings.metrics_token}"):
            raise ApiError(401, "unauthorized", "authorization: the metrics token "
                                                "(WAYSTATION_METRICS_TOKEN) is required")
    elif settings.env != "dev" and not (await authenticate_request(request)).is_service:
        raise ApiError(403, "forbidden", "metrics need the service role or the metrics token")
    state = request.app.state
    registry: ApiMetrics = state.metrics
    cached: CachedFigures = state.metrics_figures
    body = registry.render(await cached.get(state.pool), state.event_hub)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
