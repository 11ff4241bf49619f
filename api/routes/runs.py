"""Runs: start, list, read, events, snapshots, cancel, hide and restore."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Path, Query, Response

from waystation.api.deps import (
    Conn,
    CurrentUser,
    IdempotencyKey,
    RegistryDep,
    SettingsDep,
    TemporalClient,
    VisibleRun,
)
from waystation.api.queries import EventQuery, RunFilter, run_filter_model
from waystation.api.schemas import (
    CancelAccepted,
    EventPage,
    ForkRequest,
    RunCreated,
    RunPage,
    RunView,
    RunVisibility,
    SnapshotList,
    SnapshotView,
    run_create_model,
)
from waystation.api.services import events, fork, runs
from waystation.registry import Registry

router = APIRouter(prefix="/runs", tags=["runs"])


def create_router(registry: Registry) -> APIRouter:
    """`POST /runs`, whose body is the union of the registered kinds' inputs, and `GET /runs`,
    whose query has the kinds' own filters (`ApiHooks.run_filters`) besides the core's."""
    create = APIRouter(prefix="/runs", tags=["runs"])

    async def create_run(body: Any, user: CurrentUser, conn: Conn, temporal: TemporalClient,
                         settings: SettingsDep, response: Response,
                         idempotency_key: IdempotencyKey = None) -> RunCreated:
        """Start a run of any registered kind; the same Idempotency-Key again returns the
        same run, and a `name` its group has in progress returns that run (200)."""
        created = await runs.start_run(conn, temporal, user, body, registry=registry,
                                       settings=settings, idempotency_key=idempotency_key)
        if created.reused:
            response.status_code = 200
        elif not created.created:
            response.headers["Idempotent-Replayed"] = "true"
        return created

    # The body's type is built at run time, so it is set here rather than written above.
    create_run.__annotations__["body"] = run_create_model(
        [registry.kind(name) for name in registry.names])
    create.post("", status_code=201, response_model=RunCreated)(create_run)

    async def list_runs(user: CurrentUser, conn: Conn, query: Any) -> RunPage:
        """The caller's runs, newest first, filtered, searched and paginated by cursor."""
        return await runs.list_runs(conn, user, query, registry=registry)

    list_runs.__annotations__["query"] = Annotated[
        run_filter_model(registry.run_filters(), RunFilter), Query()]
    create.get("", response_model=RunPage)(list_runs)
    return create


@router.get("/{run_id}", response_model=RunView)
async def get_run(run: VisibleRun, conn: Conn, registry: RegistryDep) -> RunView:
    """One run, with the decision it waits for, if any."""
    return await runs.run_view(conn, run, registry=registry)


@router.get("/{run_id}/events", response_model=EventPage)
async def list_events(run: VisibleRun, conn: Conn,
                      query: Annotated[EventQuery, Query()]) -> EventPage:
    """The run's events after `after_seq`, in seq order."""
    return await events.list_events(conn, run, query)


@router.get("/{run_id}/snapshots/latest", response_model=SnapshotView)
async def latest_snapshot(run: VisibleRun, conn: Conn) -> SnapshotView:
    """The newest full-state snapshot of the run."""
    return await events.latest_snapshot(conn, run)


@router.get("/{run_id}/snapshots", response_model=SnapshotList)
async def list_snapshots(run: VisibleRun, conn: Conn) -> SnapshotList:
    """The run's snapshot history, oldest first, without the states themselves."""
    return await events.list_snapshots(conn, run)


@router.get("/{run_id}/snapshots/{step_ordinal}", response_model=SnapshotView)
async def get_snapshot(run: VisibleRun, conn: Conn,
                       step_ordinal: Annotated[int, Path(ge=1, le=2**31 - 1)]) -> SnapshotView:
    """One snapshot of the run by its ordinal (1 is the first)."""
    return await events.snapshot(conn, run, step_ordinal)


@router.post("/{run_id}/hide", response_model=RunVisibility)
async def hide_run(run_id: UUID, user: CurrentUser, conn: Conn,
                   settings: SettingsDep) -> RunVisibility:
    """Hide a finished run of yours from every read, list and stream, restorable until
    `restore_until`; the retention sweep deletes it after."""
    return await runs.hide_run(conn, user, run_id, settings=settings)


@router.post("/{run_id}/restore", response_model=RunVisibility)
async def restore_run(run_id: UUID, user: CurrentUser, conn: Conn,
                      settings: SettingsDep) -> RunVisibility:
    """Show a run you hid again, before its `restore_until`."""
    return await runs.restore_run(conn, user, run_id, settings=settings)


@router.post("/{run_id}/cancel", status_code=202, response_model=CancelAccepted)
async def cancel_run(run: VisibleRun, user: CurrentUser, conn: Conn,
                     temporal: TemporalClient) -> CancelAccepted:
    """Ask the run to stop; it records `canceled` when its workflow has wound down."""
    return await runs.cancel_run(conn, temporal, user, run)


@router.post("/{run_id}/fork", status_code=201, response_model=RunCreated)
async def fork_run(body: ForkRequest, run: VisibleRun, user: CurrentUser, conn: Conn,
                   temporal: TemporalClient, registry: RegistryDep, settings: SettingsDep,
                   response: Response, idempotency_key: IdempotencyKey = None) -> RunCreated:
    """Start a run of the same kind, yours, from one of this run's snapshots, optionally
    applying a different decision first to the gate it was taken at."""
    created = await fork.fork_run(conn, temporal, user, run, body, registry=registry,
                                  settings=settings, idempotency_key=idempotency_key)
    if not created.created:
        response.headers["Idempotent-Replayed"] = "true"
    return created
