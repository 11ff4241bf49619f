"""A batch item's step outputs: all of them in order, or one step's, and the path it took."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Path

from api.deps import Conn, CurrentUser, may_read
from api.errors import ApiError
from api.job_schemas import ItemOutputs, ItemView, OutputView
from persistence import jobs as jobs_repo
from persistence import runs as runs_repo
from persistence.jobs import UnitRow

router = APIRouter(prefix="/items", tags=["jobs"])

StepName = Annotated[str, Path(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]


async def get_visible_item(item_id: UUID, user: CurrentUser, conn: Conn) -> UnitRow:
    """The item, if the caller may see its job's run; otherwise indistinguishable from none."""
    found = await jobs_repo.get_unit(conn, item_id)
    run = await runs_repo.get_run(conn, found[1]) if found else None
    if found is None or run is None or not await may_read(conn, user, run):
        raise ApiError(404, "item_not_found", f"item {item_id} not found")
    return found[0]


VisibleItem = Annotated[UnitRow, Depends(get_visible_item)]


@router.get("/{item_id}", response_model=ItemView)
async def get_item(item: VisibleItem) -> ItemView:
    """One item: payload, status, error, retries, cost and the path it took."""
    return ItemView.of(item)


@router.get("/{item_id}/outputs", response_model=ItemOutputs)
async def list_outputs(item: VisibleItem, conn: Conn) -> ItemOutputs:
    """Every step output of the item, in the order the steps ran."""
    outputs = await jobs_repo.list_outputs(conn, item.id)
    return ItemOutputs(item_id=item.id, path=item.path,
                       outputs=[OutputView.of(o) for o in outputs])


@router.get("/{item_id}/outputs/{step}", response_model=OutputView)
async def get_output(item: VisibleItem, step: StepName, conn: Conn) -> OutputView:
    """One step's output; 404 when the item has not run (or will not run) that step."""
    output = await jobs_repo.get_output(conn, item.id, step)
    if output is None:
        raise ApiError(404, "output_not_found", f"item {item.id} has no output for {step!r}")
    return OutputView.of(output)
