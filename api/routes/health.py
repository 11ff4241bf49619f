"""Liveness and readiness."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api.errors import ApiError
from api.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
async def healthz(request: Request) -> JSONResponse:
    """200 when the database and Temporal both answer, 503 (with Retry-After) otherwise."""
    database = temporal = "ok"
    try:
        async with asyncio.timeout(3):
            await request.app.state.pool.fetchval("SELECT 1")
    except Exception:  # any failure to answer means unavailable
        database = "unavailable"
    try:
        client = await request.app.state.temporal.client()
        async with asyncio.timeout(3):
            await client.service_client.check_health()
    except (ApiError, Exception):
        temporal = "unavailable"
    health = Health(status="ok" if database == temporal == "ok" else "degraded",
                    database=database, temporal=temporal)
    ok = health.status == "ok"
    return JSONResponse(health.model_dump(), status_code=200 if ok else 503,
                        headers=None if ok else {"Retry-After": "5"})
