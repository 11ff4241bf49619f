"""A batch item's step outputs: all of them in order, or one step's, and the path it took."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends

from waystation.kinds.batch import service as jobs
from waystation.kinds.batch.repository import UnitRow
from waystation.kinds.batch.routes import StepName
from waystation.kinds.batch.schemas import ItemOutputs, ItemView, OutputView
from waystation.sdk.routes import Conn, CurrentUser

router = APIRouter(prefix="/items", tags=["jobs"])


async def get_visible_item(item_id: UUID, user: CurrentUser, conn: Conn) -> UnitRow:
    """The item, if the caller may see its job's run; otherwise indistinguishable from none."""
    return await jobs.visible_item(conn, user, item_id)


VisibleItem = Annotated[UnitRow, Depends(get_visible_item)]


@router.get("/{item_id}", response_model=ItemView)
async def get_item(item: VisibleItem) -> ItemView:
    """One item: payload, status, error, retries, cost and the path it took."""
    return ItemView.of(item)


@router.get("/{item_id}/outputs", response_model=ItemOutputs)
async def list_outputs(item: VisibleItem, conn: Conn) -> ItemOutputs:
    """Every step output of the item, in the order the steps ran."""
    return await jobs.item_outputs(conn, item)


@router.get("/{item_id}/outputs/{step}", response_model=OutputView)
async def get_output(item: VisibleItem, step: StepName, conn: Conn) -> OutputView:
    """One step's output; 404 when the item has not run (or will not run) that step."""
    return await jobs.item_output(conn, item, step)
