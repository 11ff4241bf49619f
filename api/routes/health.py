"""Liveness and readiness, for orchestrators and load balancers.

`/livez` answers as long as the process serves: restarting an API because Temporal or the
database is down would not bring them back. `/readyz` says whether this API can do its work
now (both answer), so a load balancer sends traffic elsewhere meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from waystation.api.errors import RETRY_AFTER_SECONDS
from waystation.api.schemas import Health, Liveness

router = APIRouter(tags=["health"])

PROBE_TIMEOUT_SECONDS = 3
READINESS_RESPONSES: dict[int | str, dict[str, Any]] = {
    503: {"model": Health, "description": "Postgres or Temporal is down",
          "headers": {"Retry-After": {"schema": {"type": "integer"}}}}}


@router.get("/livez", response_model=Liveness)
async def livez() -> Liveness:
    """200 whenever the process serves requests."""
    return Liveness(status="ok")


@router.get("/readyz", response_model=Health, responses=READINESS_RESPONSES)
async def readyz(request: Request) -> JSONResponse:
    """200 when the database and Temporal both answer, 503 (with Retry-After) otherwise."""
    return await _readiness(request)


@router.get("/healthz", response_model=Health, responses=READINESS_RESPONSES)
async def healthz(request: Request) -> JSONResponse:
    """The same as `/readyz` (kept for existing probes)."""
    return await _readiness(request)


async def _readiness(request: Request) -> JSONResponse:
    database, temporal = await asyncio.gather(_database(request), _temporal(request))
    health = Health(status="ok" if database == temporal == "ok" else "degraded",
                    database=database, temporal=temporal)
    ok = health.status == "ok"
    return JSONResponse(health.model_dump(), status_code=200 if ok else 503,
                        headers=None if ok else {"Retry-After": RETRY_AFTER_SECONDS})


async def _database(request: Request) -> str:
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_SECONDS):
            await request.app.state.pool.fetchval("SELECT 1")
    except Exception:  # noqa: BLE001 - any failure to answer means unavailable
        return "unavailable"
    return "ok"


async def _temporal(request: Request) -> str:
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_SECONDS):
            client = await request.app.state.temporal.client()
            await client.service_client.check_health()
    except Exception:  # noqa: BLE001 - refused, timed out, or no client yet
        return "unavailable"
    return "ok"
