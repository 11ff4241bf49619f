"""Erasure of one user's data, asked by the service role: the user's open runs cancelled,
every run of theirs hidden and their access ended now; the retention sweep deletes the runs
and their other personal rows after the grace period (docs/operations.md#erasure)."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
from temporalio.client import Client

from waystation.api.auth import User
from waystation.api.errors import ApiError
from waystation.api.schemas import ErasureAccepted, ErasureRequest
from waystation.api.services.workflow_updates import cancel_workflow
from waystation.persistence import erasure as erasure_repo
from waystation.persistence import retention as retention_repo
from waystation.settings import Settings


async def request_erasure(conn: asyncpg.Connection, temporal: Client, user: User,
                          body: ErasureRequest, *, settings: Settings) -> ErasureAccepted:
    """Cancel `body.user`'s open runs, hide all their runs and end their access; 403 for
    anyone but the service role."""
    if not user.is_service:
        raise ApiError(403, "forbidden", "erasure needs the service role")
    # Cancelled before they are hidden: if Temporal cannot be reached the answer is a 503 with
    # nothing hidden, and a resent request cancels again (harmless) and then hides them.
    for workflow_id in await retention_repo.open_user_runs(conn, body.user):
        await cancel_workflow(temporal, workflow_id, ended=None)
    async with conn.transaction():
        hidden = await retention_repo.erase_user_runs(conn, body.user)
        await erasure_repo.request_erasure(conn, body.user)
    return ErasureAccepted(
        user=body.user, runs_hidden=hidden,
        hard_delete_after=timedelta(hours=settings.erasure_grace_hours).total_seconds())
