"""Prometheus scrape endpoint; no token (scrape it from inside the network, do not expose it)."""

from __future__ import annotations

import asyncio
import logging

import asyncpg
from fastapi import APIRouter, Request, Response

from api.metrics import CONTENT_TYPE_LATEST, DECISION_LATENCY_BOUNDS, ApiMetrics
from persistence.claims import SERVICE, claimed_connection
from persistence.db import UNAVAILABLE_ERRORS
from persistence.metrics import ReadModelFigures, read_figures

log = logging.getLogger(__name__)

router = APIRouter(tags=["operations"])

# A scrape must answer within Prometheus's timeout (10 s by default) even if Postgres hangs.
READ_MODEL_TIMEOUT_SECONDS = 5


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """The process's metrics and the read model's figures, in Prometheus text format."""
    state = request.app.state
    registry: ApiMetrics = state.metrics
    body = registry.render(await _figures(state.pool), state.event_hub)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


async def _figures(pool: asyncpg.Pool) -> ReadModelFigures | None:
    try:
        # Counts over every run: the service's claims.
        async with (asyncio.timeout(READ_MODEL_TIMEOUT_SECONDS),
                    claimed_connection(pool, SERVICE) as conn):
            return await read_figures(conn, DECISION_LATENCY_BOUNDS)
    except (*UNAVAILABLE_ERRORS, TimeoutError, asyncpg.PostgresError) as error:
        log.warning("metrics without the read model: %s", error)
        return None
