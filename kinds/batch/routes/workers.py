"""The workers view: each worker process polling Waystation's task queue, with its items."""

from __future__ import annotations

from fastapi import APIRouter

from waystation.kinds.batch import workers_service as workers
from waystation.kinds.batch.workers_schemas import WorkersView
from waystation.sdk.routes import Conn, CurrentUser, SettingsDep, TemporalClient

router = APIRouter(tags=["workers"])


@router.get("/workers", response_model=WorkersView)
async def list_workers(user: CurrentUser, conn: Conn, temporal: TemporalClient,
                       settings: SettingsDep) -> WorkersView:
    """Every worker polling the task queue (and any with items still running): status, last
    poll, items running now (listed when the caller may read their run), items completed and
    failed, and the execution time of those it completed. Pollers and totals are up to
    WAYSTATION_WORKERS_CACHE_SECONDS old: the console asks every 2 s, in every tab."""
    return await workers.list_workers(conn, temporal, user, settings.temporal_task_queue,
                                      max_age_seconds=settings.workers_cache_seconds)
