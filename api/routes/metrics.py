"""Prometheus scrape endpoint.

Who may scrape: with `WAYSTATION_METRICS_TOKEN` set, whoever sends it as a bearer token (what a
Prometheus `authorization` block does); without it, anyone on a dev stack, and only the
service role elsewhere, since the figures describe every user's runs.

The read model's figures are counts over whole tables: they are read at most once every
`WAYSTATION_METRICS_CACHE_SECONDS` (one query at a time), so scrapes, however frequent or
many, cost the database one aggregate per interval.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Header, Request, Response

from api.deps import SettingsDep, authenticate_request
from api.errors import ApiError
from api.metrics import CONTENT_TYPE_LATEST, DECISION_LATENCY_BOUNDS, ApiMetrics
from persistence.claims import SERVICE, claimed_connection
from persistence.db import UNAVAILABLE_ERRORS
from persistence.metrics import ReadModelFigures, read_figures

log = logging.getLogger(__name__)

router = APIRouter(tags=["operations"])

# A scrape must answer within Prometheus's timeout (10 s by default) even if Postgres hangs.
READ_MODEL_TIMEOUT_SECONDS = 5

KindMetrics = Callable[[Any], Awaitable[Sequence[Any]]]


class CachedFigures:
    """The last figures read, and when; one reader at a time refreshes them."""

    def __init__(self, max_age_seconds: float, kinds: Sequence[KindMetrics] = ()) -> None:
        self.max_age = max_age_seconds
        self.kinds = tuple(kinds)  # the registered kinds' `metrics` hooks
        self.figures: ReadModelFigures | None = None
        self.read_at = float("-inf")
        self.lock = asyncio.Lock()

    async def get(self, pool: asyncpg.Pool) -> ReadModelFigures | None:
        async with self.lock:
            if time.monotonic() - self.read_at >= self.max_age:
                self.figures, self.read_at = await _figures(pool, self.kinds), time.monotonic()
            return self.figures


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


async def _figures(pool: asyncpg.Pool,
                   kinds: Sequence[KindMetrics] = ()) -> ReadModelFigures | None:
    try:
        # Counts over every run: the service's claims.
        async with (asyncio.timeout(READ_MODEL_TIMEOUT_SECONDS),
                    claimed_connection(pool, SERVICE) as conn):
            return await read_figures(conn, DECISION_LATENCY_BOUNDS, kinds)
    except (*UNAVAILABLE_ERRORS, TimeoutError, asyncpg.PostgresError) as error:
        log.warning("metrics without the read model: %s", error)
        return None
