"""Operator routes for the service role: erasure of one user's data."""

from __future__ import annotations

from fastapi import APIRouter

from waystation.api.deps import Conn, CurrentUser, SettingsDep, TemporalClient
from waystation.api.schemas import ErasureAccepted, ErasureRequest
from waystation.api.services import erasure

router = APIRouter(prefix="/admin", tags=["admin"])


@router.post("/erasure", status_code=202, response_model=ErasureAccepted)
async def request_erasure(body: ErasureRequest, user: CurrentUser, conn: Conn,
                          settings: SettingsDep, temporal: TemporalClient) -> ErasureAccepted:
    """Cancel a user's open runs, hide all their runs and end their access now; the retention
    sweep deletes the runs and the user's other personal rows after the grace period."""
    return await erasure.request_erasure(conn, temporal, user, body, settings=settings)
