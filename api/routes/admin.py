"""Operator routes for the service role: erasure of one user's data."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter

from api.deps import Conn, CurrentUser, SettingsDep
from api.errors import ApiError
from api.schemas import ErasureAccepted, ErasureRequest
from persistence import retention as retention_repo

router = APIRouter(prefix="/admin", tags=["admin"])


@router.post("/erasure", status_code=202, response_model=ErasureAccepted)
async def request_erasure(body: ErasureRequest, user: CurrentUser, conn: Conn,
                          settings: SettingsDep) -> ErasureAccepted:
    """Hide every run of a user now; the retention sweep deletes them after the grace period."""
    if not user.is_service:
        raise ApiError(403, "forbidden", "erasure needs the service role")
    hidden = await retention_repo.erase_user_runs(conn, body.user)
    return ErasureAccepted(
        user=body.user, runs_hidden=hidden,
        hard_delete_after=timedelta(hours=settings.erasure_grace_hours).total_seconds())
