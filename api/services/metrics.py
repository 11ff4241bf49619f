"""The read model's figures for `GET /metrics`: counts over whole tables (and the kinds'
`metrics` hooks), read at most once every `WAYSTATION_METRICS_CACHE_SECONDS`, one query at a
time, so scrapes, however frequent or many, cost the database one aggregate per interval."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg

from waystation.api.metrics import DECISION_LATENCY_BOUNDS
from waystation.persistence.claims import SERVICE, claimed_connection
from waystation.persistence.db import UNAVAILABLE_ERRORS
from waystation.persistence.metrics import ReadModelFigures, read_figures

log = logging.getLogger(__name__)

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


async def _figures(pool: asyncpg.Pool,
                   kinds: Sequence[KindMetrics] = ()) -> ReadModelFigures | None:
    """The figures now; None (the scrape goes on without them) when the database does not
    answer in time."""
    try:
        # Counts over every run: the service's claims.
        async with (asyncio.timeout(READ_MODEL_TIMEOUT_SECONDS),
                    claimed_connection(pool, SERVICE) as conn):
            return await read_figures(conn, DECISION_LATENCY_BOUNDS, kinds)
    except (*UNAVAILABLE_ERRORS, TimeoutError, asyncpg.PostgresError) as error:
        log.warning("metrics without the read model: %s", error)
        return None
