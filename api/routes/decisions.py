"""Human decisions: the caller's inbox, a run's requests, deciding, and re-opening."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from waystation.api.deps import Conn, CurrentUser, IdempotencyKey, TemporalClient, VisibleRun
from waystation.api.queries import InboxQuery
from waystation.api.schemas import DecisionList, DecisionRequest, DecisionView, DelegationRequest
from waystation.api.services import decisions

router = APIRouter(tags=["decisions"])

Checkpoint = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[a-z0-9_]+$")]


@router.get("/decisions", response_model=DecisionList)
async def inbox(user: CurrentUser, conn: Conn,
                query: Annotated[InboxQuery, Query()]) -> DecisionList:
    """Decision requests the caller may decide (pending ones by default), newest first: on
    its own runs and on its groups' runs where its role is one the request names."""
    return await decisions.inbox(conn, user, query)


@router.get("/runs/{run_id}/decisions", response_model=DecisionList)
async def run_decisions(run: VisibleRun, conn: Conn) -> DecisionList:
    """Every decision request of a run, oldest first, with who decided what and when."""
    return await decisions.run_decisions(conn, run)


@router.post("/runs/{run_id}/decisions/{checkpoint_name}", response_model=DecisionView)
async def decide(run: VisibleRun, checkpoint_name: Checkpoint, body: DecisionRequest,
                 user: CurrentUser, conn: Conn, temporal: TemporalClient,
                 idempotency_key: IdempotencyKey = None) -> DecisionView:
    """Decide a pending request; 409 when it is not pending, 422 for an unknown option."""
    return await decisions.decide(conn, temporal, user, run, checkpoint_name, body,
                                  idempotency_key=idempotency_key)


@router.post("/runs/{run_id}/decisions/{checkpoint_name}/delegate", response_model=DecisionView)
async def delegate(run: VisibleRun, checkpoint_name: Checkpoint, body: DelegationRequest,
                   user: CurrentUser, conn: Conn, temporal: TemporalClient) -> DecisionView:
    """Hand your vote on a pending request to another member of the run's group (or its
    owner), who then casts it; 404 for someone who is neither, 409 once you have voted or
    handed it to someone else (the same delegation sent again answers 200)."""
    return await decisions.delegate(conn, temporal, user, run, checkpoint_name, body)


@router.post("/runs/{run_id}/decisions/{checkpoint_name}/reopen", response_model=DecisionView)
async def reopen(run: VisibleRun, checkpoint_name: Checkpoint, user: CurrentUser, conn: Conn,
                 temporal: TemporalClient) -> DecisionView:
    """Open a fresh request for an expired (or stale pending) checkpoint."""
    return await decisions.reopen(conn, temporal, user, run, checkpoint_name)
