"""Runs: start one (with the start-time checks), find one the caller may see, list them,
read one, cancel one, hide one (a soft delete) and restore it."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID

import asyncpg
from temporalio.client import Client

from waystation.api.auth import User
from waystation.api.errors import ApiError
from waystation.api.queries import RunFilter
from waystation.api.run_kinds import create_and_start
from waystation.api.schemas import CancelAccepted, RunCreated, RunPage, RunView, RunVisibility
from waystation.api.services.access import may_read, require_decider, require_run_starter
from waystation.api.services.decisions import decision_views
from waystation.api.services.workflow_updates import cancel_workflow
from waystation.contracts.kinds import RunKind, StartCheck, ViewContext
from waystation.contracts.statuses import RunStatus
from waystation.contracts.writes import DEFAULT_DECIDER_ROLES
from waystation.persistence import gates as gates_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence.models import TERMINAL_RUN_STATUSES, RunRow
from waystation.registry import Registry
from waystation.settings import Settings

# A run's state as an A2A task (api/protocols/a2a/mapping.py `task_state`), as `count_tasks`
# counts it.
TaskStateName = Literal["submitted", "working", "input_required", "completed", "failed",
                        "rejected", "canceled"]


async def start_run(conn: asyncpg.Connection, temporal: Client, user: User, request: Any, *,
                    registry: Registry, settings: Settings,
                    idempotency_key: str | None = None, run_id: UUID | None = None) -> RunCreated:
    """Start a run of any registered kind (`request` is one of `run_create_model`'s models);
    the same idempotency key again returns the same run, with `created` false, and so does a
    `name` the group has in progress for the kind (`reused` true; seed 003). `run_id` is the
    id a client chose (an AG-UI thread's); 404 when it is another run's."""
    if request.name is not None and request.group_id is None:
        # A name says which of a group's runs is meant; without a group it names nothing.
        raise ApiError(422, "invalid_request", "name: a named run belongs to a group; give "
                                               "group_id too",
                       details=[{"loc": ["body", "name"], "msg": "needs group_id",
                                 "type": "name_without_group"}])
    await check_start(conn, registry.kind(request.kind), request.input, user, settings)
    if request.group_id is not None:
        await require_run_starter(conn, user, request.group_id)
    run, outcome = await create_and_start(
        conn, temporal, settings.temporal_task_queue, registry.kind(request.kind),
        owner=user.name, input=request.input, idempotency_key=idempotency_key,
        project_id=request.project_id or getattr(request.input, "project_id", None),
        group_id=request.group_id, gate_policies=request.gates, name=request.name,
        reuse_in_progress=request.reuse_in_progress, run_id=run_id)
    return RunCreated.of(run, outcome)


async def check_start(conn: asyncpg.Connection, kind: RunKind, input: Any, user: User,
                      settings: Settings) -> None:
    """The start-time checks of a new run's input: its kind's (`ApiHooks.start_check`), which
    refuses with an `ApiError`."""
    if kind.api.start_check is not None:
        await kind.api.start_check(StartCheck(input=input, user=user, settings=settings,
                                              conn=conn))


async def visible_run(conn: asyncpg.Connection, user: User, run_id: UUID) -> RunRow:
    """The run, if the caller may see it; another user's run is indistinguishable from none.
    Every service that takes a `RunRow` expects one found here."""
    run = await runs_repo.get_run(conn, run_id)
    if run is None or not await may_read(conn, user, run):
        raise ApiError(404, "run_not_found", f"run {run_id} not found")
    return run


async def list_runs(conn: asyncpg.Connection, user: User, query: RunFilter, *,
                    registry: Registry) -> RunPage:
    """The caller's runs, newest first, filtered, searched and paginated by cursor."""
    if query.kind is not None and query.kind not in registry.kinds:
        raise ApiError(422, "invalid_request", f"kind: unknown run kind {query.kind!r}; one of "
                                               f"{', '.join(registry.names)}")
    runs = await runs_repo.list_runs(
        conn, owner=user.owner_filter, kind=query.kind, status=query.status,
        awaiting_human=query.awaiting_human, limit=query.limit + 1,
        before=_decode_cursor(query.cursor) if query.cursor else None,
        project_id=query.project_id, search=query.q, group_id=query.group_id,
        stale_after=query.stale_after, hidden=query.hidden,
        kind_filters=[(f.runs, value) for f in registry.run_filters()
                      if (value := getattr(query, f.name, None)) is not None])
    page, more = runs[:query.limit], len(runs) > query.limit
    next_cursor = _encode_cursor(page[-1].created_at, page[-1].id) if more else None
    return RunPage(runs=[RunView.of(r) for r in page], next_cursor=next_cursor)


async def list_tasks(conn: asyncpg.Connection, user: User, *, status: RunStatus | None,
                     limit: int, cursor: str | None) -> RunPage:
    """A page of the caller's runs as A2A tasks, most recently updated first (`ListTasks`
    sorts by status timestamp), and the next page's cursor (None: the last page)."""
    found = await runs_repo.list_tasks(conn, owner=user.owner_filter, status=status,
                                       limit=limit + 1,
                                       before=_decode_cursor(cursor) if cursor else None)
    page, more = found[:limit], len(found) > limit
    return RunPage(runs=[RunView.of(r) for r in page],
                   next_cursor=_encode_cursor(page[-1].updated_at, page[-1].id) if more else None)


async def count_tasks(conn: asyncpg.Connection, user: User, state: TaskStateName | None, *,
                      registry: Registry) -> int:
    """How many of the caller's runs are A2A tasks in `state` (any: None), counted by the
    database (`ListTasks`' totalSize)."""
    return await runs_repo.count_tasks(
        conn, owner=user.owner_filter, state=state,
        message_kinds=[k for k in registry.names if registry.messages(k) is not None])


async def run_view(conn: asyncpg.Connection, run: RunRow, *, registry: Registry) -> RunView:
    """One run, with the decision it waits for, if any, and what its kind adds
    (`ApiHooks.view`)."""
    pending = None
    if run.hitl_state:
        pending = await gates_repo.latest_gate_for_checkpoint(conn, run.id, run.hitl_state)
    view = RunView.of(run)
    if pending is not None and pending.status == "pending":
        view.pending_decision = (await decision_views(conn, [pending]))[0]
    kind = registry.kinds.get(run.kind)  # a kind no longer installed adds nothing
    if kind is not None and kind.kind.api.view is not None:
        view = view.model_copy(update=await kind.kind.api.view(ViewContext(conn=conn, run=run)))
    return view


async def cancel_run(conn: asyncpg.Connection, temporal: Client, user: User,
                     run: RunRow) -> CancelAccepted:
    """Ask the run to stop; it records `canceled` when its workflow has wound down."""
    await require_decider(conn, user, run, list(DEFAULT_DECIDER_ROLES), "cancel the run")
    if run.status in TERMINAL_RUN_STATUSES:
        raise ApiError(409, "run_finished", f"run {run.id} is already {run.status}")
    await cancel_workflow(temporal, run.workflow_id, ended=ApiError(
        409, "run_finished", f"run {run.id} is no longer running"))
    return CancelAccepted(run_id=run.id, status="canceling")


async def hide_run(conn: asyncpg.Connection, user: User, run_id: UUID, *,
                   settings: Settings) -> RunVisibility:
    """Hide a finished run from every read, list and stream; its owner may restore it within
    the grace period, after which the retention sweep deletes it. Only the owner (or the
    service role) may; hiding it again answers the same."""
    run = await _hideable_run(conn, user, run_id)
    if run.status not in TERMINAL_RUN_STATUSES:
        raise ApiError(409, "run_not_finished", f"run {run.id} is {run.status}; cancel it "
                                                "before hiding it")
    hidden_at = await runs_repo.hide_run(conn, run.id, user.name)
    assert hidden_at is not None, "a run found here was hidden by nobody or by a person"
    return _visibility(run.id, hidden_at, settings)


async def restore_run(conn: asyncpg.Connection, user: User, run_id: UUID, *,
                      settings: Settings) -> RunVisibility:
    """Show a run its owner hid again, within the grace period (409 `restore_period_over`
    after it); restoring a visible run answers that it is visible."""
    run = await _hideable_run(conn, user, run_id)
    if run.erased_at is None:
        return RunVisibility(run_id=run.id, hidden=False)
    grace = timedelta(hours=settings.erasure_grace_hours)
    if await runs_repo.restore_run(conn, run.id,
                                   within_seconds=grace.total_seconds()) is None:
        raise ApiError(409, "restore_period_over",
                       f"run {run.id} was hidden at {run.erased_at.isoformat()}, more than "
                       f"{settings.erasure_grace_hours:g} hours ago: it is being deleted")
    return RunVisibility(run_id=run.id, hidden=False)


async def _hideable_run(conn: asyncpg.Connection, user: User, run_id: UUID) -> RunRow:
    """The run, hidden or not, if the caller may hide and restore it: 404 for one it may not
    read (a hidden run only its owner and the service role read), 403 for one it reads as a
    member of the run's group."""
    run = await runs_repo.get_run_or_hidden(conn, run_id)
    owns = run is not None and (user.is_service or run.owner == user.name)
    if run is None or (not owns and (run.erased_at is not None
                                     or not await may_read(conn, user, run))):
        raise ApiError(404, "run_not_found", f"run {run_id} not found")
    if not owns:
        raise ApiError(403, "not_allowed", f"only the owner of run {run_id} may hide or "
                                           "restore it", details=[{"owner_only": True}])
    return run


def _visibility(run_id: UUID, hidden_at: datetime, settings: Settings) -> RunVisibility:
    return RunVisibility(run_id=run_id, hidden=True, hidden_at=hidden_at,
                         restore_until=hidden_at + timedelta(hours=settings.erasure_grace_hours))


def _encode_cursor(at: datetime, run_id: UUID) -> str:
    """A keyset cursor: the last row's order timestamp (created or, for tasks, updated)."""
    return base64.urlsafe_b64encode(f"{at.isoformat()}|{run_id}".encode()).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, UUID]:
    try:
        created_at, _, run_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(created_at), UUID(run_id)
    except (ValueError, binascii.Error, UnicodeDecodeError) as error:
        raise ApiError(422, "invalid_cursor", "cursor is not one this API returned") from error
