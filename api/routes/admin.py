"""Operator routes for the service role: erasure of one user's data."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter
from temporalio.service import RPCError, RPCStatusCode

from api.deps import Conn, CurrentUser, SettingsDep, TemporalClient
from api.errors import ApiError
from api.schemas import ErasureAccepted, ErasureRequest
from persistence import erasure as erasure_repo
from persistence import retention as retention_repo

router = APIRouter(prefix="/admin", tags=["admin"])


@router.post("/erasure", status_code=202, response_model=ErasureAccepted)
async def request_erasure(body: ErasureRequest, user: CurrentUser, conn: Conn,
                          settings: SettingsDep, temporal: TemporalClient) -> ErasureAccepted:
    """Cancel a user's open runs, hide all their runs and end their access now; the retention
    sweep deletes the runs and the user's other personal rows after the grace period."""
    if not user.is_service:
        raise ApiError(403, "forbidden", "erasure needs the service role")
    # Cancelled before they are hidden: if Temporal cannot be reached the answer is a 503 with
    # nothing hidden, and a resent request cancels again (harmless) and then hides them.
    for workflow_id in await retention_repo.open_user_runs(conn, body.user):
        try:
            await temporal.get_workflow_handle(workflow_id).cancel()
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
    async with conn.transaction():
        hidden = await retention_repo.erase_user_runs(conn, body.user)
        await erasure_repo.request_erasure(conn, body.user)
    return ErasureAccepted(
        user=body.user, runs_hidden=hidden,
        hard_delete_after=timedelta(hours=settings.erasure_grace_hours).total_seconds())
