"""Runs: start, list, read, events, snapshots, cancel."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Path, Query, Response
from temporalio.service import RPCError, RPCStatusCode

from api.deps import (
    Conn,
    CurrentUser,
    IdempotencyKey,
    RegistryDep,
    SettingsDep,
    TemporalClient,
    VisibleRun,
    require_decider,
    require_run_starter,
)
from api.device_policy import check_device
from api.errors import ApiError
from api.items_policy import check_items_source
from api.routes.decisions import decision_views
from api.run_kinds import create_and_start
from api.schemas import (
    CancelAccepted,
    EventPage,
    EventView,
    RunCreated,
    RunPage,
    RunView,
    SnapshotHead,
    SnapshotList,
    SnapshotView,
    run_create_model,
)
from contracts.writes import DEFAULT_DECIDER_ROLES
from persistence import events as events_repo
from persistence import gates as gates_repo
from persistence import jobs as jobs_repo
from persistence import runs as runs_repo
from persistence import snapshots as snapshots_repo
from persistence.models import TERMINAL_RUN_STATUSES, RunStatus
from waystation.registry import Registry

router = APIRouter(prefix="/runs", tags=["runs"])



def create_router(registry: Registry) -> APIRouter:
    """`POST /runs`, whose body is the union of the registered kinds' inputs."""
    create = APIRouter(prefix="/runs", tags=["runs"])

    async def create_run(body: Any, user: CurrentUser, conn: Conn, temporal: TemporalClient,
                         settings: SettingsDep, response: Response,
                         idempotency_key: IdempotencyKey = None) -> RunCreated:
        """Start a run of any registered kind; the same Idempotency-Key again returns the
        same run."""
        check_items_source(body.input, settings)
        check_device(body.input, user, settings)
        if body.group_id is not None:
            await require_run_starter(conn, user, body.group_id)
        run, created = await create_and_start(
            conn, temporal, settings.temporal_task_queue, registry.kind(body.kind),
            owner=user.name, input=body.input, idempotency_key=idempotency_key,
            project_id=body.project_id or getattr(body.input, "project_id", None),
            group_id=body.group_id, gate_policies=body.gates)
        if not created:
            response.headers["Idempotent-Replayed"] = "true"
        return RunCreated.of(run, created)

    # The body's type is built at run time, so it is set here rather than written above.
    create_run.__annotations__["body"] = run_create_model(
        [registry.kind(name) for name in registry.names])
    create.post("", status_code=201, response_model=RunCreated)(create_run)
    return create


@router.get("", response_model=RunPage)
async def list_runs(
    user: CurrentUser, conn: Conn, registry: RegistryDep,
    kind: Annotated[str | None, Query(max_length=50)] = None,
    status: RunStatus | None = None,
    awaiting_human: bool | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    project_id: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    q: Annotated[str | None, Query(min_length=1, max_length=200, pattern=r"^[^\x00]+$",
                                   description="Text in the run's id, phase or input")] = None,
    group_id: Annotated[UUID | None, Query(description="Only this group's runs")] = None,
) -> RunPage:
    """The caller's runs, newest first, filtered, searched and paginated by cursor."""
    if kind is not None and kind not in registry.kinds:
        raise ApiError(422, "invalid_request",
                       f"kind: unknown run kind {kind!r}; one of {', '.join(registry.names)}")
    runs = await runs_repo.list_runs(conn, owner=user.owner_filter, kind=kind, status=status,
                                     awaiting_human=awaiting_human, limit=limit + 1,
                                     before=_decode_cursor(cursor) if cursor else None,
                                     project_id=project_id, search=q, group_id=group_id)
    page, more = runs[:limit], len(runs) > limit
    next_cursor = _encode_cursor(page[-1].created_at, page[-1].id) if more else None
    return RunPage(runs=[RunView.of(r) for r in page], next_cursor=next_cursor)


@router.get("/{run_id}", response_model=RunView)
async def get_run(run: VisibleRun, conn: Conn) -> RunView:
    """One run, with the decision it waits for, if any."""
    pending = None
    if run.hitl_state:
        pending = await gates_repo.latest_gate_for_checkpoint(conn, run.id, run.hitl_state)
    view = RunView.of(run)
    if pending is not None and pending.status == "pending":
        view.pending_decision = (await decision_views(conn, [pending]))[0]
    if run.kind == "batch":
        # A job's calls are counted on its items, not on run events.
        counts = await jobs_repo.unit_counts(conn, run.id)
        view.cost_usd = round(sum(c.cost_usd for c in counts), 9)
        view.input_tokens = sum(c.input_tokens for c in counts)
        view.output_tokens = sum(c.output_tokens for c in counts)
    return view


@router.get("/{run_id}/events", response_model=EventPage)
async def list_events(
    run: VisibleRun, conn: Conn,
    after_seq: Annotated[int, Query(ge=0, le=2**62)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> EventPage:
    """The run's events after `after_seq`, in seq order."""
    events = await events_repo.list_events(conn, run.id, after_seq=after_seq, limit=limit)
    return EventPage(run_id=run.id, events=[EventView.of(e) for e in events],
                     next_after_seq=events[-1].seq if events else after_seq)


@router.get("/{run_id}/snapshots/latest", response_model=SnapshotView)
async def latest_snapshot(run: VisibleRun, conn: Conn) -> SnapshotView:
    """The newest full-state snapshot of the run."""
    snapshot = await snapshots_repo.latest_snapshot(conn, run.id)
    if snapshot is None:
        raise ApiError(404, "snapshot_not_found", f"run {run.id} has no snapshot yet")
    return SnapshotView(**snapshot.model_dump())


@router.get("/{run_id}/snapshots", response_model=SnapshotList)
async def list_snapshots(run: VisibleRun, conn: Conn) -> SnapshotList:
    """The run's snapshot history, oldest first, without the states themselves."""
    heads = await snapshots_repo.list_snapshot_heads(conn, run.id)
    return SnapshotList(run_id=run.id, snapshots=[
        SnapshotHead(**h.model_dump(exclude={"run_id"})) for h in heads])


@router.get("/{run_id}/snapshots/{step_ordinal}", response_model=SnapshotView)
async def get_snapshot(run: VisibleRun, conn: Conn,
                       step_ordinal: Annotated[int, Path(ge=1, le=2**31 - 1)]) -> SnapshotView:
    """One snapshot of the run by its ordinal (1 is the first)."""
    snapshot = await snapshots_repo.get_snapshot(conn, run.id, step_ordinal)
    if snapshot is None:
        raise ApiError(404, "snapshot_not_found", f"run {run.id} has no snapshot {step_ordinal}")
    return SnapshotView(**snapshot.model_dump())


@router.post("/{run_id}/cancel", status_code=202, response_model=CancelAccepted)
async def cancel_run(run: VisibleRun, user: CurrentUser, conn: Conn,
                     temporal: TemporalClient) -> CancelAccepted:
    """Ask the run to stop; it records `canceled` when its workflow has wound down."""
    await require_decider(conn, user, run, list(DEFAULT_DECIDER_ROLES), "cancel the run")
    if run.status in TERMINAL_RUN_STATUSES:
        raise ApiError(409, "run_finished", f"run {run.id} is already {run.status}")
    try:
        await temporal.get_workflow_handle(run.workflow_id).cancel()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise ApiError(409, "run_finished", f"run {run.id} is no longer running") from error
        raise
    return CancelAccepted(run_id=run.id, status="canceling")


def _encode_cursor(created_at: datetime, run_id: UUID) -> str:
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{run_id}".encode()).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, UUID]:
    try:
        created_at, _, run_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(created_at), UUID(run_id)
    except (ValueError, binascii.Error, UnicodeDecodeError) as error:
        raise ApiError(422, "invalid_cursor", "cursor is not one this API returned") from error
